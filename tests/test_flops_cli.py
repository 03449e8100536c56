"""`eebench flops` exposes the counting convention so anyone can check it."""

import json

from typer.testing import CliRunner

from eebench.cli import app


def test_bert_base_at_128_tokens_from_both_counters():
    result = CliRunner().invoke(app, ["flops", "--model-config", "bert-base", "--seq-len", "128",
                                      "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["total_flops"] == out["total_flops_torch"] == 22_348_434_432
    assert out["counters_agree"] and all(r["fvcore"] == r["torch"] for r in out["modules"])
    assert len(out["modules"]) == 1 + 12 + 1  # embeddings, 12 layers, one static head
    assert out["pooling"] == "cls"  # BERT-base pools [CLS]


def test_minilm_heads_mean_pool_by_default_and_counters_agree():
    def run(*args):
        result = CliRunner().invoke(app, ["flops", "--model-config", "minilm-l6", "--method",
                                          "pabee", "--seq-len", "20", "--json", *args])
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        assert out["counters_agree"] and all(r["fvcore"] == r["torch"] for r in out["modules"])
        return out, [r["fvcore"] for r in out["modules"] if r["module"].startswith("exit")]

    d, n = 384, 20
    mean, heads = run()
    assert mean["pooling"] == "mean" and len(heads) == 6
    assert heads == [2 * (d * d + 2 * d)] * 6  # mac2-matmul: pooling adds nothing
    cls, cls_heads = run("--pooling", "cls")
    assert cls["pooling"] == "cls" and cls_heads == heads
    _, all_mean = run("--convention", "mac2-all")
    _, all_cls = run("--convention", "mac2-all", "--pooling", "cls")
    assert [m - c for m, c in zip(all_mean, all_cls)] == [n * d + d] * 6  # multiply, divide


def test_bad_options_are_usage_errors():
    for args in (["--seq-len", "0"], ["--convention", "macs"], ["--method", "nope"],
                 ["--pooling", "max"]):
        result = CliRunner().invoke(app, ["flops", *args])
        assert result.exit_code == 2, (args, result.output)
        assert len(result.stderr.strip().splitlines()) == 1
