"""The malformed-program corpus (malformed.py) through the Python runtime: an invalid program raises
ExecutorchError with a message at load or run time; a damaged one (a flipped byte) either raises so
or runs and gives every output its planned shape; nothing else escapes."""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest

from tests.flags import preload_cuda_runtime

preload_cuda_runtime()

from executorch.runtime import ExecutorchError, Runtime  # noqa: E402
from executorch.serialization.pte import deserialize  # noqa: E402
from tests.hostile.malformed import PROGRAM_MUTATIONS, read_corpus  # noqa: E402

CORPUS = read_corpus(os.environ["MALFORMED_CORPUS"])

_NUMPY = {"float32": np.float32, "float64": np.float64, "int64": np.int64, "int32": np.int32, "bool": np.bool_,
          "float16": np.float16, "uint8": np.uint8, "int8": np.int8, "int16": np.int16}


def run(data: bytes) -> None:
    """Loads and runs every method; a run that succeeds must give each output its planned shape."""
    program = Runtime.get().load_program(data)
    for name in program.method_names:
        method = program.load_method(name)
        inputs = [v if kind == "scalar" else np.zeros(v, dtype=_NUMPY.get(kind, np.float32))
                  for kind, v in method.input_meta()]
        outputs = method.execute(inputs)
        metas = method.output_meta()
        assert len(outputs) == len(metas), f"{name}: {len(outputs)} outputs, {len(metas)} planned"
        for i, (out, meta) in enumerate(zip(outputs, metas)):
            if meta is not None:
                assert isinstance(out, np.ndarray) and list(out.shape) == meta[1], (
                    f"{name}: output {i} is {getattr(out, 'shape', type(out))}, planned {meta[1]}")


def test_the_corpus_is_large_and_covers_every_kind_of_lie() -> None:
    assert len(CORPUS) >= 300
    kinds = Counter(c.name.split("/", 1)[1] for c in CORPUS if c.invalid)
    # Each program-level mutation applies to at least one of the programs.
    assert set(PROGRAM_MUTATIONS) <= set(kinds), set(PROGRAM_MUTATIONS) - set(kinds)
    assert any(k.startswith("truncated_at_") for k in kinds) and "segments_overlap" in kinds


def refused(data: bytes) -> bool:
    try:
        run(data)
    except ExecutorchError as e:
        assert str(e).strip(), "error without a message"
        return True
    return False


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_case(case) -> None:
    assert refused(case.data) or not case.invalid, f"{case.name}: an invalid program loaded and ran"


LYING_PAYLOADS = [c for c in CORPUS if "/payload_" in c.name]


@pytest.mark.parametrize("case", LYING_PAYLOADS, ids=[c.name for c in LYING_PAYLOADS])
def test_lying_payload_is_invalid_by_itself(case) -> None:
    """Without a GPU every CUDA program is refused; the lie is checked in the payload itself (a
    program the CPU runtime runs), so that the GPU check (tools/gpu/device_faults.py) tests a lie."""
    spec = deserialize(case.data)
    assert refused(spec.segments[spec.plans[0].delegates[0].segment]), case.name
