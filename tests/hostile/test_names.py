"""One-line errors stay one line, and names show as they are: a control character (newline, CR,
ESC) or a bidirectional override in a file name is escaped where a line names it; such names are
refused in a submission, never put raw on the page; a newline never reaches a Slurm job script;
a FIFO where a directory is expected is named as one; the page says which reference file (and
sha256) each score was recomputed against."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from eebench.errors import printable
from tests.hostile.helpers import fails, invoke, unchanged

HIDDEN = {"newline": "\n", "carriage return": "\r", "escape": "\x1b[31m", "NUL": "\x00",
          "right-to-left override": "\u202e", "line separator": "\u2028"}


@pytest.mark.parametrize("name", ["newline", "carriage return", "escape",
                                  "right-to-left override", "line separator"])
def test_a_hidden_character_in_a_file_name_is_escaped_in_the_one_line(tmp_path, name):
    char = HIDDEN[name]
    odd = tmp_path / f"ref{char}erence.json"
    odd.write_text("{ not json")
    with unchanged(tmp_path):
        line = fails("score", tmp_path, "--reference", odd, code=1)
        assert printable(str(odd)) in line and char not in line
        line = fails("validate", odd, code=1, prefix=f"{printable(str(odd))}: ")
        assert char not in line


def test_printable_escapes_every_hidden_character():
    for char in HIDDEN.values():
        shown = printable(f"a{char}b")
        assert shown.isprintable() and shown.startswith("a\\") and shown.endswith("b")
    assert printable("plain é 日本 name") == "plain é 日本 name"


def _submission(bench, tmp_path: Path, **changes) -> Path:
    data = json.loads(bench.submission.read_text())
    for dotted, value in changes.items():
        *parents, key = dotted.split("__")
        target = data
        for p in parents:
            target = target[p]
        target[key] = value
    path = tmp_path / "sub.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("field", ["name", "model__name", "method__name", "method__sweep_param",
                                   "flops__convention"])
@pytest.mark.parametrize("name", ["newline", "NUL", "right-to-left override", "escape"])
def test_a_submission_name_with_a_hidden_character_is_refused(bench, tmp_path, field, name):
    char = HIDDEN[name]
    path = _submission(bench, tmp_path, **{field: f"evil{char}gnp.exe"})
    with unchanged(tmp_path):
        line = fails("validate", path, code=1, prefix=f"{path}: ",
                     needle=f"{field.replace('__', '.')}: ")
    assert f"U+{ord(char[0]):04X}" in line and char not in line


def test_submit_refuses_a_name_with_a_bidi_override(bench, tmp_path):
    with unchanged(tmp_path, bench.pabee):
        line = fails("submit", bench.pabee, "--name", "team\u202egnp.exe", "--out",
                     tmp_path / "sub.json", code=1, needle="U+202E")
    assert "\u202e" not in line


def test_the_page_never_shows_a_hidden_character_raw(bench, tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    shutil.copy(bench.submission, folder / "ok\u202egnp.json")  # an odd file name, valid file
    bad = json.loads(bench.submission.read_text())
    bad["name"] = "evil\u202ename"
    (folder / "bad\nname.json").write_text(json.dumps(bad))
    refs = tmp_path / "references"
    refs.mkdir()
    shutil.copy(bench.reference, refs / "reference.json")
    result = invoke("leaderboard", "build", folder, "--out", tmp_path / "site")
    assert result.exit_code == 0, result.output
    page = (tmp_path / "site" / "index.html").read_text()
    assert not any(c in page for c in ("\u202e", "\x00", "\x1b"))
    assert "ok\\u202egnp.json" in page and "bad\\nname.json" in page
    lines = result.stderr.splitlines()  # the rejected file's line, then the summary
    assert lines[0].startswith("rejected ") and "bad\\nname.json" in lines[0]
    assert len(lines) == 2


def test_the_page_names_the_reference_file_and_hash_of_each_score(bench, tmp_path):
    """Two reference files share a name (one re-serialised): each score says which one."""
    import hashlib

    from eebench.score.reference import load_reference

    refs = tmp_path / "references"
    refs.mkdir()
    shutil.copy(bench.reference, refs / "a.json")
    same = load_reference(bench.reference).model_dump_json(indent=4)  # same curves, other bytes
    (refs / "b.json").write_text(same)
    digests = {n: hashlib.sha256((refs / n).read_bytes()).hexdigest() for n in ("a.json",
                                                                                  "b.json")}
    assert digests["a.json"] != digests["b.json"]
    folder = tmp_path / "submissions"
    folder.mkdir()
    for n in ("a.json", "b.json"):
        result = invoke("submit", bench.pabee, "--reference", refs / n, "--name",
                        f"scored against {n}", "--data-dir", bench.data, "--out",
                        folder / f"sub-{n}")
        assert result.exit_code == 0, result.output
        assert json.loads((folder / f"sub-{n}").read_text())["elue"]["reference_sha256"] == (
            digests[n])
    result = invoke("leaderboard", "check", folder, "--out", tmp_path / "site")
    assert result.exit_code == 0, result.output
    page = (tmp_path / "site" / "index.html").read_text()
    for n, digest in digests.items():
        assert f'{n} <code>{digest[:12]}</code>' in page and f"sha256 {digest}" in page
        assert f"{refs / n} sha256 {digest}" in result.stderr


@pytest.mark.parametrize("flag,value,needle", [
    ("--slurm-option", "qos=high\n#SBATCH --wrap=touch /tmp/pwned",
     "--slurm-option qos 'high\\n#SBATCH --wrap=touch /tmp/pwned': holds a control character"),
    ("--slurm-option", "q\nos=high", "--slurm-option 'q\\nos': not an option name"),
    ("--slurm-option", "qos=high\r", "holds a control character"),
    ("--partition", "gpu\n#SBATCH --x", "--partition 'gpu\\n#SBATCH --x': holds a control"),
    ("--account", "lab\tx", "--account 'lab\\tx': holds a control character"),
])
def test_a_control_character_never_reaches_the_slurm_script(bench, tmp_path, flag, value,
                                                            needle):
    with unchanged(tmp_path):
        fails("run", "--method", "pabee", "--task", "rte", "--model", bench.backbone,
              "--data-dir", bench.data, "--out", tmp_path / "runs", "--checkpoints",
              tmp_path / "ckpt", "--backend", "slurm", flag, value, code=2, needle=needle)


def test_a_fifo_where_a_directory_is_expected_is_named_as_one(bench, tmp_path):
    fifo = tmp_path / "pipe"  # (outside what `unchanged` reads: reading it would block)
    os.mkfifo(fifo)
    work = tmp_path / "work"
    work.mkdir()
    said = f"{fifo}: is a FIFO (named pipe), not a directory"
    with unchanged(work, bench.pabee):
        fails("data", "check", "--data-dir", fifo, code=2, needle=said)
        fails("run", "--method", "pabee", "--task", "rte", "--model", bench.backbone,
              "--data-dir", fifo, "--out", work / "runs", "--checkpoints", work / "ckpt",
              code=1, needle=said)
        fails("plot", bench.pabee, "--out", fifo, code=1,
              needle=f"{fifo}: cannot write the figures (it is a FIFO (named pipe))")
        fails("leaderboard", "build", fifo, "--out", work / "site", code=1,
              needle=f"{said} of submissions")
    assert fifo.is_fifo()


def test_select_refuses_a_seed_out_of_range(bench, tmp_path):
    with unchanged(bench.pabee):
        fails("select", bench.pabee, "--seed", "-1", code=2, needle="--seed -1: must be in "
                                                                     "0..4294967295")
        fails("select", bench.pabee, "--seed", str(2**64), code=2, needle="must be in 0..")


def test_deeply_nested_reference_json_is_one_line(bench, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with unchanged(tmp_path, bench.pabee):
        fails("score", bench.pabee, "--reference", deep, code=1,
              needle=f"{deep}: not JSON eebench reads (nested too deeply)")
    refs = tmp_path / "board" / "references"
    refs.mkdir(parents=True)
    shutil.copy(deep, refs / "deep.json")
    with unchanged(tmp_path):
        fails("leaderboard", "check", bench.submissions, "--references", refs, code=1,
              needle="nested too deeply")
