"""The ELUE score of a submission, recomputed: the reference it names, found by name and sha256
among known reference files, and each task's score from the submission's own points.

A submission's scores are never trusted: `check_elue` looks the reference up (References: the
*.json files of a folder, by their `name` and the sha256 of their bytes), seed-averages the
file's points exactly as `eebench submit` does (the results table, then
eebench.score.stats.seed_points) and scores them with eebench.score; a task score or overall
further than ELUE_TOLERANCE from what the points give is refused.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from eebench.errors import DataError, one_line
from eebench.submit.schema import Submission

if TYPE_CHECKING:
    from eebench.score.reference import ReferenceCurves

# A recomputed ELUE score (percentage points) may differ from the file's by float rounding only:
# the same means over the same numbers, summed in the same order, agree to ~1e-13.
ELUE_TOLERANCE = 1e-6
REFERENCES_DIR = "references"  # the default: <the submissions' folder>/../references
# The leaderboard's reference curves, shipped with the package: copies of leaderboard/references
# (tests/hostile/test_older_promises.py keeps them byte for byte equal), so that a submission is
# scored against them wherever eebench is installed, not only inside the repository.
SHIPPED_REFERENCES = Path(__file__).with_name(REFERENCES_DIR)
MAX_REFERENCE_BYTES = 10 * 2**20  # a reference of every task is a few kB


@dataclass(frozen=True)
class KnownReference:
    path: Path
    sha256: str  # of the file's bytes
    curves: ReferenceCurves


@dataclass(frozen=True)
class References:
    """The reference curves a submission may be scored against, by name and content hash."""

    known: tuple[KnownReference, ...]
    where: str  # where they came from, for messages

    @classmethod
    def from_files(cls, paths: list[Path], where: str | None = None) -> References:
        """Each file a regular file of at most MAX_REFERENCE_BYTES (a FIFO, a device, a link to
        /dev/zero: one DataError line, never read), hashed and loaded."""
        import hashlib

        from eebench.io import read_bytes
        from eebench.score.reference import load_reference

        known = []
        for p in map(Path, paths):
            digest = hashlib.sha256(read_bytes(p, MAX_REFERENCE_BYTES)).hexdigest()
            known.append(KnownReference(p, digest, load_reference(p)))
        return cls(tuple(known), where or ", ".join(str(p) for p in paths))

    @classmethod
    def from_dir(cls, directory: Path | None) -> References:
        """Every *.json in `directory` (a reference file that does not load is a DataError);
        none for None."""
        if directory is None:
            return cls((), "no references directory")
        directory = Path(directory)
        if not directory.is_dir():
            from eebench.io import not_a_directory

            raise DataError(f"{directory}: "
                            f"{not_a_directory(directory, ' of reference curves')}")
        return cls.from_files(sorted(directory.glob("*.json")), str(directory))

    def find(self, name: str, sha256: str | None) -> KnownReference:
        """The reference named `name` whose bytes hash to `sha256` (the only one of that name
        when `sha256` is None); a one-line DataError otherwise."""
        named = [r for r in self.known if r.curves.name == name]
        if not named:
            names = sorted({r.curves.name for r in self.known})
            shown = one_line(repr(name), 60, cut="...")
            raise DataError(f"elue.reference: unknown reference {shown}",
                            hint=f"known in {self.where}: {', '.join(names)}; another "
                            "folder: --references DIR" if names else
                            f"{self.where}: pass --references DIR")
        if sha256 is None:
            if len(named) > 1:
                raise DataError(f"elue.reference_sha256: missing, and {len(named)} references "
                                f"are named {name!r}")
            return named[0]
        for r in named:
            if r.sha256 == sha256:
                return r
        raise DataError(f"elue.reference_sha256: {sha256[:12]}... is not the sha256 of "
                        f"reference {name!r} ({named[0].path.name}: {named[0].sha256[:12]}...)",
                        hint="score against the reference file the leaderboard holds")


def default_references_dir(folder: Path) -> Path | None:
    """`references/` next to a folder of submissions (leaderboard/submissions ->
    leaderboard/references), when it exists."""
    candidate = Path(folder).resolve().parent / REFERENCES_DIR
    return candidate if candidate.is_dir() else None


def default_references(folder: Path | None) -> References:
    """What a submission in `folder` is scored against when no --references is given: the
    files of `references/` next to it (default_references_dir; a file there that does not load
    is a DataError) and the leaderboard's curves shipped with eebench (SHIPPED_REFERENCES), a
    shipped file that the folder holds too (the same name and bytes) counted once. `folder`
    None: the shipped curves alone."""
    beside = References.from_dir(default_references_dir(folder) if folder is not None else None)
    shipped = References.from_files(sorted(SHIPPED_REFERENCES.glob("*.json")))
    held = {(r.curves.name, r.sha256) for r in beside.known}
    extra = tuple(r for r in shipped.known if (r.curves.name, r.sha256) not in held)
    where = [beside.where] if beside.known else []
    where += ["the references shipped with eebench"] if extra else []
    return References(beside.known + extra, " and ".join(where) or beside.where)


# The last few recomputations, keyed by everything that enters them (the points' rows but for
# the columns seed averaging and scoring never read, the reference's sha256, the policy): files
# that differ only elsewhere (names, timings) are not scored again. pandas' groupby costs
# ~15 ms a file; the key, well under 1 ms.
_SCORED: OrderedDict[tuple, dict[str, float]] = OrderedDict()
_SCORED_MAX = 32
_UNSCORED = frozenset({"latency_bs1_ms", "latency_bs32_ms", "params_total", "params_mean_used",
                       "avg_exit_layer", "speedup", "disagreements", "row"})


def elue_scores(sub: Submission, ref: ReferenceCurves, ref_sha256: str | None = None
                ) -> dict[str, float]:
    """Each dev task's ELUE score from the submission's own points, seed-averaged as `eebench
    submit` does (the results table, eebench.score.stats.seed_points), against `ref` (whose
    file's sha256, when given, lets an identical recomputation be reused)."""
    from eebench.score import results_frame, score, seed_points, submission_records

    if sub.elue is None:
        return {}
    rows = [r for r in submission_records(sub, label="") if r["split"] == "dev"]
    key = None
    if ref_sha256 is not None:
        key = (ref_sha256, sub.elue.extrapolate,
               tuple(tuple(kv for kv in r.items() if kv[0] not in _UNSCORED) for r in rows))
        if key in _SCORED:
            _SCORED.move_to_end(key)
            return dict(_SCORED[key])
    try:
        report = score(seed_points(results_frame(rows)), ref, sub.elue.extrapolate)
    except DataError as e:
        raise DataError(f"elue: {e.message}", hint=e.hint) from None
    scores = report.elue.get("", {})
    if key is not None:
        _SCORED[key] = dict(scores)
        while len(_SCORED) > _SCORED_MAX:
            _SCORED.popitem(last=False)
    return scores


def check_elue(sub: Submission, references: References) -> None:
    """The ELUE block names a known reference (and its sha256), and its scores are what the
    points give against it, within ELUE_TOLERANCE."""
    from eebench.score.elue import overall

    if sub.elue is None:
        return
    elue = sub.elue
    known = references.find(elue.reference, elue.reference_sha256)
    ref = known.curves
    if elue.reference_model != ref.model:
        shown = one_line(repr(elue.reference_model), 60, cut="...")
        raise DataError(f"elue.reference_model {shown} is not "
                        f"the model of reference {ref.name!r} ({ref.model!r})")
    scores = elue_scores(sub, ref, known.sha256)
    if set(scores) != set(elue.tasks):
        raise DataError(f"elue.tasks: scores for {sorted(elue.tasks)}, the points give "
                        f"scores for {sorted(scores)}")
    for task, value in sorted(scores.items()):
        if not abs(elue.tasks[task] - value) <= ELUE_TOLERANCE:
            raise DataError(f"elue.tasks.{task}: {elue.tasks[task]:.6g} is not the score its "
                            f"points give against {ref.name!r} ({value:.6g})")
    if not abs(elue.overall - overall(scores)) <= ELUE_TOLERANCE:
        raise DataError(f"elue.overall: {elue.overall:.6g} is not the mean of the recomputed "
                        f"scores ({overall(scores):.6g})")
