"""CPU latency of the executorch runtime against torch eager on the test models.

    python bench/cpu.py [--threads N] [--batches 1,8] [--repeat 50] [--json out.json]

Both run the same model on the same inputs with the same thread count, in one process; each number
is the median of --repeat timed runs after warm-up. The ratio is ours / torch (below 1: faster).
Needs torch and an installed executorch (the wheel, or the package on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.models, bench.timing
from executorch.export import export  # noqa: E402
from executorch.runtime import Runtime  # noqa: E402
from bench.timing import median_ms  # noqa: E402
from tests.models.zoo import MODELS  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--json", help="also write the rows here")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    Runtime.get().set_num_threads(args.threads)
    rows = []
    for name, factory in MODELS.items():
        for batch in (int(b) for b in args.batches.split(",")):
            model, inputs = factory(batch)
            method = Runtime.get().load_program(export(model, inputs)).load_method("forward")
            arrays = [x.numpy() for x in inputs]
            with torch.no_grad():
                ref = model(*inputs)
                eager = median_ms(lambda: model(*inputs), args.repeat)
            ours_out = method.execute(arrays)[0]
            ours = median_ms(lambda: method.execute(arrays), args.repeat)
            err = float((torch.from_numpy(ours_out) - ref).abs().max())
            rows.append({"model": name, "batch": batch, "threads": args.threads, "ours_ms": ours, "torch_ms": eager,
                         "ratio": ours / eager, "max_abs_err": err})
    print(f"{'model':10} {'batch':>5} {'ours ms':>10} {'torch ms':>10} {'ratio':>7} {'max |err|':>10}")
    for r in rows:
        print(f"{r['model']:10} {r['batch']:5d} {r['ours_ms']:10.3f} {r['torch_ms']:10.3f} {r['ratio']:7.2f} {r['max_abs_err']:10.2e}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
