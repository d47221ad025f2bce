"""DAPO dynamic sampling: a batch is refilled with groups whose rewards differ, instead of shrinking."""

from __future__ import annotations

import random
from collections import Counter

import pytest
import torch

from fakes import mini_trainer
from searchrl.trainer import SearchGRPOConfig
from searchrl.trainer.levers.dynamic_sampling import (
    concat_batches,
    extra_draw_size,
    informative_groups,
    take_rows,
    take_within_quota,
)
from searchrl.trainer.levers.prompt_selection import draw_of_types


def test_helpers_find_informative_groups_and_join_batches_padding_each_side():
    assert informative_groups(torch.tensor([1.0, 1.0, 0.0, 1.0, 2.0, 2.0]), 2).tolist() == [False, True, False]
    a = {"prompt_ids": torch.tensor([[5, 6]]), "completion_ids": torch.tensor([[7]]), "advantages": torch.tensor([1.0]),
         "num_items_in_batch": torch.tensor(9)}
    b = {"prompt_ids": torch.tensor([[1, 2, 3], [4, 5, 6]]), "completion_ids": torch.tensor([[8, 9], [1, 1]]),
         "advantages": torch.tensor([2.0, 3.0]), "num_items_in_batch": torch.tensor(4)}
    joined = concat_batches([a, take_rows(b, torch.tensor([1]), 2)], 1)
    assert joined["prompt_ids"].tolist() == [[0, 5, 6], [4, 5, 6]]  # prompts are left-padded, as TRL pads them
    assert joined["completion_ids"].tolist() == [[7, 0], [1, 1]]  # completions right-padded
    assert joined["advantages"].tolist() == [1.0, 3.0]
    assert joined["num_items_in_batch"].item() == 9  # not per-sample: left for the caller to recompute


def reward_by_question(prompts, completions, question, **kwargs):
    # "constant" questions always score 0 (a zero-variance group); "varied" ones score at random.
    return [0.0 if q.startswith("Constant") else random.random() for q in question]


def dynamic_trainer(tmp_path, policy_path, tokenizer, **settings):
    """A trainer with dynamic sampling on the constant and the varied question (data rows 0 and 1)."""
    rows = [{"id": "c", "question": "Constant question?", "golden_answers": ["x"], "metadata": {}},
            {"id": "v", "question": "Varied question?", "golden_answers": ["y"], "metadata": {}}]
    trainer, data = mini_trainer(tmp_path, policy_path, tokenizer, rows, [reward_by_question], num_generations=2,
                                 max_completion_length=8, dynamic_sampling=True, **settings)
    assert trainer.args.drop_zero_variance  # implied: groups still uninformative after the last draw stay masked
    return trainer, data


def assert_every_group_varied(batch, data, tokenizer):
    varied = tokenizer(data[1]["prompt"], add_special_tokens=False)["input_ids"]
    for ids, mask in zip(batch["prompt_ids"], batch["prompt_mask"]):
        assert ids[mask.bool()].tolist() == varied  # every group now comes from the varied question
    assert (batch["completion_mask"].sum(dim=1) > 0).all()  # and none is masked out


def test_a_zero_variance_group_is_replaced_by_an_informative_one(tmp_path, tiny_policy_path, tokenizer):
    trainer, data = dynamic_trainer(tmp_path, tiny_policy_path, tokenizer, per_device_train_batch_size=4,
                                    dynamic_sampling_max_draws=2)
    inputs = [dict(data[0]), dict(data[0]), dict(data[1]), dict(data[1])]  # one constant group, one varied
    batch = trainer._generate_and_score_completions(inputs)
    assert batch["completion_ids"].size(0) == 4
    assert_every_group_varied(batch, data, tokenizer)
    assert batch["num_items_in_batch"] == (batch["completion_mask"] * batch.get("tool_mask", 1)).sum()
    assert trainer._metrics["train"]["search/informative_group_frac"] == [1.0]
    assert trainer._metrics["train"]["search/dynamic_extra_draws"] == [1.0]
    assert trainer._metrics["train"]["search/dynamic_extra_questions"] == [2.0]  # a whole batch of 2 questions
    # TRL's reward averages both scored batches; the scheduled reward is the first batch's alone.
    assert len(trainer._metrics["train"]["reward"]) == 2
    assert trainer._metrics["train"]["search/scheduled_reward"] == [
        pytest.approx(trainer._metrics["train"]["reward"][0])]


def test_a_shortfall_draw_asks_for_what_the_missing_groups_need_at_the_rate_seen():
    assert extra_draw_size("batch", missing=4, found=12, drawn=16, batch=16) == 16
    assert extra_draw_size("shortfall", missing=4, found=12, drawn=16, batch=16) == 6  # 4 / 0.75
    assert extra_draw_size("shortfall", missing=1, found=12, drawn=16, batch=16) == 2  # rounded up, never 0
    assert extra_draw_size("shortfall", missing=15, found=1, drawn=16, batch=16) == 16  # never more than a batch
    assert extra_draw_size("shortfall", missing=16, found=0, drawn=16, batch=16) == 16  # no rate yet: a batch
    assert extra_draw_size("shortfall", missing=0, found=16, drawn=16, batch=16) == 0
    with pytest.raises(ValueError, match="shortfall"):
        extra_draw_size("half", missing=1, found=1, drawn=2, batch=2)


def test_a_shortfall_draw_generates_fewer_rollouts_and_still_fills_the_batch(tmp_path, tiny_policy_path, tokenizer):
    trainer, data = dynamic_trainer(tmp_path, tiny_policy_path, tokenizer, per_device_train_batch_size=8,
                                    dynamic_sampling_max_draws=1, dynamic_sampling_draw="shortfall")
    scored = []
    score = trainer._scored_batch
    trainer._scored_batch = lambda inputs: scored.append(len(inputs)) or score(inputs)
    # three varied groups and one constant: one group missing at a rate of 3/4, so the draw takes 2 questions
    # (both rows of the data: one of them varied), not a batch of 4
    inputs = [dict(data[0])] * 2 + [dict(data[1])] * 6
    batch = trainer._generate_and_score_completions(inputs)
    assert scored == [8, 4]
    assert trainer._metrics["train"]["search/dynamic_extra_questions"] == [2.0]
    assert batch["completion_ids"].size(0) == 8
    assert_every_group_varied(batch, data, tokenizer)
    assert trainer._metrics["train"]["search/informative_group_frac"] == [1.0]
    with pytest.raises(ValueError, match="dynamic_sampling_draw"):
        SearchGRPOConfig(output_dir=str(tmp_path), dynamic_sampling=True, dynamic_sampling_draw="half", use_cpu=True)


def test_a_refill_under_stratified_selection_draws_the_missing_types_and_keeps_the_mix():
    qtypes = ["single_hop", "bridge", "single_hop", "inference", "bridge"]
    generator = torch.Generator().manual_seed(0)
    drawn = draw_of_types(qtypes, ["bridge", "inference"], 5, generator)
    assert [qtypes[i] for i in drawn] == ["bridge", "inference", "bridge", "inference", "bridge"]
    assert sorted(drawn[0:3:2]) == [1, 4]  # no repeat until the type's questions are used up
    with pytest.raises(ValueError, match="comparison"):
        draw_of_types(qtypes, ["comparison"], 1, generator)
    # Two single-hop groups were missing: an extra draw's surplus single-hop and its bridge group stay out.
    missing = Counter({"single_hop": 2, "bridge": 0})
    keep = torch.tensor([True, True, False, True, True])
    assert take_within_quota(keep, ["bridge", "single_hop", "single_hop", "single_hop", "single_hop"], missing) == [1, 3]
    assert missing["single_hop"] == 0


def test_a_stratified_trainer_refills_a_group_with_its_own_type(tmp_path, tiny_policy_path, tokenizer):
    rows = [{"id": "c", "question": "Constant question?", "golden_answers": ["x"], "metadata": {"type": "single_hop"}},
            {"id": "v", "question": "Varied question?", "golden_answers": ["y"], "metadata": {"type": "single_hop"}},
            {"id": "b", "question": "Varied bridge?", "golden_answers": ["z"], "metadata": {"type": "bridge"}}]
    trainer, data = mini_trainer(tmp_path, tiny_policy_path, tokenizer, rows, [reward_by_question], num_generations=2,
                                 max_completion_length=8, dynamic_sampling=True, dynamic_sampling_max_draws=6,
                                 prompt_selection="stratified", per_device_train_batch_size=4)
    scored = []
    score = trainer._scored_batch
    trainer._scored_batch = lambda inputs: scored.append([r["id"] for r in inputs]) or score(inputs)
    # the single-hop group is constant: every refill draws single-hop questions until the varied one comes up
    batch = trainer._generate_and_score_completions([dict(data[0])] * 2 + [dict(data[2])] * 2)
    assert all(qid in {"c", "v"} for draw in scored[1:] for qid in draw)
    prompts = {tokenizer.decode(ids[mask.bool()]) for ids, mask in zip(batch["prompt_ids"], batch["prompt_mask"])}
    assert prompts == {data[1]["prompt"], data[2]["prompt"]}  # one single-hop and one bridge group, as scheduled
    assert trainer._metrics["train"]["search/informative_group_frac"] == [1.0]


def test_refills_that_overshoot_never_grow_the_batch(tmp_path, tiny_policy_path, tokenizer):
    rows = [{"id": "c", "question": "Constant question?", "golden_answers": ["x"], "metadata": {}},
            {"id": "v", "question": "Varied question?", "golden_answers": ["y"], "metadata": {}},
            {"id": "w", "question": "Varied again?", "golden_answers": ["z"], "metadata": {}}]
    trainer, data = mini_trainer(tmp_path, tiny_policy_path, tokenizer, rows, [reward_by_question], num_generations=2,
                                 max_completion_length=8, dynamic_sampling=True, dynamic_sampling_max_draws=2,
                                 per_device_train_batch_size=8)
    # one informative group of four; each whole-batch draw takes all three questions (two informative), so the
    # second draw brings five informative groups for four places: the batch keeps four, with no filler added
    batch = trainer._generate_and_score_completions([dict(data[1])] * 2 + [dict(data[0])] * 6)
    assert trainer._metrics["train"]["search/dynamic_extra_draws"] == [2.0]
    assert batch["completion_ids"].size(0) == 8
    assert (batch["completion_mask"].sum(dim=1) > 0).all()
    assert trainer._metrics["train"]["search/informative_group_frac"] == [1.0]


def recording_draws(trainer) -> list[list[str]]:
    """The ids of every extra draw `trainer` makes from now on (one list per draw)."""
    drawn, draw = [], trainer._draw_questions

    def recorded(n, types=None):
        rows = draw(n, types)
        drawn.append([row["id"] for row in rows])
        return rows

    trainer._draw_questions = recorded
    return drawn


def test_a_resumed_run_continues_the_extra_draws_where_its_checkpoint_left_them(tmp_path, tiny_policy_path, tokenizer):
    # The extra draws have a random stream of their own; a resume that restarted it from the seed would redraw the
    # run's first extra questions (a resumed arm then parted from an uninterrupted one at its first resumed step).
    rows = [{"id": f"c{i}", "question": f"Constant question {i}?", "golden_answers": ["x"], "metadata": {}}
            for i in range(5)] + [{"id": "v", "question": "Varied question?", "golden_answers": ["y"], "metadata": {}}]
    settings = {"num_generations": 2, "max_completion_length": 8, "dynamic_sampling": True,
                "dynamic_sampling_max_draws": 2, "per_device_train_batch_size": 4, "max_steps": 3,
                "save_strategy": "steps", "save_steps": 1, "logging_steps": 1, "seed": 3}
    whole, _ = mini_trainer(tmp_path / "whole", tiny_policy_path, tokenizer, rows, [reward_by_question], **settings)
    drawn = recording_draws(whole)
    whole.train()
    cut = int(whole.state.log_history[0]["search/dynamic_extra_draws"])  # draws made in step 1
    assert 0 < cut < len(drawn)  # extra draws on both sides of the checkpoint the other run resumes from

    resumed, _ = mini_trainer(tmp_path / "resumed", tiny_policy_path, tokenizer, rows, [reward_by_question],
                              **settings)
    again = recording_draws(resumed)
    resumed.train(resume_from_checkpoint=str(tmp_path / "whole" / "checkpoint-1"))
    assert again == drawn[cut:]

    def logged(trainer):  # the log history comes back with the checkpoint: step 1 is the uninterrupted run's
        return [h[k] for h in trainer.state.log_history if "loss" in h for k in ("step", "reward", "loss", "grad_norm")]
    assert logged(resumed) == pytest.approx(logged(whole))  # so it trained the uninterrupted run's steps 2 and 3
    assert any(h["grad_norm"] > 0 for h in resumed.state.log_history[1:] if "grad_norm" in h)
