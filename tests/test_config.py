"""The ``LAZYFUSE_*`` knobs: each declared once in lazyfuse/config.py, read only through it, with one
parser and one clear error per knob, and the README's table the one config prints."""
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import lazyfuse as lf
from lazyfuse import config
from lazyfuse.__main__ import main as cli
from lazyfuse.codegen import autotune

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lazyfuse"


def test_the_readme_table_is_the_one_config_prints(capsys):
    readme = (ROOT / "README.md").read_text()
    assert config.markdown_table() in readme
    assert cli(["config", "--markdown"]) == 0
    assert capsys.readouterr().out.strip() == config.markdown_table()


def test_every_knob_named_anywhere_is_declared_once():
    named = set()
    for folder in ("lazyfuse", "tests", "bench", "examples"):
        for path in (ROOT / folder).rglob("*.py"):
            named |= set(re.findall(r"\bLAZYFUSE_[A-Z_]*[A-Z]\b", path.read_text()))
    named |= set(re.findall(r"\bLAZYFUSE_[A-Z_]*[A-Z]\b", (ROOT / "README.md").read_text()))
    assert named, "the scan found no knob at all"
    assert named == set(config.KNOBS), (named ^ set(config.KNOBS))
    assert all(k.name == name for name, k in config.KNOBS.items())


def test_no_module_but_config_reads_the_environment():
    readers = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "config.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv") and \
                    isinstance(node.value, ast.Name) and node.value.id == "os":
                readers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert readers == []


@pytest.mark.parametrize("raw, expect", [("1", True), ("on", True), ("TRUE", True), ("yes", True), ("0", False),
                                         ("off", False), ("false", False), ("", False)])
def test_boolean_knobs_parse_their_spellings(raw, expect, monkeypatch):
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE", raw)
    assert autotune.enabled() is expect


def test_unset_or_empty_knobs_take_their_defaults(monkeypatch):
    monkeypatch.delenv("LAZYFUSE_AUTOTUNE", raising=False)
    assert config.AUTOTUNE.get() is True
    monkeypatch.setenv("LAZYFUSE_MAX_PENDING", " ")
    assert config.MAX_PENDING.get() == 4096
    monkeypatch.setenv("LAZYFUSE_MAX_PENDING", "77")
    assert config.MAX_PENDING.get() == 77


@pytest.mark.parametrize("knob, bad", [(config.AUTOTUNE, "maybe"), (config.MAX_PENDING, "lots"),
                                       (config.PLAN_CACHE, "-3"), (config.INLINE_MATMUL, "1e6")])
def test_a_bad_value_is_a_config_error_naming_the_knob_and_what_it_accepts(knob, bad, monkeypatch):
    monkeypatch.setenv(knob.name, bad)
    with pytest.raises(lf.ConfigError) as info:
        knob.get()
    message = str(info.value)
    assert knob.name in message and repr(bad) in message and knob.allowed in message
    assert isinstance(info.value, lf.LazyfuseError) and isinstance(info.value, ValueError)


def test_a_bad_import_time_knob_stops_the_import_with_that_error():
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LAZYFUSE_PLAN_CACHE": "many"}
    out = subprocess.run([sys.executable, "-c", "import lazyfuse"], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode != 0
    assert "ConfigError: LAZYFUSE_PLAN_CACHE='many' is not a whole number >= 0" in out.stderr


def test_the_cli_prints_each_knob_with_its_current_value(capsys, monkeypatch):
    monkeypatch.setenv("LAZYFUSE_PARALLEL_THRESHOLD", "12345")
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE", "perhaps")
    assert cli(["config"]) == 0
    out = capsys.readouterr().out
    for knob in config.KNOBS.values():
        assert knob.name in out and knob.help in out
    assert "LAZYFUSE_PARALLEL_THRESHOLD = 12345   (from LAZYFUSE_PARALLEL_THRESHOLD='12345'" in out
    assert "LAZYFUSE_AUTOTUNE = error: LAZYFUSE_AUTOTUNE='perhaps' is not a boolean" in out
