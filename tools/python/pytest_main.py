"""Entry point of py_pytest tests: runs pytest on the files named in argv."""

import os
import sys

# The repository root (first on sys.path in Bazel's runfiles) has a py/ directory, which Python
# would import as a namespace package in place of pytest's own `py` module: search it last.
_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path = [p for p in sys.path if os.path.abspath(p) != _ROOT] + [_ROOT]

import pytest  # noqa: E402

if __name__ == "__main__":
    # Bazel's runfiles tree is read-only: no cache, no bytecode.
    sys.dont_write_bytecode = True
    args = ["-p", "no:cacheprovider", "-rs", "-v"]
    xml = os.environ.get("XML_OUTPUT_FILE")
    if xml:
        args.append(f"--junitxml={xml}")
    sys.exit(pytest.main(args + sys.argv[1:]))
