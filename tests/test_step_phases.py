"""A training step says what it is doing (rollout turns, extra draws, micro-batches of the update), so that a step of
many minutes on a CPU shows progress inside the RL stage's bar."""

from __future__ import annotations

from types import SimpleNamespace

from fakes import FakeRetriever, MiniProtocol, ScriptedGenerator, mini_trainer
from searchrl.core.progress import attach_stage_bar, stage_progress
from searchrl.rollout import RolloutConfig, SearchRollout

ROWS = [{"id": f"q{i}", "question": f"When was Entity{i} founded?", "golden_answers": ["1901"],
         "metadata": {"type": "single_hop"}} for i in range(2)]


def test_the_engine_reports_each_turn_with_the_rollouts_still_writing(tokenizer):
    scripts = [["<search>Entity1 founded</search>", "<answer>1901</answer>"], ["<answer>no idea</answer>"]]
    turns = []
    engine = SearchRollout(MiniProtocol(), FakeRetriever(), tokenizer, ScriptedGenerator(tokenizer, scripts),
                           RolloutConfig(max_searches=2), on_turn=lambda *a: turns.append(a))
    engine.run([tokenizer("Q1")["input_ids"], tokenizer("Q2")["input_ids"]])
    # before turn 1 both write; the second answers at once, so only the first writes turn 2; then none is left
    assert turns == [(0, 4, 2), (1, 4, 1), (2, 4, 0)]


def test_a_training_step_reports_rollout_turns_then_each_micro_batch(tmp_path, tiny_policy_path, tokenizer):
    trainer, _ = mini_trainer(tmp_path, tiny_policy_path, tokenizer, ROWS, ["em"], per_device_train_batch_size=4,
                              gradient_accumulation_steps=2, num_generations=4, bf16=False,
                              rollout=RolloutConfig(max_completion_tokens=16, max_searches=1))
    attach_stage_bar(trainer, "rl", {"reward": "reward"})
    callback = trainer.phase_listener.__self__
    assert callback in trainer.callback_handler.callbacks
    seen = []
    show = callback.show_phase
    trainer.phase_listener = callback.show_phase = lambda text: (seen.append(text), show(text))
    trainer.train()
    assert seen[0] == "rollouts: turn 1 of at most 3, 8 writing"
    assert seen[-2:] == ["update: micro-batch 1 of 2", "update: micro-batch 2 of 2"]
    assert callback.phase == ""  # cleared when the step ended
    logged = next(entry for entry in trainer.state.log_history if "step_time" in entry)
    assert 0 < logged["timing/rollouts_s"] < logged["step_time"]  # generation and scoring, a part of the step


def test_the_stage_bar_shows_the_phase_beside_the_logged_metrics():
    callback = stage_progress("rl", {"reward": "reward"})
    state = SimpleNamespace(is_world_process_zero=True, max_steps=3, global_step=0)
    args = SimpleNamespace(gradient_accumulation_steps=4)
    callback.on_train_begin(args, state, None)
    callback.on_log(args, state, None, logs={"reward": 0.25})
    callback.show_phase("rollouts: turn 2 of at most 4, 16 writing")
    assert callback.bar.postfix == "reward=0.25, now=rollouts: turn 2 of at most 4, 16 writing"
    callback.on_substep_end(args, state, None)
    assert callback.phase == "update: micro-batch 2 of 4"
    state.global_step = 1
    callback.on_step_end(args, state, None)
    assert callback.bar.n == 1 and callback.bar.postfix == "reward=0.25"
    callback.on_train_end(args, state, None)
