"""The nano model: its tokenizer reads the world's text and every protocol tag exactly, its size, and its build
phases (its cache is tested with tiny-searcher's, in tests/test_models.py). Built here with a few steps: what it
learns is measured in benchmarks and docs/nano.md, not here."""

from __future__ import annotations

import pytest
import torch

from searchrl.models import nano


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A nano build of two steps a phase on two small worlds."""
    return nano.build_nano(steps=2, copy_steps=2, seeds=(101, 102), read_phases=(2,), progress=False)


def test_tokenizer_round_trips_an_unseen_worlds_text_and_the_tags(built):
    from searchrl.data.synthetic import make_world
    from searchrl.protocols import get_protocol

    _, tokenizer = built
    protocol = get_protocol(nano.PROTOCOL)
    world = make_world(seed=0, n_entities=40, words_per_passage=40, progress=False)  # never fitted on
    texts = [protocol.format_doc(1, d) for d in world.corpus[:20]]
    texts += [protocol.build_prompt(r["question"], tokenizer, chat=False) for r in world.splits["test"][:20]]
    for text in texts:
        assert tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]) == text
    for tag in nano.protocol_tags():  # each tag is one token, kept by skip_special_tokens
        ids = tokenizer(tag, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1 and tokenizer.decode(ids, skip_special_tokens=True) == tag
    assert {"<search>", "</answer>", "<|begin_of_query|>"} <= set(nano.protocol_tags())
    # Template words are whole tokens; an invented name is spelled in a few syllable pieces.
    assert len(tokenizer(" is the capital of", add_special_tokens=False)["input_ids"]) == 4
    assert tokenizer.eos_token_id != tokenizer.pad_token_id and tokenizer.padding_side == "left"


def test_model_is_a_small_llama_that_generates_with_its_tokenizer(built):
    model, tokenizer = built
    assert model.config.model_type == "llama" and model.config.vocab_size == len(tokenizer)
    assert 5e5 < nano.parameter_count(model) < 5e6
    inputs = tokenizer(["Question: who?\n"], return_tensors="pt", add_special_tokens=False)
    out = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    assert out.shape[1] > inputs["input_ids"].shape[1]


def test_pretraining_lowers_the_loss_on_its_examples(built):
    from searchrl.protocols import get_protocol

    model, tokenizer = built
    worlds = nano.pretrain_worlds((101,))
    trajectories, passages = nano.pretraining_examples(worlds, get_protocol(nano.PROTOCOL), tokenizer)
    # Only what the model writes is trained: the prompt and the retrieved documents are masked.
    ids, labels = trajectories[0]
    assert labels[0] == -100 and 0 < sum(label != -100 for label in labels) < len(ids) / 2
    torch.manual_seed(0)
    fresh = type(model)(model.config)
    log = nano.pretrain(fresh, tokenizer, trajectories, passages, steps=12, progress=False)
    assert sum(log["losses"][-3:]) < sum(log["losses"][:3])


def test_fresh_worlds_give_a_new_world_at_each_draw_and_pretrain_takes_them_in_turn(built):
    from searchrl.protocols import get_protocol

    model, tokenizer = built
    draw = nano.fresh_worlds(get_protocol(nano.PROTOCOL), tokenizer, every=2)
    first, second = draw(), draw()
    for trajectories, passages, turns in (first, second):  # cut to what two batches draw
        assert 0 < len(turns) <= len(trajectories) <= 2 * nano.BATCH_SIZE and 0 < len(passages) <= 2 * nano.BATCH_SIZE
    assert {tuple(ids) for ids, _ in first[1]}.isdisjoint(tuple(ids) for ids, _ in second[1])  # no passage recurs
    calls = []
    log = nano.pretrain(type(model)(model.config), tokenizer, [], [], steps=5, progress=False, every=2,
                        source=lambda: calls.append(1) or draw()[:2])
    assert len(log["losses"]) == 5 and len(calls) == 3  # a new world at steps 0, 2 and 4


def test_a_source_that_starts_empty_still_gets_its_share_of_each_batch(built, monkeypatch):
    from searchrl.models import tiny_searcher

    model, tokenizer = built
    first, second = [([5, 6, 7], [5, 6, 7])] * 20, [([8, 9], [8, 9])] * 20
    seen = []
    real = tiny_searcher.trained_token_loss
    monkeypatch.setattr(tiny_searcher, "trained_token_loss",
                        lambda m, batch: seen.append((batch["input_ids"][:, 0] == 8).sum().item()) or real(m, batch))
    nano.pretrain(type(model)(model.config), tokenizer, [], [], steps=2, progress=False, share=0.25,
                  source=lambda: (first, second))
    assert seen == [round(nano.BATCH_SIZE * 0.25)] * 2


def test_last_turns_train_only_what_is_written_after_the_last_documents(built):
    from searchrl.protocols import get_protocol

    _, tokenizer = built
    trajectories, last = nano.reading_worlds(get_protocol(nano.PROTOCOL), tokenizer, every=1)()
    assert 0 < len(last) == len(trajectories) <= nano.BATCH_SIZE
    (ids, labels), (_, whole) = last[0], trajectories[0]
    tag = tokenizer.convert_tokens_to_ids("</information>")
    close = max(i for i, t in enumerate(ids) if t == tag)  # the prompt names the tag too: the last one closes the docs
    assert all(label == -100 for label in labels[: close + 1])
    assert labels[close + 1:] == whole[close + 1:] and any(label != -100 for label in labels)
    assert "<answer>" in tokenizer.decode([t for t in labels if t != -100])
