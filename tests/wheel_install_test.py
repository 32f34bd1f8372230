"""Installs each built wheel into a clean virtual environment and uses it from there.

No checkout is on any path of the child interpreter: it runs isolated (-I) from an empty directory.
pip runs offline (--no-index --no-deps); the CUDA runtime the wheel declares is provided the way
pip would lay it out (site-packages/nvidia/cu13/lib), from this interpreter's toolkit wheels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from executorch.tools.symcheck import find_wheel
from tests.flags import env_flag

CUDA = env_flag("EXECUTORCH_CUDA")

PROBE = """
import json, executorch, executorch.runtime as rt
names = rt.registered_backends()
print(json.dumps({
    "file": executorch.__file__,
    "backends": names,
    "available": {n: rt.is_available(n) for n in names},
}))
try:
    rt.is_available("NoSuchBackend")
except KeyError as e:
    print(json.dumps({"error": str(e)}))
"""


def site_packages(env_dir: Path) -> Path:
    found = list(env_dir.glob("lib/python3*/site-packages"))
    assert len(found) == 1, found
    return found[0]


def provide_cuda_runtime(target: Path) -> None:
    import nvidia  # the toolkit wheels of the build interpreter

    for base in nvidia.__path__:
        if (Path(base) / "cu13" / "lib" / "libcudart.so.13").exists():
            (target / "nvidia").symlink_to(base, target_is_directory=True)
            return
    pytest.fail("the CUDA build's test interpreter has no nvidia/cu13/lib/libcudart.so.13")


def install_and_probe(wheel_dir: str, tmp_path: Path, with_cuda_runtime: bool) -> dict:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--disable-pip-version-check", find_wheel(wheel_dir)],
        check=True,
    )
    if with_cuda_runtime:
        provide_cuda_runtime(site_packages(env_dir))
    work = tmp_path / "empty"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    out = subprocess.run([python, "-I", "-c", PROBE], cwd=work, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(l) for l in out.stdout.splitlines()]
    result = lines[0]
    result["error"] = lines[1]["error"]
    assert Path(result["file"]).is_relative_to(env_dir), result["file"]
    return result


@pytest.mark.parametrize("variant", ["EXECUTORCH_WHEEL", "EXECUTORCH_WHEEL_STATIC"])
def test_installed_wheel_registers_its_backends(variant: str, tmp_path: Path) -> None:
    result = install_and_probe(os.environ[variant], tmp_path, with_cuda_runtime=CUDA)
    assert result["backends"] == (["CudaBackend"] if CUDA else [])
    assert "NoSuchBackend" in result["error"]
    if CUDA:
        # No GPU here means False; with one, True. Either way a clean answer, not a crash.
        assert isinstance(result["available"]["CudaBackend"], bool)


def test_cpu_wheel_needs_no_cuda_runtime(tmp_path: Path) -> None:
    result = install_and_probe(os.environ["EXECUTORCH_WHEEL_CPU"], tmp_path, with_cuda_runtime=False)
    assert result["backends"] == []
