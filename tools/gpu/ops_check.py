"""On a GPU machine with torch and the wheel installed, from a checkout: the operator test models of
tests/cuda_export_test.py through CudaBackend against torch, in each dtype, and torch CUDA tensors
in and out of Method.execute.

- VisionOps: slices, selects, concatenation, padding, index_select, resampling, pooling,
  activations, 1-D and depthwise convolution;
- ConvBlocks: batch norm folded into convolutions, residual adds and activations fused into the
  convolution's epilogue, 1x1 convolutions without im2col;
- ChannelsLastBlocks: NHWC tensors between cuDNN convolutions (pooling, means over pixels,
  broadcasts, depthwise convolution) and the conversions back to NCHW;
- AttentionBlocks: multi-head attention reading permuted q, k and v in place, and split by hand,
  its output written where the permute after it puts it, residual adds in the projections' GEMMs;
- ElementwiseChains: runs of elementwise ops computed in one pass (GPT-2's GELU written out);
- HalfGuards: T5's mixed-dtype layer norm and isinf-chosen clamp;
- NormForms: group norm, F.normalize and a mean over a leading dimension, rewritten for the device;
- TransformerForms: Llama's RMS norm and rotary embedding as one kernel each, Gemma's norm;
- MaskOps: transformers' attention masks (index.Tensor, bitwise and/or, integer casts);
- IntegerOps: RoBERTa's and CLIP's integer positions (compares, cumsum, gather, argmax);
- Volumes: 3-D convolutions through cuDNN (grouped, strided, dilated, factored);
- LSTM, GRU: stacked bidirectional recurrences, one kernel per layer (one per step where wide);
- weight-only int4 and int8 linear layers: the GEMV (up to 8 rows) and the dequantizing product, a residual
  added after one (ResidualMlp, which also covers a bias-free product with its residual);
- GEMV: products of up to 8 rows through the built-in GEMV, with an RMS norm or silu * up folded in;
- TF32: float32 convolutions exported with tf32_convolutions=True are computed in TF32 (they differ
  from the IEEE ones, within TF32's error), and IEEE again without it.

    python3 tools/gpu/ops_check.py .
"""
import copy
import itertools
import sys

import numpy as np
import torch

sys.path.insert(0, sys.argv[1])
from executorch.export import export
from executorch.runtime import ExecutorchError, Runtime
from executorch.serialization.pte import deserialize, serialize
from tests.cuda_export_test import (AttentionBlocks, ChannelsLastBlocks, ConvBlocks, ElementwiseChains, HalfGuards,
                                    IntegerOps, MaskOps, NormForms, TransformerForms, VisionOps,
                                    Volumes)
from tests.recurrent_test import Recurrent

BOUNDS = ((torch.float32, 1e-4), (torch.float16, 1e-2), (torch.bfloat16, 6e-2))


def check_dtypes(name: str, model: torch.nn.Module, x: torch.Tensor) -> None:
    for dtype, bound in BOUNDS:
        pte = export(model, (x,), backend="cuda", dtype=dtype)
        method = Runtime.get().load_program(pte).load_method()
        xi = x.to(dtype)
        got = method.execute([xi.numpy() if dtype != torch.bfloat16 else xi])[0]
        got = np.asarray(got.float() if isinstance(got, torch.Tensor) else got, dtype=np.float32)
        with torch.no_grad():
            ref = model(xi.float()).numpy()
        err = float(np.abs(got - ref).max()) / max(1.0, float(np.abs(ref).max()))
        print(f"{name} {str(dtype)[6:]}: max |ours - torch| / max(1, max |torch|) = {err:.2e} (bound {bound})")
        if err > bound:
            raise SystemExit(f"{name} {dtype}: out of bounds")


def check_device_tensors() -> None:
    """CUDA tensors in, CUDA tensors out, on a stream of the caller's, equal to the host path."""
    torch.manual_seed(0)
    model, x = ConvBlocks().eval(), torch.randn(2, 4, 8, 8)
    method = Runtime.get().load_program(export(model, (x,), backend="cuda")).load_method()
    assert method._method.inputs_on_device() == [True], method._method.inputs_on_device()
    assert [m[2] for m in method._method.output_meta()] == [True], method._method.output_meta()
    host = method.execute([x])[0]
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        xd = x.cuda() * 1.0  # produced on the caller's stream, consumed there in order
        outs = [method.execute([xd])[0] for _ in range(3)]
        doubled = outs[-1] * 2
    stream.synchronize()
    assert all(o.is_cuda and o.device == xd.device for o in outs), [o.device for o in outs]
    assert len({o.data_ptr() for o in outs}) == 3, "each call fills a tensor of its own"
    for o in outs:
        torch.testing.assert_close(o.cpu(), host, rtol=0, atol=0)
    torch.testing.assert_close(doubled.cpu(), host * 2)
    # After device calls, a host call gets host memory back.
    torch.testing.assert_close(method.execute([x])[0], host, rtol=0, atol=0)

    class Mixed(torch.nn.Module):  # the transposed convolution stays on the CPU
        def __init__(self) -> None:
            super().__init__()
            self.up = torch.nn.ConvTranspose2d(4, 4, 2, stride=2)

        def forward(self, x):
            return self.up(torch.relu(x)), x.sum()

    m = Mixed().eval()
    method = Runtime.get().load_program(export(m, (x,), backend="cuda")).load_method()
    got = method.execute([x.cuda()])
    with torch.no_grad():
        want = m(x)
    assert all(g.is_cuda for g in got), [g.device for g in got]
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-4)
    print("device tensors: CUDA in, CUDA out on the caller's stream, equal to the host path")


def check_attention() -> None:
    """scaled_dot_product_attention alone, q, k, v (and a mask) as inputs: head sizes that run on
    tensor cores (multiples of 16) and one that does not, partial tiles of queries and keys,
    causal, bool and additive masks, keys split across blocks; against torch in float32 on the
    same rounded inputs."""

    class Sdpa(torch.nn.Module):
        def __init__(self, causal: bool, gqa: bool) -> None:
            super().__init__()
            self.causal, self.gqa = causal, gqa

        def forward(self, q, k, v, *mask):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask[0] if mask else None,
                                                                    is_causal=self.causal, enable_gqa=self.gqa)

    torch.manual_seed(0)
    cases = [  # batch, heads, queries, keys, head size, causal, mask; tensor cores from 64 queries
        (2, 4, 64, 64, 16, False, None), (2, 3, 70, 70, 64, True, None), (2, 2, 130, 37, 128, False, None),
        (1, 2, 67, 67, 64, False, "bool"), (2, 2, 80, 50, 64, False, "additive"), (32, 12, 197, 197, 64, False, None),
        # the scalar kernel: few queries, or a head size that is no multiple of 16
        (2, 4, 9, 9, 16, False, None), (1, 2, 5, 67, 64, False, "bool"), (2, 2, 33, 33, 64, False, "additive"),
        (2, 2, 70, 70, 40, False, None),
        # split keys (few query rows, 256 keys or more): a decoder's step over its cache, a partial
        # last split, causal rows whose later splits hold no key, a head size no multiple of 32
        (1, 8, 1, 2048, 64, False, "bool"), (1, 4, 1, 300, 128, False, None), (2, 2, 3, 1000, 64, True, None),
        (1, 2, 2, 513, 40, False, "additive"),
        # batched decode: 256 or more query rows in all, still split
        (8, 32, 1, 2048, 64, False, "bool"), (16, 32, 1, 512, 64, False, "additive"), (32, 12, 4, 600, 64, True, None),
        # grouped key/value heads (enable_gqa): decode over a cache, a prefill chunk whose later keys
        # the mask removes (whole tiles skipped), the scalar kernel
        (8, 32, 1, 2048, 64, False, "cache", 8), (2, 32, 200, 1024, 64, False, "cache", 8),
        (2, 8, 70, 70, 40, True, None, 2)]
    for b, h, lq, lk, d, causal, mask_kind, *grouped in cases:
        hk = grouped[0] if grouped else h
        q, k, v = torch.randn(b, h, lq, d), torch.randn(b, hk, lk, d), torch.randn(b, hk, lk, d)
        inputs = [q, k, v]
        if mask_kind == "bool":
            keep = torch.rand(b, 1, lq, lk) > 0.5
            keep[..., 0] = True  # every row attends somewhere
            inputs.append(keep)
        elif mask_kind == "cache":  # causal over the first lq + 100 positions of a longer cache, the rest unused
            inputs.append(torch.arange(lk)[None, None, None, :] <= torch.arange(100, 100 + lq)[None, None, :, None])
        elif mask_kind == "additive":
            inputs.append(torch.randn(b, 1, lq, lk))
        model = Sdpa(causal, hk != h).eval()
        for dtype, bound in BOUNDS[1:]:
            xs = [x.to(dtype) if x.is_floating_point() else x for x in inputs]
            method = Runtime.get().load_program(export(model, tuple(xs), backend="cuda", dtype=dtype)).load_method()
            got = method.execute([x.cuda() for x in xs])[0].float().cpu()
            with torch.no_grad():
                ref = model(*[x.float() if x.is_floating_point() else x for x in xs])
            err = float((got - ref).abs().max()) / max(1.0, float(ref.abs().max()))
            label = (f"attention b{b} h{h}{f'/{hk}' if hk != h else ''} q{lq} k{lk} d{d}{' causal' if causal else ''}"
                     f"{' ' + mask_kind if mask_kind else ''}")
            print(f"{label} {str(dtype)[6:]}: relative error {err:.2e} (bound {bound})")
            if err > bound:
                raise SystemExit(f"{label} {dtype}: out of bounds")


def check_tf32() -> None:
    torch.manual_seed(0)
    model, x = Volumes().eval(), torch.randn(4, 3, 8, 32, 32)  # 3-D convolutions: cuDNN's alone
    with torch.no_grad():
        ref = model(x).numpy()
    got = {}
    for tf32 in (False, True):
        method = Runtime.get().load_program(export(model, (x,), backend="cuda", tf32_convolutions=tf32)).load_method()
        got[tf32] = np.asarray(method.execute([x.numpy()])[0])
    scale = float(np.abs(ref).max())
    ieee, tf32 = (float(np.abs(got[k] - ref).max()) / scale for k in (False, True))
    apart = float(np.abs(got[True] - got[False]).max()) / scale
    print(f"TF32 convolutions: relative error {tf32:.2e} (IEEE {ieee:.2e}), {apart:.2e} apart")
    if not (ieee <= 1e-4 and 1e-6 < apart and tf32 <= 5e-3):
        raise SystemExit("tf32_convolutions: not TF32, or out of bounds")
    spec = deserialize(export(model, (x,), backend="cuda", tf32_convolutions=True))
    spec.plans[0].delegates[0].compile_specs["tf32_convolutions"] = b"yes"
    try:
        Runtime.get().load_program(serialize(spec)).load_method()
        raise SystemExit("a tf32_convolutions spec of b'yes' loaded")
    except ExecutorchError as e:
        assert "tf32_convolutions" in str(e), e


check_attention()
torch.manual_seed(0)
check_dtypes("VisionOps", VisionOps().eval(), torch.randn(2, 4, 8, 8))
torch.manual_seed(0)
check_dtypes("ConvBlocks", ConvBlocks().eval(), torch.randn(2, 4, 8, 8))
torch.manual_seed(0)
check_dtypes("ChannelsLastBlocks", ChannelsLastBlocks().eval(), torch.randn(2, 3, 32, 32))
torch.manual_seed(0)
check_dtypes("AttentionBlocks", AttentionBlocks().eval(), torch.randn(3, 9, 32))
check_dtypes("AttentionBlocks batch 1", AttentionBlocks().eval(), torch.randn(1, 9, 32))  # layout-keeping permutes
torch.manual_seed(0)
check_dtypes("ElementwiseChains", ElementwiseChains().eval(), torch.randn(4, 16))
check_dtypes("HalfGuards", HalfGuards().eval(), torch.randn(3, 8))
check_dtypes("NormForms", NormForms().eval(), torch.randn(2, 8, 6, 6))
check_dtypes("MaskOps", MaskOps().eval(), torch.randn(2, 5, 16))
check_dtypes("IntegerOps", IntegerOps().eval(), torch.randn(2, 5, 16))
torch.manual_seed(0)
check_dtypes("TransformerForms", TransformerForms().eval(), torch.randn(2, 5, 32))
torch.manual_seed(0)
check_dtypes("Volumes", Volumes().eval(), torch.randn(2, 3, 4, 8, 8))


class Sequence(torch.nn.Module):
    """The output sequence of a recurrent layer (check_dtypes compares one output)."""

    def __init__(self, cell: str) -> None:
        super().__init__()
        self.inner = Recurrent(cell, False, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x):
        return self.inner(x)[0]


class WideSequence(torch.nn.Module):
    """A recurrent layer whose weights do not fit in shared memory: at 256 units too wide for one
    thread block (one kernel per step), at 128 one block reading them from memory. Returns the
    sequence and the final states summed into one output."""

    def __init__(self, cell: str, hidden: int) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.rnn = getattr(torch.nn, cell)(16, hidden, batch_first=True, bidirectional=True)

    def forward(self, x):
        y, state = self.rnn(x)
        final = sum(s.sum() for s in (state if isinstance(state, tuple) else (state,)))
        return y + final


for cell in ("LSTM", "GRU"):
    check_dtypes(cell, Sequence(cell).eval(), torch.randn(3, 5, 8))
    check_dtypes(f"wide {cell}", WideSequence(cell, 256).eval(), torch.randn(2, 7, 16))
    check_dtypes(f"one-block {cell}", WideSequence(cell, 128).eval(), torch.randn(1, 6, 16))


class ResidualMlp(torch.nn.Module):
    """Llama's MLP block shape: bias-free products, the second added to the input right after it
    (fused into the product: cuBLASLt's C matrix, or the weight-only GEMV's epilogue)."""

    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(256, 384, bias=False)
        self.down = torch.nn.Linear(384, 256, bias=False)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(x)))


torch.manual_seed(0)
check_dtypes("ResidualMlp rows 1", ResidualMlp().eval(), torch.randn(1, 256))
check_dtypes("ResidualMlp rows 3", ResidualMlp().eval(), torch.randn(3, 256))


class WideMlp(torch.nn.Module):
    """A layer of more than 8192 output features (an odd count): the GEMV takes two per warp there,
    the last warp one."""

    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(256, 8209)

    def forward(self, x):
        # Its output is the model's: a layer after it would take 8209 input features, which no
        # weight-only layer on the device takes (a multiple of 32 and of the group).
        return torch.nn.functional.gelu(self.up(x))


def check_weight_only() -> None:
    """quantize="int4" (groups 32 and 128) and "int8_weight_only" on the device against the same
    quantized layers in torch (float32 arithmetic): GEMV rows 1, 3 and 8, the dequantizing matrix
    product at 40; every dtype, with and without a bias, with a residual added after a product, and
    a layer wide enough for two features per warp. int4 layers in 16-bit floats whose shapes have
    whole 16 x 64 tiles run on tensor cores (gemv_tiles_kernel), the others (WideMlp) on the GEMV's
    own loop, as the kernels that ran show."""
    from executorch.export._quantize import quantize_linear_int4, quantize_linear_int8_weight_only
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(3)
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 384), torch.nn.GELU(), torch.nn.Linear(384, 160, bias=False)).eval()
    tensor_cores = torch.cuda.get_device_capability()[0] >= 8
    for (quantize, group), model in itertools.product((("int4", 32), ("int4", 64), ("int4", 128),
                                                       ("int8_weight_only", 32)),
                                                      (mlp, ResidualMlp().eval(), WideMlp().eval())):
        for rows in (1, 3, 8, 40):
            x = torch.randn(rows, 256)
            for dtype, bound in BOUNDS:
                # What export quantizes: the module in `dtype`; the reference computes in float32.
                half = copy.deepcopy(model).to(dtype)
                q, _ = quantize_linear_int4(half, group) if quantize == "int4" else quantize_linear_int8_weight_only(half)
                with torch.no_grad():
                    ref = q.float()(x.to(dtype).float()).numpy()
                pte = export(model, (x,), backend="cuda", dtype=dtype, quantize=quantize, group_size=group)
                assert deserialize(pte).metadata["cuda_delegate_calls"] == "1"
                xi = x.to(dtype)
                method = Runtime.get().load_program(pte).load_method()
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    got = method.execute([xi if dtype == torch.bfloat16 else xi.numpy()])[0]
                    torch.cuda.synchronize()
                names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
                got = np.asarray(got.float() if isinstance(got, torch.Tensor) else got, dtype=np.float32)
                err = float(np.abs(got - ref).max()) / max(1.0, float(np.abs(ref).max()))
                tiled = sum("gemv_tiles_kernel" in n for n in names)
                print(f"{type(model).__name__} {quantize} group {group} rows {rows} {str(dtype)[6:]}: {err:.2e} "
                      f"(bound {bound}); {tiled} tensor-core GEMVs")
                if err > bound:
                    raise SystemExit(f"{quantize} rows {rows} {dtype}: out of bounds")
                want = 2 if (quantize == "int4" and rows <= 8 and dtype != torch.float32 and tensor_cores and
                             not isinstance(model, WideMlp)) else 0
                if tiled != want:
                    raise SystemExit(f"{quantize} rows {rows} {dtype}: {tiled} tensor-core GEMVs, expected {want}")


class DecodeBlock(torch.nn.Module):
    """Llama's MLP block at decode sizes, then a layer with a bias: RMS norm, gate and up (joined by the exporter),
    silu(gate) * up, the down projection added to its input, addmm. 264 output features end in a part of a GEMV
    tile; 200 input features split into spans of a few rows."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(200) * 0.1 + 1.0)
        self.gate = torch.nn.Linear(200, 96, bias=False)
        self.up = torch.nn.Linear(200, 96, bias=False)
        self.down = torch.nn.Linear(96, 200, bias=False)
        self.out = torch.nn.Linear(200, 264)

    def forward(self, x):  # [rows, 200]
        h = self.weight * TransformerForms.rms(x).to(x.dtype)
        return self.out(x + self.down(torch.nn.functional.silu(self.gate(h)) * self.up(h)))


def check_gemv() -> None:
    """Products of up to 8 rows through the GEMV (EXECUTORCH_CUDA_GEMV=always: untimed), against torch in every
    dtype: the RMS norm folded in, silu(gate) * up folded into the joined gate|up product where its halves lie in
    place (one row), the residual and the bias added; rows 1, 3 and 8, and 9 (cuBLAS). The
    kernels that ran say what was folded."""
    import os
    from torch.profiler import ProfilerActivity, profile

    os.environ["EXECUTORCH_CUDA_GEMV"] = "always"
    try:
        torch.manual_seed(5)
        model = DecodeBlock().eval()
        for rows in (1, 3, 8, 9):
            x = torch.randn(rows, 200)
            for dtype, bound in BOUNDS:
                pte = export(model, (x,), backend="cuda", dtype=dtype)
                method = Runtime.get().load_program(pte).load_method()
                xi = x.to(dtype)
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    got = method.execute([xi if dtype == torch.bfloat16 else xi.numpy()])[0]
                    torch.cuda.synchronize()
                names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and
                         "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
                got = np.asarray(got.float() if isinstance(got, torch.Tensor) else got, dtype=np.float32)
                with torch.no_grad():  # the weights as exported (rounded to dtype), in float32
                    ref = copy.deepcopy(model).to(dtype).float()(xi.float()).numpy()
                err = float(np.abs(got - ref).max()) / max(1.0, float(np.abs(ref).max()))
                gemvs = sum("gemv_kernel" in n for n in names)
                norms = sum("rms_norm_kernel" in n for n in names)
                print(f"DecodeBlock rows {rows} {str(dtype)[6:]}: {err:.2e} (bound {bound}); {gemvs} GEMV, {norms} norm "
                      f"kernels of {len(names)}")
                if err > bound:
                    raise SystemExit(f"GEMV rows {rows} {dtype}: out of bounds")
                # One row: silu * up runs in the gate|up product, no elementwise kernel of its own.
                silu = sum("unary_kernel" in n or "FusedBody" in n for n in names)
                want = ((3, 0, 0) if rows == 1 else (3, 0, silu)) if rows <= 8 else (0, 1, silu)
                if (gemvs, norms, silu) != want:
                    raise SystemExit(f"GEMV rows {rows} {dtype}: kernels {names}; expected GEMVs, norms and silu "
                                     f"kernels {want}")
    finally:
        del os.environ["EXECUTORCH_CUDA_GEMV"]


check_gemv()
check_device_tensors()
check_tf32()
check_weight_only()
