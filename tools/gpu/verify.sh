#!/usr/bin/env bash
# Verifies a CUDA build on a GPU machine, from artifacts built elsewhere, with no checkout on any path.
#
#   tools/gpu/verify.sh ARTIFACTS
#
# ARTIFACTS holds: the executorch wheel for this machine's Python; the wheels it requires
# (numpy, flatbuffers, nvidia-cuda-runtime) for an offline install; optionally bin/ with C++ test
# binaries, models/ with NAME.pte, NAME.input.bin, NAME.expected.bin and NAME.shape (the input's
# shape, "1,64") exported and computed elsewhere, and cmake/ with the consumer application's source.
# Steps: pip-installs the wheel into a clean virtual environment (resolving its requirements from
# ARTIFACTS only); from an empty directory checks that CudaBackend is registered once and available
# and that every library shares one runtime; runs each model with the installed executor_runner and
# compares with the expected output; builds the CMake application against the installed wheel and
# runs it; runs each test binary against the installed CUDA runtime.
set -euo pipefail
# The architectures the build claims (--cuda_archs default); cuobjdump must list exactly these.
EXPECTED_ARCHS=${EXPECTED_ARCHS-"sm_75 sm_80 sm_86 sm_89 sm_90 compute_90"}
art=$(cd "${1:?usage: verify.sh ARTIFACTS}" && pwd)
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== GPU"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader

echo "== pip install into a clean environment ($($python --version))"
if $python -m venv "$work/venv" 2>/dev/null; then
  pip=("$work/venv/bin/python" -m pip)
else  # an interpreter without ensurepip: drive the new environment with the outer pip
  rm -rf "$work/venv"
  $python -m venv --without-pip "$work/venv"
  pip=($python -m pip --python "$work/venv/bin/python")
fi
"${pip[@]}" install -q --no-index --find-links "$art/wheels" "$art"/executorch-*.whl
"${pip[@]}" list 2>/dev/null | grep -Ei 'executorch|nvidia|numpy'

echo "== the installed runtime's backend registry"
mkdir "$work/empty"
(cd "$work/empty" && "$work/venv/bin/python" -I - <<'PY'
import executorch.runtime as rt
names = rt.registered_backends()
print("registered:", names)
assert names.count("CudaBackend") == 1, names
assert rt.is_available("CudaBackend"), "CudaBackend is registered but reports no usable GPU"
print("CudaBackend available: True")
PY
)

echo "== one runtime in the process (executorch.tools.identity)"
(cd "$work/empty" && "$work/venv/bin/python" -I -m executorch.tools.identity >"$work/identity.json") ||
  { cat "$work/identity.json"; exit 1; }
"$work/venv/bin/python" -c "import json,sys; r=json.load(open(sys.argv[1])); print('libraries agree:', sorted(r['libraries']))" "$work/identity.json"

site=$(echo "$work"/venv/lib/python3*/site-packages)
compare() {  # compare OURS EXPECTED: float32 files, max |diff| <= 1e-4 * max(1, max |expected|)
  "$work/venv/bin/python" - "$1" "$2" <<'PY'
import sys, numpy as np
a, b = (np.fromfile(p, dtype=np.float32) for p in sys.argv[1:3])
err, tol = float(np.abs(a - b).max()), 1e-4 * max(1.0, float(np.abs(b).max()))
print(f"   max |ours - expected| = {err:.3g} (tolerance {tol:.3g})")
sys.exit(0 if a.shape == b.shape and err <= tol else 1)
PY
}
for pte in "$art"/models/*.pte; do
  [[ -f $pte ]] || continue
  name=$(basename "$pte" .pte)
  echo "== executor_runner (installed) on $name"
  mkdir -p "$work/out/$name"
  "$site/executorch/bin/executor_runner" --model_path "$pte" --input "$art/models/$name.input.bin" \
    --output_dir "$work/out/$name" --iterations 20
  compare "$work/out/$name/output_0.bin" "$art/models/$name.expected.bin"
done

if [[ -d $art/cmake ]]; then
  echo "== CMake application against the installed wheel"
  cmake -S "$art/cmake" -B "$work/app" -DCMAKE_PREFIX_PATH="$("$work/venv/bin/python" -I -m executorch.sysconfig --cmake-dir)" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$work/app" >/dev/null
  for pte in "$art"/models/*.pte; do
    name=$(basename "$pte" .pte)
    "$work/app/my_app" "$pte" "$art/models/$name.input.bin" "$(cat "$art/models/$name.shape")" "$work/app/$name.out"
    compare "$work/app/$name.out" "$art/models/$name.expected.bin"
  done
fi

echo "== the Python runtime (installed) on each model"
(cd "$work/empty" && "$work/venv/bin/python" -I - "$art/models" <<'PY'
import sys, numpy as np
from pathlib import Path
from executorch.runtime import Runtime
for pte in sorted(Path(sys.argv[1]).glob("*.pte")):
    stem = pte.with_suffix("")
    x = np.fromfile(f"{stem}.input.bin", dtype=np.float32).reshape([int(d) for d in Path(f"{stem}.shape").read_text().split(",")])
    want = np.fromfile(f"{stem}.expected.bin", dtype=np.float32)
    program = Runtime.get().load_program(pte)
    out = program.load_method().execute([x])[0].ravel()
    err, tol = float(np.abs(out - want).max()), 1e-4 * max(1.0, float(np.abs(want).max()))
    calls = program.metadata("cuda_delegate_calls") or "0"
    print(f"   {pte.name}: {calls} CudaBackend call(s), max |ours - expected| = {err:.3g} (tolerance {tol:.3g})")
    assert err <= tol, pte
PY
)

if [[ -d $art/models/lm ]]; then
  echo "== the language model (int64 tokens, embeddings and causal attention) on CudaBackend"
  (cd "$work/empty" && "$work/venv/bin/python" -I - "$art/models/lm" <<'PY'
import sys, numpy as np
from pathlib import Path
from executorch.runtime import ExecutorchError, Runtime
lm = Path(sys.argv[1])
tokens, want = np.load(lm / "tokens.npy"), np.load(lm / "expected.npy")
program = Runtime.get().load_program(lm / "tiny_lm_cuda.pte")
method = program.load_method()
tol = 1e-4 * max(1.0, float(np.abs(want).max()))
for attempt in range(3):  # eager, then captured into a CUDA graph, then replayed
    err = float(np.abs(method.execute([tokens])[0] - want).max())
    assert err <= tol, (attempt, err)
print(f"   tiny_lm_cuda.pte: {program.metadata('cuda_delegate_calls')} CudaBackend call(s), "
      f"max |ours - expected| = {err:.3g} (tolerance {tol:.3g})")
bad = tokens.copy()
bad[0, 3] = 512  # the vocabulary has 512 rows
try:
    method.execute([bad])
    raise SystemExit("an out-of-range token ran")
except ExecutorchError as e:
    assert "index is out of range" in str(e), e
    print(f"   token 512 of 512: {e}")
err = float(np.abs(method.execute([tokens])[0] - want).max())
assert err <= tol, err
print(f"   and the next call is right again: max |ours - expected| = {err:.3g}")
PY
  )
fi

if [[ -d $art/models/half ]]; then
  # Half-precision products need cuBLAS, which the clean environment lacks: there, a clear error;
  # with CUBLAS_DIR (e.g. PyTorch's nvidia/cu13/lib), the numbers.
  echo "== float16 and bfloat16 programs against the float32 model (bounds: 1e-2 and 6e-2 of max(1, max |expected|))"
  (cd "$work/empty" && LD_LIBRARY_PATH=${CUBLAS_DIR:-} "$work/venv/bin/python" -I - "$art/models/half" "${CUBLAS_DIR:-}" <<'PY'
import sys, numpy as np
from pathlib import Path
from executorch.runtime import ExecutorchError, Runtime
bound = {"float16": 1e-2, "bfloat16": 6e-2}
if not sys.argv[2]:
    pte = Path(sys.argv[1]) / "mlp_float16.pte"
    try:
        Runtime.get().load_program(pte).load_method().execute([np.load(str(pte)[:-4] + ".input.npy")])
        # The system's library path has cuBLAS (a CUDA toolkit's ldconfig entry): check the numbers.
        print("   cuBLAS is on this machine's library path, outside the environment")
    except ExecutorchError as e:
        assert "needs cuBLAS" in str(e), e
        print(f"   without cuBLAS: {e}")
        raise SystemExit(0)
for pte in sorted(Path(sys.argv[1]).glob("*.pte")):
    stem, dtype = str(pte)[:-4], pte.stem.rsplit("_", 1)[1]
    x, want = np.load(stem + ".input.npy"), np.load(stem + ".expected.npy")
    program = Runtime.get().load_program(pte)
    method = program.load_method()
    got = [method.execute([x])[0] for _ in range(3)][-1].astype(np.float32)  # eager, captured, replayed
    err, tol = float(np.abs(got - want).max()), bound[dtype] * max(1.0, float(np.abs(want).max()))
    print(f"   {pte.name}: {program.metadata('cuda_delegate_calls')} CudaBackend call(s), input {method.input_meta()[0][0]}, "
          f"max |ours - float32| = {err:.3g} (bound {tol:.3g})")
    assert got.shape == want.shape and err <= tol, pte
PY
  )
fi

if [[ -d $art/models/int8 ]]; then
  echo "== int8 programs (quantize=\"int8\"): against torch on the same quantized arithmetic (2e-3) and the float32 model (6e-2), of max(1, max |expected|)"
  (cd "$work/empty" && "$work/venv/bin/python" -I - "$art/models/int8" <<'PY'
import sys, numpy as np
from pathlib import Path
from executorch.runtime import Runtime
for pte in sorted(Path(sys.argv[1]).glob("*.pte")):
    stem = str(pte)[:-4]
    x, want, fp32 = (np.load(f"{stem}.{k}.npy") for k in ("input", "expected", "float32"))
    program = Runtime.get().load_program(pte)
    method = program.load_method()
    got = [method.execute([x])[0] for _ in range(3)][-1]  # eager, captured, replayed
    scale = lambda ref: max(1.0, float(np.abs(ref).max()))
    err, err_fp32 = float(np.abs(got - want).max()) / scale(want), float(np.abs(got - fp32).max()) / scale(fp32)
    print(f"   {pte.name}: {program.metadata('cuda_delegate_calls')} CudaBackend call(s), "
          f"|ours - reference| = {err:.3g}, |ours - float32| = {err_fp32:.3g}")
    assert got.shape == want.shape and err <= 2e-3 and err_fp32 <= 6e-2, pte
PY
  )
fi

if [[ -d $art/models/attention ]]; then
  echo "== attention (one kernel): float32 / float16 / bfloat16 against torch float32, within 1e-4 / 1e-2 / 6e-2 of max(1, max |expected|)"
  (cd "$work/empty" && "$work/venv/bin/python" -I - "$art/models/attention" <<'PY'
import sys, numpy as np
from pathlib import Path
from executorch.runtime import Runtime
bounds = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 6e-2}
for pte in sorted(Path(sys.argv[1]).glob("*.pte")):
    data = np.load(str(pte)[:-4] + ".npz")
    xs, want = [data[f"x{i}"] for i in range(3)], data["expected"]
    bound = bounds[pte.stem.rsplit("_", 1)[1]]
    program = Runtime.get().load_program(pte)
    method = program.load_method()
    got = [np.asarray(method.execute(xs)[0], dtype=np.float32) for _ in range(3)][-1]  # eager, captured, replayed
    err = float(np.abs(got - want).max()) / max(1.0, float(np.abs(want).max()))
    calls = program.metadata("cuda_delegate_calls")
    print(f"   {pte.name}: {calls} CudaBackend call(s), max |err| {err:.3g} (bound {bound})")
    assert calls == "1" and got.shape == want.shape and err <= bound, pte
PY
  )
fi

if [[ -d $art/cmake_cuda ]]; then
  echo "== CMake application with a GPU-memory input (the seed's example)"
  cmake -S "$art/cmake_cuda" -B "$work/gpu_app" -DCMAKE_PREFIX_PATH="$("$work/venv/bin/python" -I -m executorch.sysconfig --cmake-dir)" \
    -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$work/gpu_app" >/dev/null
  for pte in "$art"/models/*_cuda.pte; do
    name=$(basename "$pte" .pte)
    if "$work/gpu_app/my_gpu_app" "$pte" "$art/models/$name.input.bin" "$(cat "$art/models/$name.shape")" \
        "$work/gpu_app/$name.out" 2>"$work/gpu_app/$name.err"; then
      compare "$work/gpu_app/$name.out" "$art/models/$name.expected.bin"
    elif grep -q "is in CUDA memory but the program plans it in CPU memory" "$work/gpu_app/$name.err"; then
      # The model's first operator runs on the CPU (e.g. a convolution): a clear error, as it should be.
      echo "   $name: refused as expected: $(cat "$work/gpu_app/$name.err")"
    else
      cat "$work/gpu_app/$name.err"
      exit 1
    fi
  done
fi

echo "== GPU code in the shipped libraries (cuobjdump): real code and PTX per architecture"
for lib in "$site/executorch/lib/libexecutorch_cuda_backend.so.1" "$site/executorch/backends/cuda/libaoti_cuda_shims.so"; do
  sass=$(cuobjdump --list-elf "$lib" | grep -oE 'sm_[0-9]+' | sort -u | tr '\n' ' ')
  ptx=$(cuobjdump --list-ptx "$lib" | grep -oE 'sm_[0-9]+' | sort -u | sed 's/sm_/compute_/' | tr '\n' ' ')
  echo "   $(basename "$lib"): $sass$ptx"
  [[ -n ${EXPECTED_ARCHS:-} && "$sass$ptx" != "$EXPECTED_ARCHS " ]] && { echo "   expected: $EXPECTED_ARCHS"; exit 1; }
done

if [[ -f $art/device_faults.py ]]; then
  echo "== device faults (out of memory, another architecture, no GPU)"
  (cd "$work/empty" && "$work/venv/bin/python" -I "$art/device_faults.py" "$art/models")
fi

cudart_dir=$site/nvidia/cu13/lib
for t in "$art"/bin/*; do
  [[ -x $t ]] || continue
  echo "== $(basename "$t")"
  LD_LIBRARY_PATH=$cudart_dir "$t"
done
# cuBLAS is not in the clean environment (above: its absence is a clear error); where this machine
# has it elsewhere (CUBLAS_DIR, e.g. PyTorch's nvidia/cu13/lib), the shims use it.
if [[ -n ${CUBLAS_DIR:-} && -x $art/bin/shims_test ]]; then
  echo "== shims_test with cuBLAS from $CUBLAS_DIR"
  LD_LIBRARY_PATH=$cudart_dir:$CUBLAS_DIR "$art/bin/shims_test"
fi
if [[ -x $art/bin/shims_test ]]; then
  echo "== shims_test without cuBLAS (EXECUTORCH_CUDA_GEMM=builtin): float32 on the built-in kernel"
  EXECUTORCH_CUDA_GEMM=builtin LD_LIBRARY_PATH=$cudart_dir "$art/bin/shims_test" | tee "$work/builtin.log"
  grep -q "refused without cuBLAS" "$work/builtin.log"
fi
echo "== verify.sh: all checks passed"
