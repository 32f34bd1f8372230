"""A C++ application (tests/consumers/cmake) built with CMake against the installed wheel, exactly as
a user does it: find_package(executorch), executorch::runtime, executorch::xnnpack_backend (and
executorch::cuda_backend), Module and make_tensor_ptr. It runs an exported model, on the CPU kernels
and through XnnpackBackend, and must match torch."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests import wheel_env
from tests.flags import env_flag, preload_cuda_runtime

torch = pytest.importorskip("torch", reason="torch is not installed in the test interpreter")
preload_cuda_runtime()

from tests.models.zoo import MODELS, fresh_inputs  # noqa: E402

CUDA = env_flag("EXECUTORCH_CUDA")


def compiler() -> str:
    for name in ("c++", "g++", "g++-14", "clang++"):
        if path := shutil.which(name):
            return path
    pytest.fail("no C++ compiler on PATH")


@pytest.mark.skipif(not env_flag("EXECUTORCH_SHARED"), reason="built with --//:shared=False: the wheel has no libraries to link")
def test_cmake_application_runs_a_model(tmp_path: Path) -> None:
    cmake = shutil.which("cmake")
    assert cmake, "cmake is not installed"
    python = wheel_env.install(os.environ["EXECUTORCH_WHEEL"], tmp_path).python
    cmake_dir = subprocess.run([python, "-I", "-m", "executorch.sysconfig", "--cmake-dir"], capture_output=True,
                               text=True, check=True, cwd=tmp_path).stdout.strip()
    assert Path(cmake_dir, "executorch-config.cmake").exists()

    source = Path(os.environ["CMAKE_APP_DIR"])
    build = tmp_path / "build"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    configure = subprocess.run([cmake, "-S", source, "-B", build, f"-DCMAKE_PREFIX_PATH={cmake_dir}",
                                f"-DCMAKE_CXX_COMPILER={compiler()}", "-DCMAKE_BUILD_TYPE=Release"],
                               capture_output=True, text=True, env=env)
    assert configure.returncode == 0, configure.stdout + configure.stderr
    built = subprocess.run([cmake, "--build", build], capture_output=True, text=True, env=env)
    assert built.returncode == 0, built.stdout + built.stderr

    # The installed wheel's exporter would do as well; the test interpreter's is the same code.
    from executorch.export import export

    model, example = MODELS["mlp"]()
    (x,) = fresh_inputs(example, 3)
    (tmp_path / "input.bin").write_bytes(x.numpy().tobytes())
    with torch.no_grad():
        ref = model(x).numpy()
    for backend in (None, "xnnpack"):
        (tmp_path / "model.pte").write_bytes(export(model, example, backend=backend))
        run = subprocess.run([build / "my_app", tmp_path / "model.pte", tmp_path / "input.bin",
                              ",".join(map(str, x.shape)), tmp_path / "output.bin"], capture_output=True, text=True,
                             env=env, cwd=tmp_path)
        assert run.returncode == 0, run.stdout + run.stderr
        # The C++ program sees the one registry: each backend exactly once.
        names = run.stdout.splitlines()[0].split()
        assert names[0] == "backends:" and sorted(names[1:]) == (["CudaBackend"] if CUDA else []) + ["XnnpackBackend"]
        ours = np.frombuffer((tmp_path / "output.bin").read_bytes(), dtype=np.float32).reshape(ref.shape)
        np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-4 * max(1.0, float(np.abs(ref).max())))
