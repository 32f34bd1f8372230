"""CPU latency of the executorch runtime against torch eager: our CPU kernels, and our XNNPACK
delegate (export(backend="xnnpack")).

    python bench/cpu.py [--models zoo|real|more] [--threads N] [--batches 1,8] [--repeat 50] [--json out.json]
                        [--upstream /path/to/upstream-venv/bin/python]

--models zoo (default) runs the four test models at each --batches; real runs the torchvision,
transformers and timm models of tests/models/real.py (their example inputs, batch 1); more adds the
further models there. Both runtimes run the same model on the same inputs with the same thread
count, in one process; each number is the median of --repeat timed runs after warm-up. The ratio is
ours / torch (below 1: faster); the slowest ratios are listed last. Needs torch (and torchvision,
transformers, timm for real) and an installed executorch (the wheel, or the package on PYTHONPATH).

--upstream (real and more only) also runs PyTorch's ExecuTorch on the same models, through
bench/upstream.py in the interpreter given (an environment of its own; that file says how to make
one), with its XNNPACK delegate and with its portable kernels, and adds ratios: our XNNPACK
delegate / theirs, and our CPU kernels / their portable kernels.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.models, bench.timing
from executorch.export import export  # noqa: E402
from executorch.runtime import Runtime  # noqa: E402
from bench.timing import median_ms  # noqa: E402


def cases(which: str, batches: list[int]) -> Iterator[tuple[str, int, Callable[[], tuple[Any, tuple]]]]:
    if which == "zoo":
        from tests.models.zoo import MODELS

        for name, factory in MODELS.items():
            for batch in batches:
                yield name, batch, lambda f=factory, b=batch: f(b)
        return
    from tests.models.real import MODELS, MORE_MODELS

    for name, factory in {**MODELS, **(MORE_MODELS if which == "more" else {})}.items():
        yield name, 1, factory


def upstream_rows(python: str, names: list[str], threads: int, repeat: int) -> dict[str, dict]:
    """bench/upstream.py's rows by model, run in the upstream environment's interpreter."""
    script = Path(__file__).resolve().parent / "upstream.py"
    cmd = [python, str(script), "--threads", str(threads), "--repeat", str(repeat), *names]
    # Its own package only: ours (on PYTHONPATH here, say) has the same name.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, env=env)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {r["model"]: r for r in rows}


def _cell(value: float | None, width: int, fmt: str) -> str:
    return (format(value, fmt) if value is not None else "failed").rjust(width)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", choices=("zoo", "real", "more"), default="zoo")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--upstream", help="interpreter of an environment holding upstream ExecuTorch")
    args = parser.parse_args()
    if args.upstream and args.models == "zoo":
        parser.error("--upstream runs the real models: add --models real or more")

    torch.set_num_threads(args.threads)
    Runtime.get().set_num_threads(args.threads)
    rows = []
    for name, batch, factory in cases(args.models, [int(b) for b in args.batches.split(",")]):
        model, inputs = factory()
        method = Runtime.get().load_program(export(model, inputs)).load_method("forward")
        program = Runtime.get().load_program(export(model, inputs, backend="xnnpack"))
        xnn_method = program.load_method("forward")
        arrays = [x.numpy() for x in inputs]
        # Ours first: torch's OpenMP workers spin for a while after each of its calls and would
        # take our threads' cores.
        ours_out = method.execute(arrays)[0]
        ours = median_ms(lambda: method.execute(arrays), args.repeat)
        xnn_out = xnn_method.execute(arrays)[0]
        xnn = median_ms(lambda: xnn_method.execute(arrays), args.repeat)
        with torch.no_grad():
            ref = torch.utils._pytree.tree_leaves(model(*inputs))[0]
            eager = median_ms(lambda: model(*inputs), args.repeat)
        err = max(float((torch.from_numpy(o) - ref).abs().max()) for o in (ours_out, xnn_out))
        rows.append({"model": name, "batch": batch, "threads": args.threads, "ours_ms": ours, "torch_ms": eager,
                     "ratio": ours / eager, "xnn_ms": xnn, "xnn_calls": int(program.metadata("xnnpack_delegate_calls")),
                     "ratio_xnn_torch": xnn / eager, "max_abs_err": err})
        print(f"{name:28} {batch:5d} {ours:10.3f} {xnn:10.3f} {eager:10.3f} {err:10.2e}", flush=True)
    if args.upstream:
        theirs = upstream_rows(args.upstream, [r["model"] for r in rows], args.threads, args.repeat)
        for r in rows:
            up = theirs.get(r["model"], {})
            for kind, ours_key in (("xnnpack", "xnn_ms"), ("portable", "ours_ms")):
                entry = up.get(kind, {"error": "not run"})
                r[f"{kind}_ms"] = entry.get("ms")
                r[f"ratio_{kind}"] = r[ours_key] / entry["ms"] if entry.get("ms") else None
                if not entry.get("ms"):
                    r[f"{kind}_error"] = entry.get("error")
    up_head = f" {'xnnpack ms':>10} {'/xnnpack':>8} {'portable ms':>11} {'/portable':>9}" if args.upstream else ""
    print(f"\n{'model':28} {'batch':>5} {'ours ms':>10} {'torch ms':>10} {'ratio':>7} {'xnn ms':>10} {'calls':>5} "
          f"{'xnn/torch':>9} {'max |err|':>10}" + up_head)
    for r in rows:
        line = (f"{r['model']:28} {r['batch']:5d} {r['ours_ms']:10.3f} {r['torch_ms']:10.3f} {r['ratio']:7.2f} "
                f"{r['xnn_ms']:10.3f} {r['xnn_calls']:5d} {r['ratio_xnn_torch']:9.2f} {r['max_abs_err']:10.2e}")
        if args.upstream:
            line += (f" {_cell(r['xnnpack_ms'], 10, '.3f')} {_cell(r['ratio_xnnpack'], 8, '.2f')}"
                     f" {_cell(r['portable_ms'], 11, '.3f')} {_cell(r['ratio_portable'], 9, '.2f')}")
        print(line)
    print(f"\n{len(rows)} cases; CPU kernels: " + summary(rows, "ratio", "torch"))
    print("our XNNPACK delegate: " + summary(rows, "ratio_xnn_torch", "torch"))
    if args.upstream:
        for kind in ("xnnpack", "portable"):
            failed = [r["model"] for r in rows if r[f"ratio_{kind}"] is None]
            print(f"upstream {kind} (ours: {'XNNPACK delegate' if kind == 'xnnpack' else 'CPU kernels'}): " + summary([r for r in rows if r[f"ratio_{kind}"] is not None], f"ratio_{kind}",
                                                  kind) + (f"; it failed on {', '.join(failed)}" if failed else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


def summary(rows: list[dict], key: str, what: str) -> str:
    if not rows:
        return f"no ratio to {what}"
    ratios = sorted(r[key] for r in rows)
    slowest = ", ".join(f"{r['model']} {r[key]:.2f}" for r in sorted(rows, key=lambda r: -r[key])[:3])
    return f"ours / {what} over {len(rows)}: median {ratios[len(ratios) // 2]:.2f}; slowest {slowest}"


if __name__ == "__main__":
    sys.exit(main())
