"""Generation speed of executorch.llm against transformers' generate, same process, same prompt.

    python bench/llm.py [--hidden 512] [--intermediate N] [--layers 8] [--heads 8] [--kv-heads 4] [--vocab 32000]
                        [--context 512] [--prompt 128] [--new 64] [--chunk 128]
                        [--dtypes float32,bfloat16,int8_weight_only,int4]
                        [--threads N] [--repeat 3] [--device cpu|cuda] [--bandwidth BYTES_PER_S]
                        [--kernels N] [--batch B] [--xnnpack]

A random-weight Llama of that shape (LlamaForCausalLM; --hidden 2048 --layers 16 --heads 32 --kv-heads 8
--context 2048 is the 1B-class one); --intermediate defaults to Llama's MLP width, 8/3 of --hidden rounded up
to a multiple of 256 (5632 for hidden 2048, as TinyLlama-1.1B; the unrounded 5461 leaves every MLP
matrix's rows misaligned, and cuBLAS then reads them at half its bandwidth, ours and transformers'
alike). For each dtype: the program from export_llm (max_seq_len =
--context, prefill in chunks of --chunk) run by TextGenerator, and transformers' generate with its
dynamic cache and with its static cache, eager, all greedy from the same prompt of --prompt tokens
for --new tokens. Prints prefill milliseconds (the prompt up to the first token) and decode tokens/s
(after the first token), the median of --repeat runs, and whether the tokens agree with transformers'
dynamic-cache run. Ratios are ours / theirs (for decode, theirs / ours: below 1 means we are faster).
"int4" and "int8_weight_only" are float32 activations with weight-only int4 (group 32) or int8
(per channel) linear layers: ours from export_llm(quantize=...), transformers' on the model with the
same quantized layers (their torch reference, which expands the weights at every call). On --device
cuda, "bfloat16+int4" and "bfloat16+int8_weight_only" name those layers under bfloat16 activations.

--device cuda: ours is export_llm(backend="cuda") (the cache in device memory, each step one CUDA
graph replay; the next token is chosen on the device), theirs runs on the same GPU, and a third
peer is transformers with its static cache and the decode step under torch.compile(mode=
"reduce-overhead"), as its generate does by itself on a GPU (compiled before timing).
Decode is also given as a fraction of the memory-bandwidth bound: the weights (all but the
embedding table) and the cache up to the current position read once per token, at --bandwidth
bytes/s; by default what a device-to-device copy moved on these machines: 4.3e12 on an H200,
3.0e12 on an H100. --kernels N then prints the N device kernels that took most of one of our
generate calls (torch.profiler's CUDA activity, which sees the kernels inside CUDA graphs).
--xnnpack (CPU) adds our program exported with backend="xnnpack" (linear layers, norms and the rest
on XnnpackBackend; the cache updates and the attention reading the cache on the CPU kernels).
--batch B generates for B prompts side by side (export_llm(batch_size=B) and generate_batch; theirs
generate on the [B, prompt] ids); decode tokens/s then counts the tokens of all rows.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.models
from executorch.export._quantize import quantize_linear_int4, quantize_linear_int8_weight_only  # noqa: E402
from executorch.llm import TextGenerator, export_llm  # noqa: E402
from executorch.runtime import Runtime  # noqa: E402
from tests.models.real import import_torchvision  # noqa: E402

# Weight-only quantizations: the torch reference of each, on which transformers runs.
QUANTIZERS: dict[str, Callable[[torch.nn.Module], tuple[torch.nn.Module, int]]] = {
    "int8_weight_only": quantize_linear_int8_weight_only,
    "int4": lambda model: quantize_linear_int4(model, 32),
}


def llama(args: argparse.Namespace, dtype: torch.dtype) -> torch.nn.Module:
    import_torchvision()  # transformers imports torchvision when it is installed
    import transformers

    intermediate = args.intermediate or -(-args.hidden * 8 // (3 * 256)) * 256
    config = transformers.LlamaConfig(hidden_size=args.hidden, intermediate_size=intermediate,
                                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                                      num_key_value_heads=args.kv_heads, vocab_size=args.vocab,
                                      max_position_embeddings=args.context, initializer_range=0.2)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval().to(dtype)


def theirs(model: torch.nn.Module, prompts: list[list[int]], new: int, cache: str | None,
           compiled: bool = False) -> tuple[list[list[int]], float, float]:
    """transformers' generate: (tokens, prefill ms, decode tokens/s), timed through a streamer-like
    logits processor that notes when each token is chosen (after the device has caught up).
    `compiled`: let generate compile the decode step (on a GPU with the static cache, transformers
    runs the forward under torch.compile(mode="reduce-overhead"), CUDA graphs included)."""
    marks: list[float] = []
    device = next(model.parameters()).device

    def note(_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if device.type == "cuda":
            torch.cuda.synchronize()
        marks.append(time.perf_counter())
        return scores

    model.generation_config.cache_implementation = cache
    model.generation_config.disable_compile = not compiled
    start = time.perf_counter()
    with torch.no_grad():
        ids = torch.tensor(prompts, device=device)
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new, min_new_tokens=new,
                             do_sample=False, logits_processor=[note])
    end = time.perf_counter()
    prefill_ms = (marks[0] - start) * 1e3
    return out[:, len(prompts[0]):].tolist(), prefill_ms, len(prompts) * (new - 1) / (end - marks[0])


Run = tuple[list[list[int]], float, float]  # tokens per prompt, prefill ms, decode tokens/s (all rows)


def ours_of(gen: TextGenerator, prompts: list[list[int]], new: int) -> Run:
    if len(prompts) == 1:
        r = gen.generate(prompts[0], new)
        return [r.tokens], r.prefill_seconds * 1e3, r.tokens_per_second
    b = gen.generate_batch(prompts, new)
    return b.tokens, b.prefill_seconds * 1e3, b.tokens_per_second


def prompts_of(args: argparse.Namespace) -> list[list[int]]:
    return [torch.randint(0, args.vocab, (args.prompt,), generator=torch.Generator().manual_seed(seed)).tolist()
            for seed in range(1, args.batch + 1)]


def median_of(repeat: int, fn: Callable[[], Run]) -> Run:
    runs = [fn() for _ in range(repeat)]
    return runs[0][0], statistics.median(r[1] for r in runs), statistics.median(r[2] for r in runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, default in (("--hidden", 512), ("--layers", 8), ("--heads", 8), ("--kv-heads", 4), ("--vocab", 32000),
                          ("--context", 512), ("--prompt", 128), ("--new", 64), ("--chunk", 128), ("--repeat", 3),
                          ("--threads", os.cpu_count() or 1), ("--batch", 1)):
        parser.add_argument(flag, type=int, default=default)
    parser.add_argument("--dtypes", default="float32,bfloat16,int8_weight_only,int4")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--bandwidth", type=float, default=None)
    parser.add_argument("--kernels", type=int, default=0)
    parser.add_argument("--intermediate", type=int, default=0, help="MLP width (default: Llama's rounding)")
    parser.add_argument("--xnnpack", action="store_true", help="CPU: also export_llm(backend='xnnpack')")
    args = parser.parse_args()
    if args.device == "cuda":
        return on_gpu(args)
    torch.set_num_threads(args.threads)
    Runtime.get().set_num_threads(args.threads)
    prompts = prompts_of(args)
    print(f"Llama hidden {args.hidden}, {args.layers} layers, {args.heads} heads ({args.kv_heads} kv), vocab "
          f"{args.vocab}, context {args.context}; prompt {args.prompt}, {args.new} new tokens, batch {args.batch}, "
          f"{args.threads} threads")
    print(f"{'dtype':16} {'runner':26} {'prefill ms':>11} {'decode tok/s':>13} {'tokens agree':>13}")
    for name in args.dtypes.split(","):
        quantize = name if name in QUANTIZERS else None
        dtype = torch.float32 if quantize else getattr(torch, name)
        model = llama(args, dtype)
        gens = {"executorch.llm": None, "executorch.llm (xnnpack)": "xnnpack"} if args.xnnpack else {
            "executorch.llm": None}
        programs = {runner: TextGenerator(Runtime.get().load_program(
            export_llm(model, max_seq_len=args.context, prefill_chunk=args.chunk, batch_size=args.batch,
                       dtype=None if dtype == torch.float32 else dtype, quantize=quantize, backend=backend)))
            for runner, backend in gens.items()}
        if quantize:
            model = QUANTIZERS[quantize](model)[0]
        results: dict[str, Any] = {
            "transformers (dynamic)": median_of(args.repeat, lambda: theirs(model, prompts, args.new, None)),
            "transformers (static)": median_of(args.repeat, lambda: theirs(model, prompts, args.new, "static")),
        }
        for runner, gen in programs.items():
            results[runner] = median_of(args.repeat, lambda gen=gen: ours_of(gen, prompts, args.new))
        reference = results["transformers (dynamic)"][0]
        for runner, (tokens, prefill, decode) in results.items():
            print(f"{name:16} {runner:26} {prefill:11.1f} {decode:13.1f} {str(tokens == reference):>13}", flush=True)
        for runner in programs:
            ours_row = results[runner]
            for peer in ("transformers (dynamic)", "transformers (static)"):
                label = f"{'xnnpack ' if 'xnnpack' in runner else ''}ratio vs {peer}"
                print(f"{name:16} {label:26} {ours_row[1] / results[peer][1]:11.2f} "
                      f"{results[peer][2] / ours_row[2]:13.2f}")
    return 0


def bound_tokens_per_second(model: torch.nn.Module, args: argparse.Namespace) -> float:
    """Tokens/s if each decode step (a token for each of --batch rows) read the weights (not the
    embedding table, which is gathered) and each row's cache up to the middle of the generated span
    once, at --bandwidth."""
    embedding = model.get_input_embeddings().weight
    tensors = [*model.parameters(), *(b for b in model.buffers() if b is not None)]  # quantized weights are buffers
    weights = sum(p.numel() * p.element_size() for p in tensors if p is not embedding)
    if getattr(model.get_output_embeddings(), "weight", None) is embedding:  # tied: the head reads the table
        weights += embedding.numel() * embedding.element_size()
    head_dim = args.hidden // args.heads
    position = args.prompt + args.new // 2
    cache = 2 * args.layers * args.kv_heads * head_dim * position * embedding.element_size()
    return args.batch * args.bandwidth / (weights + args.batch * cache)


def print_kernels(fn: Callable[[], Any], top: int) -> None:
    """The `top` device kernels by total time over one call of `fn`."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
    torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=top, max_name_column_width=70),
          flush=True)


def on_gpu(args: argparse.Namespace) -> int:
    if args.bandwidth is None:  # what a device-to-device copy measured on these cards
        args.bandwidth = 3.0e12 if "H100" in torch.cuda.get_device_name() else 4.3e12
    prompts = prompts_of(args)
    print(f"{torch.cuda.get_device_name()}: Llama hidden {args.hidden}, {args.layers} layers, {args.heads} heads "
          f"({args.kv_heads} kv), vocab {args.vocab}, context {args.context}; prompt {args.prompt}, {args.new} new "
          f"tokens, batch {args.batch}, bound at {args.bandwidth / 1e12:.2f} TB/s")
    print(f"{'dtype':10} {'runner':36} {'prefill ms':>11} {'decode tok/s':>13} {'of bound':>9} {'tokens agree':>13}")
    for name in args.dtypes.split(","):
        base, _, quantize = name.partition("+")  # "bfloat16+int4": bfloat16 activations, int4 weights
        dtype = getattr(torch, base)
        model = llama(args, dtype)
        start = time.perf_counter()
        pte = export_llm(model, max_seq_len=args.context, prefill_chunk=args.chunk, backend="cuda",
                         dtype=None if dtype == torch.float32 else dtype, batch_size=args.batch,
                         quantize=quantize or None)
        gen = TextGenerator(Runtime.get().load_program(pte))
        print(f"# {name}: exported ({len(pte) / 2**30:.2f} GiB) and loaded in {time.perf_counter() - start:.0f} s",
              flush=True)
        del pte
        if quantize:  # the peers run the same quantized layers (their torch reference)
            model = QUANTIZERS[quantize](model)[0]
        bound = bound_tokens_per_second(model, args)
        model = model.to("cuda")

        def ours() -> Run:
            return ours_of(gen, prompts, args.new)

        runners: dict[str, Callable[[], Run]] = {
            "transformers (dynamic)": lambda: theirs(model, prompts, args.new, None),
            "executorch.llm (cuda)": ours,
        }
        if not quantize:  # quantized, theirs expand every weight at each call: the dynamic run is the reference
            runners["transformers (static)"] = lambda: theirs(model, prompts, args.new, "static")
            runners["transformers (static, torch.compile)"] = lambda: theirs(model, prompts, args.new, "static", True)
        results: dict[str, Run] = {}
        for runner, fn in runners.items():
            try:
                fn()  # warm-up: CUDA graph capture, torch.compile
                results[runner] = tokens, prefill, decode = median_of(args.repeat, fn)
            except Exception as e:  # a peer that cannot run here is reported, not fatal
                print(f"{name:10} {runner:36} failed: {str(e).splitlines()[0][:120]}", flush=True)
                continue
            agree = tokens == results.get("transformers (dynamic)", results[runner])[0]
            print(f"{name:10} {runner:36} {prefill:11.1f} {decode:13.1f} {decode / bound:9.2f} {str(agree):>13}",
                  flush=True)
        ours_row = results.get("executorch.llm (cuda)")
        for peer in (r for r in results if ours_row and not r.startswith("executorch")):
            print(f"{name:10} ratio vs {peer:27} {ours_row[1] / results[peer][1]:11.2f} "
                  f"{results[peer][2] / ours_row[2]:13.2f}")
        if args.kernels and ours_row:
            print_kernels(ours, args.kernels)
        del gen, model
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
