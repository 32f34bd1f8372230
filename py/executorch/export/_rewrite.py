"""Graph rewrites before lowering: the same values from fewer or cheaper operators.

Decomposition leaves patterns no kernel should run as written, and operators the kernels state
otherwise (mixed dtypes, isinf). A linear layer on a non-contiguous
input (nn.MultiheadAttention's projections, batch first) becomes a bmm against its weight expanded
to every batch: folded at export, that is one weight copy per batch in the program, read on every
call. Here it becomes the matrix product it is, with the bias added by addmm.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import torch

aten = torch.ops.aten
_VIEWS = {aten.view.default, aten._unsafe_view.default}


def _node(graph: torch.fx.Graph, target: Any, args: tuple, like: torch.Tensor, shape: list[int],
          dtype: torch.dtype | None = None, kwargs: dict | None = None) -> torch.fx.Node:
    """A new call with the meta value lowering reads: `shape`, of `dtype` (default: like's)."""
    n = graph.call_function(target, args, kwargs or {})
    n.meta["val"] = torch.empty(shape, dtype=dtype or like.dtype, device="meta")
    return n


def _shape(n: Any) -> list[int] | None:
    val = n.meta.get("val") if isinstance(n, torch.fx.Node) else None
    return list(val.shape) if isinstance(val, torch.Tensor) else None


def _constant_nodes(ep: torch.export.ExportedProgram) -> set[torch.fx.Node]:
    """Nodes that depend on no user input (parameters, buffers, constants and what they compute)."""
    sig = ep.graph_signature
    names = {*sig.inputs_to_parameters, *sig.inputs_to_buffers, *sig.inputs_to_lifted_tensor_constants}
    const: set[torch.fx.Node] = set()
    for n in ep.graph.nodes:
        if n.op == "placeholder" and n.name in names:
            const.add(n)
        elif n.op == "call_function" and all(a in const for a in n.all_input_nodes):
            const.add(n)
    return const


def _drop_identity_expands(graph: torch.fx.Graph) -> None:
    """expand to the shape the tensor already has is the tensor itself."""
    for n in list(graph.nodes):
        if n.op == "call_function" and n.target == aten.expand.default and _shape(n) == _shape(n.args[0]):
            n.replace_all_uses_with(n.args[0])
            graph.erase_node(n)


def _single_user(n: torch.fx.Node) -> torch.fx.Node | None:
    users = list(n.users)
    return users[0] if len(users) == 1 else None


def _bias_add(out: torch.fx.Node, columns: int, dtype: torch.dtype, const: set[torch.fx.Node]) -> tuple | None:
    """The add of a per-column constant vector that alone reads `out` (through views): (add, bias)."""
    node = out
    while (user := _single_user(node)) is not None and user.target in _VIEWS:
        node = user
    add = _single_user(node)
    if add is None or add.target != aten.add.Tensor or add.kwargs.get("alpha", 1) != 1 or len(add.args) != 2:
        return None
    bias = add.args[1] if add.args[0] is node else add.args[0]
    if not isinstance(bias, torch.fx.Node) or bias not in const or _shape(bias) != [columns]:
        return None
    if bias.meta["val"].dtype != dtype or _shape(add) != _shape(node):
        return None
    return add, bias


def _batched_to_mm(graph: torch.fx.Graph, const: set[torch.fx.Node]) -> None:
    """bmm(a, expand(w)) with w the same for every batch is mm(a as rows, w); a per-column constant
    added to it after, addmm."""
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target != aten.bmm.default:
            continue
        a, b = n.args
        while isinstance(b, torch.fx.Node) and b.target in _VIEWS and _shape(b) == _shape(b.args[0]):
            b = b.args[0]  # a view to the same shape
        if not isinstance(b, torch.fx.Node) or b.target != aten.expand.default or a in const:
            continue
        src = b.args[0]
        src_shape, a_shape = _shape(src), _shape(a)
        if src_shape is None or a_shape is None or not (len(src_shape) == 2 or (len(src_shape) == 3 and src_shape[0] == 1)):
            continue
        batch, m, k = a_shape
        cols = src_shape[-1]
        like = n.meta["val"]
        with graph.inserting_before(n):
            rows = _node(graph, aten.view.default, (a, [batch * m, k]), like, [batch * m, k])
            w = src if len(src_shape) == 2 else _node(graph, aten.select.int, (src, 0, 0), like, src_shape[1:])
            fused = _bias_add(n, cols, like.dtype, const)
            if fused is not None:
                add, bias = fused
                mm = _node(graph, aten.addmm.default, (bias, rows, w), like, [batch * m, cols])
            else:
                mm = _node(graph, aten.mm.default, (rows, w), like, [batch * m, cols])
            out = _node(graph, aten.view.default, (mm, [batch, m, cols]), like, [batch, m, cols])
        n.replace_all_uses_with(out)
        graph.erase_node(n)
        if fused is not None:
            # The views between hold the sum now; the add's readers read them.
            add.replace_all_uses_with(add.args[0] if add.args[1] is bias else add.args[1])
            graph.erase_node(add)


# Elementwise operators that promote their tensor operands to the output's dtype (argument
# positions of those operands).
_PROMOTING = {
    aten.add.Tensor: (0, 1), aten.sub.Tensor: (0, 1), aten.mul.Tensor: (0, 1), aten.div.Tensor: (0, 1),
    aten.maximum.default: (0, 1), aten.minimum.default: (0, 1), aten.where.self: (1, 2),
}


def _explicit_promotions(graph: torch.fx.Graph) -> None:
    """Mixed-dtype elementwise ops (T5's half-precision layer norm multiplies float16 by float32,
    BLOOM's ALiBi float slopes by integer positions) read operands converted to the floating output
    dtype first, as torch's type promotion computes them, so that every kernel sees one dtype."""
    for n in list(graph.nodes):
        positions = _PROMOTING.get(n.target) if n.op == "call_function" else None
        out = n.meta.get("val") if positions else None
        if positions is None or not isinstance(out, torch.Tensor) or not out.is_floating_point():
            continue
        args = list(n.args)
        for i in positions:
            a = args[i] if i < len(args) else None
            val = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
            if isinstance(val, torch.Tensor) and val.dtype != out.dtype:
                with graph.inserting_before(n):
                    args[i] = _node(graph, aten._to_copy.default, (a,), out, list(val.shape), kwargs={"dtype": out.dtype})
        n.args = tuple(args)


def _leading_none_indices(graph: torch.fx.Graph) -> None:
    """x[:, :, idx] (index.Tensor with None before adjacent index tensors, Falcon's key and value
    split) as the index of a permuted x whose indexed dimensions come first, permuted back: the
    form the device's index kernel runs (indices for the leading dimensions)."""
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target != aten.index.Tensor or len(n.args) != 2:
            continue
        x, indices = n.args
        shape, out = _shape(x), n.meta.get("val")
        indices = list(indices)
        while indices and indices[-1] is None:
            indices.pop()
        lead = 0
        while lead < len(indices) and indices[lead] is None:
            lead += 1
        count = len(indices) - lead
        if shape is None or not isinstance(out, torch.Tensor) or lead == 0 or count == 0 or None in indices[lead:]:
            continue
        order = [*range(lead, lead + count), *range(lead), *range(lead + count, len(shape))]
        moved = [shape[d] for d in order]
        rank = out.dim() - (len(shape) - count)  # the broadcast indices' dimensions
        gathered = [*out.shape[lead:lead + rank], *shape[:lead], *shape[lead + count:]]
        with graph.inserting_before(n):
            xp = _node(graph, aten.permute.default, (x, order), out, moved)
            y = _node(graph, aten.index.Tensor, (xp, indices[lead:]), out, gathered)
            back = [*range(rank, rank + lead), *range(rank), *range(rank + lead, out.dim())]
            z = _node(graph, aten.permute.default, (y, back), out, list(out.shape))
        n.replace_all_uses_with(z)
        graph.erase_node(n)


def _isinf_any(graph: torch.fx.Graph) -> None:
    """isinf(x) as abs(x) == inf, and any(x) over all elements as any over x flattened: operators
    the kernels have."""
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target not in (aten.isinf.default, aten.any.default):
            continue
        x = n.args[0]
        val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor):
            continue
        if n.target == aten.isinf.default and not val.is_floating_point():
            continue
        shape = list(n.meta["val"].shape)
        with graph.inserting_before(n):
            if n.target == aten.isinf.default:
                magnitude = _node(graph, aten.abs.default, (x,), val, list(val.shape))
                new = _node(graph, aten.eq.Scalar, (magnitude, float("inf")), val, shape, dtype=torch.bool)
            else:
                flat = _node(graph, aten.view.default, (x, [val.numel()]), val, [val.numel()])
                new = _node(graph, aten.any.dim, (flat, 0), val, shape, dtype=torch.bool)
        n.replace_all_uses_with(new)
        graph.erase_node(n)


def only_first_output_read(n: torch.fx.Node) -> bool:
    """Whether every reader of multi-output node `n` is getitem(n, 0)."""
    return all(u.target is operator.getitem and u.args[1] == 0 for u in n.users)


def _group_norm(graph: torch.fx.Graph) -> None:
    """native_group_norm whose mean and rstd go unread, as the layer norm of each group (viewed
    [N, G, C/G * HxW], no affine) and the per-channel weight and bias broadcast over the rest."""
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target != aten.native_group_norm.default:
            continue
        x, weight, bias, batch, channels, hw, groups, eps = n.args
        shape = _shape(x)
        if not only_first_output_read(n) or shape is None or not groups or channels % groups or shape[:2] != [batch, channels]:
            continue
        val = x.meta["val"]
        width = channels // groups * hw
        trailing = [1] * (len(shape) - 2)
        with graph.inserting_before(n):
            grouped = _node(graph, aten.view.default, (x, [batch, groups, width]), val, [batch, groups, width])
            ln = graph.call_function(aten.native_layer_norm.default, (grouped, [width], None, None, eps))
            stats = torch.empty([batch, groups, 1], dtype=val.dtype, device="meta")
            ln.meta["val"] = (torch.empty([batch, groups, width], dtype=val.dtype, device="meta"), stats, stats)
            normed = graph.call_function(operator.getitem, (ln, 0))
            normed.meta["val"] = ln.meta["val"][0]
            y = _node(graph, aten.view.default, (normed, shape), val, shape)
            for param, op in ((weight, aten.mul.Tensor), (bias, aten.add.Tensor)):
                if isinstance(param, torch.fx.Node):
                    per_channel = _node(graph, aten.view.default, (param, [channels, *trailing]), val, [channels, *trailing])
                    y = _node(graph, op, (y, per_channel), val, shape)
        for u in list(n.users):
            u.replace_all_uses_with(y)
            graph.erase_node(u)
        graph.erase_node(n)


def _vector_norm(graph: torch.fx.Graph) -> None:
    """The 2-norm linalg_vector_norm(x, 2, dims, keepdim) as sqrt(sum(x * x)), squared and summed
    in float32 (a half-precision square overflows above 256)."""
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target != aten.linalg_vector_norm.default:
            continue
        args = list(n.args) + [None] * (4 - len(n.args))
        x, order, dims, keepdim = args[:4]
        keepdim = bool(n.kwargs.get("keepdim", keepdim))
        dims = n.kwargs.get("dim", dims)
        val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
        if (order not in (2, 2.0) or n.kwargs.get("dtype") is not None or not isinstance(val, torch.Tensor)
                or not val.is_floating_point() or not dims):
            continue
        out = n.meta["val"]
        wide = torch.empty(list(val.shape), dtype=torch.float32, device="meta")
        with graph.inserting_before(n):
            v = x
            if val.dtype != torch.float32:
                v = _node(graph, aten._to_copy.default, (x,), wide, list(val.shape), kwargs={"dtype": torch.float32})
            square = _node(graph, aten.mul.Tensor, (v, v), wide, list(val.shape))
            total = _node(graph, aten.sum.dim_IntList, (square, list(dims), keepdim), wide, list(out.shape))
            y = _node(graph, aten.sqrt.default, (total,), wide, list(out.shape))
            if out.dtype != torch.float32:
                y = _node(graph, aten._to_copy.default, (y,), out, list(out.shape), kwargs={"dtype": out.dtype})
        n.replace_all_uses_with(y)
        graph.erase_node(n)


def _trailing_reductions(graph: torch.fx.Graph) -> None:
    """mean.dim and sum.dim_IntList over dimensions that are not the last ones (LeViT's mean over
    tokens) as the reduction of x permuted so that they are: the form the device's row reduction
    runs."""
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target not in (aten.mean.dim, aten.sum.dim_IntList) or n.kwargs.get("dtype"):
            continue
        x = n.args[0]
        shape = _shape(x)
        if shape is None or len(n.args) < 2 or not n.args[1]:
            continue
        rank = len(shape)
        reduced = sorted({d % rank for d in n.args[1]})
        kept = [d for d in range(rank) if d not in reduced]
        if reduced == list(range(rank - len(reduced), rank)):
            continue  # already trailing
        keepdim = bool(n.args[2]) if len(n.args) > 2 else bool(n.kwargs.get("keepdim", False))
        val, out = x.meta["val"], n.meta["val"]
        order = kept + reduced
        with graph.inserting_before(n):
            moved = _node(graph, aten.permute.default, (x, order), val, [shape[d] for d in order])
            trailing = list(range(len(kept), rank))
            y = _node(graph, n.target, (moved, trailing, False), val, [shape[d] for d in kept])
            if keepdim:
                y = _node(graph, aten.view.default, (y, list(out.shape)), val, list(out.shape))
        n.replace_all_uses_with(y)
        graph.erase_node(n)


def _trailing_softmax(graph: torch.fx.Graph) -> None:
    """_softmax and _log_softmax over a dimension that is not the last (ResNeSt's split attention
    over its radix, CoaT's factorized attention over tokens) as the same over x permuted so that it
    is, permuted back: the device's softmax runs along rows."""
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target not in (aten._softmax.default, aten._log_softmax.default):
            continue
        x = n.args[0]
        shape = _shape(x)
        if not shape or n.args[1] % len(shape) == len(shape) - 1:
            continue
        rank, d = len(shape), n.args[1] % len(shape)
        order = [i for i in range(rank) if i != d] + [d]
        moved_shape = [shape[i] for i in order]
        out = n.meta["val"]
        with graph.inserting_before(n):
            moved = _node(graph, aten.permute.default, (x, order), x.meta["val"], moved_shape)
            y = _node(graph, n.target, (moved, rank - 1, *n.args[2:]), out, moved_shape)
            back = _node(graph, aten.permute.default, (y, [order.index(i) for i in range(rank)]), out, shape)
        n.replace_all_uses_with(back)
        graph.erase_node(n)


def _batched_attention(graph: torch.fx.Graph) -> None:
    """scaled_dot_product_attention of 5-D or deeper query, key and value (Twins' and NesT's
    windows) as the 4-D one, the leading sizes (the same in all three) merged into one batch; no
    mask. The output is viewed back."""
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target != aten.scaled_dot_product_attention.default:
            continue
        shapes = [s for s in (_shape(t) for t in n.args[:3]) if s is not None and len(s) > 4]
        mask = n.args[3] if len(n.args) > 3 else n.kwargs.get("attn_mask")
        if len(shapes) != 3 or mask is not None:
            continue
        lead = shapes[0][:-3]
        if any(s[:-3] != lead for s in shapes) or not all(isinstance(d, int) for s in shapes for d in s):
            continue
        batch = math.prod(lead)
        out = n.meta["val"]
        with graph.inserting_before(n):
            views = [_node(graph, aten.view.default, (t, [batch, *s[-3:]]), t.meta["val"], [batch, *s[-3:]])
                     for t, s in zip(n.args[:3], shapes)]
            y = _node(graph, n.target, (*views, *n.args[3:]), out, [batch, *out.shape[-3:]], kwargs=dict(n.kwargs))
            back = _node(graph, aten.view.default, (y, list(out.shape)), out, list(out.shape))
        n.replace_all_uses_with(back)
        graph.erase_node(n)


def _max_with_indices(graph: torch.fx.Graph) -> None:
    """max.dim (VOLO's class-attention pooling) as argmax along the dimension and the gather of
    the values there, which the device runs."""
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target != aten.max.dim:
            continue
        x = n.args[0]
        shape = _shape(x)
        if not shape or any(not isinstance(u.args[1], int) for u in n.users if u.target is operator.getitem):
            continue
        d = n.args[1] % len(shape)
        keepdim = bool(n.args[2]) if len(n.args) > 2 else bool(n.kwargs.get("keepdim", False))
        val, rank = x.meta["val"], len(shape)
        order = [i for i in range(rank) if i != d] + [d]  # the device's argmax runs along rows
        moved_kept = [shape[i] for i in order[:-1]] + [1]
        kept = [1 if i == d else s for i, s in enumerate(shape)]
        with graph.inserting_before(n):
            moved = x if d == rank - 1 else _node(graph, aten.permute.default, (x, order), val,
                                                  [shape[i] for i in order])
            index = _node(graph, aten.argmax.default, (moved, rank - 1, True), val, moved_kept, dtype=torch.int64)
            values = _node(graph, aten.gather.default, (moved, rank - 1, index), val, moved_kept)
            if d != rank - 1:
                inverse = [order.index(i) for i in range(rank)]
                index = _node(graph, aten.permute.default, (index, inverse), val, kept, dtype=torch.int64)
                values = _node(graph, aten.permute.default, (values, inverse), val, kept)
            if not keepdim:
                dropped = [s for i, s in enumerate(shape) if i != d]
                index = _node(graph, aten.squeeze.dims, (index, [d]), val, dropped, dtype=torch.int64)
                values = _node(graph, aten.squeeze.dims, (values, [d]), val, dropped)
        for u in list(n.users):
            u.replace_all_uses_with(values if u.args[1] == 0 else index)
            graph.erase_node(u)
        graph.erase_node(n)


def _bool_not(graph: torch.fx.Graph) -> None:
    """bitwise_not of a bool tensor (DeBERTa's masks) is logical_not."""
    for n in graph.nodes:
        if (n.op == "call_function" and n.target == aten.bitwise_not.default and
                isinstance(n.args[0], torch.fx.Node) and n.args[0].meta["val"].dtype == torch.bool):
            n.target = aten.logical_not.default


def _slice_scatter_as_cat(graph: torch.fx.Graph) -> None:
    """slice_scatter(x, src, dim, start, end) with step 1 (MViT's class token) as x's slices
    before and after, and src, concatenated. Not for a graph input (program state: an LLM's cache
    is written in place)."""
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target != aten.slice_scatter.default:
            continue
        x, src, dim, start, end, step = (list(n.args) + [0, None, None, 1][len(n.args) - 2:])[:6]
        shape = _shape(x)
        if (step != 1 or shape is None or x.op == "placeholder" or
                not all(isinstance(v, int) for v in [*shape, dim, start or 0, end or 0])):
            continue
        d = dim % len(shape)
        size = shape[d]
        lo = min(max(0 if start is None else start + size if start < 0 else start, 0), size)
        hi = min(max(size if end is None else end + size if end < 0 else end, lo), size)
        val = x.meta["val"]
        pieces = []
        with graph.inserting_before(n):
            for a, b in ((0, lo), (hi, size)):
                if b > a:
                    piece_shape = [b - a if i == d else s for i, s in enumerate(shape)]
                    pieces.append(_node(graph, aten.slice.Tensor, (x, d, a, b), val, piece_shape))
            pieces.insert(1 if lo > 0 else 0, src)
            y = _node(graph, aten.cat.default, (pieces, d), val, shape) if len(pieces) > 1 else src
        n.replace_all_uses_with(y)
        graph.erase_node(n)


def _additive_masks(graph: torch.fx.Graph) -> None:
    """A bool attention mask as the float one it means, log(float(mask)): 0 where attending, -inf
    where not (log(0) is exactly -inf). XNNPACK has no bool tensors; its attention takes this
    form, and each mask is converted once for every attention reading it."""
    converted: dict[torch.fx.Node, torch.fx.Node] = {}
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target != aten.scaled_dot_product_attention.default:
            continue
        mask = n.args[3] if len(n.args) > 3 else n.kwargs.get("attn_mask")
        query = n.args[0].meta.get("val") if isinstance(n.args[0], torch.fx.Node) else None
        mval = mask.meta.get("val") if isinstance(mask, torch.fx.Node) else None
        if mval is None or mval.dtype != torch.bool or query is None:
            continue
        if mask not in converted:
            with graph.inserting_after(mask):
                as_float = _node(graph, aten._to_copy.default, (mask,), query, list(mval.shape),
                                 kwargs={"dtype": query.dtype})
            with graph.inserting_after(as_float):
                converted[mask] = _node(graph, aten.log.default, (as_float,), query, list(mval.shape))
        if len(n.args) > 3:
            n.args = (*n.args[:3], converted[mask], *n.args[4:])
        else:
            n.kwargs = {**n.kwargs, "attn_mask": converted[mask]}


# Products of at most this many rows (a decoder's step) are worth joining: each is one pass over its
# weights, and on the device the time of a step goes mostly to launching them.
_FEW_ROWS = 8


def _transposed_parameter(w: Any, graph_inputs: set[torch.fx.Node]) -> torch.fx.Node | None:
    """The parameter whose transpose `w` is (a linear layer's weight as mm takes it), or None."""
    if (isinstance(w, torch.fx.Node) and w.target == aten.permute.default and list(w.args[1]) == [1, 0]
            and w.args[0] in graph_inputs):
        return w.args[0]
    return None


def _sibling_products(graph: torch.fx.Graph, const: set[torch.fx.Node]) -> None:
    """Linear layers of a few rows that read the same input (views of one tensor to one shape) and
    whose weights are parameters become one product by the weights joined column-wise, and a slice
    of its columns for each: attention's query, key and value projections, an MLP's gate and up.
    With one row the slices are contiguous runs of the product and cost nothing; one kernel reads
    all the weights instead of two or three each reading a part."""
    inputs = {n for n in const if n.op == "placeholder"}
    groups: dict[tuple, list[torch.fx.Node]] = {}
    for n in graph.nodes:
        if n.op != "call_function" or n.target not in (aten.mm.default, aten.addmm.default):
            continue
        addmm = n.target == aten.addmm.default
        if addmm and (n.kwargs or len(n.args) != 3):  # beta and alpha other than 1
            continue
        x, w = (n.args[1], n.args[2]) if addmm else (n.args[0], n.args[1])
        shape = _shape(x)
        if shape is None or len(shape) != 2 or shape[0] > _FEW_ROWS or _transposed_parameter(w, inputs) is None:
            continue
        if addmm and (not isinstance(n.args[0], torch.fx.Node) or n.args[0] not in inputs or
                      _shape(n.args[0]) != [int(n.meta["val"].shape[1])]):
            continue
        source = x.args[0] if isinstance(x, torch.fx.Node) and x.target in _VIEWS else x
        groups.setdefault((source, tuple(shape), addmm, n.meta["val"].dtype), []).append(n)
    for (_, shape, addmm, _), members in groups.items():
        if len(members) < 2:
            continue
        first = members[0]  # graph order: the others come after it
        like = first.meta["val"]
        widths = [int(m.meta["val"].shape[1]) for m in members]
        x = first.args[1] if addmm else first.args[0]
        with graph.inserting_before(first):
            weights = []
            for m, width in zip(members, widths):
                p = _transposed_parameter(m.args[2] if addmm else m.args[1], inputs)
                weights.append(_node(graph, aten.permute.default, (p, [1, 0]), like, [shape[1], width]))
            joined = _node(graph, aten.cat.default, (weights, 1), like, [shape[1], sum(widths)])
            if addmm:
                bias = _node(graph, aten.cat.default, ([m.args[0] for m in members], 0), like, [sum(widths)])
                product = _node(graph, aten.addmm.default, (bias, x, joined), like, [shape[0], sum(widths)])
            else:
                product = _node(graph, aten.mm.default, (x, joined), like, [shape[0], sum(widths)])
            parts = _column_slices(graph, product, widths, like)
        _replace(members, parts)
    _quantized_siblings(graph, inputs)


def _column_slices(graph: torch.fx.Graph, product: torch.fx.Node, widths: list[int],
                   like: torch.Tensor) -> list[torch.fx.Node]:
    """Slices of `product`'s last dimension, `widths` wide in turn: each sibling's output."""
    shape = _shape(product) or []
    start, parts = 0, []
    for width in widths:
        parts.append(_node(graph, aten.slice.Tensor, (product, len(shape) - 1, start, start + width), like,
                           [*shape[:-1], width]))
        start += width
    return parts


def _replace(members: list[torch.fx.Node], parts: list[torch.fx.Node]) -> None:
    for m, part in zip(members, parts):
        m.replace_all_uses_with(part)
        m.graph.erase_node(m)


def _quantized_siblings(graph: torch.fx.Graph, inputs: set[torch.fx.Node]) -> None:
    """_sibling_products for weight-only quantized layers (executorch::int4_linear, int8_weight_linear):
    their packed weights, scales and biases joined along the output features, one GEMV for all."""
    quantized = {getattr(torch.ops.executorch, name).default for name in ("int4_linear", "int8_weight_linear")
                 if hasattr(torch.ops.executorch, name)}
    groups: dict[tuple, list[torch.fx.Node]] = {}
    for n in graph.nodes:
        if n.op != "call_function" or n.target not in quantized:
            continue
        x, tensors, options = n.args[0], n.args[1:3], n.args[3:-1]  # (x, weight, scale(s), [group,] bias)
        bias = n.args[-1]
        shape = _shape(x)
        if (shape is None or len(shape) < 2 or math.prod(shape[:-1]) > _FEW_ROWS or n.kwargs or
                not all(t in inputs for t in tensors) or (bias is not None and bias not in inputs)):
            continue
        source = x.args[0] if isinstance(x, torch.fx.Node) and x.target in _VIEWS else x
        groups.setdefault((n.target, source, tuple(shape), tuple(options), bias is None, n.meta["val"].dtype),
                          []).append(n)
    for (target, _, shape, options, no_bias, _), members in groups.items():
        if len(members) < 2:
            continue
        first = members[0]
        like = first.meta["val"]
        widths = [int(m.meta["val"].shape[-1]) for m in members]

        def joined(index: int) -> torch.fx.Node:  # argument `index` of every member, along dimension 0
            parts = [m.args[index] for m in members]
            val = parts[0].meta["val"]
            return _node(graph, aten.cat.default, (parts, 0), like, [sum(int(p.meta["val"].shape[0]) for p in parts),
                                                                     *val.shape[1:]], dtype=val.dtype)

        with graph.inserting_before(first):
            bias = None if no_bias else joined(len(first.args) - 1)
            product = _node(graph, target, (first.args[0], joined(1), joined(2), *options, bias), like,
                            [*shape[:-1], sum(widths)])
            parts = _column_slices(graph, product, widths, like)
        _replace(members, parts)


_NOT_MERGED = {aten.empty.memory_format, aten.empty_strided.default, aten.empty_like.default,
               aten.new_empty.default, aten.new_empty_strided.default}


def _mergeable(target: Any) -> bool:
    """Whether two calls of `target` on the same arguments give the same value, with nothing else
    done: operator overloads whose schema mutates nothing and that draw no random numbers (and not
    the uninitialized allocations), and getitem."""
    if target is operator.getitem:
        return True
    if not isinstance(target, torch._ops.OpOverload) or target in _NOT_MERGED:
        return False
    return not target._schema.is_mutable and torch.Tag.nondeterministic_seeded not in target.tags


def _value_key(a: Any) -> Any:
    """A hashable form of an argument (nodes stand for themselves); raises TypeError where none is."""
    if isinstance(a, (list, tuple)):
        return (type(a).__name__, *(_value_key(x) for x in a))
    if isinstance(a, dict):
        return ("dict", *sorted((k, _value_key(v)) for k, v in a.items()))
    hash(a)
    return a


def _common_subexpressions(graph: torch.fx.Graph) -> None:
    """One node for each value computed more than once: the same operator on the same arguments.
    transformers' static cache recomputes the cache positions in every layer (an arange, the
    position copied into each layer's buffer's shape, an add): kernels per layer, the same values.
    aten.copy's result is its source in the shape, dtype and strides of `self`, so `self` counts by
    those alone. Nodes the graph returns stay apart (each output, a mutated buffer's value
    included, keeps a node of its own)."""
    seen: dict[Any, torch.fx.Node] = {}
    for n in list(graph.nodes):
        if n.op != "call_function" or not _mergeable(n.target) or any(u.op == "output" for u in n.users):
            continue
        args: tuple = n.args
        if n.target == aten.copy.default and isinstance(args[0], torch.fx.Node):
            val = args[0].meta.get("val")
            if not isinstance(val, torch.Tensor):
                continue
            args = (("copy into", tuple(val.shape), tuple(val.stride()), val.dtype, val.device), *args[1:])
        try:
            key = (n.target, _value_key(args), _value_key(n.kwargs))
        except TypeError:
            continue
        first = seen.setdefault(key, n)
        if first is not n:
            n.replace_all_uses_with(first)
            graph.erase_node(n)


def simplify(ep: torch.export.ExportedProgram, for_device: bool = False, additive_masks: bool = False) -> None:
    """Rewrites `ep`'s graph in place (after decomposition, before lowering). for_device also
    rewrites what the CUDA backend runs only in another form (group norm, vector norm,
    reductions and softmax over leading dimensions, attention deeper than 4-D, max.dim, bool
    bitwise_not, slice_scatter); the CPU kernels run those as they are. additive_masks
    turns bool attention masks into float ones (for XNNPACK). for_device also joins the linear
    layers of a decoder step that read one input (_sibling_products). Values computed more than
    once are computed once (_common_subexpressions)."""
    graph = ep.graph
    if additive_masks:
        _additive_masks(graph)
    _drop_identity_expands(graph)
    _common_subexpressions(graph)
    _batched_to_mm(graph, _constant_nodes(ep))
    _explicit_promotions(graph)
    _isinf_any(graph)
    if for_device:
        _sibling_products(graph, _constant_nodes(ep))
        _leading_none_indices(graph)
        _group_norm(graph)
        _vector_norm(graph)
        _trailing_reductions(graph)
        _trailing_softmax(graph)
        _batched_attention(graph)
        _max_with_indices(graph)
        _bool_not(graph)
        _slice_scatter_as_cat(graph)
    graph.eliminate_dead_code()
    graph.lint()
