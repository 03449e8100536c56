"""Promises that were broken, each case named by its cause: repeated Ctrl-C during training (7a),
an unterminated quote named where parsing gave up (7b), validation outside the repository (7c),
and the smaller ones (8): a full disk under `export-model`, `--stop-by` with a UTC offset or far
ahead, `eebench.api.score` without the command line's checks, a dry run listing a length the run
refuses, a length in `[train]` dropped without a word, a FIFO or a device called a directory.

Each bad input: one line, exit code 1 or 2, no traceback, nothing hangs, nothing half-written."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eebench.errors import UsageError
from tests import tiny
from tests.conftest import REPO
from tests.hostile.helpers import fails, invoke, temporaries, tmpfs, unchanged

SUBMISSION = REPO / "leaderboard" / "submissions" / "minilm-l6-pabee.json"


# ------------------------------------------------------------ 7a: Ctrl-C pressed repeatedly
def _train_until_saved(tmp_path: Path, data_dir: Path) -> tuple[subprocess.Popen, Path]:
    """`eebench train` of a tiny model in its own process, once its first checkpoint is saved."""
    from eebench.train import checkpoint as ckpt

    backbone = tiny.save_tiny_backbone(tmp_path / "tiny", num_layers=2)
    out = tmp_path / "ckpt"
    args = ["--method", "pabee", "--task", "rte", "--model", backbone, "--data-dir", data_dir,
            "--max-train-samples", "16", "--batch-size", "8", "--epochs", "1000",
            "--max-seq-length", "32", "--save-every", "1", "--out", out]
    proc = subprocess.Popen([sys.executable, "-m", "eebench", "train", *map(str, args)],
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(out.rglob(ckpt.STATE_FILE)) and proc.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint within 2 minutes"
        time.sleep(0.2)
    return proc, out


def test_cause_7a_ctrl_c_pressed_eleven_times_exits_130_with_a_loadable_checkpoint(
        tmp_path, data_dir):
    """The first Ctrl-C interrupts; the ten after it, arriving while the step is saved, the
    line printed and Python shuts down, are ignored: exit 130, one line, no traceback, and a
    checkpoint that loads."""
    from eebench.train import checkpoint as ckpt

    proc, out = _train_until_saved(tmp_path, data_dir)
    try:
        for _ in range(11):
            if proc.poll() is not None:
                break
            proc.send_signal(signal.SIGINT)
            time.sleep(0.1)
        _, stderr = proc.communicate(timeout=300)  # a loaded machine shuts Python down slowly
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines[-1] == "interrupted: rerun the same command to resume", stderr
    assert not any(line.startswith(("error", "interrupted: rerun")) for line in lines[:-1])
    [state_file] = [p for p in out.rglob(ckpt.STATE_FILE) if not p.parent.name.startswith(".")]
    assert temporaries(out) == []
    model, _, _ = ckpt.load_trained(state_file.parent, allow_unfinished=True)
    assert ckpt.read_state(state_file.parent).global_step > 0 and model.num_exits == 2


def _held(*signums: int) -> str:
    """What signals sent while `hold_interrupts` holds them end as: "interrupted" or "ignored"
    (a KeyboardInterrupt caught here: pytest would stop the session at it)."""
    from eebench.train.checkpoint import hold_interrupts

    try:
        with hold_interrupts():
            for signum in signums:
                os.kill(os.getpid(), signum)
    except KeyboardInterrupt:
        return "interrupted"
    return "ignored"


def test_cause_7a_a_signal_held_during_a_step_goes_to_the_handler_it_was_held_from():
    """`hold_interrupts` gives a held Ctrl-C to the handler in place: ignored where Ctrl-C is
    ignored, the command line's handler interrupts once and ignores both signals after it,
    Python's own raises KeyboardInterrupt every time."""
    from eebench.errors import terminate_as_interrupt

    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        assert _held(signal.SIGINT) == "ignored"
        signal.signal(signal.SIGINT, signal.default_int_handler)
        assert [_held(signal.SIGINT), _held(signal.SIGINT)] == ["interrupted"] * 2
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        terminate_as_interrupt()
        assert _held(signal.SIGINT) == "interrupted"
        assert _held(signal.SIGINT, signal.SIGTERM) == "ignored"  # the command is ending
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])


# ------------------------------------------------------- 7b: where an unterminated quote starts
def _stsb(root: Path, last: str) -> Path:
    """An ELUE STS-B dev file whose quote opened on line 3 meets a quote again on line 269."""
    rows = ["sentence1\tsentence2\tlabel", "A man is dancing.\tA man dances.\t5.0",
            '"A quote that never closes.\tA child rides.\t4.0',
            *(f"Sentence {i}.\tAnother {i}.\t3.0" for i in range(4, 269)), last,
            "A dog barks.\tA dog is barking.\t4.8"]
    stsb = root / "ELUE" / "STS-B"
    stsb.mkdir(parents=True)
    (stsb / "dev.tsv").write_text("\n".join(rows) + "\n")
    return stsb / "dev.tsv"


@pytest.mark.parametrize("last", ['He said "hi" there.\tHe spoke.\t1.0',  # parsing stops here
                                  'so it closes here."\tAt last.\t1.0'])  # 266 rows in one
def test_cause_7b_an_unterminated_quote_is_named_at_the_line_that_opened_it(tmp_path, last):
    dev = _stsb(tmp_path, last)
    with unchanged(tmp_path):
        line = fails("data", "check", "--data-dir", tmp_path, "--task", "elue-stsb", "--json",
                     code=1, report=True, needle="dev.tsv:3: unterminated quote")
        assert "runs on to line 269" in line
        line = fails("data", "show", "elue-stsb", "--data-dir", tmp_path, code=1)
        assert line.startswith(f"error: {dev}:3: unterminated quote: the quoted field runs on "
                               "to line 269")


# ------------------------------------------------------- 7c: validation outside the repository
def test_cause_7c_an_honest_submission_validates_outside_the_repository(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    sub = Path(shutil.copy(SUBMISSION, elsewhere / SUBMISSION.name))
    monkeypatch.chdir(tmp_path)
    result = invoke("validate", sub)
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == f"{sub}: ok"


def test_cause_7c_the_shipped_references_are_the_leaderboards_byte_for_byte():
    """The package ships leaderboard/references (pyproject's package data): the same files,
    the same bytes, so the two can never drift."""
    import tomllib

    from eebench.submit.rescore import SHIPPED_REFERENCES

    board = REPO / "leaderboard" / "references"
    names = sorted(p.name for p in board.glob("*.json"))
    assert names and sorted(p.name for p in SHIPPED_REFERENCES.glob("*.json")) == names
    for name in names:
        assert (SHIPPED_REFERENCES / name).read_bytes() == (board / name).read_bytes(), name
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    shipped = data["package-data"]["eebench"]
    assert any("references" in pattern and len(list((REPO / "eebench").glob(pattern))) ==
               len(names) for pattern in shipped)


# ------------------------------------------------------------ 8: a full disk under export-model
def _export(bench, out: Path, *extra: object) -> list[object]:
    return ["export-model", bench.pabee, "--out", out, *extra]


def test_cause_8_export_model_when_the_weights_writer_fails_on_a_full_disk(bench, tmp_path,
                                                                         monkeypatch):
    """safetensors' writer raises its own error type on a full disk: one line naming the
    folder, no folder and no temporary folder left; an export being replaced is kept."""
    from safetensors import SafetensorError

    def full(*args, **kwargs):
        raise SafetensorError("Error while serializing: IoError(No space left on device)")

    monkeypatch.setattr("safetensors.torch.save_file", full)
    old = tmp_path / "old"
    old.mkdir()
    (old / "README.md").write_text("the previous export\n")
    with unchanged(tmp_path, bench.pabee):
        fails(*_export(bench, tmp_path / "new"), code=1,
              needle=f"{tmp_path / 'new'}: the exported model could not be written")
        fails(*_export(bench, old, "--overwrite"), code=1, needle="No space left on device")


def test_cause_8_export_model_when_the_disk_fills_during_the_card(bench, tmp_path, monkeypatch):
    real = Path.write_text

    def write_text(self, text, *args, **kwargs):
        if self.name == "README.md":  # half of the model card fits
            real(self, text[: len(text) // 2], *args, **kwargs)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    with unchanged(tmp_path, bench.pabee):
        fails(*_export(bench, tmp_path / "new"), code=1,
              needle=f"{tmp_path / 'new'}: no space left on device")


def test_cause_8_export_model_on_a_real_full_disk(bench, tmp_path):
    from tests.hostile.test_full_disk import fill_up

    with tmpfs(tmp_path / "disk", "size=64k") as disk:
        fill_up(disk)
        with unchanged(disk, bench.pabee):
            line = fails(*_export(bench, disk / "model"), code=1, needle=f"{disk / 'model'}: ")
        assert "space left on device" in line


# --------------------------------------------------------------------------------- 8: --stop-by
@pytest.mark.parametrize("raw,needle", [
    ("2020-12-07T18:00+01:00", "--stop-by '2020-12-07T18:00+01:00' has passed"),
    ("100000000000000000000h", "--stop-by '100000000000000000000h' is too far ahead"),
    ("99999999999h", "--stop-by '99999999999h' is too far ahead"),
])
def test_cause_8_stop_by_with_a_utc_offset_or_far_ahead_is_one_line(tmp_path, raw, needle):
    with unchanged(tmp_path):
        fails("run", "--method", "pabee", "--task", "rte", "--out", tmp_path / "runs",
              "--stop-by", raw, code=2, needle=needle)


def test_cause_8_stop_by_reads_a_utc_offset():
    from datetime import datetime, timedelta, timezone

    from eebench.cli.backends import parse_stop_by

    at = (datetime.now(timezone(timedelta(hours=1))) + timedelta(hours=2)).replace(
        second=0, microsecond=0)
    assert parse_stop_by(at.strftime("%Y-%m-%dT%H:%M+01:00")) == at.timestamp()


# ------------------------------------------------------------------------- 8: api.score's checks
@pytest.mark.parametrize("options,needle", [
    ({"budgets": [-5]}, "--budget must be a percentage"),
    ({"budgets": [float("nan")]}, "--budget must be a percentage"),
    ({"compare": ("pabee",)}, "--compare takes two method labels"),
    ({"compare": "pabee"}, "--compare takes two method labels"),
    ({"n_resamples": 0}, "--bootstrap must be in"),
    ({"seed": -1}, "--seed must be in"),
])
def test_cause_8_api_score_applies_the_command_lines_checks(bench, options, needle):
    from eebench import api

    with unchanged(bench.pabee), pytest.raises(UsageError, match=needle):
        api.score(bench.pabee, **options)
    if "budgets" in options:  # and the command line says the same
        fails("score", bench.pabee, "--budget", options["budgets"][0], code=2, needle=needle)


# --------------------------------------------------- 8 and older: max_seq_length in a run config
def _config(tmp_path: Path, backbone: Path, text: str) -> Path:
    config = tmp_path / "bench.toml"
    config.write_text(f'model = "{backbone}"\nmethods = ["pabee"]\ntasks = ["rte"]\n{text}')
    return config


@pytest.mark.parametrize("text,needle", [
    ("max_seq_length = 1024\n", "setting max_seq_length: 1024 exceeds the 512 positions"),
    ("[tasks_settings.RTE]\nmax_seq_length = 600\n",
     "setting tasks_settings.RTE.max_seq_length: 600 exceeds the 512 positions"),
])
def test_cause_8_a_dry_run_refuses_the_length_the_run_refuses(bench, tmp_path, text, needle):
    """Refused before any work, by the dry run and the run alike, naming the key the user gave
    (not an option they never gave)."""
    config = _config(tmp_path, bench.backbone, text)
    out = ["--data-dir", bench.data, "--out", tmp_path / "runs", "--checkpoints",
           tmp_path / "ckpt"]
    with unchanged(tmp_path):
        for extra in (["--dry-run"], []):
            line = fails("run", "--config", config, *out, *extra, code=2, needle=needle)
            assert "--max-seq-length" not in line.partition(" (hint:")[0]


@pytest.mark.parametrize("text,setting", [
    ("[train]\nepochs = 1\nmax_seq_length = 64\n", "train.max_seq_length"),
    ("[tasks_settings.rte]\ntrain = { max_seq_length = 64 }\n",
     "tasks_settings.rte.train.max_seq_length"),
])
def test_older_a_length_in_train_is_refused_not_dropped(bench, tmp_path, text, setting):
    from eebench import api

    config = _config(tmp_path, bench.backbone, text)
    with unchanged(tmp_path):
        fails("run", "--config", config, "--dry-run", "--out", tmp_path / "runs", code=2,
              needle=f"setting {setting}: unknown in [")
    with pytest.raises(UsageError, match="the top-level max_seq_length"):
        api.config(train={"max_seq_length": 64})


# ------------------------------------------------------- older: a FIFO or a device in data check
@pytest.mark.parametrize("what,said", [("fifo", "is a FIFO (named pipe), not a regular file"),
                                       ("zero", "is a character device, not a regular file")])
def test_older_data_check_says_what_a_special_file_is(rte, what, said):
    dev = rte / "RTE" / "dev.tsv"
    dev.unlink()
    if what == "fifo":
        os.mkfifo(dev)
    else:
        dev.symlink_to("/dev/zero")
    with unchanged(rte):
        line = fails("data", "check", "--data-dir", rte, "--task", "rte", "--json", code=1,
                     report=True, needle=f"(RTE/dev.tsv): {said}")
        assert "directory" not in line
        fails("data", "show", "rte", "--data-dir", rte, code=1, needle=f"{dev}: {said}")
