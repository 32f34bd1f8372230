"""AOTInductor payloads (executorch/export/_aoti.py, docs/program_format.md) as CudaBackend reads
them (backends/cuda/runtime/payload.cpp, read_aoti_payload): what was packed reads back, and a
payload of another torch release, without kernels for the device, with its library outside the
program or metadata missing is refused with a message naming what is wrong. Needs no GPU."""

from __future__ import annotations

from typing import Any

import pytest

from tests.flags import preload_cuda_runtime

torch = pytest.importorskip("torch", reason="torch is not installed in the test interpreter")
preload_cuda_runtime()

from executorch.export._aoti import aoti_payload  # noqa: E402
from executorch.runtime import ExecutorchError, _C  # noqa: E402
from executorch.serialization.pte import deserialize, serialize  # noqa: E402

LIBRARY = b"\x7fELF" + bytes(range(256)) * 3  # read as bytes here; loading checks the ELF (aoti_library_test)


def payload(**changes: Any) -> bytes:
    args: dict[str, Any] = dict(
        library=LIBRARY,
        constants=[("fc_weight", torch.arange(6.0).reshape(2, 3)), ("fc_bias", torch.ones(3, dtype=torch.bfloat16))],
        inputs=[torch.zeros(4, 2)], outputs=[torch.zeros(4, 3)], torch_version="2.11.0+cu130",
        cuda_archs=["sm_90", "sm_100"])
    return aoti_payload(**{**args, **changes})


def with_metadata(pte: bytes, key: str, value: str | None) -> bytes:
    spec = deserialize(pte)
    if value is None:
        del spec.metadata[key]
    else:
        spec.metadata[key] = value
    return serialize(spec)


def test_what_was_packed_reads_back() -> None:
    info = _C.cuda_read_aoti_payload(payload(), 90)
    assert info == {"torch_version": "2.11.0+cu130", "archs": ["sm_90", "sm_100"],
                    "constants": ["fc_weight", "fc_bias"], "library": LIBRARY}
    assert _C.cuda_read_aoti_payload(payload(torch_version="2.11"), 0)["archs"] == ["sm_90", "sm_100"]
    # The payload is a program: its method declares the model's inputs and outputs.
    method = _C.load_program_bytes(payload()).load_method("forward")
    assert method.input_meta() == [("float32", [4, 2])]
    assert [m[:2] for m in method.output_meta()] == [("float32", [4, 3])]


@pytest.mark.parametrize("version", ["2.10.1", "2.110.0", "3.11.0"])
def test_another_torch_release_is_refused_naming_both(version: str) -> None:
    with pytest.raises(ExecutorchError, match=f"built by torch {version}; this build runs code of torch 2.11"):
        _C.cuda_read_aoti_payload(payload(torch_version=version), 90)


def test_a_device_without_kernels_is_refused_naming_both() -> None:
    with pytest.raises(ExecutorchError, match="has kernels for sm_90,sm_100; this device is sm_80"):
        _C.cuda_read_aoti_payload(payload(), 80)


@pytest.mark.parametrize("key, value, message", [
    ("aoti_library_bytes", str(len(LIBRARY) + 1), "outside segment 1"),
    ("aoti_library_segment", "7", "segment 7 does not exist"),
    ("aoti_library_segment", "-1", "are not numbers"),
    ("aoti_cuda_archs", "90", "architecture '90' is not sm_<number>"),
    ("aoti_constants", "fc_weight\n\nfc_bias", "an empty constant name"),
    ("aoti_torch_version", None, "metadata 'aoti_torch_version' is missing"),
    ("aoti_constants", None, "metadata 'aoti_constants' is missing"),
])
def test_malformed_payloads_are_refused(key: str, value: str | None, message: str) -> None:
    with pytest.raises(ExecutorchError, match=message):
        _C.cuda_read_aoti_payload(with_metadata(payload(), key, value), 90)


def test_truncated_payloads_are_refused() -> None:
    whole = payload()
    for size in (0, 16, len(whole) // 2, len(whole) - 1):
        with pytest.raises(ExecutorchError):
            _C.cuda_read_aoti_payload(whole[:size], 90)
    with pytest.raises(ValueError, match="the model library is empty"):
        payload(library=b"")


def built_library(variable: str) -> bytes:
    import os

    path = os.environ.get(variable)
    if not path:
        pytest.skip(f"{variable} is not set (a build without CUDA has no test containers)")
    with open(path, "rb") as f:
        return f.read()


def test_every_shim_a_library_calls_is_checked_at_export() -> None:
    pytest.importorskip("elftools", reason="pyelftools (executorch[tools]) reads the libraries")
    from executorch.export._aoti import missing_shims

    assert missing_shims(built_library("AOTI_TEST_CONTAINER")) == []  # it calls only shims that exist
    assert missing_shims(built_library("AOTI_TEST_UNKNOWN_SHIM")) == ["aoti_torch_frobnicate"]
    with pytest.raises(ValueError, match="no ELF shared object"):
        missing_shims(LIBRARY)


class Affine(torch.nn.Module):
    def forward(self, x):
        return x * 3.0 - 1.0


@pytest.mark.parametrize("options, message", [
    (dict(compiler="tvm", backend="cuda"), "unknown compiler 'tvm'"),
    (dict(compiler="aoti"), "takes backend='cuda' alone"),
    (dict(compiler="aoti", backend=["cuda", "xnnpack"]), "takes backend='cuda' alone"),
    (dict(compiler="aoti", backend="cuda", quantize="int8"), "without quantize"),
    (dict(compiler="aoti", backend="cuda", cuda_archs=["sm_90"]), "cuda_archs"),
])
def test_aoti_export_options_are_checked(options: dict[str, Any], message: str) -> None:
    from executorch.export import ExportError, export

    with pytest.raises(ExportError, match=message):
        export(Affine(), (torch.zeros(2, 2),), **options)


def test_aoti_export_says_what_this_machine_lacks() -> None:
    from executorch.export import ExportError, export

    if torch.__version__.startswith("2.11") and torch.cuda.is_available():
        pytest.skip("this machine compiles AOTI payloads (tests/aoti_export_test.py)")
    with pytest.raises(ExportError, match=r"needs torch 2\.11|compiles on a CUDA device"):
        export(Affine(), (torch.zeros(2, 2),), backend="cuda", compiler="aoti")


def test_an_aoti_program_is_one_cuda_call_of_its_payload() -> None:
    from executorch.export._aoti import aoti_program

    x, y = torch.zeros(2, 2), torch.zeros(2, 2)
    inner = payload(library=built_library("AOTI_TEST_CONTAINER"), constants=[
        ("scale", torch.tensor([3.0])), ("shift", torch.tensor([-1.0]))], inputs=[x], outputs=[y])
    program = aoti_program(inner, [x], [y], metadata={"model": "affine"})
    spec = deserialize(program)
    plan = spec.plans[0]
    assert [type(i).__name__ for i in plan.instructions] == ["DelegateCall"]
    assert plan.delegates[0].backend_id == "CudaBackend" and spec.segments[plan.delegates[0].segment] == inner
    assert plan.values[plan.inputs[0]].payload.device == 1  # only the delegate reads it: device tensors pass
    assert spec.metadata["compiler"] == "aoti" and spec.metadata["model"] == "affine"
    # The test container is a CPU one: CudaBackend refuses it, or the machine has no GPU. Either way an error.
    with pytest.raises(ExecutorchError, match="CudaBackend"):
        _C.load_program_bytes(program).load_method("forward")


def test_truncated_constants_are_refused() -> None:
    """A payload whose constant data ends before its last constant's does: the method does not load."""
    spec = deserialize(payload())
    spec.segments[0] = spec.segments[0][:20]  # fc_weight is 24 bytes, fc_bias after it
    with pytest.raises(ExecutorchError, match=r"value 0 \(constant\): bytes \[0, \+24\) lie outside segment 0 of 20 bytes"):
        _C.load_program_bytes(serialize(spec)).load_method("forward")
