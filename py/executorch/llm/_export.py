"""export_llm: a transformers causal LM as a program with prefill and decode methods."""

from __future__ import annotations

from typing import Any

import torch
from torch.export import Dim

from executorch.export._errors import ExportError
from executorch.export._export import _check_options, _converted, _decomposed, _program, unread_buffers


class _LastPosition(torch.nn.Module):
    """An output layer applied to the last position only."""

    def __init__(self, head: torch.nn.Module) -> None:
        super().__init__()
        self.head = head

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.head(hidden[:, -1:])


def _output_layer_name(model: torch.nn.Module) -> str | None:
    """The attribute of `model` holding its output layer (lm_head), if it is a direct child."""
    head = model.get_output_embeddings()
    return next((name for name, child in model.named_children() if child is head), None)


_DEFAULT_CHUNK = 128


def export_llm(model: torch.nn.Module, max_seq_len: int, *, prefill_chunk: int | None = None, backend: str | None = None,
               dtype: torch.dtype | None = None, quantize: str | None = None, group_size: int = 32,
               batch_size: int = 1) -> bytes:
    """The .pte bytes of `model` (a transformers causal LM: Llama, Qwen2, Gemma, Mistral, Phi, GPT-2)
    with a static key/value cache of `max_seq_len` positions for `batch_size` sequences.

    prefill_chunk defaults to 128 tokens (max_seq_len where that is less): a chunk's products read
    every weight once, so wider chunks spend less per token on weights.

    Methods: `prefill(input_ids[B, L], cache_position[L])` and `decode(input_ids[B, 1],
    cache_position[1])` (B = batch_size; the rows share their positions). For the CPU kernels
    (backend=None) L is any length from 2 to prefill_chunk (a bounded dynamic shape: a short prompt
    costs its length, not a chunk's), and the prefill returns the last position's logits only
    [B, 1, vocab] (metadata llm_prefill_logits = "last": the output layer, most of a small model's
    work, runs once per row); a delegated prefill takes L = prefill_chunk and returns [B, L, vocab]
    ("all": its last chunk may be padded). Decode returns [B, 1, vocab]. Both write the tokens' keys
    and values into the cache, which the two share. dtype, quantize and
    group_size are as for executorch.export.export (quantize="int4" or "int8_weight_only":
    weight-only int4 or int8 linear layers). With backend="cuda" the cache lives in device memory,
    updated in place by both methods' delegate calls. Buffers that the methods update but never read
    (the cache's per-layer position counters) are not part of the program's state.
    """
    try:
        from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM
    except ImportError as e:
        raise ExportError(f"export_llm needs transformers with its executorch integration: {e}") from e
    if not 1 <= batch_size <= 1024:
        raise ExportError(f"batch_size must be between 1 and 1024, got {batch_size}")
    if prefill_chunk is None:
        prefill_chunk = min(_DEFAULT_CHUNK, max_seq_len)
    if not 1 <= prefill_chunk <= max_seq_len:
        raise ExportError(f"prefill_chunk must be between 1 and max_seq_len ({max_seq_len}), got {prefill_chunk}")
    _check_options(backend, None, dtype, quantize, False, group_size)
    if not hasattr(model, "generation_config") or not hasattr(model, "config"):
        raise ExportError(f"export_llm takes a transformers causal LM, got {type(model).__name__}")
    model, _ = _converted(model, [], dtype, quantize, group_size)
    model.requires_grad_(False)
    model.generation_config.cache_implementation = "static"
    model.generation_config.cache_config = {"batch_size": batch_size, "max_cache_len": max_seq_len}
    try:
        wrapper = TorchExportableModuleForDecoderOnlyLM(model)
    except Exception as e:  # transformers' message names what its wrapper lacks
        raise ExportError(f"transformers cannot wrap {type(model).__name__} with a static cache: {e}") from e
    methods: dict[str, Any] = {}
    # The shortest prefill a dynamic one takes: torch.export specializes sizes 0 and 1.
    shortest = 2 if backend is None and prefill_chunk > 2 else prefill_chunk
    # A CPU prefill's chunks are never padded, so its last position is the last token's.
    head = _output_layer_name(model) if backend is None else None
    with torch.no_grad():
        for name, tokens in (("prefill", prefill_chunk), ("decode", 1)):
            shapes = None
            if name == "prefill" and shortest < prefill_chunk:
                length = Dim("prefill_length", min=shortest, max=prefill_chunk)
                shapes = {"input_ids": {1: length}, "cache_position": {0: length}}
            layer = getattr(model, head) if head is not None and name == "prefill" else None
            if head is not None and layer is not None:
                setattr(model, head, _LastPosition(layer))
            try:
                ep = wrapper.export(input_ids=torch.zeros(batch_size, tokens, dtype=torch.long),
                                    cache_position=torch.arange(tokens), dynamic_shapes=shapes)
            except Exception as e:
                raise ExportError(f"torch.export could not capture {type(model).__name__} ({name}): {e}") from e
            finally:
                if head is not None and layer is not None:
                    setattr(model, head, layer)
            methods[name] = _decomposed(ep, backend)
    vocab = getattr(model.config, "vocab_size", None) or model.get_output_embeddings().out_features
    metadata = {"llm_max_seq_len": str(max_seq_len), "llm_prefill_chunk": str(prefill_chunk),
                "llm_prefill_min": str(shortest), "llm_prefill_logits": "last" if head else "all",
                "llm_vocab_size": str(vocab), "llm_model": type(model).__name__, "llm_batch_size": str(batch_size)}
    return _program(methods, backend=backend, dtype=dtype, metadata=metadata,
                    dropped=unread_buffers(list(methods.values())))
