"""export(..., quantize="int8"): int8 weights with per-channel scales, activations quantized per row
when the program runs (executorch::int8_linear). The CPU kernel is checked here against the torch
reference of the same arithmetic and against the float32 model; the CudaBackend payloads run on the
CPU runtime here and on a GPU in tools/gpu/verify.sh.

quantize="int4": weight-only int4 in groups (executorch::int4_linear), and quantize="int8_weight_only"
(executorch::int8_weight_linear): the CPU kernels against the torch reference (the same dequantized
weights, float32 arithmetic in another order: 1e-4 relative) at few rows (the dot-product path) and
many (the GEMM path), in float32 and bfloat16."""

from __future__ import annotations

import numpy as np
import pytest

from tests.flags import preload_cuda_runtime

torch = pytest.importorskip("torch", reason="torch is not installed in the test interpreter")
preload_cuda_runtime()

from executorch.export import ExportError, export  # noqa: E402
from executorch.export._quantize import (quantize_linear_int4, quantize_linear_int8,  # noqa: E402
                                         quantize_linear_int8_weight_only, unpack_int4)
from executorch.runtime import Runtime  # noqa: E402
from executorch.serialization.pte import deserialize  # noqa: E402
from tests.models.zoo import MODELS, fresh_inputs  # noqa: E402

INT8 = 1
# Against the torch reference: the same arithmetic, but the float32 layers between the int8 ones
# round differently here and there, which can move a quantized activation by one step.
REFERENCE_RTOL = 2e-3
# Against the float32 model: the quantization error itself (8-bit weights and activations).
FLOAT_RTOL = 6e-2


def scaled(err: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(err).max()) / max(1.0, float(np.abs(want).max()))


def run(pte: bytes, inputs) -> np.ndarray:
    return Runtime.get().load_program(pte).load_method().execute([x.numpy() for x in inputs])[0]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_int8_program_matches_the_reference_and_the_float_model(name: str) -> None:
    model, example = MODELS[name]()
    inputs = fresh_inputs(example, 3)
    quantized, count = quantize_linear_int8(model)
    with torch.no_grad():
        reference, float_out = quantized(*inputs).numpy(), model(*inputs).numpy()
    pte = export(model, example, quantize="int8")
    got = run(pte, inputs)
    assert got.shape == reference.shape
    to_reference, to_float = scaled(got - reference, reference), scaled(got - float_out, float_out)
    print(f"{name}: {count} int8 layers; |ours - reference| {to_reference:.2e}, |ours - float32| {to_float:.2e} "
          "(of max(1, max |expected|))")
    assert to_reference <= REFERENCE_RTOL and to_float <= FLOAT_RTOL
    # The weights are stored as int8: one int8 constant per layer, and the program shrinks.
    plan = deserialize(pte).plans[0]
    int8_constants = [v for v in plan.values if v.kind == "tensor" and v.payload.dtype == INT8 and v.payload.data_segment >= 0]
    assert len(int8_constants) == count > 0
    # and the program is smaller by most of the float32 weights' bytes (3/4 of them, less the scales).
    weight_bytes = sum(4 * m.weight.numel() for m in model.modules() if type(m) is torch.nn.Linear)
    saved = len(export(model, example)) - len(pte)
    assert saved >= 0.6 * weight_bytes, (saved, weight_bytes)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_int8_cuda_export_is_one_payload_that_computes_the_quantized_model(name: str) -> None:
    model, example = MODELS[name]()
    spec = deserialize(export(model, example, backend="cuda", quantize="int8"))
    assert spec.metadata["cuda_delegate_calls"] == "1"
    (call,) = spec.plans[0].instructions
    payload = spec.segments[spec.plans[0].delegates[call.delegate_index].segment]
    ops = {name for name, _ in deserialize(payload).plans[0].operators}
    assert "executorch::int8_linear" in ops and "aten::addmm" not in ops, ops
    quantized, _ = quantize_linear_int8(model)
    with torch.no_grad():
        want = quantized(*example).numpy()
    assert scaled(run(payload, example) - want, want) <= REFERENCE_RTOL


class _OddWidth(torch.nn.Module):
    """A layer of 6 input features (not a multiple of 4: CudaBackend's kernel reads groups of 4)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.Linear(6, 16), torch.nn.Linear(16, 4, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def test_layers_the_gpu_kernel_cannot_take_stay_on_the_cpu() -> None:
    model, example = _OddWidth(), (torch.randn(3, 6),)
    pte = export(model, example, backend="cuda", quantize="int8")
    plan = deserialize(pte).plans[0]
    cpu_ops = [plan.operators[i.op_index][0] for i in plan.instructions if hasattr(i, "op_index")]
    assert cpu_ops == ["executorch::int8_linear"] and deserialize(pte).metadata["cuda_delegate_calls"] == "1"
    # On the CPU alone (no bias on the second layer: the kernel's None path).
    quantized, _ = quantize_linear_int8(model)
    with torch.no_grad():
        want = quantized(*example).numpy()
    assert scaled(run(export(model, example, quantize="int8"), example) - want, want) <= 1e-6


def test_zero_rows_quantize_to_zero_and_ties_round_to_even() -> None:
    """An all-zero activation row has scale 0 (no division by zero); x * 127 / max|x| landing on .5
    rounds to even, as torch.round does."""
    layer = torch.nn.Linear(4, 1, bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, 1.0, 1.0, 0.0]]))
    x = torch.tensor([[0.0, 0.0, 0.0, 0.0], [254.0, 1.0, 3.0, 0.0]])  # 127/254 = 0.5: 0.5 -> 0, 1.5 -> 2
    got = run(export(layer, (x,), quantize="int8"), (x,))
    # Row 2: q = [127, 0, 2, 0] against the weight's [127, 127, 127, 0]: 127 * 129, times the scales
    # 254 / 127 and 1 / 127.
    want = np.float32(127 * 129) * np.float32(2.0) * np.float32(1 / 127)
    np.testing.assert_array_equal(got, np.array([[0.0], [want]], np.float32))


def test_quantize_errors() -> None:
    model, example = MODELS["mlp"]()
    with pytest.raises(ExportError, match="unknown quantize 'int2'"):
        export(model, example, quantize="int2")
    with pytest.raises(ExportError, match="group_size 32, 64 or 128, got 48"):
        export(model, example, quantize="int4", group_size=48)
    with pytest.raises(ExportError, match="no nn.Linear layer with input features a multiple of 128"):
        export(torch.nn.Linear(96, 4), (torch.randn(2, 96),), quantize="int4", group_size=128)
    with pytest.raises(ExportError, match="does not combine with dtype"):
        export(model, example, backend="cuda", dtype=torch.float16, quantize="int8")
    with pytest.raises(ExportError, match="no nn.Linear"):
        export(torch.nn.ReLU(), (torch.randn(2, 4),), quantize="int8")


def test_the_callers_module_is_untouched() -> None:
    model, example = MODELS["mlp"]()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    export(model, example, quantize="int8")
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)


INT4_RTOL = 1e-4  # the same weights and float32 arithmetic as the reference, summed in another order
UINT8 = 0


@pytest.mark.parametrize("group_size", [32, 128])
@pytest.mark.parametrize("rows", [1, 3, 40])
def test_int4_program_matches_the_reference(group_size: int, rows: int) -> None:
    torch.manual_seed(group_size + rows)
    model = torch.nn.Sequential(torch.nn.Linear(256, 384), torch.nn.GELU(), torch.nn.Linear(384, 130, bias=False)).eval()
    x = torch.randn(rows, 256)
    quantized, count = quantize_linear_int4(model, group_size)
    assert count == 2
    with torch.no_grad():
        reference, float_out = quantized(x).numpy(), model(x).numpy()
    pte = export(model, (x,), quantize="int4", group_size=group_size)
    got = run(pte, (x,))
    assert scaled(got - reference, reference) <= INT4_RTOL
    assert scaled(got - float_out, float_out) <= 0.2  # 4-bit weights: the quantization error itself
    plan = deserialize(pte).plans[0]
    packed = [v for v in plan.values if v.kind == "tensor" and v.payload.dtype == UINT8 and v.payload.data_segment >= 0]
    assert sorted(tuple(v.payload.sizes) for v in packed) == [(130, 192), (384, 128)]


def test_int4_packing_round_trips_and_zero_groups_stay_zero() -> None:
    layer = torch.nn.Linear(64, 3, bias=False)
    with torch.no_grad():
        layer.weight.zero_()
        layer.weight[0, :32] = torch.linspace(-7, 7, 32)  # scale 1: the values themselves, rounded
        layer.weight[1] = 0.5
    q, _ = quantize_linear_int4(layer, 32)
    values = unpack_int4(q.packed)
    assert values[0, :32].tolist() == torch.round(torch.linspace(-7, 7, 32)).to(torch.int16).tolist()
    assert values[2].abs().sum() == 0 and q.scales[2].tolist() == [1.0, 1.0]
    x = torch.randn(2, 64)
    with torch.no_grad():
        np.testing.assert_allclose(run(export(layer, (x,), quantize="int4"), (x,)), q(x).numpy(), rtol=0, atol=1e-4)


def test_int4_in_bfloat16_reads_float32_copies() -> None:
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 32)).eval()
    x = torch.randn(4, 64)
    quantized, _ = quantize_linear_int4(model.to(torch.bfloat16), 32)
    with torch.no_grad():
        reference = quantized(x.to(torch.bfloat16)).float().numpy()
    got = Runtime.get().load_program(export(model, (x,), dtype=torch.bfloat16, quantize="int4")).load_method().execute(
        [x.to(torch.bfloat16)])[0]
    assert got.dtype == torch.bfloat16
    assert scaled(got.float().numpy() - reference, reference) <= 1e-2  # bfloat16 rounding of the outputs


@pytest.mark.parametrize("rows", [1, 3, 40])
def test_int8_weight_only_program_matches_the_reference(rows: int) -> None:
    torch.manual_seed(rows)
    model = torch.nn.Sequential(torch.nn.Linear(100, 384), torch.nn.GELU(), torch.nn.Linear(384, 130, bias=False)).eval()
    x = torch.randn(rows, 100)  # 100 features: the dot product's tail past the last 8
    quantized, count = quantize_linear_int8_weight_only(model)
    assert count == 2
    with torch.no_grad():
        reference, float_out = quantized(x).numpy(), model(x).numpy()
    pte = export(model, (x,), quantize="int8_weight_only")
    got = run(pte, (x,))
    assert scaled(got - reference, reference) <= INT4_RTOL
    assert scaled(got - float_out, float_out) <= 2e-2  # 8-bit weights: the quantization error itself
    plan = deserialize(pte).plans[0]
    weights = [v for v in plan.values if v.kind == "tensor" and v.payload.dtype == INT8 and v.payload.data_segment >= 0]
    assert sorted(tuple(v.payload.sizes) for v in weights) == [(130, 384), (384, 100)]
    names = {plan.operators[i.op_index][0] for i in plan.instructions if hasattr(i, "op_index")}
    assert "executorch::int8_weight_linear" in names and "executorch::int8_linear" not in names


def test_int8_weight_only_in_bfloat16_reads_float32_copies() -> None:
    torch.manual_seed(6)
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 32)).eval()
    x = torch.randn(4, 64)
    quantized, _ = quantize_linear_int8_weight_only(model.to(torch.bfloat16))
    with torch.no_grad():
        reference = quantized(x.to(torch.bfloat16)).float().numpy()
    program = Runtime.get().load_program(export(model, (x,), dtype=torch.bfloat16, quantize="int8_weight_only"))
    got = program.load_method().execute([x.to(torch.bfloat16)])[0]
    assert got.dtype == torch.bfloat16
    assert scaled(got.float().numpy() - reference, reference) <= 1e-2  # bfloat16 rounding of the outputs


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("quantize", ["int4", "int8_weight_only"])
def test_weight_only_cuda_export_is_one_payload_of_the_quantized_layers(quantize: str, dtype: torch.dtype) -> None:
    """With backend="cuda" the weight-only layers are CudaBackend's (its GEMV and dequantizing
    kernels run on a GPU in tools/gpu/ops_check.py); the float32 payload, run on the CPU runtime,
    computes the quantized model."""
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 32, bias=False)).eval()
    x = torch.randn(5, 64)
    spec = deserialize(export(model, (x,), backend="cuda", dtype=dtype, quantize=quantize))
    assert spec.metadata["cuda_delegate_calls"] == "1"
    (call,) = spec.plans[0].instructions
    payload = spec.segments[spec.plans[0].delegates[call.delegate_index].segment]
    op = "executorch::int4_linear" if quantize == "int4" else "executorch::int8_weight_linear"
    assert [name for name, _ in deserialize(payload).plans[0].operators].count(op) == 1  # one operator, both layers
    if dtype != torch.float32:  # the CPU runs the payload's float32 form only
        return
    quantized, count = (quantize_linear_int4(model, 32) if quantize == "int4" else quantize_linear_int8_weight_only(model))
    assert count == 2
    with torch.no_grad():
        want = quantized(x).numpy()
    assert scaled(run(payload, (x,)) - want, want) <= INT4_RTOL
