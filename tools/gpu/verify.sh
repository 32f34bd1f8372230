#!/usr/bin/env bash
# Verifies a CUDA build on a GPU machine, from artifacts built elsewhere, with no checkout on any path.
#
#   tools/gpu/verify.sh ARTIFACTS
#
# ARTIFACTS holds: the executorch wheel for this machine's Python; the wheels it requires
# (numpy, nvidia-cuda-runtime) for an offline install; optionally bin/ with C++ test binaries.
# Steps: pip-installs the wheel into a clean virtual environment (resolving its requirements from
# ARTIFACTS only), checks from an empty directory that CudaBackend is registered once and available,
# then runs each test binary against the installed CUDA runtime.
set -euo pipefail
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

cudart_dir=$(echo "$work"/venv/lib/python3*/site-packages/nvidia/cu13/lib)
for t in "$art"/bin/*; do
  [[ -x $t ]] || continue
  echo "== $(basename "$t")"
  LD_LIBRARY_PATH=$cudart_dir "$t"
done
echo "== verify.sh: all checks passed"
