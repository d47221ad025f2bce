"""Checking a notebook run before anything heavy starts, and deciding it (`plan_run` -> `RunPlan`).

Everything that can be checked is checked here: the notebook exists and has a cell tagged ``parameters`` holding
only ``name = literal`` lines whose names are RunConfig fields; each parameter file is a mapping meant for this
notebook (its ``notebook:`` key, or its folder ``params/<notebook>/``); every key and value fits
:class:`~searchrl.config.RunConfig`, and is one this notebook takes (the eval suite's, the ablations' and the report's
keys are theirs only: ``searchrl.config.notebooks``). A resumed run's notebook and saved parameters are read from its
folder.

Precedence, lowest first: RunConfig defaults, the notebook's parameters cell, ``-f`` files in order, ``-p`` values,
``--run-name`` / ``--output-root``. Papermill receives only the values that differ from what the notebook would
use by itself, so the injected cell shows exactly what this run changed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from searchrl.config import ConfigError, RunConfig, drop_unread_defaults, load_params_file, parse_scalar
from searchrl.core.files import read_json
from searchrl.runs.folder import resolve_output_root
from searchrl.runs.provenance import project_root

__all__ = ["NotebookError", "RunPlan", "parameters_cell_values", "params_file_notebook", "plan_run"]


class NotebookError(ValueError):
    """The notebook cannot be run: missing, unreadable, or without a valid ``parameters`` cell."""


def _read_notebook(path: Path) -> nbformat.NotebookNode:
    if not path.is_file():
        hint = ""
        if path.parent.is_dir():
            found = sorted(p.name for p in path.parent.glob("*.ipynb"))
            hint = f"; notebooks in {path.parent}: {', '.join(found)}" if found else ""
        raise NotebookError(f"notebook not found: {path}{hint}")
    if path.suffix != ".ipynb":
        raise NotebookError(f"{path} is not a notebook (.ipynb)")
    try:
        return nbformat.read(str(path), as_version=4)
    except (OSError, ValueError, nbformat.ValidationError) as err:  # unreadable, not JSON, not a notebook
        raise NotebookError(f"cannot read notebook {path}: {err}") from None


def parameters_cell_values(notebook: str | Path | nbformat.NotebookNode, label: str = "") -> dict[str, Any]:
    """The values assigned in the notebook's cell tagged ``parameters``, checked against RunConfig.

    The cell may hold only ``name = literal`` (or ``name: type = literal``) statements and comments, and every name
    must be a RunConfig field with a value of its type. Raises :class:`NotebookError` when there is no such cell or
    it holds anything else, and :class:`ConfigError` for unknown names or wrong types.
    """
    if isinstance(notebook, (str, Path)):
        label = label or str(notebook)
        notebook = _read_notebook(Path(notebook))
    label = label or "notebook"
    cells = [c for c in notebook.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if not cells:
        raise NotebookError(
            f"{label} has no cell tagged 'parameters'; tag the cell holding the parameters "
            "(Jupyter: View > Cell Toolbar > Tags, add 'parameters') so parameter files can override it"
        )
    if len(cells) > 1:
        raise NotebookError(f"{label} has {len(cells)} cells tagged 'parameters'; keep exactly one")
    source = cells[0].source
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise NotebookError(f"{label}: parameters cell is not valid Python: {err}") from None
    values: dict[str, Any] = {}
    for node in tree.body:
        target = value = None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # a bare string used as a comment
        if target is None:
            raise NotebookError(
                f"{label}: parameters cell line {node.lineno} is not 'name = value'; "
                "keep only flat parameter assignments there and move code to the next cell"
            )
        try:
            values[target] = ast.literal_eval(value)
        except ValueError:
            raise NotebookError(
                f"{label}: parameters cell line {node.lineno}: the value of {target!r} must be a literal "
                "(number, string, bool or list), not an expression"
            ) from None
    # Type and key checks, naming the cell; the notebook's own values must form a valid config too.
    RunConfig.merge((f"parameters cell of {label}", values))
    return values


def params_file_notebook(path: str | Path, declared: str | None) -> str | None:
    """The notebook a parameter file is for: its ``notebook:`` key, else its folder in ``params/<notebook>/``."""
    if declared:
        return Path(declared).stem
    path = Path(path).resolve()
    if path.parent.parent.name == "params":
        return path.parent.name
    return None


def _parse_overrides(pairs: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """``-p key value`` pairs to typed values: YAML scalars, except that text fields keep the text as written."""
    out: dict[str, Any] = {}
    for key, raw in pairs:
        # "-p run_name 2024" means the name "2024", not the number; unknown keys are reported by RunConfig.merge.
        if key in RunConfig.field_names() and RunConfig.field_type(key) is str:
            out[key] = raw
        else:
            out[key] = parse_scalar(raw)
    return out


@dataclass
class RunPlan:
    """Everything decided before execution: which notebook, with which parameters, into which folder."""

    notebook: Path
    name: str
    config: RunConfig
    injected: dict[str, Any]
    output_root: Path
    cwd: Path
    params_files: list[Path] = field(default_factory=list)
    resume_dir: Path | None = None

    def describe(self) -> str:
        """A human-readable summary, printed by ``--dry-run``."""
        lines = [
            f"notebook:     {self.notebook}",
            f"params files: {', '.join(map(str, self.params_files)) or '(none)'}",
            f"run folder:   {self.resume_dir or self.output_root / self.name / '<new run id>'}",
            f"injected:     {self.injected or '(nothing: notebook defaults)'}",
            "resolved parameters:",
            *("  " + line for line in self.config.to_yaml().splitlines()),
        ]
        return "\n".join(lines)


def plan_run(
    notebook: str | Path | None,
    params_files: Sequence[str | Path] = (),
    overrides: Mapping[str, Any] | None = None,
    *,
    run_name: str | None = None,
    output_root: str | Path | None = None,
    resume_dir: str | Path | None = None,
) -> RunPlan:
    """Check the notebook and parameters and decide the run, without creating or executing anything.

    ``overrides`` holds typed values (the CLI parses ``-p`` strings first). Raises :class:`NotebookError` or
    :class:`ConfigError` with a message that says what to fix.
    """
    resume = Path(resume_dir) if resume_dir else None
    if resume is not None:
        notebook = _notebook_of_run(resume, notebook)
    if notebook is None:
        raise NotebookError("name the notebook to run (or --resume RUN_DIR)")
    nb_path = Path(notebook).resolve()
    nb = _read_notebook(nb_path)
    name = nb_path.stem
    cell = parameters_cell_values(nb, label=str(notebook))

    sources: list[tuple[str, Mapping[str, Any]]] = [(f"parameters cell of {notebook}", cell)]
    if resume is not None:
        saved, _ = load_params_file(resume / "params.yaml")
        # The saved file holds every key: one this notebook does not read counts as set only off its default.
        sources.append((str(resume / "params.yaml"), drop_unread_defaults(name, saved)))
    for path in params_files:
        values, declared = load_params_file(path)
        meant_for = params_file_notebook(path, declared)
        if meant_for is not None and meant_for != name:
            raise ConfigError(
                f"{path} is a params file for another notebook ({meant_for!r}), not {name!r}; "
                f"use a file from params/{name}/"
            )
        sources.append((str(path), values))
    if overrides:
        sources.append(("-p", dict(overrides)))
    flags = {}
    if run_name is not None:
        flags["run_name"] = run_name
    if output_root is not None:
        flags["output_root"] = str(output_root)
    if resume is not None:
        flags["resume"] = True
    if flags:
        sources.append(("command-line flags", flags))
    cfg = RunConfig.merge(*sources, notebook=name)  # refuses the keys only other notebooks read

    # Inject only what differs from what the notebook would use on its own.
    baseline = {**RunConfig.defaults(), **RunConfig.merge(("cell", cell)).to_dict()}
    injected = {k: v for k, v in cfg.to_dict().items() if baseline[k] != v}
    root = project_root(nb_path.parent)
    out_root = resolve_output_root(cfg.output_root) if root is None else _anchor(cfg.output_root, root)
    return RunPlan(
        notebook=nb_path,
        name=name,
        config=cfg,
        injected=injected,
        output_root=out_root,
        cwd=root or nb_path.parent,
        params_files=[Path(p) for p in params_files],
        resume_dir=resume,
    )


def _anchor(path: str | Path, root: Path) -> Path:
    path = Path(path).expanduser()
    return path if path.is_absolute() else root / path


def _notebook_of_run(run_dir: Path, notebook: str | Path | None) -> Path:
    if not (run_dir / "params.yaml").is_file():
        raise NotebookError(f"cannot resume {run_dir}: it is not a run folder (no params.yaml)")
    prov = read_json(run_dir / "provenance.json") or {}
    recorded = prov.get("notebook_path") or prov.get("notebook")
    chosen = Path(notebook) if notebook else None
    if chosen is None and recorded:
        chosen = Path(recorded)
        if not chosen.is_absolute():  # recorded relative to the project root
            chosen = (project_root(run_dir) or Path.cwd()) / chosen
    if chosen is None:
        raise NotebookError(f"cannot tell which notebook made {run_dir}; name it: python -m searchrl.runner NOTEBOOK ...")
    if chosen.stem != run_dir.parent.name:
        raise NotebookError(f"{run_dir} is a run of {run_dir.parent.name!r}, not of {chosen.stem!r}")
    return chosen
