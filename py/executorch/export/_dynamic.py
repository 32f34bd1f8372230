"""Bounded dynamic shapes: the sizes torch.export left symbolic, as the program format records them.

Each symbol (a torch.export Dim) is a dimension of a method input, with its range. A symbolic size
becomes its upper bound, which memory is planned for, and a size expression: a small stack
program (docs/program_format.md) the runtime evaluates at each call from the inputs' sizes.
"""

from __future__ import annotations

from typing import Any

import sympy
import torch
from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod
from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

from executorch.export._errors import ExportError
from executorch.serialization.pte import (OP_ADD, OP_CONST, OP_FLOORDIV, OP_MAX, OP_MIN, OP_MOD, OP_MUL, OP_SYMBOL,
                                          SymbolicSize)

_FOLDS = {sympy.Add: OP_ADD, sympy.Mul: OP_MUL, sympy.Max: OP_MAX, sympy.Min: OP_MIN}


class SymbolicSizes:
    """The symbols of one method and the expressions its values use, in program-format form."""

    def __init__(self, ep: torch.export.ExportedProgram) -> None:
        self.ranges: dict[sympy.Symbol, ValueRanges] = dict(ep.range_constraints)
        self.symbols: list[SymbolicSize] = []
        self.expressions: list[list[int]] = []
        self._symbol_index: dict[sympy.Symbol, int] = {}
        self._expression_index: dict[tuple[int, ...], int] = {}

    def add_input(self, input_index: int, meta: torch.Tensor, where: str) -> None:
        """Input `input_index`'s dimensions that are symbols of their own become the method's symbols."""
        for d, s in enumerate(meta.shape):
            if isinstance(s, int) or _expr(s).is_number:
                continue
            expr = _expr(s)
            if not isinstance(expr, sympy.Symbol):
                raise ExportError(f"{where}: dim {d} has size {expr}; a dynamic input dimension must be a Dim of its "
                                  "own, not derived from another")
            if expr in self._symbol_index:
                continue  # another input's dimension of the same size: that input's symbol names it
            low, high = self._range(expr, where)
            self._symbol_index[expr] = len(self.symbols)
            self.symbols.append(SymbolicSize(input=input_index, dim=d, min=low, max=high))

    def size(self, s: Any, where: str) -> tuple[int, int]:
        """(bound, expression index) of an int or SymInt; the index is -1 for a fixed value."""
        if isinstance(s, int):
            return s, -1
        expr = _expr(s)
        if expr.is_number:
            return int(expr), -1
        bound = _finite(bound_sympy(expr, self.ranges).upper)
        if bound is None:
            raise ExportError(f"{where}: size {expr} has no finite bound; give every Dim a max")
        program = tuple(self._program(expr, where))
        if program not in self._expression_index:
            self._expression_index[program] = len(self.expressions)
            self.expressions.append(list(program))
        return bound, self._expression_index[program]

    def _range(self, symbol: sympy.Symbol, where: str) -> tuple[int, int]:
        r = self.ranges.get(symbol)
        high = _finite(r.upper) if r is not None else None
        if r is None or high is None:
            raise ExportError(f"{where}: dynamic size {symbol} has no maximum; give its Dim a max (memory is planned "
                              "for it)")
        return max(_finite(r.lower) or 0, 0), high

    def _program(self, expr: sympy.Expr, where: str) -> list[int]:
        if expr.is_Integer:
            return [OP_CONST, int(expr)]
        if isinstance(expr, sympy.Symbol):
            if expr not in self._symbol_index:
                raise ExportError(f"{where}: size {expr} follows no input's size (a size that depends on data is not "
                                  "supported)")
            return [OP_SYMBOL, self._symbol_index[expr]]
        for kind, op in _FOLDS.items():
            if isinstance(expr, kind):
                args = list(expr.args)
                out = self._program(args[0], where)
                for a in args[1:]:
                    out += self._program(a, where) + [op]
                return out
        if isinstance(expr, FloorDiv):
            return self._program(expr.args[0], where) + self._program(expr.args[1], where) + [OP_FLOORDIV]
        if isinstance(expr, (Mod, PythonMod, sympy.Mod)):
            return self._program(expr.args[0], where) + self._program(expr.args[1], where) + [OP_MOD]
        if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
            base = self._program(expr.base, where)
            return base + (base + [OP_MUL]) * (int(expr.exp) - 1)
        raise ExportError(f"{where}: size {expr} uses {type(expr).__name__}, which sizes computed at run time lack")


def _finite(v: Any) -> int | None:
    """A range end as an int; None for an infinity (sympy's or torch's int_oo)."""
    try:
        return int(v) if bool(v.is_finite) and bool(v.is_number) else None
    except (TypeError, ValueError, OverflowError, AttributeError):
        return None


def _expr(s: Any) -> sympy.Expr:
    return s.node.expr if isinstance(s, torch.SymInt) else sympy.Integer(int(s))
