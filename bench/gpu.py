"""GPU latency of the CUDA delegate against torch eager (CUDA) on the test models.

    python bench/gpu.py [--batches 1,32] [--repeat 50]

Our side: the model exported with backend="cuda", run from Python with inputs in host memory
(copied to the device and back by the delegate, as a CPU caller's would be). torch's side: the same
model and weights on the GPU, inputs already on the device, synchronized after each run. Median of
--repeat runs after warm-up; ratio = ours / torch.
"""

from __future__ import annotations

import argparse
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
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    assert torch.cuda.is_available(), "needs a CUDA device"
    print(f"{'model':10} {'batch':>5} {'calls':>5} {'ours ms':>9} {'torch ms':>9} {'ratio':>6} {'max |err|':>10}")
    for name in ("mlp", "cnn", "encoder"):
        for batch in (int(b) for b in args.batches.split(",")):
            model, inputs = MODELS[name](batch)
            program = Runtime.get().load_program(export(model, inputs, backend="cuda"))
            method = program.load_method()
            arrays = [x.numpy() for x in inputs]
            gpu_model = model.cuda()
            gpu_inputs = [x.cuda() for x in inputs]

            def eager():
                with torch.no_grad():
                    gpu_model(*gpu_inputs)
                torch.cuda.synchronize()

            ours = median_ms(lambda: method.execute(arrays), args.repeat)
            theirs = median_ms(eager, args.repeat)
            with torch.no_grad():
                err = float((torch.from_numpy(method.execute(arrays)[0]) - gpu_model(*gpu_inputs).cpu()).abs().max())
            calls = program.metadata("cuda_delegate_calls")
            print(f"{name:10} {batch:5d} {calls:>5} {ours:9.3f} {theirs:9.3f} {ours / theirs:6.2f} {err:10.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
