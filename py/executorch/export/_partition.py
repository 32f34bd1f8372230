"""Delegation: moves runs of instructions a backend runs into calls of that backend.

Each instruction goes to the first of the chosen backends (CudaBackend, XnnpackBackend) that runs
it, as the backend's own checks answer. Each maximal run of consecutive instructions given to one
backend becomes one DelegateCall; its payload is a program of its own (the same .pte format: the
run's values, constants and memory plan). What no backend runs stays with the CPU kernels. Method
inputs read only by CudaBackend calls are left unplanned, so a caller's tensor (host or device
memory) is handed to the delegate without a copy on the CPU side; such inputs are marked as device
tensors in the program.

Program state (a key/value cache) that a payload updates is declared by the payload as mutable
buffers of the same names: the backend keeps one device copy of each in the method's program state,
which every delegate call of every method sharing that state updates in place. Such a buffer is
then the delegates' alone; no CPU kernel may read or write it.
"""

from __future__ import annotations

import dataclasses
import math

from executorch.export._dtypes import nbytes
from executorch.export._planner import Allocation, plan
from executorch.export._errors import ExportError
from executorch.serialization.pte import (Delegate, DelegateCall, IntListValue, IntValue, KernelCall, MutableBuffer,
                                         Plan, ProgramSpec, TensorListValue, TensorSpec, TensorValue, serialize)

CUDA = "CudaBackend"
XNNPACK = "XnnpackBackend"
# Each backend's answer to "which instructions would you run", in _C.
_EXPLAIN = {CUDA: "cuda_explain_instructions", XNNPACK: "xnnpack_explain_instructions"}


def _kernels(instructions: list[KernelCall | DelegateCall]) -> list[KernelCall]:
    """The instructions of a plan not yet delegated (a payload's, or the method's before
    delegate_to_cuda rewrites it): kernel calls all."""
    kernels = [i for i in instructions if isinstance(i, KernelCall)]
    assert len(kernels) == len(instructions), "a delegated plan"
    return kernels


def _op_name(p: Plan, ins: KernelCall) -> str:
    name, overload = p.operators[ins.op_index]
    return f"{name}.{overload}" if overload else name


def _tensor_args(p: Plan, args: list[int]) -> list[TensorSpec]:
    return [p.tensor(t) for a in args for t in p.tensors_in(a) if isinstance(p.values[t], TensorValue)]


def cpu_operators_on(p: Plan, dtype_code: int) -> list[str]:
    """The operators, sorted, of the kernel calls left to the CPU in delegated `p` that read or
    write tensors of dtype `dtype_code`."""
    return sorted({_op_name(p, ins) for ins in p.instructions
                   if isinstance(ins, KernelCall) and any(t.dtype == dtype_code for t in _tensor_args(p, ins.args))})


def refusals(p: Plan, constants: bytes, mutable: list[MutableBuffer] | None = None,
             backend: str = CUDA) -> list[str]:
    """For each instruction of `p` (whose program declares the mutable buffers `mutable`), why
    `backend` cannot run it ('' where it can).

    The answer comes from the backend's own checks (backends/cuda/runtime/payload.cpp,
    backends/xnnpack/runtime/subgraph.cpp: the code its init runs), asked through the extension on
    the CPU: what is delegated is exactly what the backend accepts, and an operator or a limit is
    added in one place. XnnpackBackend keeps no program state: instructions reading or writing it
    stay elsewhere.
    """
    from executorch import _C

    program = serialize(ProgramSpec(plans=[p], segments=[constants], metadata={"producer": "executorch.export"},
                                    mutable_buffers=list(mutable or [])))
    reasons = list(getattr(_C, _EXPLAIN[backend])(program))
    if backend == XNNPACK:
        for k, ins in enumerate(_kernels(p.instructions)):
            if not reasons[k] and any(_is_state(p.values[t]) for a in ins.args for t in p.tensors_in(a)):
                reasons[k] = f"{XNNPACK} keeps no program state"
    return reasons


def _spans(labels: list[str | None]) -> list[tuple[int, int, str]]:
    """Maximal runs [lo, hi) of equal labels that are not None, with their label."""
    spans: list[tuple[int, int, str]] = []
    for k, label in enumerate(labels):
        if label is None:
            continue
        if spans and spans[-1][1] == k and spans[-1][2] == label:
            spans[-1] = (spans[-1][0], k + 1, label)
        else:
            spans.append((k, k + 1, label))
    return spans


def _runs(p: Plan, constants: bytes, reasons: list[str] | None = None) -> list[tuple[int, int]]:
    """The runs of `p` CudaBackend takes (given its `reasons`, or asking it)."""
    labels = [None if why else CUDA for why in (refusals(p, constants) if reasons is None else reasons)]
    return [(lo, hi) for lo, hi, _ in _spans(labels)]


def _is_state(v: object) -> bool:
    return isinstance(v, TensorValue) and v.payload.mutable_buffer >= 0


def _subprogram(p: Plan, constants: bytes, lo: int, hi: int, mutable: list[MutableBuffer] | None = None,
                backend: str = CUDA) -> tuple[bytes, list[int], list[int]]:
    """The .pte of instructions [lo, hi) of `p` (whose program declares the mutable buffers
    `mutable`) for `backend`, and its inputs and outputs as indices of `p`. The program state it
    reads or writes is declared by the payload under the buffers' names, without data."""
    body = _kernels(p.instructions[lo:hi])
    defined: set[int] = set()
    for ins in body:
        defined.update(ins.args[len(ins.args) - ins.num_outputs:])
    used_later = set(p.outputs)
    for later in p.instructions[hi:]:
        for a in later.args:
            used_later.update([a, *p.tensors_in(a)])
    inputs, seen = [], set()
    for ins in body:
        for a in ins.args[: len(ins.args) - ins.num_outputs]:
            for t in p.tensors_in(a):
                v = p.values[t]
                if (isinstance(v, TensorValue) and v.payload.data_segment < 0 and not _is_state(v) and t not in defined
                        and t not in seen):
                    inputs.append(t)
                    seen.add(t)
    outputs = [t for ins in body for t in ins.args[len(ins.args) - ins.num_outputs:]
               if t in used_later and not _is_state(p.values[t])]

    sub = Plan(name="forward", operators=[])
    buffers: list[MutableBuffer] = []
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
            elif t.mutable_buffer >= 0:
                declared = (mutable or [])[t.mutable_buffer]
                buffers.append(MutableBuffer(name=declared.name, size=declared.size))
                spec = TensorSpec(dtype=t.dtype, sizes=list(t.sizes), mutable_buffer=len(buffers) - 1)
            else:
                spec = TensorSpec(dtype=t.dtype, sizes=list(t.sizes), mem_id=0)
            sub.values.append(TensorValue(spec))
            new = len(sub.values) - 1
            if t.data_segment < 0 and t.mutable_buffer < 0:
                lifetimes[new] = Allocation(size=tensor_bytes, first_use=step, last_use=step)
        elif v.kind == "tensor_list":
            items = [copy(j, step) for j in v.payload]
            sub.values.append(TensorListValue(items))
            new = len(sub.values) - 1
        else:
            sub.values.append(dataclasses.replace(v))
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
    _keep_linear_inputs(sub, lifetimes)
    shared = roots(sub, lifetimes)
    _pieces_in_place(sub, shared, lifetimes)
    sub.buffer_sizes = [place(sub, shared, lifetimes)]
    payload = serialize(ProgramSpec(plans=[sub], segments=[bytes(blob)], mutable_buffers=buffers,
                                    metadata={"producer": "executorch.export", "backend": backend}))
    return payload, inputs, outputs


# Operators whose output holds exactly its input's bytes: in a payload the output is planned on the
# input's memory, and the backend's copy becomes a no-op (a functional graph never writes a tensor
# after computing it, so the two may share bytes).
_VIEWS = {"aten::view", "aten::_unsafe_view", "aten::clone", "aten::unsqueeze", "aten::squeeze", "aten::alias"}


def _int_arg(sub: Plan, index: int, default: int | None = None) -> int | None:
    v = sub.values[index]
    return v.payload if isinstance(v, IntValue) else default


def _keeps_layout(sub: Plan, ins: KernelCall) -> bool:
    """Whether a permute only moves dimensions of size 1, so that its output holds its input's
    bytes in order (ViT's and the transformers' [1, len, dim] <-> [len, 1, dim] at batch 1)."""
    if sub.operators[ins.op_index][0] != "aten::permute" or len(ins.args) != 3:
        return False
    d = sub.values[ins.args[1]]
    dims = d.payload if isinstance(d, IntListValue) else None
    sizes = sub.tensor(ins.args[0]).sizes
    if dims is None or len(dims) != len(sizes):
        return False
    moved = [d % len(sizes) for d in dims if sizes[d % len(sizes)] != 1] if sizes else []
    return moved == sorted(moved)


def _contiguous_part(sub: Plan, ins: KernelCall) -> int | None:
    """Byte offset of a select or unit-step slice whose result is one contiguous run of its input
    (every dimension before the selected one has size 1) starting 16-byte aligned; None otherwise."""
    name, overload = sub.operators[ins.op_index]
    a = sub.tensor(ins.args[0])
    if (name, overload) not in (("aten::select", "int"), ("aten::slice", "Tensor")) or len(ins.args) < 4:
        return None
    dim = _int_arg(sub, ins.args[1])
    if dim is None or not a.sizes:
        return None
    dim %= len(a.sizes)
    if any(s != 1 for s in a.sizes[:dim]):
        return None
    size = a.sizes[dim]
    if name == "aten::select":
        first = _int_arg(sub, ins.args[2])
    else:
        if len(ins.args) < 6 or _int_arg(sub, ins.args[4], 1) != 1:
            return None
        first = _int_arg(sub, ins.args[2], 0)
    if first is None:
        return None
    first = min(max(first + size if first < 0 else first, 0), size)
    offset = first * nbytes(a.dtype, a.sizes[dim + 1:])
    return offset if offset % 16 == 0 else None  # tensors start 16-byte aligned, as planned


def roots(sub: Plan, lifetimes: dict[int, Allocation], dynamic: bool = False) -> dict[int, tuple[int, int]]:
    """For each planned value of `sub`, the value whose memory it uses and the byte offset there:
    the input of a chain of views, permutes that keep the layout, and contiguous selects or slices.
    With `dynamic` (a plan whose sizes may be bounds), only views and permutes of static tensors: a
    bounded size may be 1 at run time, and a part's offset depends on the actual sizes."""
    root = {i: (i, 0) for i in lifetimes}
    for ins in _kernels(sub.instructions):
        src, dst = ins.args[0], ins.args[-1]
        if src not in root or dst not in root or ins.num_outputs != 1:
            continue
        a, b = sub.tensor(src), sub.tensor(dst)
        if a.dtype != b.dtype:
            continue
        static = not (a.dynamic_sizes or b.dynamic_sizes)
        if ((sub.operators[ins.op_index][0] in _VIEWS or ((static or not dynamic) and _keeps_layout(sub, ins)))
                and nbytes(a.dtype, a.sizes) == nbytes(b.dtype, b.sizes)):
            offset: int | None = 0
        else:
            offset = None if dynamic else _contiguous_part(sub, ins)
        if offset is not None:
            r, base = root[src]  # src was defined earlier, so its root is final
            root[dst] = (r, base + offset)
    return root


def _keep_linear_inputs(sub: Plan, lifetimes: dict[int, Allocation]) -> None:
    """Keeps the input of a linear layer whose output a residual add takes next (through views)
    alive until that add: the backend computes both in one matrix product that writes the add's
    output, which then may not lie on the product's input (transformers' second MLP layer)."""
    steps = _kernels(sub.instructions)
    for k, ins in enumerate(steps):
        if sub.operators[ins.op_index] != ("aten::addmm", "") or len(ins.args) != 6:
            continue
        cur, j = ins.args[-1], k + 1
        while j < len(steps) and steps[j].args and steps[j].args[0] == cur and (
                sub.operators[steps[j].op_index][0] in _VIEWS or _keeps_layout(sub, steps[j])):
            cur, j = steps[j].args[-1], j + 1
        if (j < len(steps) and sub.operators[steps[j].op_index] == ("aten::add", "Tensor")
                and cur in steps[j].args[:2] and ins.args[1] in lifetimes):
            lifetimes[ins.args[1]].last_use = max(lifetimes[ins.args[1]].last_use, j)


def _pieces_in_place(sub: Plan, shared: dict[int, tuple[int, int]], lifetimes: dict[int, Allocation]) -> None:
    """Plans the pieces of a cat whose output they fill contiguously (every dimension before the
    joined one has size 1: torch.stack of an RNN's steps, DenseNet's features at batch 1) in the
    output's memory, so the cat copies nothing. A piece moves with every value sharing its memory,
    where those fill exactly its bytes and none is a payload input or output."""
    boundary = set(sub.inputs) | set(sub.outputs)
    moved: set[int] = set()
    for ins in _kernels(sub.instructions):
        if sub.operators[ins.op_index] != ("aten::cat", "") or ins.num_outputs != 1:
            continue
        out = ins.args[-1]
        listed = sub.values[ins.args[0]]
        pieces = listed.payload if isinstance(listed, TensorListValue) else []
        o = sub.tensor(out)
        dim = _int_arg(sub, ins.args[1], 0) if len(ins.args) > 2 else 0
        if out not in shared or out in boundary or not o.sizes or dim is None:
            continue
        dim %= len(o.sizes)
        if any(s != 1 for s in o.sizes[:dim]) or len(set(pieces)) != len(pieces):
            continue
        base_root, base = shared[out]
        at = 0
        for t in pieces:
            spec = sub.tensor(t)
            size = nbytes(spec.dtype, spec.sizes)
            r: int | None = shared[t][0] if t in shared else None
            group = [i for i, (root, _) in shared.items() if root == r]
            fits = (r is not None and r not in moved and r != base_root and shared[t][1] == 0 and spec.dtype == o.dtype
                    and (base + at) % 16 == 0  # tensors start 16-byte aligned, as planned
                    and not boundary & set(group) and max(shared[i][1] + lifetimes[i].size for i in group) == size)
            if fits and r is not None:
                for i in group:
                    shared[i] = (base_root, base + at + shared[i][1])
                moved.add(r)
            at += size


def place(p: Plan, shared: dict[int, tuple[int, int]], lifetimes: dict[int, Allocation]) -> int:
    """Sets the memory offsets of `p`'s planned values, one allocation per group of values sharing
    memory (`shared`, from roots), living as long as its members; returns the buffer's size."""
    groups: dict[int, Allocation] = {}
    for i, (r, offset) in shared.items():
        a = lifetimes[i]
        g = groups.setdefault(r, Allocation(size=a.size, first_use=a.first_use, last_use=a.last_use))
        g.size = max(g.size, offset + a.size)
        g.first_use, g.last_use = min(g.first_use, a.first_use), max(g.last_use, a.last_use)
    size = plan(list(groups.values()))
    for i, (r, offset) in shared.items():
        p.tensor(i).mem_offset = groups[r].offset + offset
    return size


def drop_unused_constants(plans: list[Plan], constants: bytes, mutable: list[MutableBuffer] | None = None) -> bytes:
    """The constant segment holding only what `plans` (sharing `constants`) still read after
    delegation, and the initial data of the mutable buffers `mutable`; offsets in the plans and
    buffers are updated, and data two methods shared stays shared."""
    blob = bytearray()
    moved: dict[tuple[int, int], int] = {}  # (old offset, bytes) -> new offset

    def keep(offset: int, size: int) -> int:
        if (offset, size) not in moved:
            moved[offset, size] = (len(blob) + 15) // 16 * 16
            blob.extend(b"\0" * (moved[offset, size] - len(blob)))
            blob.extend(constants[offset:offset + size])
        return moved[offset, size]

    for buffer in mutable or []:
        if buffer.data_segment == 0:
            buffer.data_offset = keep(buffer.data_offset, buffer.size)
    for p in plans:
        used: set[int] = set(p.outputs)
        for ins in p.instructions:
            for a in ins.args:
                used.update([a, *p.tensors_in(a)])
        for i, v in enumerate(p.values):
            if not isinstance(v, TensorValue) or v.payload.data_segment != 0:
                continue
            t = v.payload
            if i not in used:  # now read only inside a delegate: no data here
                t.data_segment, t.data_offset = -1, 0
                continue
            t.data_offset = keep(t.data_offset, nbytes(t.dtype, t.sizes))
    return bytes(blob)


# An XnnpackBackend call costs microseconds of its own (setting the runtime up, waking the pool's
# threads): where a method is split into several calls, a run doing less work than this
# (multiply-adds, or elements for other operators) stays with the CPU kernels, which are faster
# there (an LSTM's per-step products between its cell kernels).
_MIN_XNNPACK_WORK = 1 << 15


def _work(p: Plan, lo: int, hi: int) -> int:
    """Multiply-adds of the matrix products and convolutions of instructions [lo, hi) of `p`, plus
    the elements every other instruction writes."""
    total = 0
    for ins in _kernels(p.instructions[lo:hi]):
        name = p.operators[ins.op_index][0]
        outs = [t for a in ins.args[len(ins.args) - ins.num_outputs:] for t in p.tensors_in(a)
                if isinstance(p.values[t], TensorValue)]
        elements = sum(math.prod(p.tensor(t).sizes) for t in outs)
        if name in ("aten::addmm", "aten::mm", "aten::bmm"):
            first = p.tensor(ins.args[1 if name == "aten::addmm" else 0])
            elements *= first.sizes[-1] if first.sizes else 1
        elif name == "aten::convolution":
            weight = p.tensor(ins.args[1])
            elements *= math.prod(weight.sizes[1:])
        total += elements
    return total


def _check_state_delegated(p: Plan, reasons: list[str]) -> None:
    """Raises where program state that an instruction CudaBackend runs (reasons[k] == '') reads or
    writes is also read or written by one it does not: CudaBackend keeps that state on the device."""
    on_device: set[int] = set()
    on_host: dict[int, str] = {}
    for ins, why in zip(_kernels(p.instructions), reasons):
        for t in (t for a in ins.args for t in p.tensors_in(a) if _is_state(p.values[t])):
            if why:
                on_host.setdefault(t, f"{_op_name(p, ins)} ({why})")
            else:
                on_device.add(t)
    mixed = sorted(on_device & set(on_host))
    if mixed:
        raise ExportError(f"method {p.name}: CudaBackend keeps the program state it updates on the device, but "
                          f"{on_host[mixed[0]]} would read or write it on the CPU")


def delegate(p: Plan, constants: bytes, segments: list[bytes], backends: list[str],
             compile_specs: dict[str, dict[str, bytes]] | None = None,
             mutable: list[MutableBuffer] | None = None) -> tuple[dict[str, int], dict[str, str]]:
    """Rewrites `p` in place, each instruction going to the first of `backends` that runs it;
    appends payloads to `segments` (the constants, segments[0], stay whole for the program's other
    methods: drop_unused_constants trims them after the last). Each delegate call carries its
    backend's `compile_specs`. `mutable`: the program's mutable buffers. Returns the number of
    delegate calls per backend, and for each operator left to the CPU kernels the first backend's
    first reason."""
    reasons = {b: refusals(p, constants, mutable, b) for b in backends}
    labels: list[str | None] = []
    refused: dict[str, str] = {}
    for k, ins in enumerate(_kernels(p.instructions)):
        label = next((b for b in backends if not reasons[b][k]), None)
        labels.append(label)
        if label is None:
            refused.setdefault(_op_name(p, ins), reasons[backends[0]][k])
    xnnpack_runs = [(lo, hi) for lo, hi, backend in _spans(labels) if backend == XNNPACK]
    if len(xnnpack_runs) > 1:  # a method delegated whole is one call, however small
        for lo, hi in xnnpack_runs:
            if _work(p, lo, hi) < _MIN_XNNPACK_WORK:
                labels[lo:hi] = [None] * (hi - lo)
                for ins in _kernels(p.instructions[lo:hi]):
                    refused.setdefault(_op_name(p, ins), "too little work for an XnnpackBackend call")
    if CUDA in backends:
        _check_state_delegated(p, ["" if label == CUDA else reasons[CUDA][k] or "not CudaBackend's"
                                   for k, label in enumerate(labels)])
    calls = {b: 0 for b in backends}
    spans = _spans(labels)
    if not spans:
        return calls, refused
    new_instructions = []
    previous = 0
    for lo, hi, backend in spans:
        new_instructions += p.instructions[previous:lo]
        payload, inputs, outputs = _subprogram(p, constants, lo, hi, mutable, backend)
        segments.append(payload)
        p.delegates.append(Delegate(backend_id=backend, segment=len(segments) - 1,
                                    compile_specs=dict((compile_specs or {}).get(backend, {}))))
        new_instructions.append(DelegateCall(len(p.delegates) - 1, inputs + outputs))
        calls[backend] += 1
        previous = hi
    new_instructions += p.instructions[previous:]
    p.instructions = new_instructions
    # Inputs only CudaBackend calls read are handed over as they are (host or device memory).
    readers: dict[int, list] = {}
    for instruction in p.instructions:
        for a in instruction.args:
            readers.setdefault(a, []).append(instruction)
    for i in p.inputs:
        users = readers.get(i, [])
        if (users and all(isinstance(u, DelegateCall) and p.delegates[u.delegate_index].backend_id == CUDA
                          for u in users) and i not in p.outputs):
            spec = p.tensor(i)
            spec.mem_id, spec.mem_offset, spec.device = -1, 0, 1
    return calls, refused
