"""Tiny checkpoints in the authors' own layouts, and their forward and exit loops written from
the authors' modeling code, one sample at a time, on the raw tensors.

- DeeBERT (castorini/DeeBERT transformers/modeling_highway_bert.py, _roberta.py):
  `{bert,roberta}.*` (the encoder, `encoder.highway.{i}.pooler.dense` and `.classifier` after
  every layer, the model's `pooler.dense`) and the top `classifier`; the loop exits at the first
  off-ramp whose entropy is below the threshold, the last layer's off-ramp included, else the
  top classifier answers.
- PABEE (JetRunner/PABEE modeling_pabee_bert.py, _albert.py): `{bert,albert}.*` with its one
  pooler, and `classifiers.{i}`; the loop counts unchanged predictions up to the patience.
- ElasticBERT (fastnlp/ElasticBERT finetune-dynamic/models/modeling_elasticbert_entropy.py):
  `elasticbert.embeddings.*`, `elasticbert.encoder.layer.{i}.*`,
  `elasticbert.encoder.pooler.{i}.dense`, `classifiers.{i}`; the loop exits at the first entropy
  below the threshold.

The encoder here is computed from the tensors by hand (attention, feed-forward, LayerNorm), not
by eebench's or transformers' modules: parity with it checks the key mapping and the model.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F

from tests import tiny

LAYERS, LABELS = 3, 2


def entropy(x: torch.Tensor) -> torch.Tensor:
    """The authors' entropy of pre-softmax logits (the same function in all three repositories)."""
    exp_x = torch.exp(x)
    a = torch.sum(exp_x, dim=-1)
    b = torch.sum(x * exp_x, dim=-1)
    return torch.log(a) - b / a


# ------------------------------------------------------------------------------ checkpoints
def _base(family: str, seed: int) -> tuple[dict, dict[str, torch.Tensor]]:
    hf = tiny.tiny_hf_model(seed, family=family, num_layers=LAYERS, max_positions=64,
                            initializer_range=0.5)  # large: samples' outputs differ
    state = {k: v.clone() for k, v in hf.state_dict().items()
             if not k.endswith(("position_ids", "token_type_ids"))}
    return hf.config.to_diff_dict(), state


def _linear(gen: torch.Generator, out: int, into: int, std: float) -> tuple[torch.Tensor, ...]:
    return (torch.randn(out, into, generator=gen) * std, torch.randn(out, generator=gen) * 0.1)


def _put(state: dict, name: str, pair: tuple[torch.Tensor, ...]) -> None:
    state[f"{name}.weight"], state[f"{name}.bias"] = pair


def deebert(family: str = "bert", seed: int = 0) -> tuple[dict, dict[str, torch.Tensor]]:
    config, base = _base(family, seed)
    hidden, gen = config["hidden_size"], torch.Generator().manual_seed(seed + 10)
    state = {f"{family}.{k}": v for k, v in base.items()}
    for i in range(LAYERS):
        _put(state, f"{family}.encoder.highway.{i}.pooler.dense", _linear(gen, hidden, hidden, .3))
        if i < LAYERS - 1:
            _put(state, f"{family}.encoder.highway.{i}.classifier",
                 _linear(gen, LABELS, hidden, 1.5))
        else:  # left out of the authors' loss: it keeps its initial weights (std 0.02, bias 0)
            _put(state, f"{family}.encoder.highway.{i}.classifier",
                 (torch.randn(LABELS, hidden, generator=gen) * 0.02, torch.zeros(LABELS)))
    _put(state, "classifier", _linear(gen, LABELS, hidden, 1.5))
    return config, state


def pabee(family: str = "bert", seed: int = 0) -> tuple[dict, dict[str, torch.Tensor]]:
    config, base = _base(family, seed)
    hidden, gen = config["hidden_size"], torch.Generator().manual_seed(seed + 20)
    state = {f"{family}.{k}": v for k, v in base.items()}
    common = _linear(gen, LABELS, hidden, 1.5)  # classifiers that often agree: patience counts
    for i in range(LAYERS):
        w, b = _linear(gen, LABELS, hidden, 1.0)
        _put(state, f"classifiers.{i}", (common[0] + w, common[1] + b))
    return config, state


def elasticbert(seed: int = 0) -> tuple[dict, dict[str, torch.Tensor]]:
    config, base = _base("bert", seed)
    hidden, gen = config["hidden_size"], torch.Generator().manual_seed(seed + 30)
    state = {f"elasticbert.{k}": v for k, v in base.items() if not k.startswith("pooler.")}
    for i in range(LAYERS):
        _put(state, f"elasticbert.encoder.pooler.{i}.dense", _linear(gen, hidden, hidden, .3))
        _put(state, f"classifiers.{i}", _linear(gen, LABELS, hidden, 1.5))
    config = {k: v for k, v in config.items() if k not in ("architectures", "transformers_version")}
    config.update(model_type="elasticbert", architectures=["ElasticBertForSequenceClassification"],
                  num_output_layers=LAYERS, max_output_layers=LAYERS)
    return config, state


def write(folder: Path, config: dict, state: dict[str, torch.Tensor]) -> Path:
    """A checkpoint folder as the authors' scripts leave it (with safetensors weights)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    save_file({k: v.contiguous() for k, v in state.items()}, str(folder / "model.safetensors"))
    tiny.tokenizer().save_pretrained(str(folder))
    return folder


# ------------------------------------------------------------------- the forward, by hand
def _lin(x: torch.Tensor, sd: dict, name: str) -> torch.Tensor:
    return x @ sd[f"{name}.weight"].T + sd[f"{name}.bias"]


def _norm(x: torch.Tensor, sd: dict, name: str, eps: float) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), sd[f"{name}.weight"], sd[f"{name}.bias"], eps)


def _attention(x: torch.Tensor, q, k, v, heads: int) -> torch.Tensor:
    t, h = x.shape
    d = h // heads
    q, k, v = (y.view(t, heads, d).transpose(0, 1) for y in (q, k, v))
    probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), dim=-1)  # one sample: no padding
    return (probs @ v).transpose(0, 1).reshape(t, h)


def bert_layer(sd: dict, p: str, x: torch.Tensor, config: dict) -> torch.Tensor:
    """BertLayer (RoBERTa's and ElasticBERT's are the same): `p` ends with `layer.{i}.`."""
    eps, heads = config.get("layer_norm_eps", 1e-12), config["num_attention_heads"]
    ctx = _attention(x, _lin(x, sd, p + "attention.self.query"),
                     _lin(x, sd, p + "attention.self.key"),
                     _lin(x, sd, p + "attention.self.value"), heads)
    x = _norm(_lin(ctx, sd, p + "attention.output.dense") + x, sd, p + "attention.output.LayerNorm",
              eps)
    h = F.gelu(_lin(x, sd, p + "intermediate.dense"))
    return _norm(_lin(h, sd, p + "output.dense") + x, sd, p + "output.LayerNorm", eps)


def albert_layer(sd: dict, p: str, x: torch.Tensor, config: dict) -> torch.Tensor:
    """AlbertLayer: `p` is `albert.encoder.albert_layer_groups.0.albert_layers.0.`."""
    eps, heads = config.get("layer_norm_eps", 1e-12), config["num_attention_heads"]
    ctx = _attention(x, _lin(x, sd, p + "attention.query"), _lin(x, sd, p + "attention.key"),
                     _lin(x, sd, p + "attention.value"), heads)
    x = _norm(x + _lin(ctx, sd, p + "attention.dense"), sd, p + "attention.LayerNorm", eps)
    h = _lin(F.gelu(_lin(x, sd, p + "ffn")), sd, p + "ffn_output")
    return _norm(h + x, sd, p + "full_layer_layer_norm", eps)


def embed(sd: dict, p: str, ids: torch.Tensor, types: torch.Tensor, config: dict,
          family: str) -> torch.Tensor:
    """Word + position + token type embeddings, LayerNorm (RoBERTa counts positions after its
    padding id; ALBERT then projects to the hidden size)."""
    start = config["pad_token_id"] + 1 if family == "roberta" else 0
    pos = torch.arange(len(ids)) + start
    e = (sd[f"{p}embeddings.word_embeddings.weight"][ids]
         + sd[f"{p}embeddings.position_embeddings.weight"][pos]
         + sd[f"{p}embeddings.token_type_embeddings.weight"][types])
    e = _norm(e, sd, f"{p}embeddings.LayerNorm", config.get("layer_norm_eps", 1e-12))
    if family == "albert":
        e = _lin(e, sd, f"{p}encoder.embedding_hidden_mapping_in")
    return e


def layers(sd: dict, p: str, ids, types, config: dict, family: str):
    """Each layer's hidden states [T, H] in turn."""
    x = embed(sd, p, ids, types, config, family)
    for i in range(LAYERS):
        if family == "albert":
            x = albert_layer(sd, f"{p}encoder.albert_layer_groups.0.albert_layers.0.", x, config)
        else:
            x = bert_layer(sd, f"{p}encoder.layer.{i}.", x, config)
        yield x


def pool(sd: dict, name: str, x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(_lin(x[0], sd, name))


# ------------------------------------------------------------------------ exits and loops
def deebert_exits(sd: dict, family: str, ids, types, config: dict) -> list[torch.Tensor]:
    """Every exit's logits as eebench numbers them: off-ramps 1..L-1, then the top classifier
    on the model's pooler (plus, last, the L-th off-ramp the loop also tests)."""
    p, out = f"{family}.", []
    for i, x in enumerate(layers(sd, p, ids, types, config, family)):
        out.append(_lin(pool(sd, f"{p}encoder.highway.{i}.pooler.dense", x), sd,
                        f"{p}encoder.highway.{i}.classifier"))
    final = _lin(pool(sd, f"{p}pooler.dense", x), sd, "classifier")
    return [*out[:-1], final, out[-1]]


def deebert_loop(sd: dict, family: str, ids, types, config: dict, threshold: float
                 ) -> tuple[int, torch.Tensor]:
    """DeeBertEncoder.forward at eval: raise HighwayException at the first off-ramp whose
    entropy is below the threshold (after layer i + 1), else the top classifier's logits."""
    *exits, last_ramp = deebert_exits(sd, family, ids, types, config)
    ramps = [*exits[:-1], last_ramp]
    for i, logits in enumerate(ramps):
        if entropy(logits) < threshold:
            return i + 1, logits
    return LAYERS, exits[-1]


def pabee_exits(sd: dict, family: str, ids, types, config: dict) -> list[torch.Tensor]:
    p = f"{family}."
    pooler = f"{p}pooler.dense" if family == "bert" else f"{p}pooler"
    return [_lin(pool(sd, pooler, x), sd, f"classifiers.{i}")
            for i, x in enumerate(layers(sd, p, ids, types, config, family))]


def pabee_loop(exits: list[torch.Tensor], patience: int) -> tuple[int, torch.Tensor]:
    """BertModelWithPabee.forward at eval (patience > 0, classification)."""
    counter, result = 0, None
    for i, logits in enumerate(exits):
        labels = logits.argmax(-1)
        if result is not None and torch.all(labels.eq(result.argmax(-1))):
            counter += 1
        else:
            counter = 0
        result = logits
        if counter == patience:
            return i + 1, result
    return len(exits), result


def elasticbert_exits(sd: dict, ids, types, config: dict) -> list[torch.Tensor]:
    p = "elasticbert."
    return [_lin(pool(sd, f"{p}encoder.pooler.{i}.dense", x), sd, f"classifiers.{i}")
            for i, x in enumerate(layers(sd, p, ids, types, config, "bert"))]


def elasticbert_loop(exits: list[torch.Tensor], threshold: float) -> tuple[int, torch.Tensor]:
    """ElasticBertModel.forward with eval_highway: break at the first entropy below it."""
    for i, logits in enumerate(exits):
        if entropy(logits) < threshold:
            return i + 1, logits
    return len(exits), exits[-1]
