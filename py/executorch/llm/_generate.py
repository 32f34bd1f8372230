"""TextGenerator: token-by-token generation over a program from export_llm."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from executorch.runtime import Program


@dataclass
class Generation:
    tokens: list[int]  # the generated tokens, without the prompt
    prefill_seconds: float
    decode_seconds: float

    @property
    def tokens_per_second(self) -> float:
        """Decode speed: generated tokens after the first, per second of decoding."""
        return (len(self.tokens) - 1) / self.decode_seconds if len(self.tokens) > 1 and self.decode_seconds else 0.0


class TextGenerator:
    """Generates from a program of export_llm. Its prefill and decode methods share one key/value
    cache (the program's state), which generate() starts afresh each time."""

    def __init__(self, program: Program) -> None:
        missing = [m for m in ("prefill", "decode") if m not in program.method_names]
        meta = {k: program.metadata(f"llm_{k}") for k in ("max_seq_len", "prefill_chunk", "vocab_size")}
        if missing or None in meta.values():
            raise ValueError(f"not a program of export_llm: it has methods {program.method_names}")
        self.max_seq_len = int(meta["max_seq_len"] or 0)
        self.chunk = int(meta["prefill_chunk"] or 0)
        self.vocab_size = int(meta["vocab_size"] or 0)
        self._state = program.new_state()
        self._prefill = program.load_method("prefill", self._state)
        self._decode = program.load_method("decode", self._state)

    def generate(self, prompt: Sequence[int], max_new_tokens: int, *, temperature: float = 0.0,
                 top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
                 callback: Callable[[int], None] | None = None) -> Generation:
        """Up to `max_new_tokens` tokens after `prompt` (greedy at temperature 0, else sampled from the
        softmax at `temperature`, restricted to the top_k tokens and the top_p probability mass);
        `callback` receives each token as it is made. Stops where the cache is full."""
        ids = [int(t) for t in prompt]
        if not ids:
            raise ValueError("the prompt is empty")
        if len(ids) > self.max_seq_len:
            raise ValueError(f"the prompt has {len(ids)} tokens; the program holds {self.max_seq_len}")
        if any(not 0 <= t < self.vocab_size for t in ids):
            raise ValueError(f"prompt tokens must lie in [0, {self.vocab_size})")
        rng = np.random.default_rng(seed)
        self._state.reset()
        start = time.perf_counter()
        logits = self._prefill_logits(ids)
        prefilled = time.perf_counter()
        tokens: list[int] = []
        position = len(ids)
        while len(tokens) < max_new_tokens:
            token = _pick(logits, temperature, top_k, top_p, rng)
            tokens.append(token)
            if callback is not None:
                callback(token)
            if len(tokens) == max_new_tokens or position >= self.max_seq_len:
                break
            out = self._decode.execute([np.array([[token]], dtype=np.int64), np.array([position], dtype=np.int64)])
            logits = np.asarray(out[0], dtype=np.float32)[0, -1]
            position += 1
        return Generation(tokens, prefilled - start, time.perf_counter() - prefilled)

    def _prefill_logits(self, ids: list[int]) -> np.ndarray:
        """The logits after the last prompt token. The prompt goes in chunks; the last chunk starts
        early enough to be full where the prompt allows (its earlier positions are computed again,
        to the same keys and values), else it is padded, and the padding's cache entries are
        overwritten by decode before any position attends to them."""
        n, c = len(ids), self.chunk
        logits = np.zeros(0, dtype=np.float32)
        begin = 0
        while begin < n:
            start = min(begin, max(n - c, 0))
            window = ids[start:start + c]
            real = len(window)
            window = window + [0] * (c - real)
            positions = np.arange(start, start + c, dtype=np.int64)  # start + c <= max(n, c) <= max_seq_len
            out = self._prefill.execute([np.array([window], dtype=np.int64), positions])
            logits = np.asarray(out[0], dtype=np.float32)[0, real - 1]
            begin = start + real
        return logits


def _pick(logits: np.ndarray, temperature: float, top_k: int | None, top_p: float | None,
          rng: np.random.Generator) -> int:
    if temperature <= 0.0:
        return int(np.argmax(logits))
    scaled = logits.astype(np.float64) / temperature
    order = np.argsort(-scaled, kind="stable")
    if top_k is not None:
        order = order[:max(1, top_k)]
    probs = np.exp(scaled[order] - scaled[order[0]])
    probs /= probs.sum()
    if top_p is not None:
        keep = int(np.searchsorted(np.cumsum(probs), top_p) + 1)
        order, probs = order[:keep], probs[:keep] / probs[:keep].sum()
    return int(order[rng.choice(len(order), p=probs)])
