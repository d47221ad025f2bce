"""The real-question quickstart (`make demo-real`: params/quickstart/cpu.yaml + cpu_real.yaml) on the tiny model:
HotpotQA rows of a data folder laid out as `searchrl data prepare` writes it, trained with RL over their pooled
paragraphs and evaluated on the distractor test split, down to the stage table with its paired intervals."""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_data import build_fake_data
from searchrl.config import RunConfig
from searchrl.experiments.experiment import Experiment
from searchrl.runs.folder import RUN_DIR_ENV

ROOT = Path(__file__).resolve().parents[1]
PROFILE = [ROOT / "params/quickstart/cpu.yaml", ROOT / "params/quickstart/cpu_real.yaml"]
TINY = {"model": "tiny-searcher", "world_entities": 40, "n_train": 6, "n_eval": 4, "n_eval_untrained": 2,
        "eval_batch_size": 4, "sft_examples": 2, "sft_epochs": 1.0, "rl_steps": 1, "prompts_per_step": 1,
        "num_generations": 2, "max_completion_tokens": 96, "max_observation_tokens": 32, "save_steps": 1000}


def test_the_demo_profile_names_real_data_and_the_test_split():
    cfg = RunConfig.from_params(None, *PROFILE)
    assert (cfg.dataset, cfg.corpus, cfg.eval_split) == ("hotpotqa-distractor", "hotpotqa-pool", "test")
    assert cfg.n_eval >= 100 and cfg.model == "smollm2-135m-instruct"


@pytest.mark.slow
def test_rl_on_real_questions_with_the_tiny_model(tmp_path, monkeypatch):
    build_fake_data(tmp_path / "data", monkeypatch)
    monkeypatch.setenv(RUN_DIR_ENV, str(tmp_path / "run"))
    cfg = RunConfig.from_params(None, *PROFILE, **TINY, output_root=str(tmp_path))
    exp = Experiment(cfg, notebook="quickstart")
    assert all(r["metadata"]["format"] == "hotpotqa" for r in exp.train_rows + exp.eval_rows)
    assert {r["id"][:5] for r in exp.eval_rows} == {"test-"}
    model = exp.load_model()
    exp.evaluate(model, "untrained", n_questions=cfg.n_eval_untrained)
    model = exp.cold_start(model)  # the format, on the synthetic world: real rows carry no hop plan
    exp.evaluate(model, "after cold start")
    model = exp.train_rl(model)
    assert exp.history.to_frame()["step"].max() == 1
    exp.evaluate(model, "after RL")
    table = exp.stage_table()
    assert list(table.index) == ["untrained", "after cold start", "after RL"]
    assert {"ΔF1 95% low", "ΔF1 95% high"} <= set(table) and table.loc["after RL", "ΔF1 questions"] == 4
    paper = exp.paper_layout()  # our stages under HotpotQA beside Search-R1's printed Qwen2.5-3B rows
    ours = paper.frame.xs("searchrl", level="source")
    assert list(ours.index.get_level_values("method")) == list(table.index)
    assert ours[("HotpotQA", "EM")].tolist() == pytest.approx(table["EM"].tolist())
    assert (exp.run_dir / "eval" / "paper_table.md").exists() and "Qwen2.5-3B" in paper.to_markdown()
