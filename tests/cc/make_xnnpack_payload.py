"""Writes an XnnpackBackend payload and its reference, for xnnpack_backend_test:

    make_xnnpack_payload OUT.pte OUT.bin

The payload (a program of its own, as the exporter writes delegate payloads) computes
out = relu(x @ w1 + b1) @ w2 + x for x [3, 8] with constant weights (hidden width 16). OUT.bin holds
x, then out computed in float64 with numpy, both as float32.
"""

from __future__ import annotations

import sys

import numpy as np

from executorch.serialization import pte
from executorch.serialization.pte import IntValue, KernelCall, Plan, ProgramSpec, TensorSpec, TensorValue

FLOAT = 6  # ScalarType code of float32


def payload(w1: np.ndarray, b1: np.ndarray, w2: np.ndarray) -> bytes:
    rows, width, hidden = 3, w1.shape[0], w1.shape[1]
    constants = w1.tobytes() + b1.tobytes() + w2.tobytes()

    def planned(sizes: list[int], offset: int) -> TensorValue:
        return TensorValue(TensorSpec(dtype=FLOAT, sizes=sizes, mem_id=0, mem_offset=offset))

    def constant(a: np.ndarray, offset: int) -> TensorValue:
        return TensorValue(TensorSpec(dtype=FLOAT, sizes=list(a.shape), data_segment=0, data_offset=offset))

    p = Plan(name="forward", operators=[("aten::addmm", ""), ("aten::relu", ""), ("aten::mm", ""),
                                         ("aten::add", "Tensor")], buffer_sizes=[1024])
    p.values = [
        planned([rows, width], 0),                          # 0: x
        constant(w1, 0),                                    # 1: w1 [in, out], as the exporter folds it
        constant(b1, w1.nbytes),                            # 2: b1
        IntValue(1),                                        # 3: beta, alpha
        planned([rows, hidden], 128),                       # 4: h
        planned([rows, hidden], 384),                       # 5: relu(h)
        constant(w2, w1.nbytes + b1.nbytes),                # 6: w2
        planned([rows, width], 640),                        # 7: relu(h) @ w2
        planned([rows, width], 768),                        # 8: out
    ]
    p.inputs, p.outputs = [0], [8]
    p.instructions = [KernelCall(0, [2, 0, 1, 3, 3, 4]), KernelCall(1, [4, 5]), KernelCall(2, [5, 6, 7]),
                      KernelCall(3, [7, 0, 3, 8])]
    return pte.serialize(ProgramSpec(plans=[p], segments=[constants], metadata={"producer": "make_xnnpack_payload"}))


def main() -> int:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    w1 = rng.standard_normal((8, 16)).astype(np.float32)
    b1 = rng.standard_normal(16).astype(np.float32)
    w2 = rng.standard_normal((16, 8)).astype(np.float32)
    h = np.maximum(x.astype(np.float64) @ w1 + b1, 0)
    out = h @ w2 + x
    with open(sys.argv[1], "wb") as f:
        f.write(payload(w1, b1, w2))
    with open(sys.argv[2], "wb") as f:
        f.write(x.tobytes() + out.astype(np.float32).tobytes())
    return 0


if __name__ == "__main__":
    sys.exit(main())
