"""Parameters that only some notebooks read (the eval suite's, the ablations', the report's) are refused by the
others before anything runs, naming where they came from; a saved run's params.yaml, which holds every key, still
resumes."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

from searchrl.config import NOTEBOOKS, ConfigError, RunConfig, load_params_file, notebook_keys
from searchrl.config.evaluation import ABLATION_NOTEBOOKS, EVAL_SUITE_NOTEBOOKS, NOTEBOOKS_OF, REPORT_NOTEBOOKS
from searchrl.experiments.runner_plan import plan_run
from searchrl.runs.folder import create_run_dir
from searchrl.runs.provenance import write_provenance

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "notebooks"


def _imports(notebook: Path) -> set[str]:
    """The `from X import Y` names of a notebook's code cells, as 'X.Y'."""
    names = set()
    for cell in nbformat.read(str(notebook), as_version=4).cells:
        if cell.cell_type == "code":
            for node in ast.walk(ast.parse(cell.source)):
                if isinstance(node, ast.ImportFrom):
                    names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_every_notebook_is_classified_by_what_it_runs() -> None:
    assert sorted(NOTEBOOKS) == sorted(p.stem for p in NB.glob("*.ipynb"))
    runs = {p.stem: _imports(p) for p in NB.glob("*.ipynb")}
    assert sorted(n for n, names in runs.items() if "searchrl.experiments.ablation.Ablation" in names) == \
        sorted(ABLATION_NOTEBOOKS)
    assert [n for n, names in runs.items() if "searchrl.experiments.eval_suite.EvalSuite" in names] == \
        list(EVAL_SUITE_NOTEBOOKS)
    assert [n for n, names in runs.items() if "searchrl.experiments.ablation.report" in names] == \
        list(REPORT_NOTEBOOKS)


@pytest.mark.parametrize(("notebook", "key", "value", "readers"), [
    ("quickstart", "arms", "{a: {top_k: 2}}", "the ablation notebooks"),
    ("quickstart", "benchmarks", "[synthetic]", "the eval suite"),
    ("eval_benchmarks", "claims", "{}", "the ablation notebooks"),
    ("ablate_reward", "report_runs", "[x]", "the report notebook"),
    ("report", "eval_models", "[policy]", "the eval suite"),
])
def test_a_key_of_another_notebook_is_refused_naming_where_it_came_from(
        tmp_path: Path, notebook: str, key: str, value: str, readers: str) -> None:
    path = tmp_path / "params" / notebook / "mine.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(f"{key}: {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        plan_run(NB / f"{notebook}.ipynb", [path])
    message = str(error.value)
    assert f"{path}: notebook {notebook!r} takes no parameter {key!r}" in message
    assert f"it is read by {readers} only" in message


def test_a_refused_key_hints_at_the_notebooks_own_key() -> None:
    with pytest.raises(ConfigError) as error:
        plan_run(NB / "quickstart.ipynb", overrides={"seeds": [0, 1]})
    message = str(error.value)
    assert message.splitlines()[1].strip() == (
        "-p: notebook 'quickstart' takes no parameter 'seeds' (did you mean 'seed'?); it is read by the ablation "
        "notebooks only: " + ", ".join(ABLATION_NOTEBOOKS))
    assert message.splitlines()[-1] == "(list them with: python -m searchrl.config)"


def test_the_same_keys_are_accepted_by_the_notebooks_that_read_them() -> None:
    plan = plan_run(NB / "ablate_reward.ipynb", [ROOT / "params/ablate_reward/smoke.yaml"],
                    {"seeds": [0, 1], "cold_start_arm": True})
    assert plan.config.seeds == [0, 1] and plan.config.cold_start_arm
    plan = plan_run(NB / "eval_benchmarks.ipynb", [ROOT / "params/eval_benchmarks/smoke.yaml"],
                    {"benchmarks": ["synthetic"], "judge": "none"})
    assert plan.config.benchmarks == ["synthetic"]
    plan = plan_run(NB / "report.ipynb", overrides={"report_runs": ["outputs/ablate_reward/x"]})
    assert plan.config.report_runs == ["outputs/ablate_reward/x"]


def test_a_parameters_cell_that_sets_another_notebooks_key_is_refused(tmp_path: Path) -> None:
    nb = nbformat.read(str(NB / "quickstart.ipynb"), as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    cell.source += "\nseeds = [0, 1]\n"
    path = tmp_path / "quickstart.ipynb"
    nbformat.write(nb, str(path))
    with pytest.raises(ConfigError, match=r"parameters cell of .*quickstart.ipynb: notebook 'quickstart' takes no "
                                          r"parameter 'seeds'"):
        plan_run(path)


def test_a_notebook_the_project_does_not_have_takes_every_key(tmp_path: Path) -> None:
    nb = nbformat.read(str(NB / "quickstart.ipynb"), as_version=4)
    path = tmp_path / "my_copy.ipynb"
    nbformat.write(nb, str(path))
    assert plan_run(path, overrides={"seeds": [0, 1], "report_runs": ["x"]}).config.seeds == [0, 1]
    assert notebook_keys("my_copy") == RunConfig.field_names()


def test_from_globals_refuses_another_notebooks_key_when_told_the_notebook() -> None:
    assert RunConfig.from_globals({"seed": 1, "arms": {"a": {"top_k": 2}}}).arms == {"a": {"top_k": 2}}
    with pytest.raises(ConfigError, match="notebook parameters: notebook 'quickstart' takes no parameter 'arms'"):
        RunConfig.from_globals({"seed": 1, "arms": {"a": {"top_k": 2}}}, notebook="quickstart")
    cfg = RunConfig.from_globals({"arms": {"a": {"top_k": 2}}}, notebook="ablate_topk")
    assert cfg.arms == {"a": {"top_k": 2}}


def _saved_run(tmp_path: Path, notebook: str, cfg: RunConfig) -> Path:
    run_dir = create_run_dir(notebook, "", tmp_path / "out")
    write_provenance(run_dir, cfg, notebook=NB / f"{notebook}.ipynb")
    return run_dir


def test_a_saved_ablation_run_resumes(tmp_path: Path) -> None:
    first = plan_run(NB / "ablate_reward.ipynb", [ROOT / "params/ablate_reward/smoke.yaml"], {"cold_start_arm": True},
                     output_root=tmp_path / "out")
    run_dir = _saved_run(tmp_path, "ablate_reward", first.config)
    plan = plan_run(None, resume_dir=run_dir)
    assert plan.name == "ablate_reward" and plan.config.resume
    assert plan.config.replace(resume=False) == first.config


def test_a_saved_run_of_another_notebook_resumes_though_its_params_yaml_holds_every_key(tmp_path: Path) -> None:
    first = plan_run(NB / "quickstart.ipynb", [ROOT / "params/quickstart/smoke.yaml"], output_root=tmp_path / "out")
    run_dir = _saved_run(tmp_path, "quickstart", first.config)
    saved = (run_dir / "params.yaml").read_text(encoding="utf-8")
    assert "\narms: {}\n" in saved and "\nbenchmarks: []\n" in saved and "\nreport_runs: []\n" in saved
    assert plan_run(None, resume_dir=run_dir).config.replace(resume=False) == first.config
    # a key set to something other than its default there still counts as set, and is refused
    (run_dir / "params.yaml").write_text(saved.replace("\nseeds: []\n", "\nseeds: [1, 2]\n"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"params.yaml: notebook 'quickstart' takes no parameter 'seeds'"):
        plan_run(None, resume_dir=run_dir)


def test_each_notebooks_own_params_set_only_keys_it_takes() -> None:
    for path in sorted(ROOT.glob("params/*/*.yaml")):
        notebook = path.parent.name
        values, _ = load_params_file(path)
        assert set(values) <= set(notebook_keys(notebook)), (path, set(values) - set(notebook_keys(notebook)))
    assert {name for section in NOTEBOOKS_OF for name in section.__dataclass_fields__} <= set(RunConfig.field_names())


def test_a_typo_is_matched_among_the_keys_the_notebook_takes() -> None:
    with pytest.raises(ConfigError) as error:
        plan_run(NB / "ablate_reward.ipynb", overrides={"benchmark": ["nq"], "report_run": ["x"]})
    lines = [line.strip() for line in str(error.value).splitlines()]
    assert lines[1] == "-p: unknown parameter 'benchmark'"  # not 'benchmarks', which ablate_reward refuses
    assert lines[2].startswith("-p: unknown parameter 'report_run'") and "report_runs" not in lines[2]
    with pytest.raises(ConfigError, match=r"unknown parameter 'benchmark' \(did you mean 'benchmarks'\?\)"):
        plan_run(NB / "eval_benchmarks.ipynb", overrides={"benchmark": ["nq"]})
