"""Writes the corpus of broken programs derived from the test models (see malformed.py).

    make_corpus OUT.bin
    make_corpus --seeds DIR      # the valid programs themselves, as a fuzzer's seed corpus
    make_corpus --payloads DIR   # their CUDA delegate payloads (programs of their own)

The models are exported for the CPU and with backend="cuda" (whose payloads are then lied about).
Without torch, a small hand-written program stands in for them.
"""

from __future__ import annotations

import os
import sys

import numpy as np

from executorch.serialization import pte
from executorch.serialization.pte import IntValue, KernelCall, Plan, ProgramSpec, TensorListValue, TensorSpec, TensorValue
from tests.hostile.malformed import cases, write_corpus


def hand_written() -> bytes:
    """out = cat([h, h]) with h = relu(x @ w): a constant, an input, a tensor list, planned memory."""
    w = np.arange(16, dtype=np.float32).reshape(4, 4) / 16
    p = Plan(name="forward", operators=[("aten::mm", ""), ("aten::relu", ""), ("aten::cat", "")], buffer_sizes=[256])
    p.values = [
        TensorValue(TensorSpec(dtype=6, sizes=[1, 4], mem_id=0, mem_offset=0)),
        TensorValue(TensorSpec(dtype=6, sizes=[4, 4], data_segment=0, data_offset=0)),
        TensorValue(TensorSpec(dtype=6, sizes=[1, 4], mem_id=0, mem_offset=64)),
        TensorValue(TensorSpec(dtype=6, sizes=[1, 4], mem_id=0, mem_offset=128)),
        TensorListValue([3, 3]),
        IntValue(0),
        TensorValue(TensorSpec(dtype=6, sizes=[2, 4], mem_id=0, mem_offset=192)),
    ]
    p.inputs, p.outputs = [0], [6]
    p.instructions = [KernelCall(0, [0, 1, 2]), KernelCall(1, [2, 3]), KernelCall(2, [4, 5, 6])]
    return pte.serialize(ProgramSpec(plans=[p], segments=[w.tobytes()], metadata={"producer": "make_corpus"}))


def programs() -> dict[str, bytes]:
    out = {"hand_written": hand_written()}
    try:
        import torch  # noqa: F401
    except ImportError:
        print("make_corpus: torch is not installed; only the hand-written program is used", file=sys.stderr)
        return out
    from executorch.export import export
    from tests.models.zoo import MODELS, cnn, counter, mlp, partly_delegated

    for name, make in sorted(MODELS.items()):
        model, example = make()
        out[name] = export(model, example)
        out[name + "_cuda"] = export(model, example, backend="cuda")
    # int8 linear layers: the CPU kernel, and CudaBackend's.
    model, example = MODELS["mlp"]()
    out["mlp_int8"] = export(model, example, quantize="int8")
    out["mlp_int8_cuda"] = export(model, example, backend="cuda", quantize="int8")
    # Two delegate calls (two payload segments) and a CPU kernel between them.
    model, example = partly_delegated()
    out["partly_delegated_cuda"] = export(model, example, backend="cuda")
    # Program state (mutable buffers): kept by the CPU, or on the device by the payload's names.
    model, example = counter()
    out["counter"] = export(model, example)
    out["counter_cuda"] = export(model, example, backend="cuda")
    # Bounded dynamic shapes: symbols, size expressions, tensors and view sizes that follow them.
    from torch.export import Dim

    for name, make, bound in (("mlp", mlp, 8), ("cnn", cnn, 4)):
        model, example = make(batch=2)
        out[name + "_dynamic"] = export(model, example, dynamic_shapes=({0: Dim("batch", max=bound)},))
    return out


def main() -> int:
    if sys.argv[1] in ("--seeds", "--payloads"):  # a fuzzer's starting corpus, one file each
        os.makedirs(sys.argv[2], exist_ok=True)
        for name, data in programs().items():
            if sys.argv[1] == "--seeds":
                files = {name: data}
            else:  # the CUDA delegate payloads of the program
                spec = pte.deserialize(data)
                files = {f"{name}.{k}": spec.segments[d.segment] for k, d in enumerate(spec.plans[0].delegates)}
            for stem, blob in files.items():
                with open(os.path.join(sys.argv[2], stem + ".pte"), "wb") as f:
                    f.write(blob)
        return 0
    # Fewer random flips of the large programs keep the corpus in the low hundreds of megabytes.
    items = [c for name, data in programs().items() for c in cases(name, data, flips=60 if len(data) < 1 << 16 else 12)]
    write_corpus(sys.argv[1], items)
    print(f"make_corpus: {len(items)} cases ({sum(c.invalid for c in items)} invalid)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
