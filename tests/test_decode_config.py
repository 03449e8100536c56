"""`eebench decode --config FILE` and `--dry-run`: a decoder run's settings from a TOML file, what
the run is (its hash, directory, methods, checks) said without loading a model or data; the
literature's decoder settings (benchmarks/literature/decoders/*.toml) dry-run offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import eebench.cli.decode  # noqa: F401  (registers the command)
from tests.cli import invoke

ROOT = Path(__file__).resolve().parent.parent
LITERATURE = sorted((ROOT / "benchmarks" / "literature" / "decoders").glob("*.toml"))
COMMITTED = "40ec2009ef4d"  # the committed SmolLM2 run's key: the options that made it


def _plan(*args: object) -> dict:
    result = invoke("decode", *args, "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_config_file_is_the_same_run_as_its_options(tmp_path):
    options = ["--model", "smollm2-135m", "--exits", "6,12,18,24", "--samples", 8,
               "--new-tokens", 32, "--timing", "--spec-checks", "all"]
    by_options = _plan(*options)
    assert by_options["key"] == COMMITTED and not by_options["finished"]
    path = tmp_path / "run.toml"
    path.write_text('model = "smollm2-135m"\ntask = "humaneval-gen"\ntiming = true\n'
                    'spec_checks = "all"\n'
                    "[data]\nsamples = 8\nnew_tokens = 32\n[exits]\nlayers = [6, 12, 18, 24]\n")
    by_file = _plan("--config", path)
    assert by_file["config"] == by_options["config"] and by_file["key"] == COMMITTED
    # the committed run is found where it is
    out = ROOT / "benchmarks" / "results" / "decoder-smollm2"
    assert _plan("--config", path, "--out", out)["finished"] is True


def test_spec_checks_all_checks_every_k_and_d():
    plan = _plan("--exits", "6,12,18,24", "--drafts", "1,4", "--spec-checks", "all")
    assert plan["spec_checks"] == [[k, d] for k in (6, 12, 18, 24) for d in (1, 4)]
    assert _plan("--exits", "6,12", "--spec-checks", "12:1")["spec_checks"] == [[12, 1]]
    assert _plan("--exits", "6,12")["spec_checks"] == [[6, 4], [12, 4]]  # longest: the default


@pytest.mark.parametrize(("args", "message"), [
    (["--spec-checks", "6:x"], "not longest, all or k:d pairs"),
    (["--spec-checks", "7:4", "--exits", "6,12"], "must be among the candidate exits"),
    (["--config", "{toml}", "--samples", "3"], "--samples: given with --config"),
    (["--config", "{missing}"], "No such file"),
    (["--config", "{bad}"], "frob: Extra inputs are not permitted"),
    (["--exits", "6,40"], "within 1..29 (smollm2-135m has 30 layers): [6, 40]"),
    (["--exits", "12,6"], "exit layers must be increasing"),
    (["--exits", "0,6"], "exit layers must be increasing"),
    (["--split", "dev"], "humaneval-gen has no split 'dev' (hint: its splits: test)"),
    (["--model", "{missing}"], "hint: use --model smollm2-135m"),
])
def test_bad_settings_are_refused_in_one_line(args, message, tmp_path):
    (tmp_path / "ok.toml").write_text('model = "smollm2-135m"\ntask = "imdb-lm"\n'
                                      "[exits]\nlayers = [6, 12]\n")
    (tmp_path / "bad.toml").write_text('model = "smollm2-135m"\ntask = "imdb-lm"\nfrob = 1\n'
                                       "[exits]\nlayers = [6, 12]\n")
    args = [a.format(toml=tmp_path / "ok.toml", missing=tmp_path / "none.toml",
                     bad=tmp_path / "bad.toml") for a in args]
    result = invoke("decode", *args, "--dry-run")
    assert result.exit_code in (1, 2), result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_the_literature_decoder_settings_dry_run_offline(tmp_path, monkeypatch):
    assert LITERATURE, "benchmarks/literature/decoders holds the decoder papers' settings"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a download would fail, not wait
    for path in LITERATURE:
        plan = _plan("--config", path)
        assert "self-spec" in plan["methods"] and plan["timing"], path.name
        ks, drafts = plan["config"]["ks"], plan["config"]["draft_lengths"]
        assert plan["spec_checks"] == [[k, d] for k in ks for d in drafts]  # every point checked
    assert list(tmp_path.iterdir()) == []  # a dry run writes nothing
