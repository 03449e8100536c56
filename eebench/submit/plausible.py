"""Physical plausibility: what a BERT-family model of the declared size can cost and weigh.

A submission declares its model (hidden size d, feed-forward size d_ff, vocabulary V, positions
P, token types T, embedding width E, L layers of which D have weights of their own) and, per
run, the mean token length n̄ of the evaluated samples and the longest length the run allowed,
n_max. From those alone, closed forms bound every point's mean FLOPs per sample and its
parameter count; a number outside the bounds was not measured on that model
(docs/leaderboard.md, "Plausibility").

FLOPs under `mac2-matmul` (docs/flops.md): a layer at n tokens costs

    layer(n) = 2·(4·n·d² + 2·n·d·d_ff + 2·n²·d) = a·n + b·n²,  a = 2·(4d² + 2d·d_ff), b = 4d

and a sample that exits at layer k ran layers 1..k at its own length n, so a point's mean cost
is (1/N)·Σ_i Σ_{l ≤ k_i} layer(n_i) + its heads. The per-sample pairs (k_i, n_i) are not in the
file, only the exit histogram, n̄ and n_max, so the bounds hold for every way of giving lengths
in [1, n_max] with mean n̄ to the samples of the histogram:

- S = Σ_i k_i·n_i lies between S_min (the longest samples exit first) and S_max (the longest
  samples exit last): `depth_length_bounds`, a greedy fill that is exact for this linear program;
- linear part: a·S; attention part: b·Σ k_i·n_i², at most b·n_max·S (as n_i ≤ n_max) and at
  least b·S²/Σ k_i (Cauchy-Schwarz), which for one exit layer is Jensen's b·k·n̄²;
- heads: at least one per sample costing at least 2d (a linear map to one output), at most one
  per layer run, each at most 2·(2d² + d·C) (a pooler, room for one more d×d layer, and a C-way
  classifier); embeddings are lookups (0), projected to d where E ≠ d (ALBERT: at most 2·E·d
  per token).

Every family eebench builds (BERT, RoBERTa, ALBERT, DistilBERT, MPNet, ElasticBERT) runs this
layer: the same four projections, feed-forward and two attention products (MPNet's relative
position bias and ALBERT's sharing change no matmul).

`mac2-all` and `elue` count element-wise work too: at least the `mac2-matmul` cost, at most
that plus a generous allowance per layer (6·d·n² for the attention's softmax, scaling and mask
with at most d heads, MPNet's position bias included; 40·n·d + 4·n·d_ff for norms, residuals,
biases and activations), per head (2·n·d + 4·d + 2·C) and for the embeddings (10·n·d, and 16·n²
for MPNet's relative-position buckets, about 8 per pair of tokens); `elue`'s 4 per layer-norm
element and 4 per attention score are well inside it. Other conventions are refused: nothing
bounds them.

Parameters: a backbone whose first k layers have weights of their own holds (V + P + T)·E + 2E
(embeddings and their norm), E·d + d (the projection, where E ≠ d) and k·(4d² + 2d·d_ff + 9d +
d_ff); a point's model has at least min(its deepest exit, D) such layers and at most D, at least
one C-way classifier and at most one pooler per layer plus the backbone's own and a head per
layer as above, with 0.5% slack either way (MPNet's relative position bias, 32 per head, is in
it).

What a sample answered at each exit ran is the run's `exit_paths`: one model's layers up to the
exit, or, for complete models run one after another (depths d_1 < ... < d_S),
models 1..j whole. The bounds read the histogram by layers run (a sample answered at depth d_j
ran d_1 + ... + d_j layers), the embeddings' allowance counts the models run, and the parameters
of several models are the sum of complete models of their depths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from eebench.errors import DataError

if TYPE_CHECKING:
    from eebench.submit.schema import Submission

CONVENTIONS = ("mac2-matmul", "mac2-all", "elue")  # those of eebench.measure.flops.CONVENTIONS
ELEMENTWISE = ("mac2-all", "elue")  # the conventions that count more than the matmuls
PARAMS_SLACK = 0.005
ROUNDING = 1e-6  # relative: mean FLOPs are means of integers, written as floats


@dataclass(frozen=True)
class Dims:
    """The declared model: BERT-family sizes."""

    hidden: int
    intermediate: int
    vocab: int
    positions: int
    token_types: int
    layers: int
    embedding: int = 0  # E; 0: the hidden size
    distinct: int = 0  # D; 0: every layer its own

    @property
    def width(self) -> int:
        return self.embedding or self.hidden

    @property
    def own(self) -> int:
        return self.distinct or self.layers


def depth_length_bounds(hist: list[int], mean_length: float, max_length: int
                        ) -> tuple[float, float]:
    """(S_min, S_max): the least and most Σ k_i·n_i over the samples of `hist` (hist[k-1]
    exiting at layer k) when each n_i lies in [1, max_length] and their mean is `mean_length`."""
    n = sum(hist)
    base = float(sum((k + 1) * h for k, h in enumerate(hist)))  # every n_i = 1
    budget = n * (mean_length - 1.0)  # tokens beyond one per sample, to hand out
    room = max_length - 1.0  # extra tokens one sample can take

    def fill(order: range) -> float:
        left, total = budget, base
        for k in order:
            extra = min(left, hist[k] * room)
            total += (k + 1) * extra
            left -= extra
        return total

    return fill(range(len(hist))), fill(range(len(hist) - 1, -1, -1))


def ran_histogram(hist: list[int], paths: dict[int, list[int]]) -> tuple[list[int], int]:
    """The histogram by layers run, and the most models a sample ran: a sample answered at layer
    k ran the models of `paths[k]` (their depths) in turn, so their layers' sum (models of 1, 2,
    4 and 6 layers: 1, 3, 7, 13)."""
    answered = {k + 1: h for k, h in enumerate(hist) if h}
    ran = {k: sum(paths.get(k, [k])) for k in answered}
    out = [0] * max([len(hist), *ran.values()])
    for k, h in answered.items():
        out[ran[k] - 1] += h
    return out, max((len(paths.get(k, [k])) for k in answered), default=1)


def flops_bounds(dims: Dims, hist: list[int], mean_length: float, max_length: int,
                 num_labels: int, convention: str, paths: dict[int, list[int]] | None = None
                 ) -> tuple[float, float]:
    """(lowest, highest) mean FLOPs per sample of a point (see the module docstring). `paths`:
    the depths of the models a sample answered at layer k ran (None: layers 1..k of one
    model); every layer run on the way counts, and each model's embeddings."""
    hist, models = ran_histogram(hist, paths or {})
    d, f, c = float(dims.hidden), float(dims.intermediate), float(num_labels)
    n = float(sum(hist))
    depth = sum((k + 1) * h for k, h in enumerate(hist)) / n  # mean layers run per sample
    s_min, s_max = depth_length_bounds(hist, mean_length, max_length)
    a, b = 2.0 * (4 * d * d + 2 * d * f), 4.0 * d
    head_lo, head_hi = 2.0 * d, 2.0 * (2 * d * d + d * c)
    low = (a * s_min + b * s_min * s_min / (n * depth)) / n + head_lo
    high = (a + b * max_length) * s_max / n + depth * head_hi
    if dims.width != dims.hidden:  # the embeddings projected to the hidden size, per token
        high += models * 2.0 * dims.width * d * mean_length
    if convention in ELEMENTWISE:
        a_all, b_all = 40.0 * d + 4.0 * f, 6.0 * d
        high += ((a_all + b_all * max_length) * s_max + 2.0 * d * s_max) / n
        high += depth * (4.0 * d + 2.0 * c) + models * 10.0 * d * mean_length
        # n^2 position buckets: E[n^2] <= mean * max
        high += models * 16.0 * mean_length * max_length
    return low * (1 - ROUNDING), high * (1 + ROUNDING)


def backbone_params(dims: Dims, layers: int) -> int:
    """Parameters of a backbone of `dims` cut to its first `layers` layers (no pooler)."""
    d, f, e = dims.hidden, dims.intermediate, dims.width
    embeddings = (dims.vocab + dims.positions + dims.token_types) * e + 2 * e
    if e != d:
        embeddings += e * d + d
    return embeddings + min(layers, dims.own) * (4 * d * d + 2 * d * f + 9 * d + f)


def params_bounds(dims: Dims, deepest: int, num_labels: int,
                  in_turn: list[int] | None = None) -> tuple[float, float]:
    """(fewest, most) parameters of a model of `dims` whose deepest exit is at layer `deepest`,
    with its exit heads for `num_labels` outputs; of complete models run in turn (`in_turn`:
    their depths), the sum over them, each a complete model of its depth."""
    d, c = dims.hidden, num_labels
    classifier, pooler = d * c + c, d * d + d
    low = high = 0
    for depth, big in ([(k, k) for k in in_turn] if in_turn else [(deepest, dims.layers)]):
        low += backbone_params(dims, depth) + classifier
        high += backbone_params(dims, big) + pooler + big * (2 * pooler + classifier)
    return low * (1 - PARAMS_SLACK), high * (1 + PARAMS_SLACK)


def check_costs(sub: Submission) -> None:
    """Every point's mean FLOPs and parameters within what the declared model can cost and hold
    (run after the consistency checks: known tasks, histograms of L entries adding up to N)."""
    from eebench.tasks.catalog import get_task

    convention = sub.flops.convention
    if convention not in CONVENTIONS:
        raise DataError(f"flops.convention: {convention!r} is not a convention eebench bounds",
                        hint=f"known: {', '.join(CONVENTIONS)} (docs/flops.md)")
    m = sub.model
    if m.distinct_layers > m.num_layers:
        raise DataError(f"model.distinct_layers {m.distinct_layers} exceeds its num_layers "
                        f"{m.num_layers}")
    dims = Dims(m.hidden_size, m.intermediate_size, m.vocab_size, m.max_position_embeddings,
                m.type_vocab_size, m.num_layers, m.embedding_size, m.distinct_layers)
    model = (f"a {m.num_layers}-layer model of hidden size {m.hidden_size}, feed-forward "
             f"{m.intermediate_size}")
    for task, t in sub.tasks.items():
        labels = get_task(task).num_labels
        for i, run in enumerate(t.runs):
            where = f"tasks.{task}.runs.{i}"
            if run.mean_length > run.max_length:
                raise DataError(f"{where}: mean_length {run.mean_length:g} exceeds its "
                                f"max_length {run.max_length}")
            if run.max_length > m.max_position_embeddings:
                raise DataError(f"{where}: max_length {run.max_length} exceeds the model's "
                                f"max_position_embeddings {m.max_position_embeddings}")
            paths = {path[-1].heads[-1]: [r.layers for r in path] for path in run.exit_paths}
            longest = max(paths.values(), key=len)
            in_turn = longest if len(longest) > 1 else None  # complete models run in turn
            for j, p in enumerate(run.points):
                hist = p.exit_histogram
                low, high = flops_bounds(dims, hist, run.mean_length, run.max_length, labels,
                                         convention, paths)
                if not low <= p.mean_flops <= high:
                    raise DataError(
                        f"{where}.points.{j}: mean_flops {p.mean_flops:.6g} is outside "
                        f"[{low:.6g}, {high:.6g}], what {model} can cost at a mean length of "
                        f"{run.mean_length:g} tokens (at most {run.max_length}) under {convention}")
                deepest = max(k + 1 for k, h in enumerate(hist) if h)
                low, high = params_bounds(dims, deepest, labels, in_turn)
                if not low <= p.params_total <= high:
                    raise DataError(
                        f"{where}.points.{j}: params_total {p.params_total:,} is outside "
                        f"[{low:,.0f}, {high:,.0f}], what {model} and vocabulary {m.vocab_size:,} "
                        f"holds with its exit heads")
