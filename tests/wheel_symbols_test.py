"""Symbol-table checks of the built wheels: each component has exactly one definer, its owner.

Three builds of //wheel are checked side by side: the default one (--//:shared, with CUDA unless the
test build says --//:cuda=False), a static one (--//:shared=False) and a CPU-only one.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
from pathlib import Path

import pytest

from executorch.tools.symcheck import EXECUTORCH_COMPONENTS, Wheel, check, open_wheel
from tests.flags import env_flag

RUNTIME = "executorch/lib/libexecutorch.so.1"
DELEGATE = "executorch/lib/libexecutorch_cuda_backend.so.1"
RUNNERS = ["executorch/bin/executor_runner", "executorch/bin/llm_runner"]
SHIMS = "executorch/backends/cuda/libaoti_cuda_shims.so"

# The backend registry: its public functions, and the hidden object that holds the entries.
REGISTRY_API = [
    "_ZN10executorch7runtime16register_backend",
    "_ZN10executorch7runtime17get_backend_class",
    "_ZN10executorch7runtime27get_num_registered_backends",
]
REGISTRY_STORAGE = "_ZN10executorch7runtime12_GLOBAL__N_18registryEv"
# A strong symbol that only the CUDA delegate defines (its virtual methods may be weak).
DELEGATE_SENTINEL = "_ZN10executorch8backends4cuda12cuda_backendEv"

CUDA = env_flag("EXECUTORCH_CUDA")
SHARED = env_flag("EXECUTORCH_SHARED")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Wheel:
    return open_wheel(os.environ["EXECUTORCH_WHEEL"], tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def static_wheel(tmp_path_factory: pytest.TempPathFactory) -> Wheel:
    return open_wheel(os.environ["EXECUTORCH_WHEEL_STATIC"], tmp_path_factory.mktemp("static"))


@pytest.fixture(scope="module")
def cpu_wheel(tmp_path_factory: pytest.TempPathFactory) -> Wheel:
    return open_wheel(os.environ["EXECUTORCH_WHEEL_CPU"], tmp_path_factory.mktemp("cpu"))


def extension(w: Wheel) -> str:
    names = [n for n in w.objects if re.fullmatch(r"executorch/_C\..*\.so", n)]
    assert len(names) == 1, f"expected one Python extension, found {names}"
    return names[0]


SANITIZER_RUNTIME = re.compile(r"lib(asan|ubsan|tsan|lsan)\.so\.\d+")


def skip_if_sanitized(w: Wheel) -> None:
    """A wheel from --config=asan/ubsan needs its sanitizer's runtime and is not for shipping: what a
    released wheel may depend on is checked on the ordinary build."""
    runtimes = sorted({lib for so in w.objects.values() for lib in so.needed if SANITIZER_RUNTIME.fullmatch(lib)})
    if runtimes:
        pytest.skip(f"sanitizer build (needs {', '.join(runtimes)}); checked on the ordinary build")


def shared_only(reason: str = "the wheel under test was built with --//:shared=False"):
    return pytest.mark.skipif(not SHARED, reason=reason)


@shared_only()
@pytest.mark.parametrize("token", REGISTRY_API)
def test_backend_registry_has_one_exported_definer(wheel: Wheel, token: str) -> None:
    assert wheel.definers(token) == [RUNTIME]


@shared_only()
def test_no_hidden_copy_of_the_registry(wheel: Wheel) -> None:
    # nm -D cannot see a copy linked with hidden visibility; .symtab can, so it must be there.
    for so in wheel.objects.values():
        assert so.symtab, f"{so.name} has no .symtab: hidden copies would go unseen"
    assert wheel.definers(REGISTRY_STORAGE, hidden_too=True) == [RUNTIME]


@shared_only()
def test_extension_links_the_libraries_and_defines_none_of_them(wheel: Wheel) -> None:
    ext = wheel.objects[extension(wheel)]
    expected = ["libexecutorch.so.1", "libexecutorch_threadpool.so.1", "libexecutorch_kernels.so.1",
                "libexecutorch_backend_xnnpack.so.1"]
    if CUDA:
        expected += ["libexecutorch_cuda_backend.so.1", "libexecutorch_extension_cuda.so.1", "libaoti_cuda_shims.so"]
    assert set(expected) <= set(ext.needed), ext.needed
    for component in EXECUTORCH_COMPONENTS:
        for token in component.symbols:
            assert not ext.defines(token, hidden_too=True), f"{component.name}: {token}"


@shared_only()
def test_cuda_delegate_is_its_own_library(wheel: Wheel) -> None:
    if not CUDA:
        assert DELEGATE not in wheel.objects, "a wheel built with --//:cuda=False ships the delegate"
        pytest.skip("the wheel under test was built with --//:cuda=False: no CUDA delegate to check")
    assert DELEGATE in wheel.objects, "a CUDA build must ship the delegate library"
    delegate = wheel.objects[DELEGATE]
    assert wheel.definers(DELEGATE_SENTINEL, strong_only=True) == [DELEGATE]
    assert "libexecutorch.so.1" in delegate.needed
    assert "libaoti_cuda_shims.so" in delegate.needed
    assert "libcudart.so.13" in delegate.needed
    # Every shim function is defined by the shim library alone (the C ABI: extern "C" names).
    shims = wheel.objects[SHIMS]
    shim_functions = [s for s, b in shims.dynsym.items() if s.startswith("aoti_torch_") and b == "STB_GLOBAL"]
    assert len(shim_functions) >= 30
    for fn in shim_functions:
        assert wheel.definers(fn, hidden_too=True) == [SHIMS], fn
    for token in REGISTRY_API + [REGISTRY_STORAGE]:
        assert not delegate.defines(token, hidden_too=True), f"the delegate carries a copy of {token}"
    # The extension keeps the delegate on its link line so that its registration runs.
    assert "libexecutorch_cuda_backend.so.1" in wheel.objects[extension(wheel)].needed


@shared_only()
def test_sonames_match_file_names(wheel: Wheel) -> None:
    for name, so in wheel.objects.items():
        if name.startswith("executorch/lib/") or name == SHIMS:
            assert so.soname == Path(name).name


def test_runpaths_are_relative_and_outside_the_build_tree(wheel: Wheel, static_wheel: Wheel) -> None:
    for w in (wheel, static_wheel):
        for so in w.objects.values():
            for entry in so.runpath:
                assert entry.startswith("$ORIGIN"), f"{so.name}: runpath {entry}"
                assert "_solib" not in entry and ".runfiles" not in entry, f"{so.name}: runpath {entry}"


def test_dependencies_resolve_in_the_wheel_the_cuda_runtime_or_the_system(wheel: Wheel) -> None:
    skip_if_sanitized(wheel)
    system = re.compile(r"lib(c|m|dl|rt|pthread|stdc\+\+|gcc_s)\.so\.\d+|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1")
    shipped = {Path(n).name for n in wheel.objects}
    for so in wheel.objects.values():
        for lib in so.needed:
            assert lib in shipped or system.fullmatch(lib) or (CUDA and lib == "libcudart.so.13"), f"{so.name} needs {lib}"


def test_platform_tag_comes_from_the_newest_glibc_needed(wheel: Wheel) -> None:
    skip_if_sanitized(wheel)
    newest = max(v for so in wheel.objects.values() for v in so.glibc)
    assert wheel.path.name.endswith(f"-manylinux_{newest[0]}_{newest[1]}_x86_64.whl"), wheel.path.name
    # Debian 12 (2.36, gcc 12's libstdc++) and Ubuntu 24.04 (2.39) must be able to run it.
    assert newest <= (2, 36), f"needs GLIBC {newest}"
    newest_cxx = max(v for so in wheel.objects.values() for v in so.glibcxx)
    assert newest_cxx <= (3, 4, 30), f"needs GLIBCXX {newest_cxx}"


def test_record_lists_every_file_with_its_hash(wheel: Wheel) -> None:
    record_name = next(n for n in os.listdir(wheel.root) if n.endswith(".dist-info"))
    rows = list(csv.reader(io.StringIO((wheel.root / record_name / "RECORD").read_text())))
    listed = {row[0] for row in rows}
    on_disk = {p.relative_to(wheel.root).as_posix() for p in wheel.root.rglob("*") if p.is_file()}
    assert listed == on_disk
    for path, digest, size in rows:
        if path.endswith("RECORD"):
            continue
        data = (wheel.root / path).read_bytes()
        expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert digest == f"sha256={expected}" and int(size) == len(data), path


def test_cuda_runtime_is_declared_exactly_when_built_with_cuda(wheel: Wheel, cpu_wheel: Wheel) -> None:
    def requires(w: Wheel) -> list[str]:
        dist_info = next(p for p in w.root.iterdir() if p.name.endswith(".dist-info"))
        return [l.split(":", 1)[1].strip() for l in (dist_info / "METADATA").read_text().splitlines() if l.startswith("Requires-Dist:")]

    assert ("nvidia-cuda-runtime>=13,<14" in requires(wheel)) == CUDA
    assert "nvidia-cuda-runtime>=13,<14" not in requires(cpu_wheel)
    assert not any("libcudart" in lib for so in cpu_wheel.objects.values() for lib in so.needed)


def test_static_build_ships_only_the_extension(static_wheel: Wheel) -> None:
    shared = [n for n in static_wheel.objects if re.search(r"\.so(\.\d+)*$", n)]
    assert shared == [extension(static_wheel)]
    ext = static_wheel.objects[extension(static_wheel)]
    # The runtime is inside it, hidden: one registry all the same.
    assert ext.defines(REGISTRY_STORAGE, hidden_too=True)
    assert not any(lib.startswith("libexecutorch") for lib in ext.needed)
    assert ext.defines(DELEGATE_SENTINEL, hidden_too=True) == CUDA


@shared_only()
def test_cpu_build_has_one_registry_and_no_delegate(cpu_wheel: Wheel) -> None:
    assert DELEGATE not in cpu_wheel.objects
    for token in REGISTRY_API:
        assert cpu_wheel.definers(token) == [RUNTIME]


@shared_only()
def test_symcheck_passes_on_the_wheel_and_names_each_definer(wheel: Wheel, capsys: pytest.CaptureFixture[str]) -> None:
    from executorch.tools import symcheck

    statuses = {f.component.name: f.status for f in check(wheel, EXECUTORCH_COMPONENTS)}
    assert statuses == {
        "backend registry": "ok",
        "kernel registry": "ok",
        "program loader and Module": "ok",
        "thread pool": "ok",
        "CPU kernels": "ok",
        "CUDA stream helper": "ok" if CUDA else "absent",
        "CUDA shims": "ok" if CUDA else "absent",
        "CUDA delegate": "ok" if CUDA else "absent",
        "XNNPACK": "ok",
        "XNNPACK delegate": "ok",
    }
    assert symcheck.main([str(wheel.path), "--duplicates"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"ok\s+backend registry\s+owner {RUNTIME}; defined by: {RUNTIME}\n", out), out
    assert "0 strong symbols exported by two or more ELF files" in out


def test_symcheck_fails_where_the_runtime_is_linked_into_another_object(static_wheel: Wheel, capsys: pytest.CaptureFixture[str]) -> None:
    # The static build folds the runtime into the extension: against the shared layout's owners
    # that is exactly the defect the checker exists for, so it must fail and name the definer.
    from executorch.tools import symcheck

    # (the static runners hold a copy as well: each static binary is self-contained)
    ext = extension(static_wheel)
    definers = sorted([ext, *RUNNERS])
    registry = next(f for f in check(static_wheel, EXECUTORCH_COMPONENTS) if f.component.name == "backend registry")
    assert registry.status == "FAIL" and registry.definers == definers
    assert symcheck.main([str(static_wheel.path)]) == 1
    out = capsys.readouterr().out
    assert re.search(rf"FAIL\s+backend registry\s+owner {RUNTIME}; defined by: {', '.join(definers)}\n", out), out
