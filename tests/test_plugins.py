"""Plugins as first-class citizens: entry points (re-exports, broken and clashing plugins), needs a
rule names itself, heads that read the previous exit's state, a stage's own learning rate, the
package-root exports, and (slow) the example plugin package installed into a fresh venv."""

from __future__ import annotations

import importlib
import io
import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import torch
from torch import nn

from eebench import registry
from eebench.errors import UsageError
from eebench.methods import EarlyExitMethod, ExitHeads, Stage, exit_loss
from eebench.rules import RULES, ModelFacts, RuleKind
from tests import tiny
from tests.hostile.helpers import fails, snapshot

REPO = Path(__file__).resolve().parents[1]


# -- the registry --------------------------------------------------------------------------------
def _plugins(tmp_path, monkeypatch, files: dict[str, str], eps: list[tuple[str, str]]):
    """A registry (one built-in entry, `entropy`) whose entry-point group holds `eps` (name,
    value), the modules they name written from `files` (UID: a name unique to the test)."""
    uid = tmp_path.name.replace("-", "_").replace(".", "_")
    group = f"test.things.{uid}"
    (tmp_path / f"holder_{uid}.py").write_text(
        "from eebench.registry import Lazy, Registry\n"
        f"REG = Registry('thing', entry_point_group={group!r})\n"
        "REG.add('entropy', Lazy('eebench.rules.catalog:Entropy'))\n")
    for name, text in files.items():
        path = tmp_path / name.replace("UID", uid)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("UID", uid))
    monkeypatch.syspath_prepend(str(tmp_path))
    found = [EntryPoint(n, v.replace("UID", uid), group) for n, v in eps]
    monkeypatch.setattr(registry, "entry_points",
                        lambda group: [e for e in found if e.group == group])
    return importlib.import_module(f"holder_{uid}").REG, group


def test_an_entry_point_may_name_a_re_export(tmp_path, monkeypatch, capsys):
    """`mypkg:Thing` where mypkg.core defines Thing and registers it by its decorator: one entry,
    the same object (eebench compares objects, not "module:object" strings)."""
    reg, _ = _plugins(tmp_path, monkeypatch, {
        "re_UID/__init__.py": "from re_UID.core import Thing\n",
        "re_UID/core.py": "from holder_UID import REG\n\n@REG.register('mine')\n"
                          "class Thing:\n    pass\n",
    }, [("mine", "re_UID:Thing")])
    assert reg.names() == ["entropy", "mine"]
    thing = reg.get("mine")
    assert thing.__module__.endswith(".core") and reg.get("MINE") is thing
    assert reg.source("mine").startswith("plugin 'mine' (test.things.")
    assert reg.builtin() == ["entropy"] and reg.source("entropy") == "eebench"
    assert capsys.readouterr().err == ""


def test_a_broken_or_clashing_plugin_is_one_warning_line_and_the_rest_works(
        tmp_path, monkeypatch, capsys):
    reg, group = _plugins(tmp_path, monkeypatch, {
        "good_UID.py": "class Good:\n    pass\n",
        "bad_UID.py": "raise ImportError('needs the package nowhere')\n",
        # registers a name eebench has, then one of its own: the first is refused, the second kept
        "clash_UID.py": "from holder_UID import REG\n\n@REG.register('entropy')\n"
                        "class Mine:\n    pass\n\n@REG.register('extra')\nclass Extra:\n"
                        "    pass\n",
    }, [("good", "good_UID:Good"), ("bad", "bad_UID:Thing"), ("clash", "clash_UID:Extra"),
        ("entropy", "good_UID:Good")])
    names = reg.names()
    assert set(names) == {"entropy", "good", "clash", "extra"} and "bad" not in reg
    from eebench.rules.catalog import Entropy

    assert reg.get("entropy") is Entropy and reg.get("clash") is reg.get("extra")
    assert reg.names() == names and list(reg) == names  # listed again: no second warning
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"warning: plugin 'bad' ({group}): cannot load bad_UID:Thing: ImportError: needs the "
        "package nowhere".replace("UID", tmp_path.name.replace("-", "_").replace(".", "_")),
        f"warning: plugin 'clash' ({group}): thing 'entropy' is already registered (eebench); "
        "kept that one",
        f"warning: plugin 'entropy' ({group}): thing 'entropy' is built into eebench; the "
        "plugin's entry is ignored"]
    with pytest.raises(UsageError, match="unknown thing 'bad'"):
        reg.get("bad")
    assert reg.builtin() == ["entropy"]


def test_a_duplicate_outside_a_plugin_is_still_an_error():
    reg = registry.Registry("thing")
    reg.add("a", object())
    with pytest.raises(ValueError, match="registered twice"):
        reg.add("A", object())


# -- needs by name -------------------------------------------------------------------------------
class _NeedsHalting(RuleKind):
    name = "needs-halting"
    needs = ("halting-prob",)
    need_descriptions = {"halting-prob": "a halting probability per exit (trained by: x)"}

    def default_sweep(self, num_layers, is_regression, num_labels=2):
        return [0.5]


def test_a_rule_names_a_need_eebench_does_not_know():
    kind = _NeedsHalting()
    with pytest.raises(UsageError) as e:
        kind.refuse_unless({"classes"}, "pabee on rte")
    assert e.value.message == ("rule 'needs-halting' needs 'halting-prob' (a halting probability "
                               "per exit (trained by: x)): pabee on rte has none")
    assert kind.describe()["needs_described"] == {
        "halting-prob": "a halting probability per exit (trained by: x)"}
    assert RuleKind.describe_need("no-such") == "a head signal 'no_such' per exit"
    # a model provides every head signal by name
    facts = ModelFacts(False, 2, None, ("halting_prob", "exit_score"))
    assert facts.provides() == {"classes", "halting-prob", "exit-score"}
    assert not kind.missing(facts.provides())


def test_a_rule_whose_need_a_method_lacks_is_refused_before_training(tmp_path, monkeypatch,
                                                                     data_dir):
    monkeypatch.setitem(RULES._items, "needs-halting", _NeedsHalting)
    monkeypatch.setitem(RULES._sources, "needs-halting", "plugin 'x' (eebench.rules)")
    backbone = tiny.save_tiny_backbone(tmp_path / "tiny", num_layers=2)
    before = snapshot(tmp_path / "runs", tmp_path / "ckpt")
    fails("run", "--method", "pabee", "--rule", "needs-halting", "--task", "rte", "--model",
          backbone, "--data-dir", data_dir, "--out", tmp_path / "runs", "--checkpoints",
          tmp_path / "ckpt", code=2, needle="rule 'needs-halting' needs 'halting-prob' (a "
          "halting probability per exit (trained by: x)): pabee on rte has none")
    assert snapshot(tmp_path / "runs", tmp_path / "ckpt") == before


# -- heads that read the previous exit's state ---------------------------------------------------
class _RunningHead(nn.Module):
    """Logits from this exit's pooled state plus the previous one's, an exit score that reads
    both (a smaller matmul at exit 0, where there is none), and a dict state with a counter."""

    reads_previous = True

    def __init__(self, pooler, hidden: int, num_labels: int):
        super().__init__()
        self.__dict__["pooler"] = pooler  # shared, owned by the method's first head
        self.classifier = nn.Linear(hidden, num_labels)
        self.first = nn.Linear(hidden, 1)
        self.both = nn.Linear(2 * hidden, 1)

    def forward(self, hidden, attention_mask=None, previous=None):
        pooled = self.pooler(hidden, attention_mask)
        if previous is None:
            logits, score = self.classifier(pooled), self.first(pooled)
            count = torch.ones(pooled.shape[0])
        else:
            logits = self.classifier(pooled + previous["pooled"])
            score = self.both(torch.cat([pooled, previous["pooled"]], -1))
            count = previous["count"] + 1
        out = torch.cat([logits, torch.sigmoid(score)], -1)
        return out, {"pooled": pooled, "count": count}


class _Running(EarlyExitMethod):
    name = "running-test"
    rule = "learned"

    def build_heads(self, config, num_labels, num_layers, pooler):
        heads = nn.ModuleList([_RunningHead(pooler, config.hidden_size, num_labels)
                               for _ in range(num_layers)])
        heads[0].add_module("shared_pooler", pooler)
        return ExitHeads(heads, tuple(range(1, num_layers + 1)), signals=("exit_score",))

    def stages(self):
        return [Stage("joint", lambda m: list(m.parameters()), lr=3e-3)]

    def loss(self, exit_logits, labels, stage, is_regression, step=0):
        return sum(exit_loss(z[:, :2], labels, is_regression) for z in exit_logits)


@pytest.fixture(scope="module")
def running():
    from eebench.data.batching import encode
    from eebench.testing import examples

    model = tiny.tiny_model(_Running(), depth=4, seed=2)
    with torch.no_grad():  # outputs that differ per sample: the exits mix
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.3)
    return model, encode(examples("dev", False), tiny.tokenizer(), 32)


def test_a_stateful_model_threads_the_state_in_forward_and_step_by_step(running):
    from eebench.data.batching import collate

    model, enc = running
    assert model.stateful and not tiny.tiny_model("pabee").stateful
    batch = collate(enc, list(range(6)))
    whole = model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    mask = batch["attention_mask"]
    h, inputs = model.embed(batch["input_ids"], mask, batch["token_type_ids"])
    previous, steps, seen = None, [], []
    for i in range(model.num_layers):
        h = model.layer(i, h, inputs)
        seen.append((h, previous))
        logits, signals, previous = model.head_step(i, h, mask, previous)
        steps.append(torch.cat([logits, signals["exit_score"][:, None]], -1))
    torch.testing.assert_close(whole, torch.stack(steps), atol=1e-6, rtol=0)
    assert previous["count"].tolist() == [4.0] * 6
    h1, state = seen[1]  # exit 1 reads exit 0's state: without it, it says otherwise
    torch.testing.assert_close(model.head(1, h1, mask, state), whole[1, :, :2])
    assert not torch.allclose(model.head(1, h1, mask), whole[1, :, :2])


def test_a_stateful_model_agrees_with_its_simulation_at_batch_1_and_batched(running):
    from eebench.data.batching import eval_batches
    from eebench.models.outputs import collect_exit_logits
    from eebench.rules.catalog import get_rule
    from eebench.rules.engine import compare, dynamic_batch, dynamic_inference, simulate

    model, enc = running
    out = collect_exit_logits(model, eval_batches(enc, 8, sort_by_length=True))
    facts = ModelFacts(False, 2, None, model.signal_names)
    score = out.signals["exit_score"]
    mixed = False
    for name, values in (("learned", torch.quantile(score.flatten(), torch.tensor([.3, .6]))),
                         ("entropy", [0.2, 0.4, 0.6])):
        for v in values:
            rule = get_rule(name).build(float(v), facts)
            sim = simulate(rule, out.logits, False, out.signals)
            mixed |= len(set(sim.exit_index)) > 1
            for bs in (1, 5):
                real = dynamic_inference(model, rule, eval_batches(enc, bs), len(enc), False)
                assert compare(sim, real).disagreements == 0, (name, float(v), bs)
    assert mixed
    # the full model (the timing baseline) runs every head for the state, and answers at the last
    from eebench.data.batching import collate

    batch = collate(enc, list(range(len(enc))))
    e, p = dynamic_batch(model, get_rule("entropy").build(0.5, facts), batch, False, full=True)
    assert e.tolist() == [3] * len(enc) and p.tolist() == out.logits[-1].argmax(-1).tolist()


def test_a_stateful_head_is_costed_with_the_state_it_gets(running):
    from eebench.measure.cost_table import build_cost_table

    model, _ = running
    table = build_cost_table(model, max_len=12)
    n, hidden = 7, model.config.hidden_size
    # exit 0 scores from its own state (H -> 1), the others from two (2H -> 1)
    assert table.head[1, n] - table.head[0, n] == 2 * hidden
    assert (table.head[1:, n] == table.head[1, n]).all()


# -- a stage's own learning rate -------------------------------------------------------------------
def test_a_stage_trains_at_its_own_learning_rate_unless_overridden(tmp_path):
    from rich.console import Console

    from eebench.tasks.catalog import get_task
    from eebench.testing import examples, tiny_backbone
    from eebench.train.config import StageOverrides, TrainConfig
    from eebench.train.loop import train

    cfg = TrainConfig(lr=1e-4, heads_lr=5e-4)
    assert cfg.for_stage("s", heads_only=False, stage_lr=3e-3).lr == 3e-3
    assert cfg.for_stage("s", heads_only=True, stage_lr=3e-3).lr == 3e-3
    assert cfg.for_stage("s", heads_only=True).lr == 5e-4
    over = cfg.model_copy(update={"stage_overrides": {"s": StageOverrides(lr=1e-5)}})
    assert over.for_stage("s", heads_only=False, stage_lr=3e-3).lr == 1e-5
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="lr must be a positive number"):
            Stage("s", lambda m: [], lr=bad)
    log = io.StringIO()
    train(_Running(), get_task("rte"), str(tiny_backbone(tmp_path / "bb")),
          examples("train", False), None,
          TrainConfig(epochs=1, batch_size=6, max_seq_length=32, device="cpu", save_every=0),
          tmp_path / "ckpt", console=Console(file=log, width=200))
    assert "stage 'joint': " in log.getvalue() and ", lr 0.003, " in log.getvalue()


# -- exports ---------------------------------------------------------------------------------------
def test_the_package_roots_export_what_plugins_are_written_with():
    code = ("import sys\n"
            "from eebench.methods import (get_method, register_method, EarlyExitMethod, "
            "MethodSettings, Stage, exit_loss)\n"
            "from eebench.rules import register_rule, RuleKind, ExitRule, StepResult\n"
            "import eebench.models\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n"
            "from eebench.methods import ExitHeads, ExitHead\n"
            "from eebench.models import build_model, load_tokenizer\n"
            "print(ExitHeads.__module__, build_model.__module__, load_tokenizer.__module__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["eebench.models.multi_exit", "eebench.models.build",
                                  "eebench.models.backbones"]


# -- the example plugin, installed ---------------------------------------------------------------
BROKEN = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools>=68"]\n'
                      'build-backend = "setuptools.build_meta"\n[project]\n'
                      'name = "eebench-broken"\nversion = "0.1"\n'
                      '[project.entry-points."eebench.methods"]\n'
                      'broken = "eebench_broken:Thing"\n[tool.setuptools]\n'
                      'py-modules = ["eebench_broken"]\n',
    "eebench_broken.py": "raise ImportError('eebench_broken needs a package that is missing')\n",
}


# In the plugin's venv: the conformance kit on every built-in method (one process), after a
# listing that must not have imported torch.
BUILTINS_CONFORM = """
import sys
from eebench.cli import app
try:
    app(["methods", "--json"], standalone_mode=False)
except SystemExit:
    pass
heavy = [m for m in ("torch", "transformers", "pandas", "matplotlib") if m in sys.modules]
from eebench.methods.base import METHODS
from eebench.testing.conformance import check_method
bad = [r for r in map(check_method, METHODS.builtin()) if not r.ok]
print(*bad, sep="\\n")
print("HEAVY", heavy)
sys.exit(1 if bad else 0)
"""


@pytest.mark.slow
def test_the_example_plugin_installed_in_a_venv(tmp_path, data_dir):
    """`pip install` the example package (and a broken plugin) into a venv that sees eebench:
    `eebench methods` lists palbert and warns once about the broken one, a run of palbert agrees
    with its simulation, pabee with q-exit is refused before training, the conformance checks
    pass, and eebench's own tests still do."""
    venv = tmp_path / "venv"
    # no pip of its own: the system's pip and setuptools (the venv sees them) build offline
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True)
    py = str(venv / "bin" / "python")
    if sys.prefix != sys.base_prefix:  # pytest itself runs in a venv: the new one sees it too
        import site

        purelib = Path(subprocess.run(
            [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True).stdout.strip())
        purelib.mkdir(parents=True, exist_ok=True)
        (purelib / "outer_venv.pth").write_text("".join(
            f"import site; site.addsitedir({p!r})\n" for p in site.getsitepackages()))
    shutil.copytree(REPO / "examples" / "plugin", tmp_path / "plugin")
    (tmp_path / "broken").mkdir()
    for name, text in BROKEN.items():
        (tmp_path / "broken" / name).write_text(text)
    for pkg in ("plugin", "broken"):
        subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                        "--no-index", str(tmp_path / pkg)], check=True, cwd=tmp_path)
    # the eebench under test (this checkout), not whichever one the system has installed
    env = {**os.environ, "EEBENCH_TEST_THREADS": "1", "PYTHONPATH": str(REPO)}

    def eebench(*args, code=0):
        out = subprocess.run([py, "-m", "eebench", *map(str, args)], capture_output=True,
                             text=True, env=env, cwd=tmp_path)
        assert out.returncode == code, out.stderr[-2000:]
        return out

    listed = eebench("methods", "--json")
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["palbert"]["rule"] == "q-exit" and rows["palbert"]["provides"] == ["halting-prob"]
    assert {"pabee", "static", "cascade"} <= set(rows) and "broken" not in rows
    assert listed.stderr.splitlines() == [
        "warning: plugin 'broken' (eebench.methods): cannot load eebench_broken:Thing: "
        "ImportError: eebench_broken needs a package that is missing"]
    rules = {r["name"]: r for r in json.loads(eebench("rules", "--json").stdout)}
    assert rules["q-exit"]["needs_described"]["halting-prob"].startswith("a halting probability")
    backbone = tiny.save_tiny_backbone(tmp_path / "tiny", num_layers=3)
    common = ["--task", "rte", "--model", backbone, "--data-dir", data_dir,
              "--max-train-samples", "32", "--epochs", "1", "--max-seq-length", "48",
              "--max-eval-samples", "20", "--time-samples", "6", "--out", tmp_path / "runs",
              "--checkpoints", tmp_path / "ckpt", "--json"]
    runs = json.loads(eebench("run", "--method", "palbert", "--rule", "entropy", *common).stdout)
    assert {o["points"][0]["method"] for o in runs} == {"palbert", "palbert+entropy"}
    for o in runs:
        assert [p["disagreements"] for p in o["points"]] == [0] * len(o["points"])
    refused = eebench("run", "--method", "pabee", "--rule", "q-exit", *common[:-5],
                      "--out", tmp_path / "runs2", "--checkpoints", tmp_path / "ckpt2", code=2)
    assert refused.stderr.splitlines()[-1].startswith(
        "error: rule 'q-exit' needs 'halting-prob' (a halting probability per exit")
    assert not (tmp_path / "ckpt2").exists()
    conformance = subprocess.run([py, "-m", "eebench.testing", "palbert", "--rule", "q-exit"],
                                 capture_output=True, text=True, env=env, cwd=tmp_path)
    assert conformance.returncode == 0, conformance.stdout[-3000:] + conformance.stderr[-2000:]
    assert "0 problem(s)" in conformance.stdout
    # every built-in method still passes the conformance kit beside the plugin, and the
    # listings stay torch-free with it (its entry modules import no torch)
    own = subprocess.run([py, "-c", BUILTINS_CONFORM], capture_output=True, text=True, env=env,
                         cwd=tmp_path)
    assert own.returncode == 0, own.stdout[-3000:] + own.stderr[-2000:]
    assert own.stdout.strip().endswith("HEAVY []"), own.stdout[-300:]
