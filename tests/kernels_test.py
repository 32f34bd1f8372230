"""Every CPU kernel against PyTorch: small single-operator modules (with broadcasting, strides,
groups, padding, keepdim, negative dims) are exported and run, and must match torch eager to
1e-5 (absolute, on values of order 1) or exactly for integer and boolean results."""

from __future__ import annotations

import numpy as np
import pytest

from tests.flags import preload_cuda_runtime

torch = pytest.importorskip("torch", reason="torch is not installed in the test interpreter")
preload_cuda_runtime()

from executorch.export import export  # noqa: E402
from executorch.runtime import Runtime  # noqa: E402

F = torch.nn.functional


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def r(*shape):
    return torch.randn(*shape)


CASES = {
    "add_broadcast": (lambda a, b: a + b, (r(2, 3, 4), r(3, 1))),
    "add_alpha_scalar": (lambda a: torch.add(a, 2.5, alpha=3), (r(5),)),
    "sub_broadcast": (lambda a, b: a - b, (r(4, 1), r(1, 5))),
    "mul_div": (lambda a, b: a * b / (b.abs() + 1), (r(2, 3), r(2, 3))),
    "pow_tensor_scalar": (lambda a: a.abs() ** 1.7 + a**2, (r(7),)),
    "pow_tensor_tensor": (lambda a, b: a.abs() ** b, (r(3, 3), r(3))),
    "neg_relu": (lambda a: torch.relu(-a), (r(10),)),
    "gelu_erf": (lambda a: F.gelu(a), (r(64) * 3,)),
    "gelu_tanh": (lambda a: F.gelu(a, approximate="tanh"), (r(64) * 3,)),
    "silu_sigmoid_tanh": (lambda a: F.silu(a) + torch.sigmoid(a) * torch.tanh(a), (r(33),)),
    "exp_rsqrt_log": (lambda a: torch.exp(a) + torch.rsqrt(a.abs() + 1) + torch.log(a.abs() + 1), (r(17),)),
    "softmax_dim1": (lambda a: torch.softmax(a, 1), (r(2, 5, 3),)),
    "softmax_last": (lambda a: torch.softmax(a * 4, -1), (r(3, 37),)),
    "log_softmax_last": (lambda a: torch.log_softmax(a, -1), (r(4, 9),)),
    "linear": (None, None),  # filled below
    "mm": (lambda a, b: a @ b, (r(5, 7), r(7, 3))),
    "bmm": (lambda a, b: torch.bmm(a, b), (r(3, 20, 9), r(3, 9, 11))),
    "large_gemm": (lambda a, b: a @ b, (r(130, 300), r(300, 70))),
    "mean_sum_amax": (lambda a: a.mean(1, keepdim=True) + a.sum((0, 2)).unsqueeze(1) + a.amax(-1, keepdim=True), (r(2, 3, 4),)),
    "permute_transpose": (lambda a: a.permute(2, 0, 1).transpose(0, 2).contiguous() * 2, (r(2, 3, 4),)),
    "expand_cat": (lambda a, b: torch.cat([a.expand(2, 3, 4), b], dim=1), (r(1, 3, 1), r(2, 5, 4))),
    "slice_select": (lambda a: a[:, 1:7:2, -1] + a[1, -3:, 0], (r(2, 8, 3),)),
    "squeeze_unsqueeze_view": (lambda a: a.unsqueeze(0).squeeze(2).reshape(3, -1) + 1, (r(3, 1, 4),)),
    "where_compare": (lambda a, b: torch.where(a > b, a, b * 2) + (a <= 0).float(), (r(4, 5), r(5))),
    "layer_norm": (None, None),
    "split": (lambda a: torch.split(a, [2, 3, 1], dim=1)[1] * 3, (r(2, 6),)),
}

# Attention is one kernel (the exporter keeps it whole): shapes of rank 3 to 5, causal, a scale,
# bool and additive masks that broadcast, grouped key/value heads.
_MASK = torch.rand(5, 7) > 0.3
_MASK[2] = False  # a query that may attend to nothing gets zeros, as in torch
# An additive mask that hides keys with -inf (a cache past the position): the kernel skips them.
_HIDING = torch.randn(5, 7)
_HIDING[:, 4:] = float("-inf")
_HIDING[1, :3] = float("-inf")
CASES.update({
    "sdpa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), (r(2, 3, 5, 8), r(2, 3, 7, 8), r(2, 3, 7, 4))),
    "sdpa_causal_scale_3d": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3),
                             (r(3, 6, 8), r(3, 9, 8), r(3, 9, 8))),
    "sdpa_bool_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                       (r(2, 3, 5, 8), r(2, 3, 7, 8), r(2, 3, 7, 8), _MASK)),
    "sdpa_float_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                        (r(1, 2, 5, 8), r(1, 2, 7, 8), r(1, 2, 7, 8), r(2, 1, 7))),
    "sdpa_float_mask_hiding": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                               (r(2, 3, 5, 12), r(2, 3, 7, 12), r(2, 3, 7, 5), _HIDING)),
    "sdpa_gqa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
                 (r(2, 4, 5, 8), r(2, 2, 7, 8), r(2, 2, 7, 6))),
    "sdpa_5d": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), (r(2, 2, 3, 4, 8), r(2, 2, 3, 6, 8), r(2, 2, 3, 6, 8))),
})


def _cache_mask(queries: int, keys: int, positions: list[int]) -> torch.Tensor:
    """A language model's additive mask over a static cache, [batch, 1, queries, keys]: the query at
    row i of batch entry b sees keys up to positions[b] + i, and -inf hides the rest."""
    mask = torch.full((len(positions), 1, queries, keys), float("-inf"))
    for b, p in enumerate(positions):
        for i in range(queries):
            mask[b, 0, i, : p + i + 1] = 0.0
    return mask


_HOLES = torch.rand(70, 90) > 0.4
_HOLES[3] = False
_HOLES[:, :5] = False  # no query sees the first keys
# Queries in more than one block of the kernel's (64 rows of a head), keys spanning several GEMM
# panels, and masks whose visible spans differ by batch entry and by row.
CASES.update({
    "sdpa_blocks_causal_gqa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
                               (r(1, 4, 80, 16), r(1, 2, 80, 16), r(1, 2, 80, 16))),
    "sdpa_cache_prefill": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True),
                           (r(1, 4, 70, 16), r(1, 2, 200, 16), r(1, 2, 200, 24), _cache_mask(70, 200, [50]))),
    "sdpa_cache_decode": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True),
                          (r(2, 4, 1, 32), r(2, 2, 300, 32), r(2, 2, 300, 32), _cache_mask(1, 300, [7, 250]))),
    "sdpa_bool_holes": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                        (r(2, 2, 70, 8), r(2, 2, 90, 8), r(2, 2, 90, 8), _HOLES)),
    # The vectorized exponential's range: large arguments either way, infinities and NaN.
    "silu_wide": (lambda a: F.silu(a), (torch.cat([r(997) * 40, torch.tensor([-100.0, 100.0, 89.0, -88.0, float("inf"),
                                                                                float("-inf"), float("nan")])]),)),
})


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(12, 5)

    def forward(self, x):
        return self.l(x)


class LayerNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.n = torch.nn.LayerNorm([3, 8])

    def forward(self, x):
        return self.n(x)


class ConvPool(torch.nn.Module):
    def __init__(self, groups: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.c = torch.nn.Conv2d(4, 8, 3, stride=stride, padding=padding, dilation=dilation, groups=groups)
        self.bn = torch.nn.BatchNorm2d(8).eval()
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)

    def forward(self, x):
        y = self.bn(self.c(x))
        return F.max_pool2d(y, 2, ceil_mode=True), F.avg_pool2d(y, 3, stride=1, padding=1), F.adaptive_avg_pool2d(y, (2, 3))


class Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.e = torch.nn.Embedding(50, 6)

    def forward(self, idx):
        return self.e(idx)


def run(module, inputs):
    method = Runtime.get().load_program(export(module, inputs)).load_method()
    ours = method.execute([x.numpy() for x in inputs])
    with torch.no_grad():
        ref = module(*inputs)
    refs = ref if isinstance(ref, tuple) else (ref,)
    assert len(ours) == len(refs)
    for o, e in zip(ours, refs):
        e = e.numpy()
        assert o.shape == e.shape and o.dtype == e.dtype
        if e.dtype.kind in "biu":
            np.testing.assert_array_equal(o, e)
        else:
            np.testing.assert_allclose(o, e, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(e).max())))


@pytest.mark.parametrize("name", sorted(k for k, v in CASES.items() if v[0] is not None))
def test_operator_matches_torch(name: str) -> None:
    torch.manual_seed(hash(name) % 1000)
    fn, inputs = CASES[name]
    run(Fn(fn), inputs)


def test_linear_layer() -> None:
    torch.manual_seed(0)
    run(Linear(), (r(3, 12),))


@pytest.mark.parametrize("rows", [5, 40, 100, 200])
def test_linear_layer_across_the_gemm_blocks(rows: int) -> None:
    """Products of more rows than the GEMV takes: up to 192 rows (two blocks of 96) read the weight in place
    but for its last, partial panel of 16 columns (here 37 = 2 x 16 + 5); 200 rows pack it. 300 inputs span
    two depth blocks."""
    torch.manual_seed(rows)
    run(torch.nn.Linear(300, 37).eval(), (r(rows, 300),))


def test_layer_norm_over_two_dims() -> None:
    torch.manual_seed(0)
    run(LayerNorm(), (r(2, 3, 8),))


@pytest.mark.parametrize("groups,stride,padding,dilation", [(1, 1, 1, 1), (2, 2, 0, 1), (4, 1, 2, 2)])
def test_convolution_batch_norm_pooling(groups: int, stride: int, padding: int, dilation: int) -> None:
    torch.manual_seed(groups * 10 + stride)
    run(ConvPool(groups, stride, padding, dilation), (r(2, 4, 11, 10),))


def test_embedding_and_its_bounds() -> None:
    torch.manual_seed(0)
    model = Embed()
    run(model, (torch.randint(0, 50, (3, 7)),))
    method = Runtime.get().load_program(export(model, (torch.randint(0, 50, (3, 7)),))).load_method()
    bad = np.full((3, 7), 50, dtype=np.int64)
    with pytest.raises(RuntimeError, match="aten::embedding: index 50 out of range for 50 rows"):
        method.execute([bad])


def test_attention_is_one_kernel_and_refuses_dropout() -> None:
    from executorch.serialization.pte import deserialize

    q, k, v = r(1, 2, 4, 8), r(1, 2, 4, 8), r(1, 2, 4, 8)
    plan = deserialize(export(Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v)), (q, k, v))).plans[0]
    names = {name for name, _ in plan.operators}
    assert "aten::scaled_dot_product_attention" in names and not names & {"aten::bmm", "aten::_softmax"}, names
    dropped = export(Fn(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)), (q, k, v))
    method = Runtime.get().load_program(dropped).load_method()
    with pytest.raises(RuntimeError, match="dropout_p is 0.5; inference takes 0"):
        method.execute([x.numpy() for x in (q, k, v)])


def test_histogram_of_expert_ids() -> None:
    """histc as mixture-of-experts layers count tokens per expert (integers in [0, experts - 1], the last
    bin taking the maximum), and over the input's own range (min == max), values outside not counted."""
    ids = torch.tensor([3.0, 0.0, 7.0, 7.0, 2.0, 9.0, -1.0, 3.0, 6.5])
    run(Fn(lambda x: (torch.histc(x, bins=8, min=0, max=7), torch.histc(x, bins=5), torch.histc(x * 0 + 2, bins=4))),
        (ids,))


def test_grouped_matrix_product() -> None:
    """executorch::grouped_mm (mixture-of-experts layers): each run of rows times its expert's weight,
    empty groups skipped, rows past the last offset zero; offsets that decrease or pass the rows are
    an error, not a read out of bounds."""
    import executorch.export._moe  # noqa: F401  registers the operator

    torch.manual_seed(0)
    w = torch.randn(4, 24, 40)
    model = Fn(lambda x, offsets: torch.ops.executorch.grouped_mm(x, w, offsets))
    x = r(13, 24)
    for offsets in ([3, 3, 9, 11], [0, 0, 0, 13], [13, 13, 13, 13]):
        run(model, (x, torch.tensor(offsets, dtype=torch.int32)))
    method = Runtime.get().load_program(export(model, (x, torch.tensor([3, 3, 9, 11], dtype=torch.int32)))).load_method()
    for bad in ([3, 2, 9, 11], [3, 3, 9, 14]):
        with pytest.raises(RuntimeError, match="non-decreasing and at most 13"):
            method.execute([x.numpy(), np.array(bad, dtype=np.int32)])


def test_index_select_and_constant_padding_by_rows() -> None:
    """index_select along each dimension (repeated indices; torch.roll's decomposition)
    and constant padding (positive, negative and mixed, on every dimension) copy whole rows; the
    values are torch's."""
    torch.manual_seed(0)
    x = r(3, 4, 5)
    idx = torch.tensor([2, 0, 3, 2])
    run(Fn(lambda a, i: (a.index_select(0, i[:2]), a.index_select(1, i), a.index_select(2, i),
                         torch.roll(a, (1, -2), (1, 2)))), (x, idx))
    run(Fn(lambda a: (F.pad(a, (1, 2, 0, 1, 2, 0), value=-1.5), F.pad(a, (-1, 2, 1, -2)), F.pad(a, (0, 0, -3, 0)),
                      F.pad(a[0, 0], (3, 1)))), (x,))
    method = Runtime.get().load_program(export(Fn(lambda a, i: a.index_select(1, i)), (x, idx))).load_method()
    with pytest.raises(RuntimeError, match="index 4 is out of range for a dimension of 4"):
        method.execute([x.numpy(), np.array([0, 4, 1, 1])])
