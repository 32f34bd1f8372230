"""Installs each built wheel into a clean virtual environment (tests/wheel_env.py) and uses it
from there. No checkout is on any path of the child interpreter: it runs isolated (-I) from an
empty directory."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests import wheel_env
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


def install_and_probe(wheel_dir: str, tmp_path: Path) -> dict:
    python, env_dir = wheel_env.install(wheel_dir, tmp_path).python, tmp_path / "venv"
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
    assert sorted(result["backends"]) == (["CudaBackend"] if CUDA else []) + ["XnnpackBackend"]
    assert result["available"]["XnnpackBackend"] is True  # any x86-64 CPU runs XNNPACK
    assert "NoSuchBackend" in result["error"]
    if CUDA:
        # No GPU here means False; with one, True. Either way a clean answer, not a crash.
        assert isinstance(result["available"]["CudaBackend"], bool)


@pytest.mark.skipif(not env_flag("EXECUTORCH_SHARED"), reason="built with --//:shared=False: no shared libraries")
@pytest.mark.parametrize("variant", ["EXECUTORCH_WHEEL", "EXECUTORCH_WHEEL_CPU"])
def test_one_runtime_at_run_time(variant: str, tmp_path: Path) -> None:
    """The extension and every shipped library agree on the registries and the thread pool."""
    python = wheel_env.install(os.environ[variant], tmp_path).python
    (tmp_path / "empty").mkdir()
    out = subprocess.run([python, "-I", "-m", "executorch.tools.identity"], cwd=tmp_path / "empty",
                         capture_output=True, text=True)
    report = json.loads(out.stdout)
    assert out.returncode == 0 and not report["problems"], out.stdout + out.stderr
    libs = report["libraries"]
    # Every library was asked, and answered through the one runtime.
    assert libs["libexecutorch.so.1"]["backends"] == report["extension"]["backends"]
    assert libs["libexecutorch_threadpool.so.1"]["pool"] == report["extension"]["pool"] != 0
    assert report["extension"]["kernels"] > 50
    names = sorted(report["extension"]["backend_names"])
    if variant == "EXECUTORCH_WHEEL" and CUDA:
        assert names == ["CudaBackend", "XnnpackBackend"]
        assert libs["libexecutorch_cuda_backend.so.1"]["backends"] == 2
    else:
        assert names == ["XnnpackBackend"]
    assert libs["libexecutorch_backend_xnnpack.so.1"]["backends"] == len(names)


def test_cpu_wheel_needs_no_cuda_runtime(tmp_path: Path) -> None:
    result = install_and_probe(os.environ["EXECUTORCH_WHEEL_CPU"], tmp_path)
    assert result["backends"] == ["XnnpackBackend"]


def test_installed_wheel_runs_a_model_like_torch(tmp_path: Path) -> None:
    """Export here, run in the clean environment (no torch there), compare with torch here."""
    torch = pytest.importorskip("torch", reason="torch is not installed in the test interpreter")
    from tests.flags import preload_cuda_runtime

    preload_cuda_runtime()
    from executorch.export import export
    from tests.models.zoo import MODELS, fresh_inputs

    python = wheel_env.install(os.environ["EXECUTORCH_WHEEL"], tmp_path).python
    model, example = MODELS["cnn"]()
    (x,) = fresh_inputs(example, 7)
    np_in = tmp_path / "input.npy"
    import numpy as np

    np.save(np_in, x.numpy())
    script = (
        "import sys, numpy as np\n"
        "from executorch.runtime import Runtime\n"
        "m = Runtime.get().load_program(sys.argv[1]).load_method('forward')\n"
        "np.save(sys.argv[3], m.execute([np.load(sys.argv[2])])[0])\n"
    )
    (tmp_path / "empty").mkdir()
    with torch.no_grad():
        ref = model(x).numpy()
    for backend in (None, "xnnpack"):  # the CPU kernels, then XnnpackBackend
        (tmp_path / "model.pte").write_bytes(export(model, example, backend=backend))
        out = subprocess.run([python, "-I", "-c", script, tmp_path / "model.pte", np_in, tmp_path / "out.npy"],
                             cwd=tmp_path / "empty", capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        np.testing.assert_allclose(np.load(tmp_path / "out.npy"), ref, rtol=0,
                                   atol=1e-4 * max(1.0, float(np.abs(ref).max())))
