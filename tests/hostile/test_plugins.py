"""Plugins that are not what their entry point group holds: a method entry naming a function, a
class that is no method, a rule entry naming a number, a backbone entry naming a class; a module
that registers a function with the method decorator; a module that calls `sys.exit` at import.
Each is one warning line naming the entry point and is skipped: `methods`, `rules` and
`backbones` list the built-ins (exit 0), and `run` naming the plugin is an unknown name (exit 2).

The entry points are faked (eebench.registry.entry_points) over fresh copies of the three
registries, so nothing is installed and no other test sees them."""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint

import pytest

from eebench import registry
from eebench.methods.base import METHODS
from eebench.models.backbones import BACKBONES
from eebench.rules.catalog import RULES
from tests import tiny
from tests.cli import invoke
from tests.hostile.helpers import snapshot


@pytest.fixture
def plugins(monkeypatch, tmp_path):
    """`plugins(group, name, value, ...)` installs fake entry points (group, name, value); the
    modules they name may be written to `tmp_path` (on sys.path). The registries are copies."""
    for reg in (METHODS, RULES, BACKBONES):
        for attr in ("_items", "_aliases", "_sources"):
            monkeypatch.setattr(reg, attr, dict(getattr(reg, attr)))
        monkeypatch.setattr(reg, "_plugins_loaded", False)
    monkeypatch.setattr(registry, "_WARNED", set())
    monkeypatch.syspath_prepend(str(tmp_path))

    def install(*eps: tuple[str, str, str]) -> None:
        found = [EntryPoint(name, value, group) for group, name, value in eps]
        monkeypatch.setattr(registry, "entry_points",
                            lambda group: [e for e in found if e.group == group])

    return install


def _lists_builtins(command: str, *warnings: str) -> list[dict]:
    """`eebench COMMAND --json`: exit 0, eebench's own entries, and exactly `warnings` (each a
    prefix of one line) on stderr."""
    result = invoke(command, "--json")
    said = f"exit {result.exit_code}\n{result.stderr}\n{result.exception!r}"
    assert result.exit_code == 0 and result.exception is None, said
    lines = result.stderr.splitlines()
    assert len(lines) == len(warnings), said
    for line, warning in zip(lines, warnings, strict=True):
        assert line.startswith(warning), said
    return json.loads(result.stdout)


def _refused_run(tmp_path, *args: str, warning: str, needle: str) -> None:
    """`eebench run ARGS --dry-run`: exit 2, the plugin's warning line, then the one error."""
    backbone = tiny.save_tiny_backbone(tmp_path / "tiny", num_layers=2)
    out = tmp_path / "runs"
    before = snapshot(out)
    result = invoke("run", "--task", "rte", "--model", backbone, "--out", out, *args,
                    "--dry-run")
    said = f"exit {result.exit_code}\n{result.stderr}\n{result.exception!r}"
    assert result.exit_code == 2 and "Traceback" not in result.output, said
    lines = result.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith(warning), said
    assert lines[1].startswith("error: ") and needle in lines[1], said
    assert snapshot(out) == before


def test_a_method_entry_naming_a_function_or_a_class_that_is_no_method_is_skipped(plugins):
    plugins(("eebench.methods", "cwd", "os:getcwd"), ("eebench.methods", "dict", "builtins:dict"))
    rows = _lists_builtins(
        "methods",
        "warning: plugin 'cwd' (eebench.methods): method 'cwd' is function ",
        "warning: plugin 'dict' (eebench.methods): method 'dict' is class builtins.dict, not a "
        "subclass of EarlyExitMethod; skipped")
    assert [r["name"] for r in rows] == METHODS.builtin()
    assert "cwd" not in METHODS and "dict" not in METHODS


def test_a_rule_entry_naming_a_number_is_skipped(plugins):
    plugins(("eebench.rules", "pi", "math:pi"))
    rows = _lists_builtins(
        "rules", "warning: plugin 'pi' (eebench.rules): rule 'pi' is a float, not a subclass of "
                 "RuleKind; skipped")
    assert [r["name"] for r in rows] == RULES.builtin()


def test_a_backbone_entry_naming_a_class_is_skipped(plugins):
    plugins(("eebench.backbones", "dict", "builtins:dict"))
    rows = _lists_builtins(
        "backbones", "warning: plugin 'dict' (eebench.backbones): backbone 'dict' is class "
                     "builtins.dict, not a Backbone; skipped")
    assert [r["name"] for r in rows] == BACKBONES.builtin()


def test_a_module_registering_a_function_as_a_method_is_skipped(plugins, tmp_path):
    (tmp_path / "deco_method.py").write_text(
        "from eebench.methods.base import register_method\n\n\n"
        "@register_method('deco')\ndef deco():\n    pass\n")
    plugins(("eebench.methods", "deco", "deco_method:deco"))
    rows = _lists_builtins("methods", "warning: plugin 'deco' (eebench.methods): method 'deco' "
                                      "is function deco_method.deco, not a subclass of "
                                      "EarlyExitMethod; skipped")
    assert [r["name"] for r in rows] == METHODS.builtin()


@pytest.mark.parametrize("code", ["0", "3", "'bye'"])
def test_a_plugin_that_exits_at_import_is_one_warning_and_the_listing_goes_on(plugins, tmp_path,
                                                                              code):
    (tmp_path / "exits_at_import.py").write_text(f"import sys\nsys.exit({code})\n")
    plugins(("eebench.methods", "exits", "exits_at_import:Method"))
    shown = code.strip("'")
    rows = _lists_builtins("methods", "warning: plugin 'exits' (eebench.methods): cannot load "
                                      f"exits_at_import:Method: SystemExit: {shown}")
    assert [r["name"] for r in rows] == METHODS.builtin()


def test_run_naming_a_skipped_method_is_an_unknown_method(plugins, tmp_path):
    plugins(("eebench.methods", "cwd", "os:getcwd"))
    _refused_run(tmp_path, "--method", "cwd",
                 warning="warning: plugin 'cwd' (eebench.methods): method 'cwd' is function ",
                 needle="unknown method 'cwd'")


def test_run_naming_a_skipped_rule_is_an_unknown_rule(plugins, tmp_path):
    plugins(("eebench.rules", "pi", "math:pi"))
    _refused_run(tmp_path, "--method", "pabee", "--rule", "pi",
                 warning="warning: plugin 'pi' (eebench.rules): rule 'pi' is a float",
                 needle="unknown rule 'pi'")


def test_run_naming_a_plugin_that_exits_at_import_is_an_unknown_method(plugins, tmp_path):
    (tmp_path / "exits_at_import.py").write_text("import sys\nsys.exit(0)\n")
    plugins(("eebench.methods", "exits", "exits_at_import:Method"))
    _refused_run(tmp_path, "--method", "exits",
                 warning="warning: plugin 'exits' (eebench.methods): cannot load "
                         "exits_at_import:Method: SystemExit: 0",
                 needle="unknown method 'exits'")

