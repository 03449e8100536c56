"""The Python API (eebench.api) on its own, as a notebook uses it: no CLI module is imported.

A tiny grid (static, PABEE and DeeBERT on RTE and STS-B; DeeBERT cannot do regression) runs in a
fresh interpreter through `api.run`, is loaded into the results DataFrame, scored against a
reference built from its own static runs, plotted and made into a submission."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests import tiny

SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from eebench import api

    backbone, data_dir, tmp = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    cfg = api.config(model=backbone, methods=["static", "pabee", "deebert"],
                     tasks=["rte", "stsb"], seeds=[1], max_seq_length=32, max_eval_samples=16,
                     out=str(tmp / "runs"), checkpoints=str(tmp / "ckpt"),
                     train={"max_train_samples": 16, "epochs": 1},
                     timing={"samples": 4, "batch_sizes": [1, 4]})
    planned = api.plan(cfg, data_dir=data_dir)
    done = api.run(cfg, data_dir=data_dir)
    again = api.run(cfg, data_dir=data_dir)  # finished cells are kept, not run again
    frame = api.results(done.run_dirs)
    ref = api.reference([d for d in done.run_dirs if "/static/" in str(d)],
                        out=tmp / "ref.json")
    report = api.score(tmp / "runs", reference=tmp / "ref.json")
    figures = api.plot(tmp / "runs", out=tmp / "figures", reference=ref)
    sub = api.submission([d for d in done.run_dirs if "/pabee/" in str(d)], data_dir=data_dir,
                         reference=tmp / "ref.json", out=tmp / "pabee.json")
    print(json.dumps({
        "planned": [(p.method, p.task, p.status) for p in planned],
        "skipped": [(s.method, s.task, s.reason) for s in done.skipped],
        "outcomes": [o.status for o in done.outcomes],
        "again": [o.status for o in again.outcomes],
        "same_dirs": [str(d) for d in done.run_dirs] == [str(d) for d in again.run_dirs],
        "rows": len(frame), "tasks": sorted(set(frame["task"])),
        "methods": sorted(set(frame["method"])),
        "disagreements": int(frame["disagreements"].fillna(0).sum()),
        "elue": report.elue, "report_tasks": sorted(report.to_dict()["tasks"]),
        "figures": len(figures), "figures_exist": all(Path(f).is_file() for f in figures),
        "submission_file": (tmp / "pabee.json").is_file(),
        "cli_imported": sorted(m for m in sys.modules if m.startswith("eebench.cli")),
    }))
""")


@pytest.mark.slow  # about a minute on two cores: eight tiny trainings in a fresh interpreter
def test_api_runs_a_grid_loads_scores_plots_and_submits_without_the_cli(tmp_path, data_dir):
    backbone = tiny.save_tiny_backbone(tmp_path / "tiny-bert", num_layers=2)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(backbone), str(data_dir),
                           str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    # the plan lists every runnable cell before anything ran
    assert got["planned"] == [["static", "rte", "todo"], ["pabee", "rte", "todo"],
                              ["deebert", "rte", "todo"], ["static", "stsb", "todo"],
                              ["pabee", "stsb", "todo"]]
    assert got["skipped"] == [["deebert", "stsb",
                               "deebert cannot do regression (its entropy rule needs classes)"]]
    assert got["outcomes"] == ["done"] * 5 and got["again"] == ["done"] * 5
    assert got["same_dirs"]
    # static: one point per depth (2); pabee: its patience sweep; deebert: its entropy sweep
    assert got["tasks"] == ["rte", "stsb"] and got["methods"] == ["deebert", "pabee", "static"]
    assert got["rows"] > 5 and got["disagreements"] == 0
    assert set(got["elue"]) == {"static", "pabee", "deebert"}
    assert set(got["elue"]["pabee"]) == {"rte", "stsb"} and set(got["elue"]["deebert"]) == {"rte"}
    assert got["elue"]["static"] == {"rte": 0.0, "stsb": 0.0}  # the reference is static's own
    assert got["report_tasks"] == ["rte", "stsb"]
    assert got["figures"] > 0 and got["figures_exist"] and got["submission_file"]
    assert got["cli_imported"] == []
