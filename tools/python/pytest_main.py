"""Entry point of py_pytest tests: runs pytest on the files named in argv."""

import os
import sys

import pytest

if __name__ == "__main__":
    # Bazel's runfiles tree is read-only: no cache, no bytecode.
    sys.dont_write_bytecode = True
    args = ["-p", "no:cacheprovider", "-rs", "-v"]
    xml = os.environ.get("XML_OUTPUT_FILE")
    if xml:
        args.append(f"--junitxml={xml}")
    sys.exit(pytest.main(args + sys.argv[1:]))
