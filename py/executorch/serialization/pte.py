"""Writes .pte files: a 32-byte container header, the FlatBuffer (schema/program.fbs), then the
16-byte-aligned data segments. docs/program_format.md describes the layout; the runtime's
Program::load reads it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Literal, Union

import flatbuffers
import numpy as np

from executorch.serialization import program_generated as fb

CONTAINER_MAGIC = b"XTPF"
CONTAINER_VERSION = 1
PROGRAM_VERSION = 1
HEADER_SIZE = 32
SEGMENT_ALIGNMENT = 16


@dataclass
class TensorSpec:
    """A tensor value: dtype code (PyTorch's ScalarType), sizes, and where its bytes live."""

    dtype: int
    sizes: list[int]
    data_segment: int = -1
    data_offset: int = 0
    mem_id: int = -1
    mem_offset: int = 0
    device: int = 0  # 0 CPU, 1 CUDA
    device_index: int = 0
    mutable_buffer: int = -1  # the whole of ProgramSpec.mutable_buffers[mutable_buffer]
    # Per dimension, the Plan.size_expressions entry giving its size at each call, or -1 where
    # `sizes` holds it; `sizes` is then the bound. Empty: a fixed shape.
    dynamic_sizes: list[int] = field(default_factory=list)


# Values, one class per kind: `kind` names it (as the runtime's EValue tags do), `payload` holds it.
@dataclass
class NullValue:
    kind: Literal["null"] = field(default="null", init=False)
    payload: None = field(default=None, init=False)


@dataclass
class IntValue:
    payload: int
    kind: Literal["int"] = field(default="int", init=False)
    expression: int = -1  # a Plan.size_expressions entry computing it at each call


@dataclass
class DoubleValue:
    payload: float
    kind: Literal["double"] = field(default="double", init=False)


@dataclass
class BoolValue:
    payload: bool
    kind: Literal["bool"] = field(default="bool", init=False)


@dataclass
class StringValue:
    payload: str
    kind: Literal["string"] = field(default="string", init=False)


@dataclass
class TensorValue:
    payload: TensorSpec
    kind: Literal["tensor"] = field(default="tensor", init=False)


@dataclass
class IntListValue:
    payload: list[int]
    kind: Literal["int_list"] = field(default="int_list", init=False)
    expressions: list[int] = field(default_factory=list)  # empty, or per item as IntValue.expression


@dataclass
class DoubleListValue:
    payload: list[float]
    kind: Literal["double_list"] = field(default="double_list", init=False)


@dataclass
class BoolListValue:
    payload: list[bool]
    kind: Literal["bool_list"] = field(default="bool_list", init=False)


@dataclass
class TensorListValue:
    payload: list[int]  # indices of tensor values
    kind: Literal["tensor_list"] = field(default="tensor_list", init=False)


Value = Union[NullValue, IntValue, DoubleValue, BoolValue, StringValue, TensorValue, IntListValue, DoubleListValue,
              BoolListValue, TensorListValue]


@dataclass
class KernelCall:
    op_index: int
    args: list[int]
    num_outputs: int = 1  # the last num_outputs args are outputs (for the exporter; not stored)


@dataclass
class DelegateCall:
    delegate_index: int
    args: list[int]


@dataclass
class Delegate:
    backend_id: str
    segment: int  # payload segment index
    compile_specs: dict[str, bytes] = field(default_factory=dict)


@dataclass
class SymbolicSize:
    """Dimension `dim` of input `input` (an index into Plan.inputs), which varies between calls within
    [min, max]; the input's tensor declares max."""

    input: int
    dim: int
    min: int
    max: int


# Opcodes of a size expression: a program for a stack of int64 (docs/program_format.md). CONST and
# SYMBOL take the next entry as their operand; the others pop b, then a, and push a op b.
OP_CONST, OP_SYMBOL, OP_ADD, OP_MUL, OP_FLOORDIV, OP_MOD, OP_MAX, OP_MIN = range(8)


@dataclass
class Plan:
    name: str
    values: list[Value] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    instructions: list[KernelCall | DelegateCall] = field(default_factory=list)
    operators: list[tuple[str, str]] = field(default_factory=list)
    delegates: list[Delegate] = field(default_factory=list)
    buffer_sizes: list[int] = field(default_factory=list)
    symbols: list[SymbolicSize] = field(default_factory=list)
    size_expressions: list[list[int]] = field(default_factory=list)

    def tensor(self, index: int) -> TensorSpec:
        """Value `index`, a tensor (ValueError for another kind)."""
        v = self.values[index]
        if not isinstance(v, TensorValue):
            raise ValueError(f"value {index} is a {v.kind}, not a tensor")
        return v.payload

    def tensors_in(self, index: int) -> list[int]:
        """The tensor values value `index` stands for: itself, or a tensor list's items."""
        v = self.values[index]
        return v.payload if isinstance(v, TensorListValue) else [index]


@dataclass
class MutableBuffer:
    """Program state the methods update in place: `size` bytes, starting as `size` bytes at
    data_offset in segment data_segment, or zeros when data_segment is -1."""

    name: str
    size: int
    data_segment: int = -1
    data_offset: int = 0


@dataclass
class ProgramSpec:
    plans: list[Plan]
    segments: list[bytes] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)
    mutable_buffers: list[MutableBuffer] = field(default_factory=list)


def _offsets_vector(b: flatbuffers.Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _numbers(b: flatbuffers.Builder, items: list, dtype: str) -> int:
    return b.CreateNumpyVector(np.asarray(items, dtype=dtype))


def _tensor(b: flatbuffers.Builder, t: TensorSpec) -> int:
    sizes = _numbers(b, t.sizes, "<i8")
    dynamic = _numbers(b, t.dynamic_sizes, "<i4") if t.dynamic_sizes else None
    fb.TensorStart(b)
    fb.TensorAddScalarType(b, t.dtype)
    fb.TensorAddSizes(b, sizes)
    fb.TensorAddDataSegment(b, t.data_segment)
    fb.TensorAddDataOffset(b, t.data_offset)
    fb.TensorAddMemId(b, t.mem_id)
    fb.TensorAddMemOffset(b, t.mem_offset)
    fb.TensorAddDevice(b, t.device)
    fb.TensorAddDeviceIndex(b, t.device_index)
    fb.TensorAddMutableBuffer(b, t.mutable_buffer)
    if dynamic is not None:
        fb.TensorAddDynamicSizes(b, dynamic)
    return fb.TensorEnd(b)


def _value(b: flatbuffers.Builder, v: Value) -> int:
    if isinstance(v, NullValue):
        fb.NullStart(b)
        off, typ = fb.NullEnd(b), fb.KernelTypes.Null
    elif isinstance(v, IntValue):
        fb.IntStart(b)
        fb.IntAddIntVal(b, int(v.payload))
        fb.IntAddExpression(b, v.expression)
        off, typ = fb.IntEnd(b), fb.KernelTypes.Int
    elif isinstance(v, DoubleValue):
        fb.DoubleStart(b)
        fb.DoubleAddDoubleVal(b, float(v.payload))
        off, typ = fb.DoubleEnd(b), fb.KernelTypes.Double
    elif isinstance(v, BoolValue):
        fb.BoolStart(b)
        fb.BoolAddBoolVal(b, bool(v.payload))
        off, typ = fb.BoolEnd(b), fb.KernelTypes.Bool
    elif isinstance(v, StringValue):
        s = b.CreateString(v.payload)
        fb.StringStart(b)
        fb.StringAddStringVal(b, s)
        off, typ = fb.StringEnd(b), fb.KernelTypes.String
    elif isinstance(v, TensorValue):
        off, typ = _tensor(b, v.payload), fb.KernelTypes.Tensor
    elif isinstance(v, IntListValue):
        items = _numbers(b, v.payload, "<i8")
        exprs = _numbers(b, v.expressions, "<i4") if v.expressions else None
        fb.IntListStart(b)
        fb.IntListAddItems(b, items)
        if exprs is not None:
            fb.IntListAddExpressions(b, exprs)
        off, typ = fb.IntListEnd(b), fb.KernelTypes.IntList
    elif isinstance(v, DoubleListValue):
        items = _numbers(b, v.payload, "<f8")
        fb.DoubleListStart(b)
        fb.DoubleListAddItems(b, items)
        off, typ = fb.DoubleListEnd(b), fb.KernelTypes.DoubleList
    elif isinstance(v, BoolListValue):
        items = _numbers(b, v.payload, "u1")
        fb.BoolListStart(b)
        fb.BoolListAddItems(b, items)
        off, typ = fb.BoolListEnd(b), fb.KernelTypes.BoolList
    elif isinstance(v, TensorListValue):
        items = _numbers(b, v.payload, "<i4")
        fb.TensorListStart(b)
        fb.TensorListAddItems(b, items)
        off, typ = fb.TensorListEnd(b), fb.KernelTypes.TensorList
    else:
        raise ValueError(f"unknown value {v!r}")
    fb.EValueStart(b)
    fb.EValueAddValType(b, typ)
    fb.EValueAddVal(b, off)
    return fb.EValueEnd(b)


def _instruction(b: flatbuffers.Builder, ins: KernelCall | DelegateCall) -> int:
    args = _numbers(b, ins.args, "<i4")
    if isinstance(ins, KernelCall):
        fb.KernelCallStart(b)
        fb.KernelCallAddOpIndex(b, ins.op_index)
        fb.KernelCallAddArgs(b, args)
        off, typ = fb.KernelCallEnd(b), fb.InstructionArguments.KernelCall
    else:
        fb.DelegateCallStart(b)
        fb.DelegateCallAddDelegateIndex(b, ins.delegate_index)
        fb.DelegateCallAddArgs(b, args)
        off, typ = fb.DelegateCallEnd(b), fb.InstructionArguments.DelegateCall
    fb.InstructionStart(b)
    fb.InstructionAddInstrArgsType(b, typ)
    fb.InstructionAddInstrArgs(b, off)
    return fb.InstructionEnd(b)


def _delegate(b: flatbuffers.Builder, d: Delegate) -> int:
    specs = []
    for key, value in d.compile_specs.items():
        k, v = b.CreateString(key), b.CreateByteVector(value)
        fb.CompileSpecStart(b)
        fb.CompileSpecAddKey(b, k)
        fb.CompileSpecAddValue(b, v)
        specs.append(fb.CompileSpecEnd(b))
    specs_vec = _offsets_vector(b, specs)
    fb.BackendDelegateDataReferenceStart(b)
    fb.BackendDelegateDataReferenceAddLocation(b, fb.DataLocation.SEGMENT)
    fb.BackendDelegateDataReferenceAddIndex(b, d.segment)
    ref = fb.BackendDelegateDataReferenceEnd(b)
    backend_id = b.CreateString(d.backend_id)
    fb.BackendDelegateStart(b)
    fb.BackendDelegateAddId(b, backend_id)
    fb.BackendDelegateAddProcessed(b, ref)
    fb.BackendDelegateAddCompileSpecs(b, specs_vec)
    return fb.BackendDelegateEnd(b)


def _plan(b: flatbuffers.Builder, p: Plan) -> int:
    values = _offsets_vector(b, [_value(b, v) for v in p.values])
    instructions = _offsets_vector(b, [_instruction(b, i) for i in p.instructions])
    fb.ChainStart(b)
    fb.ChainAddInstructions(b, instructions)
    chain = fb.ChainEnd(b)
    chains = _offsets_vector(b, [chain])
    operators = []
    for name, overload in p.operators:
        n, o = b.CreateString(name), b.CreateString(overload)
        fb.OperatorStart(b)
        fb.OperatorAddName(b, n)
        fb.OperatorAddOverload(b, o)
        operators.append(fb.OperatorEnd(b))
    ops = _offsets_vector(b, operators)
    delegates = _offsets_vector(b, [_delegate(b, d) for d in p.delegates])
    inputs = _numbers(b, p.inputs, "<i4")
    outputs = _numbers(b, p.outputs, "<i4")
    sizes = _numbers(b, p.buffer_sizes, "<u8")
    symbols = []
    for sym in p.symbols:
        fb.SymbolicSizeStart(b)
        fb.SymbolicSizeAddInput(b, sym.input)
        fb.SymbolicSizeAddDim(b, sym.dim)
        fb.SymbolicSizeAddMin(b, sym.min)
        fb.SymbolicSizeAddMax(b, sym.max)
        symbols.append(fb.SymbolicSizeEnd(b))
    expressions = []
    for program in p.size_expressions:
        code = _numbers(b, program, "<i8")
        fb.SizeExpressionStart(b)
        fb.SizeExpressionAddProgram(b, code)
        expressions.append(fb.SizeExpressionEnd(b))
    symbols_vec = _offsets_vector(b, symbols) if symbols else None
    expressions_vec = _offsets_vector(b, expressions) if expressions else None
    name = b.CreateString(p.name)
    fb.ExecutionPlanStart(b)
    fb.ExecutionPlanAddName(b, name)
    fb.ExecutionPlanAddValues(b, values)
    fb.ExecutionPlanAddInputs(b, inputs)
    fb.ExecutionPlanAddOutputs(b, outputs)
    fb.ExecutionPlanAddChains(b, chains)
    fb.ExecutionPlanAddOperators(b, ops)
    fb.ExecutionPlanAddDelegates(b, delegates)
    fb.ExecutionPlanAddNonConstBufferSizes(b, sizes)
    if symbols_vec is not None:
        fb.ExecutionPlanAddSymbols(b, symbols_vec)
    if expressions_vec is not None:
        fb.ExecutionPlanAddSizeExpressions(b, expressions_vec)
    return fb.ExecutionPlanEnd(b)


def _align(n: int, alignment: int = SEGMENT_ALIGNMENT) -> int:
    return (n + alignment - 1) // alignment * alignment


def serialize(program: ProgramSpec, segment_table: list[tuple[int, int]] | None = None) -> bytes:
    """The .pte bytes of `program`. `segment_table` replaces the (offset, size) entries recorded for
    the segments, which are still laid out as usual (tests use it to write misplaced segments)."""
    b = flatbuffers.Builder(1024)
    plans = _offsets_vector(b, [_plan(b, p) for p in program.plans])
    offsets, at = [], 0
    for seg in program.segments:
        offsets.append((at, len(seg)))
        at = _align(at + len(seg))
    tables = []
    for off, size in segment_table if segment_table is not None else offsets:
        fb.DataSegmentStart(b)
        fb.DataSegmentAddOffset(b, off)
        fb.DataSegmentAddSize(b, size)
        tables.append(fb.DataSegmentEnd(b))
    segments = _offsets_vector(b, tables)
    metadata = []
    for key, value in program.metadata.items():
        k, v = b.CreateString(key), b.CreateString(value)
        fb.ProgramMetadataStart(b)
        fb.ProgramMetadataAddKey(b, k)
        fb.ProgramMetadataAddValue(b, v)
        metadata.append(fb.ProgramMetadataEnd(b))
    meta = _offsets_vector(b, metadata)
    buffers = []
    for buf in program.mutable_buffers:
        name = b.CreateString(buf.name)
        fb.MutableBufferStart(b)
        fb.MutableBufferAddName(b, name)
        fb.MutableBufferAddSize(b, buf.size)
        fb.MutableBufferAddDataSegment(b, buf.data_segment)
        fb.MutableBufferAddDataOffset(b, buf.data_offset)
        buffers.append(fb.MutableBufferEnd(b))
    mutable = _offsets_vector(b, buffers) if buffers else None
    fb.ProgramStart(b)
    fb.ProgramAddVersion(b, PROGRAM_VERSION)
    fb.ProgramAddExecutionPlan(b, plans)
    fb.ProgramAddSegments(b, segments)
    fb.ProgramAddMetadata(b, meta)
    if mutable is not None:
        fb.ProgramAddMutableBuffers(b, mutable)
    b.Finish(fb.ProgramEnd(b), file_identifier=b"XTP1")
    flat = bytes(b.Output())
    segment_base = _align(HEADER_SIZE + len(flat))
    body = bytearray()
    for (off, _), seg in zip(offsets, program.segments):
        body.extend(b"\0" * (off - len(body)))
        body.extend(seg)
    header = CONTAINER_MAGIC + struct.pack("<IQQQ", CONTAINER_VERSION, len(flat), segment_base, len(body))
    return header + flat + b"\0" * (segment_base - HEADER_SIZE - len(flat)) + bytes(body)


_KINDS = {
    fb.KernelTypes.Null: "null",
    fb.KernelTypes.Int: "int",
    fb.KernelTypes.Double: "double",
    fb.KernelTypes.Bool: "bool",
    fb.KernelTypes.String: "string",
    fb.KernelTypes.Tensor: "tensor",
    fb.KernelTypes.IntList: "int_list",
    fb.KernelTypes.DoubleList: "double_list",
    fb.KernelTypes.BoolList: "bool_list",
    fb.KernelTypes.TensorList: "tensor_list",
}


def _read_value(ev: Any) -> Value:
    kind = _KINDS.get(ev.ValType())
    if kind is None:
        raise ValueError(f"unknown value type {ev.ValType()}")
    if kind == "null":
        return NullValue()
    table = ev.Val()
    cls = {"int": fb.Int, "double": fb.Double, "bool": fb.Bool, "string": fb.String, "tensor": fb.Tensor,
           "int_list": fb.IntList, "double_list": fb.DoubleList, "bool_list": fb.BoolList,
           "tensor_list": fb.TensorList}[kind]
    obj: Any = cls()  # the generated reader of that table
    obj.Init(table.Bytes, table.Pos)
    if kind == "int":
        return IntValue(obj.IntVal(), expression=obj.Expression())
    if kind == "double":
        return DoubleValue(obj.DoubleVal())
    if kind == "bool":
        return BoolValue(bool(obj.BoolVal()))
    if kind == "string":
        return StringValue(obj.StringVal().decode())
    if kind == "tensor":
        return TensorValue(TensorSpec(dtype=obj.ScalarType(), sizes=[obj.Sizes(j) for j in range(obj.SizesLength())],
                                      data_segment=obj.DataSegment(), data_offset=obj.DataOffset(), mem_id=obj.MemId(),
                                      mem_offset=obj.MemOffset(), device=obj.Device(), device_index=obj.DeviceIndex(),
                                      mutable_buffer=obj.MutableBuffer(),
                                      dynamic_sizes=[obj.DynamicSizes(j) for j in range(obj.DynamicSizesLength())]))
    items = [obj.Items(j) for j in range(obj.ItemsLength())]
    if kind == "bool_list":
        return BoolListValue([bool(i) for i in items])
    if kind == "double_list":
        return DoubleListValue(items)
    if kind == "int_list":
        return IntListValue(items, expressions=[obj.Expressions(j) for j in range(obj.ExpressionsLength())])
    return TensorListValue(items)


def _read_plan(ep: Any) -> Plan:
    p = Plan(name=ep.Name().decode())
    p.values = [_read_value(ep.Values(j)) for j in range(ep.ValuesLength())]
    p.inputs = [ep.Inputs(j) for j in range(ep.InputsLength())]
    p.outputs = [ep.Outputs(j) for j in range(ep.OutputsLength())]
    p.operators = [(o.Name().decode(), (o.Overload() or b"").decode())
                   for o in (ep.Operators(j) for j in range(ep.OperatorsLength()))]
    p.buffer_sizes = [ep.NonConstBufferSizes(j) for j in range(ep.NonConstBufferSizesLength())]
    p.symbols = [SymbolicSize(s.Input(), s.Dim(), s.Min(), s.Max())
                 for s in (ep.Symbols(j) for j in range(ep.SymbolsLength()))]
    p.size_expressions = [[e.Program(k) for k in range(e.ProgramLength())]
                          for e in (ep.SizeExpressions(j) for j in range(ep.SizeExpressionsLength()))]
    for j in range(ep.DelegatesLength()):
        d = ep.Delegates(j)
        ref = d.Processed()
        if ref.Location() != fb.DataLocation.SEGMENT:
            raise ValueError("inline delegate payloads are not supported")
        specs = {}
        for k in range(d.CompileSpecsLength()):
            s = d.CompileSpecs(k)
            specs[s.Key().decode()] = bytes(s.ValueAsNumpy()) if s.ValueLength() else b""
        p.delegates.append(Delegate(backend_id=d.Id().decode(), segment=ref.Index(), compile_specs=specs))
    for c in range(ep.ChainsLength()):
        chain = ep.Chains(c)
        for j in range(chain.InstructionsLength()):
            ins = chain.Instructions(j)
            table = ins.InstrArgs()
            if ins.InstrArgsType() == fb.InstructionArguments.KernelCall:
                kernel = fb.KernelCall()
                kernel.Init(table.Bytes, table.Pos)
                # Outputs are not recorded in the file; one is as good a guess as any for re-serializing.
                p.instructions.append(KernelCall(kernel.OpIndex(), [kernel.Args(a) for a in range(kernel.ArgsLength())]))
            elif ins.InstrArgsType() == fb.InstructionArguments.DelegateCall:
                call = fb.DelegateCall()
                call.Init(table.Bytes, table.Pos)
                p.instructions.append(DelegateCall(call.DelegateIndex(), [call.Args(a) for a in range(call.ArgsLength())]))
            else:
                raise ValueError(f"unsupported instruction type {ins.InstrArgsType()}")
    return p


def deserialize(data: bytes) -> ProgramSpec:
    """The ProgramSpec of well-formed .pte bytes (tools and tests; the runtime does its own checks).
    serialize(deserialize(b)) == b for files this module wrote."""
    magic, version, program_size, segment_base, segment_size = struct.unpack_from("<4sIQQQ", data, 0)
    if magic != CONTAINER_MAGIC or version != CONTAINER_VERSION:
        raise ValueError("not a .pte container")
    flat = data[HEADER_SIZE:HEADER_SIZE + program_size]
    root = fb.Program.GetRootAs(flat, 0)
    segments = []
    for j in range(root.SegmentsLength()):
        s = root.Segments(j)
        start = segment_base + s.Offset()
        segments.append(bytes(data[start:start + s.Size()]))
    metadata = {}
    for j in range(root.MetadataLength()):
        m = root.Metadata(j)
        metadata[m.Key().decode()] = m.Value().decode()
    plans = [_read_plan(root.ExecutionPlan(j)) for j in range(root.ExecutionPlanLength())]
    mutable = [MutableBuffer(name=m.Name().decode(), size=m.Size(), data_segment=m.DataSegment(),
                             data_offset=m.DataOffset())
               for m in (root.MutableBuffers(j) for j in range(root.MutableBuffersLength()))]
    return ProgramSpec(plans=plans, segments=segments, metadata=metadata, mutable_buffers=mutable)
