"""The peers' own code for benchmarks/peers.py: which repositories and commits, the textual
patches that let it run on today's transformers (each with its reason), loading it from a scratch
copy, Zero-Time-Waste's sweep function, an eebench model's weights in the authors' layouts, and
the agreement of two sets of decisions.

The authors' code is never in this repository: it is cloned, at the commits below, into a scratch
folder (`../scratch/peers/<name>@<commit>`, benchmarks/peers.sh), read from there, patched in
memory as listed here and run. The weights go the other way from eebench's importer
(eebench/models/convert/formats.py):

- DeeBERT (castorini/DeeBERT transformers/modeling_highway_bert.py): exit j < L is off-ramp
  `bert.encoder.highway.{j}` (its pooler's dense, its classifier); exit L is the model's own
  `bert.pooler.dense` and the top `classifier`. The authors' encoder also holds an off-ramp after
  the last layer, which their loop still tests before answering with the top classifier: it gets
  the last exit's weights, so that test answers exactly as the top classifier does (and the exit
  layer is L either way).
- PABEE (JetRunner/PABEE pabee/modeling_bert.py): one pooler, `bert.pooler.dense` (eebench's
  shared pooler), and `classifiers.{j}` for every layer.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import subprocess
import sys
import time
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SCRATCH = REPO.parent / "scratch" / "peers"


@dataclass(frozen=True)
class Patch:
    file: str
    old: str
    new: str
    count: int  # how many times `old` is in the file at that commit (checked)
    reason: str


@dataclass(frozen=True)
class Peer:
    repo: str
    commit: str
    package: str  # the name its modules are loaded under
    modules: tuple[tuple[str, str], ...]  # (module name, file), in import order
    model: tuple[str, str]  # (module, class) of the classifier
    loop: tuple[str, tuple[str, ...]]  # (script, the functions taken from it; the last is run)

    @property
    def folder_name(self) -> str:
        return f"{self.repo.split('/')[1]}@{self.commit}"


_POST_INIT = "transformers 5 builds a model's weight-tying map in post_init(); init_weights() " \
             "alone, as transformers 2 called it, fails on the missing map (post_init still " \
             "calls init_weights, so the initialisation is the authors')"
_PRUNE = "transformers 5 moved prune_linear_layer to transformers.pytorch_utils"
_CONFIG = "transformers 5 has no top-level configuration_bert module: BertConfig is exported " \
          "from transformers"

PEERS: dict[str, Peer] = {
    "deebert": Peer(
        "castorini/DeeBERT", "563eac1c23dc274eceaf4309cae110012f6b7bb1", "peer_deebert",
        (("modeling_bert", "transformers/modeling_bert.py"),
         ("modeling_highway_bert", "transformers/modeling_highway_bert.py")),
        ("modeling_highway_bert", "BertForSequenceClassification"),
        ("examples/run_highway_glue.py", ("get_wanted_result", "evaluate"))),
    "pabee": Peer(
        "JetRunner/PABEE", "6080b3ee425e905f70a0bc47d4ddffa497851bf3", "peer_pabee",
        (("modeling_bert", "pabee/modeling_bert.py"),),
        ("modeling_bert", "BertForSequenceClassification"),
        ("run_glue.py", ("evaluate",))),
}
# Zero-Time-Waste: read, not run (docs/benchmarks.md, "Peers in one run", says why)
ZTW = ("gmum/Zero-Time-Waste", "8341f3a6215a88171427472534ef53a9385f8cd8")

PATCHES: dict[str, tuple[Patch, ...]] = {
    "deebert": (
        # the fork's modeling_bert.py imports the fork's own transformers 2 internals
        Patch("transformers/modeling_bert.py",
              "from .modeling_utils import PreTrainedModel, prune_linear_layer",
              "from transformers.modeling_utils import PreTrainedModel\n"
              "from transformers.pytorch_utils import prune_linear_layer", 1,
              "the fork's transformers 2 modeling_utils does not run on transformers 5: the "
              "installed PreTrainedModel is the base class; " + _PRUNE),
        Patch("transformers/modeling_bert.py", "from .configuration_bert import BertConfig",
              "from transformers import BertConfig", 1, _CONFIG),
        Patch("transformers/modeling_bert.py", "from .file_utils import add_start_docstrings",
              "from transformers.utils import add_start_docstrings", 1,
              "transformers 5 keeps add_start_docstrings in transformers.utils"),
        Patch("transformers/modeling_bert.py", "self.init_weights()", "self.post_init()", 8,
              _POST_INIT),
        Patch("transformers/modeling_highway_bert.py", "self.init_weights()",
              "self.post_init()", 2, _POST_INIT),
    ),
    "pabee": (
        Patch("pabee/modeling_bert.py",
              "from transformers.activations import gelu, gelu_new, swish",
              "from transformers.activations import gelu, gelu_new\n"
              "from torch.nn.functional import silu as swish", 1,
              "transformers 5 has no activations.swish (swish is SiLU; MiniLM uses gelu)"),
        Patch("pabee/modeling_bert.py", "from transformers.configuration_bert import BertConfig",
              "from transformers import BertConfig", 1, _CONFIG),
        Patch("pabee/modeling_bert.py",
              "from transformers.file_utils import add_start_docstrings, "
              "add_start_docstrings_to_callable",
              "from transformers.utils import add_start_docstrings, "
              "add_start_docstrings_to_model_forward as add_start_docstrings_to_callable", 1,
              "transformers 5 renamed add_start_docstrings_to_callable to "
              "add_start_docstrings_to_model_forward"),
        Patch("pabee/modeling_bert.py",
              "from transformers.modeling_utils import PreTrainedModel, prune_linear_layer",
              "from transformers.modeling_utils import PreTrainedModel\n"
              "from transformers.pytorch_utils import prune_linear_layer", 1, _PRUNE),
        Patch("pabee/modeling_bert.py", "self.init_weights()", "self.post_init()", 8, _POST_INIT),
    ),
}


# ------------------------------------------------------------------------ the scratch copy
def peer_dir(scratch: Path, name: str) -> Path:
    """The scratch copy of peer `name`, checked to be a checkout of the recorded commit."""
    peer = PEERS[name]
    folder = Path(scratch) / peer.folder_name
    if not folder.is_dir():
        sys.exit(f"{folder}: no copy of {peer.repo} at {peer.commit} (bash benchmarks/peers.sh "
                 f"clones it; or git clone https://github.com/{peer.repo} there and check out "
                 "that commit)")
    head = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    if head and head != peer.commit:
        sys.exit(f"{folder}: checked out at {head}, not {peer.commit}")
    return folder


def patched_source(folder: Path, name: str, file: str) -> str:
    """A file of the scratch copy with this peer's patches to it applied (each found exactly as
    often as recorded, or the copy is not the one these patches were written for)."""
    text = (folder / file).read_text(encoding="utf-8")
    for p in PATCHES[name]:
        if p.file != file:
            continue
        if text.count(p.old) != p.count:
            sys.exit(f"{folder / file}: {p.old!r} found {text.count(p.old)} times, not {p.count}")
        text = text.replace(p.old, p.new)
    return text


def load_modules(folder: Path, name: str) -> dict[str, types.ModuleType]:
    """The peer's modules, patched, under a package of their own (relative imports resolve
    within it)."""
    peer = PEERS[name]
    if peer.package not in sys.modules:
        package = types.ModuleType(peer.package)
        package.__path__ = []
        sys.modules[peer.package] = package
    out = {}
    for module, file in peer.modules:
        full = f"{peer.package}.{module}"
        spec = importlib.util.spec_from_loader(full, loader=None, origin=str(folder / file))
        mod = importlib.util.module_from_spec(spec)
        mod.__file__ = str(folder / file)
        sys.modules[full] = mod
        exec(compile(patched_source(folder, name, file), str(folder / file), "exec"),  # noqa: S102
             mod.__dict__)
        out[module] = mod
    return out


def functions_from(path: Path, names: tuple[str, ...], namespace: dict[str, Any]) -> None:
    """Define the module-level functions `names` of `path`, by their source text, in
    `namespace` (which gives them the names their module would); tracebacks keep the file's
    line numbers."""
    text = path.read_text(encoding="utf-8")
    nodes = {n.name: n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)}
    for fn in names:
        code = "\n" * (nodes[fn].lineno - 1) + ast.get_source_segment(text, nodes[fn])
        exec(compile(code, str(path), "exec"), namespace)  # noqa: S102


def loop_function(folder: Path, name: str, namespace: dict[str, Any]):
    """The peer's evaluation loop, taken by its source text from the authors' GLUE script and
    run in `namespace`: the names the script's module gives it (its imports; its data loading,
    which the caller provides). The script itself does not import on transformers 5."""
    script, functions = PEERS[name].loop
    functions_from(folder / script, functions, namespace)
    return namespace[functions[-1]]


def file_hashes(folder: Path, name: str) -> dict[str, str]:
    peer = PEERS[name]
    files = [f for _, f in peer.modules] + [peer.loop[0]]
    return {f: hashlib.sha256((folder / f).read_bytes()).hexdigest() for f in files}


# ------------------------------------------------------------------------ Zero-Time-Waste
def ztw_sweep(scratch: Path):
    """Zero-Time-Waste's sweep over stored head outputs (ztw_nlp/eval.py,
    evaluate_earlyexiting_classification), taken by its source text, and its PBEE class (the
    sweep takes its patience path where `isinstance(model, PBEE)`). eval.py itself does not
    import here: through utils.py it imports wandb and omegaconf, which the sweep never uses."""
    from typing import Dict, List  # noqa: UP035 - the names eval.py's annotations read

    import torch
    from fvcore.nn import FlopCountAnalysis
    from sklearn.metrics import f1_score

    folder = Path(scratch) / f"{ZTW[0].split('/')[1]}@{ZTW[1]}" / "ztw_nlp"
    if not folder.is_dir():
        sys.exit(f"{folder.parent}: no copy of {ZTW[0]} at {ZTW[1]}")
    sys.path.insert(0, str(folder))
    try:
        pbee = importlib.import_module("architectures.early_exits.pbee")
    finally:
        sys.path.remove(str(folder))
    namespace = {"torch": torch, "List": List, "Dict": Dict,  # noqa: UP006
                 "f1_score": f1_score, "FlopCountAnalysis": FlopCountAnalysis, "PBEE": pbee.PBEE}
    functions_from(folder / "eval.py", ("average_earlyexiting_flops",
                                        "evaluate_earlyexiting_classification"), namespace)
    return namespace["evaluate_earlyexiting_classification"], pbee.PBEE


class _Cost:
    """What ZTW's sweep reads of a head's fvcore FLOP count: total(). Here the head's layer
    number, so that its `threshold_flops` is the mean exit layer."""

    def __init__(self, layer: int):
        self.layer = layer

    def total(self) -> int:
        return self.layer


def ztw(scratch: Path, method: str, logits, labels, exit_layers) -> dict:
    """Zero-Time-Waste's own sweep over this model's stored exit logits (PABEE's model: its
    PBEE patience path, t = 0..L-1; DeeBERT's: its max-probability path at 100 thresholds in
    [0, 1], exit where p > t), against eebench's simulation of the same rule."""
    import torch

    from eebench.rules.engine import simulate
    from eebench.rules.maxprob import MaxProbRule
    from eebench.rules.patience import PatienceRule

    sweep, pbee_class = ztw_sweep(scratch)
    model = pbee_class.__new__(pbee_class) if method == "pabee" else None  # isinstance() only
    labels_t = torch.as_tensor(np.asarray(labels))
    start = time.perf_counter()
    got = sweep(model, list(logits), labels_t, [_Cost(int(x)) for x in exit_layers], 100)
    seconds = time.perf_counter() - start
    if method == "pabee":
        settings = list(range(len(exit_layers)))
        rules = [PatienceRule(t) for t in settings]
    else:
        settings = [float(t) for t in got["thresholds"]]
        rules = [MaxProbRule(t, comparison=">") for t in settings]
    n, correct_diff, layer_diff = len(labels), [], []
    for k, rule in enumerate(rules):  # ZTW's accuracy is a float32 share: compared as a count
        dec = simulate(rule, logits, False)
        correct_diff.append(abs(round(got["threshold_scores"][k] * n)
                                - int((dec.prediction == np.asarray(labels)).sum())))
        layer_diff.append(abs(got["threshold_flops"][k]
                              - float(np.asarray(exit_layers)[dec.exit_index].mean())))
    return {"rule": "patience (PBEE)" if method == "pabee" else "max probability > t",
            "settings": len(settings), "seconds": seconds,
            "max_correct_count_difference": max(correct_diff),
            "max_mean_exit_layer_difference": max(layer_diff),
            "settings_differing": sum(a > 0 or b > 1e-9 for a, b in zip(correct_diff,
                                                                          layer_diff))}


# --------------------------------------------------------- an eebench model, their layout
def authors_state_dict(model, method: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(config.json dict, state dict) of eebench's `model` in the authors' layout for `method`
    (see the module docstring). Refused unless the model is what their classes are: a BERT
    encoder, an exit after every layer, heads pooling [CLS]."""
    from eebench.models.convert.export import hf_backbone

    layers = model.num_layers
    if list(model.exit_layers) != list(range(1, layers + 1)) or model.pooling != "cls":
        raise ValueError("the authors' classes have an exit after every layer and pool [CLS]: "
                         f"exits {list(model.exit_layers)}, pooling {model.pooling!r}")
    hf = hf_backbone(model)  # its pooler: the last exit's
    if hf.config.model_type != "bert":
        raise ValueError(f"a {hf.config.model_type} encoder: the peers' classes are BERT's")
    state = {f"bert.{k}": v.detach().clone() for k, v in hf.state_dict().items()
             if not k.endswith(("position_ids", "token_type_ids"))}
    heads = list(model.heads)

    def linear(name: str, module) -> None:
        state[f"{name}.weight"] = module.weight.detach().clone()
        state[f"{name}.bias"] = module.bias.detach().clone()

    if method == "deebert":
        for j, head in enumerate(heads):  # off-ramp L: the last exit (see the docstring)
            linear(f"bert.encoder.highway.{j}.pooler.dense", head.pooler.dense)
            linear(f"bert.encoder.highway.{j}.classifier", head.classifier)
        linear("classifier", heads[-1].classifier)
    elif method == "pabee":
        if any(h.pooler is not heads[0].pooler for h in heads):
            raise ValueError("PABEE's heads share one pooler; this model has one per exit")
        for j, head in enumerate(heads):
            linear(f"classifiers.{j}", head.classifier)
    else:
        raise ValueError(f"no authors' layout for {method!r}")
    config = hf.config.to_dict()
    config.update(num_labels=model.num_labels, architectures=["BertForSequenceClassification"])
    return config, state


# ------------------------------------------------------------------------------- agreement
def agreement(a_layer, a_pred, b_layer, b_pred, near=None) -> dict[str, Any]:
    """How often two codes decided otherwise for the same samples: the exit layer, the
    prediction, either; of those, how many are `near` (a bool per sample: a quantity within
    float noise of its threshold); and the first samples where they differ."""
    a_layer, b_layer = np.asarray(a_layer), np.asarray(b_layer)
    a_pred, b_pred = np.asarray(a_pred), np.asarray(b_pred)
    layer, pred = a_layer != b_layer, a_pred != b_pred
    either = np.flatnonzero(layer | pred)
    out = {"compared": len(a_layer), "exit_layer": int(layer.sum()),
           "prediction": int(pred.sum()), "either": len(either),
           "samples": either[:20].tolist()}
    if near is not None:
        out["near_threshold"] = int(np.asarray(near)[either].sum())
    return out
