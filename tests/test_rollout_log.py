"""The training rollout log: every scored rollout on disk, with its draw, searches, rewards and advantage."""

from __future__ import annotations

import math
import random

import pandas as pd
import torch

from fakes import FakeRetriever, MiniProtocol
from searchrl.trainer import SearchGRPOConfig, SearchGRPOTrainer, prompt_dataset
from searchrl.trainer.levers.rollout_log import RolloutLog, mean_advantage


def test_draws_are_numbered_and_a_repeated_step_replaces_its_file(tmp_path):
    log = RolloutLog(tmp_path / "train")
    log.write(1, [{"id": "a"}])
    log.write(1, [{"id": "b"}, {"id": "c"}])  # dynamic sampling's extra draw
    rows = pd.read_json(log.path(1), lines=True)
    assert rows[["id", "draw", "step"]].values.tolist() == [["a", 0, 1], ["b", 1, 1], ["c", 1, 1]]
    RolloutLog(tmp_path / "train").write(1, [{"id": "d"}])  # a resumed run repeating step 1
    assert pd.read_json(log.path(1), lines=True)["id"].tolist() == ["d"]


def test_mean_advantage_over_trained_tokens():
    mask = torch.tensor([[1, 1, 0], [0, 0, 0]])
    assert mean_advantage(torch.tensor([0.5, -1.0]), mask)[0] == 0.5
    assert math.isnan(mean_advantage(torch.tensor([0.5, -1.0]), mask)[1])  # nothing trained: masked out
    per_token = torch.tensor([[1.0, 3.0, 100.0], [1.0, 1.0, 1.0]])
    assert mean_advantage(per_token, mask)[0] == 2.0  # the masked token's value is not counted


def reward_by_question(prompts, completions, question, **kwargs):
    return [0.0 if q.startswith("Constant") else random.random() for q in question]


def test_trainer_writes_every_scored_rollout(tmp_path, tiny_policy_path, tokenizer):
    rows = [{"id": "c", "question": "Constant question?", "golden_answers": ["x"], "metadata": {"type": "single_hop"}},
            {"id": "v", "question": "Varied question?", "golden_answers": ["y"], "metadata": {"type": "inference"}}]
    protocol = MiniProtocol()
    args = SearchGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2,
                            max_completion_length=8, use_cpu=True, report_to="none", max_steps=1,
                            save_strategy="no", dynamic_sampling=True, dynamic_sampling_max_draws=1,
                            rollout_log_dir=str(tmp_path / "rollouts"))
    data = prompt_dataset(rows, protocol, tokenizer)
    trainer = SearchGRPOTrainer(model=str(tiny_policy_path), reward_funcs=[reward_by_question], args=args,
                                train_dataset=data, retriever=FakeRetriever(), protocol=protocol,
                                processing_class=tokenizer)
    trainer.model.train()
    batch = trainer._generate_and_score_completions([dict(data[0]), dict(data[0]), dict(data[1]), dict(data[1])])
    logged = pd.read_json(tmp_path / "rollouts" / "step-0001.jsonl", lines=True)
    assert len(logged) == 8 and logged["draw"].tolist() == [0] * 4 + [1] * 4  # the scheduled batch, one extra draw
    first = logged[logged["draw"] == 0]
    assert first["id"].tolist() == ["c", "c", "v", "v"] and first["group"].tolist() == [0, 0, 1, 1]
    assert first["qtype"].tolist() == ["single_hop", "single_hop", "inference", "inference"]
    assert first["golden_answers"].tolist()[0] == ["x"]
    assert (first["reward"] == first["rewards"].map(lambda r: r["reward_by_question"])).all()
    assert first["reward"].tolist()[:2] == [0.0, 0.0]
    assert first["advantage"].iloc[:2].isna().all()  # the zero-variance group is masked out of the update
    assert all(isinstance(n, int) for n in logged["searches"])
    assert logged["completion"].map(len).gt(0).all()
    assert batch["completion_ids"].size(0) == 4


def test_off_by_default(tmp_path):
    args = SearchGRPOConfig(output_dir=str(tmp_path), use_cpu=True, report_to="none", max_steps=1)
    assert args.rollout_log_dir == ""


def test_read_and_summarise_rollouts(tmp_path):
    from searchrl.trainer.levers.rollout_log import read_rollouts, step_summary

    log = RolloutLog(tmp_path / "train" / "rl")
    log.write(1, [{"group": 0, "qtype": "inference", "reward": 1.0, "searches": 2},
                  {"group": 0, "qtype": "inference", "reward": -1.0, "searches": 1},
                  {"group": 1, "qtype": "single_hop", "reward": 1.0, "searches": 1},
                  {"group": 1, "qtype": "single_hop", "reward": 1.0, "searches": 1}])
    log.write(2, [{"group": 0, "qtype": "inference", "reward": 1.0, "searches": 2},
                  {"group": 0, "qtype": "inference", "reward": 1.0, "searches": 2}])
    rollouts = read_rollouts(tmp_path / "train")
    assert len(rollouts) == 6 and set(rollouts["stage"]) == {"rl"}
    table = step_summary(rollouts)
    first = table.loc[("rl", 1, "inference")]
    assert first["rollouts"] == 2 and first["reward"] == 0.0 and first["searched_twice"] == 0.5
    assert first["informative_groups"] == 1.0 and table.loc[("rl", 1, "single_hop"), "informative_groups"] == 0.0
    assert table.loc[("rl", 2, "inference"), "searches"] == 2.0
    assert read_rollouts(tmp_path / "nothing").empty and step_summary(pd.DataFrame()).empty


def test_a_training_rollout_renders_with_its_reward_and_advantage():
    from searchrl.evaluation.render import render_trajectory

    html = render_trajectory({"completion": "<answer>1901</answer>", "question": "When?", "golden_answers": ["1901"],
                              "reward": 1.0, "advantage": 0.5, "searches": 0}, "search_r1")
    assert "<b>Scored:</b> reward=1.00, advantage=0.50, searches=0" in html
