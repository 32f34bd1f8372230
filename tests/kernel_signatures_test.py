"""The argument kinds of the CPU kernels: kernels/signatures.cpp is what tools/kernels/signatures.py
writes from torch's operator schemas, every registered kernel has one, and a program whose
instruction passes the wrong kind of value is refused when its method loads."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from tests.flags import preload_cuda_runtime

torch = pytest.importorskip("torch", reason="torch is not installed in the test interpreter")
preload_cuda_runtime()

from executorch.export import export  # noqa: E402
from executorch import _C  # noqa: E402
from executorch.runtime import ExecutorchError, Runtime  # noqa: E402
from executorch.serialization.pte import IntListValue, KernelCall, deserialize, serialize  # noqa: E402
from tests.models.zoo import MODELS  # noqa: E402


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("signatures", os.environ["SIGNATURES_PY"])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_table_is_what_the_generator_writes() -> None:
    committed = Path(os.environ["SIGNATURES_CPP"]).read_text()
    assert committed == _generator().source(), (
        "kernels/signatures.cpp is stale: python tools/kernels/signatures.py > kernels/signatures.cpp")


def test_every_registered_kernel_has_kinds() -> None:
    committed = Path(os.environ["SIGNATURES_CPP"]).read_text()
    missing = [n for n in _C.registered_kernels() if f'{{"{n}", "' not in committed]
    assert not missing


def test_a_wrong_kind_is_refused_at_load() -> None:
    model, example = MODELS["mlp"]()
    spec = deserialize(export(model, example))
    plan = spec.plans[0]
    names = [f"{n}.{o}" if o else n for n, o in plan.operators]
    k, call = next((k, i) for k, i in enumerate(plan.instructions)
                   if isinstance(i, KernelCall) and names[i.op_index] == "aten::addmm")
    plan.values.append(IntListValue([1, 2]))
    call.args[0] = len(plan.values) - 1  # the bias: a tensor, here an int list
    program = Runtime.get().load_program(serialize(spec))
    with pytest.raises(ExecutorchError, match=rf"instruction {k}: operator 'aten::addmm': argument 0 must be a tensor "
                                              "or a number"):
        program.load_method()
