"""Lowers an exported PyTorch graph to a program: values, kernel calls, constants, planned memory."""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import operator
import re
import sys
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import torch

from executorch.export import _dtypes
from executorch.export._dynamic import SymbolicSizes
from executorch.export._errors import ExportError, UnsupportedOperatorError
from executorch.export._partition import CUDA, XNNPACK, place, roots
from executorch.export._planner import Allocation
from executorch.export import _fusions
from executorch.export._quantize import quantize_linear_int4, quantize_linear_int8, quantize_linear_int8_weight_only
from executorch.export._moe import add_moe_decompositions
from executorch.export._recurrent import add_recurrent_decompositions
from executorch.export._rewrite import only_first_output_read, simplify
from executorch.serialization.pte import (BoolListValue, BoolValue, DoubleListValue, DoubleValue, IntListValue, IntValue,
                                         KernelCall, MutableBuffer, NullValue, Plan, ProgramSpec, StringValue,
                                         TensorListValue, TensorSpec, TensorValue, Value, serialize)

DTYPE_CODES = {
    torch.uint8: _dtypes.UINT8,
    torch.int8: _dtypes.INT8,
    torch.int16: _dtypes.INT16,
    torch.int32: _dtypes.INT32,
    torch.int64: _dtypes.INT64,
    torch.float16: _dtypes.FLOAT16,
    torch.float32: _dtypes.FLOAT32,
    torch.float64: _dtypes.FLOAT64,
    torch.bool: _dtypes.BOOL,
    torch.bfloat16: _dtypes.BFLOAT16,
}

# Ops that only restate their input in a functional graph.
_IDENTITY_OPS = {
    torch.ops.aten.alias.default,
    torch.ops.aten.detach.default,
    torch.ops.aten.lift_fresh_copy.default,
}
# Ops whose result depends only on the (static) shape of their tensor argument: folded.
_SHAPE_ONLY_OPS = {
    torch.ops.aten.full_like.default,
    torch.ops.aten.zeros_like.default,
    torch.ops.aten.ones_like.default,
    torch.ops.aten.empty_like.default,
}
# Kernels that move or select elements without arithmetic: any dtype, float16 and bfloat16 included.
# In float16/bfloat16 programs for the CPU every other operator computes in float32 (_Lowering.widen).
_DTYPE_AGNOSTIC = {
    getattr(torch.ops.aten, name).default if "." not in name else
    getattr(getattr(torch.ops.aten, name.split(".")[0]), name.split(".")[1])
    for name in (
        "view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "squeeze.dim", "squeeze.dims", "alias", "permute",
        "transpose.int", "expand", "slice.Tensor", "select.int", "cat", "embedding", "split_with_sizes", "clone",
        "_to_copy", "as_strided", "flip", "roll", "index.Tensor", "index_select", "gather", "slice_scatter",
        "select_scatter", "index_put", "scatter.src", "pixel_shuffle", "pixel_unshuffle", "repeat", "copy",
        "constant_pad_nd", "where.self",
    )
}
# Ops with no effect on values.
_SKIPPED_OPS = {
    torch.ops.aten._assert_tensor_metadata.default,
    torch.ops.aten._assert_scalar.default,
}


def supported_operators() -> list[str]:
    """Operator names ("aten::add.Tensor") with a kernel in the installed runtime."""
    from executorch import _C

    return list(_C.registered_kernels())


@dataclass
class _Const:
    tensor: torch.Tensor


@dataclass(frozen=True)
class _Size:
    """An integer computed from sizes (aten.sym_size, and arithmetic on such): a size expression."""

    value: Any  # int or torch.SymInt


# The result of an operator with no kernel: lowering goes on, to name every such operator at once.
_MISSING = object()

# Ops that write their result into a copy of their first argument: where that argument is program
# state read by nothing else and the result is the state's new value, they write the state in place.
_STATE_UPDATES = {
    torch.ops.aten.index_put.default,
    torch.ops.aten.slice_scatter.default,
    torch.ops.aten.copy.default,
}


def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().contiguous().cpu()
    return t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()


class _Shared:
    """What the methods of one program share: the constant segment (segment 0), each tensor stored
    once however many methods read it, and the mutable buffers (program state) by name."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []  # 16-byte aligned
        self.size = 0
        self.offsets: dict[tuple, int] = {}
        self.kept: list[torch.Tensor] = []  # every stored tensor, so that no other takes its address
        self.mutable: list[MutableBuffer] = []
        self.mutable_specs: dict[str, tuple[torch.dtype, list[int]]] = {}

    def store(self, data: bytes) -> int:
        offset = (self.size + 15) // 16 * 16
        if offset > self.size:
            self.chunks.append(b"\0" * (offset - self.size))
        self.chunks.append(data)
        self.size = offset + len(data)
        return offset

    def constant(self, t: torch.Tensor) -> int:
        """The offset of `t`'s bytes in the segment."""
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if key not in self.offsets:
            self.offsets[key] = self.store(_tensor_bytes(t))
            self.kept.append(t)
        return self.offsets[key]

    def mutable_buffer(self, name: str, t: torch.Tensor) -> int:
        """The index of mutable buffer `name`, starting as `t` (zeros are stored as none)."""
        spec = (t.dtype, list(t.shape))
        for i, b in enumerate(self.mutable):
            if b.name == name:
                if self.mutable_specs[name] != spec:
                    raise ExportError(f"buffer {name}: {spec} in one method, {self.mutable_specs[name]} in another")
                return i
        if t.dtype not in DTYPE_CODES:
            raise ExportError(f"buffer {name}: dtype {t.dtype} is not supported")
        initial = bool(t.numel()) and bool(t.detach().ne(0).any())
        self.mutable.append(MutableBuffer(name=name, size=t.element_size() * t.numel(),
                                          data_segment=0 if initial else -1,
                                          data_offset=self.store(_tensor_bytes(t)) if initial else 0))
        self.mutable_specs[name] = spec
        return len(self.mutable) - 1

    def data(self) -> bytes:
        return b"".join(self.chunks)


class _Lowering:
    def __init__(self, name: str, widen: torch.dtype | None, shared: _Shared, sizes: SymbolicSizes) -> None:
        self.plan = Plan(name=name)
        self.shared = shared
        self.sizes = sizes  # the method's symbolic sizes (bounded dynamic shapes)
        # float16/bfloat16 programs for the CPU: operators outside _DTYPE_AGNOSTIC compute in float32
        self.widen = widen
        self.missing: dict[str, list[str]] = {}  # operator -> nodes, for one error naming them all
        self.widened_constants: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.derived: list[torch.Tensor] = []  # constants made at export (folded weights): kept so each id stays its own
        self.constant_values: dict[int, int] = {}  # id(tensor) -> value index
        self.state_values: dict[str, int] = {}  # mutable buffer name -> value index
        self.allocations: dict[int, Allocation] = {}  # value index -> lifetime (planned tensors)
        self.op_index: dict[tuple[str, str], int] = {}

    # Values -------------------------------------------------------------------------------------

    def add_value(self, value: Value) -> int:
        self.plan.values.append(value)
        return len(self.plan.values) - 1

    def planned_tensor(self, meta: torch.Tensor, first_use: int, where: str) -> int:
        if meta.dtype not in DTYPE_CODES:
            raise ExportError(f"{where}: dtype {meta.dtype} is not supported")
        sizes, dynamic = zip(*(self.sizes.size(s, where) for s in meta.shape)) if meta.dim() else ((), ())
        return self.planned(DTYPE_CODES[meta.dtype], list(sizes), list(dynamic), first_use)

    def planned(self, dtype: int, sizes: list[int], dynamic: list[int], first_use: int) -> int:
        """A tensor in planned memory, of `sizes` (the bounds where `dynamic` names expressions)."""
        spec = TensorSpec(dtype=dtype, sizes=sizes, mem_id=0, dynamic_sizes=dynamic if any(e >= 0 for e in dynamic)
                          else [])
        index = self.add_value(TensorValue(spec))
        nbytes = _dtypes.nbytes(dtype, sizes)
        self.allocations[index] = Allocation(size=nbytes, first_use=first_use, last_use=first_use)
        return index

    def constant_tensor(self, t: torch.Tensor) -> int:
        key = id(t)
        if key in self.constant_values:
            return self.constant_values[key]
        if t.dtype not in DTYPE_CODES:
            raise ExportError(f"constant of dtype {t.dtype} is not supported")
        offset = self.shared.constant(t)
        index = self.add_value(
            TensorValue(TensorSpec(dtype=DTYPE_CODES[t.dtype], sizes=list(t.shape), data_segment=0, data_offset=offset))
        )
        self.constant_values[key] = index
        return index

    def state_tensor(self, name: str, t: torch.Tensor) -> int:
        """The value of mutable buffer `name` (the whole buffer), whose initial contents are `t`."""
        if name not in self.state_values:
            buffer = self.shared.mutable_buffer(name, t)
            self.state_values[name] = self.add_value(
                TensorValue(TensorSpec(dtype=DTYPE_CODES[t.dtype], sizes=list(t.shape), mutable_buffer=buffer)))
        return self.state_values[name]

    def is_tensor_of(self, index: int, dtype: torch.dtype) -> bool:
        v = self.plan.values[index]
        return isinstance(v, TensorValue) and v.payload.dtype == DTYPE_CODES[dtype]

    def convert(self, index: int, dtype: torch.dtype, where: str) -> int:
        """A planned copy of tensor value `index` in `dtype`, made by the next instruction."""
        spec = self.plan.tensor(index)
        out = self.planned(DTYPE_CODES[dtype], list(spec.sizes), list(spec.dynamic_sizes) or [-1] * len(spec.sizes),
                           len(self.plan.instructions))
        self.copy_into(index, out)
        return out

    def full_like(self, source: Any, fill: Any, meta: torch.Tensor, env: dict, where: str) -> int:
        """A planned tensor of meta's (dynamic) shape and dtype, filled with `fill` by the next
        instruction (aten::full_like of `source`, a tensor of that shape)."""
        op_index, _ = self.operator(torch.ops.aten.full_like.default)
        step = len(self.plan.instructions)
        args = [self.argument(source, env, step, where), self.argument(fill, env, step, where),
                self.add_value(IntValue(DTYPE_CODES[meta.dtype]))] + [self.add_value(NullValue()) for _ in range(4)]
        out = self.planned_tensor(meta, step, where)
        self.plan.instructions.append(KernelCall(op_index, args + [out], 1))
        return out

    def copy_into(self, src: int, dst: int) -> None:
        """Appends dst = src converted to dst's dtype (aten::_to_copy)."""
        op_index, _ = self.operator(torch.ops.aten._to_copy.default)
        self.use(src, len(self.plan.instructions))
        self.use(dst, len(self.plan.instructions))
        args = [src] + [self.add_value(NullValue()) for _ in range(6)]
        self.plan.instructions.append(KernelCall(op_index, args + [dst], 1))

    def widened(self, value: Any, env: dict) -> Any:
        """`value` with its float16/bfloat16 constants (graph constants, tensors) as float32 tensors."""
        if isinstance(value, (list, tuple)):
            return type(value)(self.widened(v, env) for v in value)
        t = env[value].tensor if isinstance(value, torch.fx.Node) and isinstance(env.get(value), _Const) else value
        if not isinstance(t, torch.Tensor) or t.dtype != self.widen:
            return value
        if id(t) not in self.widened_constants:
            self.widened_constants[id(t)] = (t, t.float())  # the original is kept so its id stays its own
        return self.widened_constants[id(t)][1]

    def use(self, index: int, step: int) -> None:
        if index in self.allocations:
            a = self.allocations[index]
            a.last_use = max(a.last_use, step)
        elif isinstance(self.plan.values[index], TensorListValue):
            for item in self.plan.tensors_in(index):
                self.use(item, step)

    # Arguments ----------------------------------------------------------------------------------

    def argument(self, value: Any, env: dict, step: int, where: str) -> int:
        if isinstance(value, torch.fx.Node):
            ref = env[value]
            if isinstance(ref, _Const):
                return self.constant_tensor(ref.tensor)
            if isinstance(ref, int):
                self.use(ref, step)
                return ref
            if isinstance(ref, _Size):
                return self.argument(ref.value, env, step, where)
            if ref is _MISSING:
                return self.add_value(NullValue())
            raise ExportError(f"{where}: argument {value.name} has no single value")
        if isinstance(value, torch.Tensor):
            return self.constant_tensor(value)
        if isinstance(value, torch.SymInt):  # a size computed at run time (or a fixed one)
            bound, expression = self.sizes.size(value, where)
            return self.add_value(IntValue(bound, expression=expression))
        if value is None:
            return self.add_value(NullValue())
        if isinstance(value, bool):
            return self.add_value(BoolValue(value))
        if isinstance(value, int):
            return self.add_value(IntValue(value))
        if isinstance(value, float):
            return self.add_value(DoubleValue(value))
        if isinstance(value, str):
            return self.add_value(StringValue(value))
        if isinstance(value, torch.dtype):
            return self.add_value(IntValue(DTYPE_CODES[value]))
        if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
            return self.add_value(NullValue())
        if isinstance(value, (list, tuple)):
            items = list(value)
            symbolic = [isinstance(v, torch.SymInt) or (isinstance(v, torch.fx.Node) and isinstance(env.get(v), _Size))
                        for v in items]
            if any(symbolic) and all(s or (isinstance(v, int) and not isinstance(v, bool))
                                     for s, v in zip(symbolic, items)):  # sizes, some of them computed at run time
                sizes = [self.sizes.size(env[v].value if isinstance(v, torch.fx.Node) else v, where) for v in items]
                expressions = [e for _, e in sizes]
                return self.add_value(IntListValue([b for b, _ in sizes],
                                                   expressions=expressions if any(e >= 0 for e in expressions) else []))
            if any(isinstance(v, (torch.fx.Node, torch.Tensor)) for v in items):
                return self.add_value(TensorListValue([self.argument(v, env, step, where) for v in items]))
            if all(isinstance(v, bool) for v in items) and items:
                return self.add_value(BoolListValue(items))
            if all(isinstance(v, int) and not isinstance(v, bool) for v in items):
                return self.add_value(IntListValue(items))
            if all(isinstance(v, (int, float)) for v in items):
                return self.add_value(DoubleListValue([float(v) for v in items]))
        raise ExportError(f"{where}: argument {value!r} of type {type(value).__name__} is not supported")

    def operator(self, target: torch._ops.OpOverload) -> tuple[int, str]:
        name = target._schema.name
        overload = "" if target._overloadname == "default" else target._overloadname
        full = f"{name}.{overload}" if overload else name
        key = (name, overload)
        if key not in self.op_index:
            self.op_index[key] = len(self.plan.operators)
            self.plan.operators.append(key)
        return self.op_index[key], full


# Operators with a kernel of their own (CPU and CUDA) that torch's decompositions would otherwise
# lower to matrix products and softmax, or to several elementwise operators.
_KEPT_WHOLE = (
    torch.ops.aten.scaled_dot_product_attention.default,
    # One kernel (or a convolution's epilogue) instead of sigmoid and mul, and in half precision
    # two conversions to float32 and back around them.
    torch.ops.aten.silu.default,
    torch.ops.aten.hardswish.default,
    torch.ops.aten.hardsigmoid.default,
    # A tensor of the input's shape (folded, or filled at run time where the shape is dynamic); its
    # decomposition, empty_permuted, takes the shape as a list of sizes.
    torch.ops.aten.empty_like.default,
)


def _clamp_tensor(x: torch.Tensor, min: torch.Tensor | None = None, max: torch.Tensor | None = None) -> torch.Tensor:
    """clamp with tensor bounds (T5 bounds its half-precision activations so) as maximum and
    minimum, which broadcast, promote and propagate NaN as clamp does."""
    if min is not None:
        x = torch.maximum(x, min)
    return x if max is None else torch.minimum(x, max)


def _decompositions(recurrent_layers: bool) -> Any:
    """torch's default decomposition table, less the operators in _KEPT_WHOLE, plus ours (nn.LSTM
    and nn.GRU as one operator per layer where `recurrent_layers`)."""
    table = torch.export.default_decompositions()
    for op in _KEPT_WHOLE:
        if op in table:
            del table[op]
    table[torch.ops.aten.clamp.Tensor] = _clamp_tensor
    add_recurrent_decompositions(table, recurrent_layers)
    add_moe_decompositions(table)
    return table


# Input ranks the CPU kernels take, where an operator's schema allows more (checked at export, so a
# configuration they cannot run is named here rather than when the program runs).
_KERNEL_RANKS = {
    torch.ops.aten.convolution.default: ((3, 4, 5), "1-D, 2-D or 3-D convolution"),
    torch.ops.aten.max_pool2d_with_indices.default: ((3, 4), "2-D max pooling of a 3-D or 4-D input"),
    torch.ops.aten.max_pool3d_with_indices.default: ((4, 5), "3-D max pooling of a 4-D or 5-D input"),
    torch.ops.aten.avg_pool2d.default: ((3, 4), "2-D average pooling of a 3-D or 4-D input"),
    torch.ops.aten.avg_pool3d.default: ((4, 5), "3-D average pooling of a 4-D or 5-D input"),
    torch.ops.aten._adaptive_avg_pool2d.default: ((3, 4), "2-D adaptive pooling of a 3-D or 4-D input"),
    torch.ops.aten._adaptive_avg_pool3d.default: ((4, 5), "3-D adaptive pooling of a 4-D or 5-D input"),
    torch.ops.aten.adaptive_max_pool2d.default: ((3, 4), "2-D adaptive pooling of a 3-D or 4-D input"),
    torch.ops.aten.adaptive_max_pool3d.default: ((4, 5), "3-D adaptive pooling of a 4-D or 5-D input"),
    torch.ops.aten.upsample_nearest2d.vec: ((4,), "2-D resampling of a batched (4-D) input"),
    torch.ops.aten.upsample_bilinear2d.vec: ((4,), "2-D resampling of a batched (4-D) input"),
    torch.ops.aten.upsample_bicubic2d.vec: ((4,), "2-D resampling of a batched (4-D) input"),
}


def _check_kernel_limits(node: torch.fx.Node, name: str) -> None:
    limit = _KERNEL_RANKS.get(node.target)
    first = node.args[0].meta.get("val") if node.args and isinstance(node.args[0], torch.fx.Node) else None
    if limit and isinstance(first, torch.Tensor) and first.dim() not in limit[0]:
        raise ExportError(f"node {node.name} ({name}): a {first.dim()}-D input; the CPU kernel runs {limit[1]}")


# Integers from sizes: a tensor's size, and Python arithmetic on such (torch.export records it as
# calls of operator.* and torch.sym_*).
_SIZE_OPS = {torch.ops.aten.sym_size.int, torch.ops.aten.sym_numel.default}


def _is_size(node: torch.fx.Node) -> bool:
    return isinstance(node.meta.get("val"), (int, torch.SymInt)) and not isinstance(node.meta["val"], bool) and (
        node.target in _SIZE_OPS or not isinstance(node.target, torch._ops.OpOverload))


def _schema_args(node: torch.fx.Node) -> list[Any]:
    """Every argument of the call in schema order, defaults filled in."""
    out = []
    for i, arg in enumerate(node.target._schema.arguments):
        if not arg.kwarg_only and i < len(node.args):
            out.append(node.args[i])
        elif arg.name in node.kwargs:
            out.append(node.kwargs[arg.name])
        elif arg.has_default_value():
            out.append(arg.default_value)
        else:
            raise ExportError(f"node {node.name}: missing argument {arg.name}")
    return out


def _is_constant(value: Any, env: dict) -> bool:
    if isinstance(value, torch.fx.Node):
        return isinstance(env.get(value), _Const)
    if isinstance(value, (list, tuple)):
        return all(_is_constant(v, env) for v in value)
    return True


def _materialize(value: Any, env: dict) -> Any:
    if isinstance(value, torch.fx.Node):
        return env[value].tensor
    if isinstance(value, (list, tuple)):
        return type(value)(_materialize(v, env) for v in value)
    return value


_BATCH_NORM = torch.ops.aten._native_batch_norm_legit_no_training.default


def _foldable_batch_norms(ep: torch.export.ExportedProgram, constant: set[str]) -> dict[torch.fx.Node, torch.fx.Node]:
    """convolution -> the inference batch norm that alone reads it, where both take only constant
    parameters (graph inputs in `constant`) and only the norm's first output is used: the norm is
    folded into the convolution's weight and bias, one kernel instead of two."""
    def is_constant(a: Any) -> bool:
        return a is None or (isinstance(a, torch.fx.Node) and a.op == "placeholder" and a.name in constant)

    folds = {}
    for bn in ep.graph.nodes:
        if bn.target is not _BATCH_NORM or not isinstance(bn.args[0], torch.fx.Node):
            continue
        conv = bn.args[0]
        if conv.target is not torch.ops.aten.convolution.default or len(conv.users) != 1:
            continue
        conv_args = _schema_args(conv)
        if conv_args[6] or not all(is_constant(a) for a in conv_args[1:3]) or not all(is_constant(a) for a in _schema_args(bn)[1:5]):
            continue  # transposed, or weights computed by the graph
        if only_first_output_read(bn):
            folds[conv] = bn
    return folds


def _fold_batch_norm(conv_args: list[Any], bn: torch.fx.Node, env: dict) -> list[Any]:
    """The convolution's arguments with the batch norm `bn` folded into its weight and bias
    (computed in float32, stored in the weight's dtype)."""
    def value(a: Any) -> torch.Tensor | None:
        return None if a is None else env[a].tensor

    weight, bias = value(conv_args[1]), value(conv_args[2])
    bn_args = _schema_args(bn)
    gamma, beta, mean, var = (value(a) for a in bn_args[1:5])
    assert weight is not None and mean is not None and var is not None, "_foldable_batch_norms checked these"

    eps = float(bn_args[6])
    channels = weight.shape[0]
    scale = (gamma.float() if gamma is not None else torch.ones(channels)) / torch.sqrt(var.float() + eps)
    shift = (beta.float() if beta is not None else torch.zeros(channels)) - mean.float() * scale
    if bias is not None:
        shift = shift + bias.float() * scale
    folded_weight = (weight.float() * scale.reshape([-1] + [1] * (weight.dim() - 1))).to(weight.dtype)
    return [conv_args[0], folded_weight, shift.to(weight.dtype), *conv_args[3:]]


def _state_updates(ep: torch.export.ExportedProgram) -> tuple[dict[str, str], dict[torch.fx.Node, str]]:
    """The placeholders of the buffers the graph mutates (name -> buffer), and the nodes computing
    each such buffer's new value (node -> buffer)."""
    sig = ep.graph_signature
    kinds = torch.export.graph_signature.OutputKind
    mutated = {spec.target for spec in sig.output_specs if spec.kind == kinds.BUFFER_MUTATION}
    placeholders = {n: b for n, b in sig.inputs_to_buffers.items() if b in mutated}
    _, results = _results(ep)
    new_values = {r: spec.target for spec, r in zip(sig.output_specs, results)
                  if spec.kind == kinds.BUFFER_MUTATION and isinstance(r, torch.fx.Node)}
    return placeholders, new_values


def _results(ep: torch.export.ExportedProgram) -> tuple[torch.fx.Node, list[Any]]:
    """The graph's output node and what it returns, one entry per output spec."""
    output = next(n for n in ep.graph.nodes if n.op == "output")
    return output, list(output.args[0]) if isinstance(output.args[0], (tuple, list)) else [output.args[0]]


def unread_buffers(methods: Sequence[torch.export.ExportedProgram]) -> frozenset[str]:
    """The buffers some method mutates and no method reads: each use of such a buffer is as the
    `self` of aten.copy, which takes only its shape and dtype. What they hold is never seen by a
    computation (transformers' static cache keeps such a position counter per layer)."""
    mutated: set[str] = set()
    read: set[str] = set()
    for ep in methods:
        mutated.update(_state_updates(ep)[0].values())
        nodes = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
        for placeholder, buffer in ep.graph_signature.inputs_to_buffers.items():
            node = nodes[placeholder]
            if any(u.target != torch.ops.aten.copy.default or u.args[0] is not node or node in u.args[1:]
                   for u in node.users):
                read.add(buffer)
    return frozenset(mutated - read)


def _dropped_updates(ep: torch.export.ExportedProgram, dropped: frozenset[str]) -> set[torch.fx.Node]:
    """The nodes of `ep` that compute only new values of the buffers in `dropped`."""
    kinds = torch.export.graph_signature.OutputKind
    output, results = _results(ep)
    kept = {r for spec, r in zip(ep.graph_signature.output_specs, results)
            if not (spec.kind == kinds.BUFFER_MUTATION and spec.target in dropped)}
    dead: set[torch.fx.Node] = set()
    for n in reversed(ep.graph.nodes):
        if n.op == "call_function" and n.users and n not in kept and all(u in dead or u is output for u in n.users):
            dead.add(n)
    return dead


def _lower(ep: torch.export.ExportedProgram, name: str, supported: set[str], widen: torch.dtype | None = None,
           shared: _Shared | None = None, dropped: frozenset[str] = frozenset()) -> tuple[Plan, _Shared]:
    """Method `name` of `ep`, its constants and state added to `shared` (a new one when None). The
    buffers in `dropped` (unread_buffers) are left out of the state, and their updates uncomputed."""
    shared = shared if shared is not None else _Shared()
    low = _Lowering(name, widen, shared, SymbolicSizes(ep))
    sig = ep.graph_signature
    states, new_values = _state_updates(ep)
    states = {k: v for k, v in states.items() if v not in dropped}
    new_values = {k: v for k, v in new_values.items() if v not in dropped}
    dead = _dropped_updates(ep, dropped) if dropped else set()
    params = {k: v for k, v in {**sig.inputs_to_parameters, **sig.inputs_to_buffers}.items() if k not in states}
    lifted = sig.inputs_to_lifted_tensor_constants
    user_inputs = list(sig.user_inputs)
    env: dict[torch.fx.Node, Any] = {}
    folds = _foldable_batch_norms(ep, set(params) | set(lifted))
    folded = set(folds.values())
    for node in ep.graph.nodes:
        where = f"node {node.name}"
        if node.op == "placeholder":
            if node.name in states:  # program state: kept between calls, shared by the methods
                target = states[node.name]
                env[node] = low.state_tensor(target, ep.state_dict[target] if target in ep.state_dict
                                             else ep.constants[target])
            elif node.name in params:
                # Non-persistent buffers (position ids, rotary frequencies) are constants, not state.
                target = params[node.name]
                env[node] = _Const(ep.state_dict[target] if target in ep.state_dict else ep.constants[target])
            elif node.name in lifted:
                env[node] = _Const(ep.constants[lifted[node.name]])
            elif node.name in user_inputs:
                meta = node.meta.get("val")
                if isinstance(meta, torch.Tensor):
                    low.sizes.add_input(len(low.plan.inputs), meta, f"input {node.name}")
                    env[node] = low.planned_tensor(meta, -1, f"input {node.name}")
                elif isinstance(meta, (int, float, bool)):
                    env[node] = low.add_value(BoolValue(meta) if isinstance(meta, bool) else
                                            IntValue(meta) if isinstance(meta, int) else DoubleValue(meta))
                else:
                    raise ExportError(f"input {node.name}: {type(meta).__name__} inputs are not supported")
                low.plan.inputs.append(env[node])
            else:
                raise ExportError(f"{where}: unknown kind of graph input")
        elif node.op == "call_function":
            if node in dead:
                continue
            if node.target is operator.getitem:
                source, index = node.args
                env[node] = _MISSING if env[source] is _MISSING else env[source][index]
                continue
            if _is_size(node):
                env[node] = _Size(node.meta["val"])
                continue
            if not isinstance(node.target, torch._ops.OpOverload):
                raise ExportError(f"{where}: call to {node.target} is not an ATen operator")
            if node.target in _SKIPPED_OPS:
                continue
            if node.target in _IDENTITY_OPS:
                env[node] = env[node.args[0]]
                continue
            if node in folded and not isinstance(env[node.args[0]], _Const):  # computed by the convolution it reads
                env[node] = (env[node.args[0]],)
                continue
            if node.target in _SHAPE_ONLY_OPS:
                meta = node.meta["val"]
                fill = {torch.ops.aten.full_like.default: node.args[1] if len(node.args) > 1 else 0,
                        torch.ops.aten.ones_like.default: 1}.get(node.target, 0)
                if all(isinstance(s, int) for s in meta.shape):
                    env[node] = _Const(torch.full(tuple(meta.shape), fill, dtype=meta.dtype))
                else:  # a dynamic shape: filled when the method runs
                    env[node] = low.full_like(node.args[0], fill, meta, env, where)
                continue
            if all(_is_constant(a, env) for a in list(node.args) + list(node.kwargs.values())):
                # Depends on no input: compute it now and store the result.
                with torch.no_grad():
                    result = node.target(*_materialize(node.args, env), **_materialize(node.kwargs, env))
                env[node] = [_Const(r) for r in result] if isinstance(result, (tuple, list)) else _Const(result)
                continue
            op_index, full = low.operator(node.target)
            if full not in supported:
                low.missing.setdefault(full, []).append(node.name)
                env[node] = _MISSING
                continue
            _check_kernel_limits(node, full)
            widen = low.widen if low.widen is not None and node.target not in _DTYPE_AGNOSTIC else None
            step = len(low.plan.instructions)
            schema_args = _schema_args(node)
            if node in folds:
                schema_args = _fold_batch_norm(schema_args, folds[node], env)
                low.derived += schema_args[1:3]
            if widen is not None:
                schema_args = [low.widened(a, env) for a in schema_args]
            args = [low.argument(a, env, step, where) for a in schema_args]
            if widen is not None:
                args = [low.convert(a, torch.float32, where) if low.is_tensor_of(a, widen) else a for a in args]
            step = len(low.plan.instructions)
            for a in args:
                low.use(a, step)
            meta = node.meta.get("val")
            metas = [meta] if isinstance(meta, torch.Tensor) else meta
            if not (isinstance(metas, (tuple, list)) and all(isinstance(m, torch.Tensor) for m in metas)):
                raise ExportError(f"{where} ({full}): outputs of type {type(meta).__name__} are not supported")
            # A buffer's new value computed from the buffer alone, which nothing else reads: in place.
            source, buffer = node.args[0] if node.args else None, new_values.get(node)
            in_place = (buffer is not None and node.target in _STATE_UPDATES and widen is None
                        and isinstance(source, torch.fx.Node) and states.get(source.name) == buffer
                        and len(source.users) == 1)
            finals = ([low.state_values[buffer]] if in_place and buffer is not None else
                      [low.planned_tensor(m, step, f"{where} ({full})") for m in metas])
            outs = [low.planned_tensor(m.to(torch.float32), step, f"{where} ({full})") if widen and m.dtype == widen
                    else f for m, f in zip(metas, finals)]
            env[node] = finals[0] if isinstance(meta, torch.Tensor) else finals
            low.plan.instructions.append(KernelCall(op_index, args + outs, len(outs)))
            # Back to the program's dtype: the outputs something reads (a norm's unread statistics stay).
            read = ({0} if isinstance(meta, torch.Tensor) else
                    {u.args[1] for u in node.users if u.target is operator.getitem})
            for k, (o, f) in enumerate(zip(outs, finals)):
                if o != f and k in read:
                    low.copy_into(o, f)
        elif node.op == "output":
            results = node.args[0]
            for spec, r in zip(sig.output_specs, results if isinstance(results, (tuple, list)) else [results]):
                if spec.kind == torch.export.graph_signature.OutputKind.BUFFER_MUTATION and spec.target in dropped:
                    continue
                if spec.kind == torch.export.graph_signature.OutputKind.PARAMETER_MUTATION:
                    # A forward that rewrites its own weights (RWKV rescales them at its first call in
                    # eval mode): the outputs were computed from the new values, and every call
                    # computes them again from the weights as exported.
                    continue
                ref = env.get(r) if isinstance(r, torch.fx.Node) else None
                if r in new_values:  # a buffer's new value: into its state, unless computed there
                    state = low.state_values[new_values[r]]
                    if isinstance(ref, _Const):
                        ref = low.constant_tensor(ref.tensor)
                    if isinstance(ref, int) and ref != state:
                        low.copy_into(ref, state)
                    elif ref is not _MISSING and ref != state:
                        raise ExportError(f"buffer {new_values[r]}: its new value is not a tensor the program computes")
                elif isinstance(ref, int):
                    low.plan.outputs.append(ref)
                elif isinstance(ref, _Const) or isinstance(r, torch.Tensor):
                    low.plan.outputs.append(low.constant_tensor(ref.tensor if ref else r))
                elif ref is _MISSING:
                    continue  # computed by a missing operator, which the error below names
                else:
                    raise ExportError(f"output {r!r} is not a tensor the program computes")
        else:
            raise ExportError(f"{where}: graph node kind {node.op} is not supported")

    if low.missing:
        raise UnsupportedOperatorError(low.missing, sorted(supported))
    # Inputs and outputs live through the whole method: a method may run again without its inputs
    # being set again, and outputs are read after it returns.
    step = len(low.plan.instructions)
    for index in low.plan.inputs + low.plan.outputs:
        if index in low.allocations:
            low.allocations[index].last_use = step
    # A view's output shares its input's memory, so its kernel copies nothing.
    low.plan.buffer_sizes = [place(low.plan, roots(low.plan, low.allocations, dynamic=True), low.allocations)]
    low.plan.symbols, low.plan.size_expressions = low.sizes.symbols, low.sizes.expressions
    return low.plan, shared


def _check_all_delegated(p: Plan, dtype: torch.dtype, refused: dict[str, str]) -> None:
    """Raises where an instruction left to the CPU kernels reads or writes tensors of `dtype`,
    with the backend's reason for each such operator."""
    from executorch.export._partition import cpu_operators_on

    left = cpu_operators_on(p, DTYPE_CODES[dtype])
    if left:
        why = "; ".join(f"{op} ({refused.get(op, 'not delegated')})" for op in left)
        raise ExportError(f"dtype={dtype}: CudaBackend does not run {why}; the CPU kernels compute in float32, so "
                          "export in float32")


def export(
    module: torch.nn.Module,
    example_inputs: Sequence[Any],
    *,
    method_name: str = "forward",
    metadata: dict[str, str] | None = None,
    backend: str | Sequence[str] | None = None,
    cuda_archs: Sequence[str] | None = None,
    dtype: torch.dtype | None = None,
    quantize: str | None = None,
    group_size: int = 32,
    tf32_convolutions: bool = False,
    compiler: str | None = None,
    dynamic_shapes: Any = None,
) -> bytes:
    """The .pte bytes of `module` traced with `example_inputs` (shapes are fixed to theirs, unless
    dynamic_shapes says otherwise).

    backend="cuda" delegates every run of operators CudaBackend implements (float32) to it; the
    rest stays with the CPU kernels. Such a program needs a CUDA device where it is loaded.
    backend="xnnpack" delegates what XnnpackBackend runs (convolutions, linear layers, pooling,
    activations, elementwise operators, softmax, concatenation, padding, resizing, means, layer norm
    and attention, in float32; float16 programs too, converted to float32 where tensors enter the
    subgraph and back where they leave) to XNNPACK on the CPU. backend=["cuda", "xnnpack"] gives each operator
    to the first of the two that runs it.
    cuda_archs (e.g. ["sm_90", "compute_90"]) restricts it to devices of those architectures
    (real code) or newer (PTX); loading elsewhere fails with an error naming both.
    dtype (torch.float16 or torch.bfloat16) exports a copy of `module` whose parameters, buffers and
    floating inputs are of that dtype. On the CPU, operators that compute (all but those that only
    move elements) read float32 copies of their inputs and round their outputs back to `dtype`, as
    PyTorch's CPU kernels do; with backend="cuda" every operator on such tensors must run on
    CudaBackend.
    tf32_convolutions=True (backend="cuda", float32) lets cuDNN compute float32 convolutions in TF32
    on tensor cores, as PyTorch does by default (torch.backends.cudnn.allow_tf32): faster, with
    about 1e-3 relative error. Matrix products stay IEEE float32, as PyTorch's default too.
    quantize="int8" stores every nn.Linear's weight as int8 with a float32 scale per output feature;
    activations are quantized per row when the program runs (executorch::int8_linear, on the CPU
    and on CudaBackend, where the layer's input features are a multiple of 4).
    quantize="int8_weight_only" stores the same int8 weights with their scales and computes in
    float32 from activations of any dtype (executorch::int8_weight_linear, on the CPU).
    quantize="int4" stores the weights only as int4, in groups of `group_size` (32, 64 or 128) input
    features with a float32 scale each, and computes in float32 from activations of any dtype
    (executorch::int4_linear, on the CPU); layers whose input features are no multiple of
    group_size stay as they are.
    compiler="aoti" (backend="cuda") compiles the whole module with PyTorch's AOTInductor instead, on
    this machine's GPU (torch 2.11 with CUDA and Triton, and pyelftools), into one CudaBackend call
    that runs the generated kernels through libaoti_cuda_shims.so; the program runs on devices of
    the compiling one's architecture, with the same torch release's shims (docs/program_format.md,
    "AOTInductor payloads"). A model whose compiled code calls a fallback the shims lack is an
    ExportError naming it.
    dynamic_shapes, as torch.export.export takes it (per input, {dim: torch.export.Dim(name, max=...)}),
    lets those dimensions vary between calls up to each Dim's max, which memory is planned for
    (bounded dynamic shapes; the CPU kernels only, so no backend).
    """
    _check_options(backend, cuda_archs, dtype, quantize, tf32_convolutions, group_size, compiler)
    if dynamic_shapes is not None and (backend is not None or compiler is not None):
        raise ExportError("dynamic_shapes: delegated programs have fixed shapes; export without backend= for sizes "
                          "that vary between calls")
    converted, inputs = _converted(module, example_inputs, dtype, quantize, group_size)
    if compiler == "aoti":
        from executorch.export._aoti import export_aoti

        return export_aoti(converted, inputs, method_name=method_name, metadata=metadata)
    # In half precision a failed capture is tried again in float32: what torch prints about the first
    # (the partial graph it traced) is shown only where that fails too.
    first_attempt = io.StringIO()
    with torch.no_grad():
        try:
            with _quiet(first_attempt) if dtype in (torch.float16, torch.bfloat16) else contextlib.nullcontext():
                ep = torch.export.export(converted, tuple(inputs), dynamic_shapes=dynamic_shapes)
        except Exception as e:  # torch's own message says what could not be traced
            ep = (_captured_in_float32(module, example_inputs, dtype, dynamic_shapes) if quantize is None else None)
            if ep is None:
                sys.stderr.write(first_attempt.getvalue())
                raise ExportError(f"torch.export could not capture the module: {e}") from e
    return _program({method_name: _decomposed(ep, backend)}, backend=backend, cuda_archs=cuda_archs, dtype=dtype,
                    tf32_convolutions=tf32_convolutions, metadata=metadata)


# The backends export(backend=...) names, and their registered names.
BACKENDS = {"cuda": CUDA, "xnnpack": XNNPACK}


def backends_of(backend: str | Sequence[str] | None) -> list[str]:
    """export's `backend` as a list of names of BACKENDS, in the order operators are offered to
    them: None or "cpu" is none (the CPU kernels only)."""
    if backend is None or backend == "cpu":
        return []
    names = [backend] if isinstance(backend, str) else list(backend)
    if not names or any(n not in BACKENDS for n in names) or len(set(names)) != len(names):
        raise ExportError(f"unknown backend {backend!r}: use None (CPU), 'cuda', 'xnnpack' or a list of these, "
                          "each once (['cuda', 'xnnpack'])")
    return names


def _check_options(backend: str | Sequence[str] | None, cuda_archs: Sequence[str] | None, dtype: torch.dtype | None,
                   quantize: str | None, tf32_convolutions: bool, group_size: int = 32,
                   compiler: str | None = None) -> None:
    cuda = "cuda" in backends_of(backend)
    if compiler not in (None, "aoti"):
        raise ExportError(f"unknown compiler {compiler!r}: use None (the delegate's own kernels) or 'aoti'")
    if compiler == "aoti" and (backends_of(backend) != ["cuda"] or quantize is not None or tf32_convolutions or
                               cuda_archs is not None):
        raise ExportError("compiler='aoti' takes backend='cuda' alone, without quantize, tf32_convolutions or "
                          "cuda_archs (its kernels are built for the compiling device)")
    if cuda_archs is not None:
        bad = [a for a in cuda_archs if not re.fullmatch(r"(sm|compute)_[0-9]{2,3}", a)]
        if not cuda or bad or not cuda_archs:
            raise ExportError(f"cuda_archs needs backend='cuda' and names like 'sm_90' or 'compute_90', got {list(cuda_archs)}")
    if tf32_convolutions and (not cuda or dtype not in (None, torch.float32)):
        raise ExportError(f"tf32_convolutions needs backend='cuda' and float32, got backend={backend!r}, dtype={dtype}")
    if dtype is not None and dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ExportError(f"dtype must be torch.float32, torch.float16 or torch.bfloat16, got {dtype}")
    if quantize not in (None, "int8", "int8_weight_only", "int4"):
        raise ExportError(f"unknown quantize {quantize!r}: use 'int8', 'int8_weight_only' or 'int4'")
    if quantize == "int8" and dtype not in (None, torch.float32):
        raise ExportError(f"quantize='int8' takes float32 activations; it does not combine with dtype={dtype}")
    if quantize == "int4" and group_size not in (32, 64, 128):
        raise ExportError(f"quantize='int4' takes group_size 32, 64 or 128, got {group_size!r}")


def _converted(module: torch.nn.Module, example_inputs: Sequence[Any], dtype: torch.dtype | None,
               quantize: str | None, group_size: int = 32) -> tuple[torch.nn.Module, list[Any]]:
    """A copy of `module` in `dtype` with its example inputs, or quantized; in eval mode."""
    inputs = list(example_inputs)
    if dtype is not None:
        module = copy.deepcopy(module).to(dtype)
        inputs = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    if quantize is not None:
        module, count = (quantize_linear_int8(module) if quantize == "int8"
                         else quantize_linear_int8_weight_only(module) if quantize == "int8_weight_only"
                         else quantize_linear_int4(module, group_size))
        if count == 0:
            raise ExportError(f"quantize={quantize!r}: the module has no nn.Linear layer"
                              + (f" with input features a multiple of {group_size}" if quantize == "int4" else ""))
    return module.eval(), inputs


@contextlib.contextmanager
def _quiet(sink: io.StringIO) -> Iterator[None]:
    """torch's prints to stderr go to `sink`, and its log below CRITICAL nowhere, meanwhile."""
    logs = [logging.getLogger(n) for n in ("torch", "torch.fx.experimental.symbolic_shapes")]
    levels = [log.level for log in logs]
    try:
        for log in logs:
            log.setLevel(logging.CRITICAL)
        with contextlib.redirect_stderr(sink):
            yield
    finally:
        for log, level in zip(logs, levels):
            log.setLevel(level)


def _captured_in_float32(module: torch.nn.Module, example_inputs: Sequence[Any], dtype: torch.dtype | None,
                         dynamic_shapes: Any = None) -> torch.export.ExportedProgram | None:
    """`module` in float16/bfloat16 captured through its float32 graph, for modules torch.export
    cannot trace in half precision: BART's encoder branches on `dtype == float16 and not
    isfinite(h).all()`, which depends on the data. The float32 capture takes the float32 side of
    such branches; its graph, with the dtype checks it baked in dropped and its float32 constants
    made `dtype`, is converted and captured again. None where that fails too."""
    if dtype not in (torch.float16, torch.bfloat16):
        return None
    floating = [isinstance(x, torch.Tensor) and x.is_floating_point() for x in example_inputs]
    try:
        graph = torch.export.export(copy.deepcopy(module).float().eval(),
                                    tuple(x.float() if f else x for x, f in zip(example_inputs, floating)),
                                    dynamic_shapes=dynamic_shapes).module()
        for node in list(graph.graph.nodes):
            if node.op != "call_function":
                continue
            if node.target is torch.ops.aten._assert_tensor_metadata.default:
                graph.graph.erase_node(node)
            elif node.kwargs.get("dtype") is torch.float32:
                node.kwargs = {**node.kwargs, "dtype": dtype}
        graph.recompile()
        graph = graph.to(dtype)
        return torch.export.export(graph, tuple(x.to(dtype) if f else x for x, f in zip(example_inputs, floating)),
                                   dynamic_shapes=dynamic_shapes)
    except Exception:
        return None


def _decomposed(ep: torch.export.ExportedProgram,
                backend: str | Sequence[str] | None) -> torch.export.ExportedProgram:
    """`ep` in the operators the kernels implement, rewritten for the CPU or the device."""
    with torch.no_grad():
        names = backends_of(backend)
        ep = ep.run_decompositions(_decompositions(recurrent_layers="cuda" in names))
        simplify(ep, for_device="cuda" in names, additive_masks="xnnpack" in names)
        # XnnpackBackend's attention takes as many key/value heads as query heads.
        _fusions.fuse(ep.graph, grouped_attention="xnnpack" not in names)
    return ep


def _program(methods: dict[str, torch.export.ExportedProgram], *, backend: str | Sequence[str] | None = None,
             cuda_archs: Sequence[str] | None = None, dtype: torch.dtype | None = None,
             tf32_convolutions: bool = False, metadata: dict[str, str] | None = None,
             dropped: frozenset[str] = frozenset()) -> bytes:
    """The .pte bytes of a program with one method per entry of `methods` (decomposed graphs of one
    module), sharing its constants and its mutable buffers (but those in `dropped`: unread_buffers)."""
    names = backends_of(backend)
    widen = dtype if dtype in (torch.float16, torch.bfloat16) and "cuda" not in names else None
    shared = _Shared()
    plans = [_lower(ep, name, set(supported_operators()), widen, shared, dropped)[0]
             for name, ep in methods.items()]
    segments = [shared.data()]
    meta = {"producer": "executorch.export", "torch_version": torch.__version__, **(metadata or {})}
    if names:
        from executorch.export._partition import delegate, drop_unused_constants

        specs: dict[str, bytes] = {"cuda_archs": ",".join(cuda_archs).encode()} if cuda_archs else {}
        if tf32_convolutions:
            specs["tf32_convolutions"] = b"1"
        totals = dict.fromkeys(names, 0)
        for p in plans:
            calls, refused = delegate(p, segments[0], segments, [BACKENDS[n] for n in names],
                                      {BACKENDS["cuda"]: specs}, shared.mutable)
            for n in names:
                totals[n] += calls[BACKENDS[n]]
            if "cuda" in names and dtype in (torch.float16, torch.bfloat16):
                _check_all_delegated(p, dtype, refused)
        segments[0] = drop_unused_constants(plans, segments[0], shared.mutable)
        for n in names:
            meta[f"{n}_delegate_calls"] = str(totals[n])
    return serialize(ProgramSpec(plans=plans, segments=segments, metadata=meta, mutable_buffers=shared.mutable))
