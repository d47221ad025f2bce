"""Which questions each step draws: difficulty-aware selection from the rollouts already made (prompt_selection:
informative) and equal shares of the question types in every step (stratified)."""

from __future__ import annotations

import json
import random

import pytest
import torch

from fakes import FakeRetriever, MiniProtocol
from searchrl.trainer import SearchGRPOConfig, SearchGRPOTrainer, prompt_dataset
from searchrl.trainer.levers.prompt_selection import (
    RECHECK_WEIGHT,
    InformativeSampler,
    SelectionRecord,
    StratifiedSampler,
)


def test_weights_are_the_smoothed_informative_share_of_the_type_and_lower_for_a_question_last_uninformative():
    record = SelectionRecord()
    assert record.weight("q1", "bridge") == 0.5  # nothing seen: (0 + 1) / (0 + 2)
    record.record(["q1", "q2", "q3"], ["bridge", "bridge", "inference"], [False, True, False])
    record.record(["q2"], ["bridge"], [False])
    # bridge: 1 informative group of 3 -> (1 + 1) / (3 + 2); q1 and q2 were last uninformative.
    assert abs(record.type_rate("bridge") - 0.4) < 1e-12
    assert abs(record.weight("q1", "bridge") - 0.4 * RECHECK_WEIGHT) < 1e-12
    assert abs(record.weight("q2", "bridge") - 0.4 * RECHECK_WEIGHT) < 1e-12
    assert abs(record.weight("q9", "bridge") - 0.4) < 1e-12  # an unseen question of a seen type
    assert abs(record.weight("q3", "inference") - (1 / 3) * RECHECK_WEIGHT) < 1e-12
    restored = SelectionRecord()
    restored.load_state_dict(json.loads(json.dumps(record.state_dict())))
    assert restored.weight("q1", "bridge") == record.weight("q1", "bridge")


def test_draws_follow_the_weights_and_never_repeat_within_a_draw():
    record = SelectionRecord()
    record.record([f"b{i}" for i in range(20)], ["bridge"] * 20, [False] * 20)  # never informative: 1/22
    record.record([f"s{i}" for i in range(20)], ["single_hop"] * 20, [True] * 20)  # always: 21/22
    ids, types = ["b-new", "s-new"], ["bridge", "single_hop"]
    gen = torch.Generator().manual_seed(0)
    picks = [record.draw(ids, types, [0, 1], 1, gen)[0] for _ in range(2000)]
    assert 0.93 < picks.count(1) / len(picks) < 0.98  # expected 21/22 = 0.955
    both = record.draw(ids, types, [0, 1], 2, gen)
    assert sorted(both) == [0, 1]


def test_the_sampler_keeps_trls_layout_and_each_question_once_per_epoch():
    ids = [f"q{i}" for i in range(7)]
    sampler = InformativeSampler(ids, ["t"] * 7, SelectionRecord(), mini_repeat_count=2, batch_size=3,
                                 repeat_count=2, seed=0)
    out = list(sampler)
    assert len(out) == len(sampler) == 2 * 3 * 2 * 2  # two whole batches of 3 questions; the 7th is left over
    for start in range(0, len(out), 12):
        block = out[start:start + 12]
        chunk = block[0:6:2]
        assert len(set(chunk)) == 3
        assert block == [i for i in chunk for _ in range(2)] * 2  # mini-repeats, then the batch repeated
    assert not set(out[:12]) & set(out[12:])


def test_the_sampler_draws_each_batch_with_the_record_as_it_stands_then():
    ids = [f"a{i}" for i in range(50)] + [f"b{i}" for i in range(50)]
    types = ["a"] * 50 + ["b"] * 50
    record = SelectionRecord()
    sampler = iter(InformativeSampler(ids, types, record, mini_repeat_count=1, batch_size=10, repeat_count=1, seed=1))
    first = [next(sampler) for _ in range(10)]
    assert 2 <= sum(i < 50 for i in first) <= 8  # no evidence yet: both types alike
    record.record([f"x{i}" for i in range(40)], ["a"] * 40, [False] * 40)  # type a: never informative
    record.record([f"y{i}" for i in range(40)], ["b"] * 40, [True] * 40)
    later = [next(sampler) for _ in range(30)]
    assert sum(i >= 50 for i in later) >= 27  # weights 1/42 against 41/42


def reward_by_type(prompts, completions, qtype, **kwargs):
    # "flat" questions always score 0 (zero-variance groups); "varied" ones score at random.
    return [0.0 if t == "flat" else random.random() for t in qtype]


def test_the_trainer_records_groups_draws_with_them_and_saves_the_record_in_checkpoints(
        tmp_path, tiny_policy_path, tokenizer):
    rows = [{"id": f"{t}{i}", "question": f"Question {t} {i}?", "golden_answers": ["x"], "metadata": {"type": t}}
            for t in ("flat", "varied") for i in range(6)]
    protocol = MiniProtocol()
    args = SearchGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2,
                            max_completion_length=8, use_cpu=True, report_to="none", max_steps=3,
                            save_strategy="steps", save_steps=1, prompt_selection="informative", seed=3)
    data = prompt_dataset(rows, protocol, tokenizer)
    trainer = SearchGRPOTrainer(model=str(tiny_policy_path), reward_funcs=[reward_by_type], args=args,
                                train_dataset=data, retriever=FakeRetriever(), protocol=protocol,
                                processing_class=tokenizer)
    assert isinstance(trainer._get_train_sampler(), InformativeSampler)
    trainer.train()
    counts = trainer.selection.by_type
    assert sum(n for _, n in counts.values()) == 3 * 2  # two groups a step, three steps
    assert counts.get("flat", [0, 0])[0] == 0  # a flat group is never informative
    assert counts.get("varied", [0, 0])[0] == counts.get("varied", [0, 0])[1]  # random rewards always differ
    saved = json.loads((tmp_path / "checkpoint-3" / "prompt_selection.json").read_text())
    assert saved["by_type"] == {k: list(v) for k, v in counts.items()}
    resumed = SearchGRPOTrainer(model=str(tiny_policy_path), reward_funcs=[reward_by_type], args=args,
                                train_dataset=data, retriever=FakeRetriever(), protocol=protocol,
                                processing_class=tokenizer)
    resumed.create_optimizer_and_scheduler(num_training_steps=3)
    resumed._load_optimizer_and_scheduler(str(tmp_path / "checkpoint-3"))
    assert resumed.selection.by_type == trainer.selection.by_type


def test_uniform_selection_keeps_trls_sampler(tmp_path, tiny_policy_path, tokenizer):
    from trl.trainer.utils import RepeatSampler

    protocol = MiniProtocol()
    data = prompt_dataset([{"id": "a", "question": "A?", "golden_answers": ["x"], "metadata": {}}] * 2, protocol,
                          tokenizer)
    args = SearchGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2,
                            max_completion_length=8, use_cpu=True, report_to="none", max_steps=1, save_strategy="no")
    trainer = SearchGRPOTrainer(model=str(tiny_policy_path), reward_funcs=[reward_by_type], args=args,
                                train_dataset=data, retriever=FakeRetriever(), protocol=protocol,
                                processing_class=tokenizer)
    assert isinstance(trainer._get_train_sampler(), RepeatSampler)


def test_stratified_batches_hold_the_types_in_equal_shares_and_each_question_once_an_epoch():
    qtypes = ["bridge"] * 5 + ["inference"] * 5 + ["single_hop"] * 5
    sampler = StratifiedSampler(qtypes, mini_repeat_count=2, batch_size=3, repeat_count=2, seed=0)
    indices = list(sampler)
    assert len(indices) == len(sampler) == 5 * 3 * 2 * 2
    batches = [indices[i:i + 12] for i in range(0, len(indices), 12)]  # 3 questions x 2 rollouts x 2 windows
    seen = []
    for batch in batches:
        questions = batch[::2][:3]
        assert batch == [q for q in questions for _ in range(2)] * 2  # TRL's layout: repeats, then windows
        assert sorted(qtypes[q] for q in questions) == ["bridge", "inference", "single_hop"]
        seen += questions
    assert sorted(seen) == list(range(15))
    again = list(sampler)  # the next epoch is shuffled anew, with the same shares
    assert again != indices and sorted(again) == sorted(indices)
    assert list(StratifiedSampler(qtypes, mini_repeat_count=2, batch_size=3, repeat_count=2, seed=0)) == indices


def test_type_weights_give_a_type_several_places_in_every_stratified_batch():
    qtypes = ["bridge"] * 4 + ["inference"] * 4 + ["single_hop"] * 8
    sampler = StratifiedSampler(qtypes, mini_repeat_count=1, batch_size=4, repeat_count=1, seed=1,
                                type_weights={"single_hop": 2})
    indices = list(sampler)
    assert sorted(indices) == list(range(16))  # every question once an epoch
    for start in range(0, 16, 4):
        assert sorted(qtypes[q] for q in indices[start:start + 4]) == ["bridge", "inference", "single_hop",
                                                                       "single_hop"]
    # When the heavy type runs out first, the others go on in turn.
    short = StratifiedSampler(["a"] * 2 + ["b"] * 4, mini_repeat_count=1, batch_size=2, repeat_count=1, seed=0,
                              type_weights={"a": 2})
    order = ["ab"[q >= 2] for q in short.order()]
    assert order == ["a", "a", "b", "b", "b", "b"]


def test_type_weights_are_checked_before_anything_runs():
    from searchrl.config import ConfigError, RunConfig

    ok = RunConfig.from_params({"prompt_selection": "stratified", "train_question_types": ["single_hop", "bridge"],
                                "train_type_weights": {"single_hop": 2}})
    assert ok.train_type_weights == {"single_hop": 2}
    with pytest.raises(ConfigError, match="needs prompt_selection: stratified"):
        RunConfig.from_params({"train_type_weights": {"single_hop": 2}})
    with pytest.raises(ConfigError, match="not in train_question_types"):
        RunConfig.from_params({"prompt_selection": "stratified", "train_question_types": ["bridge"],
                               "train_type_weights": {"single_hop": 2}})
    with pytest.raises(ConfigError, match="whole number >= 1"):
        RunConfig.from_params({"prompt_selection": "stratified", "train_type_weights": {"single_hop": 0.5}})


def test_the_trainer_uses_the_stratified_sampler_and_each_step_draws_every_type(tmp_path, tiny_policy_path,
                                                                                tokenizer):
    rows = [{"id": f"{t}{i}", "question": f"Question {t} {i}?", "golden_answers": ["x"], "metadata": {"type": t}}
            for t in ("flat", "varied") for i in range(6)]
    protocol = MiniProtocol()
    args = SearchGRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2,
                            max_completion_length=8, use_cpu=True, report_to="none", max_steps=3,
                            save_strategy="no", prompt_selection="stratified", seed=3)
    drawn = []

    def reward_recording(prompts, completions, qtype, **kwargs):
        drawn.append(sorted(set(qtype)))
        return reward_by_type(prompts, completions, qtype)

    trainer = SearchGRPOTrainer(model=str(tiny_policy_path), reward_funcs=[reward_recording], args=args,
                                train_dataset=prompt_dataset(rows, protocol, tokenizer), retriever=FakeRetriever(),
                                protocol=protocol, processing_class=tokenizer)
    assert isinstance(trainer._get_train_sampler(), StratifiedSampler)
    trainer.train()
    assert drawn == [["flat", "varied"]] * 3
    assert trainer.selection.by_type == {}  # no informative record is kept or saved


def test_a_resumed_informative_sampler_hands_out_the_batches_its_checkpoint_drew_then_draws_on():
    # The batches drawn before a checkpoint were drawn with the record as it stood then; a resumed sampler that
    # redrew them with the checkpoint's (later) record would choose other questions from then on.
    ids, types = [f"q{i}" for i in range(40)], ["a"] * 20 + ["b"] * 20

    def run(sampler, record, batches, trained=0):
        out, saved, it = [], None, iter(sampler)
        for b in range(batches):
            chunk = [next(it) for _ in range(4)]
            out.append(chunk)
            if b >= trained:  # a resumed run skips the batches it trained before the checkpoint
                record.record([ids[i] for i in chunk], [types[i] for i in chunk], [types[i] == "b" for i in chunk])
            if b == 2:  # a checkpoint after the third batch
                saved = (sampler.draw_state(), json.loads(json.dumps(record.state_dict())))
        return out, saved

    def sampler(record, seed=5):
        return InformativeSampler(ids, types, record, mini_repeat_count=1, batch_size=4, repeat_count=1, seed=seed)

    record = SelectionRecord()
    whole, (draws, kept) = run(sampler(record), record, 8)
    assert draws["chunks"] == whole[:3]
    restored = SelectionRecord()
    restored.load_state_dict(kept)
    resumed = sampler(restored)
    resumed.resume_draws(draws)
    again, _ = run(resumed, restored, 8, trained=3)
    assert again == whole
    restored.load_state_dict(kept)
    redrawn = sampler(restored)  # without the checkpoint's batches, the later record chooses other questions
    assert run(redrawn, restored, 8, trained=3)[0][3:] != whole[3:]

    later, plain = sampler(SelectionRecord()), sampler(SelectionRecord())
    later.set_epoch(1)
    plain.set_epoch(1)
    later.resume_draws(draws)  # the checkpoint's epoch has ended: the new epoch starts from its own seed
    assert list(later) == list(plain)


def test_each_epoch_starts_the_selection_stream_from_the_seed_and_the_epoch():
    qtypes = ["a"] * 6 + ["b"] * 6
    one = StratifiedSampler(qtypes, mini_repeat_count=1, batch_size=4, repeat_count=1, seed=2)
    first, second = list(one), list(one)
    assert first != second  # the stream runs on when nothing sets the epoch
    other = StratifiedSampler(qtypes, mini_repeat_count=1, batch_size=4, repeat_count=1, seed=2)
    other.set_epoch(1)
    one.set_epoch(1)
    assert list(other) == list(one)  # a run resumed in epoch 1 orders it as the uninterrupted run did
    one.set_epoch(0)
    assert list(one) == first


def test_a_run_resumed_with_informative_selection_trains_the_uninterrupted_runs_questions(
        tmp_path, tiny_policy_path, tokenizer):
    rows = [{"id": f"{t}{i}", "question": f"Question {t} {i}?", "golden_answers": ["x"], "metadata": {"type": t}}
            for t in ("flat", "varied") for i in range(8)]
    protocol = MiniProtocol()
    seen: list[list[str]] = []

    def reward_recording(prompts, completions, qtype, id, **kwargs):
        seen.append(list(id))
        return reward_by_type(prompts, completions, qtype)

    def trainer(folder):
        args = SearchGRPOConfig(output_dir=str(folder), per_device_train_batch_size=4, num_generations=2,
                                max_completion_length=8, use_cpu=True, report_to="none", max_steps=4,
                                save_strategy="steps", save_steps=1, prompt_selection="informative", seed=3)
        return SearchGRPOTrainer(model=str(tiny_policy_path), reward_funcs=[reward_recording], args=args,
                                 train_dataset=prompt_dataset(rows, protocol, tokenizer), retriever=FakeRetriever(),
                                 protocol=protocol, processing_class=tokenizer)

    trainer(tmp_path / "whole").train()
    whole, seen[:] = list(seen), []
    trainer(tmp_path / "resumed").train(resume_from_checkpoint=str(tmp_path / "whole" / "checkpoint-2"))
    assert len(whole) == 4 and seen == whole[2:]
