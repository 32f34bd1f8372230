"""export(..., backend="xnnpack"): operators and real models through XnnpackBackend on the CPU,
against torch (float32 and float16; bounds stated per test), the program's structure, what stays with the CPU
kernels and why, and the order of a list of backends."""

from __future__ import annotations

import pytest

from tests.flags import preload_cuda_runtime

torch = pytest.importorskip("torch", reason="torch is not installed in the test interpreter")
preload_cuda_runtime()

import torch.nn.functional as F  # noqa: E402

from executorch.export import ExportError, export  # noqa: E402
from executorch.runtime import Runtime  # noqa: E402
from executorch.serialization.pte import DelegateCall, KernelCall, deserialize  # noqa: E402


def run(model: torch.nn.Module, inputs: tuple, **kwargs) -> tuple[list[torch.Tensor], object]:
    """The program's outputs for `inputs`, and its deserialized form."""
    pte = export(model, inputs, backend="xnnpack", **kwargs)
    outputs = Runtime.get().load_program(pte).load_method().execute(list(inputs))
    return [torch.as_tensor(o) for o in outputs], deserialize(pte)


def assert_close(got: torch.Tensor, want: torch.Tensor, rel: float) -> None:
    err = float((got - want).abs().max()) / max(float(want.abs().max()), 1e-30)
    assert got.shape == want.shape and err <= rel, f"relative error {err:.3g} > {rel:g}"


def cpu_operators(spec) -> list[str]:
    plan = spec.plans[0]
    return sorted({plan.operators[i.op_index][0] for i in plan.instructions if isinstance(i, KernelCall)})


def one_call(spec) -> None:
    plan = spec.plans[0]
    assert [type(i) for i in plan.instructions] == [DelegateCall], cpu_operators(spec)
    assert [d.backend_id for d in plan.delegates] == ["XnnpackBackend"]
    assert spec.metadata["xnnpack_delegate_calls"] == "1"


class Lambda(torch.nn.Module):
    def __init__(self, fn, *params: torch.Tensor) -> None:
        super().__init__()
        self.fn = fn
        self.params = torch.nn.ParameterList([torch.nn.Parameter(p, requires_grad=False) for p in params])

    def forward(self, *x: torch.Tensor) -> torch.Tensor:
        return self.fn(*x, *self.params)


def _image(c: int = 8, h: int = 13, w: int = 11, n: int = 2) -> torch.Tensor:
    return torch.randn(n, c, h, w, generator=torch.Generator().manual_seed(c * h + w))


def _w(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape))) * 0.3


# Each case runs in one XnnpackBackend call (the layouts switch inside it) and matches torch to 1e-5.
OPERATORS = {
    "conv_relu_chain": (lambda x, w1, w2, b: F.relu(F.conv2d(F.relu(F.conv2d(x, w1, b, padding=1)), w2, stride=2)),
                        (_image(),), (_w(16, 8, 3, 3), _w(4, 16, 1, 1), _w(16))),
    "conv_grouped_dilated": (lambda x, w: F.conv2d(x, w, stride=(2, 1), padding=(2, 1), dilation=2, groups=4),
                             (_image(),), (_w(12, 2, 3, 3),)),
    "conv_depthwise_hardswish": (lambda x, w: F.hardswish(F.conv2d(x, w, padding=2, groups=8)), (_image(),),
                                 (_w(8, 1, 5, 5),)),
    "conv1d": (lambda x, w, b: F.gelu(F.conv1d(x, w, b, stride=2, padding=1)), (torch.randn(2, 6, 17),),
               (_w(10, 6, 3), _w(10))),
    "max_pool_ceil_negative": (lambda x: F.max_pool2d(x - 3, 3, stride=2, padding=1, ceil_mode=True), (_image(),), ()),
    "avg_pool_padding_excluded": (lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
                                  (_image(),), ()),
    "squeeze_excite": (lambda x, w1, w2: x * torch.sigmoid(F.conv2d(F.silu(F.conv2d(x.mean((2, 3), keepdim=True), w1)),
                                                                     w2)) + F.hardsigmoid(x),
                       (_image(),), (_w(4, 8, 1, 1), _w(8, 4, 1, 1))),
    "global_pool_flatten_linear": (lambda x, w, b: F.linear(F.adaptive_avg_pool2d(F.conv2d(x, w), 1).flatten(1), b),
                                   (_image(),), (_w(16, 8, 3, 3), _w(5, 16))),
    "mean_without_keepdim": (lambda x, w: F.conv2d(x, w).mean((-1, -2)) + F.conv2d(x, w).mean(1).sum(),
                             (_image(),), (_w(6, 8, 1, 1),)),
    "cat_of_seven_channels_last": (lambda x, w: torch.cat([F.conv2d(x, w[i:i + 2]) for i in range(0, 14, 2)], 1),
                                   (_image(),), (_w(14, 8, 1, 1),)),
    "pad_and_upsample": (lambda x, w: F.interpolate(F.pad(F.conv2d(x, w), (1, 2, 0, 3), value=0.5), scale_factor=2,
                                                    mode="bilinear")
                         + F.interpolate(F.conv2d(x, w), size=(20, 30), mode="bilinear", align_corners=True).mean(),
                         (_image(),), (_w(4, 8, 1, 1),)),
    "convnext_block": (lambda x, w, lw, lb, f1, f2: x + F.linear(F.gelu(F.linear(F.layer_norm(
        F.conv2d(x, w, padding=3, groups=8).permute(0, 2, 3, 1), (8,), lw, lb), f1)), f2).permute(0, 3, 1, 2),
                       (_image(),), (_w(8, 1, 7, 7), 1 + _w(8), _w(8), _w(32, 8), _w(8, 32))),
    "attention_causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                         (torch.randn(1, 2, 5, 8), torch.randn(1, 2, 7, 8), torch.randn(1, 2, 7, 4)), ()),
    "attention_float_mask_softmax": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3)
                                     + torch.softmax(q, -1).sum(),
                                     (torch.randn(2, 4, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 8)),
                                     (torch.randn(4, 6),)),
    "slices_select_split_tanh_gelu": (lambda x: torch.cat([x[:, 1:4].tanh(), x.select(1, 0).unsqueeze(1),
                                                          *[p * 2 for p in x.split([2, 3], dim=1)]], 1).sum(1, True)
                                      + 0.5 * x * (1 + torch.tanh(0.79 * (x + 0.044 * torch.pow(x, 3)))),
                                      (torch.randn(3, 5, 4),), ()),
    "expand_repeated_heads": (lambda x: x[:, :, None].expand(2, 3, 4, 5, 6).reshape(2, 12, 5, 6).relu()
                              + x.mean(1, True)[:, :, None].expand(2, 1, 4, 5, 6).reshape(2, 4, 5, 6).sum(1, True),
                              (torch.randn(2, 3, 5, 6),), ()),
    "bmm_transpose_clamp": (lambda a, b: torch.clamp(torch.bmm(a, b.transpose(1, 2)), -1, 2) / 3 - 1,
                            (torch.randn(2, 3, 5), torch.randn(2, 4, 5)), ()),
}


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_operators_run_in_one_call_and_match_torch(name: str) -> None:
    fn, inputs, params = OPERATORS[name]
    model = Lambda(fn, *params).eval()
    with torch.no_grad():
        want = model(*inputs)
    got, spec = run(model, inputs)
    one_call(spec)
    assert_close(got[0], want, 1e-5)


def test_llama_norm_and_rotary_embedding_run_fused() -> None:
    """executorch::rms_norm and ::rope, as the exporter fuses Llama's patterns, on XNNPACK."""
    from tests.models.real import MORE_MODELS

    model, inputs = MORE_MODELS["mistral"]()
    with torch.no_grad():
        want = model(*inputs).last_hidden_state
    got, spec = run(model, inputs)
    assert_close(got[0], want, 1e-5)
    # The embedding (a gather) and the mask's making stay on the CPU; the bool mask reaches the
    # attention as the float one it means.
    left = cpu_operators(spec)
    assert not {"executorch::rms_norm", "executorch::rope", "aten::expand"} & set(left), left
    assert "aten::embedding" in left


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "efficientnet_b0", "vit_b_16", "whisper_encoder", "lstm",
                                  "gru"])
def test_real_models_run_in_one_call_and_match_torch(name: str) -> None:
    from tests.models.real import MODELS

    model, inputs = MODELS[name]()
    with torch.no_grad():
        want = torch.utils._pytree.tree_leaves(model(*inputs))[0]
    got, spec = run(model, inputs)
    one_call(spec)
    assert_close(got[0], want, 2e-5)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "vit_b_16", "whisper_encoder"])
def test_float16_programs_run_in_one_call(name: str) -> None:
    """export(dtype=torch.float16, backend="xnnpack"): float16 inputs, outputs and weights, float32
    arithmetic inside the subgraph (as the CPU kernels compute float16 programs). Against torch's
    float32 model on the same float16-rounded inputs and weights: within 1e-2 of the largest output."""
    from tests.models.real import MODELS

    model, inputs = MODELS[name]()
    half = [x.half() if x.is_floating_point() else x for x in inputs]
    pte = export(model, tuple(inputs), backend="xnnpack", dtype=torch.float16)
    spec = deserialize(pte)
    one_call(spec)
    (got, *_) = Runtime.get().load_program(pte).load_method().execute(half)
    got = torch.as_tensor(got)
    assert got.dtype == torch.float16
    with torch.no_grad():
        reference = model.half().float()  # the weights rounded as the program holds them
        want = torch.utils._pytree.tree_leaves(reference(*[x.float() if x.is_floating_point() else x for x in half]))[0]
    assert_close(got.float(), want, 1e-2)


def test_int8_linear_layers_run_on_xnnpack() -> None:
    """quantize="int8" (activations quantized per row as it runs): every linear layer a fully
    connected node on XNNPACK's channelwise int8 weights, one call, against torch running the same
    quantized module. XNNPACK quantizes activations asymmetrically where the CPU kernel is
    symmetric: bounded by the activations' int8 rounding, 2e-2 of the largest output. Weight-only
    int8 stays with the CPU kernels."""
    from executorch.export._quantize import quantize_linear_int8

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 32)).eval()
    x = torch.randn(5, 64)
    got, spec = run(model, (x,), quantize="int8")
    one_call(spec)
    reference, _ = quantize_linear_int8(model)
    with torch.no_grad():
        want = reference(x)
    assert_close(got[0], want, 2e-2)
    _, spec = run(model, (x,), quantize="int8_weight_only")
    assert "executorch::int8_weight_linear" in cpu_operators(spec)


def test_what_xnnpack_does_not_run_stays_with_the_cpu_kernels() -> None:
    # masked_fill (a where) and the bool tensor behind it have no XNNPACK node: calls around them.
    # The second call's output may be planned where its input lies (that input dies there):
    # XnnpackBackend reads such an input from a copy.
    model = Lambda(lambda x, w: F.relu(F.linear(torch.relu(F.linear(x, w)).masked_fill(x > 1, 0.0), w)),
                   _w(64, 64) / 4)
    x = torch.randn(16, 64) * 2
    with torch.no_grad():
        want = model(x)
    got, spec = run(model, (x,))
    assert_close(got[0], want, 1e-6)
    assert "aten::where" in cpu_operators(spec), cpu_operators(spec)  # masked_fill, decomposed
    assert int(spec.metadata["xnnpack_delegate_calls"]) >= 2


@pytest.mark.parametrize("features, calls", [(8, 0), (256, 2)])
def test_small_runs_between_cpu_kernels_stay_there(features: int, calls: int) -> None:
    """Linear layers between cumsums (no XNNPACK node): at 8 features each product is too little
    work for a call of its own and stays with the CPU kernels; at 256 both are delegated."""
    model = Lambda(lambda x, w: torch.cumsum(F.linear(torch.cumsum(F.linear(x, w), -1), w), -1),
                   _w(features, features) / features)
    x = torch.randn(64, features)
    with torch.no_grad():
        want = model(x)
    got, spec = run(model, (x,))
    assert_close(got[0], want, 1e-5)
    assert spec.metadata["xnnpack_delegate_calls"] == str(calls)
    assert ("aten::mm" in cpu_operators(spec)) == (calls == 0), cpu_operators(spec)


def test_threads_change_between_runs() -> None:
    model = Lambda(lambda x, w: F.relu(F.conv2d(x, w, padding=1)), _w(16, 8, 3, 3)).eval()
    x = _image(n=1, h=32, w=32)
    with torch.no_grad():
        want = model(x)
    method = Runtime.get().load_program(export(model, (x,), backend="xnnpack")).load_method()
    before = Runtime.get().num_threads
    try:
        for threads in (2, 1, 2):
            Runtime.get().set_num_threads(threads)
            assert_close(torch.as_tensor(method.execute([x])[0]), want, 1e-5)
    finally:
        Runtime.get().set_num_threads(before)


def test_a_list_of_backends_offers_each_operator_in_order() -> None:
    """["xnnpack", "cuda"]: XNNPACK takes what it runs; CudaBackend (asked without a GPU) what is
    left and it runs. Structure only: running it needs a GPU."""
    from executorch.serialization.pte import deserialize as load

    model = Lambda(lambda x, w: F.relu(F.linear(x, w)).masked_fill(x > 1, 0.0).cumsum(-1), _w(6, 6))
    spec = load(export(model, (torch.randn(4, 6),), backend=["xnnpack", "cuda"]))
    backends = [spec.plans[0].delegates[i.delegate_index].backend_id for i in spec.plans[0].instructions
                if isinstance(i, DelegateCall)]
    assert backends[0] == "XnnpackBackend" and "CudaBackend" in backends, backends
    assert spec.metadata["xnnpack_delegate_calls"] == "1" and int(spec.metadata["cuda_delegate_calls"]) >= 1


def test_unknown_backends_are_refused() -> None:
    model = Lambda(lambda x: x + 1)
    for bad in ("xnn", ["xnnpack", "xnnpack"], [], ["cpu"]):
        with pytest.raises(ExportError, match="unknown backend"):
            export(model, (torch.randn(2),), backend=bad)
