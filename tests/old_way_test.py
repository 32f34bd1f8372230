"""The checks fail on a wheel built the old way: runtime linked statically into the CUDA delegate
and into the Python extension (tests/fixtures/old_way). A check that passed here could not fail."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from executorch.tools import symcheck
from executorch.tools.symcheck import EXECUTORCH_COMPONENTS, check, open_wheel
from tests import wheel_env

DELEGATE = "executorch/lib/libexecutorch_cuda_backend.so.1"
XNNPACK = "executorch/lib/libexecutorch_backend_xnnpack.so.1"


def test_symcheck_names_every_definer_of_the_registry(tmp_path: Path, capsys) -> None:
    wheel = open_wheel(os.environ["EXECUTORCH_OLD_WAY_WHEEL"], tmp_path / "w")
    ext = next(n for n in wheel.objects if re.fullmatch(r"executorch/_C\..*\.so", n))
    findings = {f.component.name: f for f in check(wheel, EXECUTORCH_COMPONENTS)}
    registry = findings["backend registry"]
    assert registry.status == "FAIL"
    # The extension's copy, the CUDA delegate's and the XNNPACK delegate's.
    assert registry.definers == sorted([ext, DELEGATE, XNNPACK])
    # All copies are exported: the strong duplicates nm -D would report too.
    assert wheel.definers("_ZN10executorch7runtime16register_backend") == sorted([ext, DELEGATE, XNNPACK])
    assert symcheck.main([str(wheel.path), "--duplicates"]) == 1
    out = capsys.readouterr().out
    assert re.search(rf"FAIL\s+backend registry\s+owner executorch/lib/libexecutorch.so.1; defined by: {re.escape(', '.join(sorted([ext, DELEGATE, XNNPACK])))}", out), out
    dups = int(re.search(r"(\d+) strong symbols exported by two or more", out).group(1))
    assert dups > 0
    # A shim function: three definers, each named.
    shims = "executorch/backends/cuda/libaoti_cuda_shims.so"
    assert wheel.definers("aoti_torch_create_tensor_from_blob_v2") == sorted([ext, DELEGATE, shims])
    assert findings["CUDA shims"].status == "FAIL"
    # pthreadpool: the pool's library and, through the pool's sources, the extension and the XNNPACK
    # delegate's library.
    pool = "executorch/lib/libexecutorch_threadpool.so.1"
    assert wheel.definers("pthreadpool_create") == sorted([ext, pool, XNNPACK])
    assert findings["thread pool"].status == "FAIL"
    assert re.search(rf"FAIL\s+CUDA shims\s+owner {shims}; defined by: {re.escape(', '.join(sorted([ext, DELEGATE, shims])))}", out), out
    # XNNPACK and its delegate: in their library and again in the extension.
    for row in ("XNNPACK", "XNNPACK delegate"):
        assert findings[row].status == "FAIL" and findings[row].definers == sorted([ext, XNNPACK]), findings[row]
    assert re.search(rf"FAIL\s+XNNPACK\s+owner {XNNPACK}; defined by: {re.escape(', '.join(sorted([ext, XNNPACK])))}",
                     out), out


def test_run_time_check_sees_two_registries(tmp_path: Path) -> None:
    python = wheel_env.install(os.environ["EXECUTORCH_OLD_WAY_WHEEL"], tmp_path).python
    (tmp_path / "empty").mkdir()
    out = subprocess.run([python, "-I", "-m", "executorch.tools.identity"], cwd=tmp_path / "empty",
                         capture_output=True, text=True)
    assert out.returncode == 1 and out.stdout, out.stdout + out.stderr
    report = json.loads(out.stdout)
    # Each copy registered its own CudaBackend: the delegate library finds another object than the
    # extension does, and its registry holds none of the extension's kernels.
    ext = report["extension"]
    lib = report["libraries"]["libexecutorch_cuda_backend.so.1"]
    assert ext["backend_names"] == ["CudaBackend", "XnnpackBackend"]
    assert lib["backend_objects"]["CudaBackend"] not in (0, ext["backend_objects"]["CudaBackend"])
    assert lib.get("kernels", 0) == 0 < ext["kernels"]
    assert any("other backend objects" in p for p in report["problems"])
