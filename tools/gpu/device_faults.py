"""Device faults on a GPU machine, against the installed wheel (tools/gpu/verify.sh runs it):

    python device_faults.py MODELS_DIR

1. Out of memory during init: with the device's memory taken, loading a CUDA program fails with
   an error; once it is given back, the same process loads and runs the program, and the device
   memory in use returns to what it was (nothing leaked on the failure path).
2. Out of memory during execute: with the memory taken after loading, execute (the eager run, then
   the CUDA graph capture and instantiation) either runs or fails with an error; afterwards the
   method still runs and matches.
3. A program exported for an architecture this device lacks (MODELS_DIR/../faults/mlp_sm100.pte):
   an error naming both.
4. The malformed programs that delegate to CUDA (MODELS_DIR/../faults/cuda_corpus.bin, from
   tests/hostile), through the real CudaBackend: invalid ones fail with an error, none crashes.
5. No GPU at all (CUDA_VISIBLE_DEVICES=""), in a child process: an error naming CudaBackend, while
   registered_backends() still lists it.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import executorch
from executorch.runtime import ExecutorchError, Runtime

site = Path(executorch.__file__).resolve().parent.parent
cudart = ctypes.CDLL(str(site / "nvidia" / "cu13" / "lib" / "libcudart.so.13"))


def mem_info() -> tuple[int, int]:
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    assert cudart.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)) == 0
    return free.value, total.value


class Hog:
    """Takes (almost) all free device memory with plain cudaMalloc calls, then gives it back."""

    def __init__(self) -> None:
        self.blocks: list[ctypes.c_void_p] = []

    def __enter__(self) -> "Hog":
        for size in (1 << 32, 1 << 28, 1 << 24, 1 << 20, 1 << 16, 1 << 12):
            while True:
                p = ctypes.c_void_p()
                if cudart.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(size)) != 0:
                    cudart.cudaGetLastError()
                    break
                self.blocks.append(p)
        print(f"   took the device's memory: {mem_info()[0] >> 20} MiB left free")
        return self

    def __exit__(self, *exc) -> None:
        for p in self.blocks:
            cudart.cudaFree(p)
        self.blocks.clear()


def load(models: Path, name: str):
    stem = models / name
    x = np.fromfile(f"{stem}.input.bin", dtype=np.float32).reshape(
        [int(d) for d in Path(f"{stem}.shape").read_text().split(",")])
    want = np.fromfile(f"{stem}.expected.bin", dtype=np.float32)
    return (stem.with_suffix(".pte")).read_bytes(), x, want


def check_output(method, x, want) -> None:
    out = method.execute([x])[0].ravel()
    err = float(np.abs(out - want).max())
    assert err <= 1e-4 * max(1.0, float(np.abs(want).max())), err


def main() -> int:
    models = Path(sys.argv[1])
    pte, x, want = load(models, "encoder_cuda")
    rt = Runtime.get()
    warm = rt.load_program(pte).load_method()  # creates the CUDA context and the shim library's state
    check_output(warm, x, want)
    del warm
    baseline = mem_info()[0]

    print("== out of memory during init")
    with Hog():
        program = rt.load_program(pte)
        try:
            program.load_method()
            raise AssertionError("loading succeeded with no device memory free")
        except ExecutorchError as e:
            print(f"   refused: {e}")
            assert "CudaBackend" in str(e) and "memory" in str(e).lower(), e
    leaked = baseline - mem_info()[0]
    print(f"   device memory after the failure: {leaked >> 20} MiB more in use than before")
    assert leaked < 8 << 20, leaked
    method = rt.load_program(pte).load_method()
    check_output(method, x, want)
    print("   the same process then loads and runs it: ok")

    print("== out of memory during execute")
    fresh = rt.load_program(pte).load_method()
    with Hog():
        for attempt in ("eager", "graph capture"):
            try:
                fresh.execute([x])
                print(f"   {attempt} run: ran (needs no device memory of its own)")
            except ExecutorchError as e:
                print(f"   {attempt} run: refused: {e}")
    for _ in range(3):
        check_output(fresh, x, want)
    print("   afterwards: runs and matches")
    del fresh, method

    print("== a program exported for another architecture")
    foreign = (models.parent / "faults" / "mlp_sm100.pte").read_bytes()
    try:
        rt.load_program(foreign).load_method()
        raise AssertionError("a program for sm_100 loaded on this device")
    except ExecutorchError as e:
        print(f"   refused: {e}")
        assert "sm_100" in str(e) and "sm_" in str(e), e

    print("== malformed programs delegating to CUDA, through CudaBackend on the device")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from malformed import read_corpus

    corpus = read_corpus(str(models.parent / "faults" / "cuda_corpus.bin"))
    refused, ran, wrong = 0, 0, []
    for case in corpus:
        try:
            program = rt.load_program(case.data)
            for name in program.method_names:
                m = program.load_method(name)
                m.execute([v if kind == "scalar" else np.zeros(v, dtype=np.float32) for kind, v in m.input_meta()])
            ran += 1
            if case.invalid:
                wrong.append(case.name)
        except ExecutorchError as e:
            refused += 1
            if not str(e).strip():
                wrong.append(case.name + " (no message)")
    print(f"   {len(corpus)} programs: {refused} refused with an error, {ran} damaged ones ran")
    assert len(corpus) > 50 and not wrong, f"invalid programs that ran: {wrong}"

    print("== no GPU visible")
    code = ("import executorch.runtime as r, sys\n"
            "print('registered:', r.registered_backends(), 'available:', r.is_available('CudaBackend'))\n"
            "assert r.registered_backends().count('CudaBackend') == 1 and not r.is_available('CudaBackend')\n"
            "try:\n    r.Runtime.get().load_program(sys.argv[1]).load_method()\n"
            "except r.ExecutorchError as e:\n    print('   refused:', e); assert 'CudaBackend' in str(e)\n"
            "else:\n    raise SystemExit('loaded without a GPU')\n")
    subprocess.run([sys.executable, "-I", "-c", code, str(models / "mlp_cuda.pte")], check=True,
                   env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    leaked = baseline - mem_info()[0]
    print(f"== device faults: all handled; {leaked >> 20} MiB more in use than at the start")
    return 0


if __name__ == "__main__":
    sys.exit(main())
