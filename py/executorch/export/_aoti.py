"""AOTInductor payloads for CudaBackend (docs/program_format.md, "AOTInductor payloads").

A payload is a program of its own: its one method declares the model's inputs and outputs (planned
memory) and constants (constant data, in the order the metadata names them), and its metadata
names the segment holding the model library PyTorch's AOT compile made, that library's size, the
torch that made it and the GPU architectures its kernels are built for. The runtime's program
checks (segment bounds, the verifier) then apply to the payload as to any .pte.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Sequence

import torch

from executorch.export._dtypes import nbytes
from executorch.export._errors import ExportError
from executorch.serialization.pte import Delegate, DelegateCall, Plan, ProgramSpec, TensorSpec, TensorValue, serialize

_ALIGNMENT = 16


def _dtype_code(t: torch.Tensor) -> int:
    from executorch.export._export import DTYPE_CODES

    if t.dtype not in DTYPE_CODES:
        raise ValueError(f"tensor of dtype {t.dtype}: not a dtype the program format holds")
    return DTYPE_CODES[t.dtype]


def _plan_in_memory(plan: Plan, group: list[int], tensors: Sequence[torch.Tensor], planned: int) -> int:
    """Appends a value in planned memory (mem_id 0, 16-byte aligned from `planned` on) for each
    tensor's dtype and shape, its index to `group`; returns the bytes planned so far."""
    for tensor in tensors:
        planned += -planned % _ALIGNMENT
        spec = TensorSpec(dtype=_dtype_code(tensor), sizes=list(tensor.shape), mem_id=0, mem_offset=planned)
        planned += nbytes(spec.dtype, spec.sizes)
        group.append(len(plan.values))
        plan.values.append(TensorValue(spec))
    return planned


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
    plan.buffer_sizes = [_plan_in_memory(plan, plan.outputs, outputs, _plan_in_memory(plan, plan.inputs, inputs, 0))]
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
    shims = shim_library()
    defined = read_shared_object(shims, shims.name).dynsym
    return sorted(needed - set(defined))


def aoti_program(payload: bytes, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor], *,
                 method_name: str = "forward", metadata: dict[str, str] | None = None) -> bytes:
    """A program whose method is one CudaBackend call running `payload` (aoti_payload's bytes), as
    export(compiler="aoti") writes it: the inputs only the delegate reads (so they may be handed over
    on the device), the outputs in planned host memory."""
    plan = Plan(name=method_name)
    for tensor in inputs:
        plan.inputs.append(len(plan.values))
        plan.values.append(TensorValue(TensorSpec(dtype=_dtype_code(tensor), sizes=list(tensor.shape), device=1)))
    plan.buffer_sizes = [_plan_in_memory(plan, plan.outputs, outputs, 0)]
    plan.delegates.append(Delegate(backend_id="CudaBackend", segment=1))
    plan.instructions.append(DelegateCall(0, plan.inputs + plan.outputs))
    meta = {"producer": "executorch.export", "torch_version": torch.__version__, "cuda_delegate_calls": "1",
            "compiler": "aoti", **(metadata or {})}
    return serialize(ProgramSpec(plans=[plan], segments=[b"", payload], metadata=meta))


# AOTInductor's options for a library that needs no libtorch: kernels embedded, constants left out
# (the payload carries them), matrix products and convolutions from Triton templates (extern ones
# would call fallbacks), as upstream ExecuTorch's CUDA backend compiles.
AOTI_OPTIONS = {
    "aot_inductor.link_libtorch": False,
    "aot_inductor.embed_kernel_binary": True,
    "aot_inductor.package": True,
    "aot_inductor.package_constants_in_so": False,
    "aot_inductor.package_constants_on_disk_format": "binary_blob",
    "max_autotune": True,
    "max_autotune_gemm_backends": "TRITON",
    "max_autotune_conv_backends": "TRITON",
}


# Run in a process of its own: the library (link_libtorch=False) resolves aoti_torch_* in the global
# scope, where libtorch is not (Python loads it RTLD_LOCAL). Made global here, libtorch would also
# win over libaoti_cuda_shims.so for every payload this process loads later.
_CONSTANT_FQNS = """
import ctypes, json, os, sys
import torch
for name in ("libtorch_cpu.so", "libtorch_cuda.so"):
    ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", name), mode=os.RTLD_GLOBAL | os.RTLD_NOLOAD)
runner = torch._C._aoti.AOTIModelContainerRunnerCuda(sys.argv[1], 1, "cuda")
print(json.dumps(runner.get_constant_names_to_original_fqns()))
"""


def constant_fqns(library_path: str) -> dict[str, str]:
    """The generated library's constants: its name for each, to the module's name (state dict key),
    read by torch's own container runner."""
    out = subprocess.run([sys.executable, "-c", _CONSTANT_FQNS, library_path], capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        raise ExportError(f"torch could not load the library AOTInductor made: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def export_aoti(module: torch.nn.Module, example_inputs: Sequence[torch.Tensor], *, method_name: str = "forward",
                metadata: dict[str, str] | None = None) -> bytes:
    """export(backend="cuda", compiler="aoti"): `module` (already in its dtype, eval mode) compiled
    whole by AOTInductor on this machine's GPU into one CudaBackend payload. Needs torch 2.11 with
    CUDA and Triton, and pyelftools."""
    release = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    if release != "2.11":
        raise ExportError(f"compiler='aoti' needs torch 2.11 (the shims serve its generated code); this is "
                          f"torch {torch.__version__}")
    if not torch.cuda.is_available():
        raise ExportError("compiler='aoti' compiles on a CUDA device, and this machine has none")
    if any(not isinstance(x, torch.Tensor) for x in example_inputs):
        raise ExportError("compiler='aoti' takes tensor inputs only")
    from torch.nn.attention import SDPBackend, sdpa_kernel

    device_module = module.to("cuda")
    device_inputs = tuple(x.to("cuda") for x in example_inputs)
    with torch.no_grad(), sdpa_kernel([SDPBackend.MATH]):  # attention decomposed, not a fallback
        ep = torch.export.export(device_module, device_inputs)
        files = torch._inductor.aot_compile(ep.module(), device_inputs, options=dict(AOTI_OPTIONS))
        outputs = device_module(*device_inputs)
    outputs = [outputs] if isinstance(outputs, torch.Tensor) else list(torch.utils._pytree.tree_leaves(outputs))
    if any(not isinstance(o, torch.Tensor) for o in outputs):
        raise ExportError("compiler='aoti' gives tensor outputs only")
    library_path = next((str(f) for f in (files if isinstance(files, (list, tuple)) else [files])
                         if str(f).endswith(".so")), None)
    if library_path is None:
        raise ExportError(f"AOTInductor made no library: {files}")
    with open(library_path, "rb") as f:
        library = f.read()
    missing = missing_shims(library)
    if missing:
        raise ExportError(f"the compiled model calls {', '.join(missing)}, which libaoti_cuda_shims.so does not "
                          "define: an operator that needs such a fallback cannot run through an AOTI payload")
    state = {**ep.state_dict, **ep.constants}
    constants = []
    for name, fqn in constant_fqns(library_path).items():
        if fqn not in state:
            raise ExportError(f"the compiled model's constant {name!r} ({fqn!r}) is none of the module's tensors")
        constants.append((name, state[fqn]))
    major, minor = torch.cuda.get_device_capability()
    payload = aoti_payload(library, constants, list(example_inputs), outputs, torch.__version__,
                           [f"sm_{major}{minor}"])
    return aoti_program(payload, list(example_inputs), outputs, method_name=method_name, metadata=metadata)
