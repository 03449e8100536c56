"""`--eval-task` compares what labels mean, not their strings: a model is evaluated on another
task only where each label id means the same thing there (a declared label space per task).
SST-2 -> CoLA (both "0", "1") is refused; SST-2 -> IMDb and MNLI -> SNLI (other strings, the
same meanings) are accepted. An evaluated task whose data is missing is refused before the
in-domain model trains. All in one line, before any work, nothing written."""

from __future__ import annotations

import shutil

import pytest

from eebench.errors import UsageError
from eebench.run.config import BenchConfig
from eebench.run.grid import check_shift, expand
from eebench.tasks.catalog import all_tasks, get_task
from eebench.tasks.spec import LABEL_SPACES, TaskSpec
from tests.hostile.conftest import FAST
from tests.hostile.helpers import fails, unchanged


def _args(bench, tmp_path, data, task, eval_task):
    return ["run", "--task", task, "--eval-task", eval_task, "--model", bench.backbone,
            "--data-dir", data, *FAST, "--method", "pabee", "--out", tmp_path / "runs",
            "--checkpoints", tmp_path / "ckpt"]


@pytest.mark.parametrize("task,eval_task,needle", [
    ("sst2", "cola", "it has single sentences with acceptability labels (0 = unacceptable, "
                     "1 = acceptable), sst2 has single sentences with sentiment labels "
                     "(0 = negative, 1 = positive)"),
    ("cola", "elue-sst2", "cola has single sentences with acceptability labels"),
    ("rte", "wnli", "it has sentence pairs with not-or-entailment labels (0 = not entailment, "
                    "1 = entailment)"),
    ("rte", "elue-scitail", "rte has sentence pairs with entailment-or-not labels"),
    ("mrpc", "rte", "it has sentence pairs with entailment-or-not labels"),
    ("stsb", "mrpc", "stsb has sentence pairs with a similarity score"),
    ("sst2", "mrpc", "it has sentence pairs with paraphrase labels"),
])
def test_labels_that_mean_something_else_are_refused(bench, tmp_path, task, eval_task, needle):
    with unchanged(tmp_path):
        line = fails(*_args(bench, tmp_path, bench.data, task, eval_task), code=2,
                     needle=needle)
    assert line.startswith(f"error: --eval-task {eval_task}:")


@pytest.mark.parametrize("task,eval_task", [
    ("sst2", "elue-imdb"), ("sst2", "elue-sst2"), ("elue-imdb", "sst2"), ("rte", "qnli"),
    ("mnli", "elue-snli"), ("elue-snli", "mnli"), ("qqp", "mrpc"), ("stsb", "elue-stsb"),
    ("wnli", "elue-scitail"),
])
def test_the_same_meaning_under_other_strings_is_accepted(task, eval_task):
    check_shift(get_task(task), get_task(eval_task))
    grid = expand(BenchConfig(methods=["pabee"], tasks=[task], seeds=[1], eval_task=eval_task))
    assert [r.task for r in grid.runs] == [get_task(eval_task).name]


def test_every_task_declares_a_label_space_that_fits_its_labels():
    for spec in all_tasks():
        if spec.unit == "generated":  # a decoder task: no labels, its targets are tokens
            assert spec.label_space is None and spec.labels is None, spec.name
            continue
        assert spec.label_space in LABEL_SPACES, spec.name
        meanings = LABEL_SPACES[spec.label_space]
        assert (meanings is None) == spec.is_regression, spec.name
        assert meanings is None or len(meanings) == spec.num_labels, spec.name


def test_a_task_without_a_label_space_is_no_one_s_shift():
    """A task a plugin registers without a label space is compared with none."""
    from dataclasses import replace

    undeclared = replace(get_task("sst2"), name="plugin-sentiment", label_space=None)
    with pytest.raises(UsageError, match="labels of no declared label space"):
        check_shift(get_task("sst2"), undeclared)
    with pytest.raises(UsageError, match="plugin-sentiment has single sentences with labels of no"):
        check_shift(undeclared, get_task("sst2"))
    with pytest.raises(ValueError, match="does not fit its labels"):
        TaskSpec(**{**undeclared.__dict__, "label_space": "nli"})


def test_missing_evaluated_data_is_refused_before_the_model_trains(bench, tmp_path, data_dir):
    data = tmp_path / "data"
    shutil.copytree(data_dir / "SST-2", data / "SST-2")  # no ELUE/SST-2
    with unchanged(tmp_path):
        fails(*_args(bench, tmp_path, data, "sst2", "elue-sst2"), code=1,
              needle="ELUE/SST-2")
    assert not (tmp_path / "ckpt").exists() and not (tmp_path / "runs").exists()


def test_a_broken_evaluated_file_is_refused_before_the_model_trains(bench, tmp_path, data_dir):
    data = tmp_path / "data"
    shutil.copytree(data_dir / "SST-2", data / "SST-2")
    (data / "ELUE" / "SST-2").mkdir(parents=True)
    (data / "ELUE" / "SST-2" / "dev.tsv").mkdir()  # a directory where the file should be
    with unchanged(tmp_path):
        fails(*_args(bench, tmp_path, data, "sst2", "elue-sst2"), code=1,
              needle="dev.tsv: is a directory, not a file")
