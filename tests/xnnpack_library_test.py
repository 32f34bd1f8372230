"""libexecutorch_backend_xnnpack.so.1, read with pyelftools: it owns XNNPACK and the delegate (both
defined and exported there), NEEDs the runtime and the thread pool for the rest (pthreadpool and
cpuinfo are the pool library's, never a second copy here), and asks for no glibc past 2.34."""

from __future__ import annotations

import os
from pathlib import Path

from executorch.tools.symcheck import read_shared_object

LIBRARY = Path(os.environ["XNNPACK_BACKEND"])


def test_owns_xnnpack_and_the_delegate_and_needs_the_rest() -> None:
    so = read_shared_object(LIBRARY, LIBRARY.name)
    assert so.soname == "libexecutorch_backend_xnnpack.so.1"
    for symbol in ("xnn_create_runtime_v4", "xnn_define_fully_connected", "xnn_initialize",
                   "_ZN10executorch8backends7xnnpack15xnnpack_backendEv"):
        assert so.defines(symbol, strong_only=True), symbol
    assert {"libexecutorch.so.1", "libexecutorch_threadpool.so.1"} <= set(so.needed), so.needed
    for foreign in ("pthreadpool_create", "pthreadpool_parallelize_1d", "cpuinfo_initialize",
                    "_ZN10executorch7runtime16register_backend"):
        assert not so.defines(foreign, hidden_too=True), foreign


def test_glibc_floor() -> None:
    so = read_shared_object(LIBRARY, LIBRARY.name)
    assert so.glibc and max(so.glibc) <= (2, 34), sorted(so.glibc)
