"""The published numbers eebench's results are set beside (leaderboard/published.toml): a TOML
file of full models' scores, early-exit papers' claims and published curves, every number with
its source. The report kinds `full-models`, `claims` and `published-curve` read it.

    [[figure]]          # a full model's published score
    model = "BERT-base"
    task = "rte"        # the eebench task it is the score of (GLUE dev for GLUE tasks)
    value = 66.4
    source = "..."

    [[claim]]           # an early-exit paper's claim
    method = "pabee"    # the eebench method that re-implements it
    paper = "PABEE (Zhou et al., NeurIPS 2020)"
    model = "ALBERT-base"
    task = "MRPC"       # the paper's task, as it names it
    measured_on = ["elue-mrpc"]  # eebench tasks that stand for it: a run set's first with runs
    across = false      # true: all of them with runs, averaged per seed (a benchmark's claim)
    terms = "layers"    # how the speed-up counts: "layers" (L / the mean exit layer), "flops"
    base = 89.5         # (full FLOPs / the point's) or "time"; "elue": an ELUE score (`exit`)
    exit = 90.0         # the paper's full model, and with early exit ...
    speedup = 1.57      # ... at this speed-up
    source = "..."

    [[curve]]           # a published curve: metric against GFLOPs per sample
    model = "ElasticBERT-base"
    task = "elue-sst2"
    split = "test"
    gflops = [1.06, 4.24]
    values = [84.1, 88.6]
    source = "..."
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from eebench.errors import DataError
from eebench.run.config import tomllib


class Figure(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str
    task: str
    value: float
    split: str = "dev"
    metric: str = ""  # when not the task's main metric as eebench computes it, what it is
    source: str


class Claim(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    method: str
    paper: str
    model: str
    task: str  # the paper's task, as it names it
    # the eebench tasks that stand for it, in order: each run set is measured on the first it
    # has runs of; none where no eebench task does
    measured_on: list[str] = []
    # a claim about a benchmark ("on GLUE"), not a task: measured on every task of `measured_on`
    # the run set has runs of (for a claim against another method, of both), averaged per seed
    across: bool = False
    metric: str = ""  # the paper's metric where it is not the task's main one ("f1")
    split: str = "dev"
    terms: Literal["layers", "flops", "time", "elue"]
    base: float | None = None  # the paper's full model (a change is claimed against it)
    exit: float  # with early exit; for "elue": the claimed ELUE score
    speedup: float | None = Field(default=None, gt=1)  # at this speed-up, counted in `terms`
    # A claim against another method ("outperforms PABEE"): the difference from `against`, each
    # measured the same way on the same seeds; `exit` is the claimed difference (0: "better"),
    # `base` is not given.
    against: str = ""
    source: str
    note: str = ""  # what the reader should know about the comparison

    @field_validator("measured_on", mode="before")
    @classmethod
    def _one_or_more(cls, v: Any) -> Any:
        return ([v] if v else []) if isinstance(v, str) else v

    @model_validator(mode="after")
    def _complete(self) -> Claim:
        if self.terms != "elue" and self.speedup is None:
            raise ValueError(f"a claim in {self.terms!r} terms needs `speedup`")
        if self.terms != "elue" and not self.against and self.base is None:
            raise ValueError(f"a claim in {self.terms!r} terms needs `base`")
        return self

    @property
    def change(self) -> float:
        """The claimed change: against the full model, the claimed ELUE score, or the claimed
        difference from the method it is set against."""
        return self.exit if self.terms == "elue" or self.against else self.exit - self.base

    def said(self) -> str:
        where = f"{self.model}, {self.task} {self.split}"
        if self.against:
            at = "ELUE score" if self.terms == "elue" else \
                f"best point at {self.speedup:.2f}× ({self.terms})"
            by = f" by {self.exit:+.1f}" if self.exit else ""  # 0: "better", no figure
            return f"{where}: {at} above {self.against}'s{by}"
        if self.terms == "elue":
            return f"{where}: ELUE score {self.exit:+.2f}"
        metric = f" {self.metric}" if self.metric else ""
        return (f"{where}{metric}: {self.base:.1f} → {self.exit:.1f} ({self.change:+.1f}) at "
                f"{self.speedup:.2f}× ({self.terms})")


class Curve(BaseModel):
    """Points of a published curve (metric against GFLOPs per sample)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str
    task: str  # the eebench task it is the curve of
    split: str
    gflops: list[float] = Field(min_length=1)
    values: list[float] = Field(min_length=1)
    source: str

    @model_validator(mode="after")
    def _paired(self) -> Curve:
        if len(self.gflops) != len(self.values):
            raise ValueError(f"{len(self.gflops)} gflops for {len(self.values)} values")
        return self


class Published(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    figure: list[Figure] = []
    claim: list[Claim] = []
    curve: list[Curve] = []


def load_published(path) -> Published:
    """The published figures and claims of a TOML file; one line naming the file when bad."""
    from pydantic import ValidationError

    try:
        return Published.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise DataError(f"{path}: {e}") from None
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise DataError(f"{path}: {where}: {err['msg']}") from None


__all__ = ["Claim", "Curve", "Figure", "Published", "load_published"]
