"""`micro_batch_size` splits a step's forward and backward passes without changing the update: the same rollouts
give the same loss, gradient norm and weights whether a step runs whole or in micro-batches (RL and cold start)."""

from __future__ import annotations

import pytest
import torch

from fakes import scripted_trainer
from searchrl.config import ConfigError, RunConfig
from searchrl.trainer.arguments import grpo_args, sft_args


def varied_reward(prompts, completions, **kwargs):
    return [float(len(c) % 7) for c in completions]


def one_step(tmp_path, policy_path, tokenizer, loss_type: str, micro: int, grouped: bool = False,
             seen: list | None = None, shared: bool = False, checkpointing: bool = False) -> tuple[dict, dict]:
    cfg = RunConfig(prompts_per_step=1, num_generations=4, micro_batch_size=micro, loss_type=loss_type, rl_steps=1,
                    learning_rate=1e-3, save_steps=100, device="cpu", max_completion_tokens=96, health_action="off",
                    length_grouped_micro_batches=grouped, shared_prefix=shared,
                    activation_checkpointing=checkpointing)
    args = grpo_args(cfg, tmp_path / f"{loss_type}-{micro}-{grouped}-{shared}-{checkpointing}")
    args.save_strategy = "no"
    rows = [{"id": "q0", "question": "When was Entity1 founded?", "golden_answers": ["1901"], "metadata": {}}]
    trainer = scripted_trainer(policy_path, tokenizer, args, rows, [varied_reward])
    if seen is not None:  # records the width of every micro-batch the loss sees
        loss = trainer.compute_loss

        def recording(model, inputs, *args, **kwargs):
            seen.append((inputs["prompt_ids"].size(1), inputs["completion_ids"].size(1)))
            return loss(model, inputs, *args, **kwargs)

        trainer.compute_loss = recording
    trainer.train()
    assert trainer.model.is_activation_checkpointing is checkpointing  # the setting reached the policy
    logged = next(entry for entry in trainer.state.log_history if "loss" in entry)
    return logged, {k: v.detach().clone() for k, v in trainer.model.named_parameters()}


@pytest.mark.parametrize("loss_type", ["dapo", "grpo"])
def test_a_step_in_micro_batches_makes_the_same_update(tmp_path, tiny_policy_path, tokenizer, loss_type):
    whole, whole_weights = one_step(tmp_path, tiny_policy_path, tokenizer, loss_type, 0)
    split, split_weights = one_step(tmp_path, tiny_policy_path, tokenizer, loss_type, 2)
    assert whole["grad_norm"] > 0
    # The gradient norm is taken before clipping and Adam's first step is nearly sign(gradient), so the norm is
    # what would show a loss scaled by the number of micro-batches.
    assert split["grad_norm"] == pytest.approx(whole["grad_norm"], rel=1e-4)
    assert split["reward"] == pytest.approx(whole["reward"])
    for name, weight in whole_weights.items():
        # Adam moves each weight by about lr = 1e-3; float summation order alone moves a few by ~1e-6.
        torch.testing.assert_close(split_weights[name], weight, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("loss_type", ["dapo", "bnpo"])
def test_length_grouped_micro_batches_make_the_same_update_with_fewer_columns(tmp_path, tiny_policy_path, tokenizer,
                                                                              loss_type):
    widths_trl, widths_grouped = [], []
    trl, trl_weights = one_step(tmp_path, tiny_policy_path, tokenizer, loss_type, 2, grouped=False, seen=widths_trl)
    grouped, grouped_weights = one_step(tmp_path, tiny_policy_path, tokenizer, loss_type, 2, grouped=True,
                                        seen=widths_grouped)
    assert len(widths_trl) == len(widths_grouped) == 2
    # TRL's micro-batches all carry the step's full width; grouped, the short rollouts go without its padding.
    assert len(set(widths_trl)) == 1
    assert sum(map(sum, widths_grouped)) < sum(map(sum, widths_trl))
    assert grouped["grad_norm"] == pytest.approx(trl["grad_norm"], rel=1e-4)
    for name, weight in trl_weights.items():
        torch.testing.assert_close(grouped_weights[name], weight, rtol=1e-4, atol=2e-5)


def test_a_shared_prefix_makes_the_same_update(tmp_path, tiny_policy_path, tokenizer, monkeypatch):
    from searchrl.trainer import search_grpo

    calls = []
    original = search_grpo.shared_prefix_logps

    def counting(*args, **kwargs):
        result = original(*args, **kwargs)
        calls.append(result is not None)
        return result

    monkeypatch.setattr(search_grpo, "shared_prefix_logps", counting)
    full, full_weights = one_step(tmp_path, tiny_policy_path, tokenizer, "dapo", 2)
    assert not calls  # shared_prefix false: TRL's pass
    shared, shared_weights = one_step(tmp_path, tiny_policy_path, tokenizer, "dapo", 2, shared=True)
    assert calls and all(calls)  # both micro-batches ran the shared pass
    assert shared["grad_norm"] == pytest.approx(full["grad_norm"], rel=1e-4)
    for name, weight in full_weights.items():
        torch.testing.assert_close(shared_weights[name], weight, rtol=1e-4, atol=2e-5)


def test_activation_checkpointing_makes_the_same_update(tmp_path, tiny_policy_path, tokenizer):
    # Recomputing the blocks' activations in the backward pass changes memory, not the gradient.
    plain, plain_weights = one_step(tmp_path, tiny_policy_path, tokenizer, "dapo", 2)
    kept, kept_weights = one_step(tmp_path, tiny_policy_path, tokenizer, "dapo", 2, checkpointing=True)
    assert kept["grad_norm"] == pytest.approx(plain["grad_norm"], rel=1e-4)
    for name, weight in plain_weights.items():
        torch.testing.assert_close(kept_weights[name], weight, rtol=1e-4, atol=2e-5)


def test_activation_checkpointing_is_one_setting_for_the_cold_start_and_rl(tmp_path):
    for on in (False, True):
        cfg = RunConfig(activation_checkpointing=on)
        assert grpo_args(cfg, tmp_path).activation_checkpointing is on
        assert sft_args(cfg, tmp_path).activation_checkpointing is on


def test_micro_batches_map_to_trl_arguments_and_a_size_that_does_not_divide_the_step_fails(tmp_path):
    args = grpo_args(RunConfig(prompts_per_step=2, num_generations=4, micro_batch_size=2), tmp_path)
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps, args.steps_per_generation) == (2, 4, 4)
    assert args.generation_batch_size == 8  # one generation of the whole step, as without micro-batches
    args = grpo_args(RunConfig(prompts_per_step=2, num_generations=4, gradient_accumulation_steps=2,
                               micro_batch_size=4), tmp_path)
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps, args.generation_batch_size) == (4, 4, 16)
    cold = sft_args(RunConfig(micro_batch_size=3, num_generations=3, prompts_per_step=1), tmp_path)
    assert (cold.per_device_train_batch_size, cold.gradient_accumulation_steps) == (2, 4)  # 8 examples a step
    # Under two processes each takes half of the same 8 examples: the cold start keeps its number of steps.
    cold = sft_args(RunConfig(micro_batch_size=3, num_generations=3, prompts_per_step=1), tmp_path, num_processes=2)
    assert (cold.per_device_train_batch_size, cold.gradient_accumulation_steps) == (2, 2)
    with pytest.raises(ValueError, match="cannot be split over 3 processes"):
        sft_args(RunConfig(), tmp_path, num_processes=3)
    with pytest.raises(ConfigError, match="micro_batch_size must divide prompts_per_step x num_generations = 8"):
        RunConfig(prompts_per_step=2, num_generations=4, micro_batch_size=3)
