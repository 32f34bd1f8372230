"""export(backend="cuda", compiler="aoti") on a GPU machine with torch 2.11, CUDA and Triton: real
models compiled by AOTInductor, run through CudaBackend's AOTI payloads from the installed package
and compared with torch, and run again in a process that never loads libtorch. Skipped elsewhere
(tests/aoti_payload_test.py covers the format, the checks and the loader on the CPU)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tests.flags import preload_cuda_runtime

torch = pytest.importorskip("torch", reason="torch is not installed in the test interpreter")
preload_cuda_runtime()

from executorch.export import export  # noqa: E402
from executorch.runtime import Runtime  # noqa: E402
from tests.models.real import MODELS, import_torchvision  # noqa: E402


def _compiles_aoti() -> bool:
    import importlib.util

    return (torch.__version__.startswith("2.11") and torch.cuda.is_available() and
            all(importlib.util.find_spec(m) is not None for m in ("triton", "elftools")))


pytestmark = pytest.mark.skipif(not _compiles_aoti(),
                                reason="compiler='aoti' needs torch 2.11 with a CUDA device, Triton and pyelftools")

BOUNDS = {torch.float32: 1e-3, torch.bfloat16: 6e-2}  # relative to the largest |output|; TF32-free float32


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = torch.nn.Linear(64, 128), torch.nn.Linear(128, 10)

    def forward(self, x):
        return self.b(torch.relu(self.a(x))) * 2 + 1


def cases() -> list[tuple[str, Any]]:
    import_torchvision()
    return [("mlp", lambda: (Mlp().eval(), (torch.randn(4, 64),))), ("resnet18", MODELS["resnet18"]),
            ("gpt2", MODELS["gpt2"])]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name, factory", cases())
def test_aoti_payloads_match_torch(name: str, factory: Any, dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    model, inputs = factory()
    inputs = tuple(x.to(dtype) if x.is_floating_point() else x for x in inputs)
    pte = export(model, inputs, backend="cuda", compiler="aoti", dtype=dtype)
    got = Runtime.get().load_program(pte).load_method().execute([x.cuda() for x in inputs])[0]
    with torch.no_grad():
        want = model.to(dtype).cuda()(*[x.cuda() for x in inputs])
    want = want if isinstance(want, torch.Tensor) else want[0]
    scale = max(1.0, float(want.float().abs().max()))
    assert float((got.float().cuda() - want.float()).abs().max()) / scale <= BOUNDS[dtype]


def test_an_aoti_program_runs_without_libtorch(tmp_path: Any) -> None:
    torch.manual_seed(0)
    model, x = Mlp().eval(), torch.randn(4, 64)
    (tmp_path / "mlp.pte").write_bytes(export(model, (x,), backend="cuda", compiler="aoti"))
    with torch.no_grad():
        want = model(x).numpy()
    code = (
        "import sys, numpy as np\n"
        "from executorch.runtime import Runtime\n"
        f"m = Runtime.get().load_program(open({str(tmp_path / 'mlp.pte')!r}, 'rb').read()).load_method()\n"
        f"got = np.asarray(m.execute([np.array({x.tolist()}, dtype=np.float32)])[0])\n"
        "maps = open('/proc/self/maps').read()\n"
        "assert 'libtorch' not in maps and 'torch' not in sys.modules, 'libtorch is loaded'\n"
        "print(repr(got.tolist()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = torch.tensor(eval(out.stdout.strip().splitlines()[-1]))
    torch.testing.assert_close(got, torch.from_numpy(want), rtol=1e-4, atol=1e-4)
