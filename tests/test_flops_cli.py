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


def test_bad_options_are_usage_errors():
    for args in (["--seq-len", "0"], ["--convention", "macs"], ["--method", "nope"]):
        result = CliRunner().invoke(app, ["flops", *args])
        assert result.exit_code == 2, (args, result.output)
        assert len(result.stderr.strip().splitlines()) == 1
