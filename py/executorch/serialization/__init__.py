"""The program format: an in-memory description of a program and its .pte encoding."""

from executorch.serialization.pte import (
    CONTAINER_MAGIC,
    DelegateCall,
    KernelCall,
    Plan,
    ProgramSpec,
    TensorSpec,
    Value,
    serialize,
)

__all__ = ["CONTAINER_MAGIC", "DelegateCall", "KernelCall", "Plan", "ProgramSpec", "TensorSpec", "Value", "serialize"]
