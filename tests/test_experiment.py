"""Every public method of Experiment on the tiny model: data, evaluation, cold start, RL, R1-Searcher's two-stage
schedule, resume from a checkpoint, curves and tables. A broken schedule or stage fails here, not in a demo."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from searchrl.config import RunConfig
from searchrl.experiments.experiment import Experiment
from searchrl.runs.checkpoints import drop_resume_state
from searchrl.runs.folder import RUN_DIR_ENV

SMALL = {"model": "tiny-random", "world_entities": 40, "n_train": 8, "n_eval": 4, "eval_batch_size": 4,
         "sft_examples": 4, "rl_steps": 2, "prompts_per_step": 1, "num_generations": 2, "max_searches": 1,
         "max_completion_tokens": 48, "save_steps": 1, "world_passage_words": 20, "top_k": 1}


def _experiment(tmp_path, monkeypatch, **changes):
    run_dir = tmp_path / "run"
    monkeypatch.setenv(RUN_DIR_ENV, str(run_dir))
    return Experiment(RunConfig.from_params({**SMALL, "output_root": str(tmp_path), **changes}), notebook="t")


@pytest.mark.slow
def test_the_whole_quickstart_path(tmp_path, monkeypatch):
    exp = _experiment(tmp_path, monkeypatch)
    assert exp.data_summary()["eval_questions"] == 4
    model = exp.load_model()
    exp.evaluate(model, "untrained")
    model = exp.cold_start(model)
    assert (exp.run_dir / "checkpoints" / "cold_start" / "config.json").exists()
    assert json.loads((exp.run_dir / "sft" / "history.json").read_text())["examples"] == 4
    model = exp.train_rl(model)
    assert (exp.run_dir / "checkpoints" / "rl" / "config.json").exists()
    assert (exp.run_dir / "checkpoints" / "rl" / "checkpoint-2").is_dir()
    history = exp.history.to_frame()
    assert history["step"].max() == 2 and "reward" in history
    exp.evaluate(model, "after RL")
    table = exp.stage_table()
    assert list(table.index) == ["untrained", "after RL"] and {"EM", "F1", "searches/question"} <= set(table)
    assert (exp.run_dir / "eval" / "table.json").exists()
    exp.curves()
    exp.bars(table)
    assert "searchrl-trajectory" in exp.show_trajectories("after RL", n=1)
    assert (exp.run_dir / "figures" / "training_curves.png").exists()
    assert not (exp.run_dir / "figures" / "reward_terms.png").exists()  # one reward term: nothing to split
    assert exp.finish() == exp.run_dir
    assert json.loads((exp.run_dir / "status.json").read_text())["status"] == "completed"


@pytest.mark.slow
def test_two_stage_schedule_trains_stage1_rewards_then_the_runs_own(tmp_path, monkeypatch):
    exp = _experiment(tmp_path, monkeypatch, sft_examples=0, two_stage=True, rl_steps=2, stage1_steps=1,
                      rewards=["preset:r1_searcher_stage2"], save_steps=10)
    exp.train_rl(exp.load_model())
    for stage in ("rl_stage1", "rl_stage2"):
        assert (exp.run_dir / "checkpoints" / stage / "config.json").exists()
    logged = exp.history.to_frame().columns
    # Stage 1 logs R1-Searcher's retrieval and stage-1 format rewards, stage 2 the answer and stage-2 format rewards.
    for reward in ("retrieval_r1s", "format_r1s_stage1", "f1", "format_r1s_stage2"):
        assert any(reward in column for column in logged), (reward, list(logged))
    exp.curves()  # several reward terms: each gets its own panel
    assert (exp.run_dir / "figures" / "reward_terms.png").exists()
    # One step count over the run: stage 2's step is the run's step 2, not a second step 1.
    steps = exp.history.to_frame()[["step", "stage"]].dropna()
    assert steps.values.tolist() == [[1, "rl_stage1"], [2, "rl_stage2"]]


@pytest.mark.slow
def test_resuming_inside_stage_two_keeps_stage_ones_history(tmp_path, monkeypatch):
    changes = {"sft_examples": 0, "two_stage": True, "stage1_steps": 2, "rewards": ["preset:r1_searcher_stage2"],
               "save_steps": 1}
    exp = _experiment(tmp_path, monkeypatch, rl_steps=3, **changes)
    exp.train_rl(exp.load_model())
    assert exp.history.to_frame()["step"].tolist() == [1, 2, 3]
    # The same run given one more step: stage 2 resumes from its checkpoint-1 (the run's step 3) and trains step 4.
    again = _experiment(tmp_path, monkeypatch, rl_steps=4, resume=True, **changes)
    again.train_rl(again.load_model())
    frame = again.history.to_frame()
    assert frame["step"].tolist() == [1, 2, 3, 4]
    assert frame["stage"].tolist() == ["rl_stage1", "rl_stage1", "rl_stage2", "rl_stage2"]


@pytest.mark.slow
def test_resume_continues_from_the_last_checkpoint_and_keeps_the_cold_start(tmp_path, monkeypatch):
    exp = _experiment(tmp_path, monkeypatch, rl_steps=1, sft_examples=2)
    model = exp.cold_start(exp.load_model())
    exp.train_rl(model)
    assert exp.history.to_frame()["step"].tolist() == [1]
    # The same run, resumed with more steps: the cold start is loaded, not redone, and RL starts at step 1.
    again = _experiment(tmp_path, monkeypatch, rl_steps=2, sft_examples=2, resume=True)
    sft_log = (again.run_dir / "sft" / "history.json").stat().st_mtime
    model = again.cold_start(again.load_model())
    assert (again.run_dir / "sft" / "history.json").stat().st_mtime == sft_log
    again.train_rl(model)
    steps = again.history.to_frame()["step"].tolist()
    assert steps[0] == 1 and max(steps) == 2 and steps.count(1) == 1
    assert isinstance(again.history.to_frame(), pd.DataFrame)


@pytest.mark.slow
def test_an_interrupted_cold_start_continues_from_its_last_checkpoint(tmp_path, monkeypatch):
    from transformers import TrainerCallback

    from searchrl.sft import cold_start as sft_module

    steps_trained = []

    class Interrupt(TrainerCallback):  # killed during step 2, after checkpoint-1 was saved
        def __init__(self, at):
            self.at = at

        def on_step_end(self, args, state, control, **kwargs):
            steps_trained.append(state.global_step)
            if state.global_step == self.at:
                raise KeyboardInterrupt("killed")

    make = sft_module.make_sft_trainer
    interrupt_at = [2]

    def with_interrupt(*args, **kwargs):
        trainer = make(*args, **kwargs)
        trainer.add_callback(Interrupt(interrupt_at[0]))
        return trainer

    monkeypatch.setattr(sft_module, "make_sft_trainer", with_interrupt)
    # 8 demonstrations, 2 epochs: two optimizer steps of 8, a checkpoint after each
    exp = _experiment(tmp_path, monkeypatch, sft_examples=8, sft_epochs=2.0)
    with pytest.raises(KeyboardInterrupt):
        exp.cold_start(exp.load_model())
    assert (exp.run_dir / "sft" / "checkpoint-1").is_dir() and not (exp.run_dir / "checkpoints" / "cold_start").exists()
    steps_trained.clear()
    interrupt_at[0] = -1
    again = _experiment(tmp_path, monkeypatch, sft_examples=8, sft_epochs=2.0, resume=True)
    again.cold_start(again.load_model())
    assert steps_trained == [2]  # step 1 was not trained again
    log = json.loads((again.run_dir / "sft" / "history.json").read_text())
    assert log["steps"] == 2
    assert (again.run_dir / "checkpoints" / "cold_start" / "config.json").exists()
    assert not list((again.run_dir / "sft").glob("checkpoint-*"))  # the finished cold start replaces them


@pytest.mark.slow
def test_a_completed_run_resumes_past_its_finished_stage_without_trainer_checkpoints(tmp_path, monkeypatch):
    exp = _experiment(tmp_path, monkeypatch, rl_steps=1, sft_examples=0)
    exp.train_rl(exp.load_model())
    final = exp.run_dir / "checkpoints" / "rl"
    assert json.loads((final / "stage_steps.json").read_text()) == {"steps": 1}
    drop_resume_state(exp.run_dir)  # what the runner does once a run completes
    written = (final / "model.safetensors").stat().st_mtime_ns
    again = _experiment(tmp_path, monkeypatch, rl_steps=1, sft_examples=0, resume=True)
    again.train_rl(again.load_model())  # loads the stage's policy: nothing trains, nothing is rewritten
    assert (final / "model.safetensors").stat().st_mtime_ns == written
    assert again.history.to_frame()["step"].tolist() == [1]
    longer = _experiment(tmp_path, monkeypatch, rl_steps=2, sft_examples=0, resume=True)
    with pytest.raises(RuntimeError, match="cannot go on where it stopped.*-p model"):
        longer.train_rl(longer.load_model())


@pytest.mark.slow
@pytest.mark.parametrize("use_peft", [False, True])
def test_a_run_that_died_after_its_last_checkpoint_resumes_without_an_extra_step(tmp_path, monkeypatch, use_peft):
    # Killed after checkpoint-1 of a one-step stage but before the stage's policy was saved: transformers, resumed
    # at max_steps, would train a second step; the resume must take the checkpoint's policy instead.
    exp = _experiment(tmp_path, monkeypatch, rl_steps=1, sft_examples=0, use_peft=use_peft)
    trained = exp.train_rl(exp.load_model())
    final = exp.run_dir / "checkpoints" / "rl"
    assert (final / "checkpoint-1").is_dir()
    (final / "config.json").unlink()  # the final policy was cut short
    again = _experiment(tmp_path, monkeypatch, rl_steps=1, sft_examples=0, use_peft=use_peft, resume=True)
    resumed = again.train_rl(again.load_model())
    assert again.history.to_frame()["step"].tolist() == [1]
    assert json.loads((final / "stage_steps.json").read_text()) == {"steps": 1}
    want = dict(trained.named_parameters())
    for name, value in resumed.named_parameters():
        assert torch.equal(value, want[name]), name


def test_eval_subsets_filters_and_the_no_search_stage(tmp_path, monkeypatch):
    exp = _experiment(tmp_path, monkeypatch, n_eval=6, n_eval_untrained=2, eval_no_search=True, train_max_hops=1,
                      max_completion_tokens=16)
    assert {int(r["metadata"]["hops"]) for r in exp.train_rows} == {1}  # train_max_hops keeps one-hop questions
    model = exp.load_model()
    # n_eval_untrained, passed as the notebooks pass it: a prefix of the eval questions
    assert len(exp.evaluate(model, "untrained", n_questions=exp.cfg.n_eval_untrained).records) == 2
    assert len(exp.evaluate(model, "after RL").records) == 6
    seen = []
    monkeypatch.setattr("searchrl.evaluation.evaluate.evaluate", lambda *a, rollout, **k: seen.append(rollout.max_searches)
                        or exp.results["after RL"])
    exp.no_search_baseline(model)
    assert seen == [0]  # the baseline's budget, not the run's
    assert exp.cfg.rollout_config().max_searches == 1
    off = _experiment(tmp_path / "off", monkeypatch)
    assert off.no_search_baseline(model) is None


def test_the_no_search_stage_runs_under_forced_searches(tmp_path, monkeypatch):
    # forced_searches acts on training rollouts, but is checked against the budget: the stage's budget of 0 caps it
    exp = _experiment(tmp_path, monkeypatch, n_eval=2, eval_no_search=True, forced_searches=1,
                      train_forced_opener=True, max_completion_tokens=16)
    seen = []

    def evaluate(*args, rollout, **kwargs):
        seen.append(rollout)
        raise LookupError("enough: the rollout settings were built")

    monkeypatch.setattr("searchrl.evaluation.evaluate.evaluate", evaluate)
    with pytest.raises(LookupError, match="enough"):
        exp.no_search_baseline(None)
    assert [(r.max_searches, r.forced_searches, r.train_forced_opener) for r in seen] == [(0, 0, False)]
    assert exp.cfg.rollout_config().forced_searches == 1


def test_held_out_questions_do_not_move_with_the_training_seed(tmp_path, monkeypatch):
    # Runs over seeds (and an ablation's arms) are compared question by question, so the training seed must not
    # pick the held-out questions; the world (world_seed) does.
    first = _experiment(tmp_path / "a", monkeypatch, n_eval=10, seed=0)
    other = _experiment(tmp_path / "b", monkeypatch, n_eval=10, seed=3)
    ids = [[r["id"] for r in exp.eval_rows] for exp in (first, other)]
    assert ids[0] == ids[1]
    moved = _experiment(tmp_path / "c", monkeypatch, n_eval=10, seed=0, world_seed=1)
    assert [r["id"] for r in moved.eval_rows] != ids[0]
