"""Installs each built wheel into a clean virtual environment and uses it from there.

No checkout is on any path of the child interpreter: it runs isolated (-I) from an empty directory.
pip runs offline (--no-index --no-deps); each requirement the wheel declares (numpy, flatbuffers,
nvidia-cuda-runtime in a CUDA build) is provided the way pip lays it out, linked in from this
interpreter's installed distributions with their metadata, and `pip check` must then be satisfied.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
import zipfile
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


def provide(requirement: str, target: Path) -> None:
    """Links an installed distribution (its top-level packages and .dist-info) into `target`."""
    import importlib.metadata as md

    name = re.split(r"[<>=!~; ]", requirement, maxsplit=1)[0]
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        pytest.fail(f"the test interpreter lacks {name}, which the wheel requires")
    top = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
    for entry in sorted(top):
        src = Path(dist.locate_file(entry))
        dst = target / entry
        if src.exists() and not dst.exists():
            dst.symlink_to(src, target_is_directory=src.is_dir())


def requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        lines = zf.read(meta).decode().splitlines()
    return [l.split(":", 1)[1].strip() for l in lines if l.startswith("Requires-Dist:") and "extra ==" not in l]


def install_and_probe(wheel_dir: str, tmp_path: Path) -> dict:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python = env_dir / "bin" / "python"
    wheel = find_wheel(wheel_dir)
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--disable-pip-version-check", wheel],
        check=True,
    )
    for requirement in requirements(wheel):
        provide(requirement, site_packages(env_dir))
    check = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
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
    result = install_and_probe(os.environ[variant], tmp_path)
    assert result["backends"] == (["CudaBackend"] if CUDA else [])
    assert "NoSuchBackend" in result["error"]
    if CUDA:
        # No GPU here means False; with one, True. Either way a clean answer, not a crash.
        assert isinstance(result["available"]["CudaBackend"], bool)


def test_cpu_wheel_needs_no_cuda_runtime(tmp_path: Path) -> None:
    result = install_and_probe(os.environ["EXECUTORCH_WHEEL_CPU"], tmp_path)
    assert result["backends"] == []
