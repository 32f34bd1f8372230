"""Bounded dynamic shapes: programs exported with torch.export Dims run at any size up to each Dim's
max, against torch eager on the same inputs, and bad sizes or bad programs are errors.

Tolerance (float32): |ours - torch| <= 1e-4 * max(1, max|torch|) elementwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.flags import preload_cuda_runtime

torch = pytest.importorskip("torch", reason="torch is not installed in the test interpreter")
preload_cuda_runtime()

from torch.export import Dim  # noqa: E402

from executorch.export import ExportError, export  # noqa: E402
from executorch.runtime import ExecutorchError, Runtime  # noqa: E402
from executorch.serialization.pte import OP_ADD, OP_CONST, OP_SYMBOL, deserialize, serialize  # noqa: E402
from tests.models.real import MODELS, import_torchvision  # noqa: E402

RTOL = 1e-4


def assert_close(ours: np.ndarray, ref: torch.Tensor) -> None:
    expected = ref.detach().numpy()
    assert ours.shape == expected.shape and ours.dtype == expected.dtype
    np.testing.assert_allclose(ours, expected, rtol=0, atol=RTOL * max(1.0, float(np.abs(expected).max(initial=0))))


def run(pte: bytes, *inputs: torch.Tensor) -> list[np.ndarray]:
    method = Runtime.get().load_program(pte).load_method("forward")
    return method.execute([x.numpy() for x in inputs])


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(), torch.nn.Linear(32, 5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).softmax(-1)


class Sizes(torch.nn.Module):
    """Views, slices, concatenation and arange whose sizes are arithmetic on the input's."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b = x.shape[0]
        z = x.view(b, -1, 2).sum(-1)
        joined = torch.cat([z, y], 0)[: b + 1]
        return joined * 2, torch.arange(b * 3, dtype=torch.float32) / (b + 1)


class Conv(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(x)).mean((2, 3)))


def test_batch_varies_up_to_its_bound() -> None:
    torch.manual_seed(0)
    model = Mlp().eval()
    pte = export(model, (torch.randn(4, 12),), dynamic_shapes={"x": {0: Dim("batch", min=1, max=16)}})
    method = Runtime.get().load_program(pte).load_method("forward")
    for batch in (1, 7, 16, 3):  # smaller after larger too: sizes are recomputed at each call
        x = torch.randn(batch, 12)
        (ours,) = method.execute([x.numpy()])
        assert_close(ours, model(x))
    with pytest.raises(ExecutorchError, match="input 0: .*size 17 at dim 0, expected 1 to 16"):
        method.execute([torch.randn(17, 12).numpy()])
    with pytest.raises(ExecutorchError, match="input 0: .*size 11 at dim 1, expected 12"):
        method.execute([torch.randn(2, 11).numpy()])


def test_sizes_computed_from_an_input_size() -> None:
    model = Sizes().eval()
    pte = export(model, (torch.randn(8, 4), torch.randn(3, 2)),
                 dynamic_shapes={"x": {0: Dim("rows", min=2, max=20)}, "y": None})
    plan = deserialize(pte).plans[0]
    assert [(s.input, s.dim, s.min, s.max) for s in plan.symbols] == [(0, 0, 2, 20)]
    assert plan.size_expressions  # b + 1, b * 3, ...: computed at run time
    for rows in (2, 5, 20):
        x, y = torch.randn(rows, 4), torch.randn(3, 2)
        ours = run(pte, x, y)
        for o, r in zip(ours, model(x, y)):
            assert_close(o, r)


class Views(torch.nn.Module):
    """A view, a permute that moves a dimension of size 1 only, and one that moves the batch."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = (x + 1).view(x.shape[0], 3, 4)
        return y.unsqueeze(0).permute(1, 0, 2, 3) * 2, y.permute(1, 0, 2) - 1


def _offsets(plan: Any, op: str) -> list[tuple[int, int]]:
    """(input offset, output offset) in planned memory of each call of `op`."""
    return [(plan.tensor(i.args[0]).mem_offset, plan.tensor(i.args[-1]).mem_offset) for i in plan.instructions
            if plan.operators[i.op_index][0] == op]


@pytest.mark.parametrize("dynamic", [False, True])
def test_views_share_their_inputs_memory(dynamic: bool) -> None:
    """A view's output is planned on its input's bytes (its kernel then copies nothing), and so is a
    permute's that keeps the layout, unless a bounded size (which may be 1 at run time) is involved."""
    model = Views().eval()
    shapes = {"x": {0: Dim("batch", min=2, max=8)}} if dynamic else None
    pte = export(model, (torch.randn(4, 12),), dynamic_shapes=shapes)
    plan = deserialize(pte).plans[0]
    assert [a == b for a, b in _offsets(plan, "aten::view")] == [True]
    assert sorted(a == b for a, b in _offsets(plan, "aten::permute")) == [False, not dynamic]
    for batch in (2, 5, 8) if dynamic else (4,):
        x = torch.randn(batch, 12)
        for o, r in zip(run(pte, x), model(x)):
            assert_close(o, r)


def test_convolution_batch() -> None:
    torch.manual_seed(1)
    model = Conv().eval()
    pte = export(model, (torch.randn(2, 3, 10, 10),), dynamic_shapes={"x": {0: Dim("batch", max=6)}})
    for batch in (1, 6, 4):
        x = torch.randn(batch, 3, 10, 10)
        (ours,) = run(pte, x)
        assert_close(ours, model(x))


def test_inputs_sharing_a_dim_must_agree() -> None:
    class Add(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a * 2 + b

    n = Dim("n", max=10)
    pte = export(Add(), (torch.randn(4, 3), torch.randn(4, 3)), dynamic_shapes={"a": {0: n}, "b": {0: n}})
    a, b = torch.randn(6, 3), torch.randn(6, 3)
    (ours,) = run(pte, a, b)
    assert_close(ours, a * 2 + b)
    with pytest.raises(ExecutorchError, match="another input's gives it 5"):
        run(pte, torch.randn(5, 3), torch.randn(7, 3))


def test_language_model_over_any_prompt_length() -> None:
    import_torchvision()  # transformers imports torchvision when it is installed
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(2)
    model = transformers.LlamaForCausalLM(config).eval()

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.model(input_ids=ids, use_cache=False).logits

    wrapper = Logits().eval()
    pte = export(wrapper, (torch.randint(0, 128, (1, 8)),), dynamic_shapes={"ids": {1: Dim("length", min=2, max=32)}})
    method = Runtime.get().load_program(pte).load_method("forward")
    for length in (2, 13, 32):
        ids = torch.randint(0, 128, (1, length))
        (ours,) = method.execute([ids.numpy()])
        with torch.no_grad():
            assert_close(ours, wrapper(ids))


def _first_tensor(out: Any) -> torch.Tensor:
    out = out.to_tuple() if hasattr(out, "to_tuple") else out
    while isinstance(out, (tuple, list)):
        out = out[0]
    return out


# Real models with random weights: images and features vary in batch (1 to 4), token ids and their
# masks in length (2 to 32). t5_encoder fills a tensor of the input's shape (full_like), the GRU
# an initial state of the batch's (full).
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v3_small", "whisper_encoder", "gru", "bert", "t5_encoder",
                                  "llama"])
def test_real_models_at_several_sizes(name: str) -> None:
    model, example = MODELS[name]()
    by_length = not example[0].is_floating_point()
    dim = Dim("length", min=2, max=32) if by_length else Dim("batch", min=1, max=4)

    def inputs(n: int) -> tuple[torch.Tensor, ...]:
        gen = torch.Generator().manual_seed(n)
        if by_length:
            return tuple(torch.randint(0, 500, (1, n), generator=gen) if i == 0 else torch.ones(1, n, dtype=x.dtype)
                         for i, x in enumerate(example))
        return tuple(torch.randn((n,) + tuple(x.shape[1:]), generator=gen) for x in example)

    shapes = tuple({1 if by_length else 0: dim} for _ in example)
    pte = export(model, inputs(16 if by_length else 2), dynamic_shapes=shapes)
    method = Runtime.get().load_program(pte).load_method("forward")
    for n in (5, 32) if by_length else (1, 4, 3):
        x = inputs(n)
        ours = method.execute([t.numpy() for t in x])[0]
        with torch.no_grad():
            assert_close(ours, _first_tensor(model(*x)))


def test_delegated_programs_refuse_dynamic_shapes() -> None:
    with pytest.raises(ExportError, match="delegated programs have fixed shapes"):
        export(Mlp().eval(), (torch.randn(4, 12),), backend="xnnpack", dynamic_shapes={"x": {0: Dim("b", max=8)}})


def test_a_dim_needs_a_maximum() -> None:
    with pytest.raises(ExportError, match="give its Dim a max"):
        export(Mlp().eval(), (torch.randn(4, 12),), dynamic_shapes={"x": {0: Dim("b")}})


def _mlp_program() -> bytes:
    return export(Mlp().eval(), (torch.randn(4, 12),), dynamic_shapes={"x": {0: Dim("batch", min=1, max=16)}})


@pytest.mark.parametrize("damage, message", [
    ("unknown opcode", "unknown opcode 99"),
    ("two values left", "leaves 2 values, not one"),
    ("missing symbol", "symbol 5 does not exist"),
    ("bound disagrees", "maximum 40, but input 0 declares 16"),
    ("expression out of range", "size expression 77 does not exist"),
])
def test_bad_dynamic_programs_are_refused(damage: str, message: str) -> None:
    spec = deserialize(_mlp_program())
    plan = spec.plans[0]
    if damage == "unknown opcode":
        plan.size_expressions.append([OP_CONST, 1, 99])
    elif damage == "two values left":
        plan.size_expressions.append([OP_CONST, 1, OP_CONST, 2])
    elif damage == "missing symbol":
        plan.size_expressions.append([OP_SYMBOL, 5, OP_CONST, 1, OP_ADD])
    elif damage == "bound disagrees":
        plan.symbols[0].max = 40
    else:
        next(v.payload for v in plan.values if v.kind == "tensor" and v.payload.dynamic_sizes).dynamic_sizes[0] = 77
    with pytest.raises(ExecutorchError, match=message):
        Runtime.get().load_program(serialize(spec)).load_method("forward")


def test_an_input_sharing_a_dim_within_a_smaller_bound_is_refused() -> None:
    # A hostile program: the second input of a Dim declares 4 rows, the Dim allows 10. Its data
    # would be copied into memory planned for 4.
    class Add(torch.nn.Module):
        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return a + b

    n = Dim("n", max=10)
    spec = deserialize(export(Add(), (torch.randn(4, 3), torch.randn(4, 3)), dynamic_shapes={"a": {0: n}, "b": {0: n}}))
    plan = spec.plans[0]
    plan.tensor(plan.inputs[1]).sizes[0] = 4
    with pytest.raises(ExecutorchError, match="input 1: dim 0 is dynamic but no symbolic size within its bound"):
        Runtime.get().load_program(serialize(spec)).load_method("forward")


def test_a_size_above_its_planned_bound_is_an_error_not_an_overrun() -> None:
    # A hostile program whose expression for an intermediate size exceeds the bound it planned.
    spec = deserialize(_mlp_program())
    plan = spec.plans[0]
    inner = [v.payload for v in plan.values if v.kind == "tensor" and v.payload.dynamic_sizes and v.payload.mem_id >= 0]
    doubled = len(plan.size_expressions)
    plan.size_expressions.append([OP_SYMBOL, 0, OP_SYMBOL, 0, OP_ADD])
    inner[-1].dynamic_sizes[0] = doubled
    method = Runtime.get().load_program(serialize(spec)).load_method("forward")
    with pytest.raises(ExecutorchError):  # 16 rows, within the bound: the kernel finds the shapes disagree
        method.execute([torch.randn(8, 12).numpy()])
    with pytest.raises(ExecutorchError, match="the bound memory was planned for"):
        method.execute([torch.randn(9, 12).numpy()])
