"""The loss ignores retrieved tokens: its gradient with respect to their log-probabilities is exactly zero with
masking on (policy term and KL term), and non-zero with masking off."""

from __future__ import annotations

import pytest
import torch

from fakes import SEARCH_SCRIPTS, FakeRetriever, MiniProtocol, ScriptedGenerator
from searchrl.rollout import RolloutConfig, SearchRollout
from searchrl.trainer import SearchGRPOConfig, SearchGRPOTrainer, prompt_dataset

SCRIPTS = SEARCH_SCRIPTS


def varied_reward(prompts, completions, **kwargs):
    return [float(len(c) % 5) for c in completions]


def make_trainer(tmp_path, policy_path, tokenizer, *, mask_retrieved, beta, estimator="grpo"):
    rows = [{"id": "q0", "question": "When was Entity1 founded?", "golden_answers": ["1901"], "metadata": {}}]
    protocol = MiniProtocol()
    args = SearchGRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, max_completion_length=96,
        use_cpu=True, bf16=False, report_to="none", beta=beta, mask_retrieved=mask_retrieved, max_steps=1,
        advantage_estimator=estimator, reward_kl_coef=0.1 if estimator == "reinforce_pp" else 0.0,
        save_strategy="no", logging_steps=1,
    )
    trainer = SearchGRPOTrainer(model=str(policy_path), reward_funcs=[varied_reward], args=args,
                                train_dataset=prompt_dataset(rows, protocol, tokenizer), retriever=FakeRetriever(),
                                protocol=protocol, processing_class=tokenizer)
    trainer._engine = SearchRollout(protocol, trainer.retriever, tokenizer, ScriptedGenerator(tokenizer, SCRIPTS),
                                    RolloutConfig(max_completion_tokens=96))
    inputs = [dict(trainer.train_dataset[0]) for _ in range(4)]
    return trainer, inputs


def logp_gradients(trainer, inputs, *, zero_advantages=False):
    """Gradient of the training loss with respect to each completion token's log-probability."""
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train(); we call the loss directly
    batch = trainer._generate_and_score_completions(inputs)
    if zero_advantages:  # leaves only the KL term, which needs the policy to differ from the reference
        batch["advantages"] = torch.zeros_like(batch["advantages"])
        torch.manual_seed(0)
        with torch.no_grad():
            for p in trainer.model.parameters():
                p.add_(0.05 * torch.randn_like(p))
    captured = {}
    original = trainer._get_per_token_logps_and_entropies

    def capture(*args, **kwargs):
        logps, entropies, aux = original(*args, **kwargs)
        logps.retain_grad()
        captured["logps"] = logps
        return logps, entropies, aux

    trainer._get_per_token_logps_and_entropies = capture
    loss = trainer._compute_loss(trainer.model, batch)
    loss.backward()
    env = batch["tool_mask"] if "tool_mask" in batch else torch.ones_like(batch["completion_mask"])
    return captured["logps"].grad, batch, env


def engine_retrieved_mask(trainer, batch):
    """Where the engine appended documents, from a replay of the same scripts (independent of the trainer's mask)."""
    tok = trainer.processing_class
    engine = SearchRollout(trainer.protocol, FakeRetriever(), tok, ScriptedGenerator(tok, SCRIPTS),
                           RolloutConfig(max_completion_tokens=96))
    prompt = tok(trainer.train_dataset[0]["prompt"], add_special_tokens=False)["input_ids"]
    trajs = engine.run([prompt] * len(SCRIPTS))
    mask = torch.zeros_like(batch["completion_ids"], dtype=torch.bool)
    for row, t in enumerate(trajs):
        assert t.completion_ids == batch["completion_ids"][row, : len(t.completion_ids)].tolist()
        mask[row, : len(t.env_mask)] = torch.tensor([m == 0 for m in t.env_mask])
    return mask


@pytest.mark.parametrize("beta,zero_adv", [(0.0, False), (0.1, True)], ids=["policy-term", "kl-term"])
def test_retrieved_tokens_get_exactly_zero_gradient_when_masked(tmp_path, tiny_policy_path, tokenizer, beta, zero_adv):
    trainer, inputs = make_trainer(tmp_path, tiny_policy_path, tokenizer, mask_retrieved=True, beta=beta)
    grad, batch, env = logp_gradients(trainer, inputs, zero_advantages=zero_adv)
    retrieved = env == 0
    assert retrieved.sum() > 50, "the scripted rollouts must contain retrieved tokens"
    assert torch.equal(retrieved, engine_retrieved_mask(trainer, batch))
    assert torch.all(grad[retrieved] == 0)
    sampled = (env == 1) & (batch["completion_mask"] == 1)
    assert (grad[sampled] != 0).float().mean() > 0.9


@pytest.mark.parametrize("beta,zero_adv", [(0.0, False), (0.1, True)], ids=["policy-term", "kl-term"])
def test_retrieved_tokens_get_gradient_when_not_masked(tmp_path, tiny_policy_path, tokenizer, beta, zero_adv):
    trainer, inputs = make_trainer(tmp_path, tiny_policy_path, tokenizer, mask_retrieved=False, beta=beta)
    grad, batch, env = logp_gradients(trainer, inputs, zero_advantages=zero_adv)
    assert torch.all(env == 1)
    retrieved = engine_retrieved_mask(trainer, batch)
    assert retrieved.sum() > 50
    assert torch.all(grad[retrieved] != 0)


def test_reinforce_pp_and_rloo_advantages_respect_the_mask(tmp_path, tiny_policy_path, tokenizer):
    trainer, inputs = make_trainer(tmp_path, tiny_policy_path, tokenizer, mask_retrieved=True, beta=0.0,
                                   estimator="reinforce_pp")
    grad, batch, env = logp_gradients(trainer, inputs)
    assert batch["advantages"].dim() == 2
    assert torch.all(batch["advantages"][env == 0] == 0) and torch.all(grad[env == 0] == 0)
    trainer, inputs = make_trainer(tmp_path, tiny_policy_path, tokenizer, mask_retrieved=True, beta=0.0,
                                   estimator="rloo")
    grad, batch, env = logp_gradients(trainer, inputs)
    assert batch["advantages"].dim() == 1 and torch.all(grad[env == 0] == 0)



def test_grpo_positive_trains_only_on_rollouts_above_their_group_mean(tmp_path, tiny_policy_path, tokenizer):
    trainer, inputs = make_trainer(tmp_path, tiny_policy_path, tokenizer, mask_retrieved=True, beta=0.0)
    trainer.model.train()
    grpo = trainer._generate_and_score_completions(inputs)["advantages"]
    assert (grpo < 0).any() and (grpo > 0).any()  # the scripted group is informative
    trainer, inputs = make_trainer(tmp_path, tiny_policy_path, tokenizer, mask_retrieved=True, beta=0.0,
                                   estimator="grpo_positive")
    grad, batch, _ = logp_gradients(trainer, inputs)
    assert torch.allclose(batch["advantages"], grpo.clamp(min=0.0))
    below = grpo < 0  # rollouts below their group's mean: no gradient on any of their tokens
    assert torch.all(grad[below] == 0) and torch.any(grad[~below] != 0)


def reward_by_search_count(prompts, completions, num_searches, **kwargs):
    return [10.0 * n + 0.25 * i for i, n in enumerate(num_searches)]


def test_the_mean_reward_of_each_search_count_is_logged(tmp_path, tiny_policy_path, tokenizer):
    # SCRIPTS search 1, 2, 0 and 1 times; the reward is 10 per search plus 0.25 x the rollout's place in the batch,
    # so the one-search mean (10.0 and 10.75) shows that the right rollouts were averaged together.
    trainer, inputs = make_trainer(tmp_path, tiny_policy_path, tokenizer, mask_retrieved=True, beta=0.0)
    trainer.reward_funcs = [reward_by_search_count]
    trainer.model.train()
    trainer._generate_and_score_completions(inputs)
    metrics = trainer._metrics["train"]
    assert metrics["search/reward_at_0_searches"] == [0.5]
    assert metrics["search/reward_at_1_searches"] == [pytest.approx(10.375)]
    assert metrics["search/reward_at_2_searches"] == [20.25]
    assert "search/reward_at_3_searches" not in metrics
    # within the group (mean 10.375), per question type: two searches out-earn their mates, none falls behind
    qtype = inputs[0].get("qtype", "unknown")
    assert metrics[f"search/advantage_at_2_searches/{qtype}"] == [pytest.approx(9.875)]
    assert metrics[f"search/advantage_at_0_searches/{qtype}"] == [pytest.approx(-9.875)]
    assert metrics[f"search/advantage_at_1_searches/{qtype}"] == [pytest.approx(0.0)]


def test_only_the_trainers_engine_forces_searches(tmp_path, tiny_policy_path, tokenizer):
    rows = [{"id": "q0", "question": "When was Entity1 founded?", "golden_answers": ["1901"], "metadata": {}}]
    protocol = MiniProtocol()
    args = SearchGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4,
                            use_cpu=True, bf16=False, report_to="none", max_steps=1, save_strategy="no",
                            rollout=RolloutConfig(max_completion_tokens=96, forced_searches=1))
    trainer = SearchGRPOTrainer(model=str(tiny_policy_path), reward_funcs=[varied_reward], args=args,
                                train_dataset=prompt_dataset(rows, protocol, tokenizer), retriever=FakeRetriever(),
                                protocol=protocol, processing_class=tokenizer)
    assert trainer.engine.explore and trainer.engine.config.forced_searches == 1
    assert not SearchRollout(protocol, FakeRetriever(), tokenizer, None, args.rollout).explore


def test_the_trainers_engine_samples_queries_at_query_temperature(tmp_path, tiny_policy_path, tokenizer):
    rows = [{"id": "q0", "question": "When was Entity1 founded?", "golden_answers": ["1901"], "metadata": {}}]
    protocol = MiniProtocol()
    args = SearchGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4,
                            use_cpu=True, bf16=False, report_to="none", max_steps=1, save_strategy="no",
                            rollout=RolloutConfig(max_completion_tokens=96, temperature=0.7, query_temperature=1.2))
    trainer = SearchGRPOTrainer(model=str(tiny_policy_path), reward_funcs=[varied_reward], args=args,
                                train_dataset=prompt_dataset(rows, protocol, tokenizer), retriever=FakeRetriever(),
                                protocol=protocol, processing_class=tokenizer)
    kv = trainer.engine.generator.kv
    assert kv.query_span == (protocol.query_open, protocol.query_close) and kv.query_temperature == 1.2


def test_forced_text_stays_out_of_the_loss_when_retrieved_tokens_are_trained():
    from searchrl.rollout.engine import Trajectory
    from searchrl.trainer.search_grpo import _only_forced_masked

    traj = Trajectory(prompt_ids=[0], env_mask=[1, 1, 0, 0, 0, 1, 0, 0, 1], forced_spans=[(5, 7)])
    assert _only_forced_masked(traj) == [1, 1, 1, 1, 1, 0, 0, 1, 1]
