"""How the build under test was configured, as the test targets pass it in the environment."""

import os


def env_flag(name: str) -> bool:
    value = os.environ.get(name)
    assert value in ("0", "1"), f"{name} must be set to 0 or 1 by the test target, got {value!r}"
    return value == "1"


def preload_cuda_runtime() -> None:
    """Loads the CUDA runtime named by $EXECUTORCH_CUDART, if set, before executorch is imported.

    Tests import executorch from Bazel's runfiles, where no site-packages/nvidia/cu13/lib sits next
    to it; a library already loaded under the soname libcudart.so.13 satisfies the NEEDED entry.
    """
    path = os.environ.get("EXECUTORCH_CUDART")
    if path:
        import ctypes

        ctypes.CDLL(os.path.abspath(path), mode=ctypes.RTLD_GLOBAL)
