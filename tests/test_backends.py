"""`eebench run --backend local|slurm|ray` on real engines: a local Ray cluster on loopback, and
the Slurm daemons of `.ci/slurm.sh` (found through SLURM_CONF; absent, the Slurm tests skip, and
under CI=true they fail).

Stand-in cells (tests/backend_cells.py) test the engines' behaviour in seconds: arrays, retries of
a raising cell and of a killed worker, failed cells left alone until asked, finished cells
skipped, a driver that leaves early and one that collects. The slow test runs one real tiny
fine-tune grid on every backend and compares the predictions bit for bit.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from eebench.cli import app
from eebench.run.artifacts import RunConfig
from eebench.run.backends import BackendOptions, Cell, WorkerOptions, plan, run_cells
from eebench.run.backends.cells import ERROR_FILE, TRACEBACK_FILE, cell_dir
from eebench.run.backends.slurm import records
from eebench.run.config import load_config
from eebench.run.grid import expand
from tests import backend_cells, tiny
from tests.conftest import REPO

runner = CliRunner()
IN_CI = os.environ.get("CI", "").lower() == "true"
# One pytest-xdist worker runs this file (a module is one unit of work, `--dist loadscope`):
# one local Ray cluster and one Slurm queue at a time
pytestmark = pytest.mark.xdist_group("engines")


def _missing(msg: str) -> None:
    if IN_CI:
        pytest.fail(msg)
    pytest.skip(msg)


def _import(module: str):
    try:
        return __import__(module)
    except ImportError:
        _missing(f"{module} is not installed (pip install -e '.[dev,slurm,ray]')")


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster, loopback only (the engine's settings, read by Ray on import), no
    dashboard; its workers import `tests` too."""
    from eebench.run.backends.ray import LOCAL_CLUSTER, LOCAL_ENV

    for name, value in LOCAL_ENV.items():
        os.environ.setdefault(name, value)
    ray = _import("ray")
    ray.init(num_cpus=2, **LOCAL_CLUSTER, runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}})
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def slurm_cluster() -> str:
    conf = os.environ.get("SLURM_CONF")
    if not conf or not Path(conf).is_file() or shutil.which("sbatch") is None:
        _missing("no Slurm cluster: run `.ci/slurm.sh start` and `eval \"$(.ci/slurm.sh env)\"` "
                 f"(SLURM_CONF={conf!r})")
    _import("submitit")
    return conf


@pytest.fixture
def engine(request, monkeypatch):
    """The backend named by the test's parameter, up and reachable; jobs import `tests`."""
    backend = request.param
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    request.getfixturevalue("ray_cluster" if backend == "ray" else "slurm_cluster")
    return backend


def _cells(n: int) -> list[Cell]:
    return [Cell((RunConfig(model="standin", method="pabee", task="rte", split="dev", seed=s,
                            sweep=[1.0], max_seq_length=32, flops_convention="mac2-matmul"),))
            for s in range(n)]


def _worker(tmp_path: Path, fn: str, backend: str) -> WorkerOptions:
    return WorkerOptions(out=str(tmp_path / "runs"), checkpoints=str(tmp_path / "ckpt"),
                         cwd=str(REPO), threads=1, backend=backend,
                         cell_fn=f"tests.backend_cells:{fn}")


def _run(cells, worker, lines=None, **options):
    said = [] if lines is None else lines
    return run_cells(cells, BackendOptions(backend=worker.backend, **options), worker,
                     said.append)


BOTH = pytest.mark.parametrize("engine", ["ray", "slurm"], indirect=True)


@BOTH
def test_cells_are_retried_when_they_raise_or_their_worker_dies(engine, tmp_path):
    cells = _cells(3)  # seed 0 runs; seed 1 raises once; seed 2's worker is killed once
    worker = _worker(tmp_path, "by_seed", engine)
    out = Path(worker.out)
    outcomes = _run(cells, worker, max_parallel=2, retries=1)
    assert [o.status for o in outcomes] == ["done"] * 3, outcomes
    assert [backend_cells.calls(out, c.key) for c in cells] == [1, 2, 2]
    # a raising cell is retried by the driver; a dead Ray worker by Ray itself (max_retries),
    # a dead Slurm job by the driver, in a new array
    assert [o.attempts for o in outcomes] == [1, 2, 1 if engine == "ray" else 2]
    for c in cells:
        assert not (cell_dir(c, out) / ERROR_FILE).exists()  # cleared once the cell succeeded
    if engine == "slurm":
        scripts = sorted(out.glob(".submitit/*/*_submission.sh"), key=lambda p: p.stat().st_mtime)
        assert len(scripts) == 2  # the first round, then the retries
        assert "#SBATCH --array=0-2%2" in scripts[0].read_text()
        assert records(out) == {}  # every job settled
    # a rerun skips every finished cell: nothing runs, nothing is submitted
    again = _run(cells, worker, max_parallel=2, retries=1)
    assert [o.status for o in again] == ["done"] * 3
    assert [backend_cells.calls(out, c.key) for c in cells] == [1, 2, 2]
    assert len(list(out.glob(".submitit/*/*_submission.sh"))) == (2 if engine == "slurm" else 0)


@BOTH
def test_a_failed_cell_leaves_its_error_and_is_retried_only_when_asked(engine, tmp_path):
    [cell] = _cells(1)
    worker = _worker(tmp_path, "always_fails", engine)
    out = Path(worker.out)
    [o] = _run([cell], worker)
    assert (o.status, o.attempts) == ("failed", 1)
    assert o.error == "ValueError: this cell is broken"
    record = json.loads((cell_dir(cell, out) / ERROR_FILE).read_text())
    assert record["error"] == o.error and record["backend"] == engine and record["attempt"] == 1
    assert "raise ValueError" in (cell_dir(cell, out) / TRACEBACK_FILE).read_text()
    [row] = plan([cell], out, None)
    assert (row.status, row.error) == ("failed", o.error)
    [o] = _run([cell], worker)  # reported, not run again
    assert (o.status, o.error) == ("skipped", "ValueError: this cell is broken")
    assert backend_cells.calls(out, cell.key) == 1
    [o] = _run([cell], worker, rerun_failed=True, retries=1)
    assert (o.status, o.attempts) == ("failed", 2)
    assert backend_cells.calls(out, cell.key) == 3


@pytest.mark.parametrize("engine", ["slurm"], indirect=True)
def test_slurm_no_wait_submits_and_a_rerun_collects_without_submitting_again(engine, tmp_path):
    cells = _cells(2)
    worker = _worker(tmp_path, "sleeps", engine)
    out = Path(worker.out)
    submitted = _run(cells, worker, wait=False)
    assert [o.status for o in submitted] == ["submitted"] * 2
    assert set(records(out)) == {c.key for c in cells}
    assert [r.status for r in plan(cells, out, None, set(records(out)))] == ["submitted"] * 2
    lines: list[str] = []
    collected = _run(cells, worker, lines)  # waits for the jobs of the first command
    assert [o.status for o in collected] == ["done"] * 2
    assert any("still queued or running" in line for line in lines), lines
    assert [backend_cells.calls(out, c.key) for c in cells] == [1, 1]
    assert len(list(out.glob(".submitit/*/*_submission.sh"))) == 1
    assert records(out) == {}


@pytest.mark.parametrize("engine", ["slurm"], indirect=True)
def test_slurm_a_job_killed_while_no_driver_waits_is_named_by_the_next(engine, tmp_path):
    [cell] = _cells(1)
    worker = _worker(tmp_path, "dies_once", engine)
    out = Path(worker.out)
    _run([cell], worker, wait=False)
    # collects: the job ended without a result, before this command (the cell failed earlier:
    # skipped) or while it waited for the job (failed)
    [o] = _run([cell], worker)
    assert o.status in ("skipped", "failed") and "without a result" in o.error, o
    record = json.loads((cell_dir(cell, out) / ERROR_FILE).read_text())
    assert record["type"] == "SlurmJobError" and record["job"] == o.job
    [o] = _run([cell], worker, rerun_failed=True)
    assert o.status == "done"
    assert not (cell_dir(cell, out) / ERROR_FILE).exists()


LOOPBACK = {"0100007F", "00000000000000000000000001000000", "0000000000000000FFFF00000100007F"}


def _listening_addresses(root: int) -> set[str]:
    """The local addresses (hex, as /proc/net shows them) that `root`'s process tree listens on
    over TCP."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, ppid in parents.items() if ppid in tree} - tree
        tree |= more
        grew = bool(more)
    inodes = set()
    for pid in tree:
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        inodes |= {link[8:-1] for link in links if link.startswith("socket:[")}
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.add(fields[1].split(":")[0])
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc/net")
def test_the_local_ray_cluster_listens_on_loopback_only(ray_cluster):
    addresses = _listening_addresses(os.getpid())
    assert addresses and addresses <= LOOPBACK, addresses


# ------------------------------------------------------------------------------ command line
@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    return tiny.save_tiny_backbone(tmp_path_factory.mktemp("tiny-bert"), num_layers=3)


GRID = """
methods = ["pabee", "deebert"]
tasks = ["rte"]
seeds = [3]
max_seq_length = 48
max_eval_samples = 24
[train]
epochs = 1
max_train_samples = 40
batch_size = 8
[timing]
enabled = false
"""


def _grid(tmp_path: Path, backbone: Path) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(f'model = "{backbone}"\n{GRID}')
    return path


def _cli(tmp_path, backbone, data_dir, name, *extra):
    args = ["run", "--config", str(_grid(tmp_path, backbone)), "--data-dir", str(data_dir),
            "--out", str(tmp_path / name / "runs"), "--checkpoints", str(tmp_path / name / "ckpt"),
            "--json", *extra]
    return runner.invoke(app, args)


def test_run_help_imports_no_engine():
    code = ("import sys\nfrom eebench.cli import app\ntry:\n    app(['run', '--help'])\n"
            "except SystemExit:\n    pass\n"
            "print('ENGINES', [m for m in ('ray', 'submitit') if m in sys.modules])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "--backend" in out.stdout and out.stdout.strip().endswith("ENGINES []")


def test_options_of_another_backend_are_refused(tmp_path, backbone, data_dir):
    for extra, flag in ((["--retries", "1"], "--retries"),
                        (["--backend", "ray", "--partition", "gpu"], "--partition"),
                        (["--backend", "slurm", "--ray-address", "auto"], "--ray-address"),
                        (["--backend", "ray", "--no-wait"], "--no-wait"),
                        (["--backend", "pbs"], "unknown backend")):
        result = _cli(tmp_path, backbone, data_dir, "x", *extra)
        assert result.exit_code == 2, result.output
        [line] = result.stderr.strip().splitlines()
        assert line.startswith("error: ") and flag in line
    result = _cli(tmp_path, backbone, data_dir, "x", "--backend", "slurm", "--slurm-option", "=1")
    assert result.exit_code == 2 and "KEY=VALUE" in result.stderr


@pytest.mark.parametrize("backend,extra", [("ray", "eebench[ray]"), ("slurm", "eebench[slurm]")])
def test_a_missing_engine_is_one_line_saying_how_to_install_it(
        tmp_path, backbone, data_dir, monkeypatch, backend, extra):
    monkeypatch.setitem(sys.modules, {"ray": "ray", "slurm": "submitit"}[backend],
                        None)  # what an environment without the extra sees: an ImportError
    result = _cli(tmp_path, backbone, data_dir, "x", "--backend", backend)
    assert result.exit_code == 1, result.output
    [line] = result.stderr.strip().splitlines()
    assert f"pip install '{extra}'" in line and "Traceback" not in result.output


def test_dry_run_lists_cells_with_status_and_cost(tmp_path, backbone, data_dir):
    result = _cli(tmp_path, backbone, data_dir, "dry", "--dry-run")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["method"], r["task"], r["seed"], r["status"]) for r in rows] == [
        ("pabee", "rte", 3, "todo"), ("deebert", "rte", 3, "todo")]
    # 40 samples in batches of 8, one epoch: 5 steps a stage (DeeBERT trains two stages)
    assert [r["train_steps"] for r in rows] == [5, 10]
    assert not (tmp_path / "dry" / "runs").exists() or not any(
        (tmp_path / "dry" / "runs").rglob("config.json"))  # nothing ran
    pabee, deebert = (Path(r["run_dir"]) for r in rows)
    runs = expand(load_config(tmp_path / "grid.toml")).runs  # the same cells, finished by hand
    assert [rc.key() for rc in runs] == [r["key"] for r in rows]
    backend_cells.fake_run(Cell((runs[0],)), WorkerOptions(out=str(tmp_path / "dry" / "runs"),
                                                           checkpoints=str(tmp_path / "ckpt")))
    deebert.mkdir(parents=True, exist_ok=True)
    (deebert / ERROR_FILE).write_text(json.dumps({"error": "RuntimeError: out of memory"}))
    rows = json.loads(_cli(tmp_path, backbone, data_dir, "dry", "--dry-run").stdout)
    assert [r["status"] for r in rows] == ["done", "failed"]
    assert rows[0]["estimate_seconds"] == 0.1 and rows[0]["estimate_from"] == pabee.name
    assert rows[1]["error"] == "RuntimeError: out of memory"


def test_dry_run_counts_the_steps_a_finished_checkpoint_saves(tmp_path, backbone, data_dir):
    """A model whose checkpoint has finished (whichever run trained it) costs no steps: PABEE's
    run directory removed, its trained model kept, the cell is todo with nothing left to train;
    DeeBERT's untouched cell has all its steps left."""
    import shutil

    result = _cli(tmp_path, backbone, data_dir, "dry", "--method", "pabee")
    assert result.exit_code == 0, result.output
    [summary] = (tmp_path / "dry" / "runs").rglob("summary.json")
    shutil.rmtree(summary.parent)  # the run's files gone, its checkpoint kept
    rows = json.loads(_cli(tmp_path, backbone, data_dir, "dry", "--dry-run").stdout)
    assert [(r["method"], r["status"]) for r in rows] == [("pabee", "todo"), ("deebert", "todo")]
    assert [(r["train_steps"], r["train_steps_left"]) for r in rows] == [(5, 0), (10, 10)]


def test_a_cell_without_a_sibling_is_estimated_from_the_same_method_on_another_task():
    """A finished cell's time, scaled by training steps, estimates the same model and method on
    another task (the nearest in steps); another method or model, or a cell whose steps are
    unknown, gets none."""
    from eebench.run.backends.plan import PlannedCell, _scale_estimates

    def row(method, task, key, status, steps, seconds=None):
        return PlannedCell(method, task, 1, key, status, steps, seconds,
                           key if seconds is not None else None)

    rows = [row("pabee", "rte", "a", "done", 100, 600.0),
            row("pabee", "mrpc", "b", "done", 1000, 2000.0),
            row("pabee", "sst2", "c", "todo", 300),  # nearer 100 than 1000 steps: from a
            row("pabee", "cola", "d", "todo", 2000),  # from b
            row("deebert", "sst2", "e", "todo", 300),  # no finished DeeBERT cell
            row("pabee", "qnli", "f", "todo", None),  # steps unknown
            row("pabee", "stsb", "g", "todo", 300)]  # another model (below)
    _scale_estimates(rows, ["m"] * 6 + ["other"])
    got = {r.key: (r.estimate_seconds, r.estimate_from, r.estimate_scaled) for r in rows}
    assert got["c"] == (pytest.approx(1800.0), "a", True)
    assert got["d"] == (pytest.approx(4000.0), "b", True)
    assert got["a"] == (600.0, "a", False)
    assert got["e"] == got["f"] == got["g"] == (None, None, False)


def test_a_grid_narrowed_to_other_tasks_is_estimated_from_the_runs_it_leaves_out(
        tmp_path, backbone, data_dir):
    """`--task` narrows the grid to a task nothing has run on yet: PABEE's finished RTE run under
    the same --out still estimates PABEE on MRPC (scaled by training steps: 5 each, so as it
    is), which `--stop-by` needs to start it; DeeBERT, with no finished run, gets none."""
    [pabee, _] = expand(load_config(_grid(tmp_path, backbone))).runs
    backend_cells.fake_run(Cell((pabee,)), WorkerOptions(out=str(tmp_path / "dry" / "runs"),
                                                         checkpoints=str(tmp_path / "ckpt")))
    result = _cli(tmp_path, backbone, data_dir, "dry", "--dry-run", "--task", "mrpc")
    assert result.exit_code == 0, result.output
    rows = {r["method"]: r for r in json.loads(result.stdout)}
    assert {r["task"] for r in rows.values()} == {"mrpc"}
    assert (rows["pabee"]["train_steps"], rows["pabee"]["estimate_from"]) == (5, pabee.key())
    assert rows["pabee"]["estimate_seconds"] == pytest.approx(0.1)
    assert rows["pabee"]["estimate_scaled"] is True
    assert rows["deebert"]["estimate_seconds"] is None


def test_runs_left_out_of_the_grid_count_only_where_the_grid_has_no_run_of_the_method():
    """`beside` (the runs under --out that the grid leaves out) is asked only for a row whose
    model and method have no finished cell in the grid, and scales like one."""
    from eebench.run.backends.plan import PlannedCell, _Finished, _scale_estimates

    done = PlannedCell("pabee", "rte", 1, "a", "done", 100, 600.0, "a")
    rows = [done, PlannedCell("pabee", "sst2", 1, "b", "todo", 300, None, None),
            PlannedCell("deebert", "sst2", 1, "c", "todo", 300, None, None)]
    asked = []

    def beside(i):
        asked.append(i)
        return [_Finished("z", 150, 1000.0, 500.0)]

    _scale_estimates(rows, ["m"] * 3, beside)
    assert asked == [2]
    assert (rows[1].estimate_seconds, rows[1].estimate_from) == (pytest.approx(1800.0), "a")
    assert (rows[2].estimate_seconds, rows[2].estimate_from) == (pytest.approx(1500.0), "z")
    assert rows[2].estimate_train_seconds == pytest.approx(1000.0)


def test_a_scaled_estimate_scales_training_by_steps_and_carries_the_rest_over():
    """Where the finished cell recorded its training time, only that part scales with the steps:
    the rest (the sweep's real inference and timing on a fixed-size subset) is carried over."""
    from eebench.run.backends.plan import PlannedCell, _scale_estimates

    done = PlannedCell("pabee", "mrpc", 1, "a", "done", 100, 1000.0, "a",
                       estimate_train_seconds=600.0)
    todo = PlannedCell("pabee", "sst2", 1, "b", "todo", 300, None, None)
    _scale_estimates([done, todo], ["m"] * 2)
    assert todo.estimate_seconds == pytest.approx(600 * 3 + 400)
    assert todo.estimate_train_seconds == pytest.approx(1800.0)
    assert (todo.estimate_from, todo.estimate_scaled) == ("a", True)


@pytest.mark.slow
def test_one_grid_gives_the_same_predictions_on_every_backend(
        tmp_path, backbone, data_dir, ray_cluster, slurm_cluster, monkeypatch):
    from safetensors.numpy import load_file

    monkeypatch.setenv("PYTHONPATH", str(REPO))
    arrays = {}
    for backend in ("local", "ray", "slurm"):
        extra = [] if backend == "local" else ["--backend", backend, "--max-parallel", "2"]
        result = _cli(tmp_path, backbone, data_dir, backend, *extra)
        assert result.exit_code == 0, result.output
        runs = sorted((tmp_path / backend / "runs").rglob("predictions.safetensors"))
        assert len(runs) == 2
        arrays[backend] = {p.parent.name: load_file(str(p)) for p in runs}
    assert arrays["ray"].keys() == arrays["local"].keys() == arrays["slurm"].keys()
    for key, local in arrays["local"].items():
        for backend in ("ray", "slurm"):
            other = arrays[backend][key]
            assert other.keys() == local.keys()
            for name, values in local.items():  # bit for bit: logits included
                assert np.array_equal(values, other[name]), (backend, key, name)
    # a rerun skips the finished cells: nothing is submitted, nothing rewritten
    summaries = sorted((tmp_path / "slurm" / "runs").rglob("summary.json"))
    before = [p.stat().st_mtime_ns for p in summaries]
    scripts = len(list((tmp_path / "slurm" / "runs").glob(".submitit/*/*_submission.sh")))
    result = _cli(tmp_path, backbone, data_dir, "slurm", "--backend", "slurm")
    assert result.exit_code == 0, result.output
    assert [r["status"] for r in json.loads(result.stdout)] == ["done", "done"]
    assert [p.stat().st_mtime_ns for p in summaries] == before
    assert len(list((tmp_path / "slurm" / "runs").glob(".submitit/*/*_submission.sh"))) == scripts
