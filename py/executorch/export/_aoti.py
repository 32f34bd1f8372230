"""AOTInductor payloads for CudaBackend (docs/program_format.md, "AOTInductor payloads").

A payload is a program of its own: its one method declares the model's inputs and outputs (planned
memory) and constants (constant data, in the order the metadata names them), and its metadata
names the segment holding the model library PyTorch's AOT compile made, that library's size, the
torch that made it and the GPU architectures its kernels are built for. The runtime's program
checks (segment bounds, the verifier) then apply to the payload as to any .pte.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Sequence

import torch

from executorch.export._dtypes import nbytes
from executorch.serialization.pte import Plan, ProgramSpec, TensorSpec, TensorValue, serialize

_ALIGNMENT = 16


def _dtype_code(t: torch.Tensor) -> int:
    from executorch.export._export import DTYPE_CODES

    if t.dtype not in DTYPE_CODES:
        raise ValueError(f"tensor of dtype {t.dtype}: not a dtype the program format holds")
    return DTYPE_CODES[t.dtype]


def aoti_payload(library: bytes, constants: Sequence[tuple[str, torch.Tensor]], inputs: Sequence[torch.Tensor],
                 outputs: Sequence[torch.Tensor], torch_version: str, cuda_archs: Sequence[str]) -> bytes:
    """The payload bytes of a model library: `constants` as (the container's name, tensor) pairs,
    `inputs` and `outputs` as example tensors (their dtypes and shapes)."""
    if not library:
        raise ValueError("the model library is empty")
    if any(not name or "\n" in name for name, _ in constants):
        raise ValueError("constant names must be non-empty and on one line")
    plan = Plan(name="forward")
    data = bytearray()
    for _, tensor in constants:
        data += bytes(-len(data) % _ALIGNMENT)
        spec = TensorSpec(dtype=_dtype_code(tensor), sizes=list(tensor.shape), data_segment=0, data_offset=len(data))
        data += tensor.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes()
        plan.values.append(TensorValue(spec))
    planned = 0
    for group, tensors in ((plan.inputs, inputs), (plan.outputs, outputs)):
        for tensor in tensors:
            planned += -planned % _ALIGNMENT
            spec = TensorSpec(dtype=_dtype_code(tensor), sizes=list(tensor.shape), mem_id=0, mem_offset=planned)
            planned += nbytes(spec.dtype, spec.sizes)
            group.append(len(plan.values))
            plan.values.append(TensorValue(spec))
    plan.buffer_sizes = [planned]
    metadata = {
        "aoti_library_segment": "1",
        "aoti_library_bytes": str(len(library)),
        "aoti_torch_version": torch_version,
        "aoti_cuda_archs": ",".join(cuda_archs),
        "aoti_constants": "\n".join(name for name, _ in constants),
    }
    return serialize(ProgramSpec(plans=[plan], segments=[bytes(data), bytes(library)], metadata=metadata))


def shim_library() -> Path:
    """The installed libaoti_cuda_shims.so, which defines every aoti_torch_* function a model
    library may call."""
    import executorch

    return Path(executorch.__file__).parent / "backends" / "cuda" / "libaoti_cuda_shims.so"


def missing_shims(library: bytes) -> list[str]:
    """The aoti_torch_* functions a model library calls that the shim library does not define: each
    one an operator (or a service of the generated code) that no AOTI payload can run here. Needs
    pyelftools (executorch[tools])."""
    try:
        from executorch.tools.symcheck import read_elf, read_shared_object
    except ImportError as e:
        raise ImportError("missing_shims reads the libraries with pyelftools: pip install 'executorch[tools]'") from e

    try:
        needed = {name for name in read_elf(io.BytesIO(library), "model").undefined if name.startswith("aoti_torch_")}
    except Exception as e:  # pyelftools raises its own errors on bytes that are no ELF object
        raise ValueError(f"the model library is no ELF shared object: {e}") from e
    defined = read_shared_object(shim_library(), shim_library().name).dynsym
    return sorted(needed - set(defined))
