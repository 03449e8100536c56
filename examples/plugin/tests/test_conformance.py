"""The plugin's own tests: eebench's conformance checks on its method and its rule."""

from eebench.testing import assert_method, assert_rule


def test_palbert_conforms(tmp_path):
    assert_method("palbert", workdir=tmp_path)


def test_q_exit_conforms_on_palbert(tmp_path):
    assert_rule("q-exit", method="palbert", workdir=tmp_path)
