"""`eebench run --config`: a grid file is strict. An unknown name anywhere (a table's key, a
method, a rule, a task, a method's setting, a stage) is one line naming it and the nearest known
one; an empty list, a zero batch size, a value given twice, a grid over the bound, a file over
its size bound and deep nesting are one line; all before any work, with or without --dry-run."""

from __future__ import annotations

import time

import pytest

from eebench.run.names import MAX_GRID_RUNS
from tests.hostile.helpers import fails, unchanged

HEAD = 'methods = ["pabee"]\ntasks = ["rte"]\n'


def _config(tmp_path, text: str, head: str = HEAD):
    path = tmp_path / "grid.toml"
    path.write_text(head + text)
    return path


def _refused(bench, tmp_path, text: str, needle: str, head: str = HEAD,
             dry_run: bool = True, code: int = 2) -> str:
    path = _config(tmp_path, text, head)
    runs, ckpt = tmp_path / "runs", tmp_path / "ckpt"
    extra = ["--dry-run"] if dry_run else []
    with unchanged(tmp_path, bench.data):
        line = fails("run", "--config", path, "--model", bench.backbone, "--data-dir",
                     bench.data, "--out", runs, "--checkpoints", ckpt, *extra, code=code,
                     needle=needle)
    assert line.startswith(f"error: {path}: "), line
    return line


@pytest.mark.parametrize("text,needle", [
    # a misspelt key in each table: named, with the nearest known one
    ("[train]\nepoch = 2\n", "training setting epoch: Extra inputs are not permitted "
                             "(hint: did you mean 'epochs'?)"),
    ("[timing]\nsampels = 3\n", "setting timing.sampels: Extra inputs are not permitted "
                                "(hint: did you mean 'samples'?)"),
    ("seed = [1]\n", "setting seed: Extra inputs are not permitted (hint: did you mean "
                     "'seeds'?)"),
    ("[tasks_settings.rte]\nmax_seq_lenght = 64\n",
     "setting tasks_settings.rte.max_seq_lenght: Extra inputs are not permitted (hint: did you "
     "mean 'max_seq_length'?)"),
    ("[tasks_settings.rte]\ntrain = { epoch = 1 }\n",
     "setting tasks_settings.rte.train.epoch: Extra inputs are not permitted (hint: did you mean "
     "'epochs'?)"),
    # the names tables are keyed by
    ("[sweeps]\npabe = [1.0, 2.0]\n", "setting sweeps.pabe: unknown method 'pabe' (hint: did "
                                      "you mean 'pabee'?)"),
    ('[sweeps]\n"pabee+entropi" = [0.1]\n', "setting sweeps.pabee+entropi: unknown rule "
                                            "'entropi' (hint: did you mean 'entropy'?)"),
    ('rules = ["maxprob"]\n[sweeps]\n"pabee+entropy" = [0.1]\n',
     "setting sweeps.pabee+entropy: entropy is not one of the config's rules (maxprob)"),
    ("[sweeps]\ndeebert = [0.1]\n", "setting sweeps.deebert: deebert is not one of the "
                                    "config's methods (pabee)"),
    ("[methods_settings.pabe]\nregression_threshold = 0.2\n",
     "setting methods_settings.pabe: unknown method 'pabe' (hint: did you mean 'pabee'?)"),
    ("[methods_settings.pabee]\nregresion_threshold = 0.2\n",
     "setting methods_settings.pabee: method 'pabee': setting regresion_threshold: Extra inputs "
     "are not permitted (hint: its settings are: regression_threshold,"),
    ("[methods_settings.pabee]\nloss_weights = \"squared\"\n",
     "setting methods_settings.pabee: method 'pabee': setting loss_weights: Input should be"),
    ("[tasks_settings.rtee]\nmax_seq_length = 64\n",
     "setting tasks_settings.rtee: unknown task 'rtee' (hint: did you mean 'rte'?)"),
    ("[train]\nstage_overrides = { off-ramps = { lr = 1e-3 } }\n",
     "setting train.stage_overrides.off-ramps: method pabee has no stage 'off-ramps' (hint: its "
     "stages are: joint)"),
    ('rules = ["maxprobb"]\n', "setting rules: unknown rule 'maxprobb' (hint: did you mean "),
    # empty lists, zero and negative batch sizes
    ("[sweeps]\npabee = []\n", "setting sweeps.pabee: List should have at least 1 item"),
    ("[timing]\nbatch_sizes = []\n", "setting timing.batch_sizes: List should have at least 1"),
    ("[timing]\nbatch_sizes = [0]\n", "setting timing.batch_sizes: Input should be greater "
                                      "than or equal to 1"),
    ("[timing]\nbatch_sizes = [1, -32]\n", "setting timing.batch_sizes: Input should be greater"),
    ("seeds = []\n", "setting seeds: List should have at least 1 item"),
    # a value given twice
    ("seeds = [1, 2, 1]\n", "setting seeds: 1 is given twice"),
    ('rules = ["maxprob", "maxprob"]\n', "setting rules: 'maxprob' is given twice"),
    ("[sweeps]\npabee = [1, 2.0, 1.0]\n", "setting sweeps.pabee: 1.0 is given twice"),
    ("[timing]\nbatch_sizes = [1, 32, 1]\n", "setting timing.batch_sizes: 1 is given twice"),
])
def test_a_bad_grid_file_is_one_line_naming_the_setting(bench, tmp_path, text, needle):
    _refused(bench, tmp_path, text, needle)


@pytest.mark.parametrize("head,needle", [
    ('methods = ["pabee"]\ntasks = ["rte", "RTE"]\n', "setting tasks: 'RTE' and 'rte' are the "
                                                      "same 'rte'"),
    ('methods = ["pabee", "PABEE"]\ntasks = ["rte"]\n', "setting methods: 'PABEE' and 'pabee' "
                                                        "are the same 'pabee'"),
    ('methods = ["pabee"]\ntasks = ["rte"]\n[tasks_settings.rte]\nmax_seq_length = 64\n'
     '[tasks_settings.RTE]\nmax_seq_length = 32\n',
     "setting tasks_settings: 'RTE' and 'rte' are the same 'rte'"),
])
def test_two_names_for_one_thing_are_refused(bench, tmp_path, head, needle):
    _refused(bench, tmp_path, "", needle, head=head)


@pytest.mark.parametrize("text", ["[timing]\nbatch_sizes = [0]\n", "[sweeps]\npabee = []\n"])
def test_refused_before_any_work_without_dry_run(bench, tmp_path, text):
    """These once got as far as training, then a traceback."""
    _refused(bench, tmp_path, text, "setting ", dry_run=False)


def test_a_grid_over_the_bound_is_refused_before_expansion(bench, tmp_path):
    seeds = ", ".join(str(s) for s in range(2 * MAX_GRID_RUNS))
    start = time.perf_counter()
    _refused(bench, tmp_path, f"seeds = [{seeds}]\n",
             f"setting seeds: the grid has {2 * MAX_GRID_RUNS:,} runs (seeds x tasks x methods "
             f"x (1 + rules)), over the bound of {MAX_GRID_RUNS:,}")
    assert time.perf_counter() - start < 20


def test_a_million_seeds_are_refused_at_once(bench, tmp_path):
    """1.2 million seeds: the file is over the config size bound, refused unread (exit 1, as a
    config file that cannot be read)."""
    seeds = ",".join(str(s) for s in range(1_200_000))
    start = time.perf_counter()
    _refused(bench, tmp_path, f"seeds = [{seeds}]\n", "bytes, over the 1,048,576-byte limit",
             code=1)
    assert time.perf_counter() - start < 10


@pytest.mark.parametrize("text", ["x = " + "[" * 5000 + "]" * 5000 + "\n",
                                  "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n"])
def test_deeply_nested_toml_is_one_line(bench, tmp_path, text):
    _refused(bench, tmp_path, text, "nested too deeply")


def test_the_committed_benchmark_configs_still_load(bench, tmp_path):
    from eebench.run.config import load_config
    from tests.conftest import REPO

    for path in sorted((REPO / "benchmarks").glob("*.toml")):
        assert load_config(path).methods, path
