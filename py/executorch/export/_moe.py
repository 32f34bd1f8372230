"""Mixture-of-experts layers: the grouped matrix product as one operator with a kernel of its own.

transformers' experts (Mixtral, Qwen2/3-MoE, OLMoE, GPT-OSS and the rest of its `grouped_mm`
implementation) sort the token-expert pairs by expert, count them per expert (`aten::histc`), and
multiply each expert's run of rows by that expert's weight in one call: `aten::_grouped_mm` (bf16),
or `transformers::grouped_mm_fallback`, an operator of transformers' own, elsewhere. Both become
`executorch::grouped_mm`, whose arithmetic is the fallback's below.
"""

from __future__ import annotations

from typing import Any

import torch

GROUPED_MM = "executorch::grouped_mm"


@torch.library.custom_op(GROUPED_MM, mutates_args=())
def grouped_mm(x: torch.Tensor, weight: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """x [S, K] by group: rows [offsets[e - 1], offsets[e]) (from 0 for e = 0) times weight[e]
    [K, N], each group one matrix product; rows from offsets[-1] on are zero. offsets: int32 or
    int64, non-decreasing, at most S."""
    out = torch.zeros(x.shape[0], weight.shape[2], dtype=x.dtype, device=x.device)
    start = 0
    for e, end in enumerate(offsets.tolist()):
        out[start:end] = x[start:end] @ weight[e]
        start = end
    return out


@grouped_mm.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    return x.new_empty(x.shape[0], weight.shape[2])


def _grouped(x: torch.Tensor, weight: torch.Tensor, offs: torch.Tensor | None = None, bias: Any = None,
             out_dtype: Any = None) -> Any:
    if (offs is None or bias is not None or x.dim() != 2 or weight.dim() != 3 or
            out_dtype not in (None, x.dtype)):
        return NotImplemented  # the call stays as it is, and export names it as unsupported
    return torch.ops.executorch.grouped_mm(x, weight, offs)


def add_moe_decompositions(table: Any) -> None:
    """Adds to a decomposition table: the grouped products of 2-D rows by 3-D expert weights, as
    `executorch::grouped_mm` (transformers' operator only where transformers registered it)."""
    table[torch.ops.aten._grouped_mm.default] = _grouped
    namespace = getattr(torch.ops, "transformers", None)
    fallback = getattr(namespace, "grouped_mm_fallback", None) if namespace is not None else None
    if fallback is not None:
        table[fallback.default] = _grouped
