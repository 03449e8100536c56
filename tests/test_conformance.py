"""The conformance kit (eebench.testing) on every registered method: its description and its
models' structure here (the shape of every exit's outputs for its unit: a label per text, a tag
per token); each decoder method's runs on the tiny Llama here too (a decoder method only has no
encoder model: that part is skipped, with the reason); trained, reloaded and swept end to end in
the slow tier, with the example plugin's method and rule beside them (tests/test_plugins.py
installs it in a venv as well)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from eebench.methods.base import METHODS, get_method
from eebench.methods.decoder_derived import decoder_methods, encoder_tasks
from eebench.testing import Conformance, check_method
from eebench.testing.decoders import check_decoder_runs

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", METHODS.builtin())
def test_every_method_conforms_in_its_description_and_structure(name, tmp_path):
    report = check_method(name, workdir=tmp_path, runs=False)
    assert report.ok, str(report)


@pytest.mark.parametrize("name", [n for n in decoder_methods() if n in METHODS.builtin()])
def test_every_decoder_method_makes_valid_points_on_the_tiny_llama(name, tmp_path):
    """One decoder run per decoder task it does, of it alone (static's encoder runs: slow)."""
    method = get_method(name)
    if encoder_tasks(method):
        report = Conformance(name, "method")
        check_decoder_runs(report, method, tmp_path)
    else:
        report = check_method(name, workdir=tmp_path)
        assert report.skipped, "a decoder method only says what it skips"
    assert report.ok and report.passed, str(report)


@pytest.mark.parametrize("name,settings", [("deebert", {"unit": "token"}),
                                           ("static", {"unit": "token", "layers": 2})])
def test_a_token_model_of_a_text_method_conforms_in_structure(name, settings, tmp_path):
    report = check_method(name, settings, workdir=tmp_path, runs=False)
    assert report.ok, str(report)


@pytest.mark.slow
@pytest.mark.parametrize("name", METHODS.builtin())
def test_every_method_conforms_end_to_end(name, tmp_path):
    report = check_method(name, workdir=tmp_path)
    assert report.ok, str(report)


@pytest.mark.slow
def test_the_example_plugin_conforms_end_to_end(tmp_path):
    """PALBERT and its Q-exit rule, imported from examples/plugin (in a process of its own: its
    registration stays out of this one's registries)."""
    code = ("import sys, eebench_palbert\nfrom eebench.testing.conformance import main\n"
            "sys.exit(main(['palbert', '--rule', 'q-exit']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "EEBENCH_TEST_THREADS": "1",
                                            "PYTHONPATH": f"{REPO}:{REPO / 'examples/plugin'}"})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "0 problem(s)" in out.stdout
