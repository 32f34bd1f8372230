"""nn.LSTM and nn.GRU exported as one input projection per layer and direction, then per time step a
matrix product and one executorch::lstm_cell / gru_cell call, or for CudaBackend one
executorch::lstm_layer / gru_layer per layer and direction (docs/program_format.md): every
configuration nn.LSTM and nn.GRU take, against torch, on the CPU kernels and as CudaBackend payloads
(which run on the CPU runtime here and on a GPU in tools/gpu/ops_check.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.flags import preload_cuda_runtime

torch = pytest.importorskip("torch", reason="torch is not installed in the test interpreter")
preload_cuda_runtime()

from executorch.export import export  # noqa: E402
from executorch.export._dtypes import nbytes  # noqa: E402
from executorch.runtime import Runtime  # noqa: E402
from executorch.serialization.pte import DelegateCall, deserialize  # noqa: E402

STEPS, BATCH, FEATURES, HIDDEN = 5, 3, 8, 12
# float32 against torch: the same arithmetic in another order (exp and tanh of the C library).
FLOAT32_RTOL = 1e-6
# float16 and bfloat16 programs round every step's state; the error grows with the steps.
HALF_RTOL = {torch.float16: 2e-3, torch.bfloat16: 2e-2}


class Recurrent(torch.nn.Module):
    """A recurrent layer returning every output it has (the sequence and the final states), fed an
    initial state where `with_state`."""

    def __init__(self, cell: str, with_state: bool, **kwargs: Any) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.rnn = getattr(torch.nn, cell)(FEATURES, HIDDEN, **kwargs)
        self.with_state = with_state

    def forward(self, x: torch.Tensor, *state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if not self.with_state:
            y, s = self.rnn(x)
        else:
            y, s = self.rnn(x, tuple(state) if len(state) == 2 else state[0])
        return (y, *(s if isinstance(s, tuple) else (s,)))


# name: (cell, constructor arguments, unbatched input, initial state as inputs)
CASES: dict[str, tuple[str, dict[str, Any], bool, bool]] = {
    "lstm": ("LSTM", {}, False, False),
    "lstm_2_layers_bidirectional_batch_first": ("LSTM", dict(num_layers=2, bidirectional=True, batch_first=True), False, False),
    "lstm_projected": ("LSTM", dict(proj_size=5, batch_first=True), False, False),
    "lstm_projected_bidirectional_no_bias": ("LSTM", dict(proj_size=5, bidirectional=True, bias=False), False, False),
    "lstm_unbatched": ("LSTM", {}, True, False),
    "lstm_initial_state": ("LSTM", dict(num_layers=2), False, True),
    "gru": ("GRU", {}, False, False),
    "gru_2_layers_bidirectional_batch_first": ("GRU", dict(num_layers=2, bidirectional=True, batch_first=True), False, False),
    "gru_no_bias": ("GRU", dict(bias=False), False, False),
    "gru_unbatched": ("GRU", {}, True, False),
    "gru_initial_state": ("GRU", dict(bidirectional=True), False, True),
}


def build(name: str) -> tuple[Recurrent, tuple[torch.Tensor, ...]]:
    cell, kwargs, unbatched, with_state = CASES[name]
    model = Recurrent(cell, with_state, **kwargs).eval()
    g = torch.Generator().manual_seed(1)
    batch_first = kwargs.get("batch_first", False)
    x = torch.randn(*((STEPS,) if unbatched else (BATCH, STEPS) if batch_first else (STEPS, BATCH)), FEATURES,
                    generator=g)
    inputs = [x]
    if with_state:
        layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
        h = torch.randn(layers, BATCH, kwargs.get("proj_size", 0) or HIDDEN, generator=g)
        inputs += [h, torch.randn(layers, BATCH, HIDDEN, generator=g)] if cell == "LSTM" else [h]
    return model, tuple(inputs)


def scaled(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max()) / max(1.0, float(np.abs(want).max()))


def run(pte: bytes, inputs: tuple[torch.Tensor, ...]) -> list[np.ndarray]:
    """The program's outputs in float32 (bfloat16 goes in and out as torch tensors, numpy having none)."""
    given = [x if x.dtype == torch.bfloat16 else x.numpy() for x in inputs]
    outs = Runtime.get().load_program(pte).load_method().execute(given)
    return [o.float().numpy() if isinstance(o, torch.Tensor) else np.asarray(o, np.float32) for o in outs]


def cell_calls(model: Recurrent, inputs: tuple[torch.Tensor, ...]) -> int:
    rnn = model.rnn
    steps = inputs[0].shape[1 if rnn.batch_first and inputs[0].dim() == 3 else 0]
    return steps * rnn.num_layers * (2 if rnn.bidirectional else 1)


def stacks_in_place(plan: Any) -> int:
    """How many cats of `plan` have every piece planned where it lies in the output (no copy)."""
    count = 0
    for ins in plan.instructions:
        if isinstance(ins, DelegateCall) or plan.operators[ins.op_index][0] != "aten::cat":
            continue
        out = plan.values[ins.args[-1]].payload
        at, fits = out.mem_offset, True
        for piece in (plan.values[i].payload for i in plan.values[ins.args[0]].payload):
            fits &= piece.mem_id == out.mem_id and piece.mem_offset == at
            at += nbytes(piece.dtype, piece.sizes)
        count += fits
    return count


def operators(plan: Any) -> list[str]:
    return [plan.operators[i.op_index][0] for i in plan.instructions if not isinstance(i, DelegateCall)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_step_is_one_cell_call_and_matches_torch(name: str) -> None:
    model, inputs = build(name)
    with torch.no_grad():
        want = [w.numpy() for w in model(*inputs)]
    pte = export(model, inputs)
    ops = operators(deserialize(pte).plans[0])
    cell = "executorch::lstm_cell" if model.rnn.mode == "LSTM" else "executorch::gru_cell"
    assert ops.count(cell) == cell_calls(model, inputs), ops
    # The gate arithmetic is in the cell, not spelled out around it.
    assert not {"aten::sigmoid", "aten::tanh", "aten::split_with_sizes"} & set(ops), ops
    got = run(pte, inputs)
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want):
        assert scaled(g, w) <= FLOAT32_RTOL


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", ["lstm_2_layers_bidirectional_batch_first", "gru_initial_state"])
def test_half_precision_programs_match_torch_in_float32(name: str, dtype: torch.dtype) -> None:
    model, inputs = build(name)
    rounded = tuple(x.to(dtype) for x in inputs)
    with torch.no_grad():  # float32 on the inputs the program sees
        want = [w.numpy() for w in model(*(x.float() for x in rounded))]
    got = run(export(model, inputs, dtype=dtype), rounded)
    for g, w in zip(got, want):
        assert scaled(g, w) <= HALF_RTOL[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_export_is_one_payload_that_matches_torch(name: str, dtype: torch.dtype) -> None:
    model, inputs = build(name)
    with torch.no_grad():
        want = [w.numpy() for w in model(*inputs)]
    spec = deserialize(export(model, inputs, backend="cuda", dtype=dtype))
    (call,) = spec.plans[0].instructions
    assert isinstance(call, DelegateCall) and spec.metadata["cuda_delegate_calls"] == "1"
    payload = spec.segments[spec.plans[0].delegates[call.delegate_index].segment]
    ops = operators(deserialize(payload).plans[0])
    rnn = model.rnn
    directions = rnn.num_layers * (2 if rnn.bidirectional else 1)
    if rnn.proj_size:  # a cell per step
        assert sum(op.endswith("_cell") for op in ops) == cell_calls(model, inputs), ops
        # The steps are written where torch.stack puts them, where a step's bytes keep each piece
        # 16-byte aligned (tensors start so): here the first stack's at least (60-byte steps).
        if dtype == torch.float32:
            assert stacks_in_place(deserialize(payload).plans[0]) >= 1
    else:  # one operator per layer and direction
        layer = "executorch::lstm_layer" if rnn.mode == "LSTM" else "executorch::gru_layer"
        assert ops.count(layer) == directions and not any(op.endswith("_cell") for op in ops), ops
    if dtype != torch.float32:  # the payload's tensors are of the program's dtype; the CPU runs them widened
        return
    # The payload's inputs and outputs, in the order the call hands them over and back.
    sub = deserialize(payload).plans[0]
    method = spec.plans[0]
    handed = [method.inputs.index(a) for a in call.args[:len(sub.inputs)]]
    got = dict(zip(call.args[len(sub.inputs):], run(payload, tuple(inputs[i] for i in handed))))
    for o, w in zip(method.outputs, want):
        assert scaled(got[o], w) <= FLOAT32_RTOL
