"""FLOPs: fvcore and FlopCounterMode agree exactly, attention is counted, the closed forms hold,
the fitted cost table matches direct counts, and per-sample FLOPs sum each sample's own path."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from eebench.errors import EebenchError, UsageError
from eebench.measure.cost_table import build_cost_table
from eebench.measure.flops import (
    CONVENTIONS,
    count_flops,
    fvcore_flops,
    layer_piece,
    torch_flops,
)
from eebench.methods.base import METHODS, get_method
from eebench.models.build import assemble, build_model
from eebench.models.pooling import POOLINGS
from tests import tiny

D, D_FF, C = 32, 64, 2  # tiny.tiny_model's hidden and intermediate sizes; 2 labels
HEAD = 2 * (D * D + D * C)  # pooler on [CLS] + classifier: 2176


# The closed forms the counters are checked against.
def closed_form_layer_flops(n: int, hidden: int, intermediate: int) -> int:
    """A BERT layer under mac2-matmul: 2 x (4*n*d^2 + 2*n*d*d_ff + 2*n^2*d) multiply-adds."""
    return 2 * (4 * n * hidden**2 + 2 * n * hidden * intermediate + 2 * n * n * hidden)


def closed_form_bert_flops(n: int, hidden: int, intermediate: int, num_layers: int,
                           num_labels: int) -> int:
    """A BERT classifier (layers + pooler on [CLS] + linear classifier) under mac2-matmul."""
    head = 2 * (hidden * hidden + hidden * num_labels)
    return num_layers * closed_form_layer_flops(n, hidden, intermediate) + head


def _inputs(model, n: int) -> tuple:
    ids = (torch.arange(n) % model.config.vocab_size).unsqueeze(0)
    ones = torch.ones(1, n, dtype=torch.long)
    return ids, ones, torch.zeros_like(ones)


def _pieces(model, n: int, layers=None, heads=None):
    """((kind, index), fn, inputs) for the embeddings, layers and exit heads at length n."""
    with torch.no_grad():
        hidden, layer_inputs = model.embed(*_inputs(model, n))
    yield ("embed", 0), model.embed, _inputs(model, n)
    for i in range(model.num_layers) if layers is None else layers:
        yield ("layer", i), *layer_piece(model, i, hidden, layer_inputs)
    mask_2d = _inputs(model, n)[1]  # a head reads the hidden states and the 0/1 mask
    for j in range(model.num_exits) if heads is None else heads:
        yield ("head", j), (lambda h, m, j=j: model.head(j, h, m)), (hidden, mask_2d)


def _row(table, kind: str, index: int) -> np.ndarray:
    return {"embed": table.embedding[None], "layer": table.layer, "head": table.head}[kind][index]


@pytest.fixture(scope="module",
                params=[(m, p) for m in sorted(tiny.TEXT_METHODS) for p in POOLINGS],
                ids=lambda mp: "-".join(mp))
def method_model(request):
    method, pooling = request.param
    return tiny.tiny_model(method, num_labels=C, num_layers=2 if method != "static" else None,
                           seed=0, pooling=pooling)


def test_the_built_in_methods_are_covered():
    assert {"static", "deebert", "pabee"} <= set(METHODS.builtin())


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
@pytest.mark.parametrize("n", [1, 33])
def test_fvcore_equals_flop_counter_mode_exactly(method_model, convention, n):
    # the first and the last head: a PABEE head after the first runs a pooler it does not own
    heads = sorted({0, method_model.num_exits - 1})
    for name, fn, inputs in _pieces(method_model, n, layers=[0], heads=heads):
        fv = fvcore_flops(fn, inputs, convention, owner=method_model)
        tc = torch_flops(fn, inputs, convention)
        assert fv == tc, f"{name} at n={n}: fvcore {fv} vs torch {tc}"
        assert fv > 0 or (name[0] == "embed" and convention == "mac2-matmul")


def test_mac2_all_adds_the_elementwise_work():
    model = tiny.tiny_model("static", num_labels=C)
    n, heads = 6, model.config.num_attention_heads
    hidden, layer_inputs = model.embed(*_inputs(model, n))
    layer_all = count_flops(*layer_piece(model, 0, hidden, layer_inputs), "mac2-all", model)
    elementwise = (heads * n * n * (1 + 1 + 3)  # scale, mask add, softmax
                   + 2 * n * D  # two residual adds
                   + 2 * 5 * n * D  # two layer norms
                   + n * D_FF)  # GELU
    assert layer_all == closed_form_layer_flops(n, D, D_FF) + elementwise
    assert count_flops(lambda h: model.head(0, h), (hidden,), "mac2-all", model) == HEAD + D  # tanh


@pytest.mark.parametrize("n", [1, 7, 40])
def test_a_mean_pooling_head_costs_its_mask_multiply_and_divide_under_mac2_all(n):
    model = tiny.tiny_model("deebert", num_labels=C, num_layers=2, pooling="mean")
    ids, ones, types = _inputs(model, n)
    hidden, _ = model.embed(ids, ones, types)

    def head(h, m):
        return model.head(0, h, m)

    assert count_flops(head, (hidden, ones), "mac2-matmul", model) == HEAD  # no matmul added
    # tanh (D), the multiply by the mask (n * D) and the divide by the token count (D); the sum
    # over tokens is a reduction, which neither counter counts under this convention
    assert count_flops(head, (hidden, ones), "mac2-all", model) == HEAD + D + n * D + D
    table = build_cost_table(model, 48, "mac2-all")
    assert table.fitted and table.head[1, n] == HEAD + 2 * D + n * D
    assert (build_cost_table(model, 48).head[:, 1:] == HEAD).all()


def test_sdpa_is_a_counting_gap_that_the_table_avoids_and_exact_mode():
    model = tiny.tiny_model("static", num_labels=C, num_layers=1, attn_implementation="sdpa")
    hidden, layer_inputs = model.embed(*_inputs(model, 5))
    with pytest.raises(EebenchError):  # fvcore cannot see inside SDPA: refused, not undercounted
        count_flops(*layer_piece(model, 0, hidden, layer_inputs), owner=model)
    table = build_cost_table(model, 16)
    assert table.fitted
    assert table.layer[0, 5] == closed_form_layer_flops(5, D, D_FF)  # counted as eager
    assert model.config._attn_implementation == "sdpa"  # and restored
    exact = build_cost_table(model, 3, exact=True)  # every length counted, no fit
    assert not exact.fitted
    for got, want in [(exact.embedding, table.embedding), (exact.layer, table.layer),
                      (exact.head, table.head)]:
        np.testing.assert_array_equal(got, want[..., :4])


def test_fitted_table_equals_direct_counts_at_other_lengths():
    model = tiny.tiny_model("pabee", num_labels=C, num_layers=2)
    table = build_cost_table(model, 64, "mac2-all")
    assert table.fitted
    for n in (3, 64):  # neither of them a length the fit was made or checked at
        for name, fn, inputs in _pieces(model, n):
            direct = count_flops(fn, inputs, "mac2-all", owner=model)
            assert _row(table, *name)[n] == direct, f"{name} at n={n}"


class _CubicHead(torch.nn.Module):
    """(H H^T)(H H^T): n^3 work, beyond any quadratic fit."""

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor | None = None
                ) -> torch.Tensor:
        scores = hidden @ hidden.transpose(-1, -2)
        return (scores @ scores)[:, 0, :C]


def test_a_cost_that_is_not_quadratic_is_counted_at_every_length():
    model = tiny.tiny_model("static", num_labels=C, num_layers=1)
    model.heads[0] = _CubicHead()
    table = build_cost_table(model, 12)
    assert not table.fitted
    n = np.arange(13)
    np.testing.assert_array_equal(table.head[0], 2 * (n * n * D + n**3))
    np.testing.assert_array_equal(table.layer[0, 1:], closed_form_layer_flops(n[1:], D, D_FF))


def test_bert_base_is_22_348_434_432_flops_at_128_tokens():
    from transformers import AutoModel, BertConfig

    config = BertConfig()  # BERT-base: hidden 768, 12 layers, 12 heads, ff 3072
    assert (config.hidden_size, config.num_hidden_layers, config.num_attention_heads,
            config.intermediate_size) == (768, 12, 12, 3072)
    with torch.device("meta"):  # shapes without weights: counting needs no values
        hf = AutoModel.from_config(config, attn_implementation="eager")
        model = assemble(hf, get_method("static"), num_labels=2)
    table = build_cost_table(model, 128)
    assert table.path_flops(0, 128) == 22_348_434_432
    assert closed_form_bert_flops(128, 768, 3072, 12, 2) == 22_348_434_432
    with torch.device("meta"):  # the table extrapolates to 128 from short lengths: count 128
        hidden, layer_inputs = model.embed(*_inputs(model, 128))
    direct = count_flops(*layer_piece(model, 11, hidden, layer_inputs), owner=model)
    assert direct == table.layer[11, 128]


def test_minilm_layers_match_closed_form(minilm_path):
    model = build_model(str(minilm_path), get_method("deebert"), num_labels=3)
    d, d_ff = model.config.hidden_size, model.config.intermediate_size
    assert (d, d_ff, model.num_layers) == (384, 1536, 6)
    table = build_cost_table(model, 128)
    for n in (16, 77, 128):
        assert (table.layer[:, n] == closed_form_layer_flops(n, d, d_ff)).all()
        assert (table.head[:, n] == 2 * (d * d + d * 3)).all()
    assert table.layer[0, 128] == 478_150_656
    hidden, layer_inputs = model.embed(*_inputs(model, 77))
    direct = count_flops(*layer_piece(model, 5, hidden, layer_inputs), owner=model)
    assert direct == closed_form_layer_flops(77, d, d_ff)


@pytest.fixture(scope="module")
def deebert_table():
    return build_cost_table(tiny.tiny_model("deebert", num_labels=C), 48)


@pytest.mark.parametrize("n", [1, 9, 40, 48])
def test_tiny_table_matches_closed_form(deebert_table, n):
    assert deebert_table.embedding[n] == 0  # lookups and a norm: no matmul
    assert (deebert_table.layer[:, n] == closed_form_layer_flops(n, D, D_FF)).all()
    assert (deebert_table.head[:, n] == HEAD).all()


def test_path_flops_by_hand(deebert_table):
    # exit 2 runs after layer 3: embeddings (0) + 3 layers + heads 0, 1, 2 at n = 10
    # layer: 2 * (4*10*32^2 + 2*10*32*64 + 2*10^2*32) = 2 * (40960 + 40960 + 6400) = 176640
    # head: 2 * (32*32 + 32*2) = 2176
    assert deebert_table.path_flops(2, 10) == 3 * 176_640 + 3 * 2_176 == 536_448
    assert deebert_table.single_exit_flops(2, 10) == 3 * 176_640 + 2_176
    assert deebert_table.path_flops(0, 1) == closed_form_layer_flops(1, D, D_FF) + HEAD


def test_per_sample_flops_equals_loop(deebert_table):
    rng = np.random.default_rng(0)
    exits = rng.integers(0, deebert_table.num_exits, size=200)
    lengths = rng.integers(1, deebert_table.max_len + 1, size=200)
    loop = [deebert_table.path_flops(int(e), int(n))
            for e, n in zip(exits, lengths, strict=True)]
    np.testing.assert_array_equal(deebert_table.per_sample_flops(exits, lengths), loop)
    layers = np.asarray(deebert_table.exit_layers)[exits]
    np.testing.assert_array_equal(deebert_table.exit_indices(layers), exits)


def test_table_errors_and_json(deebert_table):
    with pytest.raises(EebenchError):
        deebert_table.per_sample_flops(np.array([0]), np.array([deebert_table.max_len + 1]))
    with pytest.raises(EebenchError):
        deebert_table.path_flops(0, 0)
    with pytest.raises(EebenchError):
        deebert_table.exit_indices(np.array([2, 0]))
    with pytest.raises(UsageError):
        build_cost_table(tiny.tiny_model("static", max_positions=64), 65)
    with pytest.raises(UsageError):
        count_flops(lambda x: x @ x, (torch.ones(2, 2),), "mac1")
    data = json.loads(json.dumps(deebert_table.to_dict()))
    assert data["convention"] == "mac2-matmul"
    assert data["layer"][1][10] == 176_640


# -- families ------------------------------------------------------------------------------------
def closed_form_elue_layer_flops(n: int, hidden: int, intermediate: int, heads: int) -> int:
    """A BERT layer under elue (ElasticBERT's counter): mac2-matmul, plus 4 per element of its two
    layer norms and 4 per attention score (2 for the scaling, 2 for the softmax)."""
    return (closed_form_layer_flops(n, hidden, intermediate) + 2 * 4 * n * hidden
            + 4 * heads * n * n)


@pytest.fixture(scope="module", params=tiny.FAMILIES)
def family_model(request):
    return tiny.tiny_model("pabee", num_labels=C, family=request.param, depth=2, seed=0)


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_fvcore_equals_flop_counter_mode_for_every_family(family_model, convention):
    for n in (1, 19):
        for name, fn, inputs in _pieces(family_model, n):
            fv = fvcore_flops(fn, inputs, convention, owner=family_model)
            tc = torch_flops(fn, inputs, convention)
            assert fv == tc, f"{family_model.family.name} {name} at n={n}: {fv} vs {tc}"


@pytest.mark.parametrize("n", [1, 9, 40])
def test_every_family_matches_the_closed_forms(family_model, n):
    family, heads = family_model.family.name, family_model.config.num_attention_heads
    matmul = build_cost_table(family_model, 48)
    elue = build_cost_table(family_model, 48, "elue")
    assert matmul.fitted and elue.fitted
    projection = 2 * n * (D // 2) * D if family == "albert" else 0  # ALBERT's E -> H
    assert matmul.embedding[n] == projection  # lookups, norms, MPNet's position bias: 0
    assert (matmul.layer[:, n] == closed_form_layer_flops(n, D, D_FF)).all()
    assert (matmul.head[:, n] == HEAD).all()
    norm = 4 * n * (D // 2 if family == "albert" else D)  # the embeddings' layer norm
    assert elue.embedding[n] == projection + norm
    assert (elue.layer[:, n] == closed_form_elue_layer_flops(n, D, D_FF, heads)).all()
    assert (elue.head[:, n] == HEAD).all()  # pooler and classifier: matmuls only


def test_fitted_tables_of_every_family_equal_direct_counts(family_model):
    table = build_cost_table(family_model, 40, "mac2-all")  # MPNet: its bias arithmetic too
    for n in (3, 40):
        for name, fn, inputs in _pieces(family_model, n):
            assert _row(table, *name)[n] == count_flops(fn, inputs, "mac2-all", family_model)


def _shape_table(shape: str, convention: str, n: int = 128):
    from transformers import AutoModel

    from eebench.models.families import shape_config

    with torch.device("meta"):  # shapes without weights: counting needs no values
        hf = AutoModel.from_config(shape_config(shape), attn_implementation="eager")
        model = assemble(hf, get_method("static"), num_labels=2)
    return model, build_cost_table(model, n, convention)


# BERT-base: 12 layers, hidden 768, ff 3072, 12 heads, a 2-label classifier, at n = 128
BERT_BASE = closed_form_bert_flops(128, 768, 3072, 12, 2)
BASE_FIGURES = [
    ("bert-base", "mac2-matmul", 22_348_434_432),
    ("bert-base", "elue", 22_367_702_016),
    ("roberta-base", "mac2-matmul", 22_348_434_432),  # positions after padding: lookups only
    ("mpnet-base", "mac2-matmul", 22_348_434_432),  # relative position bias: no matmul
    ("albert-base", "mac2-matmul", 22_373_600_256),  # 12 runs of one layer + projection 128->768
]


@pytest.mark.parametrize(("shape", "convention", "flops"), BASE_FIGURES)
def test_base_shapes_of_every_family_at_128_tokens(shape, convention, flops):
    model, table = _shape_table(shape, convention)
    assert table.path_flops(0, 128) == flops
    assert table.convention == convention and model.num_layers == 12


def test_the_base_figures_by_closed_form():
    assert BERT_BASE == 22_348_434_432
    elue = (12 * closed_form_elue_layer_flops(128, 768, 3072, 12) + 4 * 128 * 768
            + 2 * (768 * 768 + 768 * 2))
    assert elue == 22_367_702_016 == BERT_BASE + 19_267_584
    assert BERT_BASE + 2 * 128 * 128 * 768 == 22_373_600_256  # ALBERT's embedding projection


def test_albert_counts_its_shared_layer_every_time_it_runs():
    model, table = _shape_table("albert-base", "mac2-matmul", n=16)
    assert len({id(layer) for layer in model.layers}) == 1
    assert (table.layer[:, 16] == closed_form_layer_flops(16, 768, 3072)).all()
    assert table.path_flops(0, 16) == (2 * 16 * 128 * 768 + 12 * table.layer[0, 16]
                                       + 2 * (768 * 768 + 2 * 768))


def test_elue_is_a_named_convention():
    assert "elue" in CONVENTIONS and "flops_counter.py" in CONVENTIONS["elue"]
    from eebench.measure.flops import DEFAULT_CONVENTION

    assert DEFAULT_CONVENTION == "mac2-matmul"


@pytest.mark.parametrize(("shape", "convention", "flops"), [
    *BASE_FIGURES, ("elasticbert-base", "mac2-matmul", 22_348_434_432)])
def test_eebench_flops_shows_the_base_figures(shape, convention, flops):
    from typer.testing import CliRunner

    from eebench.cli import app

    result = CliRunner().invoke(app, ["flops", "--model-config", shape, "--seq-len", "128",
                                      "--convention", convention, "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["total_flops"] == out["total_flops_torch"] == flops
    assert out["counters_agree"] and out["convention"] == convention
