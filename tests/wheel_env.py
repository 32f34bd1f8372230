"""A clean virtual environment with a built wheel installed, as a user's would be.

pip runs offline (--no-index --no-deps); each requirement the wheel declares (numpy, flatbuffers,
nvidia-cuda-runtime in a CUDA build) is provided the way pip lays it out, linked in from this
interpreter's installed distributions with their metadata, and `pip check` must then pass.
"""

from __future__ import annotations

import importlib.metadata as md
import re
import subprocess
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

from executorch.tools.symcheck import find_wheel


@dataclass
class WheelEnv:
    python: Path
    site_packages: Path
    wheel: Path


def requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        lines = zf.read(meta).decode().splitlines()
    return [l.split(":", 1)[1].strip() for l in lines if l.startswith("Requires-Dist:") and "extra ==" not in l]


def provide(requirement: str, target: Path) -> None:
    """Links an installed distribution (its top-level packages and .dist-info) into `target`."""
    name = re.split(r"[<>=!~; ]", requirement, maxsplit=1)[0]
    dist = md.distribution(name)  # PackageNotFoundError: this interpreter lacks a requirement
    top = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
    for entry in sorted(top):
        src = Path(dist.locate_file(entry))
        dst = target / entry
        if src.exists() and not dst.exists():
            dst.symlink_to(src, target_is_directory=src.is_dir())


def install(wheel_dir: str, where: Path) -> WheelEnv:
    env_dir = where / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python = env_dir / "bin" / "python"
    wheel = find_wheel(wheel_dir)
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--disable-pip-version-check",
                    wheel], check=True)
    (site,) = env_dir.glob("lib/python3*/site-packages")
    for requirement in requirements(wheel):
        provide(requirement, site)
    check = subprocess.run([python, "-m", "pip", "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    return WheelEnv(python=python, site_packages=site, wheel=wheel)
