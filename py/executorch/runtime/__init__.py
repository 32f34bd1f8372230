"""The runtime, from Python: load programs, run methods, query the backend registry.

    from executorch.runtime import Runtime
    program = Runtime.get().load_program("model.pte")      # or the bytes of one
    method = program.load_method("forward")
    outputs = method.execute([np.random.rand(1, 3, 32, 32).astype(np.float32)])

Inputs are numpy arrays (torch tensors work too, without a copy on the CPU) or Python numbers;
outputs are numpy arrays, or torch tensors when the inputs were. bfloat16, which numpy lacks, takes
torch tensors, or numpy int16/uint16 arrays of its bits (outputs then come back as float32, exactly).
Failures raise ExecutorchError
(a RuntimeError) carrying the runtime's message; a missing method raises KeyError.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Sequence

import numpy as np

from executorch import _C

ExecutorchError = _C.ExecutorchError


def registered_backends() -> list[str]:
    """Names of the registered backends, in registration order (e.g. ["CudaBackend"])."""
    return list(_C.registered_backends())


def is_available(name: str) -> bool:
    """Whether backend `name` can run here; raises KeyError when no such backend is registered."""
    return bool(_C.is_available(name))


def _is_torch_tensor(x: Any) -> bool:
    # Checked by type name: the runtime never imports torch itself.
    return type(x).__module__.startswith("torch") and type(x).__name__ in ("Tensor", "Parameter")


_DTYPE_NAMES: dict[Any, str] = {}


def _dtype_name(dtype: Any) -> str:
    """"float16" for torch.float16: the runtime's name of a torch dtype."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).removeprefix("torch.")
    return name


def _device_input(x: Any) -> tuple[str, int, str, Any, int]:
    """A torch CUDA tensor (contiguous) as the binding takes a device input."""
    return ("device", x.data_ptr(), _dtype_name(x.dtype), x.shape, x.device.index)


def _torch() -> Any:
    import torch  # present: the caller passed torch tensors

    return torch


def _as_torch(output: Any, device: Any) -> Any:
    """An output from host memory as torch hands it back: a tensor (on `device` when not None)."""
    torch = _torch()
    if isinstance(output, tuple):  # bfloat16's bits
        output = torch.from_numpy(output[1]).view(torch.bfloat16)
    elif isinstance(output, np.ndarray):
        output = torch.from_numpy(output)
    return output.to(device) if device is not None and isinstance(output, torch.Tensor) else output


class Method:
    """A loaded method of a program. Not thread-safe: load one per thread."""

    def __init__(self, method: Any) -> None:
        self._method = method
        self._layout: tuple[list[bool], list[Any]] | None = None
        self._torch_outputs: list[Any] | None = None  # (shape, torch dtype) of each device output

    @property
    def name(self) -> str:
        return self._method.name

    @property
    def num_inputs(self) -> int:
        return self._method.num_inputs

    @property
    def num_outputs(self) -> int:
        return self._method.num_outputs

    def input_meta(self) -> list[tuple[str, Any]]:
        """(dtype name, shape) of each tensor input; ("scalar", value) for number inputs."""
        return [(kind, list(v) if isinstance(v, list) else v) for kind, v in self._method.input_meta()]

    def output_meta(self) -> list[tuple[str, list[int]] | None]:
        """(dtype name, shape) of each output as the program plans it; None for a non-tensor output."""
        return [None if m is None else (m[0], list(m[1])) for m in self._device_layout()[1]]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        """Runs the method. Torch tensors in give torch tensors out; numpy arrays, numpy arrays.

        Torch CUDA tensors are handed to the delegates in place where only delegates read them,
        and the outputs are then torch tensors on that device, filled in place where only
        delegates write them. Delegates run on torch's current stream there, so the call neither
        waits for the work before it nor makes the caller wait (as a torch operator would).
        """
        fast = self._execute_device_tensors(inputs)
        if fast is not None:
            return fast
        as_torch = any(_is_torch_tensor(x) for x in inputs)
        arrays: list[Any] = []
        bf16: list[int] = []
        keep: list[Any] = []  # device inputs stay alive until execute returns
        meta: list[tuple[str, Any]] | None = None
        device = next((x.device for x in inputs if _is_torch_tensor(x) and x.is_cuda), None)
        on_device = self._device_layout()[0] if device is not None else []
        for i, x in enumerate(inputs):
            if _is_torch_tensor(x):
                x = x.detach()
                if x.is_cuda and on_device[i] and x.device == device:
                    x = x.contiguous()
                    keep.append(x)
                    arrays.append(_device_input(x))
                    continue
                x = x.cpu()
                if str(x.dtype) == "torch.bfloat16":  # numpy has no bfloat16: hand over its bits
                    x = x.view(_torch().int16)
                    bf16.append(i)
                x = x.numpy()
            elif isinstance(x, np.ndarray) and x.dtype in (np.int16, np.uint16):
                meta = meta if meta is not None else self.input_meta()
                if i < len(meta) and meta[i][0] == "bfloat16":  # bfloat16 bits, as numpy holds them
                    x = x.view(np.int16)
                    bf16.append(i)
            arrays.append(x)
        if device is None:
            outputs = self._method.execute(arrays, bf16)
        else:
            outputs = self._execute_on(device, arrays, bf16)
        if as_torch:
            return [_as_torch(o, device) for o in outputs]
        # bfloat16 outputs widen to float32, exactly.
        return [(o[1].view(np.uint16).astype(np.uint32) << 16).view(np.float32) if isinstance(o, tuple) else o
                for o in outputs]

    def _device_layout(self) -> tuple[list[bool], list[Any]]:
        """Which inputs may be device tensors, and each output's (dtype, shape, may be on the
        device): fixed by the program, asked once."""
        if self._layout is None:
            self._layout = (self._method.inputs_on_device(), self._method.output_meta())
        return self._layout

    def _execute_device_tensors(self, inputs: Sequence[Any], defer_index_checks: bool = False) -> list[Any] | None:
        """execute() where every input is a contiguous torch tensor on one CUDA device that the
        program reads on the device, the steady state of a GPU pipeline: the same call as the
        general path, with what the program fixes looked up once. None where that does not hold.
        defer_index_checks: the call returns once its work is queued, and an index out of range
        that its kernels meet is reported by the method's next call (for a caller whose indices
        are in range by construction)."""
        torch = sys.modules.get("torch")
        if torch is None or not inputs:
            return None
        on_device = self._device_layout()[0]
        first = inputs[0]
        if type(first) is not torch.Tensor or not first.is_cuda or len(inputs) != len(on_device):
            return None
        device = first.device
        arrays: list[Any] = []
        for i, x in enumerate(inputs):
            if type(x) is not torch.Tensor or not on_device[i] or x.device != device or not x.is_contiguous():
                return None
            arrays.append(_device_input(x))
        return [_as_torch(o, device) for o in self._execute_on(device, arrays, [], defer_index_checks)]

    def _execute_on(self, device: Any, arrays: list[Any], bf16: list[int], defer_index_checks: bool = False) -> list[Any]:
        """execute() with torch CUDA tensors: device outputs allocated by torch, torch's stream."""
        torch = _torch()
        if self._torch_outputs is None:
            self._torch_outputs = [None if m is None or not m[2] else (tuple(m[1]), getattr(torch, m[0]))
                                   for m in self._device_layout()[1]]
        buffers = {i: torch.empty(m[0], dtype=m[1], device=device) for i, m in enumerate(self._torch_outputs)
                   if m is not None}
        raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what current_stream() wraps
        stream = raw_stream(device.index) if raw_stream else torch.cuda.current_stream(device).cuda_stream
        outputs = self._method.execute(arrays, bf16, {i: (t.data_ptr(), device.index) for i, t in buffers.items()},
                                       stream, defer_index_checks)
        return [buffers.get(i, o) for i, o in enumerate(outputs)]

    __call__ = execute


class State:
    """A program's mutable buffers (a language model's key/value cache): the methods loaded with it
    update them in place and see each other's updates; they are kept between calls."""

    def __init__(self, state: Any) -> None:
        self._state = state

    @property
    def buffer_names(self) -> list[str]:
        return list(self._state.buffer_names)

    def read(self, name: str) -> bytes:
        """The current bytes of mutable buffer `name` (KeyError if the program has none such)."""
        return bytes(self._state.read(name))

    def reset(self) -> None:
        """Every buffer back to its initial contents."""
        self._state.reset()


class Program:
    """A loaded program; its methods share its constants."""

    def __init__(self, program: Any) -> None:
        self._program = program

    @property
    def method_names(self) -> list[str]:
        return list(self._program.method_names)

    def new_state(self) -> State:
        """A fresh copy of the program's mutable buffers, for load_method(..., state=)."""
        return State(self._program.new_state())

    def load_method(self, name: str = "forward", state: State | None = None) -> Method:
        """Method `name`. It updates `state` (from new_state(), shared with the other methods
        loaded with it), or a state of its own when None."""
        return Method(self._program.load_method(name, state._state if state is not None else None))

    def metadata(self, key: str) -> str | None:
        return self._program.metadata(key)


class Runtime:
    """The process's runtime: one backend registry, one kernel registry, one thread pool."""

    _instance: Runtime | None = None

    @classmethod
    def get(cls) -> Runtime:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def load_program(self, source: bytes | bytearray | memoryview | str | os.PathLike[str]) -> Program:
        """Loads a .pte from a path (memory-mapped) or from its bytes (copied)."""
        if isinstance(source, (bytes, bytearray, memoryview)):
            return Program(_C.load_program_bytes(bytes(source)))
        return Program(_C.load_program_file(os.fspath(source)))

    @property
    def registered_backends(self) -> list[str]:
        return registered_backends()

    def is_available(self, name: str) -> bool:
        return is_available(name)

    @property
    def num_threads(self) -> int:
        return int(_C.num_threads())

    @property
    def max_planned_bytes(self) -> int | None:
        """The most bytes a loaded method may allocate for its planned memory (and a program state,
        or CudaBackend for its device memory); larger programs are refused at load with both sizes
        named. None: no limit. Starts from EXECUTORCH_MAX_PLANNED_BYTES."""
        return int(_C.max_planned_bytes()) or None

    @max_planned_bytes.setter
    def max_planned_bytes(self, limit: int | None) -> None:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit <= 0):
            raise ValueError(f"max_planned_bytes must be a positive number of bytes or None, got {limit!r}")
        if limit is not None and limit >= 1 << 64:
            raise ValueError(f"max_planned_bytes={limit} does not fit in 64 bits")
        _C.set_max_planned_bytes(limit or 0)

    # More threads than this is a mistake, not a configuration (the system refuses them anyway).
    MAX_THREADS = 1024

    def set_num_threads(self, threads: int) -> None:
        """Resizes the CPU thread pool (0: back to the CPU count or EXECUTORCH_NUM_THREADS)."""
        if not 0 <= threads <= self.MAX_THREADS:
            raise ValueError(f"set_num_threads({threads}): the pool takes 0 (the default) to {self.MAX_THREADS} threads")
        _C.set_num_threads(threads)


__all__ = ["ExecutorchError", "Method", "Program", "Runtime", "is_available", "registered_backends"]
