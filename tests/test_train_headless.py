"""`python -m searchrl.train` in one process runs the quickstart notebook's cells: every stage the notebook evaluates
is evaluated (the cold start included, so RL's own change has its before), and the folder holds the same tables."""

from __future__ import annotations

import json
from pathlib import Path

from searchrl.experiments.train import main
from searchrl.runs.status import read_status

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "params" / "quickstart" / "smoke.yaml"


def test_headless_training_evaluates_every_stage_the_notebook_does(tmp_path, capsys):
    assert main(["-f", str(SMOKE), "-p", "device", "cpu", "-p", "eval_no_search", "true",
                 "-p", "output_root", str(tmp_path)]) == 0
    (run_dir,) = (tmp_path / "train").iterdir()
    assert read_status(run_dir)["status"] == "completed"
    stages = [row["stage"] for row in json.loads((run_dir / "eval" / "table.json").read_text())["rows"]]
    assert stages == ["untrained", "after cold start", "after RL", "no search"]
    for name in ("untrained", "after_cold_start", "after_RL", "no_search"):
        assert (run_dir / "trajectories" / f"{name}.jsonl").is_file(), name
    types = json.loads((run_dir / "eval" / "type_table.json").read_text())
    assert {row["qtype"] for row in types} >= {"single_hop", "all"}
    assert json.loads((run_dir / "eval" / "checks.json").read_text())  # the learning checks, one row per seed
    for figure in ("eval_bars.png", "type_changes.png", "training_curves.png"):
        assert (run_dir / "figures" / figure).is_file(), figure
    out = capsys.readouterr().out
    assert "after cold start" in out and "F1 gain" in out
