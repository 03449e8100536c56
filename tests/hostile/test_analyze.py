"""`eebench analyze` shows texts only where they are the run's own samples: a run records the
sha256 of its samples (ids with their texts), and a `--data-dir` whose file gives other texts
for those ids (another release, rows in another order, too few rows) is refused in one line; a
run written before the hash was recorded says its texts are not checked. `analyze --out` writes
its figure and analysis.json together or not at all."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path

from eebench.run import artifacts as R
from tests.hostile.conftest import copy_run
from tests.hostile.helpers import fails, invoke, temporaries, unchanged

FIGURE, ANALYSIS = "exit-layer-vs-length.png", "analysis.json"


def _rte(data_dir: Path, root: Path, rows) -> Path:
    """A data directory whose RTE/dev.tsv holds `rows(data rows)` under the real header."""
    shutil.copytree(data_dir / "RTE", root / "RTE")
    dev = root / "RTE" / "dev.tsv"
    header, *lines = dev.read_text(encoding="utf-8").splitlines(keepends=True)
    dev.chmod(0o644)
    dev.write_text(header + "".join(rows(lines)), encoding="utf-8")
    return root


def test_a_run_records_the_hash_of_its_samples(bench, data_dir):
    from eebench.tasks.loaders import load_split

    summary = R.read_run(bench.pabee).summary
    dev = load_split("rte", "dev", data_dir)
    ids = (bench.pabee / R.IDS_FILE).read_text().splitlines()
    texts = dict(zip(dev.ids, dev.texts))
    assert summary.samples_sha256 == R.samples_hash(ids, [texts[i] for i in ids])
    result = invoke("analyze", bench.pabee, "--data-dir", data_dir, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["texts"] == "loaded"
    for item in data["easiest"] + data["hardest"]:
        assert item["text"] == " ||| ".join(texts[item["id"]])


def test_another_dev_file_is_refused(bench, tmp_path, data_dir):
    """The same ids (row numbers), other texts: the rows in reverse order."""
    data = _rte(data_dir, tmp_path / "data", lambda lines: lines[::-1])
    out = tmp_path / "analysis"
    with unchanged(tmp_path, bench.pabee):
        fails("analyze", bench.pabee, "--data-dir", data, "--out", out, code=1,
              needle="dev.tsv: not the data run")


def test_a_dev_file_without_the_run_s_ids_is_refused(bench, tmp_path, data_dir):
    data = _rte(data_dir, tmp_path / "data", lambda lines: lines[:3])
    with unchanged(tmp_path, bench.pabee):
        line = fails("analyze", bench.pabee, "--data-dir", data, "--json", code=1,
                     needle="sample ids are not in it")
    assert "point --data-dir at the data the run was evaluated on" in line


def test_a_run_without_the_hash_says_its_texts_are_not_checked(bench, tmp_path, data_dir):
    old = copy_run(bench.pabee, tmp_path / "runs")
    summary = json.loads((old / R.SUMMARY_FILE).read_text())
    del summary["samples_sha256"]
    (old / R.SUMMARY_FILE).write_text(json.dumps(summary))
    result = invoke("analyze", old, "--data-dir", data_dir, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["texts"].startswith(
        "loaded (not checked: the run records no hash of its samples")
    # other texts are not caught then: said, not refused
    other = _rte(data_dir, tmp_path / "data", lambda lines: lines[::-1])
    assert invoke("analyze", old, "--data-dir", other, "--json").exit_code == 0


def test_out_is_written_whole_or_not_at_all(bench, tmp_path, monkeypatch):
    """The disk fills while analysis.json is written, after the figure: neither appears, the
    previous analysis stays as it was."""
    out = tmp_path / "analysis"
    out.mkdir()
    (out / ANALYSIS).write_text('{"previous": true}\n')
    real = Path.write_text

    def write_text(self, text, *args, **kwargs):
        if self.name.startswith(f".{ANALYSIS}."):
            real(self, text[: len(text) // 2], *args, **kwargs)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    with unchanged(tmp_path, bench.pabee):
        fails("analyze", bench.pabee, "--out", out, code=1,
              needle=f"{out / ANALYSIS}: no space left on device")
    assert temporaries(tmp_path) == []
    monkeypatch.undo()
    result = invoke("analyze", bench.pabee, "--out", tmp_path / "new" / "analysis")
    assert result.exit_code == 0, result.output
    written = sorted(p.name for p in (tmp_path / "new" / "analysis").iterdir())
    assert written == [ANALYSIS, FIGURE]


def test_out_in_a_new_directory_leaves_no_directory_behind(bench, tmp_path, monkeypatch):
    real = Path.write_text

    def write_text(self, text, *args, **kwargs):
        if self.name.startswith(f".{ANALYSIS}."):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    with unchanged(tmp_path):
        fails("analyze", bench.pabee, "--out", tmp_path / "a" / "b", code=1,
              needle="no space left on device")
