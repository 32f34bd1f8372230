"""Where the time of one call goes, ours against torch eager and torch.compile(mode="reduce-overhead"),
on a real model of tests/models/real.py on the GPU:

    python bench/gpu_kernels.py --only gpt2,vit_b_16 [--dtype float16] [--batch 32] [--repeat 50] [--top 12]

For each side it prints the median wall time of a synchronized call, the GPU time of the kernels
that call launches (torch.profiler, CUPTI: kernels replayed from CUDA graphs included), their count,
and the heaviest kernels by total time. wall - GPU is what the host and the launch gaps cost. For
ours it adds the binding alone (Method._method.execute on prepared arguments), which separates the
Python wrapper's cost from the runtime's.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.models, bench.timing
from executorch.export import export  # noqa: E402
from executorch.runtime import Runtime  # noqa: E402
from bench.timing import median_ms  # noqa: E402


def kernels(fn: Callable[[], Any], runs: int) -> tuple[float, int, list[tuple[str, float, int]]]:
    """GPU microseconds per call, kernels per call and (name, us per call, count per call) by total."""
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            fn()
        torch.cuda.synchronize()
    total: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            row = total[e.name]
            row[0] += getattr(e, "device_time", 0.0) / runs
            row[1] += 1 / runs
    rows = sorted(((n, us, round(c)) for n, (us, c) in total.items()), key=lambda r: -r[1])
    return sum(r[1] for r in rows), sum(r[2] for r in rows), rows


def report(label: str, fn: Callable[[], Any], repeat: int, top: int) -> None:
    def call() -> None:
        with torch.no_grad():
            fn()
        torch.cuda.synchronize()

    wall = median_ms(call, repeat) * 1000
    gpu_us, count, rows = kernels(fn, repeat)
    print(f"  {label:10} wall {wall:8.1f} us  GPU {gpu_us:8.1f} us  kernels {count:4d}  host+gaps {wall - gpu_us:7.1f} us")
    for name, us, n in rows[:top]:
        print(f"      {us:8.1f} us  x{n:<3d} {name[:110]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", required=True, help="models of tests/models/real.py, comma-separated")
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--no-compile", action="store_true")
    args = parser.parse_args()
    assert torch.cuda.is_available(), "needs a CUDA device"
    from bench.gpu import _batched
    from tests.models.real import MODELS, MORE_MODELS

    dtype = getattr(torch, args.dtype)
    torch.backends.cudnn.allow_tf32 = dtype != torch.float32  # IEEE float32 on both sides, as bench/gpu.py
    for name in args.only.split(","):
        model, inputs = {**MODELS, **MORE_MODELS}[name]()
        inputs = _batched(inputs, args.batch)
        program = Runtime.get().load_program(export(model, inputs, backend="cuda", dtype=dtype))
        method = program.load_method()
        inputs = [x.to(dtype) if x.is_floating_point() else x for x in inputs]
        gpu_model = model.to(dtype).cuda().eval()
        gpu_inputs = [x.cuda() for x in inputs]
        print(f"{name} {args.dtype} batch {args.batch}: {program.metadata('cuda_delegate_calls')} delegate call(s)")
        report("ours", lambda: method.execute(gpu_inputs), args.repeat, args.top)

        # The binding alone: arguments prepared once, outputs into buffers allocated once.
        device = gpu_inputs[0].device
        arrays = [("device", x.data_ptr(), str(x.dtype).removeprefix("torch."), list(x.shape), device.index)
                  for x in gpu_inputs]
        outs = {i: torch.empty(m[1], dtype=getattr(torch, m[0]), device=device)
                for i, m in enumerate(method._device_layout()[1]) if m is not None and m[2]}
        ptrs = {i: (t.data_ptr(), device.index) for i, t in outs.items()}
        stream = torch.cuda.current_stream(device).cuda_stream
        report("binding", lambda: method._method.execute(arrays, [], ptrs, stream), args.repeat, 0)
        report("eager", lambda: gpu_model(*gpu_inputs), args.repeat, args.top)
        if not args.no_compile:
            fast = torch.compile(gpu_model, mode="reduce-overhead")
            for _ in range(3):
                with torch.no_grad():
                    fast(*gpu_inputs)
            report("compile", lambda: fast(*gpu_inputs), args.repeat, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
