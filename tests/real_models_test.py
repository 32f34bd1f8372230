"""Real models (torchvision, transformers, timm, torch.nn RNNs; random weights) and one module per
operator family, exported and run on the CPU against torch eager.

Tolerances, elementwise on every output, relative to that output's largest magnitude s = max|torch|:
- float32: |ours - torch| <= 1e-4 * s (accumulation order differs from PyTorch's);
- float16 / bfloat16 programs against the float32 model on the same (rounded) inputs: 2e-2 * s /
  1e-1 * s for the models, and
  1e-2 * s / 6e-2 * s for single operator families (the weights and activations round to 11 / 8
  significant bits at every operator; arithmetic is float32).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from tests.flags import preload_cuda_runtime

torch = pytest.importorskip("torch", reason="torch is not installed in the test interpreter")
preload_cuda_runtime()

from executorch.export import ExportError, UnsupportedOperatorError, export  # noqa: E402
from executorch.runtime import Runtime  # noqa: E402
from executorch.serialization.pte import deserialize  # noqa: E402
from tests.models.real import MODELS, MORE_MODELS  # noqa: E402

F32_TOL = 1e-4
MODEL_HALF_TOL = {torch.float16: 2e-2, torch.bfloat16: 1e-1}
OP_HALF_TOL = {torch.float16: 1e-2, torch.bfloat16: 6e-2}


def run(pte: bytes, inputs: tuple, dtype: torch.dtype | None = None) -> list[np.ndarray]:
    """Outputs of the program; with `dtype` (float16/bfloat16) floating inputs are given in it (float16
    as numpy arrays, bfloat16 as torch tensors) and floating outputs come back widened to float32."""
    if dtype is not None:
        inputs = tuple((x.to(dtype) if dtype == torch.bfloat16 else x.half().numpy()) if x.is_floating_point() else x
                       for x in inputs)
    method = Runtime.get().load_program(pte).load_method("forward")
    outs = [o.float() if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in method.execute(list(inputs))]
    return [np.asarray(o.numpy() if isinstance(o, torch.Tensor) else o) for o in outs]


def reference(model: torch.nn.Module, inputs: tuple) -> list[np.ndarray]:
    with torch.no_grad():
        return [(t.float() if t.is_floating_point() else t).numpy() for t in torch.utils._pytree.tree_leaves(model(*inputs))]


def rounded(inputs: tuple, dtype: torch.dtype) -> tuple:
    """The inputs as the half-precision program sees them, in float32: the reference then differs
    from the program only by what happens inside it."""
    return tuple(x.to(dtype).float() if x.is_floating_point() else x for x in inputs)


def assert_close(ours: list[np.ndarray], refs: list[np.ndarray], tol: float) -> None:
    assert len(ours) == len(refs)
    for i, (o, r) in enumerate(zip(ours, refs)):
        assert o.shape == r.shape, f"output {i}: shape {o.shape}, torch {r.shape}"
        o = o.astype(np.float32) if o.dtype != np.float32 and r.dtype == np.float32 else o
        scale = float(np.abs(r).max()) if r.size else 0.0
        assert scale > 0 or r.size == 0, f"output {i} is all zeros: the comparison would prove nothing"
        err = float(np.abs(o.astype(np.float64) - r).max()) if r.size else 0.0
        assert err <= tol * scale, f"output {i}: max |ours - torch| = {err:.3g}, bound {tol * scale:.3g}"


@pytest.fixture(scope="module", params=sorted(MODELS))
def real_model(request):
    model, inputs = MODELS[request.param]()
    return request.param, model, inputs


def test_real_model_float32(real_model) -> None:
    name, model, inputs = real_model
    assert_close(run(export(model, inputs), inputs), reference(model, inputs), F32_TOL)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_real_model_half_precision(real_model, dtype: torch.dtype) -> None:
    name, model, inputs = real_model
    ours = run(export(model, inputs, dtype=dtype), inputs, dtype)
    assert_close(ours, reference(model, rounded(inputs, dtype)), MODEL_HALF_TOL[dtype])


def test_a_module_that_branches_on_half_precision_data_is_captured_in_float32() -> None:
    """BART's encoder branches on `dtype == float16 and not isfinite(h).all()`, which torch.export
    cannot trace in float16. The exporter captures the float32 graph and converts it: the program
    matches the model on the rounded inputs, and for the device it is one CudaBackend call."""
    model, inputs = MORE_MODELS["bart_encoder"]()
    with pytest.raises(Exception, match="data-dependent"):
        torch.export.export(copy.deepcopy(model).half(), tuple(inputs))
    for dtype in (torch.float16, torch.bfloat16):
        ours = run(export(model, inputs, dtype=dtype), inputs, dtype)
        assert_close(ours, reference(model, rounded(inputs, dtype)), MODEL_HALF_TOL[dtype])
    pte = export(model, inputs, backend="cuda", dtype=torch.float16)
    assert deserialize(pte).metadata["cuda_delegate_calls"] == "1"


@pytest.mark.parametrize("name", ["mixtral", "qwen2_moe"])
def test_mixture_of_experts_models(name: str) -> None:
    """transformers' experts (tokens sorted by expert, counted with histc, one grouped product per
    projection) run as executorch::grouped_mm: float32 and bfloat16 against torch."""
    model, inputs = MORE_MODELS[name]()
    pte = export(model, inputs)
    names = {op for op, _ in deserialize(pte).plans[0].operators}
    assert {"executorch::grouped_mm", "aten::histc"} <= names, names
    assert_close(run(pte, inputs), reference(model, inputs), F32_TOL)
    ours = run(export(model, inputs, dtype=torch.bfloat16), inputs, torch.bfloat16)
    assert_close(ours, reference(model, rounded(inputs, torch.bfloat16)), MODEL_HALF_TOL[torch.bfloat16])


def test_a_model_that_rescales_its_weights_at_its_first_call() -> None:
    """RWKV divides its weights in place at its first forward in eval mode: exported before that
    call, the program returns the model's output alone (the rewritten weights are no outputs) and
    matches torch's, every call."""
    model, inputs = MORE_MODELS["rwkv"]()
    pte = export(model, inputs)
    assert len(deserialize(pte).plans[0].outputs) == 1
    ours = run(pte, inputs)
    assert_close(ours, reference(model, inputs), F32_TOL)
    assert_close(run(pte, inputs), ours, 0.0)


# Operator families ----------------------------------------------------------------------------

class Fn(torch.nn.Module):
    def __init__(self, fn, *modules: torch.nn.Module) -> None:
        super().__init__()
        self.fn = fn
        self.mods = torch.nn.ModuleList(modules)

    def forward(self, *xs):
        return self.fn(self.mods, *xs)


F = torch.nn.functional
_IMG = (torch.randn(2, 8, 12, 10),)
_SEQ = (torch.randn(2, 8, 20),)
_VOL = (torch.randn(1, 4, 6, 6, 6),)
_GRID = torch.rand(2, 7, 9, 2) * 2.4 - 1.2  # sample points, some outside the image


def _families() -> dict:
    nn = torch.nn
    return {
        "activations": (Fn(lambda m, x: torch.cat([
            F.relu6(x), F.hardtanh(x, -0.5, 0.7), x.clamp(-0.3, 0.4), x.clamp(min=0.1), F.leaky_relu(x, 0.1),
            F.elu(x), F.selu(x), F.celu(x, 0.5), F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), F.mish(x),
            F.hardswish(x), F.hardsigmoid(x), F.softplus(x, 2.0, 1.0), torch.sigmoid(x), torch.tanh(x)], 1)), _IMG),
        "padding": (Fn(lambda m, x: (F.pad(x, (1, 2, 0, 3), value=0.5), F.pad(x, (2, 1, 1, 2), mode="reflect"),
                                     F.pad(x, (3, 0, 2, 1), mode="replicate"), F.pad(x, (1, 1, 1, 1), mode="circular"),
                                     F.pad(x[:, :, 0], (2, 3), mode="reflect"), F.pad(x, (-1, -2, 0, 0)))), _IMG),
        "normalization": (Fn(lambda m, x: (m[0](x), m[1](x), m[2](x), m[3](x.transpose(1, 3)), m[4](x.transpose(1, 3))),
                             nn.GroupNorm(4, 8), nn.InstanceNorm2d(8, affine=True), nn.BatchNorm2d(8).eval(),
                             nn.LayerNorm(8), nn.RMSNorm(8)), _IMG),
        "convolution": (Fn(lambda m, x: (m[0](x), m[1](x), m[2](x), m[3](x), m[4](x)),
                           nn.Conv2d(8, 6, 3, stride=2, padding=1, dilation=1), nn.Conv2d(8, 8, 5, padding=2, groups=8),
                           nn.Conv2d(8, 16, 3, padding=2, dilation=2, groups=4, bias=False),
                           nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1),
                           nn.ConvTranspose2d(8, 8, 4, stride=2, padding=1, groups=2)), _IMG),
        "convolution_1d": (Fn(lambda m, x: (m[0](x), m[1](x), m[2](x)), nn.Conv1d(8, 6, 3, stride=2, padding=1),
                              nn.Conv1d(8, 8, 5, padding=4, dilation=2, groups=8), nn.ConvTranspose1d(8, 4, 4, stride=2)),
                           _SEQ),
        "convolution_3d": (Fn(lambda m, x: (m[0](x), m[1](x), m[2](x), m[3](x[0]), F.max_pool3d(x, 2),
                                            F.max_pool3d(x, 3, (1, 2, 2), 1, ceil_mode=True), F.avg_pool3d(x, 3, 2, 1),
                                            F.adaptive_avg_pool3d(x, (2, 3, 1)), *F.adaptive_max_pool3d(x, 2, True),
                                            F.max_pool2d(x[0], 3, 2), F.adaptive_avg_pool2d(x[0], 4)),
                              nn.Conv3d(4, 6, 3, stride=(1, 2, 2), padding=1), nn.Conv3d(4, 8, 3, padding=1, groups=4),
                              nn.ConvTranspose3d(4, 2, 2, stride=2), nn.Conv3d(4, 3, (1, 3, 3))), _VOL),
        "pooling": (Fn(lambda m, x: (F.max_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
                                     F.adaptive_avg_pool2d(x, (5, 3)), F.max_pool2d(x, 2, ceil_mode=True),
                                     F.adaptive_avg_pool2d(x, 1), *F.adaptive_max_pool2d(x, (5, 3), return_indices=True),
                                     F.adaptive_max_pool1d(x[:, :, 0], 4), F.max_pool1d(x[:, :, 0], 3, 2),
                                     F.avg_pool1d(x[:, :, 0], 2))), _IMG),
        "resampling": (Fn(lambda m, x: (F.interpolate(x, scale_factor=2, mode="nearest"),
                                        F.interpolate(x, size=(17, 23), mode="bilinear", align_corners=False),
                                        F.interpolate(x, size=(7, 5), mode="bilinear", align_corners=True),
                                        F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False),
                                        F.interpolate(x, size=(24, 20), mode="nearest-exact"),
                                        F.pixel_shuffle(x, 2), F.pixel_unshuffle(x, 2),
                                        *(F.grid_sample(x, _GRID, mode=mode, padding_mode=pad, align_corners=align)
                                          for mode in ("bilinear", "nearest", "bicubic")
                                          for pad in ("zeros", "border", "reflection") for align in (False, True)))),
                       _IMG),
        "indexing": (Fn(lambda m, x, i: (x[:, i], x[..., i % 10], x[i % 2, :, i], torch.index_select(x, 2, i),
                                         torch.gather(x, 3, (i % 10).view(1, 1, 1, -1).expand(2, 8, 12, 5)),
                                         x.scatter(3, (i % 10).view(1, 1, 1, -1).expand(2, 8, 12, 5), 1.5),
                                         x.masked_fill(x > 0.5, -1.0), x.index_put((i % 2, i), torch.tensor(3.0)),
                                         # whole rows put (a cache's positions), rows broadcast, accumulated
                                         x.index_put((i % 2, i), x[0, :5] * 2),
                                         torch.ops.aten.index_put(x, [None, None, i], x[:, :, :5] * 2),
                                         torch.ops.aten.index_put(x, [None, None, i], x[:, :, :5, :1]),
                                         torch.ops.aten.index_put(x, [None, None, i], x[:, :, :5] * 2, True),
                                         torch.select_scatter(x, torch.zeros_like(x[:, :, 3]), 2, 3),
                                         torch.slice_scatter(x, torch.zeros_like(x[:, :, 1:9:2]), 2, 1, 9, 2))),
                     (*_IMG, torch.tensor([3, 0, 7, 1, 5]))),
        "embedding": (Fn(lambda m, i: m[0](i) * 2, nn.Embedding(50, 16, padding_idx=0)), (torch.randint(0, 50, (3, 7)),)),
        "reductions": (Fn(lambda m, x: (x.sum(), x.sum((1, 3), keepdim=True), x.mean(-1), x.amax(2), x.amin((0, 1)),
                                        x.argmax(1), x.argmin(-1), x.argmax(), *x.max(2), *x.min(-1, keepdim=True), x.max(), x.min(), x.mean(), (x > 2).any(), (x > -3).all(),
                                        x.clamp(x.mean(1, keepdim=True), x.amax(3, keepdim=True)),
                                        x.clamp(min=torch.zeros(10)), x.prod(3), x.var(1), x.std(2, correction=0),
                                        torch.logsumexp(x, 3), x.cumsum(2), torch.linalg.vector_norm(x, dim=1),
                                        x.norm(p=1, dim=3), x.norm(p=float("inf"), dim=2),
                                        *torch.topk(x, 3, dim=-1), *torch.sort(x, dim=1, descending=True),
                                        (x > 0).any(1), (x > -3).all(2))), _IMG),
        "elementwise": (Fn(lambda m, x: (x > 0, x.eq(x.round()), torch.logical_xor(x > 0, x < 0.5), torch.isinf(x / 0.0),
                                         torch.isnan(torch.sqrt(x)), torch.where(x > 0, x, -x), x ** 3, 2 ** x, x.abs().pow(0.7),
                                         torch.sin(x), torch.cos(x), torch.tan(x * 0.5), torch.atan(x), torch.asin(x.clamp(-1, 1)),
                                         torch.exp(x), torch.log(x.abs() + 1), torch.log1p(x.abs()), torch.expm1(x), torch.log2(x.abs() + 1),
                                         torch.floor(x), torch.ceil(x), torch.trunc(x), torch.sign(x), torch.fmod(x, 0.7),
                                         torch.remainder(x, 0.7), torch.div(x, 0.3, rounding_mode="floor"),
                                         torch.atan2(x, x.flip(0)), torch.rsqrt(x.abs() + 0.1), torch.erf(x))), _IMG),
        "integers": (Fn(lambda m, i: (i & 5, i | 2, i ^ 7, ~i, i // 3, i % 4, torch.bitwise_not(i > 2), i.cumsum(0),
                                      i.sum(1), i.clamp(2, 6), -i, i.abs(), i * 3 - 1)), (torch.randint(-9, 9, (4, 6)),)),
        "shapes": (Fn(lambda m, x: (torch.stack([x, -x], 1), torch.cat(x.chunk(2, 3)[::-1], 3), *x.split([3, 5], 1),
                                    *x.unbind(0), x.flip(1, 3), x.roll(3, 2), x.roll((1, -2), (1, 3)),
                                    x.repeat(1, 2, 1, 3), x.expand(3, 2, 8, 12, 10), x.permute(0, 2, 3, 1).contiguous(),
                                    x.transpose(1, 2).reshape(2, -1), x[:, ::2, 1:-1:3], x.tril(),
                                    torch.triu(x[0, 0], diagonal=1))), _IMG),
        "attention_mask_and_bool_input": (Fn(lambda m, x, mask: (F.scaled_dot_product_attention(x, x, x, attn_mask=mask),
                                                                 F.scaled_dot_product_attention(x, x[:, :1], x[:, 1:2]))),
                                          (torch.randn(2, 4, 6, 8), torch.rand(6, 6) > 0.3)),
        "lstm_gru": (Fn(lambda m, x: (*m[0](x)[1], m[1](x)[0]), nn.LSTM(8, 12, batch_first=True, bidirectional=True),
                        nn.GRU(8, 12, num_layers=2)), (torch.randn(3, 5, 8),)),
    }


FAMILIES = _families()


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_operator_family_float32(name: str) -> None:
    torch.manual_seed(0)
    model, inputs = FAMILIES[name]
    model.eval()
    ours = run(export(model, inputs), inputs)
    refs = reference(model, inputs)
    # Integer and boolean outputs are exact.
    for o, r in zip(ours, refs):
        if not np.issubdtype(r.dtype, np.floating):
            np.testing.assert_array_equal(o, r)
    assert_close([o for o, r in zip(ours, refs) if np.issubdtype(r.dtype, np.floating)],
                 [r for r in refs if np.issubdtype(r.dtype, np.floating)], F32_TOL)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["activations", "convolution", "convolution_3d", "normalization", "resampling", "padding",
                                  "indexing"])
def test_operator_family_half_precision(name: str, dtype: torch.dtype) -> None:
    model, inputs = FAMILIES[name]
    model.eval()
    ours = run(export(model, inputs, dtype=dtype), inputs, dtype)
    refs = reference(model, rounded(inputs, dtype))
    floating = [i for i, r in enumerate(refs) if np.issubdtype(r.dtype, np.floating)]
    assert_close([ours[i] for i in floating], [refs[i] for i in floating], OP_HALF_TOL[dtype])


# Exporter robustness --------------------------------------------------------------------------

def test_buffers_persistent_or_not_tensor_attributes_and_tied_weights() -> None:
    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(20, 8)
            self.head = torch.nn.Linear(8, 20, bias=False)
            self.head.weight = self.emb.weight  # tied
            self.register_buffer("scale", torch.tensor(1.5), persistent=False)
            self.register_buffer("shift", torch.randn(8))
            self.table = torch.arange(8.0)  # a plain tensor attribute

        def forward(self, ids):
            return self.head(self.emb(ids) * self.scale + self.shift + self.table)

    model, inputs = M().eval(), (torch.randint(0, 20, (2, 5)),)
    assert_close(run(export(model, inputs), inputs), reference(model, inputs), F32_TOL)


def test_dict_and_nested_outputs_are_flattened_in_order() -> None:
    class M(torch.nn.Module):
        def forward(self, x, y):
            return {"sum": x + y, "parts": (x * 2, [y - 1])}

    inputs = (torch.randn(3), torch.randn(3))
    ours = run(export(M(), inputs), inputs)
    x, y = (t.numpy() for t in inputs)
    for o, want in zip(ours, [x + y, x * 2, y - 1]):
        np.testing.assert_allclose(o, want, rtol=1e-6)


def test_every_unsupported_operator_is_named_at_export() -> None:
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.fft.rfft(x).abs() + torch.linalg.det(x.view(2, 2, 2)).sum()

    with pytest.raises(UnsupportedOperatorError) as info:
        export(M(), (torch.randn(8),))
    assert len(info.value.missing) >= 2 and "aten::_fft_r2c" in str(info.value)


def test_what_the_runtime_cannot_run_is_an_export_error() -> None:
    # The operator's result is the model's output: the missing operator is named, not the output it
    # leaves unset.
    with pytest.raises(UnsupportedOperatorError, match="aten::_fft_r2c"):
        export(Fn(lambda m, x: torch.fft.rfft(x)), _SEQ)
