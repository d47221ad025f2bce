"""The ppo estimator: GAE against hand-computed values, the critic's masked value loss, and a short trainer run whose
critic learns, logs, is saved with the checkpoint and comes back on resume."""

from __future__ import annotations

import math

import pytest
import torch
from safetensors.torch import load_file

from fakes import FakeRetriever, MiniProtocol, ScriptedGenerator
from searchrl.rollout import RolloutConfig, SearchRollout
from searchrl.trainer import SearchGRPOConfig, SearchGRPOTrainer, prompt_dataset
from searchrl.trainer.advantages import gae_advantages, reinforce_pp_advantages
from searchrl.trainer.levers.ppo_critic import ValueModel, critic_from_policy, explained_variance, value_loss
from test_trainer_masks import SCRIPTS, varied_reward

NAN = float("nan")


def whiten(raw: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    valid = raw[mask.bool()]
    return (raw - valid.mean()) / (valid.std(unbiased=False) + 1e-8) * mask


# ---- gae_advantages ------------------------------------------------------------------------------------------------

# Row 0 has a retrieved span at positions 2-3 (its values are NaN: they must not be read); row 1 ends in padding.
MASK = torch.tensor([[1, 1, 0, 0, 1, 1], [1, 1, 1, 0, 0, 0]])
VALUES = torch.tensor([[0.5, 0.2, NAN, NAN, 0.4, 0.7], [0.1, 0.3, 0.6, NAN, NAN, NAN]])
REWARDS = torch.tensor([1.0, 0.0])


def test_gae_with_lambda_one_is_the_outcome_minus_the_value_across_a_retrieved_span():
    adv, returns = gae_advantages(REWARDS, VALUES, MASK)  # gamma = lam = 1, as in Search-R1
    # Every trained token's return is the outcome reward; the advantage before whitening is R - V.
    expected_returns = torch.tensor([[1.0, 1.0, 0, 0, 1.0, 1.0], [0.0, 0.0, 0.0, 0, 0, 0]])
    raw = torch.tensor([[0.5, 0.8, 0, 0, 0.6, 0.3], [-0.1, -0.3, -0.6, 0, 0, 0]])
    assert torch.allclose(returns, expected_returns) and not returns.isnan().any()
    assert torch.allclose(adv, whiten(raw, MASK), atol=1e-6)
    assert torch.all(adv[MASK == 0] == 0)


def test_gae_with_lambda_below_one_bridges_the_retrieved_span():
    adv, returns = gae_advantages(REWARDS, VALUES, MASK, lam=0.5)
    # Row 0, trained tokens V = [0.5, 0.2, 0.4, 0.7], reward 1 on the last; the token after position 1 is position 4:
    #   A5 = 1 - 0.7 = 0.3;  A4 = (0.7 - 0.4) + 0.5 * 0.3 = 0.45;  A1 = (0.4 - 0.2) + 0.5 * 0.45 = 0.425;
    #   A0 = (0.2 - 0.5) + 0.5 * 0.425 = -0.0875.  Row 1, V = [0.1, 0.3, 0.6], reward 0:
    #   A2 = -0.6;  A1 = 0.3 + 0.5 * -0.6 = 0;  A0 = 0.2 + 0.5 * 0 = 0.2.  Returns are A + V.
    raw = torch.tensor([[-0.0875, 0.425, 0, 0, 0.45, 0.3], [0.2, 0.0, -0.6, 0, 0, 0]])
    expected_returns = torch.tensor([[0.4125, 0.625, 0, 0, 0.85, 1.0], [0.3, 0.3, 0.0, 0, 0, 0]])
    assert torch.allclose(returns, expected_returns, atol=1e-6)
    assert torch.allclose(adv, whiten(raw, MASK), atol=1e-6)


def test_gae_discounts_per_trained_token_and_folds_in_the_kl_penalty():
    mask = torch.tensor([[1, 0, 1]])
    values = torch.tensor([[0.2, 5.0, 0.1]])
    kl = torch.tensor([[1.0, 7.0, 2.0]])  # the KL at the retrieved position is not charged
    adv, returns = gae_advantages(torch.tensor([1.0]), values, mask, kl, kl_coef=0.1, gamma=0.9)
    # token rewards: -0.1 at 0, 1 - 0.2 = 0.8 at 2.  G2 = 0.8, G0 = -0.1 + 0.9 * 0.8 = 0.62 (one step, not two).
    assert torch.allclose(returns, torch.tensor([[0.62, 0.0, 0.8]]), atol=1e-6)
    # A = G - V = [0.42, 0.7] -> whitened to [-1, 1].
    assert torch.allclose(adv, torch.tensor([[-1.0, 0.0, 1.0]]), atol=1e-5)


def test_gae_with_zero_values_and_lambda_one_equals_reinforce_pp():
    kl = torch.rand(2, 6)
    values = torch.where(MASK.bool(), 0.0, NAN)
    adv, _ = gae_advantages(REWARDS, values, MASK, kl, kl_coef=0.2)
    assert torch.allclose(adv, reinforce_pp_advantages(REWARDS, MASK, kl, kl_coef=0.2), atol=1e-6)


# ---- the critic's loss -----------------------------------------------------------------------------------------------


def test_value_loss_gradient_is_exactly_zero_at_retrieved_positions():
    torch.manual_seed(0)
    mask = torch.tensor([[1, 1, 0, 0, 0, 1, 1, 0], [1, 0, 0, 1, 1, 1, 0, 0]])
    old = torch.randn(2, 8)
    returns = torch.randn(2, 8)
    values = (old + 0.3 * torch.randn(2, 8)).requires_grad_(True)
    value_loss(values, old, returns, mask, clip=0.2).backward()
    assert torch.all(values.grad[mask == 0] == 0)
    assert torch.all(values.grad[mask == 1] != 0)


def test_value_loss_gradient_through_the_value_model_ignores_retrieved_positions():
    # A one-layer stand-in body: values at masked positions come out of the model, yet get no gradient.
    class Body(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(50, 8)

        def forward(self, input_ids, attention_mask, use_cache=False):
            return type("Out", (), {"last_hidden_state": self.emb(input_ids)})

    torch.manual_seed(0)
    model = ValueModel(Body(), 8)
    ids = torch.randint(0, 50, (2, 9))
    values = model(ids, torch.ones_like(ids), 6)
    values.retain_grad()
    mask = torch.tensor([[1, 0, 0, 1, 1, 0], [1, 1, 1, 1, 0, 0]])
    value_loss(values, values.detach() + 0.1, torch.ones(2, 6), mask, clip=0.5).backward()
    assert values.shape == (2, 6) and torch.all(values.grad[mask == 0] == 0) and torch.all(values.grad[mask == 1] != 0)


def test_value_loss_is_clipped_around_the_old_values():
    old, returns, mask = torch.tensor([[0.0]]), torch.tensor([[1.0]]), torch.ones(1, 1)
    # V = 2 overshoots: unclipped (2-1)^2 = 1, clipped V = 0.5 -> 0.25; the max keeps 1.
    assert math.isclose(value_loss(torch.tensor([[2.0]]), old, returns, mask, clip=0.5).item(), 0.5)
    # V = 0.8: unclipped 0.04, clipped V = 0.5 -> 0.25: the pessimistic max keeps 0.25.
    assert math.isclose(value_loss(torch.tensor([[0.8]]), old, returns, mask, clip=0.5).item(), 0.125)
    assert math.isclose(value_loss(torch.tensor([[0.8]]), old, returns, mask, clip=0.0).item(), 0.02, rel_tol=1e-6)


def test_a_peft_policy_gives_a_plain_critic_with_the_merged_weights():
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1)
    policy = LlamaForCausalLM(config)
    ids = torch.randint(0, 64, (2, 7))
    torch.manual_seed(1)
    plain = critic_from_policy(policy)
    peft_policy = get_peft_model(policy, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    torch.manual_seed(1)
    merged = critic_from_policy(peft_policy)
    assert not any("lora" in name for name, _ in merged.named_parameters())
    assert all(p.requires_grad for p in merged.parameters())
    assert torch.allclose(plain(ids, torch.ones_like(ids), 4), merged(ids, torch.ones_like(ids), 4), atol=1e-6)


def test_explained_variance():
    mask = torch.tensor([[1, 1, 0, 1]])
    returns = torch.tensor([[1.0, 0.0, 9.0, 1.0]])
    assert explained_variance(returns, returns, mask) == pytest.approx(1.0)
    assert explained_variance(torch.full((1, 4), 2 / 3), returns, mask) == pytest.approx(0.0, abs=1e-6)
    # Constant returns (every reward 0) have no variance to explain, even when rounding leaves a trace of one.
    constant = torch.full((1, 4), 0.1) + torch.tensor([[0.0, 1e-9, 0.0, 0.0]])
    assert math.isnan(explained_variance(torch.zeros(1, 4), constant, mask))


# ---- the trainer -----------------------------------------------------------------------------------------------------


class ReplayEngine:
    """Each batch replays SCRIPTS from the start (ScriptedGenerator plays them once), through the real engine."""

    def __init__(self, protocol, tokenizer):
        self.protocol, self.tokenizer = protocol, tokenizer

    def run(self, prompt_ids):
        generator = ScriptedGenerator(self.tokenizer, SCRIPTS)
        engine = SearchRollout(self.protocol, FakeRetriever(), self.tokenizer, generator,
                               RolloutConfig(max_completion_tokens=96))
        return engine.run(prompt_ids)


def ppo_trainer(output_dir, policy_path, tokenizer):
    rows = [{"id": "q0", "question": "When was Entity1 founded?", "golden_answers": ["1901"], "metadata": {}}]
    protocol = MiniProtocol()
    args = SearchGRPOConfig(
        output_dir=str(output_dir), per_device_train_batch_size=4, num_generations=4, max_completion_length=96,
        use_cpu=True, bf16=False, report_to="none", beta=0.0, max_steps=2, advantage_estimator="ppo",
        reward_kl_coef=0.05, value_lr=1e-3, critic_mini_batch_size=2, save_strategy="steps", save_steps=2,
        logging_steps=1, seed=0,
    )
    trainer = SearchGRPOTrainer(model=str(policy_path), reward_funcs=[varied_reward], args=args,
                                train_dataset=prompt_dataset(rows, protocol, tokenizer), retriever=FakeRetriever(),
                                protocol=protocol, processing_class=tokenizer)
    trainer._engine = ReplayEngine(protocol, tokenizer)
    return trainer


def critic_state(trainer):
    return {k: v.detach().clone() for k, v in trainer.critic.model.state_dict().items()}


def test_ppo_trains_logs_checkpoints_and_resumes_the_critic(tmp_path, tiny_policy_path, tokenizer):
    trainer = ppo_trainer(tmp_path / "run", tiny_policy_path, tokenizer)
    before = critic_state(trainer)
    seen = []
    fit, ppo_advantages = trainer.critic.fit, trainer._ppo_advantages

    def spy_fit(ids, attention, keep, old_values, returns, mask):
        seen.append({"mask": mask.clone(), "returns": returns.clone()})
        return fit(ids, attention, keep, old_values, returns, mask)

    def spy_advantages(output, rewards, mask, mode):
        advantages = ppo_advantages(output, rewards, mask, mode)
        seen[-1].update(advantages=advantages.clone(), tool_mask=output["tool_mask"].clone())
        return advantages

    trainer.critic.fit, trainer._ppo_advantages = spy_fit, spy_advantages
    trainer.train()

    # The critic learned, on the trained tokens only; the policy got token-level advantages, zero where retrieved.
    assert len(seen) == 2
    after = critic_state(trainer)
    assert all(not torch.equal(before[k], after[k]) for k in before)  # the body as well as the head
    for batch in seen:
        retrieved = batch["tool_mask"] == 0
        assert retrieved.sum() > 50 and torch.all(batch["mask"][retrieved] == 0)
        assert batch["advantages"].dim() == 2 and torch.all(batch["advantages"][retrieved] == 0)
        assert torch.all(batch["returns"][batch["mask"] == 0] == 0)
    logged = [entry for entry in trainer.state.log_history if "search/value_loss" in entry]
    assert len(logged) == 2
    for entry in logged:
        assert math.isfinite(entry["search/value_loss"]) and math.isfinite(entry["search/value_mean"])
        assert "search/explained_variance" in entry

    # The checkpoint holds the critic's weights and optimizer state, equal to the trained critic.
    folder = tmp_path / "run" / "checkpoint-2" / "critic"
    assert (folder / "model.safetensors").exists() and (folder / "optimizer.pt").exists()
    assert torch.equal(torch.load(folder / "shuffle_rng.pt"), trainer.critic.generator.get_state())
    saved = load_file(folder / "model.safetensors")
    assert all(torch.equal(saved[k], after[k]) for k in saved)

    # Resuming restores them into a fresh trainer, whose critic starts otherwise from the policy's weights.
    resumed = ppo_trainer(tmp_path / "run", tiny_policy_path, tokenizer)
    assert not torch.equal(critic_state(resumed)["head.weight"], after["head.weight"])
    resumed.train(resume_from_checkpoint=str(tmp_path / "run" / "checkpoint-2"))
    restored = critic_state(resumed)
    assert all(torch.equal(restored[k], after[k]) for k in after)
    # with the mini-batch shuffle's stream where the run left it (checkpoint-2 is the last step: nothing drawn since)
    assert torch.equal(resumed.critic.generator.get_state(), trainer.critic.generator.get_state())
    steps = [s["step"] for s in resumed.critic.optimizer.state_dict()["state"].values()]
    expected = [s["step"] for s in trainer.critic.optimizer.state_dict()["state"].values()]
    assert steps and steps == expected and float(steps[0]) == 4  # 2 batches x 2 mini-batches


def test_ppo_config_validates_its_fields(tmp_path):
    with pytest.raises(ValueError):
        SearchGRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, advantage_estimator="ppo", gae_lambda=1.5)
    with pytest.raises(ValueError):
        SearchGRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, advantage_estimator="ppo", critic_epochs=0)
