"""opener_anchor: the choice between two explore openers held at the reference's mean, free between questions."""

from __future__ import annotations

import copy

import pytest
import torch

from fakes import mini_trainer
from searchrl.config import ConfigError, RunConfig
from searchrl.rollout import RolloutConfig
from searchrl.trainer.levers.opener_anchor import OpenerAnchor, anchor_penalty, opener_log_odds

OPENERS = ["<think> one fact", "<think> two facts"]


def _ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _sequence_logp(model, prompt, opener):
    """log p(opener | prompt) from one unpadded forward, the plain way."""
    ids = torch.tensor([prompt + opener])
    logps = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
    return sum(logps[len(prompt) - 1 + j, t].item() for j, t in enumerate(opener))


def test_log_odds_of_padded_rows_equal_each_opener_alone(tiny_policy):
    model, tokenizer = tiny_policy
    prompts = [_ids(tokenizer, "Who founded Entity1?"), _ids(tokenizer, "When was the second largest city built?")]
    openers = [_ids(tokenizer, o) for o in ["<think> one", "<think> two facts and more"]]  # unequal lengths
    odds = opener_log_odds(model, prompts, openers, pad_id=tokenizer.pad_token_id)
    for prompt, value in zip(prompts, odds.tolist()):
        alone = _sequence_logp(model, prompt, openers[1]) - _sequence_logp(model, prompt, openers[0])
        assert value == pytest.approx(alone, abs=1e-4)
    with pytest.raises(ValueError, match="two non-empty openers"):
        opener_log_odds(model, prompts, openers[:1], pad_id=tokenizer.pad_token_id)


def test_the_penalty_pulls_back_the_shared_shift_and_keeps_the_differences(tiny_policy):
    model, tokenizer = tiny_policy
    reference = copy.deepcopy(model).eval()
    policy = copy.deepcopy(model)
    openers = [_ids(tokenizer, o) for o in OPENERS]
    prompts = [_ids(tokenizer, f"Question {i}: who wrote Book{i}?") for i in range(4)]
    pad = tokenizer.pad_token_id
    with torch.no_grad():
        ref = opener_log_odds(reference, prompts, openers, pad)
        assert anchor_penalty(opener_log_odds(policy, prompts, openers, pad), ref, 1.0)[1] == pytest.approx(0, abs=1e-5)
        differing = next(b for a, b in zip(*openers) if a != b)  # the token where "two" departs from "one"
        policy.get_output_embeddings().weight[differing] *= 3.0  # its logit moves on every question
    shifted = opener_log_odds(policy, prompts, openers, pad).detach()
    _, before = anchor_penalty(shifted, ref, 1.0)
    assert abs(before) > 0.05  # the perturbation moved every question's choice
    optimizer = torch.optim.SGD(policy.parameters(), lr=1e-2)
    for _ in range(20):
        optimizer.zero_grad()
        penalty, _ = anchor_penalty(opener_log_odds(policy, prompts, openers, pad), ref, 1.0)
        penalty.backward()
        optimizer.step()
    after = opener_log_odds(policy, prompts, openers, pad).detach()
    assert abs(anchor_penalty(after, ref, 1.0)[1]) < 0.3 * abs(before)
    spread = lambda x: (x - x.mean()).abs().max().item()
    assert spread(after - ref) <= spread(shifted - ref) + 0.05  # not pulled apart on the way


def test_opener_anchor_needs_two_openers():
    with pytest.raises(ConfigError, match="give exactly two non-empty ones"):
        RunConfig.from_params({"opener_anchor": 1.0, "explore_openers": ["<think> a"]})
    with pytest.raises(ConfigError, match="opener_anchor must be >= 0"):
        RunConfig.from_params({"opener_anchor": -1.0})
    cfg = RunConfig.from_params({"opener_anchor": 0.5, "explore_openers": OPENERS, "num_generations": 4})
    assert cfg.rollout_config().opener_anchor == 0.5


def test_the_trainer_adds_the_anchor_once_per_step_and_logs_the_shift(tmp_path, tiny_policy_path, tokenizer):
    rows = [{"id": f"q{i}", "question": f"When was Entity{i} founded?", "golden_answers": ["1901"],
             "metadata": {"type": "single_hop" if i else "bridge"}} for i in range(2)]
    trainer, data = mini_trainer(tmp_path, tiny_policy_path, tokenizer, rows, ["em"], per_device_train_batch_size=8,
                                 num_generations=4, bf16=False,
                                 rollout=RolloutConfig(max_completion_tokens=24, explore_openers=OPENERS,
                                                       opener_anchor=2.0))
    assert isinstance(trainer.opener_anchor, OpenerAnchor)
    batch = trainer._generate_and_score_completions([dict(data[0])] * 4 + [dict(data[1])] * 4)
    assert len(trainer.opener_anchor.prompts) == 2  # each question once, with its reference log-odds
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer.train(); we call the loss directly
    anchor = trainer.opener_anchor
    assert anchor.take(trainer.model)[1]["search/opener_rate_shift"] == pytest.approx(0.0, abs=1e-5)  # the reference
    batch = trainer._generate_and_score_completions([dict(data[0])] * 4 + [dict(data[1])] * 4)
    reference = torch.tensor(anchor.reference_odds)
    anchor.reference_odds = (reference - 1.0).tolist()  # as if the policy had moved up by one logit
    expected = (torch.sigmoid(reference).mean() - torch.sigmoid(reference - 1.0).mean()).item()
    with_anchor = trainer.compute_loss(trainer.model, batch)
    metrics = trainer._metrics["train"]
    assert metrics["search/opener_rate_shift"][-1] == pytest.approx(expected, abs=1e-5) and expected > 0.1
    assert {k for k in metrics if k.startswith("search/opener_log_odds/")} == {
        "search/opener_log_odds/bridge", "search/opener_log_odds/single_hop"}
    assert not trainer.opener_anchor.prompts  # taken: the next micro-batch of this step adds nothing
    with torch.no_grad():  # the policy moves; the reference (a frozen copy: beta is 0, no PEFT) must not
        trainer.model.get_output_embeddings().weight.mul_(3.0)
    anchor.record([_ids(tokenizer, "Who founded Entity7?")], ["bridge"])
    assert abs(anchor.take(trainer.model)[1]["search/opener_rate_shift"]) > 1e-3
    without = trainer.compute_loss(trainer.model, batch)
    assert with_anchor.item() - without.item() == pytest.approx(2.0 * expected**2, abs=1e-5)  # weight * shift^2


def test_settings_built_for_one_process_are_refused_in_several(tmp_path):
    from searchrl.trainer.grpo_config import SearchGRPOConfig, refuse_one_process_settings

    def config(**settings):
        return SearchGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", **settings)

    anchored = config(rollout=RolloutConfig(explore_openers=OPENERS, opener_anchor=1.0), num_generations=4,
                      per_device_train_batch_size=4)
    refuse_one_process_settings(anchored, 1)
    with pytest.raises(ValueError, match="opener_anchor .* 2 processes"):
        refuse_one_process_settings(anchored, 2)
    with pytest.raises(ValueError, match="dynamic_sampling .* 2 processes"):
        refuse_one_process_settings(config(dynamic_sampling=True), 2)
    refuse_one_process_settings(config(), 2)
