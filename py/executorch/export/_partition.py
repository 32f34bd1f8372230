"""Delegation to the CUDA backend: moves runs of supported instructions into CudaBackend calls.

Each maximal run of consecutive instructions that CudaBackend implements becomes one DelegateCall;
its payload is a program of its own (the same .pte format: the run's values, constants and memory
plan). What the backend cannot run stays with the CPU kernels. Method inputs read only by delegate
calls are left unplanned, so a caller's tensor (host or device memory) is handed to the delegate
without a copy on the CPU side; such inputs are marked as device tensors in the program.
"""

from __future__ import annotations

from executorch.export._dtypes import BFLOAT16, BOOL, FLOAT16, FLOAT32, INT8, INT32, INT64, nbytes
from executorch.export._planner import Allocation, plan
from executorch.serialization.pte import Delegate, DelegateCall, KernelCall, Plan, ProgramSpec, TensorSpec, Value, serialize

BACKEND_ID = "CudaBackend"
FLOATING = {FLOAT32, FLOAT16, BFLOAT16}

# What backends/cuda/runtime/payload.cpp (classify) implements, on floating tensors of one dtype
# (float32, float16 or bfloat16; bool masks and integer indices where _OTHER_DTYPES says).
CUDA_OPERATORS = {
    "aten::bmm", "aten::expand", "aten::split_with_sizes", "aten::logical_not", "aten::any.dim", "aten::where.self",
    "aten::embedding", "aten::eq.Scalar", "aten::ne.Scalar", "aten::lt.Scalar", "aten::le.Scalar", "aten::gt.Scalar",
    "aten::ge.Scalar", "aten::_to_copy",
    "aten::relu", "aten::silu", "aten::sigmoid", "aten::tanh", "aten::neg", "aten::exp", "aten::rsqrt", "aten::gelu",
    "aten::add.Tensor", "aten::sub.Tensor", "aten::mul.Tensor", "aten::div.Tensor", "aten::mul.Scalar",
    "aten::add.Scalar", "aten::addmm", "aten::mm", "aten::_softmax", "aten::_log_softmax", "aten::native_layer_norm",
    "aten::view", "aten::_unsafe_view", "aten::clone", "aten::unsqueeze", "aten::squeeze.dims", "aten::squeeze.dim",
    "aten::permute", "aten::convolution", "aten::_native_batch_norm_legit_no_training", "aten::max_pool2d_with_indices",
    "aten::avg_pool2d", "aten::mean.dim", "executorch::int8_linear", "aten::scaled_dot_product_attention",
}
MAX_DIMS = 8
MAX_INT8_DEPTH = (1 << 31) // (127 * 127) // 4 * 4  # int32 sums of int8 products stay exact
MAX_ATTENTION_HEAD_DIM = 128  # kMaxAttentionHeadDim
MAX_ATTENTION_QUERIES = 65535 * 8  # kMaxAttentionQueries

# Argument positions (outputs count from the end as -1) whose tensors may have other dtypes.
_OTHER_DTYPES: dict[str, dict[int, set[int]]] = {
    "aten::max_pool2d_with_indices": {-1: {INT64}},
    "aten::embedding": {1: {INT64, INT32}},
    "executorch::int8_linear": {1: {INT8}},
    "aten::logical_not": {0: {BOOL}, -1: {BOOL}},
    "aten::any.dim": {0: {BOOL}, -1: {BOOL}},
    "aten::where.self": {0: {BOOL}},
    "aten::scaled_dot_product_attention": {3: FLOATING | {BOOL}},
    **{f"aten::{c}.Scalar": {-1: {BOOL}} for c in ("eq", "ne", "lt", "le", "gt", "ge")},
}


def _op_name(p: Plan, ins: KernelCall) -> str:
    name, overload = p.operators[ins.op_index]
    return f"{name}.{overload}" if overload else name


def _tensor_args(p: Plan, args: list[int]) -> list[TensorSpec]:
    out = []
    for a in args:
        v = p.values[a]
        if v.kind == "tensor":
            out.append(v.payload)
        elif v.kind == "tensor_list":
            out += [p.values[i].payload for i in v.payload]
    return out


def supported(p: Plan, ins: KernelCall) -> bool:
    if not isinstance(ins, KernelCall):
        return False
    name = _op_name(p, ins)
    if name not in CUDA_OPERATORS:
        return False
    other = _OTHER_DTYPES.get(name, {})
    floating = set()
    for pos, a in enumerate(ins.args):
        allowed = other.get(pos, other.get(pos - len(ins.args), FLOATING))
        for t in _tensor_args(p, [a]):
            if t.dtype not in allowed or len(t.sizes) > MAX_DIMS:
                return False
            if t.dtype in FLOATING:
                floating.add(t.dtype)
    if len(floating) > 1 and name != "aten::_to_copy":  # one element type per kernel, but for conversions
        return False
    if name == "aten::_to_copy":  # between float types only
        return all(t.dtype in FLOATING for t in _tensor_args(p, ins.args))
    if name == "executorch::int8_linear":  # float32 activations; packed groups of 4 int8 values
        k = p.values[ins.args[1]].payload.sizes[-1]
        return floating == {FLOAT32} and k % 4 == 0 and k <= MAX_INT8_DEPTH
    if name == "aten::scaled_dot_product_attention":
        return _attention_supported(p, ins)
    if name == "aten::any.dim":
        rank = len(p.values[ins.args[0]].payload.sizes)
        return rank > 0 and p.values[ins.args[1]].payload in (-1, rank - 1)
    if name == "aten::embedding":
        return len(p.values[ins.args[0]].payload.sizes) == 2
    if name == "aten::split_with_sizes":
        return len(p.values[ins.args[0]].payload.sizes) > 0
    if name in ("aten::_softmax", "aten::_log_softmax"):
        rank = len(p.values[ins.args[0]].payload.sizes)
        dim = p.values[ins.args[1]].payload
        return dim in (-1, rank - 1)
    if name == "aten::convolution":
        transposed = p.values[ins.args[6]].payload
        return not transposed and len(p.values[ins.args[0]].payload.sizes) == 4
    if name in ("aten::max_pool2d_with_indices", "aten::avg_pool2d"):
        if name == "aten::avg_pool2d" and p.values[ins.args[6]].kind != "null":
            return False
        return len(p.values[ins.args[0]].payload.sizes) == 4
    if name == "aten::mean.dim":
        rank = len(p.values[ins.args[0]].payload.sizes)
        dims = p.values[ins.args[1]]
        if dims.kind != "int_list" or not dims.payload:
            return False
        reduced = sorted(d % rank for d in dims.payload)
        return reduced == list(range(rank - len(reduced), rank))
    if name.startswith(("aten::add", "aten::sub", "aten::mul", "aten::div")):
        other = p.values[ins.args[1]]
        return other.kind in ("tensor", "int", "double")
    return True


def _attention_supported(p: Plan, ins: KernelCall) -> bool:
    """3-D or 4-D, no dropout, head sizes and query counts the kernel takes, mask or causal."""
    q, k, v = (p.values[a].payload.sizes for a in ins.args[:3])
    mask, dropout, causal = (p.values[a] for a in ins.args[3:6])
    rank = len(q)
    if rank not in (3, 4) or len(k) != rank or len(v) != rank or dropout.payload != 0:
        return False
    if mask.kind == "tensor" and (causal.payload or len(mask.payload.sizes) > rank):
        return False
    return q[-1] <= MAX_ATTENTION_HEAD_DIM and v[-1] <= MAX_ATTENTION_HEAD_DIM and q[-2] <= MAX_ATTENTION_QUERIES


def _runs(p: Plan) -> list[tuple[int, int]]:
    runs, start = [], None
    for k, ins in enumerate(p.instructions):
        if supported(p, ins):
            start = k if start is None else start
        elif start is not None:
            runs.append((start, k))
            start = None
    if start is not None:
        runs.append((start, len(p.instructions)))
    return runs


def _subprogram(p: Plan, constants: bytes, lo: int, hi: int) -> tuple[bytes, list[int], list[int]]:
    """The .pte of instructions [lo, hi) of `p`, and its inputs and outputs as indices of `p`."""
    body = p.instructions[lo:hi]
    defined: set[int] = set()
    for ins in body:
        defined.update(ins.args[len(ins.args) - ins.num_outputs:])
    used_later = set(p.outputs)
    for ins in p.instructions[hi:]:
        for a in ins.args:
            used_later.add(a)
            if p.values[a].kind == "tensor_list":
                used_later.update(p.values[a].payload)
    inputs, seen = [], set()
    for ins in body:
        for a in ins.args[: len(ins.args) - ins.num_outputs]:
            for t in ([a] if p.values[a].kind != "tensor_list" else p.values[a].payload):
                v = p.values[t]
                if v.kind == "tensor" and v.payload.data_segment < 0 and t not in defined and t not in seen:
                    inputs.append(t)
                    seen.add(t)
    outputs = [t for ins in body for t in ins.args[len(ins.args) - ins.num_outputs:] if t in used_later]

    sub = Plan(name="forward", operators=[])
    index: dict[int, int] = {}
    blob = bytearray()
    lifetimes: dict[int, Allocation] = {}

    def copy(i: int, step: int) -> int:
        if i in index:
            new = index[i]
            if new in lifetimes:
                lifetimes[new].last_use = max(lifetimes[new].last_use, step)
            return new
        v = p.values[i]
        if v.kind == "tensor":
            t: TensorSpec = v.payload
            tensor_bytes = nbytes(t.dtype, t.sizes)
            if t.data_segment >= 0:
                offset = (len(blob) + 15) // 16 * 16
                blob.extend(b"\0" * (offset - len(blob)))
                blob.extend(constants[t.data_offset:t.data_offset + tensor_bytes])
                spec = TensorSpec(dtype=t.dtype, sizes=list(t.sizes), data_segment=0, data_offset=offset)
            else:
                spec = TensorSpec(dtype=t.dtype, sizes=list(t.sizes), mem_id=0)
            sub.values.append(Value("tensor", spec))
            new = len(sub.values) - 1
            if t.data_segment < 0:
                lifetimes[new] = Allocation(size=tensor_bytes, first_use=step, last_use=step)
        elif v.kind == "tensor_list":
            items = [copy(j, step) for j in v.payload]
            sub.values.append(Value("tensor_list", items))
            new = len(sub.values) - 1
        else:
            sub.values.append(Value(v.kind, v.payload))
            new = len(sub.values) - 1
        index[i] = new
        return new

    sub.inputs = [copy(i, -1) for i in inputs]
    op_index: dict[tuple[str, str], int] = {}
    for step, ins in enumerate(body):
        key = p.operators[ins.op_index]
        if key not in op_index:
            op_index[key] = len(sub.operators)
            sub.operators.append(key)
        sub.instructions.append(KernelCall(op_index[key], [copy(a, step) for a in ins.args], ins.num_outputs))
    sub.outputs = [index[o] for o in outputs]
    for i in sub.inputs + sub.outputs:
        lifetimes[i].first_use, lifetimes[i].last_use = -1, len(body)
    size = plan(list(lifetimes.values()))
    for i, a in lifetimes.items():
        sub.values[i].payload.mem_offset = a.offset
    sub.buffer_sizes = [size]
    payload = serialize(ProgramSpec(plans=[sub], segments=[bytes(blob)], metadata={"producer": "executorch.export",
                                                                                    "backend": BACKEND_ID}))
    return payload, inputs, outputs


def _drop_unused_constants(p: Plan, constants: bytes) -> bytes:
    """The constant segment holding only what `p` still reads; offsets in `p` are updated."""
    used: set[int] = set(p.outputs)
    for ins in p.instructions:
        for a in ins.args:
            used.add(a)
            if p.values[a].kind == "tensor_list":
                used.update(p.values[a].payload)
    blob = bytearray()
    for i, v in enumerate(p.values):
        if v.kind != "tensor" or v.payload.data_segment != 0:
            continue
        t: TensorSpec = v.payload
        if i not in used:  # now read only inside a delegate: no data here
            t.data_segment, t.data_offset = -1, 0
            continue
        offset = (len(blob) + 15) // 16 * 16
        blob.extend(b"\0" * (offset - len(blob)))
        blob.extend(constants[t.data_offset:t.data_offset + nbytes(t.dtype, t.sizes)])
        t.data_offset = offset
    return bytes(blob)


def delegate_to_cuda(p: Plan, constants: bytes, segments: list[bytes],
                     compile_specs: dict[str, bytes] | None = None) -> int:
    """Rewrites `p` in place; appends payloads to `segments` (segments[0], the constants, shrinks to
    what the CPU part still reads); each delegate call carries `compile_specs`. Returns the number of
    delegate calls."""
    runs = _runs(p)
    if not runs:
        return 0
    new_instructions = []
    previous = 0
    for lo, hi in runs:
        new_instructions += p.instructions[previous:lo]
        payload, inputs, outputs = _subprogram(p, constants, lo, hi)
        segments.append(payload)
        p.delegates.append(Delegate(backend_id=BACKEND_ID, segment=len(segments) - 1,
                                    compile_specs=dict(compile_specs or {})))
        new_instructions.append(DelegateCall(len(p.delegates) - 1, inputs + outputs))
        previous = hi
    new_instructions += p.instructions[previous:]
    p.instructions = new_instructions
    segments[0] = _drop_unused_constants(p, constants)
    # Inputs only delegates read are handed over as they are (host or device memory).
    readers: dict[int, list] = {}
    for ins in p.instructions:
        for a in ins.args:
            readers.setdefault(a, []).append(ins)
    for i in p.inputs:
        users = readers.get(i, [])
        if users and all(isinstance(u, DelegateCall) for u in users) and i not in p.outputs:
            spec: TensorSpec = p.values[i].payload
            spec.mem_id, spec.mem_offset, spec.device = -1, 0, 1
    return len(runs)
