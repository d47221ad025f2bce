"""The fixed probe set: which questions it scores, its settings' checks, and a tiny RL run that logs it at the
steps it should, with per-question records and a figure."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from searchrl.config import ConfigError, RunConfig
from searchrl.experiments.experiment import Experiment
from searchrl.runs.folder import RUN_DIR_ENV
from searchrl.trainer.monitors.probe import probe_records_path, probe_rows, probe_summary

SMALL = {"model": "tiny-random", "world_entities": 40, "n_train": 8, "n_eval": 10, "eval_batch_size": 4,
         "sft_examples": 0, "rl_steps": 3, "prompts_per_step": 1, "num_generations": 2, "max_searches": 1,
         "max_completion_tokens": 48, "save_steps": 10, "world_passage_words": 20, "top_k": 1}


def _row(i: int, qtype: str) -> dict:
    return {"id": str(i), "question": f"q{i}", "golden_answers": ["a"], "metadata": {"type": qtype}}


def test_probe_rows_keep_the_trained_types_in_evaluation_order() -> None:
    rows = [_row(0, "single_hop"), _row(1, "comparison"), _row(2, "inference"), _row(3, "single_hop")]
    assert [r["id"] for r in probe_rows(rows, ["single_hop", "inference"], 2)] == ["0", "2"]
    assert [r["id"] for r in probe_rows(rows, ["single_hop", "inference"], 9)] == ["0", "2", "3"]
    assert [r["id"] for r in probe_rows(rows, [], 2)] == ["0", "1"]


def test_probe_summary_averages_each_logged_column() -> None:
    records = pd.DataFrame({"f1": [1.0, 0.5], "em": [1.0, 0.0], "searches": [1, 2], "format_ok": [True, False]})
    assert probe_summary(records) == {"probe/f1": 0.75, "probe/em": 0.5, "probe/searches": 1.5,
                                      "probe/format_ok": 0.5}


def test_probe_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="probe_every"):
        RunConfig.from_params({"probe_every": -1})
    with pytest.raises(ConfigError, match="probe_questions"):
        RunConfig.from_params({"probe_every": 2, "probe_questions": 0})
    assert RunConfig.from_params({"probe_questions": 0}).probe_every == 0  # off: its size is not used


def test_records_of_a_second_stage_go_to_their_own_folder(tmp_path) -> None:
    assert probe_records_path(tmp_path, "rl", 4) == tmp_path / "probe" / "step-0004.jsonl"
    assert probe_records_path(tmp_path, "rl_stage2", 0) == tmp_path / "probe" / "rl_stage2" / "step-0000.jsonl"


@pytest.mark.slow
def test_rl_logs_the_probe_before_the_first_step_every_n_steps_and_at_the_end(tmp_path, monkeypatch):
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "run"))
    cfg = RunConfig.from_params({**SMALL, "output_root": str(tmp_path), "probe_every": 2, "probe_questions": 2,
                                 "train_question_types": ["single_hop"]})
    exp = Experiment(cfg, notebook="t")
    exp.train_rl(exp.load_model())
    history = exp.history.to_frame()
    probed = history.dropna(subset=["probe/f1"])
    assert probed["step"].tolist() == [0, 2, 3]  # the start, every 2 steps, and the last step
    assert {"probe/em", "probe/searches", "probe/format_ok"} <= set(history.columns)
    assert history.loc[history["step"] == 2, "reward"].notna().all()  # the step's own log joined the probe's row
    for step in (0, 2, 3):
        lines = (exp.run_dir / "probe" / f"step-{step:04d}.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines]
        assert len(records) == 2 and {r["qtype"] for r in records} == {"single_hop"}
    exp.curves()
    assert (exp.run_dir / "figures" / "probe_curve.png").exists()
    trends = json.loads((exp.run_dir / "eval" / "curve.json").read_text())
    assert trends["probe/f1"]["points"] == 3 and trends["reward"]["points"] == 3
