"""Reads what the symbol-table tests need from ELF files and wheels, with pyelftools."""

from __future__ import annotations

import os
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

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
    so = SharedObject(name=name)
    with open(path, "rb") as f:
        elf = ELFFile(f)
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        so.needed.append(tag.needed)
                    elif tag.entry.d_tag == "DT_SONAME":
                        so.soname = tag.soname
                    elif tag.entry.d_tag in ("DT_RUNPATH", "DT_RPATH"):
                        so.runpath = (getattr(tag, "runpath", None) or tag.rpath).split(":")
            elif isinstance(section, SymbolTableSection) and section.name in (".dynsym", ".symtab"):
                table = so.dynsym if section.name == ".dynsym" else so.symtab
                for sym in section.iter_symbols():
                    if sym.name and sym["st_shndx"] != "SHN_UNDEF" and sym["st_info"]["type"] in ("STT_FUNC", "STT_OBJECT"):
                        table[sym.name] = sym["st_info"]["bind"]
            elif isinstance(section, GNUVerNeedSection):
                for _, auxes in section.iter_versions():
                    for aux in auxes:
                        m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", aux.name)
                        if m:
                            so.glibc.add((int(m.group(1)), int(m.group(2))))
    return so


@dataclass
class Wheel:
    path: Path
    root: Path  # where it was extracted
    objects: dict[str, SharedObject]

    def definers(self, token: str, **kwargs: bool) -> list[str]:
        return sorted(n for n, so in self.objects.items() if so.defines(token, **kwargs))

    def file(self, name: str) -> Path:
        return self.root / name


def find_wheel(directory: str) -> Path:
    wheels = sorted(Path(directory).glob("*.whl"))
    assert len(wheels) == 1, f"expected one wheel in {directory}, found {wheels}"
    return wheels[0]


def open_wheel(directory: str, extract_to: Path) -> Wheel:
    path = find_wheel(directory)
    with zipfile.ZipFile(path) as zf:
        zf.extractall(extract_to)
    objects = {}
    for p in sorted(extract_to.rglob("*")):
        if p.is_file() and re.search(r"\.so(\.\d+)*$", p.name):
            name = p.relative_to(extract_to).as_posix()
            objects[name] = read_shared_object(p, name)
    return Wheel(path=path, root=extract_to, objects=objects)


def env_flag(name: str) -> bool:
    value = os.environ.get(name)
    assert value in ("0", "1"), f"{name} must be set to 0 or 1 by the test target, got {value!r}"
    return value == "1"
