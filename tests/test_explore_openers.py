"""explore_openers: training rollouts of a group start from given openers in turn, trained as the model's own text."""

from __future__ import annotations

import math
import random

import pandas as pd
import pytest
import torch

from fakes import FakeRetriever, MiniProtocol, ScriptedGenerator, mini_trainer
from searchrl.config import ConfigError, RunConfig
from searchrl.rollout import RolloutConfig, SearchRollout
from searchrl.trainer import SearchGRPOConfig
from searchrl.trainer.levers.opener_advantage import centered_opener_advantages

OPENERS = ["<think> one fact", "<think> two facts"]


def _run(tokenizer, scripts, openers, explore=True):
    gen = ScriptedGenerator(tokenizer, scripts)
    engine = SearchRollout(MiniProtocol(), FakeRetriever(), tokenizer, gen,
                           RolloutConfig(explore_openers=openers), explore=explore)
    prompts = [tokenizer(f"question {i}", add_special_tokens=False)["input_ids"] for i in range(len(scripts))]
    return engine.run(prompts), gen


def test_each_row_of_a_group_starts_from_its_opener_trained_as_sampled(tokenizer):
    turn = ":</think><answer>a</answer>"
    trajs, _ = _run(tokenizer, [[turn]] * 4, ["", OPENERS[1]])
    assert [t.opener for t in trajs] == ["", OPENERS[1], "", OPENERS[1]]
    opener_ids = tokenizer(OPENERS[1], add_special_tokens=False)["input_ids"]
    free, opened = trajs[0], trajs[1]
    assert opened.completion_ids[: len(opener_ids)] == opener_ids
    assert opened.env_mask == [1] * len(opened.completion_ids)  # the opener is trained, as the model's turn after it
    assert all(math.isnan(x) for x in opened.logprobs[: len(opener_ids)])  # never sampled: no sampling log-prob
    assert opened.completion_ids[len(opener_ids):] == free.completion_ids  # the model's turn follows the opener
    assert tokenizer.decode(opened.completion_ids).startswith(OPENERS[1] + ":</think>")
    assert opened.finish == free.finish == "eos"


def test_evaluation_never_uses_openers(tokenizer):
    trajs, _ = _run(tokenizer, [["<answer>a</answer>"]] * 2, OPENERS, explore=False)
    assert [t.opener for t in trajs] == ["", ""] and [t.opener_index for t in trajs] == [-1, -1]
    assert tokenizer.decode(trajs[1].completion_ids).startswith("<answer>")


def test_an_opener_holding_a_tag_is_refused_before_any_rollout(tokenizer):
    gen = ScriptedGenerator(tokenizer, [["<answer>a</answer>"]] * 2)
    with pytest.raises(ValueError, match="reasoning text"):  # at construction, so a bad opener costs no generation
        SearchRollout(MiniProtocol(), FakeRetriever(), tokenizer, gen,
                      RolloutConfig(explore_openers=["<think> x</think><search>"]), explore=True)


def test_identical_openers_keep_their_own_index(tokenizer):
    trajs, _ = _run(tokenizer, [[":</think><answer>a</answer>"]] * 4, [OPENERS[0], OPENERS[0]])
    assert [t.opener_index for t in trajs] == [0, 1, 0, 1]
    assert [t.opener for t in trajs] == [OPENERS[0]] * 4
    assert trajs[0].completion_ids == trajs[1].completion_ids  # the same text, encoded once, appended to each row
    assert trajs[0].completion_ids is not trajs[1].completion_ids


def test_openers_are_validated():
    with pytest.raises(ValueError, match="only empty openers"):
        RolloutConfig(explore_openers=["", ""])
    with pytest.raises(ValueError, match="list of strings"):
        RolloutConfig(explore_openers=["a", 3])
    with pytest.raises(ConfigError, match="multiple of the number of explore_openers"):
        RunConfig.from_params({"explore_openers": ["", "a", "b"], "num_generations": 4})
    assert RunConfig.from_params({"explore_openers": OPENERS, "num_generations": 4}).rollout_config().explore_openers \
        == OPENERS


def test_vllm_refuses_trained_tokens_it_did_not_sample(tmp_path):
    with pytest.raises(ValueError, match="importance-sampling"):
        SearchGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", use_vllm=True,
                         rollout=RolloutConfig(explore_openers=OPENERS))


def _random_reward(prompts, completions, **kwargs):
    return [random.random() for _ in completions]


def test_the_trainer_trains_the_opener_and_logs_what_each_opener_earned(tmp_path, tiny_policy_path, tokenizer):
    rows = [{"id": "q0", "question": "When was Entity1 founded?", "golden_answers": ["1901"], "metadata": {}}]
    trainer, data = mini_trainer(tmp_path, tiny_policy_path, tokenizer, rows, [_random_reward],
                                 per_device_train_batch_size=4, num_generations=4, bf16=False,
                                 rollout_log_dir=str(tmp_path / "rollouts"),
                                 rollout=RolloutConfig(max_completion_tokens=24, explore_openers=["", OPENERS[0]]))
    batch = trainer._generate_and_score_completions([dict(data[0])] * 4)
    opener_ids = tokenizer(OPENERS[0], add_special_tokens=False)["input_ids"]
    n = len(opener_ids)
    for row in (1, 3):
        assert batch["completion_ids"][row, :n].tolist() == opener_ids
        assert batch["tool_mask"][row, :n].tolist() == [1] * n and batch["completion_mask"][row, :n].all()
    assert batch["completion_ids"][0, :n].tolist() != opener_ids
    metrics = trainer._metrics["train"]
    assert len(metrics["search/reward_by_opener/free"]) == len(metrics["search/reward_by_opener/1"]) == 1
    logged = pd.read_json(tmp_path / "rollouts" / "step-0001.jsonl", lines=True)
    assert logged["opener"].tolist() == ["", OPENERS[0], "", OPENERS[0]]
    assert logged["completion"].iloc[1].startswith(OPENERS[0])


def _flat_on_entity0(prompts, completions, **kwargs):
    return [0.0 if "Entity0" in str(p) else random.random() for p in prompts]


def test_centred_opener_advantages_sum_to_zero_per_opener_and_leave_the_rest():
    # two groups of 4, openers 0/1 in turn; the second group's opener-0 rollouts won, the first group's lost
    advantages = torch.tensor([-1.0, 1.0, -1.0, 1.0, 1.0, -1.0, 1.0, -1.0])
    index = torch.tensor([0, 1, 0, 1, 0, 1, 0, 1])
    lengths = [2, 3]
    mask = torch.ones(8, 6)
    out, removed = centered_opener_advantages(advantages, index, lengths, mask)
    assert removed == [0.0, 0.0]  # balanced: nothing shared to remove
    assert torch.equal(out, advantages.unsqueeze(1).expand(8, 6))
    # the first group's rollouts are masked out (a dropped group): the second group alone sets the means
    mask[:4] = 0
    out, removed = centered_opener_advantages(advantages, index, lengths, mask)
    assert removed == [1.0, -1.0]
    for opener in (0, 1):
        rows = (index == opener).nonzero().flatten()[2:]
        span = out[rows, : lengths[opener]]
        assert span.sum().item() == pytest.approx(0.0)  # no shared push left on this opener
    assert torch.equal(out[:, 3:], advantages.unsqueeze(1).expand(8, 3))  # after every opener: the rollout's own
    assert out[0, :2].tolist() == [-2.0, -2.0] and out[1, :3].tolist() == [2.0, 2.0, 2.0]


def test_centring_skips_free_rollouts_and_needs_openers():
    advantages = torch.tensor([[0.5, 0.5, 0.5], [-0.5, -0.5, -0.5]])
    out, removed = centered_opener_advantages(advantages, torch.tensor([-1, 0]), [2, 1], torch.ones(2, 3))
    assert removed == [-0.5, None]  # opener 1 started no rollout
    assert out[0].tolist() == [0.5, 0.5, 0.5] and out[1].tolist() == [0.0, 0.0, -0.5]
    with pytest.raises(ValueError, match="do not match the mask"):
        centered_opener_advantages(advantages, torch.tensor([0, 0]), [1], torch.ones(2, 4))
    with pytest.raises(ConfigError, match="give explore_openers"):
        RunConfig.from_params({"center_opener_advantage": True})
    assert RunConfig.from_params({"center_opener_advantage": True, "explore_openers": OPENERS,
                                  "num_generations": 4}).rollout_config().center_opener_advantage


def test_the_trainer_centres_the_opener_tokens_after_the_refills(tmp_path, tiny_policy_path, tokenizer):
    rows = [{"id": f"q{i}", "question": f"When was Entity{i} founded?", "golden_answers": ["1901"], "metadata": {}}
            for i in range(3)]
    trainer, data = mini_trainer(tmp_path, tiny_policy_path, tokenizer, rows, [_flat_on_entity0],
                                 per_device_train_batch_size=8, num_generations=4, bf16=False,
                                 dynamic_sampling=True, dynamic_sampling_max_draws=8,
                                 rollout=RolloutConfig(max_completion_tokens=24, explore_openers=OPENERS,
                                                       center_opener_advantage=True))
    batch = trainer._generate_and_score_completions([dict(data[0])] * 4 + [dict(data[1])] * 4)
    assert "opener_index" not in batch  # TRL's loss sees its own keys only
    advantages = batch["advantages"]
    assert advantages.shape == batch["completion_mask"].shape
    assert trainer._metrics["train"]["search/dynamic_extra_draws"][-1] >= 1  # q0's flat group was refilled
    trained = batch["completion_mask"][:, 0].bool()
    assert trained.sum() == 8  # the refill took the flat group's place
    lengths = [len(tokenizer(o, add_special_tokens=False)["input_ids"]) for o in OPENERS]
    removed = trainer._metrics["train"]
    for opener, n in enumerate(lengths):
        rows_of = [r for r in range(opener, len(trained), 2) if trained[r]]
        span = advantages[rows_of, :n]
        assert span.sum().item() == pytest.approx(0.0, abs=1e-5)
        own = advantages[rows_of, n]  # the first token after the opener keeps the rollout's advantage
        shift = removed[f"search/opener_advantage_removed/{opener}"][-1]
        assert torch.allclose(span[:, 0], own - shift, atol=1e-6)
