"""TextGenerator: token-by-token generation over a program from export_llm."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from executorch.runtime import Method, Program


@dataclass
class Generation:
    tokens: list[int]  # the generated tokens, without the prompt
    prefill_seconds: float
    decode_seconds: float

    @property
    def tokens_per_second(self) -> float:
        """Decode speed: generated tokens after the first, per second of decoding."""
        return (len(self.tokens) - 1) / self.decode_seconds if len(self.tokens) > 1 and self.decode_seconds else 0.0


@dataclass
class BatchGeneration:
    tokens: list[list[int]]  # per prompt, the generated tokens
    prefill_seconds: float
    decode_seconds: float

    @property
    def tokens_per_second(self) -> float:
        """Decode speed: generated tokens after the first of each row, all rows, per second of decoding."""
        steps = len(self.tokens[0]) - 1 if self.tokens else 0
        return steps * len(self.tokens) / self.decode_seconds if steps > 0 and self.decode_seconds else 0.0


class TextGenerator:
    """Generates from a program of export_llm. Its prefill and decode methods share one key/value
    cache (the program's state), which generate() starts afresh each time.

    A program exported with backend="cuda" runs with torch CUDA tensors where torch is imported
    and sees a GPU: token and position stay on the device, the logits are left there, and the
    next token is chosen there (argmax, or top-k/top-p sampling with torch's generator), so only
    the token id comes back to the host each step.
    """

    def __init__(self, program: Program) -> None:
        missing = [m for m in ("prefill", "decode") if m not in program.method_names]
        meta = {k: program.metadata(f"llm_{k}") for k in ("max_seq_len", "prefill_chunk", "vocab_size")}
        if missing or None in meta.values():
            raise ValueError(f"not a program of export_llm: it has methods {program.method_names}")
        self.max_seq_len = int(meta["max_seq_len"] or 0)
        self.chunk = int(meta["prefill_chunk"] or 0)
        # The shortest prefill the program takes (a dynamic one's; older programs: a whole chunk).
        self.shortest_chunk = int(program.metadata("llm_prefill_min") or self.chunk)
        # Whether the prefill returns its last position's logits only (never padded, then).
        self._last_only = program.metadata("llm_prefill_logits") == "last"
        self.vocab_size = int(meta["vocab_size"] or 0)
        self.batch_size = int(program.metadata("llm_batch_size") or 1)
        self._state = program.new_state()
        self._prefill = program.load_method("prefill", self._state)
        self._decode = program.load_method("decode", self._state)
        self._device = _device_of(program, self._decode)

    def generate(self, prompt: Sequence[int], max_new_tokens: int, *, temperature: float = 0.0,
                 top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
                 callback: Callable[[int], None] | None = None) -> Generation:
        """Up to `max_new_tokens` tokens after `prompt` (greedy at temperature 0, else sampled from the
        softmax at `temperature`, restricted to the top_k tokens and the top_p probability mass);
        `callback` receives each token as it is made. Stops where the cache is full. For a program of
        batch 1 (generate_batch runs the others)."""
        if self.batch_size != 1:
            raise ValueError(f"the program has batch {self.batch_size}: use generate_batch")
        each = None if callback is None else (lambda row: callback(row[0]))
        done = self._run([[int(t) for t in prompt]], max_new_tokens, temperature, top_k, top_p, seed, each)
        return Generation(done.tokens[0], done.prefill_seconds, done.decode_seconds)

    def generate_batch(self, prompts: Sequence[Sequence[int]], max_new_tokens: int, *, temperature: float = 0.0,
                       top_k: int | None = None, top_p: float | None = None,
                       seed: int | None = None) -> BatchGeneration:
        """generate() for one prompt per row of the program's batch (export_llm(batch_size=...)), all
        of one length, side by side: each row's tokens are what generate() would give for it alone."""
        rows = [[int(t) for t in p] for p in prompts]
        if len(rows) != self.batch_size:
            raise ValueError(f"the program has batch {self.batch_size}, got {len(rows)} prompts")
        if len({len(r) for r in rows}) > 1:
            raise ValueError(f"the prompts differ in length ({sorted({len(r) for r in rows})}); the rows move in step")
        return self._run(rows, max_new_tokens, temperature, top_k, top_p, seed, None)

    def _run(self, rows: list[list[int]], max_new_tokens: int, temperature: float, top_k: int | None,
             top_p: float | None, seed: int | None,
             callback: Callable[[list[int]], None] | None) -> BatchGeneration:
        n = len(rows[0])
        if n == 0:
            raise ValueError("the prompt is empty")
        if n > self.max_seq_len:
            raise ValueError(f"the prompt has {n} tokens; the program holds {self.max_seq_len}")
        if any(not 0 <= t < self.vocab_size for r in rows for t in r):
            raise ValueError(f"prompt tokens must lie in [0, {self.vocab_size})")
        if max_new_tokens < 1:
            return BatchGeneration([[] for _ in rows], 0.0, 0.0)
        step = _DeviceSteps(self._device, len(rows), seed) if self._device is not None else _HostSteps(seed)
        self._state.reset()
        start = time.perf_counter()
        token = step.pick(self._prefill_logits(rows), temperature, top_k, top_p)
        prefilled = time.perf_counter()
        if isinstance(step, _DeviceSteps) and temperature <= 0.0:
            ahead = self._greedy_ahead(step, n, token, max_new_tokens, callback)
            return BatchGeneration(ahead, prefilled - start, time.perf_counter() - prefilled)
        tokens: list[list[int]] = [[] for _ in rows]
        position = n
        while True:
            for row, t in zip(tokens, token):
                row.append(t)
            if callback is not None:
                callback(token)
            if len(tokens[0]) >= max_new_tokens or position >= self.max_seq_len:
                break
            out = self._decode.execute(step.inputs(token, position))
            token = step.pick(out[0][:, -1], temperature, top_k, top_p)
            position += 1
        return BatchGeneration(tokens, prefilled - start, time.perf_counter() - prefilled)

    def _greedy_ahead(self, step: _DeviceSteps, n: int, first: list[int], max_new_tokens: int,
                      callback: Callable[[list[int]], None] | None) -> list[list[int]]:
        """Greedy decoding on the device, one step ahead of the host: step s + 1 is queued (reading
        the token that step s's argmax wrote on the device) before step s's token is read back, so
        the host's work per token overlaps the device's. The tokens are argmax ids and the positions
        stay below max_seq_len, so the steps defer their index checks rather than wait for them."""
        tokens = [[t] for t in first]
        if callback is not None:
            callback(first)
        steps = min(max_new_tokens - 1, self.max_seq_len - n)  # decode calls: one token each
        queued = [step.queue(self._decode, n, 0)] if steps > 0 else []
        for s in range(steps):
            if s + 1 < steps:
                queued.append(step.queue(self._decode, n + s + 1, (s + 1) % 2))
            ids = step.read(queued.pop(0))
            for row, t in zip(tokens, ids):
                row.append(t)
            if callback is not None:
                callback(ids)
        return tokens

    def _prefill_logits(self, rows: list[list[int]]) -> Any:
        """The logits after the last prompt token of each row, [rows, vocab] (a torch tensor on the
        device where generation runs there, else numpy). The prompts go in chunks of up to
        prefill_chunk tokens; a dynamic prefill takes the last one as it is. A chunk shorter than the
        program takes starts early enough to be full where the prompt allows (its earlier positions
        are computed again, to the same keys and values), else it is padded, and the padding's cache
        entries are overwritten by decode before any position attends to them. A prefill that returns
        its last position only is never padded: a prompt shorter than it takes goes through decode,
        a token at a time."""
        n = len(rows[0])
        logits: Any = None
        if self._last_only and n < self.shortest_chunk:
            for position in range(n):
                column = np.array([[r[position]] for r in rows], dtype=np.int64)
                logits = self._decode.execute([column, np.array([position], dtype=np.int64)])[0][:, -1]
            return logits
        begin = 0
        while begin < n:
            c = max(self.shortest_chunk, min(self.chunk, n - begin))  # this call's length
            start = min(begin, max(n - c, 0))
            real = min(c, n - start)
            window = [r[start:start + real] + [0] * (c - real) for r in rows]
            inputs = [np.array(window, dtype=np.int64),
                      np.arange(start, start + c, dtype=np.int64)]  # start + c <= max(n, c) <= max_seq_len
            if self._device is not None:
                torch = sys.modules["torch"]
                inputs = [torch.from_numpy(x).to(self._device) for x in inputs]
            logits = self._prefill.execute(inputs)[0][:, -1 if self._last_only else real - 1]
            begin = start + real
        return logits


def _device_of(program: Program, method: Method) -> Any:
    """The torch CUDA device to generate on: where the program's methods run as CUDA delegate calls
    reading their inputs on the device, torch is imported and sees a GPU. None otherwise."""
    torch = sys.modules.get("torch")
    calls = program.metadata("cuda_delegate_calls")
    if torch is None or calls in (None, "0") or not torch.cuda.is_available():
        return None
    return torch.device("cuda") if all(method._device_layout()[0]) else None


class _HostSteps:
    """Decode inputs as numpy arrays; the next token chosen from logits on the host."""

    def __init__(self, seed: int | None) -> None:
        self.rng = np.random.default_rng(seed)

    def inputs(self, tokens: list[int], position: int) -> list[Any]:
        return [np.array([[t] for t in tokens], dtype=np.int64), np.array([position], dtype=np.int64)]

    def pick(self, logits: Any, temperature: float, top_k: int | None, top_p: float | None) -> list[int]:
        """The next token of each row of logits [rows, vocab]."""
        rows = np.asarray(logits, dtype=np.float32)
        return [_pick(row, temperature, top_k, top_p, self.rng) for row in rows]


class _DeviceSteps:
    """Decode inputs in two device tensors updated in place; the next token chosen on the device."""

    def __init__(self, device: Any, rows: int, seed: int | None) -> None:
        torch = sys.modules["torch"]
        self.torch = torch
        self.token = torch.zeros((rows, 1), dtype=torch.int64, device=device)
        self.position = torch.zeros(1, dtype=torch.int64, device=device)
        self.fed: list[int] | None = None  # the ids `token` already holds, written on the device by pick()
        self.ids = [torch.zeros(rows, dtype=torch.int64, pin_memory=True) for _ in range(2)]  # queue()'s slots
        self.generator = torch.Generator(device=device)
        if seed is not None:
            self.generator.manual_seed(seed)
        else:
            self.generator.seed()

    def inputs(self, tokens: list[int], position: int) -> list[Any]:
        if tokens != self.fed:  # else pick() has written them on the device already
            if len(tokens) == 1:
                self.token.fill_(tokens[0])
            else:
                self.token.copy_(self.torch.tensor(tokens, dtype=self.torch.int64).view(-1, 1))
        self.position.fill_(position)
        return [self.token, self.position]

    def queue(self, method: Method, position: int, slot: int) -> tuple[Any, Any]:
        """Queues a greedy decode step at `position` from the token on the device: the next token
        goes into `token` on the device and into pinned slot `slot`, which read() returns once the
        step is done. Nothing waits for the device here."""
        torch = self.torch
        self.position.fill_(position)
        out = method._execute_device_tensors([self.token, self.position], defer_index_checks=True)
        if out is None:
            raise RuntimeError("the decode method does not read its inputs on the device")
        ids = self._argmax_fed(out[0][:, -1])
        self.ids[slot].copy_(ids, non_blocking=True)
        done = torch.cuda.Event()
        done.record()
        return done, self.ids[slot]

    def read(self, queued: tuple[Any, Any]) -> list[int]:
        """The token ids of a step of queue(), once it is done."""
        done, ids = queued
        done.synchronize()
        return [int(t) for t in ids.tolist()]

    def pick(self, logits: Any, temperature: float, top_k: int | None, top_p: float | None) -> list[int]:
        """The next token of each row of logits [rows, vocab]; only the ids come to the host."""
        if temperature <= 0.0:
            ids = self._argmax_fed(logits)
            self.fed = [int(t) for t in ids.tolist()]
            return list(self.fed)
        self.fed = None
        return [self._sample(row, temperature, top_k, top_p) for row in logits]

    def _argmax_fed(self, logits: Any) -> Any:
        """The argmax of each row of logits [rows, vocab], written into `token` as the next step's
        input, without a host-to-device copy; the ids stay on the device."""
        ids = self.torch.argmax(logits, dim=-1)
        self.token.copy_(ids.view(-1, 1))
        return ids

    def _sample(self, logits: Any, temperature: float, top_k: int | None, top_p: float | None) -> int:
        torch = self.torch
        scaled = logits.double() / temperature
        order = torch.argsort(scaled, descending=True, stable=True)
        if top_k is not None:
            order = order[:max(1, top_k)]
        probs = torch.softmax(scaled[order], 0)
        if top_p is not None:
            keep = int(torch.searchsorted(torch.cumsum(probs, 0), torch.full((1,), top_p, dtype=probs.dtype,
                                                                               device=probs.device))) + 1
            order, probs = order[:keep], probs[:keep] / probs[:keep].sum()
        return int(order[torch.multinomial(probs, 1, generator=self.generator)])


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
