"""A tiny random Llama for decoder early-exit checks: no download, seconds on a CPU.

4 layers, hidden 32, 4 heads over 2 key/value heads (grouped-query attention), intermediate 64,
vocabulary 100, embeddings tied to the LM head, eager attention, float32. Weights are drawn with
std `init` = 0.4 (Llama's 0.02 makes a random model repeat one token forever: every exit agrees).

`damp` scales the output projections (attention o_proj, MLP down_proj) of every layer after the
first: the residual stream then changes little from layer to layer, so the early exits agree with
the full model often but not always (a random model's exits would agree almost never, and every
self-speculative round would accept nothing).
"""

from __future__ import annotations

from typing import Any


def tiny_llama(seed: int = 0, num_layers: int = 4, vocab_size: int = 100, damp: float = 0.2,
               init: float = 0.4) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=num_layers, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=256,
                         tie_word_embeddings=True, attn_implementation="eager",
                         initializer_range=init,
                         bos_token_id=None, eos_token_id=None, pad_token_id=None)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).float().eval()
    with torch.no_grad():
        for layer in model.model.layers[1:]:
            layer.self_attn.o_proj.weight.mul_(damp)
            layer.mlp.down_proj.weight.mul_(damp)
    return model
