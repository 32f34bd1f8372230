"""Broken .pte files derived from real programs: what a runtime loading user files must survive.

`cases(name, pte)` returns variants of one valid program. Each is either *invalid* (loading or
running it must fail with an error) or merely *damaged* (random byte flips: it may still run, but
must never crash). `write_corpus`/`read_corpus` store them in one file for the C++ and Python tests:

    magic "XTHC", u32 count, then per case: u16 name length, name, u8 invalid, u64 size, bytes
"""

from __future__ import annotations

import copy
import random
import struct
from dataclasses import dataclass
from typing import Callable, Iterator

from executorch.serialization import pte
from executorch.serialization.pte import DelegateCall, DoubleValue, KernelCall, ProgramSpec, StringValue, Value

CORPUS_MAGIC = b"XTHC"
I64_MAX = 2**63 - 1
U64_MAX = 2**64 - 1


@dataclass
class Case:
    name: str
    data: bytes
    invalid: bool = True


# --- Container and FlatBuffer level ------------------------------------------------------------


def _header(data: bytes) -> tuple[int, int, int, int]:
    _, version, program_size, segment_base, segment_size = struct.unpack_from("<4sIQQQ", data, 0)
    return version, program_size, segment_base, segment_size


def _patch(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def _container_cases(data: bytes) -> Iterator[Case]:
    _, program_size, segment_base, segment_size = _header(data)
    cuts = {0, 1, 4, 8, 16, 31, 32, 33, 36, 40, len(data) - 1, segment_base, segment_base - 1}
    cuts |= {32 + program_size * k // 24 for k in range(1, 24)}  # through the FlatBuffer
    if segment_size:
        cuts |= {segment_base + segment_size * k // 8 for k in range(1, 8)}  # through the segments
    for cut in sorted(c for c in cuts if 0 <= c < len(data)):
        yield Case(f"truncated_at_{cut}", data[:cut])
    yield Case("magic", b"PTEX" + data[4:])
    for v in (0, 2, 0xFFFFFFFF):
        yield Case(f"container_version_{v}", _patch(data, 4, "<I", v))
    for v in (0, len(data), I64_MAX, U64_MAX):
        yield Case(f"program_size_{v}", _patch(data, 8, "<Q", v))
    for v in (0, segment_base + 1, segment_base + 16 * ((len(data) - segment_base) // 16 + 1), U64_MAX & ~15):
        yield Case(f"segment_base_{v}", _patch(data, 16, "<Q", v))
    for v in (segment_size + 1, U64_MAX):
        yield Case(f"segment_size_{v}", _patch(data, 24, "<Q", v))
    yield Case("file_identifier", data[:36] + b"XTP9" + data[40:])
    # The root table offset (first word of the FlatBuffer) pointing outside it.
    yield Case("root_offset", _patch(data, 32, "<I", program_size + 4))
    yield Case("root_offset_negative", _patch(data, 32, "<I", 0xFFFFFFF0))


def _version_cases(data: bytes) -> Iterator[Case]:
    from executorch.serialization import program_generated as fb

    _, program_size, _, _ = _header(data)
    root = fb.Program.GetRootAs(data[32:32 + program_size], 0)
    o = root._tab.Offset(4)  # Program.version
    if o:
        for v in (0, 2, 0xFFFFFFFF):
            yield Case(f"program_version_{v}", _patch(data, 32 + root._tab.Pos + o, "<I", v))


def _segment_layout_cases(spec: ProgramSpec) -> Iterator[Case]:
    """Segment tables that misplace the (correctly laid out) segment bytes."""
    table = _layout(spec.segments)
    if not table:
        return
    end = table[-1][0] + table[-1][1]
    yield Case("segment_misaligned", pte.serialize(spec, [(1, table[0][1])] + table[1:]))
    yield Case("segment_past_area", pte.serialize(spec, table[:-1] + [(end + 16, table[-1][1])]))
    yield Case("segment_size_past_area", pte.serialize(spec, table[:-1] + [(table[-1][0], end + 1)]))
    yield Case("segment_size_huge", pte.serialize(spec, table[:-1] + [(table[-1][0], U64_MAX)]))
    filled = [i for i, (_, size) in enumerate(table) if size > 0]  # empty segments overlap nothing
    if len(filled) >= 2:
        i, j = filled[:2]
        overlapping = list(table)
        overlapping[j] = (table[i][0], table[j][1])
        yield Case("segments_overlap", pte.serialize(spec, overlapping))


def _layout(segments: list[bytes]) -> list[tuple[int, int]]:
    out, at = [], 0
    for s in segments:
        out.append((at, len(s)))
        at = (at + len(s) + 15) // 16 * 16
    return out


# --- Program level (values, instructions, memory, delegates) ------------------------------------

# Each mutation edits a ProgramSpec in place and returns False where it does not apply.
Mutation = Callable[[ProgramSpec], bool]
PROGRAM_MUTATIONS: dict[str, Mutation] = {}


def mutation(name: str) -> Callable[[Mutation], Mutation]:
    def register(fn: Mutation) -> Mutation:
        PROGRAM_MUTATIONS[name] = fn
        return fn
    return register


def _plan(spec: ProgramSpec):
    return spec.plans[0]


def _first_index(spec: ProgramSpec, pred: Callable[[Value], bool]) -> int | None:
    return next((i for i, v in enumerate(_plan(spec).values) if pred(v)), None)


def _is_planned(v: Value) -> bool:
    return v.kind == "tensor" and v.payload.mem_id >= 0


def _is_constant(v: Value) -> bool:
    return v.kind == "tensor" and v.payload.data_segment >= 0


def _kernel_calls(spec: ProgramSpec) -> list[KernelCall]:
    return [i for i in _plan(spec).instructions if isinstance(i, KernelCall)]


def _delegate_calls(spec: ProgramSpec) -> list[DelegateCall]:
    return [i for i in _plan(spec).instructions if isinstance(i, DelegateCall)]


def _tensor_edit(name: str, pred: Callable[[Value], bool], **fields) -> None:
    """Registers a mutation setting `fields` of the first tensor matching `pred` (a value or a
    function of the TensorSpec)."""
    def mutate(spec: ProgramSpec) -> bool:
        i = _first_index(spec, pred)
        if i is None:
            return False
        t = _plan(spec).values[i].payload
        for key, value in fields.items():
            setattr(t, key, value(t) if callable(value) else value)
        return True
    PROGRAM_MUTATIONS[name] = mutate


def _kernel_edit(name: str, edit: Callable[[KernelCall, ProgramSpec], None]) -> None:
    def mutate(spec: ProgramSpec) -> bool:
        calls = _kernel_calls(spec)
        return bool(calls) and edit(calls[0], spec) is None
    PROGRAM_MUTATIONS[name] = mutate


@mutation("no_methods")
def _no_methods(spec: ProgramSpec) -> bool:
    spec.plans.clear()
    return True


@mutation("input_index_past_end")
def _input_past_end(spec: ProgramSpec) -> bool:
    p = _plan(spec)
    if p.inputs:
        p.inputs[0] = len(p.values) + 5
    return bool(p.inputs)


@mutation("input_index_negative")
def _input_negative(spec: ProgramSpec) -> bool:
    p = _plan(spec)
    if p.inputs:
        p.inputs[0] = -1
    return bool(p.inputs)


@mutation("duplicate_input")
def _duplicate_input(spec: ProgramSpec) -> bool:
    p = _plan(spec)
    if p.inputs:
        p.inputs.append(p.inputs[0])
    return bool(p.inputs)


@mutation("output_index_past_end")
def _output_past_end(spec: ProgramSpec) -> bool:
    _plan(spec).outputs[0] = len(_plan(spec).values)
    return True


@mutation("output_index_negative")
def _output_negative(spec: ProgramSpec) -> bool:
    _plan(spec).outputs[0] = -7
    return True


@mutation("output_shape_lies")
def _output_shape_lies(spec: ProgramSpec) -> bool:
    """The first instruction's output declared with one element (its planned bytes unchanged)."""
    calls = _kernel_calls(spec)
    if not calls:
        return False
    v = _plan(spec).values[calls[0].args[-1]]
    if v.kind != "tensor" or v.payload.sizes in ([1], []):
        return False
    v.payload.sizes = [1] * len(v.payload.sizes)
    return True


@mutation("scalar_argument_is_a_string")
def _scalar_is_string(spec: ProgramSpec) -> bool:
    for ins in _kernel_calls(spec):
        for a in ins.args:
            if _plan(spec).values[a].kind in ("int_list", "int", "double"):
                _plan(spec).values[a] = StringValue("not a number")
                return True
    return False


@mutation("unknown_operator")
def _unknown_operator(spec: ProgramSpec) -> bool:
    """The operator of the first kernel call renamed (an operator no instruction uses is harmless)."""
    calls = _kernel_calls(spec)
    if calls:
        _plan(spec).operators[calls[0].op_index] = ("aten::no_such_op", "")
    return bool(calls)


def _attention_edit(name: str, edit: Callable[[KernelCall, ProgramSpec], None]) -> None:
    """Registers a mutation of the first scaled_dot_product_attention call (the encoder and the
    language model have one)."""
    def mutate(spec: ProgramSpec) -> bool:
        plan = _plan(spec)
        for ins in _kernel_calls(spec):
            if plan.operators[ins.op_index][0] == "aten::scaled_dot_product_attention":
                edit(ins, spec)
                return True
        return False
    PROGRAM_MUTATIONS[name] = mutate


def _set_value(spec: ProgramSpec, index: int, value: Value) -> None:
    _plan(spec).values[index] = value


# Training-only dropout, and the query replaced by the (None) scale: the kernels check both.
_attention_edit("attention_dropout", lambda k, s: _set_value(s, k.args[4], DoubleValue(0.5)))
_attention_edit("attention_query_is_none", lambda k, s: k.args.__setitem__(0, k.args[6]))


@mutation("tensor_list_item_past_end")
def _tensor_list_past_end(spec: ProgramSpec) -> bool:
    for v in _plan(spec).values:
        if v.kind == "tensor_list" and v.payload:
            v.payload[0] = len(_plan(spec).values) + 3
            return True
    return False


@mutation("no_planned_buffers")
def _no_buffers(spec: ProgramSpec) -> bool:
    _plan(spec).buffer_sizes.clear()
    return _first_index(spec, _is_planned) is not None


def _buffer_size(name: str, size: int) -> None:
    def mutate(spec: ProgramSpec) -> bool:
        sizes = _plan(spec).buffer_sizes
        if sizes:
            sizes[0] = size
        return bool(sizes)
    PROGRAM_MUTATIONS[name] = mutate


_buffer_size("planned_buffer_too_small", 8)
_buffer_size("planned_buffer_exabytes", 1 << 60)

_kernel_edit("kernel_arg_past_end", lambda k, s: k.args.__setitem__(0, 10**6))
_kernel_edit("kernel_arg_negative", lambda k, s: k.args.__setitem__(0, -2))
_kernel_edit("kernel_args_missing", lambda k, s: k.args.__delitem__(slice(1, None)))
_kernel_edit("kernel_args_none", lambda k, s: k.args.clear())
_kernel_edit("op_index_past_end", lambda k, s: setattr(k, "op_index", len(_plan(s).operators)))
_kernel_edit("op_index_negative", lambda k, s: setattr(k, "op_index", -1))

_tensor_edit("mem_id_past_end", _is_planned, mem_id=7)
_tensor_edit("mem_offset_past_buffer", _is_planned, mem_offset=1 << 40)
_tensor_edit("mem_offset_overflows", _is_planned, mem_offset=U64_MAX - 8)
_tensor_edit("mem_offset_misaligned", _is_planned, mem_offset=lambda t: t.mem_offset + 1)
_tensor_edit("data_segment_past_end", _is_constant, data_segment=99)
_tensor_edit("data_offset_past_segment", _is_constant, data_offset=1 << 40)
_tensor_edit("data_offset_overflows", _is_constant, data_offset=U64_MAX - 3)
_tensor_edit("constant_larger_than_its_bytes", _is_constant, sizes=lambda t: [s * 64 for s in t.sizes] or [4096])
_tensor_edit("size_negative", _is_planned, sizes=lambda t: [-1] + t.sizes[1:])
_tensor_edit("size_overflows", _is_planned, sizes=[1 << 40, 1 << 40, 1 << 40])
_tensor_edit("size_product_wraps", _is_planned, sizes=[1 << 32, 1 << 32])
_tensor_edit("seventeen_dims", _is_planned, sizes=[1] * 17)
_tensor_edit("dtype_unknown", _is_planned, dtype=99)
# float64 and 1024 times the elements: the bytes no longer fit where the plan put them.
_tensor_edit("dtype_bytes_disagree", _is_planned, dtype=7, sizes=lambda t: [s * 1024 for s in t.sizes] or [1 << 20])
_tensor_edit("device_unknown", _is_planned, device=9)


def _delegate_edit(name: str, edit: Callable[[ProgramSpec], None]) -> None:
    def mutate(spec: ProgramSpec) -> bool:
        if not _plan(spec).delegates:
            return False
        edit(spec)
        return True
    PROGRAM_MUTATIONS[name] = mutate


def _payload_of(spec: ProgramSpec) -> bytes:
    return spec.segments[_plan(spec).delegates[0].segment]


def _set_payload(spec: ProgramSpec, payload: bytes) -> None:
    spec.segments[_plan(spec).delegates[0].segment] = payload


_delegate_edit("delegate_index_past_end", lambda s: setattr(_delegate_calls(s)[0], "delegate_index", 5))
_delegate_edit("delegate_args_missing", lambda s: _delegate_calls(s)[0].args.pop())
_delegate_edit("delegate_unknown_backend", lambda s: setattr(_plan(s).delegates[0], "backend_id", "NoSuchBackend"))
_delegate_edit("delegate_payload_segment_past_end", lambda s: setattr(_plan(s).delegates[0], "segment", 99))
_delegate_edit("delegate_payload_truncated", lambda s: _set_payload(s, _payload_of(s)[: len(_payload_of(s)) // 2]))
_delegate_edit("delegate_payload_empty", lambda s: _set_payload(s, b""))
_delegate_edit("delegate_payload_garbage",
               lambda s: _set_payload(s, random.Random(7).randbytes(len(_payload_of(s)))))

def _state_edit(name: str, edit: Callable[[ProgramSpec], None]) -> None:
    """A lie about the program state (its mutable buffers), where the program has any."""
    def mutate(spec: ProgramSpec) -> bool:
        if not spec.mutable_buffers:
            return False
        edit(spec)
        return True
    PROGRAM_MUTATIONS[name] = mutate


_state_edit("state_buffer_missing", lambda s: s.mutable_buffers.pop())
_state_edit("state_buffer_shrunk", lambda s: setattr(s.mutable_buffers[0], "size", 4))
_state_edit("state_buffer_exabytes", lambda s: setattr(s.mutable_buffers[-1], "size", 1 << 60))
_state_edit("state_initial_data_past_segment", lambda s: setattr(s.mutable_buffers[0], "data_offset", 1 << 40))

# A delegate payload is a program too: these lies are also told inside the first payload.
PAYLOAD_MUTATIONS = ("input_index_past_end", "duplicate_input", "output_index_past_end", "output_shape_lies",
                     "scalar_argument_is_a_string", "unknown_operator", "kernel_arg_past_end", "kernel_args_missing",
                     "op_index_past_end", "mem_offset_past_buffer", "planned_buffer_too_small",
                     "planned_buffer_exabytes", "data_offset_past_segment", "constant_larger_than_its_bytes",
                     "size_overflows", "seventeen_dims", "dtype_unknown", "dtype_bytes_disagree",
                     "attention_dropout", "attention_query_is_none", "state_buffer_shrunk", "state_buffer_missing")


def _payload_lie(inner: Mutation) -> Mutation:
    def mutate(spec: ProgramSpec) -> bool:
        if not _plan(spec).delegates:
            return False
        payload = pte.deserialize(_payload_of(spec))
        if not inner(payload):
            return False
        _set_payload(spec, pte.serialize(payload))
        return True
    return mutate


for _name in PAYLOAD_MUTATIONS:
    PROGRAM_MUTATIONS["payload_" + _name] = _payload_lie(PROGRAM_MUTATIONS[_name])


@mutation("delegate_state_buffer_unknown")
@_payload_lie
def _payload_names_unknown_buffer(spec: ProgramSpec) -> bool:
    """The payload updates a buffer the program does not declare. Harmless in the payload as a
    program of its own (names only matter where CudaBackend looks its buffers up in the method's
    state), so this is a lie of the delegate call, not of the payload."""
    if not spec.mutable_buffers:
        return False
    spec.mutable_buffers[0].name = "no_such_buffer"
    return True


def _program_cases(spec: ProgramSpec) -> Iterator[Case]:
    for name, mutate in PROGRAM_MUTATIONS.items():
        s = copy.deepcopy(spec)
        if mutate(s):
            yield Case(name, pte.serialize(s))


def _flip_cases(data: bytes, count: int, seed: int) -> Iterator[Case]:
    rng = random.Random(seed)
    _, program_size, _, _ = _header(data)
    for k in range(count):
        out = bytearray(data)
        for _ in range(1 + k % 4):
            out[rng.randrange(32 + program_size)] ^= 1 << rng.randrange(8)
        yield Case(f"flipped_{k}", bytes(out), invalid=False)


def cases(name: str, data: bytes, flips: int = 60) -> list[Case]:
    """Every variant of the valid program `data`, named `name/<variant>`."""
    spec = pte.deserialize(data)
    assert pte.serialize(spec) == data, f"{name}: deserialize does not round-trip"
    out = [*_container_cases(data), *_version_cases(data), *_segment_layout_cases(spec), *_program_cases(spec),
           *_flip_cases(data, flips, seed=len(data))]
    return [Case(f"{name}/{c.name}", c.data, c.invalid) for c in out]


def write_corpus(path: str, items: list[Case]) -> None:
    with open(path, "wb") as f:
        f.write(CORPUS_MAGIC + struct.pack("<I", len(items)))
        for c in items:
            n = c.name.encode()
            f.write(struct.pack("<H", len(n)) + n + struct.pack("<BQ", int(c.invalid), len(c.data)) + c.data)


def read_corpus(path: str) -> list[Case]:
    data = open(path, "rb").read()
    assert data[:4] == CORPUS_MAGIC, path
    (count,), at, out = struct.unpack_from("<I", data, 4), 8, []
    for _ in range(count):
        (n,) = struct.unpack_from("<H", data, at)
        name = data[at + 2:at + 2 + n].decode()
        invalid, size = struct.unpack_from("<BQ", data, at + 2 + n)
        at += 2 + n + 9
        out.append(Case(name, data[at:at + size], bool(invalid)))
        at += size
    return out
