"""Writes a wheel (PEP 427) from a list of files: METADATA, WHEEL, entry_points.txt and RECORD.

Used by //tools/python:wheel.bzl. With --platform auto the tag is manylinux_2_<N>_<arch>, where 2.N is
the newest GLIBC symbol version any ELF file in the wheel needs (read with pyelftools).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import stat
import sys
import zipfile
from pathlib import Path

# Wheels must be reproducible: every entry gets this timestamp (the earliest zip allows).
_EPOCH = (1980, 1, 1, 0, 0, 0)
_ELF_MAGIC = b"\x7fELF"
_ARCH_BY_MACHINE = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}


def glibc_requirement(path: str) -> tuple[tuple[int, int] | None, str | None]:
    """Returns (newest GLIBC version needed, architecture) of an ELF file."""
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection

    with open(path, "rb") as f:
        elf = ELFFile(f)
        arch = _ARCH_BY_MACHINE.get(elf["e_machine"])
        newest = None
        for section in elf.iter_sections():
            if not isinstance(section, GNUVerNeedSection):
                continue
            for _verneed, auxes in section.iter_versions():
                for aux in auxes:
                    m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.\d+)?", aux.name)
                    if m:
                        version = (int(m.group(1)), int(m.group(2)))
                        newest = version if newest is None else max(newest, version)
        return newest, arch


def is_elf(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == _ELF_MAGIC


def auto_platform(files: dict[str, str]) -> str:
    newest, arch = None, None
    for src in files.values():
        if not is_elf(src):
            continue
        version, elf_arch = glibc_requirement(src)
        if arch and elf_arch and elf_arch != arch:
            sys.exit(f"wheelmaker: ELF files of two architectures ({arch}, {elf_arch})")
        arch = arch or elf_arch
        if version:
            newest = version if newest is None else max(newest, version)
    if arch is None:
        return "any"
    if newest is None:
        return f"linux_{arch}"
    return f"manylinux_{newest[0]}_{newest[1]}_{arch}"


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def escape(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name)


def metadata(args: argparse.Namespace) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {args.distribution}",
        f"Version: {args.version}",
    ]
    if args.summary:
        lines.append(f"Summary: {args.summary}")
    if args.python_requires:
        lines.append(f"Requires-Python: {args.python_requires}")
    lines += [f"Requires-Dist: {r}" for r in args.requires]
    extras: dict[str, list[str]] = {}
    for item in args.extra_requires:
        extra, req = item.split(";", 1)
        extras.setdefault(extra, []).append(req)
    for extra, reqs in sorted(extras.items()):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    return "\n".join(lines) + "\n"


def entry_points(items: list[str]) -> str:
    groups: dict[str, list[str]] = {}
    for item in items:
        group, line = item.split("|", 1)
        groups.setdefault(group, []).append(line)
    return "".join(f"[{g}]\n" + "".join(f"{l}\n" for l in lines) + "\n" for g, lines in sorted(groups.items()))


def write_wheel(args: argparse.Namespace) -> Path:
    files: dict[str, str] = {}
    for item in args.file:
        dest, src = item.split("=", 1)
        files[dest] = src
    platform = auto_platform(files) if args.platform == "auto" else args.platform
    tag = f"{args.python_tag}-{args.abi}-{platform}"
    name = f"{escape(args.distribution)}-{args.version.replace('-', '_')}"
    dist_info = f"{name}.dist-info"
    out = Path(args.out_dir) / f"{name}-{tag}.whl"
    out.parent.mkdir(parents=True, exist_ok=True)

    record: list[str] = []
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as whl:

        def add(arcname: str, data: bytes, mode: int = 0o644) -> None:
            info = zipfile.ZipInfo(arcname, date_time=_EPOCH)
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
            record.append(f"{arcname},{record_hash(data)},{len(data)}")

        for dest in sorted(files):
            src = files[dest]
            data = Path(src).read_bytes()
            mode = 0o755 if os.stat(src).st_mode & stat.S_IXUSR else 0o644
            add(dest, data, mode)
        add(f"{dist_info}/METADATA", metadata(args).encode())
        wheel = ["Wheel-Version: 1.0", "Generator: executorch-wheelmaker", "Root-Is-Purelib: false", f"Tag: {tag}"]
        add(f"{dist_info}/WHEEL", ("\n".join(wheel) + "\n").encode())
        if args.entry_point:
            add(f"{dist_info}/entry_points.txt", entry_points(args.entry_point).encode())
        record.append(f"{dist_info}/RECORD,,")
        info = zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=_EPOCH)
        info.external_attr = (stat.S_IFREG | 0o644) << 16
        whl.writestr(info, "\n".join(record) + "\n", compress_type=zipfile.ZIP_DEFLATED)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, fromfile_prefix_chars="@")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--distribution", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--python-tag", default="py3")
    parser.add_argument("--abi", default="none")
    parser.add_argument("--platform", default="any")
    parser.add_argument("--summary", default="")
    parser.add_argument("--python-requires", default="")
    parser.add_argument("--requires", action="append", default=[])
    parser.add_argument("--extra-requires", action="append", default=[])
    parser.add_argument("--entry-point", action="append", default=[])
    parser.add_argument("--file", action="append", default=[], help="ARCHIVE_PATH=FILE")
    write_wheel(parser.parse_args(argv))


if __name__ == "__main__":
    main()
