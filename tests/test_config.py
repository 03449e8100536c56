"""One config system: settings are pydantic models, the command line merges into a config file
through one function, and the grid is validated whole before anything trains. What names
checkpoints and runs must not move: pinned hashes and the committed benchmark runs hold it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from eebench.cli import app
from eebench.errors import UsageError
from eebench.io import config_hash
from eebench.methods.base import get_method
from eebench.run.artifacts import RunConfig
from eebench.run.config import BenchConfig, load_config, merge, tomllib
from eebench.run.execute import run_dir_for
from eebench.run.grid import expand
from eebench.tasks.catalog import get_task
from eebench.tasks.loaders import load_split
from eebench.train.config import TrainConfig, hashed_train, run_config
from tests.committed import audited, is_decoder

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
COMMITTED = [d / "config.json" for d in audited(p.parent for p in RESULTS.glob("**/config.json")
                                                 if not is_decoder(p.parent))]
runner = CliRunner()

# Computed with the dataclass TrainConfig, before settings became pydantic models.
DEFAULT_HASHED = {
    "epochs": 3, "batch_size": 32, "lr": 2e-05, "heads_lr": 0.0005, "warmup_ratio": 0.1,
    "weight_decay": 0.01, "adam_eps": 1e-08, "max_grad_norm": 1.0, "max_seq_length": 128,
    "max_train_samples": None, "seed": 42, "precision": "fp32", "group_by_length": False,
    "regression_bias_init": "label_mean", "stage_overrides": {},
}


def test_the_checkpoint_hash_of_the_same_settings_does_not_change(data_dir):
    assert TrainConfig().hashed() == DEFAULT_HASHED
    assert list(TrainConfig().hashed()) == list(DEFAULT_HASHED)  # in the same order too
    assert config_hash(TrainConfig().hashed()) == "7b5ee88cbfa9"
    staged = TrainConfig(stage_overrides={"off-ramps": {"lr": 1e-3, "epochs": 1}}, seed=7,
                         precision="bf16")
    assert config_hash(hashed_train(staged, get_task("stsb"))) == "3c2bdd3b6776"
    spec = get_task("rte")
    subset = load_split(spec, "train", data_dir).take(16, 42)
    pinned = {("pabee", ()): "802b1a6c0574", ("static", (("layers", 2),)): "fa98893e7fad",
              ("pabee", (("loss_weights", "equal"),)): "2beef250984e",
              ("deebert", ()): "5325249f2f52"}
    for (name, settings), key in pinned.items():
        config = run_config(get_method(name, **dict(settings)), spec, "minilm-l6", subset,
                            TrainConfig(max_train_samples=16), "mean")
        assert config_hash(config) == key, name


@pytest.mark.audit
@pytest.mark.parametrize("path", COMMITTED, ids=[str(p.parent.relative_to(RESULTS))
                                                 for p in COMMITTED])
def test_committed_runs_keep_their_names_and_their_bytes(path):
    text = path.read_text(encoding="utf-8")
    config = RunConfig.model_validate_json(text)
    assert config.key() == path.parent.name
    assert json.dumps(config.model_dump(mode="json"), indent=2) + "\n" == text


FIELD = ["maxprob", "fastbert", "pcee", "elasticbert", "sweet", "berxit", "cascade"]
FIELD_TASKS = ["sst2", "elue-mrpc", "elue-scitail"]
GRIDS = {  # what benchmarks/*.sh ran, as the command line merges it into the config (a
    # list: several grids into one directory)
    "elue-minilm": {"methods": ["static", "deebert", "pabee"]},
    "elue-minilm-field": {"methods": FIELD, "tasks": FIELD_TASKS},
    "elue-minilm-rules": {"methods": ["deebert", "pabee", "elasticbert"], "tasks": FIELD_TASKS,
                          "rules": ["entropy", "maxprob", "patience"]},
    "pabee-ablation": [{"methods": ["pabee"], "tasks": ["sst2", "elue-scitail"],
                        "seeds": [1, 2, 3], "methods_settings": {"pabee": setting}}
                       for setting in ({"loss_weights": "equal"}, {"shared_pooler": False})],
    "sweet-exits": {"methods": ["sweet"], "tasks": FIELD_TASKS,
                    "methods_settings": {"sweet": {"exit_layers": [1, 2, 4, 6]}}},
    "elue-minilm-test": {"methods": ["deebert", "pabee"], "seeds": [1], "split": "test",
                         "tasks": ["elue-sst2", "elue-mrpc", "elue-stsb", "elue-scitail",
                                   "elue-imdb"], "timing": {"enabled": False}},
}


def test_every_benchmark_config_names_its_precision():
    """A committed benchmark names the precision its runs trained in (fp32 or bf16), never
    `auto`: its runs then keep their names on every machine, whatever `auto` would pick there."""
    configs = sorted((ROOT / "benchmarks").glob("*.toml")) + sorted(
        (ROOT / "benchmarks" / "recipes").glob("*.toml"))
    assert len(configs) > 5
    for path in configs:
        precision = tomllib.loads(path.read_text()).get("train", {}).get("precision")
        assert precision in ("fp32", "bf16"), (path.name, precision)


@pytest.mark.audit
@pytest.mark.parametrize("out", GRIDS)
def test_the_benchmark_config_expands_to_the_committed_runs(out, minilm_path):
    grids = GRIDS[out] if isinstance(GRIDS[out], list) else [GRIDS[out]]
    base = load_config(ROOT / "benchmarks" / "elue-minilm.toml")
    runs = [run for grid in grids for run in expand(merge(base, grid)).runs]
    assert runs
    where = RESULTS / out.removesuffix("-field")  # the field's methods share elue-minilm/
    cells = {run_dir_for(run, where): run for run in runs}
    committed = {p.parent for label in {run.label for run in runs}
                 for p in (where / "minilm-l6" / label).glob("*/*/summary.json")}
    assert committed and committed <= set(cells), sorted(committed - set(cells))
    if out not in RUNNING:  # a finished benchmark: every run of its grid is committed
        assert committed == set(cells), sorted(set(cells) - committed)
    for run_dir in committed:
        written = run_dir / "config.json"
        assert written.read_text() == json.dumps(cells[run_dir].model_dump(mode="json"),
                                                 indent=2) + "\n"


# still running: what is committed is in the grid
RUNNING: tuple[str, ...] = ("mpnet-recipes", "mpnet-recipes-test")
# Benchmarks with their own config: out -> (config, what its script merges into it)
OWN_CONFIG = {
    "ner-minilm": ("ner-minilm.toml", {}),
    "ner-minilm-tokee": ("ner-minilm.toml", {"methods": ["sentee", "deebert"], "rules": ["tokee"]}),
    "ner-minilm-test": ("ner-minilm.toml", {"seeds": [1], "split": "test"}),
    "minilm-recipes": ("minilm-recipes.toml", {}),
    "mpnet-recipes": ("mpnet-recipes.toml", {}),
    "mpnet-recipes-test": ("mpnet-recipes.toml", {"seeds": [1], "split": "test",
                                                  "timing": {"enabled": False}}),
    "mpnet-claims": ("mpnet-claims.toml", {}),
    "peers-minilm": ("peers.toml", {}),
}


@pytest.mark.audit
@pytest.mark.parametrize("out", OWN_CONFIG)
def test_a_benchmark_with_its_own_config_expands_to_its_committed_runs(out, minilm_path):
    config, grid = OWN_CONFIG[out]
    runs = expand(merge(load_config(ROOT / "benchmarks" / config), grid)).runs
    where = RESULTS / out
    cells = {run_dir_for(run, where): run for run in runs}
    committed = {p.parent for p in where.glob("*/*/*/*/summary.json")}  # model/method/task/key
    assert committed <= set(cells), sorted(committed - set(cells))
    if out not in RUNNING:
        assert committed == set(cells), sorted(set(cells) - committed)
    for run_dir in committed:
        assert (run_dir / "config.json").read_text() == json.dumps(
            cells[run_dir].model_dump(mode="json"), indent=2) + "\n"


def test_the_12_layer_grids_test_twins_are_its_test_split_runs(minilm_path):
    """`--test-out` (benchmarks/mpnet_recipes.sh) names each seed-1 cell's test-split runs as the
    grid of mpnet-recipes-test does (`--split test --no-timing`): committed test runs are found,
    none is made twice."""
    config, grid = OWN_CONFIG["mpnet-recipes-test"]
    base = load_config(ROOT / "benchmarks" / config)
    twins = expand(merge(base, {"seeds": [1], "test_out": "elsewhere"}))
    assert twins.test_out == "elsewhere" and len(twins.test) == len(twins.runs)
    assert [t.key() for t in twins.test] == [r.key() for r in expand(merge(base, grid)).runs]
    assert all(t.split == "test" and t.max_eval_samples is None for t in twins.test)


def test_the_12_layer_plan_times_seed_1_at_a_few_points_and_seeds_2_and_3_not_at_all():
    """benchmarks/mpnet-recipes.toml's [[grids]], in its script's order: ELUE MRPC's seed 1 as
    committed (every point timed: the test above holds their names), seed 1 on SST-2, STS-B
    and SciTail timed at 3 points, then seeds 2 and 3 of the full model (static k = 12 alone),
    DeeBERT and PABEE, untimed; SWEET with the paper's exits wherever it runs."""
    runs = expand(load_config(ROOT / "benchmarks" / "mpnet-recipes.toml")).runs
    phases = [[r for r in runs if r.seed == 1 and r.task == "elue-mrpc"],
              [r for r in runs if r.seed == 1 and r.task != "elue-mrpc"],
              [r for r in runs if r.seed > 1]]
    assert runs == [r for phase in phases for r in phase]
    assert len(phases[0]) == 10 and {r.timing.points for r in phases[0]} == {None}
    assert list(dict.fromkeys(r.task for r in phases[1])) == [
        "elue-sst2", "elue-stsb", "elue-scitail"]
    assert {(r.timing.enabled, r.timing.points, r.timing.baseline) for r in phases[1]} == {
        (True, 3, "paired")}
    assert {r.method for r in phases[1]} == {r.method for r in phases[0]}
    assert {tuple(r.method_settings["exit_layers"]) for r in runs if r.method == "sweet"} == {
        (1, 4, 6, 12)}
    assert {(r.method, tuple(r.sweep) if r.method == "static" else None, r.timing.enabled)
            for r in phases[2]} == {("static", (12.0,), False), ("deebert", None, False),
                                    ("pabee", None, False)}
    assert [(r.task, r.seed) for r in phases[2] if r.method == "pabee"] == [
        (t, s) for s in (2, 3) for t in ("elue-mrpc", "elue-sst2", "elue-stsb", "elue-scitail")]


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bench.toml"
    path.write_text(text)
    return path


def test_flags_merge_into_a_config_table_by_table(tmp_path):
    config = load_config(_toml(tmp_path, (
        'methods = ["pabee"]\ntasks = ["rte", "wnli"]\nmax_seq_length = 64\n'
        'max_eval_samples = 100\n'
        '[train]\nmax_train_samples = 500\nepochs = 2\n'
        '[timing]\nsamples = 50\n'
        '[methods_settings.pabee]\nregression_threshold = 0.2\n'
        '[tasks_settings.rte]\nmax_seq_length = 128\ntrain = { epochs = 1, lr = 3e-5 }\n')))
    merged = merge(config, {"train": {"lr": 1e-4, "epochs": None}, "timing": {"warmup": 0},
                            "methods_settings": {"pabee": {"loss_weights": "equal"}},
                            "split": None})
    assert merged.train.given() == {"max_train_samples": 500, "epochs": 2, "lr": 1e-4}
    assert (merged.timing.samples, merged.timing.warmup) == (50, 0)
    assert merged.methods_settings == {"pabee": {"regression_threshold": 0.2,
                                                 "loss_weights": "equal"}}
    rte = merged.for_task("rte")  # a flag also wins over a task's own budget
    assert (rte.max_seq_length, rte.train.epochs, rte.train.lr) == (128, 1, 1e-4)
    assert merged.for_task("wnli").max_seq_length == 64
    assert merge(config, {}).for_task("rte").train.lr == 3e-5
    # a config's evaluation budget is for dev: a test run predicts every row, unless a flag says
    assert merge(config, {}).max_eval_samples == 100
    assert merge(config, {"split": "test"}).for_task("rte").max_eval_samples is None
    assert merge(config, {"split": "test", "max_eval_samples": 12}).for_task(
        "rte").max_eval_samples == 12
    with pytest.raises(UsageError, match="^training setting lr: Input should be a finite"):
        merge(config, {"train": {"lr": float("inf")}})
    with pytest.raises(UsageError, match="^setting timing.samples: "):
        merge(config, {"timing": {"samples": 0}})
    with pytest.raises(UsageError, match="^setting sweeps.pabee: Input should be a finite"):
        merge(config, {"sweeps": {"pabee": [1.0, float("nan")]}})


def test_a_run_records_the_training_settings_given_and_filled_in(monkeypatch):
    monkeypatch.setattr("eebench.measure.env.cpu_flags", frozenset)  # no native bf16: fp32,
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)  # which is not recorded
    runs = expand(merge(BenchConfig(), {"methods": ["pabee"], "tasks": ["stsb"],
                                        "seeds": [3], "train": {"epochs": 1},
                                        "sweeps": {"pabee": [1.0]}})).runs
    train = runs[0].model_dump(mode="json")["train"]
    assert train == {"epochs": 1, "seed": 3, "max_seq_length": 128, "lr": 1e-4,
                     "regression_bias_init": "label_mean"}
    assert runs[0].train.batch_size == 32 and runs[0].timing.samples == 200  # typed access


def test_sweep_values_are_checked_before_anything_trains():
    def grid(method: str, sweep: list[float]):
        return expand(BenchConfig(methods=[method], tasks=["rte"], sweeps={method: sweep}))

    for method, bad in (("pabee", 0.0), ("pabee", 1.5), ("deebert", -0.1), ("static", 0.0)):
        with pytest.raises(UsageError):
            grid(method, [1.0, bad])
    assert grid("deebert", [0.0, 0.3]).runs[0].sweep == [0.0, 0.3]


@pytest.mark.parametrize("text, message", [
    ("[train]\nlearning_rate = 1e-4\n", "training setting learning_rate: Extra inputs"),
    ("[train]\nlr = inf\n", "training setting lr: Input should be a finite number"),
    ("[train]\ngroup_by_length = 1\n", "training setting group_by_length: Input should be"),
    ("[train]\nstage_overrides = { off-ramps = { batch_size = 4 } }\n",
     "training setting stage_overrides.off-ramps.batch_size: Extra inputs"),
    ("[tasks_settings.rte]\ntrain = { precision = \"fp16\" }\n",
     "setting tasks_settings.rte.train.precision: Input should be 'auto', 'fp32' or 'bf16'"),
    ("seeds = [1, -1]\n", "setting seeds: Input should be greater than or equal to 0"),
])
def test_a_bad_config_file_is_one_line(tmp_path, text, message):
    path = _toml(tmp_path, 'methods = ["pabee"]\ntasks = ["rte"]\n' + text)
    with pytest.raises(UsageError) as e:
        load_config(path)
    assert str(e.value).startswith(f"{path}: {message}")
    result = runner.invoke(app, ["run", "--config", str(path), "--out", str(tmp_path / "runs")])
    assert result.exit_code == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()


TRAIN = ["train", "--method", "pabee", "--task", "rte"]
RUN = ["run", "--method", "pabee", "--task", "rte"]


@pytest.mark.parametrize("args, message", [
    ([*TRAIN, "--lr", "inf"], "training setting lr: Input should be a finite number"),
    ([*TRAIN, "--lr", "nan"], "training setting lr: Input should be a finite number"),
    ([*TRAIN, "--heads-lr", "inf"], "training setting heads_lr: Input should be a finite number"),
    ([*TRAIN, "--seed", "-1"], "training setting seed: Input should be greater than or equal"),
    ([*TRAIN, "--seed", str(2**64)], "training setting seed: Input should be less than or equal "
                                     "to 4294967295"),
    ([*TRAIN, "--stage", "off-ramps.lr=Infinity"], "training setting stage_overrides.off-ramps.lr"),
    ([*TRAIN, "--setting", "loss_weights=x"],
     "method 'pabee': setting loss_weights: Input should be 'layer', 'equal' or "
         "'descending'"),
    ([*RUN, "--lr", "inf"], "training setting lr: Input should be a finite number"),
    ([*RUN, "--lr", "nan"], "training setting lr: Input should be a finite number"),
    ([*RUN, "--seed", "-1"], "setting seeds: Input should be greater than or equal to 0"),
    ([*RUN, "--seed", str(2**64)], "setting seeds: Input should be less than or equal"),
    ([*RUN, "--sweep", "1,nan"], "setting sweeps.pabee: Input should be a finite number"),
    ([*RUN, "--time-samples", "0"], "setting timing.samples: Input should be greater"),
    ([*RUN, "--setting", "loss_weights=x"],
     "method 'pabee': setting loss_weights: Input should be 'layer', 'equal' or "
         "'descending'"),
    ([*RUN, "--split", "train"], "--split train: runs are evaluated on dev or test"),
    ([*RUN, "--split", "tets"], "task 'rte' has no split 'tets' (hint: did you mean 'test'?)"),
])
def test_bad_flags_are_refused_with_one_line_before_any_work(tmp_path, args, message):
    out = ["--out", str(tmp_path / "out")] + (["--checkpoints", str(tmp_path / "ckpt")]
                                              if args[0] == "run" else [])
    result = runner.invoke(app, [*args, *out])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert message in result.stderr
    assert not any(tmp_path.iterdir())  # nothing trained, nothing written


def test_methods_declare_their_settings_with_defaults():
    result = runner.invoke(app, ["methods", "--json"])
    assert result.exit_code == 0, result.output
    settings = {r["name"]: r["settings"] for r in json.loads(result.stdout)}
    assert settings["pabee"] == {"regression_threshold": 0.1, "loss_weights": "layer",
                                 "shared_pooler": True}
    assert (settings["static"], settings["deebert"]) == ({"layers": None}, {})
