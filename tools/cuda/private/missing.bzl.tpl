"""Targets of @local_cuda where no CUDA toolkit was found: each fails at analysis, saying what to do."""

def _impl(ctx):
    fail("No CUDA toolkit was found (%{origin}). Set CUDA_PATH, or pip install nvidia-cuda-nvcc " +
         "nvidia-cuda-runtime nvidia-cuda-crt nvidia-nvvm nvidia-cuda-cccl into the build's Python, " +
         "or build without the CUDA delegate: --//:cuda=False.")

missing_toolkit = rule(implementation = _impl)
