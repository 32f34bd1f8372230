"""export(..., backend="cuda") on a machine without a GPU: the program's structure, the delegate
payloads (programs of their own, checked here on the CPU runtime) and the error when loading it
where CudaBackend is not available. tools/gpu/verify.sh runs the same programs on a GPU."""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.flags import env_flag, preload_cuda_runtime

torch = pytest.importorskip("torch", reason="torch is not installed in the test interpreter")
preload_cuda_runtime()

from executorch.export import _dtypes, _export, _partition, export  # noqa: E402
from executorch.runtime import ExecutorchError, Runtime  # noqa: E402
from tests.models.zoo import MODELS, partly_delegated  # noqa: E402

F = torch.nn.functional


def lower(model: torch.nn.Module, example: tuple):
    """The float32 plan and constants the exporter would delegate from."""
    ep = torch.export.export(model, example).run_decompositions()
    plan, shared = _export._lower(ep, "forward", set(_export.supported_operators()))
    return plan, shared.data()


def lowered(name: str):
    model, example = MODELS[name]()
    return (model, example, *lower(model, example))


def single_delegate_call(spec) -> None:
    """Asserts that `spec`'s program is one CudaBackend call reading every input and writing every
    output, with nothing left to the CPU kernels and no host memory planned for the inputs it hands
    over."""
    from executorch.serialization.pte import DelegateCall

    plan = spec.plans[0]
    assert len(plan.instructions) == 1 and isinstance(plan.instructions[0], DelegateCall), plan.instructions
    args = plan.instructions[0].args
    assert args[:len(plan.inputs)] == plan.inputs and sorted(args[len(plan.inputs):]) == sorted(plan.outputs), args
    assert [d.backend_id for d in plan.delegates] == ["CudaBackend"]
    assert spec.metadata["cuda_delegate_calls"] == "1"
    for i in plan.inputs:
        if plan.values[i].kind == "tensor":
            t = plan.values[i].payload
            assert (t.mem_id, t.device) == (-1, 1), f"input value {i} has host memory planned: {t}"


def boundary_values(plan, constants, hi: int, example) -> dict:
    """Every value defined by instructions [0, hi) of the (undelegated) plan and read after them,
    and the plan's inputs: what the CPU runtime computes for them from `example`."""
    values = {i: x.numpy() for i, x in zip(plan.inputs, example)}
    if hi == 0:
        return values
    program, inputs, outputs = _partition._subprogram(plan, constants, 0, hi)
    assert set(inputs) <= set(plan.inputs)
    got = Runtime.get().load_program(program).load_method().execute([values[i] for i in inputs])
    values.update(zip(outputs, got))
    return values


@pytest.mark.parametrize("name", [*sorted(MODELS), "partly_delegated"])
def test_every_payload_computes_what_its_instructions_do_in_the_program(name: str) -> None:
    """Each delegated run is a program of its own whose inputs and outputs are the tensors crossing
    the run's boundary: fed what the instructions before it compute, it gives what the same
    instructions give within the whole program (both on the CPU runtime; tools/gpu/verify.sh runs
    the payloads on a GPU)."""
    model, example = partly_delegated() if name == "partly_delegated" else MODELS[name]()
    plan, constants = lower(model, example)
    runs = _partition._runs(plan, constants)
    assert runs, f"{name}: nothing to delegate"
    if name == "partly_delegated":
        assert len(runs) == 2, runs
    for lo, hi in runs:
        payload, inputs, outputs = _partition._subprogram(plan, constants, lo, hi)
        assert outputs, f"run {lo}:{hi} produces nothing used later"
        method = Runtime.get().load_program(payload).load_method()
        assert method.num_inputs == len(inputs) and method.num_outputs == len(outputs)
        for (dtype, shape), i in zip(method.input_meta(), inputs):
            assert shape == plan.values[i].payload.sizes
        before, after = boundary_values(plan, constants, lo, example), boundary_values(plan, constants, hi, example)
        got = method.execute([before[i] for i in inputs])
        for i, g in zip(outputs, got):
            np.testing.assert_allclose(np.asarray(g), np.asarray(after[i]), rtol=1e-6, atol=1e-6,
                                       err_msg=f"{name}: run {lo}:{hi}, value {i}")


def test_mlp_is_one_delegate_call_with_its_input_handed_over() -> None:
    from executorch.serialization.pte import deserialize

    model, example = MODELS["mlp"]()
    single_delegate_call(deserialize(export(model, example, backend="cuda")))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_whole_model_is_one_payload_that_computes_the_model(name: str) -> None:
    """Every zoo model (attention masks, batched products and embeddings included) is one delegate
    call; its payload, run on the CPU runtime, gives torch's output (float32, 1e-4 relative)."""
    model, example, plan, constants = lowered(name)
    assert _partition._runs(plan, constants) == [(0, len(plan.instructions))], f"{name}: not every instruction is delegated"
    payload, inputs, _ = _partition._subprogram(plan, constants, 0, len(plan.instructions))
    assert inputs == plan.inputs
    got = Runtime.get().load_program(payload).load_method().execute([x.numpy() for x in example])[0]
    with torch.no_grad():
        want = model(*example).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))


def test_loading_without_a_gpu_names_the_backend() -> None:
    model, example = MODELS["cnn"]()
    program = Runtime.get().load_program(export(model, example, backend="cuda"))
    if env_flag("EXECUTORCH_CUDA") and Runtime.get().is_available("CudaBackend"):
        pytest.skip("this machine has a usable GPU")
    with pytest.raises(ExecutorchError, match="backend 'CudaBackend'"):
        program.load_method()


def test_unknown_backend_is_an_error() -> None:
    from executorch.export import ExportError

    model, example = MODELS["mlp"]()
    with pytest.raises(ExportError, match="unknown backend 'tpu'"):
        export(model, example, backend="tpu")


def test_cuda_archs_travel_with_every_delegate_call() -> None:
    from executorch.serialization.pte import deserialize

    model, example = partly_delegated()
    spec = deserialize(export(model, example, backend="cuda", cuda_archs=["sm_90", "compute_90"]))
    assert len(spec.plans[0].delegates) == int(spec.metadata["cuda_delegate_calls"]) == 2
    cpu_ops = [spec.plans[0].operators[i.op_index][0] for i in spec.plans[0].instructions if hasattr(i, "op_index")]
    assert cpu_ops == ["aten::atan"], cpu_ops
    assert all(d.compile_specs == {"cuda_archs": b"sm_90,compute_90"} for d in spec.plans[0].delegates)
    assert all(d.compile_specs == {} for d in deserialize(export(model, example, backend="cuda")).plans[0].delegates)


def test_tf32_convolutions_travel_with_every_delegate_call() -> None:
    from executorch.export import ExportError
    from executorch.serialization.pte import deserialize

    model, example = partly_delegated()
    spec = deserialize(export(model, example, backend="cuda", tf32_convolutions=True))
    assert [d.compile_specs for d in spec.plans[0].delegates] == [{"tf32_convolutions": b"1"}] * 2
    for kwargs in ({}, {"backend": "cuda", "dtype": torch.float16}):
        with pytest.raises(ExportError, match="tf32_convolutions needs backend='cuda' and float32"):
            export(model, example, tf32_convolutions=True, **kwargs)


@pytest.mark.parametrize("archs, backend", [(["sm90"], "cuda"), ([], "cuda"), (["sm_90"], None)])
def test_bad_cuda_archs_are_an_export_error(archs, backend) -> None:
    from executorch.export import ExportError

    model, example = MODELS["mlp"]()
    with pytest.raises(ExportError, match="cuda_archs"):
        export(model, example, backend=backend, cuda_archs=archs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_half_precision_export_is_one_delegate_call(name: str, dtype) -> None:
    """dtype= exports a converted copy (the caller's module is untouched) whose floating inputs,
    weights and outputs are of that dtype, all in one CudaBackend call."""
    from executorch.serialization.pte import deserialize

    model, example = MODELS[name]()
    before = {k: v.dtype for k, v in model.state_dict().items()}
    spec = deserialize(export(model, example, backend="cuda", dtype=dtype))
    assert {k: v.dtype for k, v in model.state_dict().items()} == before
    single_delegate_call(spec)
    code = _export.DTYPE_CODES[dtype]
    plan = spec.plans[0]
    for i, x in zip(plan.inputs, example):
        assert plan.values[i].payload.dtype == (code if x.is_floating_point() else _export.DTYPE_CODES[x.dtype])
    # The weights are converted; float32 appears only where torch's decompositions compute in it
    # (softmax, layer norm statistics), between conversions on the device.
    payload = deserialize(spec.segments[plan.delegates[0].segment]).plans[0]
    sizes: dict[int, int] = {}
    for v in payload.values:
        if v.kind == "tensor" and v.payload.data_segment >= 0:
            sizes[v.payload.dtype] = sizes.get(v.payload.dtype, 0) + _dtypes.nbytes(v.payload.dtype, v.payload.sizes)
    # The parameters dominate; float32 constants are folded ones (attention masks and zeros).
    assert set(sizes) <= {code, _dtypes.FLOAT32, _dtypes.INT64} and sizes[code] > 5 * sizes.get(_dtypes.FLOAT32, 0), sizes
    assert {payload.values[i].payload.dtype for i in payload.outputs} == {code}


def test_half_precision_needs_every_operator_on_the_gpu() -> None:
    from executorch.export import ExportError

    model, example = partly_delegated()
    with pytest.raises(ExportError, match="CudaBackend does not run aten::atan .CudaBackend does not implement aten::atan"):
        export(model, example, backend="cuda", dtype=torch.float16)
    with pytest.raises(ExportError, match="dtype must be"):
        export(model, example, backend="cuda", dtype=torch.int8)


class VisionOps(torch.nn.Module):
    """The shape and activation operators of real vision and language models that CudaBackend runs:
    slices, selects, concatenation, adaptive pooling (even, uneven and enlarging windows), clamps,
    hard activations, powers and unary math."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.conv1d = torch.nn.Conv1d(10, 10, 3, padding=1, groups=2)
        self.register_buffer("picks", torch.tensor([4, 0, 18, 7, 7]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        F = torch.nn.functional
        y = self.conv(x)
        y = torch.cat([F.hardswish(y[:, :4]), F.relu6(y[:, 4:]), F.hardsigmoid(y[:, 1:3])], 1)
        y = F.leaky_relu(y.clamp(-2.0, 2.5), 0.1) + y[:, :, 1:-1:2].pow(2).mean() + y.select(2, 3).abs().sqrt().sum()
        y = (F.adaptive_avg_pool2d(y, 4) + F.adaptive_avg_pool2d(y[..., :7, 1:], 4) + F.adaptive_avg_pool2d(y[..., :2, :3], 4)
             + torch.sin(y[..., ::2, ::2]).cos() * torch.erf(y[..., 1::2, 1::2]))
        y = torch.log(y.clamp(min=0.5)).flatten(2)
        y = self.conv1d(y) + y.as_strided((2, 10, 16), (160, 16, 1), 0)
        y = F.pad(y, (2, 1, 0, 0, 1, 0), value=0.5) + F.pad(y, (-1, 4))[:, :1, 2:5].sum()
        y = y.index_select(2, self.picks) + y.index_select(0, self.picks[:2] % 3).mean()
        z = F.interpolate(y[:, None], size=(12, 9), mode="bilinear", align_corners=False)
        z = z + F.interpolate(y[:, None], scale_factor=(1.2, 1.8), mode="bilinear", align_corners=True)[..., :12, :9]
        return torch.maximum(z, F.interpolate(y[:, None], scale_factor=2, mode="nearest")[..., :12, :9]).minimum(z + 1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_shape_and_activation_operators_are_one_delegate_call(dtype) -> None:
    from executorch.serialization.pte import deserialize

    torch.manual_seed(0)
    model, example = VisionOps().eval(), (torch.randn(2, 4, 8, 8),)
    spec = deserialize(export(model, example, backend="cuda", dtype=dtype))
    single_delegate_call(spec)
    assert not [i for i in spec.plans[0].instructions if hasattr(i, "op_index")], "a CPU kernel is left"
    # The float32 payload, run on the CPU runtime, computes the model.
    plan, constants = lower(model, example)
    payload, inputs, _ = _partition._subprogram(plan, constants, 0, len(plan.instructions))
    got = Runtime.get().load_program(payload).load_method().execute([example[0].numpy()])[0]
    with torch.no_grad():
        want = model(*example).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


def test_what_stays_on_the_cpu_is_what_the_backend_refuses() -> None:
    """The partitioner's answer is the backend's own (payload.cpp): convolution runs, transposed
    convolution does not, and each refusal says why."""
    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1, self.c2 = torch.nn.ConvTranspose2d(4, 4, 3), torch.nn.Conv2d(4, 4, 3)

        def forward(self, x):
            return self.c2(x).sum() + self.c1(x).sum()

    model, example = M().eval(), (torch.randn(1, 4, 6, 6),)
    plan, constants = lower(model, example)
    reasons = dict(zip((_partition._op_name(plan, i) + f"#{k}" for k, i in enumerate(plan.instructions)),
                       _partition.refusals(plan, constants)))
    convs = {k: v for k, v in reasons.items() if k.startswith("aten::convolution")}
    assert sorted(bool(v) for v in convs.values()) == [False, True], convs
    assert any("only non-transposed convolution" in v for v in convs.values()), convs


class ConvBlocks(torch.nn.Module):
    """What CudaBackend fuses and the exporter folds: convolutions with batch norm (folded into
    them), residual adds and activations (the convolution's epilogue on the GPU), 1x1 convolutions
    (a GEMM on the input itself) and a depthwise convolution; one batch norm reads a convolution
    whose result is also used elsewhere, so it stays."""

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.stem = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.expand = nn.Sequential(nn.Conv2d(8, 16, 1), nn.BatchNorm2d(16), nn.SiLU())
        self.depthwise = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False), nn.BatchNorm2d(16),
                                       nn.Hardswish())
        self.project = nn.Sequential(nn.Conv2d(16, 8, 1, bias=False), nn.BatchNorm2d(8))
        self.shared = nn.Conv2d(8, 8, 3, padding=1)
        self.shared_bn = nn.BatchNorm2d(8)
        for m in self.modules():  # statistics far from the identity, so an unfolded norm shows
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        y = torch.relu(self.project(self.depthwise(self.expand(y))) + y)
        z = self.shared(y)
        return torch.relu(self.shared_bn(z) + y) + z.mean()


class ChannelsLastBlocks(torch.nn.Module):
    """What CudaBackend runs channels-last (NHWC) between cuDNN convolutions, and where it returns
    to NCHW: max and average pooling, a squeeze-excite gate (a mean over the pixels, [N, C, 1, 1]
    broadcast back over them), a depthwise convolution, residual adds; a concatenation of flattened
    maps reads NHWC convolutions' outputs, and one convolution reads an NHWC tensor into an NCHW
    output."""

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.depthwise = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.squeeze, self.excite = nn.Conv2d(16, 4, 1), nn.Conv2d(4, 16, 1)
        self.body = nn.Conv2d(16, 16, 3, padding=1)
        self.average = nn.AvgPool2d(2)
        self.head, self.side = nn.Conv2d(16, 8, 1), nn.Conv2d(16, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = torch.nn.functional
        y = self.pool(torch.relu(self.stem(x)))
        gate = torch.sigmoid(self.excite(torch.relu(self.squeeze(y.mean((2, 3), keepdim=True)))))
        y = f.silu(self.depthwise(y)) * gate + y
        y = torch.relu(self.body(y) + y)
        head = self.head(self.average(y))
        return torch.cat([head.flatten(1), f.adaptive_avg_pool2d(self.side(y), 1).flatten(1)], 1)


class AttentionBlocks(torch.nn.Module):
    """Multi-head attention as models write it: nn.MultiheadAttention batch first (its projections on
    a transposed input, heads split by permutes that CudaBackend's attention reads in place), then
    heads split by hand from one packed projection, causal, merged by a permute attention writes in
    place, and projected with the residual added by the projection's matrix product (either order)."""

    def __init__(self) -> None:
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(32, 4, batch_first=True)
        self.qkv = torch.nn.Linear(32, 96)
        self.proj = torch.nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.attention(x, x, x, need_weights=False)[0] + x
        b, n, e = y.shape
        q, k, v = self.qkv(y).view(b, n, 3, 4, e // 4).permute(2, 0, 3, 1, 4)
        z = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return y + self.proj(z.transpose(1, 2).reshape(b, n, e))


class ElementwiseChains(torch.nn.Module):
    """Elementwise runs CudaBackend computes in one pass: GPT-2's tanh GELU written out (its input
    read three times), a broadcast constant and scalar operands; `y` is read after its run, so it
    is kept."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(16, 16)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x)
        g = 0.5 * h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * torch.pow(h, 3.0))))
        y = (g * self.scale - 0.25) / 1.5
        return torch.sigmoid(self.linear(torch.relu(y))) * 2.0 + y


class HalfGuards(torch.nn.Module):
    """T5's half-precision guards: a layer norm computed in float32 on float16 activations (mixed
    dtypes, which the exporter converts explicitly), and a clamp bound chosen by isinf(...).any()."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        y = (x * torch.rsqrt(variance + 1e-6)).to(x.dtype)
        bound = torch.where(torch.isinf(y).any(), torch.finfo(y.dtype).max - 1000, torch.finfo(y.dtype).max)
        return torch.clamp(y, min=-bound, max=bound)


def test_batch_norm_is_folded_into_the_convolution_before_it() -> None:
    from executorch.serialization.pte import deserialize

    torch.manual_seed(0)
    model, example = ConvBlocks().eval(), (torch.randn(2, 4, 8, 8),)
    spec = deserialize(export(model, example))
    ops = [f"{name}.{overload}" if overload else name for name, overload in spec.plans[0].operators]
    calls = [ops[i.op_index] for i in spec.plans[0].instructions]
    # Five convolutions; of five norms only the one whose convolution is read twice stays.
    assert calls.count("aten::convolution") == 5
    assert calls.count("aten::_native_batch_norm_legit_no_training") == 1, calls
    got = Runtime.get().load_program(export(model, example)).load_method().execute([example[0]])[0]
    with torch.no_grad():
        want = model(*example)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * float(want.abs().max()))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("model, shape", [(ConvBlocks, (2, 4, 8, 8)), (ChannelsLastBlocks, (2, 3, 32, 32)),
                                          (AttentionBlocks, (3, 9, 32)), (ElementwiseChains, (4, 16)),
                                          (HalfGuards, (3, 8))])
def test_blocks_are_one_delegate_call(model, shape, dtype) -> None:
    from executorch.serialization.pte import deserialize

    torch.manual_seed(0)
    spec = deserialize(export(model().eval(), (torch.randn(*shape),), backend="cuda", dtype=dtype))
    single_delegate_call(spec)
    assert not [i for i in spec.plans[0].instructions if hasattr(i, "op_index")], "a CPU kernel is left"


def test_views_in_a_payload_share_their_input_memory() -> None:
    """A view's output, and a permute's that only moves dimensions of size 1, is planned on its
    input's bytes (the backend then skips the copy); the payload still computes the model."""
    from executorch.serialization.pte import deserialize

    class M(torch.nn.Module):
        def forward(self, x):
            y = torch.relu(x).flatten(1).unsqueeze(0).clone()
            r = torch.tanh(x)
            # r[1] and r[1:] are contiguous parts of r; r[:, 1] is not
            # [1, 3, 4] -> [3, 1, 4] moves a dimension of size 1 only; [3, 1, 4] -> [4, 1, 3] reorders
            p = torch.exp(x).sum(0, keepdim=True).permute(1, 0, 2)
            return (torch.sigmoid(y).squeeze(0) + y.sum(), r[1] * r[1:].sum() + r[:, 1].sum(),
                    p.sin() + p.permute(2, 1, 0).sum())

    model, example = M().eval(), (torch.randn(2, 3, 4),)
    plan, constants = lower(model, example)
    payload, _, _ = _partition._subprogram(plan, constants, 0, len(plan.instructions))
    sub = deserialize(payload).plans[0]
    by_op: dict[str, list] = {}
    for ins in sub.instructions:
        by_op.setdefault(sub.operators[ins.op_index][0], []).append(ins)
    views = by_op["aten::view"] + by_op["aten::unsqueeze"] + by_op["aten::clone"]
    assert len(views) == 3
    for ins in views:
        src, dst = sub.values[ins.args[0]].payload, sub.values[ins.args[-1]].payload
        assert src.mem_offset == dst.mem_offset, (src, dst)
    in_place = [sub.values[i.args[0]].payload.mem_offset == sub.values[i.args[-1]].payload.mem_offset
                for i in by_op["aten::permute"]]
    assert in_place == [True, False], in_place
    # [2, 3, 4] float32: r[1] and r[1:] start 48 bytes in; r[:, 1] is a copy of its own.
    offsets = sorted(sub.values[i.args[-1]].payload.mem_offset - sub.values[i.args[0]].payload.mem_offset
                     for i in by_op["aten::select"] + by_op["aten::slice"])
    assert len(offsets) == 3 and offsets.count(48) == 2, offsets
    got = Runtime.get().load_program(payload).load_method().execute([example[0].numpy()])
    for g, w in zip(got, model(*example)):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_mixed_dtypes_and_isinf_match_torch(dtype) -> None:
    """Operands of another dtype are converted as torch promotes them, isinf and a full any are
    rewritten into operators the kernels have; the CPU program matches torch."""
    x = (torch.randn(3, 8) * 4).to(dtype)
    x[1, 2] = float("inf")
    model = HalfGuards().eval()
    (got,) = Runtime.get().load_program(export(model, (x,), dtype=dtype)).load_method().execute([x])
    with torch.no_grad():
        want = model(x)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.float(), want.float(), rtol=1e-2, atol=1e-2, equal_nan=True)  # the inf row



class NormForms(torch.nn.Module):
    """What the backend runs in another form: group norm (with and without affine parameters), a
    2-norm over the last dimension (F.normalize) and a mean over a leading dimension."""

    def __init__(self) -> None:
        super().__init__()
        self.affine = torch.nn.GroupNorm(4, 8)
        self.plain = torch.nn.GroupNorm(8, 8, affine=False)
        with torch.no_grad():
            self.affine.weight.normal_()
            self.affine.bias.normal_()

    def forward(self, x):
        y = self.plain(self.affine(x))
        unit = torch.nn.functional.normalize(y.flatten(2), dim=-1).view_as(y)
        return unit + y.mean(1, keepdim=True) + y.mean(1).unsqueeze(1) * 0.5


class TransformerForms(torch.nn.Module):
    """Llama's RMS norm (float32 between two conversions, then the weight) and rotary embedding on
    a permuted query (executorch::rms_norm, executorch::rope), and Gemma's norm, whose weight
    multiplies in float32: fused in float32, left as it is in half precision."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(32))
        self.gemma = torch.nn.Parameter(torch.randn(32) * 0.1)
        inv = 1.0 / 10000 ** (torch.arange(0, 8, 2).float() / 8)
        angles = torch.outer(torch.arange(5).float(), inv)
        self.register_buffer("cos", torch.cat((angles, angles), -1).cos())
        self.register_buffer("sin", torch.cat((angles, angles), -1).sin())

    @staticmethod
    def rms(x: torch.Tensor) -> torch.Tensor:
        x32 = x.to(torch.float32)
        return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-6)

    def forward(self, x):  # [2, 5, 32]
        y = self.weight * self.rms(x).to(x.dtype)
        q = y.view(2, 5, 4, 8).transpose(1, 2)  # [2, 4, 5, 8], not contiguous
        rotated = torch.cat((-q[..., 4:], q[..., :4]), dim=-1)
        q = q * self.cos.to(x.dtype) + rotated * self.sin.to(x.dtype)
        z = q.transpose(1, 2).reshape(2, 5, 32) + x
        return (self.rms(z) * (1.0 + self.gemma.float())).to(x.dtype)


class MaskOps(torch.nn.Module):
    """transformers' attention masks: a padding mask picked by index tensors (index.Tensor), and'ed
    with a causal one (bitwise_and), or'ed with the diagonal, converted to integers and back."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("causal", torch.ones(5, 5, dtype=torch.bool).tril())
        self.register_buffer("diagonal", torch.eye(5, dtype=torch.bool))

    def forward(self, x):  # [2, 5, 16]
        keep = x[..., 0] > 0
        padding = keep[torch.arange(2).view(2, 1, 1), torch.arange(5).view(1, 1, 5)]  # [2, 1, 5]
        mask = (self.causal & padding) | self.diagonal
        q = x.unsqueeze(1)
        att = torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask.unsqueeze(1)).squeeze(1)
        counts = keep.long().to(x.dtype)  # bool -> int64 -> float
        return att + counts.unsqueeze(-1) * 0.5 + mask.to(torch.int32).to(x.dtype).sum(-1, keepdim=True)


class IntegerOps(torch.nn.Module):
    """Integer position arithmetic as RoBERTa and CLIP's text model write it: compares of int64
    tensors with numbers, a running sum, int32 sums and products, gather along a dimension and
    argmax (of integers, with ties: the first wins; and of floats)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.linspace(-1, 1, 12).view(1, 12))

    def forward(self, x):  # [2, 5, 16]
        ids = (x[..., 0] * 2).long()  # [2, 5], small integers of both signs
        mask = ids.ne(1).int()
        positions = (torch.cumsum(mask, dim=1).type_as(mask) + 2) * mask
        picked = torch.gather(self.table.expand(2, -1), 1, positions.long() + 1)
        last = x[torch.arange(2), ids.argmax(dim=-1)]  # [2, 16]
        zeros = (ids == 0).to(x.dtype) + torch.maximum(ids, mask.long()).to(x.dtype)
        return picked + zeros + x.argmax(-1).to(x.dtype) + last.sum(-1, keepdim=True)


class Volumes(torch.nn.Module):
    """Video models' 3-D convolutions (cuDNN on the device): batch norm folded in, a strided grouped
    one with a bias, a (1, 3, 3) spatial then a (3, 1, 1) temporal one as R(2+1)D factors them, and
    a residual block's conv -> add -> relu (one fused cuDNN call on the device)."""

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.stem = nn.Sequential(nn.Conv3d(3, 8, 3, padding=1, bias=False), nn.BatchNorm3d(8), nn.ReLU())
        self.grouped = nn.Conv3d(8, 8, 3, stride=(1, 2, 2), padding=1, groups=2)
        self.spatial = nn.Conv3d(8, 6, (1, 3, 3), padding=(0, 1, 1), dilation=(1, 2, 2))
        self.temporal = nn.Conv3d(6, 4, (3, 1, 1), padding=(1, 0, 0))
        self.block = nn.Conv3d(4, 4, 3, padding=1)
        with torch.no_grad():
            self.stem[1].running_mean.uniform_(-0.5, 0.5)
            self.stem[1].running_var.uniform_(0.5, 2.0)

    def forward(self, x):  # [2, 3, 4, 8, 8]
        y = self.temporal(torch.relu(self.spatial(self.grouped(self.stem(x)))))
        y = torch.relu(self.block(y) + y)
        return y + y.mean(dim=(2, 3, 4), keepdim=True)


def _device_lowered(model: torch.nn.Module, example: tuple):
    """The float32 plan and constants export(backend="cuda") delegates from, with its rewrites."""
    ep = _export._decomposed(torch.export.export(model, example), "cuda")
    plan, shared = _export._lower(ep, "forward", set(_export.supported_operators()))
    return plan, shared.data()


def _payload_matches(payload: bytes, module: torch.nn.Module, example: tuple[torch.Tensor, ...]) -> None:
    """The payload, run on the CPU runtime, gives `module`'s output in torch (1e-4 relative)."""
    (got,) = Runtime.get().load_program(payload).load_method().execute([example[0].numpy()])
    with torch.no_grad():
        want = module(*example).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("model, shape", [(NormForms, (2, 8, 6, 6)), (MaskOps, (2, 5, 16)), (IntegerOps, (2, 5, 16)),
                                          (Volumes, (2, 3, 4, 8, 8)), (TransformerForms, (2, 5, 32))])
def test_device_forms_are_one_payload_that_matches_torch(model, shape) -> None:
    """Rewritten for the device and delegated whole in every dtype; the float32 payload, run on the
    CPU runtime, gives torch's output (1e-4 relative)."""
    from executorch.serialization.pte import deserialize

    torch.manual_seed(0)
    module, example = model().eval(), (torch.randn(*shape),)
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        spec = deserialize(export(module, example, backend="cuda", dtype=dtype))
        single_delegate_call(spec)
        assert not [i for i in spec.plans[0].instructions if hasattr(i, "op_index")], f"{dtype}: a CPU kernel is left"
    plan, constants = _device_lowered(module, example)
    assert _partition._runs(plan, constants) == [(0, len(plan.instructions))]
    names = {plan.operators[i.op_index][0] for i in plan.instructions}
    rewritten = {"aten::native_group_norm", "aten::linalg_vector_norm", "aten::pow", "aten::neg", "aten::cat"}
    assert not names & rewritten, names
    if model is TransformerForms:
        assert {"executorch::rms_norm", "executorch::rope"} <= names, names
    payload, _, _ = _partition._subprogram(plan, constants, 0, len(plan.instructions))
    _payload_matches(payload, module, example)


@pytest.mark.parametrize("dtype, bound", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
def test_transformer_forms_run_fused_on_the_cpu_too(dtype, bound) -> None:
    """The CPU program has the same fused norm and rotary embedding and gives torch's output (the
    bound relative to the largest output; bfloat16 programs compute in float32 on the CPU)."""
    from executorch.serialization.pte import deserialize

    torch.manual_seed(0)
    module, x = TransformerForms().eval(), torch.randn(2, 5, 32)
    pte = export(module, (x,), dtype=dtype)
    names = {name for name, _ in deserialize(pte).plans[0].operators}
    assert {"executorch::rms_norm", "executorch::rope"} <= names and "aten::neg" not in names, names
    (got,) = Runtime.get().load_program(pte).load_method().execute([x.to(dtype)])
    with torch.no_grad():
        want = module.to(dtype)(x.to(dtype)).float()
    got = torch.as_tensor(np.asarray(got.float() if isinstance(got, torch.Tensor) else got))
    assert float((got - want).abs().max()) <= bound * max(1.0, float(want.abs().max()))


@pytest.mark.parametrize("backend", [None, "cuda", "xnnpack"])
def test_repeated_key_value_heads_are_read_in_place(backend) -> None:
    """Llama's repeat_kv (expand and copy of each key/value head) before attention becomes
    enable_gqa on the CPU kernels and CudaBackend, which read the shared heads themselves; XnnpackBackend,
    which takes as many key/value heads as query heads, keeps the copy. The CPU program matches torch."""
    from executorch.serialization.pte import deserialize
    from tests.models.real import MODELS as REAL

    model, example = REAL["llama"]()  # 4 query heads over 2 key/value heads
    pte = export(model, example, backend=backend)
    spec = deserialize(pte)
    if backend == "cuda":
        single_delegate_call(spec)
        plan, _ = _device_lowered(model, example)
        names = {plan.operators[i.op_index][0] for i in plan.instructions}
    else:
        names = {name for name, _ in spec.plans[0].operators}
    assert ("aten::expand_copy" in names or "aten::expand" in names) == (backend == "xnnpack"), names
    if backend == "cuda":
        return
    with torch.no_grad():
        want = model(*example)[0]
    got = torch.as_tensor(np.asarray(Runtime.get().load_program(pte).load_method().execute(list(example))[0]))
    assert float((got - want).abs().max()) <= 1e-5 * max(1.0, float(want.abs().max()))


@pytest.mark.parametrize("name", ["bert", "llama", "wav2vec2", "timm_levit_128s", "roberta", "clip_text", "lstm", "r3d_18",
                                  "bloom", "falcon"])
def test_real_models_with_masks_and_norms_are_one_delegate_call(name: str) -> None:
    """transformers' masks (index, bitwise_and, integer casts), group norm, LeViT's mean over
    tokens, RoBERTa's and CLIP's integer positions (cumsum, gather, argmax), recurrent cells, 3-D
    convolutions, BLOOM's ALiBi (float slopes times integer positions) and Falcon's x[:, :, [i]]
    run on the device: export(backend="cuda") in float16 leaves no CPU kernel."""
    from executorch.serialization.pte import deserialize
    from tests.models.real import MODELS as REAL, MORE_MODELS

    model, example = {**REAL, **MORE_MODELS}[name]()
    spec = deserialize(export(model, example, backend="cuda", dtype=torch.float16))
    single_delegate_call(spec)
    assert not [i for i in spec.plans[0].instructions if hasattr(i, "op_index")], "a CPU kernel is left"


@pytest.mark.parametrize("name", ["bloom", "falcon"])
def test_device_rewrites_of_real_models_compute_the_model(name: str) -> None:
    """The payload of a float32 export with backend="cuda" (the device's rewrites applied: ALiBi's
    promotions, Falcon's permuted index), run on the CPU runtime, gives torch's output (1e-4)."""
    from executorch.serialization.pte import deserialize
    from tests.models.real import MORE_MODELS

    model, example = MORE_MODELS[name]()
    spec = deserialize(export(model, example, backend="cuda"))
    single_delegate_call(spec)
    plan, call = spec.plans[0], spec.plans[0].instructions[0]
    payload = spec.segments[plan.delegates[0].segment]
    got = Runtime.get().load_program(payload).load_method().execute([x.numpy() for x in example])
    out = got[call.args[len(plan.inputs):].index(plan.outputs[0])]
    with torch.no_grad():
        want = model(*example)[0].numpy()
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))


class Siblings(torch.nn.Module):
    """A decoder step's projections: query, key and value of one input (with biases, as Qwen2's),
    gate and up of another (without), and down."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v = torch.nn.Linear(32, 32), torch.nn.Linear(32, 16), torch.nn.Linear(32, 16)
        self.gate, self.up = torch.nn.Linear(32, 64, bias=False), torch.nn.Linear(32, 64, bias=False)
        self.down = torch.nn.Linear(64, 32, bias=False)

    def forward(self, x):
        h = self.q(x) * self.k(x).repeat(1, 1, 2) + self.v(x).repeat(1, 1, 2)
        return self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h)) + h


@pytest.mark.parametrize("rows, products", [(1, 3), (8, 3), (9, 6)])
def test_a_decoder_steps_sibling_projections_are_one_product(rows: int, products: int) -> None:
    """With backend="cuda", linear layers of up to 8 rows reading one input are one product by
    their joined weights (q/k/v: 3 -> 1, gate/up: 2 -> 1), each layer's output a slice of it; with
    one row the slices lie in place in the product. The payload, run on the CPU runtime, gives
    torch's output (1e-4 relative)."""
    torch.manual_seed(0)
    module, example = Siblings().eval(), (torch.randn(1, rows, 32),)
    plan, constants = _device_lowered(module, example)
    names = [plan.operators[i.op_index][0] for i in plan.instructions]
    assert sum(n in ("aten::mm", "aten::addmm") for n in names) == products, names
    payload, _, _ = _partition._subprogram(plan, constants, 0, len(plan.instructions))
    if rows == 1:
        from executorch.serialization.pte import deserialize

        sub = deserialize(payload).plans[0]
        for ins in sub.instructions:
            if sub.operators[ins.op_index][0] == "aten::slice":
                src, out = sub.tensor(ins.args[0]), sub.tensor(ins.args[-1])
                start = sub.values[ins.args[2]].payload
                assert out.mem_offset == src.mem_offset + start * 4, "a slice of one row is copied"
    _payload_matches(payload, module, example)


@pytest.mark.parametrize("quantize", ["int4", "int8_weight_only"])
@pytest.mark.parametrize("rows, products", [(1, 3), (9, 6)])
def test_quantized_sibling_projections_are_one_product(quantize: str, rows: int, products: int) -> None:
    """The same for weight-only quantized layers: up to 8 rows, q/k/v and gate/up are one GEMV each by
    their packed weights, scales and biases joined; the payload, run on the CPU runtime, gives the
    quantized module's output in torch (1e-4 relative)."""
    from executorch.export._quantize import quantize_linear_int4, quantize_linear_int8_weight_only

    torch.manual_seed(0)
    module = Siblings().eval()
    module, _ = quantize_linear_int4(module, 32) if quantize == "int4" else quantize_linear_int8_weight_only(module)
    example = (torch.randn(1, rows, 32),)
    plan, constants = _device_lowered(module, example)
    names = [plan.operators[i.op_index][0] for i in plan.instructions]
    target = "executorch::int4_linear" if quantize == "int4" else "executorch::int8_weight_linear"
    assert sum(n == target for n in names) == products, names
    payload, _, _ = _partition._subprogram(plan, constants, 0, len(plan.instructions))
    _payload_matches(payload, module, example)


class DeviceForms(torch.nn.Module):
    """What the device runs only rewritten: softmax over a leading dimension (ResNeSt, CoaT),
    attention on 5-D windows (Twins, NesT), max.dim (VOLO), a bool mask's bitwise_not (DeBERTa),
    slice_scatter (MViT's class token)."""

    def forward(self, x, q, k, v):
        a = torch.softmax(x, dim=1) + torch.log_softmax(x, dim=0)
        b = F.scaled_dot_product_attention(q, k, v)
        values, index = x.max(dim=1)
        keep = ~(x > 0)
        y = x.clone()
        y[:, 1:3] = torch.tanh(x[:, :2])
        return a, b, values, index, keep, y, x.max(dim=2, keepdim=True)[0]


def test_device_forms_of_leading_softmax_deep_attention_max_not_and_slice_scatter() -> None:
    """export(backend="cuda") of the operators above is one CudaBackend call; its payload, run on the
    CPU runtime, computes what torch does (1e-5)."""
    from executorch.serialization.pte import deserialize

    torch.manual_seed(0)
    example = (torch.randn(3, 5, 7), torch.randn(2, 3, 4, 6, 8), torch.randn(2, 3, 4, 9, 8), torch.randn(2, 3, 4, 9, 8))
    model = DeviceForms().eval()
    spec = deserialize(export(model, example, backend="cuda"))
    single_delegate_call(spec)
    plan, call = spec.plans[0], spec.plans[0].instructions[0]
    payload = spec.segments[plan.delegates[0].segment]
    names = {op for op, _ in deserialize(payload).plans[0].operators}
    assert not names & {"aten::max.dim", "aten::bitwise_not", "aten::slice_scatter"}, names
    got = Runtime.get().load_program(payload).load_method().execute([x.numpy() for x in example])
    outputs = call.args[len(plan.inputs):]
    with torch.no_grad():
        want = model(*example)
    for i, w in enumerate(want):
        out = np.asarray(got[outputs.index(plan.outputs[i])])
        w = w.numpy()
        assert out.shape == w.shape and out.dtype == w.dtype, (i, out.shape, w.shape)
        np.testing.assert_allclose(out, w, rtol=1e-5, atol=1e-5)
