"""Every parameter file under params/ loads, validates against RunConfig, belongs to an existing notebook, and
starts with a comment giving the command that runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from searchrl.config import RunConfig, load_params_file
from searchrl.runner import parameters_cell_values, plan_run

ROOT = Path(__file__).resolve().parents[1]
PARAM_FILES = sorted((ROOT / "params").glob("*/*.yaml"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_params_and_notebooks():
    assert PARAM_FILES and NOTEBOOKS


@pytest.mark.parametrize("path", PARAM_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_params_file_validates_and_names_its_command(path):
    first = path.read_text().splitlines()[0]
    assert first.startswith("#") and "searchrl.runner" in first and f"notebooks/{path.parent.name}.ipynb" in first
    assert f"-f params/{path.parent.name}/{path.name}" in first
    _, notebook = load_params_file(path)
    assert notebook in (None, path.parent.name)
    RunConfig.from_params(None, path)
    plan = plan_run(ROOT / "notebooks" / f"{path.parent.name}.ipynb", [path])
    assert plan.name == path.parent.name


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_thin_and_has_all_three_profiles(notebook):
    import nbformat

    nb = nbformat.read(notebook, as_version=4)
    parameters_cell_values(notebook)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None, "commit notebooks without outputs"
            assert "def " not in cell.source and "class " not in cell.source, "notebooks call into searchrl"
    for profile in ("smoke", "cpu", "gpu"):
        assert (ROOT / "params" / notebook.stem / f"{profile}.yaml").exists()
