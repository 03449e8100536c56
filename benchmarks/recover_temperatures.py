"""One-off, reviewed upgrade: the per-exit temperatures of committed calibrated max-prob runs,
recovered from the runs' own files and written into their summary.json.

Runs of the `maxprob` method (rule `calibrated-maxprob`: exit where max softmax(z_j / T_j) >=
threshold) written before run directories recorded temperatures kept them only in their
checkpoints, which are not committed. Each run's files still determine them:

- NLL: every point stores the NLL of the probabilities the rule read, softmax(z / T_j) at each
  sample's own exit (eebench.run.evaluate: float32 logits divided by float32 temperatures), over
  the stored logits, labels and exit layers: one equation per point in T_1..T_E;
- ECE: the same probabilities, binned: one more figure per point;
- decisions: a sample that reached exit j left there at threshold t iff max softmax(z_j / T_j)
  >= t, so every stored decision bounds T_j (an interval, printed).

For each run the script solves the NLL equations (least squares over log T, from STARTS
starting points; every start that reaches a zero residual must reach the same T), rounds to
float32 (the temperatures are float32 buffers of the model), moves each T_j by a few float32
steps where that brings the float32 computation closer to the stored NLL (the float64 solve
does not round z / T as the run did), and accepts the result only if

1. every point's NLL is reproduced bit for bit, and its ECE to within ECE_TOLERANCE (found: a
   few float64 ulps, 4e-15 at most; the script prints the largest gap. The ECE sums exp() of
   the log-probabilities directly and its last bits were not reproduced on the machine that
   recovered them, where the NLL, summed from the log-probabilities, was),
2. each T_j's neighbouring float32 values (one step down, one up) break some point's NLL, so
   the recovery is unique at the precision the model held them,
3. every stored decision re-derives from the run's files with them (eebench.run.rederive),
4. the files the summary vouches for are unchanged (their sha256 in summary.files).

It then records them in the variant's `temperatures`, with `temperatures_source` naming this
recovery, and writes the summary through the library (eebench.run.artifacts; schema 3, the
run's name and vouched files unchanged). A run that cannot be recovered this way is reported and
left as it is. `python benchmarks/recover_temperatures.py` reports; `--write` writes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from eebench.io import write_json
from eebench.measure.quality import exited_logits, point_quality
from eebench.rules.catalog import get_rule
from eebench.run import artifacts as R
from eebench.run.rederive import rederive

ROOT = Path(__file__).resolve().parent.parent
ECE_TOLERANCE = 1e-12  # percent points
STARTS = 20  # starting points of the NLL solve: log T = -2, -1, 0, 1, 2 at every exit, then random
SOLVED = 1e-8  # a start reached a solution: every point's NLL within this (nats)
SEARCH_STEPS = 40  # float32 steps each way around the rounded solve
SOURCE = ("recovered from the run's stored decisions, NLL and ECE "
          "(benchmarks/recover_temperatures.py; the checkpoint was not kept)")


class NotRecovered(Exception):
    pass


def candidates(roots: list[Path]) -> list[Path]:
    """Finished runs whose rule read temperatures that their summary does not record."""
    out = []
    for root in roots:
        for path in sorted(root.rglob(R.SUMMARY_FILE)):
            summary = R.read_run(path.parent).summary
            rule = summary.rule
            if rule is None or rule.name is None or "temperatures" not in get_rule(rule.name).needs:
                continue
            if any(v.temperatures is None for v in summary.variants):
                out.append(path.parent)
    return out


class Evidence:
    """A run's stored logits, labels, exits and quality figures."""

    def __init__(self, run: R.RunFiles):
        from safetensors.numpy import load_file

        [variant] = run.summary.variants  # a joint model: one variant
        arrays = load_file(str(run.path / R.PREDICTIONS_FILE))
        if "labels" not in arrays or any(p.nll is None or p.ece is None for p in run.points):
            raise NotRecovered("no labels or no NLL and ECE stored: nothing pins T")
        self.logits = arrays[variant.logits_key]  # [E, N, C] float32
        self.labels = arrays["labels"].astype(np.int64)
        self.index = np.searchsorted(variant.exit_layers, arrays["exit_layer"]).astype(np.int64)
        self.prediction = arrays["prediction"]
        self.points = run.points
        self.full = self.logits[-1].argmax(-1)
        self.num_exits = self.logits.shape[0]

    def quality(self, temps: np.ndarray, row: int) -> tuple[float, float]:
        """A point's (NLL, ECE) as the run computed them, at float32 temperatures."""
        scaled = self.logits / temps.astype(self.logits.dtype)[:, None, None]
        q = point_quality(exited_logits(scaled, self.index[row]), self.prediction[row],
                          self.full, self.labels)
        return q.nll, q.ece

    def nll_residuals(self, log_t: np.ndarray) -> np.ndarray:
        """Each point's NLL at temperatures exp(log_t) minus the stored one (float64 model)."""
        z = self.logits.astype(np.float64) / np.exp(log_t)[:, None, None]
        top = z.max(-1, keepdims=True)
        lse = np.log(np.exp(z - top).sum(-1)) + top[..., 0]
        per = lse - np.take_along_axis(z, self.labels[None, :, None], -1)[..., 0]  # [E, N]
        n = np.arange(per.shape[1])
        return np.array([per[self.index[r], n].mean() - p.nll
                         for r, p in enumerate(self.points)])

    def decision_bounds(self, j: int) -> tuple[float, float]:
        """The interval of T_j the stored decisions at exit j allow (float64, for the record):
        a sample exits at threshold t iff max softmax(z / T) >= t, decreasing in T."""
        lo, hi = 0.0, np.inf
        z = self.logits[j].astype(np.float64)
        for row, p in enumerate(self.points):
            reached = self.index[row] >= j
            if not reached.any() or j == self.num_exits - 1 or p.sweep_value >= 1:
                continue  # the last exit always exits; p >= 1 only where it rounds to 1
            crossing = _crossing(z[reached], p.sweep_value)  # T where max p = t
            left = self.index[row][reached] == j
            if (~left).any():
                lo = max(lo, float(crossing[~left].max()))
            if left.any():
                hi = min(hi, float(crossing[left].min()))
        return lo, hi


def _crossing(z: np.ndarray, t: float) -> np.ndarray:
    """Per row, the T at which max softmax(z / T) = t (bisection over log T; 0 where it stays
    above t, inf where it never reaches t)."""
    gap = z.max(-1, keepdims=True) - z  # >= 0

    def top(log_t):
        return 1.0 / np.exp(-gap / np.exp(log_t)[:, None]).sum(-1)

    lo, hi = np.full(len(z), -12.0), np.full(len(z), 12.0)
    for _ in range(100):
        mid = (lo + hi) / 2
        above = top(mid) >= t
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    out = np.exp((lo + hi) / 2)
    out[top(np.full(len(z), 12.0)) >= t] = np.inf
    out[top(np.full(len(z), -12.0)) < t] = 0.0
    return out


def solve(ev: Evidence) -> np.ndarray:
    """The float32 temperatures that reproduce every stored NLL exactly (see the module)."""
    from scipy.optimize import least_squares

    used = np.unique(ev.index)
    if len(used) < ev.num_exits:
        missing = sorted(set(range(ev.num_exits)) - set(used.tolist()))
        raise NotRecovered(f"no point has a sample leaving at exit(s) {[m + 1 for m in missing]}:"
                           " no NLL reads their T")
    rng = np.random.default_rng(0)
    starts = [np.full(ev.num_exits, v) for v in (-2.0, -1.0, 0.0, 1.0, 2.0)]
    starts += [rng.uniform(-2, 2, ev.num_exits) for _ in range(STARTS - len(starts))]
    found = []
    for start in starts:  # a start that stops short of a solution (a local minimum) says nothing
        fit = least_squares(ev.nll_residuals, start, xtol=1e-15, ftol=1e-15, gtol=1e-15)
        if np.abs(fit.fun).max() < SOLVED:
            found.append(np.exp(fit.x))
    if not found:
        raise NotRecovered(f"no T reproduces the stored NLL (from {STARTS} starts)")
    spread = max(float(np.abs(f / found[0] - 1).max()) for f in found)
    if spread > 1e-6:
        raise NotRecovered(f"the NLL equations have several solutions (spread {spread:.1e})")
    ev.solved_from = len(found)
    temps = _search(ev, found[0].astype(np.float32))
    misses = _nll_misses(ev, temps)
    if misses:
        raise NotRecovered(f"float32 temperatures {temps.tolist()} miss the stored NLL of "
                           f"{len(misses)} point(s)")
    for j in range(ev.num_exits):
        for way in (0.0, np.inf):
            other = temps.copy()
            other[j] = np.nextafter(temps[j], np.float32(way))
            if not _nll_misses(ev, other):
                raise NotRecovered(f"T_{j + 1} is not unique at float32 precision")
    return temps


def _search(ev: Evidence, temps: np.ndarray) -> np.ndarray:
    """Coordinate search over float32 values near `temps`, exit by exit, for the fewest points
    whose float32 NLL misses the stored one (then the smallest total gap), until none moves."""
    def key(t: np.ndarray) -> tuple[int, float]:
        gaps = np.array([ev.quality(t, r)[0] - p.nll for r, p in enumerate(ev.points)])
        return int((gaps != 0).sum()), float(np.abs(gaps).sum())

    temps, best = temps.copy(), key(temps)
    for _ in range(5):
        moved = False
        for j in range(ev.num_exits):
            for way in (0.0, np.inf):
                t = temps.copy()
                for _ in range(SEARCH_STEPS):
                    t[j] = np.nextafter(t[j], np.float32(way))
                    k = key(t)
                    if k < best:
                        temps, best, moved = t.copy(), k, True
        if not moved or best[0] == 0:
            return temps
    return temps


def _nll_misses(ev: Evidence, temps: np.ndarray) -> list[int]:
    return [r for r, p in enumerate(ev.points) if ev.quality(temps, r)[0] != p.nll]


def recover(run_dir: Path, write: bool) -> str:
    run = R.read_run(run_dir)
    ev = Evidence(run)
    temps = solve(ev)
    ece_gap = max(abs(ev.quality(temps, r)[1] - p.ece) for r, p in enumerate(ev.points))
    if ece_gap > ECE_TOLERANCE:
        raise NotRecovered(f"the ECE differs by {ece_gap:.1e}")
    bounds = [ev.decision_bounds(j) for j in range(ev.num_exits - 1)]
    for j, (lo, hi) in enumerate(bounds):
        if not lo <= temps[j] <= hi:
            raise NotRecovered(f"T_{j + 1} = {temps[j]} lies outside ({lo}, {hi}] that the "
                               "decisions allow")
    variant = run.summary.variants[0]
    variant.temperatures = [float(t) for t in temps]
    variant.temperatures_source = SOURCE
    found = rederive(run)
    if not found.ok:
        raise NotRecovered(f"decisions differ: {found.mismatches[0]}")
    if R.file_hashes(run_dir) != run.summary.files:
        raise NotRecovered("its files differ from the sha256 its summary vouches for")
    if write:
        write_json(run_dir / R.SUMMARY_FILE, run.summary)
        R.verify_run(run_dir)
        if not rederive(run_dir).ok:  # as written and read back
            raise NotRecovered("decisions differ once written")
    allowed = ", ".join(f"T_{j + 1} in ({lo:.4f}, {hi:.4f}]" for j, (lo, hi) in enumerate(bounds))
    return (f"T = {[round(float(t), 6) for t in temps]} (solved from {ev.solved_from} of "
            f"{STARTS} starts, alike); NLL exact at {len(ev.points)} points, "
            f"ECE within {ece_gap:.1e}; {found.points} points x {found.samples // found.points} "
            f"samples re-derived; the decisions alone allow {allowed}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("roots", nargs="*", type=Path,
                        default=[ROOT / "benchmarks" / "results" / "elue-minilm"])
    parser.add_argument("--write", action="store_true", help="write the recovered temperatures")
    args = parser.parse_args(argv)
    runs = candidates(args.roots)
    failed = 0
    for run_dir in runs:
        name = run_dir.relative_to(ROOT) if run_dir.is_relative_to(ROOT) else run_dir
        try:
            print(f"{name}: {recover(run_dir, args.write)}")
        except NotRecovered as e:
            failed += 1
            print(f"{name}: NOT RECOVERED: {e}")
    print(f"{len(runs) - failed} of {len(runs)} runs recovered"
          + ("" if args.write else " (nothing written: --write writes)"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
