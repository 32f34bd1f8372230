"""Prints the root of the CUDA toolkit wheels (nvidia/cu13 with bin/nvcc) of the interpreter running it, if any."""
import os
import sys

try:
    import nvidia
except ImportError:
    sys.exit(0)
for base in nvidia.__path__:
    root = os.path.join(base, "cu13")
    if os.path.exists(os.path.join(root, "bin", "nvcc")):
        print(root)
        break
