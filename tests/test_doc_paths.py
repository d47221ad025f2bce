"""Every project file the README (and outputs/README.md) names exists, so the map from concepts to files cannot
drift from the tree unnoticed. Run-folder files (eval/..., sft/..., figures/...) and outputs/ are not in the tree."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# a path with a folder and a file kind, in backticks: `rewards/answer.py`, `params/quickstart/cpu.yaml`
NAMED = re.compile(r"`([A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)+\.(?:py|yaml|ipynb|md|csv))`")
RUN_FOLDER = ("outputs", "eval", "sft", "figures", "trajectories", "checkpoints", "arms", "shared", "..")


def named_paths(text: str) -> set[str]:
    return {p for p in NAMED.findall(text) if p.split("/")[0] not in RUN_FOLDER}


def test_every_file_the_readmes_name_exists():
    text = (ROOT / "README.md").read_text(encoding="utf-8") + (ROOT / "outputs" / "README.md").read_text(
        encoding="utf-8")
    named = named_paths(text)
    assert len(named) > 50  # the pattern still finds the map
    # package paths are written from lib/searchrl (`rewards/answer.py`) or lib (`searchrl/analysis/seeds.py`)
    missing = sorted(p for p in named if not any((base / p).exists() for base in
                                                  (ROOT, ROOT / "lib", ROOT / "lib" / "searchrl")))
    assert missing == [], f"the README names files that do not exist: {missing}"


def test_the_pattern_skips_run_folder_files_and_finds_project_ones():
    assert named_paths("`eval/type_table.json` `sft/budget.json` `rewards/answer.py` `params/a/b.yaml`") == {
        "rewards/answer.py", "params/a/b.yaml"}
