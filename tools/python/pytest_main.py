"""Entry point of py_pytest tests: runs pytest on the files named in argv."""

import ctypes.util
import os
import sys

# The repository root (first on sys.path in Bazel's runfiles) has a py/ directory, which Python
# would import as a namespace package in place of pytest's own `py` module: search it last.
_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path = [p for p in sys.path if os.path.abspath(p) != _ROOT] + [_ROOT]


def _asan_reexec() -> None:
    """Under --config=asan, restarts the interpreter with the ASan runtime preloaded.

    An ASan-built extension can only be imported by a process whose first library is the ASan
    runtime. The interpreter itself is not instrumented and leaks by design (interned objects,
    module state), so leak detection is off here; the C++ tests keep it. protect_shadow_gap=0
    lets the CUDA driver map memory where ASan would reserve it.
    """
    if os.environ.get("EXECUTORCH_ASAN") != "1" or os.environ.get("EXECUTORCH_ASAN_PRELOADED") == "1":
        return
    # libstdc++ too: ASan resolves its __cxa_throw interceptor once, at startup, and a C++ library
    # loaded later (the extension) would then throw through a null pointer.
    preload = [ctypes.util.find_library(name) for name in ("asan", "stdc++")]
    if None in preload:
        sys.exit("pytest_main: EXECUTORCH_ASAN=1 but libasan or libstdc++ was not found")
    env = dict(os.environ)
    env["EXECUTORCH_ASAN_PRELOADED"] = "1"
    env["LD_PRELOAD"] = " ".join(preload + ([env["LD_PRELOAD"]] if env.get("LD_PRELOAD") else []))
    env["ASAN_OPTIONS"] = "detect_leaks=0:allocator_may_return_null=1:protect_shadow_gap=0"
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:], env)


if __name__ == "__main__":
    _asan_reexec()

    import pytest

    # Bazel's runfiles tree is read-only: no cache, no bytecode.
    sys.dont_write_bytecode = True
    args = ["-p", "no:cacheprovider", "-rs", "-v"]
    xml = os.environ.get("XML_OUTPUT_FILE")
    if xml:
        args.append(f"--junitxml={xml}")
    sys.exit(pytest.main(args + sys.argv[1:]))
