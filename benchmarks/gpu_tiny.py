"""A tiny random BERT with the real MiniLM-L6 tokenizer: the backbone of the GPU suite's CPU smoke
test (`benchmarks/gpu.sh --device cpu`).

Real GLUE text tokenised by the bundled all-MiniLM-L6-v2 tokenizer (30,522 word pieces) runs
through 4 layers of hidden size 32, so every step of the suite runs its real code path in seconds.
The figures it gives mean nothing; that the steps run does.

    python benchmarks/gpu_tiny.py DIR      # writes config.json, model.safetensors, tokenizer files
"""

from __future__ import annotations

import argparse
from pathlib import Path


def write_tiny_backbone(path: Path, num_layers: int = 4, seed: int = 0) -> Path:
    import torch
    from transformers import BertConfig, BertModel
    from transformers.utils import logging

    from eebench.models.backbones import load_tokenizer

    path.mkdir(parents=True, exist_ok=True)
    tokenizer = load_tokenizer("minilm-l6")
    config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32,
                        num_hidden_layers=num_layers, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=128, type_vocab_size=2)
    logging.disable_progress_bar()
    torch.manual_seed(seed)
    BertModel(config).eval().save_pretrained(str(path))  # safetensors
    tokenizer.save_pretrained(str(path))
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path", type=Path)
    p.add_argument("--layers", type=int, default=4)
    args = p.parse_args()
    print(write_tiny_backbone(args.path, args.layers))


if __name__ == "__main__":
    main()
