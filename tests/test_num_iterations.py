"""`num_iterations` (GRPO's mu): each batch of rollouts serves that many optimizer steps, clipped against the
log-probs it was sampled with."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from fakes import SEARCH_SCRIPTS, Replaying, scripted_trainer
from searchrl.config import ConfigError, RunConfig
from searchrl.trainer.arguments import grpo_args


def varied_reward(prompts, completions, **kwargs):
    return [float(len(c) % 7) for c in completions]


def test_two_updates_per_batch_of_rollouts(tmp_path, tiny_policy_path, tokenizer):
    cfg = RunConfig(prompts_per_step=1, num_generations=4, micro_batch_size=2, rl_steps=4, num_iterations=2,
                    learning_rate=1e-3, save_steps=100, device="cpu", max_completion_tokens=96, health_action="off")
    args = grpo_args(cfg, tmp_path / "out", rollout_log_dir=tmp_path / "rollouts")
    assert args.num_iterations == 2
    args.save_strategy = "no"
    rows = [{"id": f"q{i}", "question": f"When was Entity{i} founded?", "golden_answers": ["1901"], "metadata": {}}
            for i in range(4)]
    generator = Replaying(tokenizer, SEARCH_SCRIPTS)
    trainer = scripted_trainer(tiny_policy_path, tokenizer, args, rows, [varied_reward], generator)
    seen = []
    loss = trainer.compute_loss

    def recording(model, inputs, *a, **k):
        seen.append(inputs.get("old_per_token_logps") is not None)
        return loss(model, inputs, *a, **k)

    trainer.compute_loss = recording
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    # 4 updates from 2 batches of rollouts: generation at steps 1 and 3 only
    assert generator.batches == 2
    assert sorted(p.name for p in (tmp_path / "rollouts").glob("*.jsonl")) == ["step-0001.jsonl", "step-0003.jsonl"]
    assert len(pd.read_json(tmp_path / "rollouts" / "step-0001.jsonl", lines=True)) == 4
    assert trainer.state.global_step == 4
    # the reused batch carries its sampling-time log-probs, so the second update is clipped against them
    assert seen and all(seen)
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.named_parameters())


def test_num_iterations_must_be_positive():
    with pytest.raises(ConfigError, match="num_iterations must be >= 1"):
        RunConfig(num_iterations=0)
