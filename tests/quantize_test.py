"""export(..., quantize="int8"): int8 weights with per-channel scales, activations quantized per row
when the program runs (executorch::int8_linear). The CPU kernel is checked here against the torch
reference of the same arithmetic and against the float32 model; the CudaBackend payloads run on the
CPU runtime here and on a GPU in tools/gpu/verify.sh."""

from __future__ import annotations

import numpy as np
import pytest

from tests.flags import preload_cuda_runtime

torch = pytest.importorskip("torch", reason="torch is not installed in the test interpreter")
preload_cuda_runtime()

from executorch.export import ExportError, export  # noqa: E402
from executorch.export._quantize import quantize_linear_int8  # noqa: E402
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
    with pytest.raises(ExportError, match="unknown quantize 'int4'"):
        export(model, example, quantize="int4")
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
