"""executorch: a compact on-device inference runtime with a CUDA delegate in its own library."""

__version__ = "0.1.0"
