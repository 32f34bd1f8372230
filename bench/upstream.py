"""PyTorch's own ExecuTorch on the real models, for bench/cpu.py --upstream.

Runs in an environment holding upstream ExecuTorch (its package is also named executorch, so it
cannot share one with ours), for example:

    python -m venv /tmp/et-upstream
    /tmp/et-upstream/bin/pip install executorch==1.5.1 torch==2.13.0 torchvision==0.28.0 transformers timm

    /tmp/et-upstream/bin/python bench/upstream.py --threads 2 resnet18 gpt2 ...

For each model of tests/models/real.py named, it exports twice, through the XNNPACK delegate and with
the portable kernels alone, and prints one JSON object a line: the median milliseconds of each (or
the error that stopped it) and the largest difference from torch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.models, bench.timing
from bench.timing import median_ms  # noqa: E402
from tests.models.real import MODELS, MORE_MODELS  # noqa: E402


def lower(model: torch.nn.Module, inputs: tuple, xnnpack: bool) -> bytes:
    from executorch.exir import to_edge, to_edge_transform_and_lower

    program = torch.export.export(model, inputs)
    if xnnpack:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
    else:
        edge = to_edge(program)
    return edge.to_executorch().buffer


def measure(model: torch.nn.Module, inputs: tuple, ref: torch.Tensor, xnnpack: bool, repeat: int) -> dict[str, Any]:
    from executorch.runtime import Runtime

    try:
        # Upstream's program reads the buffer in place: both must outlive the method.
        buffer = lower(model, inputs, xnnpack)
        program = Runtime.get().load_program(buffer)
        method = program.load_method("forward")
        out = method.execute(list(inputs))[0]
        # The portable kernels take seconds on the larger models: time them for a few seconds at most.
        ms = median_ms(lambda: method.execute(list(inputs)), repeat, max_s=None if xnnpack else 5.0)
        return {"ms": ms, "max_abs_err": float((out.float() - ref.float()).abs().max())}
    except Exception as e:  # noqa: BLE001 - reported per model, the survey goes on
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()

    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime

    Runtime.get()  # resetting the pool before the runtime has started crashes
    if portable_lib._threadpool_get_thread_count() != args.threads:
        portable_lib._unsafe_reset_threadpool(args.threads)
    torch.set_num_threads(args.threads)
    for name in args.models:
        model, inputs = {**MODELS, **MORE_MODELS}[name]()
        with torch.no_grad():
            ref = torch.utils._pytree.tree_leaves(model(*inputs))[0]
        row = {"model": name, "xnnpack": measure(model, inputs, ref, True, args.repeat),
               "portable": measure(model, inputs, ref, False, args.repeat)}
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
