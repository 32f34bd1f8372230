"""symcheck: which shipped shared object defines each component of a wheel (pyelftools).

    python -m executorch.tools.symcheck WHEEL [--owners OWNERS.json] [--duplicates]

For each component it lists every shared object that defines one of the component's sentinel
symbols, and fails (exit 1) unless exactly one does and it is the declared owner. Exported
definitions are read from .dynsym; with "hidden": true a component's symbols are also looked up in
.symtab, where a copy linked with hidden visibility shows up although `nm -D` cannot see it.
--duplicates also lists every strong symbol that two or more shipped objects export.

Owners for another project are declared in JSON, one entry per component:

    {"my registry": {"owner": "mypkg/lib/libcore.so.1",
                     "symbols": ["_ZN5mypkg8registryEv"],   # substrings of mangled names
                     "strong": false, "hidden": true}}

"strong": true counts only global (not weak) definitions: use it for a component whose methods are
weak (inline or template code) and name a strong function of it as the sentinel.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection
from elftools.elf.sections import SymbolTableSection


@dataclass
class SharedObject:
    name: str  # path inside the wheel
    needed: list[str] = field(default_factory=list)
    soname: str | None = None
    runpath: list[str] = field(default_factory=list)
    # Defined symbols by table: name -> binding (STB_GLOBAL, STB_WEAK, STB_LOCAL, ...)
    dynsym: dict[str, str] = field(default_factory=dict)
    symtab: dict[str, str] = field(default_factory=dict)
    glibc: set[tuple[int, int]] = field(default_factory=set)
    glibcxx: set[tuple[int, int, int]] = field(default_factory=set)
    undefined: set[str] = field(default_factory=set)  # .dynsym's undefined names: what others must define

    def defines(self, token: str, *, strong_only: bool = False, hidden_too: bool = False) -> bool:
        """Whether a symbol whose (mangled) name contains `token` is defined here.

        Exported definitions come from .dynsym; with hidden_too, .symtab's local and hidden ones
        count as well: a static copy linked with hidden visibility is invisible to `nm -D`.
        """
        tables = [self.dynsym] + ([self.symtab] if hidden_too else [])
        for table in tables:
            for name, bind in table.items():
                if token in name and (bind == "STB_GLOBAL" or not strong_only):
                    return True
        return False


def read_shared_object(path: Path, name: str) -> SharedObject:
    with open(path, "rb") as f:
        return read_elf(f, name)


def read_elf(stream: BinaryIO, name: str) -> SharedObject:
    """The tables of the ELF object in `stream` (a file, or io.BytesIO over a library's bytes)."""
    so = SharedObject(name=name)
    elf = ELFFile(stream)
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            for tag in section.iter_tags():
                if tag.entry.d_tag == "DT_NEEDED":
                    so.needed.append(tag.needed)
                elif tag.entry.d_tag == "DT_SONAME":
                    so.soname = tag.soname
                elif tag.entry.d_tag in ("DT_RUNPATH", "DT_RPATH"):
                    so.runpath = str(getattr(tag, "runpath", None) or getattr(tag, "rpath", "")).split(":")
        elif isinstance(section, SymbolTableSection) and section.name in (".dynsym", ".symtab"):
            table = so.dynsym if section.name == ".dynsym" else so.symtab
            for sym in section.iter_symbols():
                if not sym.name:
                    continue
                if sym["st_shndx"] == "SHN_UNDEF":
                    if section.name == ".dynsym":
                        so.undefined.add(sym.name)
                elif sym["st_info"]["type"] in ("STT_FUNC", "STT_OBJECT"):
                    table[sym.name] = sym["st_info"]["bind"]
        elif isinstance(section, GNUVerNeedSection):
            for _, auxes in section.iter_versions():
                for aux in auxes:
                    m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", aux.name)
                    if m:
                        so.glibc.add((int(m.group(1)), int(m.group(2))))
                    m = re.fullmatch(r"GLIBCXX_(\d+)\.(\d+)\.(\d+)", aux.name)
                    if m:
                        so.glibcxx.add((int(m.group(1)), int(m.group(2)), int(m.group(3))))
    return so


@dataclass
class Wheel:
    path: Path
    root: Path  # where it was extracted
    objects: dict[str, SharedObject]  # every ELF file: shared objects and executables

    def definers(self, token: str, **kwargs: bool) -> list[str]:
        return sorted(n for n, so in self.objects.items() if so.defines(token, **kwargs))

    def file(self, name: str) -> Path:
        return self.root / name


def find_wheel(directory: str, name: str | None = None) -> Path:
    wheels = sorted(Path(directory).glob(name or "*.whl"))
    if len(wheels) != 1:
        raise FileNotFoundError(f"expected one wheel in {directory}, found {[w.name for w in wheels]}")
    return wheels[0]


def _is_elf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def open_wheel(directory: str, extract_to: Path, name: str | None = None) -> Wheel:
    """Extracts the wheel in `directory` (or the one called `name` there) and reads its objects."""
    path = find_wheel(directory, name)
    with zipfile.ZipFile(path) as zf:
        zf.extractall(extract_to)
    objects = {}
    for p in sorted(extract_to.rglob("*")):
        if p.is_file() and _is_elf(p):
            name = p.relative_to(extract_to).as_posix()
            objects[name] = read_shared_object(p, name)
    return Wheel(path=path, root=extract_to, objects=objects)


@dataclass(frozen=True)
class Component:
    name: str
    owner: str
    symbols: tuple[str, ...]
    strong: bool = False
    hidden: bool = True


# This project's components and their owners. A component whose owner is absent from the wheel
# (the CUDA delegate of a CPU-only build) is reported as absent, never as passing.
EXECUTORCH_COMPONENTS = (
    Component(
        "backend registry",
        "executorch/lib/libexecutorch.so.1",
        (
            "_ZN10executorch7runtime16register_backend",
            "_ZN10executorch7runtime17get_backend_class",
            "_ZN10executorch7runtime27get_num_registered_backends",
            "_ZN10executorch7runtime12_GLOBAL__N_18registryEv",
        ),
    ),
    Component(
        "kernel registry",
        "executorch/lib/libexecutorch.so.1",
        (
            "_ZN10executorch7runtime16register_kernels",
            "_ZN10executorch7runtime15get_op_function",
        ),
    ),
    Component(
        "program loader and Module",
        "executorch/lib/libexecutorch.so.1",
        ("_ZN10executorch7runtime7Program4load", "_ZN10executorch9extension6Module7execute"),
    ),
    Component(
        "thread pool",
        "executorch/lib/libexecutorch_threadpool.so.1",
        (
            "_ZN10executorch9extension10threadpool12parallel_for",
            "_ZN10executorch9extension10threadpool12_GLOBAL__N_14poolEv",
            # pthreadpool and cpuinfo, which XNNPACK shares: one copy, in the pool's library.
            "pthreadpool_create",
            "cpuinfo_initialize",
        ),
    ),
    Component(
        "CPU kernels",
        "executorch/lib/libexecutorch_kernels.so.1",
        ("_ZN10executorch7kernels5sgemmE",),
    ),
    Component(
        "CUDA stream helper",
        "executorch/lib/libexecutorch_extension_cuda.so.1",
        ("_ZN10executorch9extension4cuda14current_streamEv", "_ZN10executorch9extension4cuda11StreamGuardC"),
    ),
    Component(
        "CUDA shims",
        "executorch/backends/cuda/libaoti_cuda_shims.so",
        (
            "aoti_torch_create_tensor_from_blob_v2",
            "aoti_torch_empty_strided",
            "aoti_torch_delete_tensor_object",
            "aoti_torch_get_current_cuda_stream",
            "aoti_torch_cuda_addmm_out",
        ),
    ),
    Component(
        "CUDA delegate",
        "executorch/lib/libexecutorch_cuda_backend.so.1",
        ("_ZN10executorch8backends4cuda12cuda_backendEv",),
        strong=True,
    ),
    Component(
        "XNNPACK",
        "executorch/lib/libexecutorch_backend_xnnpack.so.1",
        ("xnn_create_runtime_v4", "xnn_initialize", "xnn_define_convolution_2d"),
    ),
    Component(
        "XNNPACK delegate",
        "executorch/lib/libexecutorch_backend_xnnpack.so.1",
        ("_ZN10executorch8backends7xnnpack15xnnpack_backendEv",),
        strong=True,
    ),
)


@dataclass
class Finding:
    component: Component
    definers: list[str]
    owner_present: bool

    @property
    def ok(self) -> bool:
        return self.definers == [self.component.owner]

    @property
    def status(self) -> str:
        if self.ok:
            return "ok"
        if not self.owner_present and not self.definers:
            return "absent"
        return "FAIL"


def check(wheel: Wheel, components: tuple[Component, ...] | list[Component]) -> list[Finding]:
    findings = []
    for c in components:
        definers = sorted(
            {d for token in c.symbols for d in wheel.definers(token, strong_only=c.strong, hidden_too=c.hidden)}
        )
        findings.append(Finding(c, definers, c.owner in wheel.objects))
    return findings


def duplicates(wheel: Wheel) -> dict[str, list[str]]:
    """Strong (global) symbols that two or more ELF files of the wheel export."""
    by_symbol: dict[str, list[str]] = {}
    for name, so in wheel.objects.items():
        for sym, bind in so.dynsym.items():
            if bind == "STB_GLOBAL":
                by_symbol.setdefault(sym, []).append(name)
    return {s: sorted(d) for s, d in sorted(by_symbol.items()) if len(d) > 1}


def load_components(path: str) -> list[Component]:
    with open(path) as f:
        raw = json.load(f)
    return [
        Component(name, e["owner"], tuple(e["symbols"]), bool(e.get("strong", False)), bool(e.get("hidden", True)))
        for name, e in raw.items()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m executorch.tools.symcheck", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", help="a .whl file, or a directory holding exactly one")
    parser.add_argument("--owners", help="JSON file declaring components (default: executorch's own)")
    parser.add_argument("--duplicates", action="store_true", help="also list strong symbols exported twice or more")
    args = parser.parse_args(argv)

    components = load_components(args.owners) if args.owners else list(EXECUTORCH_COMPONENTS)
    source = Path(args.wheel)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = open_wheel(str(source.parent if source.is_file() else source), Path(tmp), name=source.name if source.is_file() else None)
        print(f"{wheel.path.name}: {len(wheel.objects)} ELF files (shared objects and executables)")
        findings = check(wheel, components)
        width = max(len(f.component.name) for f in findings)
        for f in findings:
            print(f"  {f.status:6} {f.component.name:{width}}  owner {f.component.owner}; defined by: {', '.join(f.definers) or 'none'}")
        failed = any(f.status == "FAIL" for f in findings)
        if args.duplicates:
            dups = duplicates(wheel)
            print(f"{len(dups)} strong symbols exported by two or more ELF files")
            for sym, definers in dups.items():
                print(f"  {sym}: {', '.join(definers)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
