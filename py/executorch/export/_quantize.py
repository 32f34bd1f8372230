"""Quantized linear layers.

int8: weights quantized per output channel at export, activations per row at run time.
`quantize_linear_int8(module)` returns a copy whose nn.Linear layers call the operator
`executorch::int8_linear`, which the program keeps as one instruction (a CPU kernel, and a
CudaBackend kernel built on __dp4a).

int8_weight_only: the same int8 weights and per-channel scales, activations stay floating (the
linear layers of a language model, where decoding reads weights). `quantize_linear_int8_weight_only`
makes the layers call `executorch::int8_weight_linear` (a CPU kernel).

int4: weights only, in groups of `group_size` input features, each group with its own float32
scale; activations stay floating. `quantize_linear_int4(module, group_size)` makes the layers call
`executorch::int4_linear` (a CPU kernel).

The torch implementations below are the references the runtime's kernels follow;
docs/program_format.md states the arithmetic.
"""

from __future__ import annotations

import copy
from typing import Callable

import torch
from torch import nn

OPERATOR = "executorch::int8_linear"


@torch.library.custom_op(OPERATOR, mutates_args=())
def int8_linear(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """float32 x [..., k] times int8 weight [n, k] (row scales `scale`), plus bias: [..., n]."""
    amax = x.abs().amax(dim=-1, keepdim=True)
    inv = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
    q = torch.clamp(torch.round(x * inv), -127, 127).to(torch.int64)  # round half to even
    acc = q @ weight.to(torch.int64).t()  # exact: int64 here, int32 in the kernels (k is bounded)
    y = acc.to(torch.float32) * (amax / 127.0) * scale
    return y + bias if bias is not None else y


def _linear_fake(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


int8_linear.register_fake(_linear_fake)

INT8_WEIGHT_OPERATOR = "executorch::int8_weight_linear"


@torch.library.custom_op(INT8_WEIGHT_OPERATOR, mutates_args=())
def int8_weight_linear(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor,
                       bias: torch.Tensor | None) -> torch.Tensor:
    """x [..., k] times int8 weight [n, k] (row scales `scale`), plus bias: [..., n], computed in
    float32 and returned in x's dtype."""
    y = x.to(torch.float32) @ (weight.to(torch.float32) * scale[:, None]).t()
    y = y + bias.to(torch.float32) if bias is not None else y
    return y.to(x.dtype)


int8_weight_linear.register_fake(_linear_fake)


class Int8Linear(nn.Module):
    """An nn.Linear with its weight quantized to int8, one float32 scale per output feature:
    the row's largest magnitude / 127, values round(w / scale). `weight_only`: activations stay
    floating (executorch::int8_weight_linear); otherwise they are quantized per row as the program
    runs (executorch::int8_linear)."""

    def __init__(self, linear: nn.Linear, weight_only: bool = False) -> None:
        super().__init__()
        w = linear.weight.detach().float()
        scale = w.abs().amax(dim=1) / 127.0
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero row stays zero
        self.weight_only = weight_only
        self.register_buffer("weight", torch.clamp(torch.round(w / scale[:, None]), -127, 127).to(torch.int8))
        self.register_buffer("scale", scale)
        bias = None if linear.bias is None else linear.bias.detach().clone()
        self.register_buffer("bias", bias if bias is None or weight_only else bias.float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight_only:
            return torch.ops.executorch.int8_weight_linear(x, self.weight, self.scale, self.bias)
        return torch.ops.executorch.int8_linear(x, self.weight, self.scale, self.bias)


INT4_OPERATOR = "executorch::int4_linear"


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """uint8 [n, k / 2] -> int values in [-8, 7], [n, k]: column 2i in the low nibble, 2i + 1 in the high."""
    low = (packed & 0x0F).to(torch.int16) - 8
    high = (packed >> 4).to(torch.int16) - 8
    return torch.stack([low, high], dim=-1).reshape(packed.shape[0], -1)


@torch.library.custom_op(INT4_OPERATOR, mutates_args=())
def int4_linear(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, group_size: int,
                bias: torch.Tensor | None) -> torch.Tensor:
    """x [..., k] times the int4 weight [n, k] (packed two to a byte, scales [n, k / group_size]),
    plus bias: [..., n], computed in float32 and returned in x's dtype."""
    w = unpack_int4(packed).to(torch.float32) * scales.repeat_interleave(group_size, dim=1)
    y = x.to(torch.float32) @ w.t()
    y = y + bias.to(torch.float32) if bias is not None else y
    return y.to(x.dtype)


@int4_linear.register_fake
def _(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, group_size: int,
      bias: torch.Tensor | None) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], packed.shape[0]))


class Int4Linear(nn.Module):
    """An nn.Linear whose weight is int4 in groups of `group_size` input features: each group's
    scale is its largest magnitude / 7, its values round(w / scale) clamped to [-8, 7]."""

    def __init__(self, linear: nn.Linear, group_size: int) -> None:
        super().__init__()
        n, k = linear.weight.shape
        self.group_size = group_size
        w = linear.weight.detach().float().reshape(n, k // group_size, group_size)
        scale = w.abs().amax(dim=2) / 7.0
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero group stays zero
        q = torch.clamp(torch.round(w / scale[:, :, None]), -8, 7).to(torch.int16).reshape(n, k) + 8
        self.register_buffer("packed", (q[:, 0::2] | (q[:, 1::2] << 4)).to(torch.uint8))
        self.register_buffer("scales", scale)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.executorch.int4_linear(x, self.packed, self.scales, self.group_size, self.bias)


def _replace_linear(module: nn.Module, make: Callable[[nn.Linear], nn.Module | None]) -> tuple[nn.Module, int]:
    """A copy of `module` with every nn.Linear (exactly that class) replaced by make(layer) where
    that is not None, and how many were replaced. Subclasses are left alone: some (attention's
    out_proj) are read as weights."""
    if type(module) is nn.Linear:
        replaced = make(module)
        return (replaced, 1) if replaced is not None else (module, 0)
    module = copy.deepcopy(module)
    count = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear and (replaced := make(child)) is not None:
                setattr(parent, name, replaced)
                count += 1
    return module, count


def quantize_linear_int8(module: nn.Module) -> tuple[nn.Module, int]:
    """A copy of `module` with every nn.Linear replaced by Int8Linear, and how many were replaced."""
    return _replace_linear(module, Int8Linear)


def quantize_linear_int8_weight_only(module: nn.Module) -> tuple[nn.Module, int]:
    """A copy of `module` with every nn.Linear replaced by a weight-only Int8Linear, and how many."""
    return _replace_linear(module, lambda layer: Int8Linear(layer, weight_only=True))


def quantize_linear_int4(module: nn.Module, group_size: int) -> tuple[nn.Module, int]:
    """A copy of `module` with every nn.Linear whose input features divide into groups of
    `group_size` replaced by Int4Linear, and how many were replaced (the others stay as they are)."""
    return _replace_linear(module, lambda layer: Int4Linear(layer, group_size)
                           if layer.in_features % group_size == 0 else None)
