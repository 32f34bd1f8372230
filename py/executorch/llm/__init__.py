"""Language models that generate: export with a key/value cache, then generate token by token.

    from executorch.llm import export_llm, TextGenerator
    pte = export_llm(model, max_seq_len=128)            # a transformers causal LM
    gen = TextGenerator(Runtime.get().load_program(pte))
    result = gen.generate(prompt_ids, max_new_tokens=32)   # greedy; temperature/top_k/top_p sample
    result.tokens, result.tokens_per_second

The program has two methods sharing one key/value cache (program state, kept between calls):
`prefill` takes a fixed chunk of `prefill_chunk` tokens with their positions, `decode` one token.
Both return the logits of every token they were given.
"""

from executorch.llm._export import export_llm
from executorch.llm._generate import BatchGeneration, Generation, TextGenerator

__all__ = ["BatchGeneration", "Generation", "TextGenerator", "export_llm"]
