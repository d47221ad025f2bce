"""explore_openers: training rollouts of a group start from given openers in turn, trained as the model's own text."""

from __future__ import annotations

import math
import random

import pandas as pd
import pytest

from fakes import FakeRetriever, MiniProtocol, ScriptedGenerator
from searchrl.config import ConfigError, RunConfig
from searchrl.rollout import RolloutConfig, SearchRollout
from searchrl.trainer import SearchGRPOConfig, SearchGRPOTrainer, prompt_dataset

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
    protocol = MiniProtocol()
    args = SearchGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4,
                            use_cpu=True, bf16=False, report_to="none", max_steps=1, save_strategy="no",
                            rollout_log_dir=str(tmp_path / "rollouts"),
                            rollout=RolloutConfig(max_completion_tokens=24, explore_openers=["", OPENERS[0]]))
    data = prompt_dataset(rows, protocol, tokenizer)
    trainer = SearchGRPOTrainer(model=str(tiny_policy_path), reward_funcs=[_random_reward], args=args,
                                train_dataset=data, retriever=FakeRetriever(), protocol=protocol,
                                processing_class=tokenizer)
    trainer.model.train()
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
