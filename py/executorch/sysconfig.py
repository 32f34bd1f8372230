"""Where an installed executorch keeps what C++ builds need.

    python -m executorch.sysconfig              # all three, one per line
    python -m executorch.sysconfig --cmake-dir  # for -DCMAKE_PREFIX_PATH / -Dexecutorch_DIR
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent


def get_include() -> str:
    """The directory holding <executorch/...> headers."""
    return str(_ROOT / "include")


def get_lib_dir() -> str:
    """The directory holding libexecutorch.so.1 and the other shared libraries."""
    return str(_ROOT / "lib")


def get_cmake_dir() -> str:
    """The directory holding executorch-config.cmake."""
    return str(_ROOT / "share" / "cmake" / "executorch")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m executorch.sysconfig", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--include-dir", action="store_true")
    parser.add_argument("--lib-dir", action="store_true")
    parser.add_argument("--cmake-dir", action="store_true")
    args = parser.parse_args(argv)
    chosen = [(args.include_dir, get_include()), (args.lib_dir, get_lib_dir()), (args.cmake_dir, get_cmake_dir())]
    if any(flag for flag, _ in chosen):
        for flag, value in chosen:
            if flag:
                print(value)
    else:
        print(f"include: {get_include()}\nlib: {get_lib_dir()}\ncmake: {get_cmake_dir()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
