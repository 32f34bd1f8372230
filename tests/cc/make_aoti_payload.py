"""Packs the test container library into an AOTI payload, for aoti_library_test:

    make_aoti_payload CONTAINER.so OUT.pte

The container (aoti/container.cpp) computes y = x * scale + shift; the payload gives it scale = 3
and shift = -1 as constants, and declares x and y float32 [2, 2].
"""

from __future__ import annotations

import sys

import torch

from executorch.export._aoti import aoti_payload


def main() -> int:
    library, out = sys.argv[1:3]
    with open(library, "rb") as f:
        lib = f.read()
    pte = aoti_payload(lib, [("scale", torch.tensor([3.0])), ("shift", torch.tensor([-1.0]))],
                       inputs=[torch.zeros(2, 2)], outputs=[torch.zeros(2, 2)], torch_version="2.11.0+cpu",
                       cuda_archs=["sm_90"])
    with open(out, "wb") as f:
        f.write(pte)
    return 0


if __name__ == "__main__":
    sys.exit(main())
