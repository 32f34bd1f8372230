"""Copies a build output to its place in the installed package, the way an install step does.

For an ELF shared object or executable, DT_RUNPATH entries that point into Bazel's build tree
(`_solib_*`, `*.runfiles`) are dropped; the package's own relative entries ($ORIGIN...) stay. The
string is rewritten in place in .dynstr (it only gets shorter), after checking that no other
dynamic string shares its bytes, so nothing else in the file moves.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

_BUILD_TREE_MARKERS = ("_solib_", ".runfiles")


def _dynstr_references(elf: ELFFile) -> list[int]:
    """Offsets into .dynstr used by dynamic entries and dynamic symbols."""
    offsets: list[int] = []
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            for tag in section.iter_tags():
                if tag.entry.d_tag in ("DT_NEEDED", "DT_SONAME", "DT_RUNPATH", "DT_RPATH"):
                    offsets.append(tag.entry.d_val)
        elif isinstance(section, SymbolTableSection) and section.name == ".dynsym":
            offsets.extend(sym.entry.st_name for sym in section.iter_symbols())
    return offsets


def clean_runpath(path: Path) -> tuple[str, str] | None:
    """Drops build-tree entries from the RUNPATH of ELF file `path`; returns (old, new) or None."""
    with open(path, "rb") as f:
        if f.read(4) != b"\x7fELF":
            return None
    with open(path, "r+b") as f:
        elf = ELFFile(f)
        dynamic = next((s for s in elf.iter_sections() if isinstance(s, DynamicSection)), None)
        if dynamic is None:
            return None
        entry = next((t.entry for t in dynamic.iter_tags() if t.entry.d_tag in ("DT_RUNPATH", "DT_RPATH")), None)
        if entry is None:
            return None
        dynstr = elf.get_section_by_name(".dynstr")
        start = entry.d_val
        old = dynstr.get_string(start)
        kept = [p for p in old.split(":") if p and not any(m in p for m in _BUILD_TREE_MARKERS)]
        new = ":".join(dict.fromkeys(kept))
        if new == old:
            return old, new
        end = start + len(old.encode())
        shared = [o for o in _dynstr_references(elf) if start < o <= end]
        if shared:
            sys.exit(f"install_file: {path}: RUNPATH shares .dynstr bytes with other strings; cannot rewrite")
        f.seek(dynstr["sh_offset"] + start)
        f.write(new.encode().ljust(len(old.encode()) + 1, b"\0"))
        return old, new


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        sys.exit("usage: install_file.py SRC DST")
    src, dst = Path(argv[1]), Path(argv[2])
    shutil.copyfile(src, dst)
    shutil.copymode(src, dst)
    dst.chmod(dst.stat().st_mode | 0o200)
    clean_runpath(dst)


if __name__ == "__main__":
    main(sys.argv)
