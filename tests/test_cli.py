"""The `searchrl` command dispatches each subcommand to the same function as `python -m searchrl.<name>`."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import tomllib

from searchrl.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[1]


def test_the_project_installs_the_searchrl_command():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"searchrl": "searchrl.cli:main"}


def test_help_lists_every_subcommand(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {name}" in out for name in COMMANDS)


def test_an_unknown_subcommand_fails_with_the_nearest_name(capsys):
    assert main(["trian"]) == 2
    assert "did you mean 'train'?" in capsys.readouterr().err


@pytest.mark.parametrize("name", [n for n, (module, _) in COMMANDS.items() if module])
def test_each_subcommand_runs_its_module_main(name, monkeypatch):
    module = importlib.import_module(COMMANDS[name][0])
    seen = []
    monkeypatch.setattr(module, "main", lambda argv: seen.append(list(argv)) or 3)
    assert main([name, "--flag", "value"]) == 3
    assert seen == [["--flag", "value"]]


def test_a_subcommand_help_is_its_module_help(capsys):
    with pytest.raises(SystemExit) as done:
        main(["score", "--help"])
    assert done.value.code == 0
    assert "usage:" in capsys.readouterr().out


def test_params_prints_the_parameter_table(capsys):
    assert main(["params"]) == 0
    out = capsys.readouterr().out
    assert "learning_rate" in out and "== protocol ==" in out
