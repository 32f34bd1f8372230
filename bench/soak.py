"""Long-running state: one program executed many times, and several threads running their own
methods of one CUDA program on their own streams at once.

    python bench/soak.py [--runs 100000] [--cuda-runs 20000] [--threads 4] [--thread-runs 500] [--only cpu,cuda,threads]

cpu: the test encoder (tests/models/zoo.py) exported for the CPU, executed --runs times from numpy.
cuda: the same model exported with backend="cuda", executed --cuda-runs times from numpy (the
delegate copies in and out) and as many times on torch CUDA tensors (outputs left on the device).
For each it prints resident memory, open file descriptors and (cuda) device memory in use after a
warm-up and at the end, with the growth, and checks that the last output equals the first bit for
bit. threads: --threads threads, each with its own Method of one CUDA program and its own
torch.cuda.Stream, run --thread-runs executions each at once on inputs of their own; every output
is compared bit for bit with what the same method computes alone, so cross-talk shows as a
mismatch. Run it under `compute-sanitizer --tool racecheck` with few runs for the race check.
Exit status 1 when an output differs.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.models
from executorch.export import export  # noqa: E402
from executorch.runtime import Runtime  # noqa: E402
from tests.models.zoo import MODELS  # noqa: E402


def resident_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def device_mib() -> float:
    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**20


def soak(label: str, run: Callable[[], Any], runs: int, device: bool) -> bool:
    """Runs `run` `runs` times after a warm-up of 200; prints the resources before and after."""
    first = None
    for _ in range(200):
        first = np.array(run(), copy=True)
    if device:
        torch.cuda.synchronize()
    before = (resident_kib(), open_fds(), device_mib() if device else 0.0)
    start = time.perf_counter()
    last = first
    for _ in range(runs):
        last = run()
    if device:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    after = (resident_kib(), open_fds(), device_mib() if device else 0.0)
    same = bool(np.array_equal(first, np.asarray(last)))
    line = (f"{label:<28} {runs:>7} runs in {seconds:6.1f} s  resident {before[0] / 1024:7.1f} -> "
            f"{after[0] / 1024:7.1f} MiB ({(after[0] - before[0]) / 1024:+.1f})  fds {before[1]} -> {after[1]}")
    if device:
        line += f"  device {before[2]:8.1f} -> {after[2]:8.1f} MiB ({after[2] - before[2]:+.1f})"
    print(line + ("" if same else "  LAST OUTPUT DIFFERS FROM THE FIRST"), flush=True)
    return same


def threads_at_once(pte: bytes, example: torch.Tensor, threads: int, runs: int) -> bool:
    """Each thread: its own Method and stream, inputs of its own; outputs against the method alone."""
    program = Runtime.get().load_program(pte)
    methods = [program.load_method() for _ in range(threads)]
    streams = [torch.cuda.Stream() for _ in range(threads)]
    inputs = [[torch.randn(example.shape, generator=torch.Generator().manual_seed(100 * t + i)).cuda()
               for i in range(4)] for t in range(threads)]
    alone = [[methods[t].execute([x])[0].cpu() for x in inputs[t]] for t in range(threads)]
    torch.cuda.synchronize()
    mismatches = [0] * threads
    barrier = threading.Barrier(threads)

    def work(t: int) -> None:
        barrier.wait()
        with torch.cuda.stream(streams[t]):
            for r in range(runs):
                i = r % len(inputs[t])
                out = methods[t].execute([inputs[t][i]])[0]
                if not torch.equal(out.cpu(), alone[t][i]):  # .cpu() waits for this stream only
                    mismatches[t] += 1

    start = time.perf_counter()
    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for p in pool:
        p.start()
    for p in pool:
        p.join()
    seconds = time.perf_counter() - start
    print(f"{'threads x streams':<28} {threads} threads x {runs} runs in {seconds:6.1f} s  "
          f"outputs differing from the method alone: {sum(mismatches)} of {threads * runs}", flush=True)
    return sum(mismatches) == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--cuda-runs", type=int, default=20_000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--thread-runs", type=int, default=500)
    parser.add_argument("--only", default="cpu,cuda,threads")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    model, (x,) = MODELS["encoder"]()
    ok = True
    if "cpu" in parts:
        method = Runtime.get().load_program(export(model, (x,))).load_method()
        ok &= soak("cpu (numpy)", lambda: method.execute([x.numpy()])[0], args.runs, device=False)
    if parts & {"cuda", "threads"}:
        if not (torch.cuda.is_available() and Runtime.get().is_available("CudaBackend")):
            print("cuda: skipped, no usable GPU")
            return 0 if ok else 1
        pte = export(model, (x,), backend="cuda")
    if "cuda" in parts:
        method = Runtime.get().load_program(pte).load_method()
        ok &= soak("cuda (numpy in and out)", lambda: method.execute([x.numpy()])[0], args.cuda_runs, device=True)
        xd = x.cuda()
        ok &= soak("cuda (device tensors)", lambda: method.execute([xd])[0].cpu().numpy(), args.cuda_runs, device=True)
    if "threads" in parts:
        ok &= threads_at_once(pte, x, args.threads, args.thread_runs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
