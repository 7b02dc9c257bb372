"""The command line as a whole: --help answers without importing torch, every option says its default, and the
floors stand in order (the runtime imports nothing from the tools, nothing imports runner.py)."""

import argparse
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kernels
from kernels.tools import commands

ROOT = Path(__file__).resolve().parent.parent
PARSERS = {
    "": commands.ladder_parser,
    **{name: command.parser for name, command in commands.COMMANDS.items()},
    "run_once": lambda: commands.run_once_parser("python -m kernels.tools.run_once"),
}


def imported_modules(stderr: str) -> set[str]:
    """The modules `python -X importtime` reports, by name."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("command", [name for name in PARSERS if name != "run_once"])
def test_help_is_complete_without_importing_torch(command, monkeypatch):
    """`python runner.py [command] --help`, a process of its own: the whole help, and torch never imported."""
    env = {**os.environ, "COLUMNS": "100"}
    argv = [sys.executable, "-X", "importtime", str(ROOT / "runner.py"), *([command] if command else []), "--help"]
    result = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    monkeypatch.setenv("COLUMNS", "100")
    assert result.stdout == PARSERS[command]().format_help()
    modules = imported_modules(result.stderr)
    assert "kernels.tools.commands" in modules  # the report is read right
    assert "torch" not in modules and "kernels.build" not in modules


@pytest.mark.parametrize("command", list(PARSERS))
def test_every_option_has_help_and_shows_its_default(command):
    """An option with a default value shows it; a positional that may be left out says what that means."""
    parser = PARSERS[command]()
    formatter = parser._get_formatter()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help, f"{command} {name} has no help"
        text = formatter._expand_help(action)
        valued = action.default is not None and action.default is not False
        optional_positional = not action.option_strings and action.nargs in ("*", "?")
        if valued or optional_positional:
            assert "default" in text, f"{command} {name}: {text!r} shows no default"


def imports_of(path: Path) -> set[str]:
    """Every module a Python file imports, at any depth of its code."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_the_runtime_imports_nothing_from_the_tools():
    runtime = sorted((ROOT / "kernels").glob("*.py"))
    assert len(runtime) > 3
    for path in runtime:
        assert not {name for name in imports_of(path) if name.startswith("kernels.tools")}, path.name


def test_nothing_imports_runner_py():
    """runner.py only starts the commands: what it would share lives in kernels/tools."""
    files = [
        p
        for p in ROOT.rglob("*.py")
        if p.name != "runner.py" and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)
    ]
    assert len(files) > 20
    for path in files:
        assert not {"runner"} & imports_of(path), path.relative_to(ROOT)


def test_kernels_chapters_stays_the_function_when_its_module_is_imported():
    """The package imports its exports lazily; binding the submodule kernels.chapters (as the import system does
    when it first loads it) leaves ``from kernels import chapters`` the function, as the eager package had it."""
    kernels.chapters = sys.modules["kernels.chapters"]
    from kernels import chapters

    assert callable(chapters) and chapters is sys.modules["kernels.chapters"].chapters
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        kernels.nothing  # noqa: B018
