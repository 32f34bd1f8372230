"""GPU latency of the CUDA delegate against torch eager (CUDA) on the test models, and GEMM
throughput of the shim library (aoti_torch_cuda_mm_out) against torch.matmul.

    python bench/gpu.py [--batches 1,32] [--dtypes float32,float16,bfloat16,int8] [--repeat 50] [--gemm 4096] [--no-compile]
    python bench/gpu.py --models real [--dtypes float32,float16,bfloat16] [--compile resnet50,vit_b_16,...]
    python bench/gpu.py --models real --calls-only [--only ...]   # no GPU needed
    python bench/gpu.py --models real --aoti [--only ...]         # also export(compiler="aoti"), torch 2.11

Our side (zoo): the model exported with backend="cuda", run from Python with inputs in host memory
(copied to the device and back by the delegate, as a CPU caller's would be). torch's side: the same
model and weights on the GPU, inputs already on the device, synchronized after each run, eager and
torch.compile'd. dtype int8: ours exported with quantize="int8" (int8 weights, activations quantized
per row on the device), torch's the float32 model (max |err| is then the quantization error). Median of --repeat runs after warm-up; ratio = ours / torch (lower is faster).
GEMM: TF/s of both and their ratio ours / torch (higher is better), with the relative error of ours
against float64.

--models real runs the models of tests/models/real.py (and ResNet-50; --only picks any of its models) at their example inputs,
repeated to each of --batches, printing for each dtype and batch the number of delegate calls (or
why export failed), ours on torch CUDA tensors (outputs left on the device, as torch's are), ours
from host memory, torch eager and, for the models named by --compile in --compile-dtypes,
torch.compile(mode="reduce-overhead"), with the largest error relative to torch's largest output.
Ratios are ours on device tensors / torch. --calls-only exports without running (no GPU needed) and
prints the delegate calls and the operators left to the CPU kernels. Convolutions in float32 are IEEE on both sides; dtype
"tf32" is float32 with TF32 convolutions on both (export(tf32_convolutions=True), and
torch.backends.cudnn.allow_tf32, PyTorch's default).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.models, bench.timing
from executorch.export import export  # noqa: E402
from executorch.runtime import Runtime  # noqa: E402
from bench.timing import median_ms  # noqa: E402
from tests.models.zoo import MODELS  # noqa: E402


def gemm_tflops(size: int, repeat: int) -> None:
    """size^3 products in float16 and bfloat16 (and float32): ours through the shim library's C ABI
    on torch-allocated device memory, torch.matmul on the same operands; CUDA events, median."""
    import ctypes

    import executorch

    shims = ctypes.CDLL(str(Path(executorch.__file__).parent / "backends" / "cuda" / "libaoti_cuda_shims.so"))
    codes = {torch.float16: shims.aoti_torch_dtype_float16(), torch.bfloat16: shims.aoti_torch_dtype_bfloat16(),
             torch.float32: shims.aoti_torch_dtype_float32()}

    def handle(t: torch.Tensor) -> ctypes.c_void_p:
        h = ctypes.c_void_p()
        sizes = (ctypes.c_int64 * 2)(*t.shape)
        assert shims.aoti_torch_create_tensor_from_blob_v2(
            ctypes.c_void_p(t.data_ptr()), 2, sizes, None, 0, codes[t.dtype], shims.aoti_torch_device_type_cuda(), 0,
            ctypes.byref(h), shims.aoti_torch_layout_strided(), None, 0) == 0
        return h

    def timed(fn) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        fn()
        times = []
        for _ in range(repeat):
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return sorted(times)[len(times) // 2]

    print(f"{'GEMM':10} {'dtype':>9} {'ours TF/s':>10} {'torch TF/s':>10} {'ratio':>6} {'rel err':>9}")
    flops = 2 * size**3
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        a = torch.randn(size, size, device="cuda", dtype=dtype)
        b = torch.randn(size, size, device="cuda", dtype=dtype)
        c = torch.empty(size, size, device="cuda", dtype=dtype)
        ha, hb, hc = handle(a), handle(b), handle(c)

        def ours() -> None:
            assert shims.aoti_torch_cuda_mm_out(hc, ha, hb) == 0

        ours_ms, torch_ms = timed(ours), timed(lambda: torch.matmul(a, b))
        ref = a.double() @ b.double()
        err = float((c.double() - ref).norm() / ref.norm())
        print(f"{size}^3{'':5} {str(dtype).split('.')[1]:>9} {flops / ours_ms / 1e9:10.1f} {flops / torch_ms / 1e9:10.1f} "
              f"{torch_ms / ours_ms:6.2f} {err:9.2e}")
        for h in (ha, hb, hc):
            shims.aoti_torch_delete_tensor_object(h)


def _leaves(out) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]


def _batched(inputs: list[torch.Tensor], batch: int) -> list[torch.Tensor] | None:
    """The example inputs repeated to `batch` along their first dimension (None where an input's
    first dimension is not a batch of 1)."""
    if batch == 1:
        return inputs
    if any(x.dim() == 0 or x.shape[0] != 1 for x in inputs):
        return None
    return [x.repeat(batch, *[1] * (x.dim() - 1)) for x in inputs]


def real_models(dtypes: list[str], batches: list[int], compiled: set[str], compile_dtypes: set[str], repeat: int,
                only: list[str] | None = None, calls_only: bool = False, aoti: bool = False) -> None:
    from executorch.export import ExportError
    from tests.models.real import MODELS as REAL, MORE_MODELS

    cases = {**REAL, "resnet50": MORE_MODELS["resnet50"]}
    if only:  # any model of tests/models/real.py
        cases = {k: v for k, v in {**REAL, **MORE_MODELS}.items() if k in only}
    print(f"{'model':28} {'dtype':>8} {'batch':>5} {'calls':>5} {'ours ms':>9} {'host ms':>9} {'eager ms':>9} "
          f"{'ratio':>6} {'compile ms':>10} {'ratio':>6} {'rel err':>9}" + (f" {'aoti ms':>9} {'ratio':>6}" if aoti else ""))
    for name, factory in cases.items():
        for label in dtypes:
            for batch in batches:
                # float32 is IEEE on both sides; tf32: float32 with TF32 convolutions on both (torch's default).
                tf32 = label == "tf32"
                dtype = torch.float32 if tf32 else getattr(torch, label)
                torch.backends.cudnn.allow_tf32 = tf32 or dtype != torch.float32
                model, inputs = factory()
                inputs = _batched(inputs, batch)
                if inputs is None:
                    continue
                try:
                    pte = export(model, inputs, backend="cuda", dtype=dtype, tf32_convolutions=tf32)
                except ExportError as e:
                    print(f"{name:28} {label:>8} {batch:5d} export failed: {str(e)[:300]}", flush=True)
                    continue
                if calls_only:
                    from executorch.serialization.pte import KernelCall, deserialize

                    spec = deserialize(pte)
                    plan = spec.plans[0]
                    left = sorted({plan.operators[i.op_index][0] for i in plan.instructions
                                   if isinstance(i, KernelCall)})
                    print(f"{name:28} {label:>8} {batch:5d} {spec.metadata['cuda_delegate_calls']:>5} "
                          f"cpu: {', '.join(left) or '-'}", flush=True)
                    continue
                program = Runtime.get().load_program(pte)
                method = program.load_method()
                inputs = [x.to(dtype) if x.is_floating_point() else x for x in inputs]
                gpu_model = model.to(dtype).cuda()
                gpu_inputs = [x.cuda() for x in inputs]

                def timed(fn):
                    def call():
                        with torch.no_grad():
                            fn()
                        torch.cuda.synchronize()
                    return median_ms(call, repeat)

                # Ours on device tensors (outputs left there), as torch runs; and from host memory.
                ours = timed(lambda: method.execute(gpu_inputs))
                host = timed(lambda: method.execute(inputs))
                eager = timed(lambda: gpu_model(*gpu_inputs))
                compile_ms = float("nan")
                if name in compiled and label in compile_dtypes:
                    fast = torch.compile(gpu_model, mode="reduce-overhead")
                    compile_ms = timed(lambda: fast(*gpu_inputs))
                with torch.no_grad():
                    ref = _leaves(gpu_model(*gpu_inputs))[0].float().cpu()
                got = method.execute(gpu_inputs)[0].float().cpu()
                err = float((got - ref).abs().max()) / max(float(ref.abs().max()), 1e-30)
                extra = ""
                if aoti:  # the same model through an AOTInductor payload; ratio to torch.compile's
                    try:
                        compiled_pte = export(model, inputs, backend="cuda", dtype=dtype, compiler="aoti")
                        aoti_method = Runtime.get().load_program(compiled_pte).load_method()
                        aoti_ms = timed(lambda: aoti_method.execute(gpu_inputs))
                        extra = f" {aoti_ms:9.3f} {aoti_ms / compile_ms:6.2f}"
                    except ExportError as e:
                        extra = f" aoti export failed: {str(e)[:200]}"
                print(f"{name:28} {label:>8} {batch:5d} {program.metadata('cuda_delegate_calls'):>5} {ours:9.3f} "
                      f"{host:9.3f} {eager:9.3f} {ours / eager:6.2f} {compile_ms:10.3f} {ours / compile_ms:6.2f} "
                      f"{err:9.2e}{extra}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", default="1,32", help="batch sizes (real models: inputs repeated along dim 0)")
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--gemm", type=int, default=4096, help="GEMM size (0: skip)")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile column")
    parser.add_argument("--dtypes", default="float32,float16,bfloat16,int8",
                        help="model dtypes (export(dtype=...); int8: export(quantize='int8'); real models: tf32)")
    parser.add_argument("--models", choices=("zoo", "real"), default="zoo")
    parser.add_argument("--compile", default="resnet50,efficientnet_b0,vit_b_16,gpt2",
                        help="real models that also get the torch.compile column")
    parser.add_argument("--compile-dtypes", default="float16", help="dtypes of the torch.compile column (real)")
    parser.add_argument("--only", help="real models to run (default: all)")
    parser.add_argument("--aoti", action="store_true",
                        help="real models: also export(compiler='aoti') (torch 2.11, Triton) and time it")
    parser.add_argument("--calls-only", action="store_true", help="real models: export only, print delegate calls")
    args = parser.parse_args()
    assert args.calls_only or torch.cuda.is_available(), "needs a CUDA device"
    if args.models == "real":
        dtypes = [d for d in args.dtypes.split(",") if d != "int8"]
        compiled = set(args.compile.split(",")) if not args.no_compile else set()
        real_models(dtypes, [int(b) for b in args.batches.split(",")], compiled, set(args.compile_dtypes.split(",")),
                    args.repeat,
                    args.only.split(",") if args.only else None, args.calls_only, args.aoti)
        return 0
    if args.gemm:
        gemm_tflops(args.gemm, args.repeat)
    print(f"{'model':10} {'dtype':>8} {'batch':>5} {'calls':>5} {'ours ms':>9} {'torch ms':>9} {'ratio':>6} "
          f"{'compile ms':>10} {'ratio':>6} {'max |err|':>10}")
    for name, label, batch in ((n, d, int(b)) for n in ("mlp", "cnn", "encoder", "tiny_lm")
                               for d in args.dtypes.split(",") for b in args.batches.split(",")):
        model, inputs = MODELS[name](batch)
        quantize = "int8" if label == "int8" else None
        dtype = torch.float32 if quantize else getattr(torch, label)
        program = Runtime.get().load_program(export(model, inputs, backend="cuda", dtype=dtype, quantize=quantize))
        method = program.load_method()
        inputs = [x.to(dtype) if x.is_floating_point() else x for x in inputs]
        arrays = [x.numpy() for x in inputs] if dtype != torch.bfloat16 else list(inputs)  # no numpy bfloat16
        gpu_model = model.to(dtype).cuda()
        gpu_inputs = [x.cuda() for x in inputs]

        def eager():
            with torch.no_grad():
                gpu_model(*gpu_inputs)
            torch.cuda.synchronize()

        ours = median_ms(lambda: method.execute(arrays), args.repeat)
        theirs = median_ms(eager, args.repeat)
        compiled_ms = float("nan")
        if not args.no_compile:
            compiled = torch.compile(gpu_model)

            def run_compiled():
                with torch.no_grad():
                    compiled(*gpu_inputs)
                torch.cuda.synchronize()

            compiled_ms = median_ms(run_compiled, args.repeat)  # the warm-up calls compile it
        with torch.no_grad():
            got = torch.as_tensor(method.execute(arrays)[0]).float()
            err = float((got - gpu_model(*gpu_inputs).float().cpu()).abs().max())
        calls = program.metadata("cuda_delegate_calls")
        print(f"{name:10} {label:>8} {batch:5d} {calls:>5} {ours:9.3f} {theirs:9.3f} {ours / theirs:6.2f} "
              f"{compiled_ms:10.3f} {ours / compiled_ms:6.2f} {err:10.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
