"""Checks, inside a running process, that the installed libraries share one runtime.

    python -m executorch.tools.identity     # prints a JSON report; exit 1 when anything differs

Symbol tables cannot show everything: a copy of the runtime linked with hidden visibility is
invisible to `nm -D`, yet it is a second backend registry. So this loads the package the way a user
does (importing the Python extension, which loads the shipped libraries), then asks each shipped
library, through the dynamic linker, for the backend registry's size, the kernel registry's size and
the thread pool's address and the address of each registered backend object, and compares the
answers with the extension's own:
- every library must report the same numbers and the same pool as the extension;
- where a delegate's library is shipped, the extension's registry lists its backend exactly once.
"""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path
from typing import Any

# Mangled names of the runtime functions each library is asked through (C++, no extern "C").
PROBES = {
    "backends": ("_ZN10executorch7runtime27get_num_registered_backendsEv", ctypes.c_size_t),
    "kernels": ("_ZN10executorch7runtime26get_num_registered_kernelsEv", ctypes.c_size_t),
    "pool": ("_ZN10executorch9extension10threadpool13pool_identityEv", ctypes.c_void_p),
}
GET_BACKEND_CLASS = "_ZN10executorch7runtime17get_backend_classEPKc"
# The delegates' libraries and the backend each registers.
DELEGATES = {"libexecutorch_cuda_backend.so.1": "CudaBackend", "libexecutorch_backend_xnnpack.so.1": "XnnpackBackend"}


def probe() -> dict[str, Any]:
    import executorch
    from executorch import _C

    lib_dir = Path(executorch.__file__).resolve().parent / "lib"
    backends = list(_C.registered_backends())
    report: dict[str, Any] = {
        "extension": {
            "backends": len(backends),
            "kernels": len(_C.registered_kernels()),
            "pool": int(_C.threadpool_identity()),
            "backend_names": backends,
            "backend_objects": {name: int(_C.backend_identity(name)) for name in backends},
        },
        "libraries": {},
        "problems": [],
    }
    for so in sorted(lib_dir.glob("*.so*")) if lib_dir.is_dir() else []:
        handle = ctypes.CDLL(str(so))  # already loaded by the extension: the same object
        answers: dict[str, Any] = {}
        for key, (symbol, restype) in PROBES.items():
            try:
                fn = getattr(handle, symbol)  # dlsym: the library itself, then what it needs
            except AttributeError:
                continue
            fn.restype = restype
            answers[key] = int(fn() or 0)
            if answers[key] != report["extension"][key]:
                report["problems"].append(f"{so.name} sees {key} = {answers[key]}, the extension {report['extension'][key]}")
        try:
            lookup = getattr(handle, GET_BACKEND_CLASS)
            lookup.restype, lookup.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
            objects = {name: int(lookup(name.encode()) or 0) for name in backends}
            answers["backend_objects"] = objects
            if objects != report["extension"]["backend_objects"]:
                report["problems"].append(f"{so.name} finds other backend objects ({objects}) than the extension "
                                          f"({report['extension']['backend_objects']})")
        except AttributeError:
            pass
        report["libraries"][so.name] = answers
    for library, name in DELEGATES.items():
        if (lib_dir / library).exists() and backends.count(name) != 1:
            report["problems"].append(f"{library} is shipped but the extension's registry lists {name} "
                                      f"{backends.count(name)} times: {backends}")
    return report


def main() -> int:
    report = probe()
    print(json.dumps(report, indent=2))
    return 1 if report["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
