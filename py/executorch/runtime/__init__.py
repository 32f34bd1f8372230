"""The runtime, as seen from Python: the backend registry of the one shared runtime library."""

from __future__ import annotations

from executorch import _C


def registered_backends() -> list[str]:
    """Names of the registered backends, in registration order (e.g. ["CudaBackend"])."""
    return list(_C.registered_backends())


def is_available(name: str) -> bool:
    """Whether backend `name` can run here; raises KeyError when no such backend is registered."""
    return bool(_C.is_available(name))


__all__ = ["registered_backends", "is_available"]
