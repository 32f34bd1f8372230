"""Errors the exporter raises."""

from __future__ import annotations


class ExportError(Exception):
    """The module cannot be exported (dynamic shapes, unsupported values, ...)."""


class UnsupportedOperatorError(ExportError):
    """The graph needs operators that no registered kernel implements; all of them are named."""

    def __init__(self, missing: dict[str, list[str]], supported: list[str]) -> None:
        # operator -> graph nodes that call it, in graph order
        self.missing = missing
        self.operator = next(iter(missing))
        self.node = missing[self.operator][0]
        listed = "; ".join(f"{op} (graph node{'s' if len(nodes) > 1 else ''} {', '.join(repr(n) for n in nodes[:3])}"
                           f"{', ...' if len(nodes) > 3 else ''})" for op, nodes in missing.items())
        super().__init__(
            f"{len(missing)} operator{'s are' if len(missing) > 1 else ' is'} not supported by the executorch kernels: "
            f"{listed}. {len(supported)} operators are supported (executorch.export.supported_operators())"
        )
