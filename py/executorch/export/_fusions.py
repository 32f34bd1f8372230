"""Patterns of transformer blocks that decomposition spells as chains of small operators, each
replaced by one operator with a kernel of its own.

RMS norm (Llama, Qwen2, Mistral, Phi-3; Gemma's in float32) decomposes into a dtype conversion, a power, a mean,
an add, a reciprocal square root, two products and a conversion back: eight kernels per norm, two
norms per layer, each reading the row again. `executorch::rms_norm` is one pass. Rotary position
embedding (`q * cos + rotate_half(q) * sin`) is two slices, a negation, a concatenation, two
products and a sum for each of the query and the key; `executorch::rope` is one. The torch
implementations below are the references the runtime's kernels follow (docs/program_format.md
states the arithmetic). Grouped-query attention (Llama, Mistral, Qwen2) repeats each key/value head
for its queries (`repeat_kv`: an expand and a copy of the whole cache, per layer and step) before
attention; the attention kernels read a shared head themselves (enable_gqa), so the copy is dropped.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import torch

from executorch.export._rewrite import _shape, _single_user

aten = torch.ops.aten
RMS_NORM = "executorch::rms_norm"
ROPE = "executorch::rope"


@torch.library.custom_op(RMS_NORM, mutates_args=())
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """weight * (x * rsqrt(mean(x², last dim) + eps)): the norm computed in float32 and rounded to
    x's dtype, then multiplied by `weight` (x's last size and dtype) as Llama's RMSNorm does."""
    x32 = x.float()
    y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    return weight * y.to(x.dtype)


@rms_norm.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op(ROPE, mutates_args=())
def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2]); cos and
    sin broadcast to x, whose last size D is even. Each product and the sum rounded to x's dtype,
    as torch computes the pattern."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


@rope.register_fake
def _(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _call(n: object, target: object) -> TypeGuard[torch.fx.Node]:
    return isinstance(n, torch.fx.Node) and n.op == "call_function" and n.target == target


def _cast_to(n: object, dtype: torch.dtype) -> TypeGuard[torch.fx.Node]:
    """Whether `n` is a dtype conversion (and nothing else) to `dtype`."""
    return _call(n, aten._to_copy.default) and set(n.kwargs) <= {"dtype"} and n.kwargs.get("dtype") == dtype


def _other(mul: torch.fx.Node, operand: torch.fx.Node) -> object:
    """The operand of binary `mul` that is not `operand` (None where neither or both are)."""
    if len(mul.args) != 2 or (mul.args[0] is operand) == (mul.args[1] is operand):
        return None
    return mul.args[1] if mul.args[0] is operand else mul.args[0]


# A pattern found: its last node, and the operator and arguments that replace it.
_Found = tuple[torch.fx.Node, Any, tuple[torch.fx.Node, Any, Any]]


def _rms_norm_at(pw: torch.fx.Node) -> _Found | None:
    """The RMS norm whose square is `pw`, or None."""
    if not _call(pw, aten.pow.Tensor_Scalar) or pw.args[1] != 2:
        return None
    x32 = pw.args[0]
    shape = _shape(x32)
    if shape is None or not shape or x32.meta["val"].dtype != torch.float32:
        return None
    mean = _single_user(pw)
    if not _call(mean, aten.mean.dim) or list(mean.args[1]) not in ([-1], [len(shape) - 1]) or not (
            len(mean.args) > 2 and mean.args[2]):
        return None
    add = _single_user(mean)
    if not _call(add, aten.add.Tensor) or add.args[0] is not mean or not isinstance(add.args[1], (int, float)) or \
            add.kwargs.get("alpha", 1) != 1:
        return None
    rs = _single_user(add)
    scaled = _single_user(rs) if _call(rs, aten.rsqrt.default) else None
    if not _call(scaled, aten.mul.Tensor) or _other(scaled, rs) is not x32 or _shape(scaled) != shape:
        return None
    # The input: x32 itself (float32 programs), or a half tensor converted only for the norm.
    x = x32
    if _cast_to(x32, torch.float32) and len(x32.args) == 1 and set(x32.users) == {pw, scaled}:
        x = x32.args[0]
    if not isinstance(x, torch.fx.Node):
        return None
    dtype = x.meta["val"].dtype
    tail = _single_user(scaled)
    if tail is None:
        return None
    operand = scaled
    if dtype != torch.float32:  # weight * y.to(dtype); Gemma's y * weight in float32 stays as it is
        if not _cast_to(tail, dtype):
            return None
        operand, tail = tail, _single_user(tail)
    if not _call(tail, aten.mul.Tensor):
        return None
    weight = _other(tail, operand)
    if not isinstance(weight, torch.fx.Node) or _shape(weight) != shape[-1:] or weight.meta["val"].dtype != dtype or \
            _shape(tail) != shape:
        return None
    return tail, torch.ops.executorch.rms_norm.default, (x, weight, float(add.args[1]))


def _half_slice(n: object, x: torch.fx.Node, first: bool) -> bool:
    """Whether `n` is x[..., :D/2] (first) or x[..., D/2:] over x's last dimension of size D."""
    shape = _shape(x)
    if not _call(n, aten.slice.Tensor) or n.args[0] is not x or shape is None or not shape or shape[-1] % 2:
        return False
    given: list[Any] = list(n.args[1:])
    dim, start, end, step = given + [0, None, None, 1][len(given):]
    half = shape[-1] // 2
    start = start or 0
    end = shape[-1] if end is None else min(end, shape[-1])
    return dim in (-1, len(shape) - 1) and step == 1 and (start, end) == ((0, half) if first else (half, shape[-1]))


def _rope_at(cat: torch.fx.Node) -> _Found | None:
    """The rotary embedding whose rotate_half ends in `cat`, or None."""
    if not _call(cat, aten.cat.default) or len(cat.args[0]) != 2:
        return None
    neg, first = cat.args[0]
    shape = _shape(cat)
    if shape is None or (cat.args[1] if len(cat.args) > 1 else 0) not in (-1, len(shape) - 1):
        return None
    if not _call(neg, aten.neg.default) or not isinstance(first, torch.fx.Node) or first.op != "call_function":
        return None
    x = first.args[0]
    if not isinstance(x, torch.fx.Node) or not _half_slice(first, x, True) or not _half_slice(neg.args[0], x, False) or _shape(x) != shape:
        return None
    by_sin = _single_user(cat)
    total = _single_user(by_sin) if _call(by_sin, aten.mul.Tensor) else None
    if not _call(total, aten.add.Tensor) or total.kwargs.get("alpha", 1) != 1 or _shape(total) != shape:
        return None
    by_cos = _other(total, by_sin)
    if not _call(by_cos, aten.mul.Tensor) or len(by_cos.users) != 1:
        return None
    cos, sin = _other(by_cos, x), _other(by_sin, cat)
    dtype = x.meta["val"].dtype
    for t in (cos, sin):
        t_shape = _shape(t)
        if not isinstance(t, torch.fx.Node) or t_shape is None or t.meta["val"].dtype != dtype or len(t_shape) > len(shape) or not t_shape or \
                t_shape[-1] != shape[-1] or torch.broadcast_shapes(t_shape, shape) != torch.Size(shape):
            return None
    return total, torch.ops.executorch.rope.default, (x, cos, sin)


def _repeated_heads(n: object) -> tuple[torch.fx.Node, int] | None:
    """(x, r) where `n` is transformers' repeat_kv of x [B, H, S, D]: each head repeated r times in a
    row, unsqueeze(2), expand to [B, H, r, S, D], copy and view as [B, H * r, S, D]. None otherwise."""
    if not (_call(n, aten.view.default) or _call(n, aten._unsafe_view.default) or _call(n, aten.reshape.default)):
        return None
    inner = n.args[0]
    if _call(inner, aten.clone.default) and inner.kwargs.get("memory_format", torch.contiguous_format) in (
            torch.contiguous_format, torch.preserve_format):
        inner = inner.args[0]
    if not _call(inner, aten.expand.default) or not _call(inner.args[0], aten.unsqueeze.default):
        return None
    x, dim = inner.args[0].args
    shape, expanded, out = _shape(x), _shape(inner), _shape(n)
    if not isinstance(x, torch.fx.Node) or shape is None or expanded is None or out is None or len(shape) != 4 \
            or dim != 2 or len(expanded) != 5:
        return None
    b, h, s_len, d = shape
    r = expanded[2]
    if expanded != [b, h, r, s_len, d] or out != [b, h * r, s_len, d] or r < 1:
        return None
    return x, r


def _grouped_attention(sdpa: torch.fx.Node) -> None:
    """Where attention's key and value are both repeat_kv of fewer heads (the same number of times),
    reads those heads instead with enable_gqa: the repeated copies are never made."""
    if not _call(sdpa, aten.scaled_dot_product_attention.default) or len(sdpa.args) < 3:
        return
    args, kwargs = list(sdpa.args), dict(sdpa.kwargs)
    if (args[7] if len(args) > 7 else kwargs.get("enable_gqa", False)) is not False:
        return
    key, value = _repeated_heads(args[1]), _repeated_heads(args[2])
    if key is None or value is None or key[1] != value[1] or key[1] == 1:
        return
    args[1], args[2] = key[0], value[0]
    if len(args) > 7:
        args[7] = True
    else:
        kwargs["enable_gqa"] = True
    sdpa.args, sdpa.kwargs = tuple(args), kwargs


def fuse(graph: torch.fx.Graph, grouped_attention: bool = True) -> None:
    """Each decomposed RMS norm and rotary embedding in `graph` as one operator; attention over
    repeated key/value heads reading the heads once (`grouped_attention`)."""
    for n in list(graph.nodes):  # dtype assertions (which lowering skips) would read the patterns' values
        if _call(n, aten._assert_tensor_metadata.default):
            graph.erase_node(n)
    for n in list(graph.nodes):
        found = _rms_norm_at(n) or _rope_at(n)
        if found is None:
            continue
        last, target, args = found
        with graph.inserting_before(last):
            fused = graph.call_function(target, args)
        fused.meta["val"] = torch.empty(_shape(last), dtype=args[0].meta["val"].dtype, device="meta")
        last.replace_all_uses_with(fused)
    if grouped_attention:
        for n in list(graph.nodes):
            _grouped_attention(n)
    graph.eliminate_dead_code()
