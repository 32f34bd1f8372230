"""int8 linear layers: weights quantized per output channel at export, activations per row at run time.

`quantize_linear_int8(module)` returns a copy whose nn.Linear layers call the operator
`executorch::int8_linear`, which the program keeps as one instruction (a CPU kernel, and a
CudaBackend kernel built on __dp4a). The torch implementation below is the reference the
runtime's kernels follow; docs/program_format.md states the arithmetic.
"""

from __future__ import annotations

import copy

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


@int8_linear.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


class Int8Linear(nn.Module):
    """An nn.Linear with its weight quantized to int8, one float32 scale per output feature."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        w = linear.weight.detach().float()
        scale = w.abs().amax(dim=1) / 127.0
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero row stays zero
        self.register_buffer("weight", torch.clamp(torch.round(w / scale[:, None]), -127, 127).to(torch.int8))
        self.register_buffer("scale", scale)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().float().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.executorch.int8_linear(x, self.weight, self.scale, self.bias)


def quantize_linear_int8(module: nn.Module) -> tuple[nn.Module, int]:
    """A copy of `module` with every nn.Linear (exactly that class) replaced by Int8Linear, and how
    many were replaced. Subclasses are left alone: some (attention's out_proj) are read as weights."""
    if type(module) is nn.Linear:
        return Int8Linear(module), 1
    module = copy.deepcopy(module)
    count = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                setattr(parent, name, Int8Linear(child))
                count += 1
    return module, count
