"""The plausibility bounds of eebench.submit.plausible hold for what eebench measures: the FLOPs
counted on real (tiny) models under both conventions, the parameters of every method's model, and
any way of giving lengths to the samples of a histogram; and they are tight where the file says
everything (one exit layer, one length)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eebench.submit.plausible import (
    CONVENTIONS,
    Dims,
    backbone_params,
    depth_length_bounds,
    flops_bounds,
    params_bounds,
    ran_histogram,
)

MINILM = Dims(hidden=384, intermediate=1536, vocab=30522, positions=512, token_types=2, layers=6)


def test_the_conventions_are_those_eebench_counts():
    from eebench.measure.flops import CONVENTIONS as MEASURED

    assert set(CONVENTIONS) == set(MEASURED)


def _layer(d: int, f: int, n: np.ndarray) -> np.ndarray:
    return 2 * (4 * n * d * d + 2 * n * d * f + 2 * n * n * d)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_bounds_hold_for_any_lengths_behind_a_histogram(data):
    """Samples with exit layers k_i and lengths n_i (mac2-matmul closed form, a pooler and a
    classifier per exit evaluated): the mean lies within the bounds computed from the histogram,
    the mean length and the longest length alone."""
    layers = data.draw(st.integers(1, 12))
    max_length = data.draw(st.integers(1, 256))
    n = data.draw(st.integers(1, 40))
    exits = np.array(data.draw(st.lists(st.integers(1, layers), min_size=n, max_size=n)))
    lengths = np.array(data.draw(st.lists(st.integers(1, max_length), min_size=n, max_size=n)))
    d, f, c = data.draw(st.sampled_from([(4, 8, 1), (32, 64, 2), (384, 1536, 3)]))
    every_layer = data.draw(st.booleans())  # DeeBERT/PABEE: a head per layer run; static: one
    heads = exits if every_layer else np.ones_like(exits)
    per_sample = _layer(d, f, lengths.astype(float)) * exits + 2 * (d * d + d * c) * heads
    hist = np.bincount(exits, minlength=layers + 1)[1:].tolist()
    dims = Dims(d, f, 1000, 512, 2, layers)
    low, high = flops_bounds(dims, hist, float(lengths.mean()), max_length, c, "mac2-matmul")
    assert low <= per_sample.mean() <= high
    s_min, s_max = depth_length_bounds(hist, float(lengths.mean()), max_length)
    assert s_min * (1 - 1e-12) <= float((exits * lengths).sum()) <= s_max * (1 + 1e-12)


def test_bounds_are_tight_for_one_exit_layer_and_one_length():
    """A static point (every sample at layer k) of samples of one length: the bounds meet the
    cost up to the heads' allowance."""
    for k in (1, 3, 6):
        hist = [0] * 6
        hist[k - 1] = 10
        cost = k * _layer(384, 1536, np.array(100.0)) + 2 * (384 * 384 + 384 * 2)
        low, high = flops_bounds(MINILM, hist, 100.0, 100, 2, "mac2-matmul")
        assert low <= cost <= high
        assert cost / low < 1.01 and high / cost < 1.02


@pytest.mark.parametrize("pooling", ["cls", "mean"])
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_bounds_hold_for_counted_flops(pooling, convention):
    """FLOPs counted by eebench (fvcore and torch agreeing) on a tiny BERT with a head size of 1
    (the most attention heads a width allows: the worst case of the element-wise softmax)."""
    from eebench.measure.cost_table import build_cost_table
    from tests import tiny

    for hidden, ffn, heads in ((8, 16, 8),):
        model = tiny.tiny_model("pabee", num_labels=3, depth=3, pooling=pooling, hidden=hidden,
                                intermediate=ffn, heads=heads)
        table = build_cost_table(model, 24, convention)
        dims = Dims(hidden, ffn, tiny.MINILM_VOCAB, 512, 2, 3)
        for n in (1, 5, 24):
            for j in range(3):
                hist = [int(i == j) for i in range(3)]
                low, high = flops_bounds(dims, hist, float(n), n, 3, convention)
                assert low <= table.path_flops(j, n) <= high
                assert low <= table.single_exit_flops(j, n)


@pytest.mark.parametrize("method,num_labels", [  # DeeBERT refuses regression
    ("pabee", 1), ("pabee", 3), ("deebert", 3), ("static", 1), ("static", 3)])
def test_params_bounds_hold_for_every_methods_model(method, num_labels):
    from eebench.measure.params import params_per_exit
    from tests import tiny
    dims = Dims(32, 64, tiny.MINILM_VOCAB, 512, 2, 4)
    for k in ((1, 2, 4) if method == "static" else (None,)):
        model = tiny.tiny_model(method, num_labels=num_labels, depth=4, num_layers=k)
        total = params_per_exit(model).total
        deepest = k or 4
        low, high = params_bounds(dims, deepest, num_labels)
        assert low <= total <= high, (method, k, low, total, high)
        assert total >= backbone_params(dims, deepest)


def test_minilm_params_are_what_the_shipped_runs_hold():
    """MiniLM-L6 PABEE on a 2-label task: the backbone, one shared pooler, six classifiers."""
    assert backbone_params(MINILM, 6) + 384 * 384 + 384 + 6 * (384 * 2 + 2) == 22_717_836
    low, high = params_bounds(MINILM, 6, 2)
    assert low <= 22_717_836 <= high and high < 1.1 * low


@pytest.mark.parametrize("convention", CONVENTIONS)
def test_cascade_bounds_hold_for_its_counted_flops_and_params(convention):
    """A cascade of complete tiny models of 1, 2 and 4 layers: each answer's counted FLOPs (every
    model run on the way, each with its embeddings and head) and the parameters of all three
    lie within the bounds given its depths, and outside those of one model."""
    from eebench.measure.cost_table import build_cost_table
    from eebench.measure.params import params_per_exit
    from eebench.methods.cascade_model import CascadeModel
    from eebench.methods.static import Static
    from eebench.models.exits import exit_paths
    from tests import tiny

    depths = [1, 2, 4]
    models = [tiny.tiny_model(Static(layers=k), num_labels=3, depth=4, num_layers=k, hidden=8,
                              intermediate=16, heads=8, seed=k) for k in depths]
    cascade = CascadeModel(models, {})
    table = build_cost_table(cascade, 24, convention)
    dims = Dims(8, 16, tiny.MINILM_VOCAB, 512, 2, 4)
    # what a sample answered at each depth ran, as the run records it (the exit protocol)
    paths = {path[-1].heads[-1]: [r.layers for r in path] for path in exit_paths(cascade)}
    assert paths == {1: [1], 2: [1, 2], 4: [1, 2, 4]}
    assert ran_histogram([3, 5, 0, 2], paths) == ([3, 0, 5, 0, 0, 0, 2], 3)
    for n in (1, 5, 24):
        for j, k in enumerate(depths):
            hist = [int(i + 1 == k) for i in range(4)]
            low, high = flops_bounds(dims, hist, float(n), n, 3, convention, paths)
            assert low <= table.path_flops(j, n) <= high, (n, k)
    _, alone = flops_bounds(dims, [0, 0, 0, 1], 24.0, 24, 3, convention)
    assert table.path_flops(2, 24) > alone  # one 4-layer model cannot cost that much
    total = params_per_exit(cascade).total
    assert total == sum(sum(p.numel() for p in m.parameters()) for m in models)
    low, high = params_bounds(dims, 4, 3, depths)
    assert low <= total <= high
    assert total > params_bounds(dims, 4, 3)[1]  # nor hold that many parameters


FAMILIES = ("bert", "roberta", "albert", "distilbert", "mpnet")


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_is_within_its_recorded_sizes(family, tmp_path):
    """What `eebench submit` records of a backbone's config (build._model_sizes) bounds the
    FLOPs counted, under every convention, and the parameters held by tiny models of each family
    eebench builds: head size 1 (the most attention heads a width allows) and texts longer than
    the width (MPNet's relative-position buckets grow with n², not with d)."""
    from eebench.measure.cost_table import build_cost_table
    from eebench.measure.params import params_per_exit
    from eebench.submit.build import _model_sizes
    from tests import tiny

    if family not in getattr(tiny, "FAMILIES", ("bert",)):
        pytest.skip(f"no tiny {family} model")
    config = {"hidden": 8, "intermediate": 16, "heads": 8}
    tiny.tiny_family_config(family, num_layers=3, **config).save_pretrained(str(tmp_path))
    sizes = _model_sizes(str(tmp_path), [], 3)
    dims = Dims(sizes["hidden_size"], sizes["intermediate_size"], sizes["vocab_size"],
                sizes["max_position_embeddings"], sizes["type_vocab_size"], 3,
                sizes["embedding_size"], sizes["distinct_layers"])
    for method, k, conventions in (("pabee", None, CONVENTIONS), ("static", 2, CONVENTIONS[:1])):
        model = tiny.tiny_model(method, num_labels=2, depth=3, num_layers=k, family=family,
                                pooling="mean", **config)
        low, high = params_bounds(dims, k or 3, 2)
        assert low <= params_per_exit(model).total <= high, (method, low, high)
        for convention in conventions:
            table = build_cost_table(model, 48, convention)
            for n in (1, 16, 48):
                for j, layer in enumerate(model.exit_layers):
                    hist = [int(i + 1 == layer) for i in range(3)]
                    low, high = flops_bounds(dims, hist, float(n), n, 2, convention)
                    assert low <= table.path_flops(j, n) <= high, (method, convention, n, j)
