"""Generation with a key/value cache (executorch.llm) and the program state under it, on the CPU.

Small random-weight configs of Llama, Qwen2, Qwen3, Gemma, Mistral, Phi, Phi-3 and GPT-2, and of the
mixture-of-experts Mixtral, Qwen3-MoE and GPT-OSS (initializer_range
0.3, so greedy decoding does not settle on one repeated token): export_llm's program generates 32
tokens greedily, token for token what transformers' generate(do_sample=False) gives, from a prompt
longer than the prefill chunk (two chunks, the second overlapping the first) and from one shorter
(padded). Tests marked needs_gpu run the same on a CUDA device (tools/gpu: pytest -k cuda).
"""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.flags import preload_cuda_runtime

torch = pytest.importorskip("torch", reason="torch is not installed in the test interpreter")
preload_cuda_runtime()

from executorch.export import ExportError, export  # noqa: E402
from executorch.llm import TextGenerator, export_llm  # noqa: E402
from executorch.runtime import ExecutorchError, Runtime  # noqa: E402
from executorch.serialization.pte import deserialize, serialize  # noqa: E402
from tests.models.real import import_torchvision  # noqa: E402
from tests.models.zoo import Counter  # noqa: E402

MAX_LEN, CHUNK, NEW = 64, 8, 32
_SMALL = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, vocab_size=512,
              initializer_range=0.3)
FAMILIES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(num_key_value_heads=2, **_SMALL)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(num_key_value_heads=2, **_SMALL)),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", dict(num_key_value_heads=2, head_dim=16, **_SMALL)),
    "mistral": ("MistralConfig", "MistralForCausalLM", dict(num_key_value_heads=2, **_SMALL)),
    "phi": ("PhiConfig", "PhiForCausalLM", dict(num_key_value_heads=2, **_SMALL)),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(num_key_value_heads=2, pad_token_id=0, **_SMALL)),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(num_key_value_heads=2, head_dim=16, **_SMALL)),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(n_embd=64, n_layer=2, n_head=4, n_positions=128, vocab_size=512,
                                                   initializer_range=0.3)),
}


# Mixture-of-experts families (CPU: the experts' grouped products have no CudaBackend kernel yet).
MOE_FAMILIES = {
    "mixtral": ("MixtralConfig", "MixtralForCausalLM",
                dict(num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, **_SMALL)),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", dict(num_key_value_heads=2, head_dim=16, num_experts=4,
                                                              num_experts_per_tok=2, moe_intermediate_size=32, **_SMALL)),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM",
                dict(num_key_value_heads=2, head_dim=16, num_local_experts=4, num_experts_per_tok=2, **_SMALL)),
}


def _model(family: str) -> torch.nn.Module:
    import_torchvision()  # transformers imports torchvision when it is installed
    transformers = pytest.importorskip("transformers")
    config, cls, kwargs = {**FAMILIES, **MOE_FAMILIES}[family]
    torch.manual_seed(0)
    return getattr(transformers, cls)(getattr(transformers, config)(**kwargs)).eval()


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request: pytest.FixtureRequest) -> tuple[str, torch.nn.Module, bytes]:
    model = _model(request.param)
    return request.param, model, export_llm(model, max_seq_len=MAX_LEN, prefill_chunk=CHUNK)


def _reference(model: torch.nn.Module, prompt: list[int]) -> list[int]:
    model.generation_config.cache_implementation = None  # transformers' own dynamic cache
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False)
    return out[0, len(prompt):].tolist()


def _reference_by_forward(model: torch.nn.Module, prompt: list[int]) -> list[int]:
    """Greedy tokens from transformers' forward over the whole sequence at each step (no cache)."""
    tokens = list(prompt)
    with torch.no_grad():
        for _ in range(NEW):
            tokens.append(int(model(torch.tensor([tokens])).logits[0, -1].argmax()))
    return tokens[len(prompt):]


# 11 and 5 tokens: prefill chunks; 1: shorter than the CPU prefill takes, through decode.
@pytest.mark.parametrize("length", [11, 5, 1])
def test_greedy_matches_transformers(family: tuple[str, torch.nn.Module, bytes], length: int) -> None:
    name, model, pte = family
    prompt = torch.randint(0, 512, (length,), generator=torch.Generator().manual_seed(length)).tolist()
    expected = _reference(model, prompt)
    if (name, length) == ("phi", 1):
        # Here transformers' generate (one token at a time, its dynamic cache) leaves the argmax of its
        # own forward over the whole sequence at the 25th position (261, not 2); the program's logits
        # are that forward's (within 1e-5), so its tokens are compared with the forward's.
        forward = _reference_by_forward(model, prompt)
        assert forward != expected and forward[:24] == expected[:24], "transformers now agrees with itself"
        expected = forward
    assert len(set(expected)) > 4, f"{name}: the reference repeats itself; the comparison would say little"
    streamed: list[int] = []
    result = TextGenerator(Runtime.get().load_program(pte)).generate(prompt, NEW, callback=streamed.append)
    assert result.tokens == expected, name
    assert streamed == expected and result.tokens_per_second > 0


@pytest.mark.parametrize("name", sorted(MOE_FAMILIES))
def test_mixture_of_experts_greedy_matches_transformers(name: str) -> None:
    """Mixtral, Qwen3-MoE and GPT-OSS: the experts' grouped products in prefill (a dynamic number of
    rows) and decode; 32 greedy tokens as transformers generates them."""
    model = _model(name)
    pte = export_llm(model, max_seq_len=MAX_LEN, prefill_chunk=CHUNK)
    prompt = torch.randint(0, 512, (11,), generator=torch.Generator().manual_seed(11)).tolist()
    expected = _reference(model, prompt)
    assert len(set(expected)) > 4, f"{name}: the reference repeats itself; the comparison would say little"
    assert TextGenerator(Runtime.get().load_program(pte)).generate(prompt, NEW).tokens == expected, name


def test_program_state_is_the_cache_alone(family: tuple[str, torch.nn.Module, bytes]) -> None:
    # transformers' static cache also updates a position counter per layer that nothing reads:
    # export_llm leaves those out of the state, and their updates out of the methods.
    name, _, pte = family
    spec = deserialize(pte)
    assert sorted(b.name for b in spec.mutable_buffers) == sorted(
        f"{kind}_cache_{layer}" for kind in ("key", "value") for layer in range(2)), name
    program = Runtime.get().load_program(pte)
    assert sorted(program.new_state().buffer_names) == sorted(b.name for b in spec.mutable_buffers)


def test_cpu_prefill_takes_a_prompt_as_it_is(family: tuple[str, torch.nn.Module, bytes]) -> None:
    """For the CPU kernels the prefill's length is a bounded dynamic shape (2 to prefill_chunk): five
    tokens run as five, and its logits are transformers' for the last of them (|diff| <= 1e-4 of the
    largest), the only position a prefill needs."""
    name, model, pte = family
    prefill = next(p for p in deserialize(pte).plans if p.name == "prefill")
    assert [(s.input, s.dim, s.min, s.max) for s in prefill.symbols] == [(0, 1, 2, CHUNK)], name
    program = Runtime.get().load_program(pte)
    method = program.load_method("prefill", program.new_state())
    ids = torch.randint(0, 512, (1, 5), generator=torch.Generator().manual_seed(3))
    (logits,) = method.execute([ids.numpy(), np.arange(5, dtype=np.int64)])
    with torch.no_grad():
        expected = model(ids).logits[:, -1:].numpy()
    assert deserialize(pte).metadata["llm_prefill_logits"] == "last"
    assert logits.shape == (1, 1, 512), name
    np.testing.assert_allclose(logits, expected, rtol=0, atol=1e-4 * max(1.0, float(np.abs(expected).max())))


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_batch_rows_each_match_transformers(name: str, tmp_path: Path) -> None:
    """export_llm(batch_size=3): generate_batch's rows equal transformers' greedy tokens for each
    prompt alone (two prefill chunks); generate() and llm_runner refuse the program, and prompts of
    another count or of unequal lengths are errors."""
    from executorch.llm import BatchGeneration

    model = _model(name)
    pte = export_llm(model, max_seq_len=MAX_LEN, prefill_chunk=CHUNK, batch_size=3)
    assert deserialize(pte).metadata["llm_batch_size"] == "3"
    gen = TextGenerator(Runtime.get().load_program(pte))
    prompts = [torch.randint(0, 512, (11,), generator=torch.Generator().manual_seed(s)).tolist() for s in (1, 2, 3)]
    result = gen.generate_batch(prompts, NEW)
    assert isinstance(result, BatchGeneration) and result.tokens_per_second > 0
    assert result.tokens == [_reference(model, p) for p in prompts], name
    with pytest.raises(ValueError, match="use generate_batch"):
        gen.generate(prompts[0], 4)
    with pytest.raises(ValueError, match="batch 3, got 2 prompts"):
        gen.generate_batch(prompts[:2], 4)
    with pytest.raises(ValueError, match="differ in length"):
        gen.generate_batch([prompts[0], prompts[1][:5], prompts[2]], 4)
    path = tmp_path / "batch.pte"
    path.write_bytes(pte)
    done = _llm_runner(path, "--prompt", "1,2")
    assert done.returncode == 1 and "llm_runner runs programs of batch 1" in done.stderr, done.stderr


@pytest.mark.parametrize("quantize", ["int4", "int8_weight_only"])
@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_weight_only_greedy_matches_transformers_on_the_same_quantization(name: str, quantize: str) -> None:
    """export_llm(quantize="int4" / "int8_weight_only"): tokens equal transformers' generate on the
    model whose linear layers are replaced by the same quantized layers (their torch reference)."""
    from executorch.export._quantize import quantize_linear_int4, quantize_linear_int8_weight_only

    model = _model(name)
    quantized, count = (quantize_linear_int4(model, 32) if quantize == "int4"
                        else quantize_linear_int8_weight_only(model))
    assert count == 2 * 7 + 1  # q, k, v, o, gate, up, down per layer, and the head
    prompt = torch.randint(0, 512, (11,), generator=torch.Generator().manual_seed(3)).tolist()
    expected = _reference(quantized, prompt)
    pte = export_llm(model, max_seq_len=MAX_LEN, prefill_chunk=CHUNK, quantize=quantize)
    assert len(pte) < len(export_llm(model, max_seq_len=MAX_LEN, prefill_chunk=CHUNK)) / (2 if quantize == "int4" else 1.5)
    assert TextGenerator(Runtime.get().load_program(pte)).generate(prompt, NEW).tokens == expected, name


def _llm_runner(pte_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([os.environ["LLM_RUNNER"], "--model_path", str(pte_path), *args], capture_output=True,
                          text=True, timeout=300)


def test_llm_runner_matches_transformers(family: tuple[str, torch.nn.Module, bytes], tmp_path: Path) -> None:
    """The C++ runner, from the .pte file and token ids: greedy tokens equal transformers'; sampling
    with a seed repeats; top-1 sampling is greedy."""
    name, model, pte = family
    path = tmp_path / f"{name}.pte"
    path.write_bytes(pte)
    prompt = torch.randint(0, 512, (11,), generator=torch.Generator().manual_seed(11)).tolist()
    done = _llm_runner(path, "--prompt", ",".join(map(str, prompt)), "--max_new_tokens", str(NEW))
    assert done.returncode == 0, done.stderr
    assert [int(t) for t in done.stdout.strip().split(",")] == _reference(model, prompt), name
    assert f"prompt 11 tokens" in done.stderr and f"{NEW} tokens, decode" in done.stderr
    one = _llm_runner(path, "--prompt", "7", "--max_new_tokens", str(NEW))  # through decode alone
    assert [int(t) for t in one.stdout.strip().split(",")] == _reference(model, [7]), (name, one.stderr)
    sampled = [_llm_runner(path, "--prompt", "3,1,4", "--max_new_tokens", "12", "--temperature", "1.0",
                           "--top_k", "20", "--top_p", "0.9", "--seed", "7").stdout for _ in range(2)]
    assert sampled[0] == sampled[1] and len(sampled[0].split(",")) == 12
    greedy = _llm_runner(path, "--prompt", "3,1,4", "--max_new_tokens", "12").stdout
    assert _llm_runner(path, "--prompt", "3,1,4", "--max_new_tokens", "12", "--temperature", "1.5",
                       "--top_k", "1").stdout == greedy


# Texts the tokenizers are checked on: spaces and tabs in runs, contractions, digits, punctuation,
# letters and symbols outside ASCII, an added token, and nothing at all.
TEXTS = ["Hello world", "  two  spaces\tand\ttabs\n\nnew lines ", "it's 2024! don't stop, we'll see.",
         "h\u00e9llo w\u00f6rld \u2014 na\u00efve caf\u00e9", "emoji \U0001f642 and \u4e2d\u6587\u5b57", "<|endoftext|>after it",
         "x<|endoftext|>", "", " "]


# The split patterns of Llama 3's and Qwen2's files (digits in threes, one by one).
SPLITS = {"llama3": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
          "qwen2": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""}


def _trained(kind: str) -> str:
    """tokenizer.json of a BPE tokenizer of 512 ids trained here: "byte_level" as GPT-2's, "llama3" and
    "qwen2" as theirs (their split pattern, then bytes; Qwen2's NFC), "sentencepiece" as Llama 2's (a
    prepended and replaced space, byte fallback), "metaspace" as Mistral's newer files."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    byte_tokens = [f"<0x{i:02X}>" for i in range(256)]
    if kind in ("byte_level", "llama3", "qwen2"):
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        if kind != "byte_level":
            tok.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(SPLITS[kind]), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        if kind == "qwen2":
            tok.normalizer = normalizers.NFC()
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=["<|endoftext|>"],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:
        tok = Tokenizer(models.BPE(byte_fallback=True))
        if kind == "sentencepiece":
            tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
            tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                             decoders.Strip(" ", 1, 0)])
        else:
            tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first")
            tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="first")
        trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=["<|endoftext|>", *byte_tokens])
    rng = random.Random(5)
    words = ["".join(rng.choice("etaoinshrdlucmfw") for _ in range(rng.randint(1, 8))) for _ in range(400)]
    corpus = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(200)] + TEXTS
    tok.train_from_iterator(corpus, trainer)
    spec = json.loads(tok.to_str())
    # The byte tokens are vocabulary, as in Llama 2's file, not added tokens matched in the text.
    spec["added_tokens"] = [a for a in spec["added_tokens"] if a["content"] not in byte_tokens]
    return json.dumps(spec)


@pytest.mark.parametrize("kind", ["byte_level", "llama3", "qwen2", "sentencepiece", "metaspace"])
def test_llm_runner_tokenizes_as_the_tokenizers_library(kind: str, tmp_path: Path) -> None:
    """llm_runner --tokenize gives the ids the tokenizers library gives for every text, and with
    --prompt_text the generated text is the library's decoding of the ids the runner generates from
    those ids."""
    from tokenizers import Tokenizer

    spec = _trained(kind)
    path = tmp_path / "tokenizer.json"
    path.write_text(spec)
    reference = Tokenizer.from_str(spec)
    for text in TEXTS + ["digits 1234567 x12", "A'S 'Re WE'LL!!\n\n  \n x", "tab\t\tend\r\n"]:
        done = subprocess.run([os.environ["LLM_RUNNER"], "--tokenizer", str(path), "--tokenize", text],
                              capture_output=True, text=True, timeout=60)
        if kind == "qwen2" and not text.isascii():  # NFC is applied to ASCII text only
            assert done.returncode == 1 and "NFC: text outside ASCII is not supported" in done.stderr, done.stderr
            continue
        want = reference.encode(text, add_special_tokens=False).ids
        if not want:
            assert done.returncode == 0 and done.stdout.strip() == "", (text, done.stdout)
            continue
        assert done.returncode == 0, done.stderr
        assert [int(t) for t in done.stdout.strip().split(",")] == want, (kind, text)
    pte = tmp_path / "llama.pte"
    pte.write_bytes(export_llm(_model("llama"), max_seq_len=MAX_LEN, prefill_chunk=CHUNK))
    prompt = reference.encode(TEXTS[2], add_special_tokens=False).ids
    ids = _llm_runner(pte, "--prompt", ",".join(map(str, prompt)), "--max_new_tokens", "12").stdout.strip()
    text = _llm_runner(pte, "--tokenizer", str(path), "--prompt_text", TEXTS[2], "--max_new_tokens", "12")
    assert text.returncode == 0, text.stderr
    assert text.stdout[:-1] == reference.decode([int(t) for t in ids.split(",")], skip_special_tokens=False)


def test_llm_runner_refuses_tokenizers_it_does_not_read(tmp_path: Path) -> None:
    """A tokenizer.json it cannot follow is an error naming what, never a wrong tokenization."""
    spec = json.loads(_trained("byte_level"))
    cases = {"wordpiece": ({**spec, "model": {"type": "WordPiece", "vocab": {}}}, "model WordPiece is not supported"),
             "split": ({**spec, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Isolated",
                                                  "invert": False}}, "pre_tokenizer Split is not supported with this pattern"),
             "nfkc": ({**spec, "normalizer": {"type": "NFKC"}}, "normalizer NFKC is not supported")}
    for name, (bad, message) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(bad))
        done = subprocess.run([os.environ["LLM_RUNNER"], "--tokenizer", str(path), "--tokenize", "hi"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 1 and message in done.stderr, (name, done.stderr)
    for name, text in {"truncated": json.dumps(spec)[:5000], "deep": "[" * 100 + "]" * 100}.items():
        path = tmp_path / f"{name}.json"
        path.write_text(text)
        done = subprocess.run([os.environ["LLM_RUNNER"], "--tokenizer", str(path), "--tokenize", "hi"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 1 and "not JSON" in done.stderr, (name, done.stderr)


def test_llm_runner_refuses_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "llama.pte"
    path.write_bytes(export_llm(_model("llama"), max_seq_len=16, prefill_chunk=4))
    bad = {("--prompt", "1,x"): (2, "--prompt 1,x: not a valid value"),
           ("--prompt", "512"): (1, "prompt token 512 lies outside [0, 512)"),
           ("--prompt", ",".join(["1"] * 17)): (1, "the prompt has 17 tokens; the program holds 16"),
           ("--prompt", "1", "--top_p", "1.5"): (2, "--top_p 1.5: not a valid value")}
    for args, (status, message) in bad.items():
        done = _llm_runner(path, *args)
        assert done.returncode == status and message in done.stderr, (args, done.stderr)
    assert len(_llm_runner(path, "--prompt", ",".join(["1"] * 14), "--max_new_tokens", "10").stdout.split(",")) == 3
    other = tmp_path / "linear.pte"
    other.write_bytes(export(torch.nn.Linear(2, 2), (torch.ones(1, 2),)))
    done = _llm_runner(other, "--prompt", "1")
    assert done.returncode == 1 and "not a program of executorch.llm.export_llm" in done.stderr
    done = _llm_runner(tmp_path / "missing.pte", "--prompt", "1")
    assert done.returncode == 1 and "cannot load the program" in done.stderr


def test_generate_starts_afresh_and_samples_reproducibly(family: tuple[str, torch.nn.Module, bytes]) -> None:
    _, _, pte = family
    gen = TextGenerator(Runtime.get().load_program(pte))
    prompt = [3, 1, 4, 1, 5, 9, 2, 6, 5]
    first = gen.generate(prompt, 12).tokens
    assert gen.generate(prompt, 12).tokens == first  # the cache is reset between conversations
    a = gen.generate(prompt, 12, temperature=1.0, top_k=20, top_p=0.9, seed=7).tokens
    assert gen.generate(prompt, 12, temperature=1.0, top_k=20, top_p=0.9, seed=7).tokens == a
    assert gen.generate(prompt, 12, temperature=1.0, top_k=1).tokens == first  # top-1 sampling is greedy


def test_generate_refuses_bad_prompts() -> None:
    pte = export_llm(_model("llama"), max_seq_len=16, prefill_chunk=4)
    gen = TextGenerator(Runtime.get().load_program(pte))
    with pytest.raises(ValueError, match="empty"):
        gen.generate([], 4)
    with pytest.raises(ValueError, match="holds 16"):
        gen.generate([1] * 17, 4)
    with pytest.raises(ValueError, match=r"\[0, 512\)"):
        gen.generate([512], 4)
    assert len(gen.generate([1] * 14, 10).tokens) == 3  # stops where the cache is full (positions 14, 15 decoded)
    with pytest.raises(ValueError, match="not a program of export_llm"):
        TextGenerator(Runtime.get().load_program(export(torch.nn.Linear(2, 2), (torch.ones(1, 2),))))
    with pytest.raises(ExportError, match="prefill_chunk"):
        export_llm(_model("llama"), max_seq_len=16, prefill_chunk=32)


def test_default_prefill_chunk_is_128_tokens_or_the_cache() -> None:
    """Without prefill_chunk, a chunk is 128 tokens, or the whole cache where that is shorter."""
    assert TextGenerator(Runtime.get().load_program(export_llm(_model("llama"), max_seq_len=16))).chunk == 16
    assert TextGenerator(Runtime.get().load_program(export_llm(_model("llama"), max_seq_len=200))).chunk == 128


def _run_shared_counter(program: Any) -> tuple[Any, tuple[Any, Any]]:
    """Two methods of `program` (a Counter) sharing one state, run in turn against torch: outputs
    and the buffers read back match; reset() restores the initial contents. Returns the state and
    the methods."""
    state = program.new_state()
    one, two = program.load_method("forward", state), program.load_method("forward", state)
    model = Counter()
    for step, method in enumerate([one, two, one, two, one]):
        x, at = torch.arange(4.0) + step, torch.tensor([step % 3])
        with torch.no_grad():
            expected = model(x, at).numpy()
        np.testing.assert_allclose(method.execute([x.numpy(), at.numpy()])[0], expected, rtol=1e-6)
    assert np.frombuffer(state.read("total"), np.float32).tolist() == model.total.tolist()
    assert np.frombuffer(state.read("ring"), np.float32).reshape(3, 4).tolist() == model.ring.tolist()
    state.reset()
    assert np.frombuffer(state.read("total"), np.float32).tolist() == [10.0] * 4
    return state, (one, two)


def test_state_persists_is_shared_and_resets() -> None:
    pte = export(Counter(), (torch.ones(4), torch.tensor([0])))
    spec = deserialize(pte)
    assert [(b.name, b.size, b.data_segment >= 0) for b in spec.mutable_buffers] == [("total", 16, True),
                                                                                   ("ring", 48, False)]
    # index_put writes the ring in place; the sum (add) is copied into its state at the end.
    plan = spec.plans[0]
    writes = [(plan.operators[i.op_index][0], plan.tensor(i.args[-1]).mutable_buffer) for i in plan.instructions]
    assert [w for w in writes if w[1] >= 0] == [("aten::index_put", 1), ("aten::_to_copy", 0)]
    assert writes[-1] == ("aten::_to_copy", 0)
    program = Runtime.get().load_program(pte)
    state, _ = _run_shared_counter(program)
    assert not any(state.read("ring"))
    own = program.load_method("forward")  # a state of its own, untouched by the shared one
    np.testing.assert_allclose(own.execute([np.ones(4, np.float32), np.array([0])])[0], [12.0] * 4)
    with pytest.raises(KeyError):
        state.read("missing")
    with pytest.raises(ValueError, match="another program"):
        Runtime.get().load_program(pte).load_method("forward", state)


def _with(pte: bytes, edit) -> bytes:
    spec = deserialize(pte)
    edit(spec)
    return serialize(spec)


def test_hostile_state_is_refused() -> None:
    pte = export(Counter(), (torch.ones(4), torch.tensor([0])))
    state_value = next(i for i, v in enumerate(deserialize(pte).plans[0].values)
                       if v.kind == "tensor" and v.payload.mutable_buffer == 0)

    def shrink(spec):
        spec.mutable_buffers[0].size = 12

    def missing(spec):
        spec.mutable_buffers.pop()

    def outside(spec):
        spec.mutable_buffers[0].data_offset = 1 << 40

    def as_input(spec):
        spec.plans[0].inputs.append(state_value)

    def two_places(spec):
        spec.plans[0].values[state_value].payload.mem_id = 0

    for edit, message in ((shrink, "holds 12"), (missing, "does not exist"), (outside, "initial data"),
                          (as_input, "program state; it cannot be an input"), (two_places, "more than one of")):
        program = Runtime.get().load_program(_with(pte, edit))
        with pytest.raises(ExecutorchError, match=message):
            program.load_method("forward")
    assert struct.unpack_from("<4s", pte)[0] == b"XTPF"


def _payloads(pte: bytes) -> list:
    spec = deserialize(pte)
    return [deserialize(spec.segments[d.segment]) for p in spec.plans for d in p.delegates]


def test_cuda_export_keeps_state_in_the_payload() -> None:
    """backend="cuda" on a stateful module: one delegate call, whose payload declares the buffers it
    updates (by name, without data: the program's state holds their initial contents) and takes
    neither as an input nor returns either."""
    pte = export(Counter(), (torch.ones(4), torch.tensor([0])), backend="cuda")
    spec = deserialize(pte)
    assert spec.metadata["cuda_delegate_calls"] == "1" and len(spec.plans[0].instructions) == 1
    assert [b.name for b in spec.mutable_buffers] == ["total", "ring"]
    (payload,) = _payloads(pte)
    assert [(b.name, b.size, b.data_segment) for b in payload.mutable_buffers] == [("total", 16, -1), ("ring", 48, -1)]
    plan = payload.plans[0]
    state = {i for i, v in enumerate(plan.values) if v.kind == "tensor" and v.payload.mutable_buffer >= 0}
    assert len(state) == 2 and not state & set(plan.inputs + plan.outputs)
    assert len(plan.inputs) == 2 and len(plan.outputs) == 1
    # The program's state still starts from the buffers' initial data (kept when constants are trimmed).
    assert np.frombuffer(Runtime.get().load_program(pte).new_state().read("total"), np.float32).tolist() == [10.0] * 4


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_export_llm_for_cuda_is_one_call_per_method(name: str) -> None:
    """Every family, bfloat16: prefill and decode are one CudaBackend call each, and both payloads
    update the same cache buffers (each layer's keys and values), which the program declares."""
    pte = export_llm(_model(name), max_seq_len=MAX_LEN, prefill_chunk=CHUNK, backend="cuda", dtype=torch.bfloat16)
    spec = deserialize(pte)
    assert spec.metadata["cuda_delegate_calls"] == "2" and [len(p.instructions) for p in spec.plans] == [1, 1]
    declared = {b.name for b in spec.mutable_buffers}
    caches = {n for n in declared if "cache" in n}
    assert len(caches) == 4, declared  # keys and values of two layers
    for payload in _payloads(pte):
        assert caches <= {b.name for b in payload.mutable_buffers} <= declared


def test_cuda_export_refuses_state_split_with_the_cpu() -> None:
    """State a CPU kernel would also touch cannot stay on the device: an export error names the op."""

    class Cumulative(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("seen", torch.zeros(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.seen.copy_(torch.floor(self.seen) + x)  # floor: a CPU kernel only
            return self.seen * 2.0

    with pytest.raises(ExportError, match="keeps the program state it updates on the device, but aten::floor"):
        export(Cumulative(), (torch.ones(4),), backend="cuda")


needs_gpu = pytest.mark.skipif(not Runtime.get().is_available("CudaBackend"), reason="no usable CUDA device here")


@needs_gpu
def test_cuda_state_persists_is_shared_and_resets() -> None:
    """On the device: two methods sharing one state update one device copy; read() and reset()
    reach it."""
    pte = export(Counter(), (torch.ones(4), torch.tensor([0])), backend="cuda")
    state, (one, two) = _run_shared_counter(Runtime.get().load_program(pte))
    np.testing.assert_allclose(one.execute([np.ones(4, np.float32), np.array([0])])[0], [12.0] * 4)
    with pytest.raises(ExecutorchError, match="index is out of range"):
        two.execute([np.ones(4, np.float32), np.array([3])])


@needs_gpu
def test_cuda_deferred_index_check_reports_at_the_next_call() -> None:
    """A decode step that defers its index check (as TextGenerator's greedy loop does) returns
    without waiting; a token out of the vocabulary is then reported by the method's next call, and
    the call after that runs clean."""
    gen = TextGenerator(Runtime.get().load_program(
        export_llm(_model("llama"), max_seq_len=MAX_LEN, prefill_chunk=CHUNK, backend="cuda")))
    token = torch.full((1, 1), 512 + 7, dtype=torch.int64, device="cuda")  # vocabulary: 512
    position = torch.tensor([3], dtype=torch.int64, device="cuda")
    assert gen._decode._execute_device_tensors([token, position], defer_index_checks=True) is not None
    token.fill_(5)
    with pytest.raises(ExecutorchError, match="index is out of range.*earlier call"):
        gen._decode._execute_device_tensors([token, position])
    assert gen._decode._execute_device_tensors([token, position])[0].shape == (1, 1, 512)


@needs_gpu
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_cuda_greedy_matches_transformers(name: str) -> None:
    """On the device in float32: greedy tokens equal transformers'. In bfloat16: the prompt's
    last logits lie within 5% of the largest float32 logit of transformers' float32 ones."""
    model = _model(name)
    prompt = torch.randint(0, 512, (11,), generator=torch.Generator().manual_seed(11)).tolist()
    pte = export_llm(model, max_seq_len=MAX_LEN, prefill_chunk=CHUNK, backend="cuda")
    gen = TextGenerator(Runtime.get().load_program(pte))
    assert gen._device is not None  # torch is imported and sees the GPU: generation runs there
    assert gen.generate(prompt, NEW).tokens == _reference(model, prompt)
    sampled = [gen.generate(prompt, 12, temperature=1.0, top_k=20, top_p=0.9, seed=7).tokens for _ in range(2)]
    assert sampled[0] == sampled[1] and len(sampled[0]) == 12  # sampled on the device, reproducibly
    assert gen.generate(prompt, 12, temperature=1.5, top_k=1).tokens == gen.generate(prompt, 12).tokens
    with torch.no_grad():
        reference = model(torch.tensor([prompt])).logits[0, -1].float()
    pte = export_llm(model, max_seq_len=MAX_LEN, prefill_chunk=CHUNK, backend="cuda", dtype=torch.bfloat16)
    gen = TextGenerator(Runtime.get().load_program(pte))
    assert gen._device is not None  # torch is imported and sees the GPU: generation runs there
    got = gen._prefill_logits([prompt])[0].float().cpu()
    error = (got - reference).abs().max().item() / reference.abs().max().item()
    assert error < 5e-2, f"{name}: bfloat16 logits {error:.2e} of the largest apart"


@needs_gpu
@pytest.mark.parametrize("name", ["llama", "gemma"])
def test_cuda_decode_attention_does_the_step_over_a_long_cache(name: str) -> None:
    """With a cache long enough for split-key attention (512 positions), a decode step's rotary
    embedding of q and its puts of the new key and value rows into the caches run in the attention
    kernel, one per layer, with no rope or index_put kernel: greedy tokens from a 150-token prompt
    (decoding past the first split) equal transformers', and a position outside the cache is an error."""
    from torch.profiler import ProfilerActivity, profile

    model = _model(name)
    prompt = torch.randint(0, 512, (150,), generator=torch.Generator().manual_seed(5)).tolist()
    gen = TextGenerator(Runtime.get().load_program(export_llm(model, max_seq_len=512, prefill_chunk=32, backend="cuda")))
    assert gen.generate(prompt, NEW).tokens == _reference(model, prompt)
    token = torch.full((1, 1), 5, dtype=torch.int64, device="cuda")
    position = torch.tensor([300], dtype=torch.int64, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        gen._decode._execute_device_tensors([token, position])
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    assert sum("attention_split_kernel" in n for n in names) == 2, names  # two layers
    assert not [n for n in names if "rope" in n.lower() or "index_put" in n], names
    position.fill_(512)
    with pytest.raises(ExecutorchError, match="index is out of range"):
        gen._decode._execute_device_tensors([token, position])


@pytest.mark.parametrize("quantize", ["int4", "int8_weight_only"])
def test_weight_only_export_llm_for_cuda_is_one_call_per_method(quantize: str) -> None:
    """bfloat16 activations, weight-only layers: prefill and decode stay one CudaBackend call each,
    each linear layer one quantized operator, where q|k|v and gate|up are one each (their weights
    joined: both methods have at most 8 rows, a prefill chunk of CHUNK = 8 and one token)."""
    pte = export_llm(_model("llama"), max_seq_len=MAX_LEN, prefill_chunk=CHUNK, backend="cuda", dtype=torch.bfloat16,
                     quantize=quantize)
    spec = deserialize(pte)
    assert spec.metadata["cuda_delegate_calls"] == "2" and [len(p.instructions) for p in spec.plans] == [1, 1]
    op = "executorch::int4_linear" if quantize == "int4" else "executorch::int8_weight_linear"
    counts = [sum(p.plans[0].operators[i.op_index][0] == op for i in p.plans[0].instructions) for p in _payloads(pte)]
    assert counts == [2 * 4 + 1] * 2, counts  # prefill, decode: two layers (q|k|v, o, gate|up, down) and the head


@needs_gpu
@pytest.mark.parametrize("quantize", ["int4", "int8_weight_only"])
def test_cuda_weight_only_greedy_matches_transformers_on_the_same_quantization(quantize: str) -> None:
    """On the device in float32 (the decode GEMV and the prefill's dequantized product): greedy
    tokens equal transformers' on the same quantized layers."""
    from executorch.export._quantize import quantize_linear_int4, quantize_linear_int8_weight_only

    model = _model("llama")
    quantized, _ = quantize_linear_int4(model, 32) if quantize == "int4" else quantize_linear_int8_weight_only(model)
    prompt = torch.randint(0, 512, (11,), generator=torch.Generator().manual_seed(3)).tolist()
    pte = export_llm(model, max_seq_len=MAX_LEN, prefill_chunk=CHUNK, backend="cuda", quantize=quantize)
    gen = TextGenerator(Runtime.get().load_program(pte))
    assert gen._device is not None
    assert gen.generate(prompt, NEW).tokens == _reference(quantized, prompt)
