"""mypy over the executorch package as it is laid out for import (sources, the generated program
reader, _C.pyi for the extension), with py/mypy.ini: every function typed, no type errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api", reason="mypy is not installed in the test interpreter")

import executorch  # noqa: E402


def test_the_package_type_checks() -> None:
    package = Path(executorch.__file__).parent
    root = package.parent  # the directory executorch is imported from
    assert (package / "py.typed").exists() and (package / "_C.pyi").exists()
    config = os.path.abspath(os.environ["MYPY_CONFIG"])
    cwd = os.getcwd()
    os.chdir(root)
    try:
        out, err, status = mypy_api.run(["--config-file", config, "-p", "executorch"])
    finally:
        os.chdir(cwd)
    assert status == 0, out + err
    assert "Success" in out and int(out.split(" in ")[1].split()[0]) > 20, out  # the whole package was read
