"""Four small real models: an MLP, a CNN, a transformer encoder block and a decoder-only language
model. Each factory returns (module in eval mode, example_inputs); weights are random but seeded.
(Eval mode matters: a batch-norm module left in training mode computes something else.)"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, d_in: int = 64, hidden: int = 256, d_out: int = 10) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                 nn.Linear(hidden, d_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.net(x), dim=-1)


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, groups=2), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, dilation=1, padding=1), nn.ReLU(), nn.AvgPool2d(2),
            nn.AdaptiveAvgPool2d((1, 1)),
        )
        self.head = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


class EncoderBlock(nn.Module):
    """Pre-norm transformer encoder block: layer norm, multi-head attention, GELU MLP."""

    def __init__(self, d: int = 64, heads: int = 4, ff: int = 256) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))

    def attention(self, x: torch.Tensor, causal: bool) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))

    def forward(self, x: torch.Tensor, causal: bool = False) -> torch.Tensor:
        x = x + self.attention(self.norm1(x), causal)
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    """Decoder-only language model: token and position embeddings, causal blocks, tied head."""

    def __init__(self, vocab: int = 512, d: int = 64, layers: int = 2, context: int = 32) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(context, d)
        self.blocks = nn.ModuleList(EncoderBlock(d) for _ in range(layers))
        self.norm = nn.LayerNorm(d)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok(tokens) + self.pos(positions)
        for block in self.blocks:
            x = block(x, causal=True)
        return self.norm(x) @ self.tok.weight.t()


class PartlyDelegated(nn.Module):
    """Linear layers around an operator CudaBackend lacks (atan): with backend="cuda" it exports as
    two delegate calls with a CPU kernel between them."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(32, 32), nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.atan(torch.relu(self.a(x))))


class Counter(nn.Module):
    """State in its plainest form: a running sum (updated with copy_) and a ring of the last inputs
    (updated with index_put at a position input), both buffers: the program's mutable buffers."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.full((4,), 10.0))
        self.register_buffer("ring", torch.zeros(3, 4))

    def forward(self, x: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
        self.total.add_(x)
        self.ring.index_put_((at,), x.unsqueeze(0))
        return self.total * 1.0 + self.ring.sum(0)


def counter() -> tuple[nn.Module, tuple]:
    return Counter(), (torch.ones(4), torch.tensor([0]))


def partly_delegated(batch: int = 1) -> tuple[nn.Module, tuple]:
    torch.manual_seed(4)
    return PartlyDelegated().eval(), (torch.randn(batch, 32),)


def mlp(batch: int = 1) -> tuple[nn.Module, tuple]:
    torch.manual_seed(0)
    return MLP().eval(), (torch.randn(batch, 64),)


def cnn(batch: int = 1) -> tuple[nn.Module, tuple]:
    torch.manual_seed(1)
    model = SmallCNN()
    with torch.no_grad():  # non-trivial batch-norm statistics
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model.eval(), (torch.randn(batch, 3, 32, 32),)


def encoder(batch: int = 1) -> tuple[nn.Module, tuple]:
    torch.manual_seed(2)
    return EncoderBlock().eval(), (torch.randn(batch, 16, 64),)


def tiny_lm(batch: int = 1) -> tuple[nn.Module, tuple]:
    torch.manual_seed(3)
    return TinyLM().eval(), (torch.randint(0, 512, (batch, 32)),)


MODELS: dict[str, Callable[..., tuple[nn.Module, tuple]]] = {
    "mlp": mlp,
    "cnn": cnn,
    "encoder": encoder,
    "tiny_lm": tiny_lm,
}


def fresh_inputs(example: tuple, seed: int) -> tuple:
    """New random inputs shaped like `example` (token ids stay in range)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for x in example:
        if x.dtype == torch.int64:
            out.append(torch.randint(0, int(x.max().item()) + 1 if x.numel() else 1, x.shape, generator=g))
        else:
            out.append(torch.randn(x.shape, generator=g, dtype=x.dtype))
    return tuple(out)


