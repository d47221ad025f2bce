"""Every project file the guide names exists, and every link between its pages resolves, so the map from concepts
to files cannot drift from the tree unnoticed. The guide is the README, outputs/README.md, the pages under docs/
and the lab notebook's index (docs/lab/README.md); the dated log itself (docs/lab/LOG.md) names files as they were
then and is not checked. Run-folder files (eval/..., sft/..., figures/...) and outputs/ are not in the tree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# a path with a folder and a file kind, in backticks: `rewards/answer.py`, `params/quickstart/cpu.yaml`
NAMED = re.compile(r"`([A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-]+)+\.(?:py|yaml|ipynb|md|csv))`")
RUN_FOLDER = ("outputs", "eval", "sft", "figures", "trajectories", "checkpoints", "arms", "shared", "..")
# a Markdown link to a file of the project: [text](docs/levers.md), [text](findings.md#the-cpu-demo)
LINK = re.compile(r"\]\(([^()\s]*)\)")
GUIDE = [ROOT / "README.md", ROOT / "outputs" / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         ROOT / "docs" / "lab" / "README.md"]


def named_paths(text: str) -> set[str]:
    return {p for p in NAMED.findall(text) if p.split("/")[0] not in RUN_FOLDER}


def missing_paths(page: Path) -> list[str]:
    # package paths are written from lib/searchrl (`rewards/answer.py`) or lib (`searchrl/analysis/seeds.py`); a page under
    # docs/ may also name a file beside it (`evidence/gain_vs_rollouts.csv` in docs/lab/README.md)
    bases = (ROOT, ROOT / "lib", ROOT / "lib" / "searchrl", page.parent)
    return sorted(p for p in named_paths(page.read_text(encoding="utf-8"))
                  if not any((base / p).exists() for base in bases))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {slug(m) for m in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)}


def broken_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    return broken


def test_the_guide_has_its_pages():
    names = {p.relative_to(ROOT).as_posix() for p in GUIDE}
    assert {"README.md", "outputs/README.md", "docs/README.md", "docs/lab/README.md", "docs/findings.md",
            "docs/levers.md"} <= names
    assert all(p.is_file() for p in GUIDE)


def test_the_pattern_still_finds_the_map():
    assert len(named_paths((ROOT / "README.md").read_text(encoding="utf-8"))) > 40  # the mechanism -> file table
    assert len(set().union(*(named_paths(p.read_text(encoding="utf-8")) for p in GUIDE))) > 80


@pytest.mark.parametrize("page", GUIDE, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_file_the_page_names_exists(page):
    assert missing_paths(page) == [], f"{page.relative_to(ROOT)} names files that do not exist"


@pytest.mark.parametrize("page", GUIDE, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_of_the_page_resolves(page):
    assert broken_links(page) == [], f"{page.relative_to(ROOT)} links to files or headings that do not exist"


def test_every_docs_page_is_in_the_docs_index():
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    unlisted = [p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md" and f"]({p.name})" not in index]
    assert unlisted == []


def test_the_pattern_skips_run_folder_files_and_finds_project_ones():
    assert named_paths("`eval/type_table.json` `sft/budget.json` `rewards/answer.py` `params/a/b.yaml`") == {
        "rewards/answer.py", "params/a/b.yaml"}


def test_links_and_anchors_are_read_as_github_does(tmp_path):
    (tmp_path / "a.md").write_text("# The CPU demo (`make demo`)\n\n[b](b.md#two-words) [web](https://x.org/y)\n"
                                   "[self](#the-cpu-demo-make-demo) [gone](c.md) [bad](#nowhere)\n"
                                   "```\n[in code](d.md)\n```\n")
    (tmp_path / "b.md").write_text("## Two words\n")
    assert broken_links(tmp_path / "a.md") == ["c.md", "#nowhere"]
