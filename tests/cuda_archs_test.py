"""The CUDA kernels embed exactly the architectures the build asks for (cuobjdump)."""

from __future__ import annotations

import os
import re
import subprocess


def cuobjdump(flag: str) -> str:
    out = subprocess.run([os.environ["CUOBJDUMP"], flag, os.environ["CUDA_ARCHIVE"]], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def embedded() -> set[str]:
    """Architectures in the archive: sm_XY for real code (cubin), compute_XY for PTX."""
    real = re.findall(r"\.(sm_\d+)\.cubin", cuobjdump("--list-elf"))
    ptx = re.findall(r"\.sm_(\d+)\.ptx", cuobjdump("--list-ptx"))
    return set(real) | {f"compute_{cc}" for cc in ptx}


def test_archive_has_real_code_and_ptx_for_each_requested_architecture() -> None:
    requested = set(os.environ["CUDA_ARCHS"].split(","))
    assert requested, "no architectures requested"
    assert embedded() == requested


def test_int8_kernel_uses_dp4a_on_every_real_architecture() -> None:
    sass = cuobjdump("--dump-sass")
    per_arch = re.split(r"arch = (sm_\d+)", sass)
    archs = dict(zip(per_arch[1::2], per_arch[2::2]))
    real = {a for a in os.environ["CUDA_ARCHS"].split(",") if a.startswith("sm_")}
    assert set(archs) == real
    for arch, code in archs.items():
        assert "IDP.4A" in code, f"{arch}: no IDP.4A (dp4a) instruction in the int8 kernel"
