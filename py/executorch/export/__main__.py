"""python -m executorch.export FILE.py -o model.pte [--backend xnnpack|cuda|cuda,xnnpack]

FILE.py defines `get_model()` returning (module, example_inputs); the exported program is written to
the output path, delegating to the backends named (in that order), if any.
"""

from __future__ import annotations

import argparse
import runpy
import sys

from executorch.export import ExportError, export


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m executorch.export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_file", help="a Python file defining get_model() -> (module, example_inputs)")
    parser.add_argument("-o", "--output", required=True, help="where to write the .pte")
    parser.add_argument("--backend", help="backends to delegate to, in order, comma-separated: cuda, xnnpack")
    args = parser.parse_args(argv)
    namespace = runpy.run_path(args.model_file)
    if "get_model" not in namespace:
        parser.error(f"{args.model_file} defines no get_model()")
    module, example_inputs = namespace["get_model"]()
    try:
        data = export(module, example_inputs, backend=args.backend.split(",") if args.backend else None)
    except ExportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    with open(args.output, "wb") as f:
        f.write(data)
    print(f"wrote {args.output} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
