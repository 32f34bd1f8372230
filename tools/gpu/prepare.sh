#!/usr/bin/env bash
# Prepares the artifacts tools/gpu/verify.sh checks on a GPU machine, built on this (CPU) machine:
#
#   tools/gpu/prepare.sh OUT [PYTHON]     # PYTHON: the GPU machine's Python version (default 3.12)
#
# OUT receives: the executorch wheel for that Python; wheels/ with what it requires (numpy,
# flatbuffers, nvidia-cuda-runtime) for an offline install; bin/ with the CUDA test binaries;
# models/ with the test models exported for the CPU and with backend="cuda", their input and torch's
# output; cmake/ and cmake_cuda/ with the consumer applications. Then, on the GPU machine:
#   tools/gpu/verify.sh OUT
set -euo pipefail
out=$(mkdir -p "${1:?usage: prepare.sh OUT [PYTHON]}" && cd "$1" && pwd)
pyver=${2:-3.12}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
target_python=$(ls -d /root/.pyenv/versions/"$pyver".*/bin/python3 2>/dev/null | tail -1 || true)
[[ -x $target_python ]] || target_python=$(command -v "python$pyver")

rm -rf "$out"/{models,faults,bin,cmake,cmake_cuda,wheels} "$out"/executorch-*.whl
mkdir -p "$out"/{models,faults,bin,wheels}
cp tools/gpu/device_faults.py "$out/"
cp -r tests/consumers/cmake "$out/cmake"
cp -r tests/consumers/cmake_cuda "$out/cmake_cuda"

# Models and references, exported with this checkout's package on the build interpreter (has torch).
tools/bazel build //wheel
host_wheel=$(ls bazel-bin/wheel/wheel_dist/*.whl)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m zipfile -e "$host_wheel" "$tmp/pkg"
build_python=""
for py in "${EXECUTORCH_BUILD_CACHE:-$HOME/.cache/executorch-build}"/state/venvs/*/bin/python3; do
  if "$py" -c "import torch" 2>/dev/null; then build_python=$py; break; fi
done
[[ -n $build_python ]] || { echo "prepare.sh: no build environment with torch (run tools/bazel once with a Python that has it)"; exit 1; }
PYTHONPATH="$tmp/pkg:$repo" "$build_python" -W ignore - "$out/models" <<'PY'
import ctypes, os, sys
import nvidia
ctypes.CDLL(os.path.join(list(nvidia.__path__)[0], "cu13", "lib", "libcudart.so.13"), mode=ctypes.RTLD_GLOBAL)
import torch
from executorch.export import export
from tests.models.zoo import MODELS, fresh_inputs
for name in ("mlp", "cnn", "encoder"):
    model, example = MODELS[name]()
    (x,) = fresh_inputs(example, 99)
    with torch.no_grad():
        ref = model(x).numpy().tobytes()
    for suffix, backend in (("", None), ("_cuda", "cuda")):
        stem = os.path.join(sys.argv[1], name + suffix)
        open(stem + ".pte", "wb").write(export(model, example, backend=backend))
        open(stem + ".input.bin", "wb").write(x.numpy().tobytes())
        open(stem + ".expected.bin", "wb").write(ref)
        open(stem + ".shape", "w").write(",".join(map(str, x.shape)))
    if name == "mlp":  # for a device it was not exported for (device_faults.py)
        blob = export(model, example, backend="cuda", cuda_archs=["sm_100"])
        open(os.path.join(sys.argv[1], "..", "faults", "mlp_sm100.pte"), "wb").write(blob)
# The language model takes int64 tokens (verify.sh checks it through the Python runtime).
model, example = MODELS["tiny_lm"](2)
(tokens,) = fresh_inputs(example, 99)
with torch.no_grad():
    ref = model(tokens).numpy()
lm = os.path.join(sys.argv[1], "lm")
os.makedirs(lm, exist_ok=True)
open(os.path.join(lm, "tiny_lm_cuda.pte"), "wb").write(export(model, example, backend="cuda"))
import numpy as np
np.save(os.path.join(lm, "tokens.npy"), tokens.numpy())
np.save(os.path.join(lm, "expected.npy"), ref)

# Every model in float16 and bfloat16 (bfloat16 inputs as their bits, uint16); the reference is the
# float32 model on the same (rounded) inputs.
half = os.path.join(sys.argv[1], "half")
os.makedirs(half, exist_ok=True)
for name in ("mlp", "cnn", "encoder", "tiny_lm"):
    model, example = MODELS[name]()
    (x,) = fresh_inputs(example, 7)
    for dtype in (torch.float16, torch.bfloat16):
        stem = os.path.join(half, f"{name}_{str(dtype)[6:]}")
        open(stem + ".pte", "wb").write(export(model, example, backend="cuda", dtype=dtype))
        xr = x.to(dtype) if x.is_floating_point() else x
        with torch.no_grad():
            np.save(stem + ".expected.npy", model(xr.float() if x.is_floating_point() else x).numpy())
        np.save(stem + ".input.npy", xr.view(torch.int16).numpy().view(np.uint16) if xr.dtype == torch.bfloat16 else xr.numpy())

# Every model with int8 linear layers (quantize="int8"), at batch 1 and 32 (few rows and many: the
# two GEMM kernels); references: torch running the same quantized arithmetic, and the float32 model.
from executorch.export._quantize import quantize_linear_int8
int8 = os.path.join(sys.argv[1], "int8")
os.makedirs(int8, exist_ok=True)
for name in ("mlp", "cnn", "encoder", "tiny_lm"):
    for batch in (1, 32):
        model, example = MODELS[name](batch)
        (x,) = fresh_inputs(example, 11)
        stem = os.path.join(int8, f"{name}_b{batch}")
        open(stem + ".pte", "wb").write(export(model, example, backend="cuda", quantize="int8"))
        with torch.no_grad():
            np.save(stem + ".expected.npy", quantize_linear_int8(model)[0](x).numpy())
            np.save(stem + ".float32.npy", model(x).numpy())
        np.save(stem + ".input.npy", x.numpy())

# Attention on its own (one kernel) in each dtype: partial tiles of keys and queries, causal (also
# with fewer queries than keys), bool and additive masks that broadcast (a query that attends to
# nothing), grouped key/value heads at head size 128, 3-D with a scale. Reference: torch float32 on
# the same (rounded) inputs. Inputs x0..x2 as in half/ (bfloat16 as bits).
F = torch.nn.functional


class Attention(torch.nn.Module):
    def __init__(self, mask=None, **options):
        super().__init__()
        self.options = options
        self.register_buffer("mask", mask)

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.mask, **self.options)


g = torch.Generator().manual_seed(5)
bool_mask = torch.rand(77, 90, generator=g) > 0.4
bool_mask[3] = False
attention = {
    "plain": (Attention(), [(2, 4, 100, 64)] * 3),
    "causal": (Attention(is_causal=True), [(2, 4, 77, 32)] * 3),
    "causal_short": (Attention(is_causal=True), [(1, 2, 40, 32), (1, 2, 70, 32), (1, 2, 70, 32)]),
    "bool_mask": (Attention(bool_mask), [(2, 2, 77, 16), (2, 2, 90, 16), (2, 2, 90, 24)]),
    "float_mask": (Attention(torch.randn(1, 2, 77, 90, generator=g)), [(2, 2, 77, 16), (2, 2, 90, 16), (2, 2, 90, 16)]),
    "gqa_128": (Attention(enable_gqa=True), [(1, 8, 33, 128), (1, 2, 65, 128), (1, 2, 65, 128)]),
    "3d_scale": (Attention(scale=0.2), [(6, 50, 16)] * 3),
}
att = os.path.join(sys.argv[1], "attention")
os.makedirs(att, exist_ok=True)
for name, (module, shapes) in attention.items():
    xs = [torch.randn(s, generator=g) for s in shapes]
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        stem = os.path.join(att, f"{name}_{str(dtype)[6:]}")
        open(stem + ".pte", "wb").write(export(module, xs, backend="cuda", dtype=dtype))
        xr = [x.to(dtype) for x in xs]
        with torch.no_grad():
            ref = module(*[x.float() for x in xr]).numpy()
        bits = [x.view(torch.int16).numpy().view(np.uint16) if dtype == torch.bfloat16 else x.numpy() for x in xr]
        np.savez(stem + ".npz", expected=ref, **{f"x{i}": b for i, b in enumerate(bits)})
PY

# The malformed programs that delegate to CUDA (tests/hostile), for the real CudaBackend on the GPU.
tools/bazel build //tests/hostile:corpus
cp tests/hostile/malformed.py "$out/"
PYTHONPATH="$tmp/pkg:$repo" "$build_python" - bazel-bin/tests/hostile/corpus.bin "$out/faults/cuda_corpus.bin" <<'PY'
import sys
from tests.hostile.malformed import read_corpus, write_corpus
keep = [c for c in read_corpus(sys.argv[1]) if "_cuda/" in c.name and len(c.data) < 200_000]
write_corpus(sys.argv[2], keep)
print(f"prepare.sh: {len(keep)} malformed CUDA programs for the GPU")
PY

# The wheel and test binaries for the GPU machine's Python.
PYTHON_BIN_PATH=$target_python tools/bazel build //wheel //backends/cuda/kernels:int8_linear_test //tests/cc:shims_test
cp bazel-bin/wheel/wheel_dist/*.whl "$out/"
cp -L bazel-bin/backends/cuda/kernels/int8_linear_test bazel-bin/tests/cc/shims_test "$out/bin/"
chmod u+w "$out"/bin/*
tag=cp${pyver/./}
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$out/wheels" numpy flatbuffers "nvidia-cuda-runtime>=13,<14"
echo "prepared $out for Python $pyver ($tag): $(ls "$out" | tr '\n' ' ')"
