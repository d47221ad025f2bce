"""Papermill smoke run of every notebook with its smoke.yaml, through the runner, checking the run folder."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml

from searchrl.experiments.runner_exec import run_notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# Cells whose value is a figure from searchrl.analysis.plots (through Experiment.curves / Experiment.bars).
PLOT_CALLS = ("exp.curves(", "exp.bars(", "exp.type_table(")
VIEWER_CALL = "exp.show_trajectories("
RETRIEVED_MARK = 'class="retrieved"'  # how searchrl.evaluation.evaluate.render_trajectory marks a retrieved span


def _errors(executed: Path) -> list:
    cells = [c for c in nbformat.read(str(executed), as_version=4).cells if c.cell_type == "code"]
    return [(c.source[:60], o.get("ename"), o.get("evalue")) for c in cells for o in c.outputs
            if o.output_type == "error"]


def _check_outputs(executed: Path) -> None:
    """What a reader of the executed quickstart sees: no errors anywhere, an image in every plot cell, a marked
    retrieved span in the trajectory viewer."""
    cells = [c for c in nbformat.read(str(executed), as_version=4).cells if c.cell_type == "code"]
    errors = _errors(executed)
    assert not errors, f"error outputs in {executed}: {errors}"
    plot_cells = [c for c in cells if any(call in c.source for call in PLOT_CALLS)]
    assert plot_cells, f"{executed.name} has no plot cell calling any of {PLOT_CALLS}"
    for cell in plot_cells:
        kinds = [sorted(o.get("data", {})) for o in cell.outputs]
        assert any("image/png" in k for k in kinds), f"plot cell {cell.source!r} shows no image, only {kinds}"
    # The smoke profiles' model searches, so the trajectory viewer has something to show: a marked retrieved span.
    viewers = [c for c in cells if VIEWER_CALL in c.source]
    assert viewers, f"{executed.name} has no cell calling {VIEWER_CALL}"
    for cell in viewers:
        shown = "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)
        assert RETRIEVED_MARK in shown, f"the trajectory viewer marks no retrieved span: {shown[:500]!r}"


def _check_quickstart(run_dir: Path) -> None:
    history = pd.read_parquet(run_dir / "metrics.parquet")
    assert len(history) >= 1 and "reward" in history.columns
    evals = sorted(p.stem for p in (run_dir / "eval").glob("*.json"))
    assert {"untrained", "after_cold_start", "after_RL"} <= set(evals)
    for stage in ("untrained", "after_RL"):
        summary = json.loads((run_dir / "eval" / f"{stage}.json").read_text())
        assert "f1" in json.dumps(summary)
        assert summary["protocol"]["protocol"] and summary["protocol"]["n_questions"] >= 1  # how it was measured
    assert "protocol (" in (run_dir / "eval" / "table.md").read_text()  # the stage table's protocol block
    assert list((run_dir / "trajectories").glob("*.jsonl"))
    # A completed run keeps its final policies and drops what only a resume needs (keep_resume_state: false).
    kept = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert kept == ["cold_start", "rl"] and (run_dir / "checkpoints" / "rl" / "config.json").is_file()  # no rl_start
    assert not list((run_dir / "checkpoints").glob("*/checkpoint-*"))
    assert (run_dir / "figures" / "training_curves.png").exists()
    assert any(c.startswith("search/reward_at_") for c in history.columns)  # what each search count earned
    assert (run_dir / "figures" / "search_payoff.png").exists()
    assert (run_dir / "figures" / "eval_bars.png").exists()
    rows = json.loads((run_dir / "eval" / "type_table.json").read_text())  # per type, cold start -> RL
    overall = next(r for r in rows if r["qtype"] == "all")
    assert overall["n"] == sum(r["n"] for r in rows[:rows.index(overall)])
    assert (run_dir / "figures" / "type_changes.png").exists()
    steps = sorted((run_dir / "trajectories" / "train").rglob("step-*.jsonl"))  # what RL sampled, step by step
    assert len(steps) == len(history.dropna(subset=["reward"]))
    assert {"completion", "reward", "advantage", "searches"} <= set(json.loads(steps[0].read_text().splitlines()[0]))
    shown = (run_dir / "figures" / f"training_rollouts_step{len(steps)}.html").read_text()
    assert "<b>Scored:</b> reward=" in shown
    [checks] = json.loads((run_dir / "eval" / "checks.json").read_text())  # did RL learn, this one seed
    assert checks["F1 gain"] in (True, False) and checks["ΔF1"] == overall["ΔF1"]
    _check_outputs(run_dir / "quickstart.ipynb")


def _check_eval_benchmarks(run_dir: Path) -> None:
    """Every method of the smoke profile scored on the synthetic world, with intervals; the papers' layouts rendered."""
    assert not _errors(run_dir / "eval_benchmarks.ipynb")
    results = pd.read_csv(run_dir / "results.csv")
    assert set(results["method"]) == {"policy", "naive", "rag"}
    assert set(results["dataset"]) == {"synthetic"}
    assert {"em", "f1", "cem", "searches"} <= set(results["metric"])
    assert (results["ci_low"] <= results["value"]).all() and (results["value"] <= results["ci_high"]).all()
    searches = results[results["metric"] == "searches"].set_index("method")["value"]
    assert searches["naive"] == 0 and searches["rag"] == 1  # rag retrieves once per question, naive never
    for method in ("policy", "naive", "rag"):
        saved = json.loads((run_dir / "eval" / "synthetic" / f"{method}.json").read_text())
        assert saved["protocol"]["questions"] and saved["protocol"]["decoding"] == "greedy"
        assert (run_dir / "trajectories" / "synthetic" / f"{method}.jsonl").exists()
    for layout in ("search_r1_table2", "r1_searcher_table2", "r1_searcher_pp_table1"):
        shown = (run_dir / "tables" / f"{layout}.md").read_text()
        assert "| paper |" in shown and "rows 'paper': the paper's own protocol" in shown  # the paper's own rows
    assert "protocols differ in: " in (run_dir / "tables" / "protocols.md").read_text()  # naive never retrieves
    assert (run_dir / "figures" / "benchmarks_em.png").exists()


def _check_ablation(run_dir: Path) -> None:
    """An ablation notebook: every arm of its smoke profile finished and evaluated, curves drawn as an image, the
    arm table has a row per arm and the verdict table one per claim."""
    executed = next(run_dir.glob("*.ipynb"))
    assert not _errors(executed)
    params = yaml.safe_load((run_dir / "params.yaml").read_text())
    arms, claims = list(params["arms"]), params.get("claims") or {}
    arms += ["cold_start"] if params.get("cold_start_arm") else []  # the arm that evaluates the cold start
    for arm in arms:
        assert (run_dir / "arms" / arm / "seed0" / "done.json").exists(), f"arm {arm} did not finish"
        assert (run_dir / "arms" / arm / "seed0" / "eval" / "after_RL.json").exists()
    assert (run_dir / "figures" / "curves.png").exists()
    cells = [c for c in nbformat.read(str(executed), as_version=4).cells if c.cell_type == "code"]
    curves = [c for c in cells if "ablation.curves(" in c.source]
    assert curves and any("image/png" in o.get("data", {}) for o in curves[0].outputs)
    assert "protocol" in (run_dir / "eval_table.md").read_text()  # the arms' protocols compared
    table = pd.read_csv(run_dir / "eval_table.csv", index_col=0)
    assert list(table.index) == arms and {"EM", "F1"} <= set(table.columns)
    verdicts = pd.read_csv(run_dir / "verdicts.csv") if claims else pd.DataFrame()
    assert len(verdicts) == len(claims)


def _check_report(run_dir: Path) -> None:
    """The report over the fake finished ablation the test made: its claim in the table, report.md written."""
    assert not _errors(run_dir / "report.ipynb")
    claims = pd.read_csv(run_dir / "claims.csv")
    # the fake run's four questions, answered alike by two seeds, are too few for the direction to count
    assert list(claims["notebook"]) == ["ablate_reward"] and list(claims["verdict"]) == ["inconclusive"]
    assert "F1 reward beats EM" in (run_dir / "report.md").read_text()


ABLATIONS = ("ablate_algorithm", "ablate_data", "ablate_evidence", "ablate_knowledge", "ablate_mask", "ablate_reward", "ablate_stages", "ablate_topk",
             "base_vs_instruct", "response_length", "sft_vs_rl")
# What each notebook's smoke run must leave behind, beyond what every run folder holds.
CHECKS = {"quickstart": _check_quickstart, "eval_benchmarks": _check_eval_benchmarks,
          "report": _check_report, **{name: _check_ablation for name in ABLATIONS}}


def test_every_notebook_has_its_checks():
    assert {nb.stem for nb in NOTEBOOKS} == set(CHECKS)


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_smoke_run_leaves_a_complete_run_folder(notebook, tmp_path):
    if notebook.stem == "report":  # it reports finished ablations: give it one (fake work, no training)
        from test_ablation import fake_finished_ablation

        fake_finished_ablation(tmp_path)
    run_dir = run_notebook(notebook, [ROOT / "params" / notebook.stem / "smoke.yaml"], output_root=tmp_path,
                           progress_bar=False, log_output=False)
    assert run_dir.parent.parent == tmp_path
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "completed"
    assert (run_dir / f"{notebook.stem}.ipynb").exists()
    assert (run_dir / "params.yaml").exists() and (run_dir / "provenance.json").exists()
    CHECKS[notebook.stem](run_dir)
