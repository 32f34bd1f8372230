"""End to end: each test model exported from PyTorch, run through the Python runtime and through
executor_runner, on fresh random inputs, compared with torch eager.

Tolerance (float32): |ours - torch| <= 1e-4 * max(1, max|torch|) elementwise, i.e. 1e-4 relative to
the output's scale; the kernels accumulate in a different order than PyTorch's.
"""

from __future__ import annotations

import os
import sys
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.flags import preload_cuda_runtime

torch = pytest.importorskip("torch", reason="torch is not installed in the test interpreter")
preload_cuda_runtime()

from executorch.export import UnsupportedOperatorError, export  # noqa: E402
from executorch.runtime import ExecutorchError, Runtime  # noqa: E402
from tests.models.zoo import MODELS, fresh_inputs  # noqa: E402

RTOL = 1e-4


def assert_close(ours: np.ndarray, ref: np.ndarray) -> None:
    assert ours.shape == ref.shape and ours.dtype == ref.dtype
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(ours, ref, rtol=0, atol=RTOL * scale)


def child_env(**extra: str) -> dict[str, str]:
    """The environment for a child Python that imports this package as the test does."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), **extra)
    if os.environ.get("EXECUTORCH_CUDART"):
        # After what is preloaded already (the ASan runtime, in an ASan build).
        env["LD_PRELOAD"] = " ".join(filter(None, [env.get("LD_PRELOAD"), os.path.abspath(os.environ["EXECUTORCH_CUDART"])]))
    return env


@pytest.fixture(scope="module", params=sorted(MODELS))
def exported(request, tmp_path_factory):
    model, example = MODELS[request.param]()
    pte = export(model, example)
    path = tmp_path_factory.mktemp(request.param) / "model.pte"
    path.write_bytes(pte)
    return request.param, model, example, path


def test_python_runtime_matches_torch(exported) -> None:
    name, model, example, path = exported
    method = Runtime.get().load_program(path).load_method("forward")
    for seed in (11, 12):
        inputs = fresh_inputs(example, seed)
        (ours,) = method.execute([x.numpy() for x in inputs])
        with torch.no_grad():
            ref = model(*inputs).numpy()
        assert_close(ours, ref)


def test_torch_tensors_in_torch_tensors_out(exported) -> None:
    name, model, example, path = exported
    method = Runtime.get().load_program(path.read_bytes()).load_method()
    inputs = fresh_inputs(example, 13)
    (ours,) = method.execute(list(inputs))
    assert isinstance(ours, torch.Tensor)
    with torch.no_grad():
        assert_close(ours.numpy(), model(*inputs).numpy())


def test_executor_runner_matches_torch(exported, tmp_path: Path) -> None:
    name, model, example, path = exported
    inputs = fresh_inputs(example, 21)
    files = []
    for i, x in enumerate(inputs):
        f = tmp_path / f"input_{i}.bin"
        f.write_bytes(x.numpy().tobytes())
        files += ["--input", str(f)]
    runner = os.environ["EXECUTOR_RUNNER"]
    out = subprocess.run([runner, "--model_path", str(path), *files, "--output_dir", str(tmp_path), "--iterations", "3"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "3 iteration(s), median" in out.stdout
    with torch.no_grad():
        ref = model(*inputs).numpy()
    ours = np.frombuffer((tmp_path / "output_0.bin").read_bytes(), dtype=ref.dtype).reshape(ref.shape)
    assert_close(ours, ref)


def test_program_metadata_and_methods(exported) -> None:
    _, _, _, path = exported
    program = Runtime.get().load_program(path)
    assert program.method_names == ["forward"]
    assert program.metadata("producer") == "executorch.export"
    assert program.metadata("torch_version") == torch.__version__


# Bad input gives errors that say what was wrong --------------------------------------------------


@pytest.fixture(scope="module")
def mlp_method():
    model, example = MODELS["mlp"]()
    return Runtime.get().load_program(export(model, example)).load_method("forward")


def test_wrong_dtype_is_an_error(mlp_method) -> None:
    with pytest.raises(ExecutorchError, match="input 0.*dtype float64, expected float32") as e:
        mlp_method.execute([np.zeros((1, 64), dtype=np.float64)])
    assert str(e.value) == "input 0: InvalidArgument: dtype float64, expected float32"  # said once


def test_wrong_shape_is_an_error(mlp_method) -> None:
    with pytest.raises(ExecutorchError, match="input 0.*size 65 at dim 1, expected 64"):
        mlp_method.execute([np.zeros((1, 65), dtype=np.float32)])


def test_wrong_input_count_is_an_error(mlp_method) -> None:
    with pytest.raises(ValueError, match="takes 1 inputs, got 2"):
        mlp_method.execute([np.zeros((1, 64), np.float32)] * 2)


def test_unknown_method_is_a_key_error() -> None:
    model, example = MODELS["mlp"]()
    program = Runtime.get().load_program(export(model, example))
    with pytest.raises(KeyError, match="no method 'backward'"):
        program.load_method("backward")


@pytest.mark.parametrize("cut", [0, 4, 31, 100, -1])
def test_truncated_program_is_an_error(cut: int) -> None:
    model, example = MODELS["cnn"]()
    pte = export(model, example)
    with pytest.raises(ExecutorchError, match="InvalidProgram"):
        Runtime.get().load_program(pte[: cut if cut >= 0 else len(pte) - 1000])


def test_unsupported_operator_is_named() -> None:
    class Fft(torch.nn.Module):
        def forward(self, x):
            return torch.fft.rfft(x).abs()

    with pytest.raises(UnsupportedOperatorError, match="aten::_fft_r2c"):
        export(Fft(), (torch.randn(4),))


def test_registered_backends_list_the_delegates_of_this_build() -> None:
    names = Runtime.get().registered_backends
    assert sorted(names) == (["CudaBackend"] if os.environ.get("EXECUTORCH_CUDA") == "1" else []) + ["XnnpackBackend"]


def test_export_command_line(tmp_path: Path) -> None:
    import sys

    model_file = tmp_path / "model.py"
    model_file.write_text(
        "import torch\n"
        "def get_model():\n"
        "    torch.manual_seed(0)\n"
        "    return torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Tanh()), (torch.randn(2, 8),)\n"
    )
    env = child_env()
    out_file = tmp_path / "model.pte"
    done = subprocess.run([sys.executable, "-m", "executorch.export", str(model_file), "-o", str(out_file)],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert f"wrote {out_file}" in done.stdout
    namespace: dict = {}
    exec(model_file.read_text(), namespace)
    model, example = namespace["get_model"]()
    (ours,) = Runtime.get().load_program(out_file).load_method().execute([example[0].numpy()])
    with torch.no_grad():
        assert_close(ours, model(*example).numpy())


class _Transpose(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.transpose(0, 1).contiguous()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_inputs_and_outputs(dtype) -> None:
    """float16 and bfloat16 tensors cross the Python boundary bit for bit (a CPU program that only
    moves elements): torch tensors in and out, or numpy (float16; bfloat16 as its bits, widened to
    float32 on the way out)."""
    x = torch.randn(3, 5).to(dtype)
    method = Runtime.get().load_program(export(_Transpose(), (x,))).load_method()
    assert method.input_meta() == [(str(dtype)[6:], [3, 5])]
    (got,) = method.execute([x])
    assert got.dtype == dtype and torch.equal(got, x.t())
    if dtype == torch.float16:
        (arr,) = method.execute([x.numpy()])
        assert arr.dtype == np.float16 and np.array_equal(arr, x.t().numpy())
    else:
        (arr,) = method.execute([x.view(torch.int16).numpy().view(np.uint16)])
        assert arr.dtype == np.float32 and np.array_equal(arr, x.t().float().numpy())
        with pytest.raises(TypeError, match="unsupported dtype int16"):  # bits only where the input is bfloat16
            Runtime.get().load_program(export(_Transpose(), (torch.randn(3, 5),))).load_method().execute(
                [np.zeros((3, 5), np.int16)])


class _BatchFirstAttention(torch.nn.Module):
    """nn.MultiheadAttention, batch first: its projections are linear layers on a transposed input,
    which decomposition turns into bmm against the weight expanded to every batch."""

    def __init__(self) -> None:
        super().__init__()
        self.attention = torch.nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.attention(x, x, x, need_weights=False)[0]


def test_linear_on_a_transposed_input_is_one_matrix_product() -> None:
    """The expanded weight is not stored per batch, and the projection runs as addmm: the program's
    constants stay the size of the parameters, and no bmm is left."""
    from executorch.serialization.pte import KernelCall, deserialize

    torch.manual_seed(0)
    model = _BatchFirstAttention().eval()
    x = torch.randn(8, 5, 32)
    pte = export(model, (x,))
    plan = deserialize(pte).plans[0]
    ops = [plan.operators[i.op_index][0] for i in plan.instructions if isinstance(i, KernelCall)]
    assert "aten::bmm" not in ops and "aten::expand" not in ops
    assert ops.count("aten::addmm") == 2  # the packed input projection and the output projection
    param_bytes = sum(p.numel() * 4 for p in model.parameters())
    assert len(pte) < 2 * param_bytes + 65536
    (ours,) = Runtime.get().load_program(pte).load_method().execute([x.numpy()])
    with torch.no_grad():
        assert_close(ours, model(x).numpy())


def test_big_endian_and_read_only_inputs_read_as_their_values(mlp_method) -> None:
    """A big-endian array is read by value, not by its bytes; a read-only one (np.frombuffer, a
    memory map) is accepted, as an input is only read."""
    method = mlp_method
    x = np.random.default_rng(3).standard_normal((1, 64)).astype(np.float32)
    (want,) = method.execute([x])
    (big,) = method.execute([x.astype(x.dtype.newbyteorder(">"))])
    np.testing.assert_array_equal(big, want)
    frozen = np.frombuffer(x.tobytes(), dtype=x.dtype).reshape(x.shape)
    assert not frozen.flags.writeable
    (got,) = method.execute([frozen])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", [-1, 100000])
def test_thread_count_out_of_range_is_a_value_error(threads: int) -> None:
    runtime = Runtime.get()
    before = runtime.num_threads
    with pytest.raises(ValueError, match=rf"set_num_threads\({threads}\): the pool takes 0 .* to 1024 threads"):
        runtime.set_num_threads(threads)
    assert runtime.num_threads == before


def test_operator_name_with_a_nul_byte_is_refused() -> None:
    """'aten::addmm\\0...' must not load as aten::addmm."""
    from executorch.serialization.pte import deserialize, serialize

    model, example = MODELS["mlp"]()
    spec = deserialize(export(model, example))
    name, overload = spec.plans[0].operators[0]
    spec.plans[0].operators[0] = (name + "\0x", overload)
    with pytest.raises(ExecutorchError, match="NUL byte"):
        Runtime.get().load_program(serialize(spec)).load_method()


def test_planned_memory_over_the_limit_is_refused_at_load() -> None:
    model, example = MODELS["mlp"]()
    program = Runtime.get().load_program(export(model, example))
    runtime = Runtime.get()
    assert runtime.max_planned_bytes is None
    runtime.max_planned_bytes = 64
    try:
        with pytest.raises(ExecutorchError, match=r"method 'forward': its planned memory plans \d+ bytes, "
                                                  r"more than the limit of 64"):
            program.load_method()
    finally:
        runtime.max_planned_bytes = None
    assert program.load_method().execute([x.numpy() for x in example])[0].shape == (1, 10)
    for bad in (0, -5, 1.5, True):
        with pytest.raises(ValueError, match="max_planned_bytes must be a positive number of bytes"):
            runtime.max_planned_bytes = bad  # type: ignore[assignment]


def test_planned_memory_limit_from_the_environment(tmp_path: Path) -> None:
    model, example = MODELS["mlp"]()
    path = tmp_path / "mlp.pte"
    path.write_bytes(export(model, example))
    script = ("import sys\nfrom executorch.runtime import ExecutorchError, Runtime\n"
              "print(Runtime.get().max_planned_bytes)\n"
              "try:\n    Runtime.get().load_program(sys.argv[1]).load_method()\n"
              "except ExecutorchError as e:\n    print(e)\n")
    def run(limit: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-c", script, str(path)], env=child_env(EXECUTORCH_MAX_PLANNED_BYTES=limit),
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done

    limit, message = run("100").stdout.splitlines()
    assert limit == "100" and "more than the limit of 100 (EXECUTORCH_MAX_PLANNED_BYTES" in message
    done = run("lots")
    assert done.stdout.strip() == "None" and "EXECUTORCH_MAX_PLANNED_BYTES=lots is not a number of bytes" in done.stderr
