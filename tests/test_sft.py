"""Cold start: templated and rejection-sampled trajectories, labels masked on prompt and retrieved tokens, training."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from fakes import FakeRetriever, MiniProtocol, ScriptedGenerator, short_sft_items
from searchrl.data.schema import make_row
from searchrl.data.synthetic import make_world
from searchrl.data.synthetic.trajectories import Hop, hop_plan, plan_sentence, templated_trajectories
from searchrl.models import tiny_test_policy
from searchrl.protocols import get_protocol
from searchrl.retrieval import BM25Retriever
from searchrl.rollout import RolloutConfig
from searchrl.sft import IGNORE_INDEX, make_sft_trainer, rejection_sampled_trajectories, sft_train, tokenize_sft

SEARCH_R1 = get_protocol("search_r1")

PROTOCOLS = ["search_r1", "r1_searcher", "r1_searcher_pp", "r_search"]
TYPES = ["single_hop", "bridge", "comparison", "inference", "bridge_comparison"]


@pytest.fixture(scope="module")
def world():
    return make_world(seed=3, n_entities=60, n_questions_per_type=12)


@pytest.fixture(scope="module")
def bm25(world):
    return BM25Retriever(world.corpus)


def _text(item) -> str:
    return "".join(text for text, _ in item["segments"])


def test_hop_plans_come_from_the_question_generator(world):
    for row in world.questions("train"):
        hops = hop_plan(row)
        assert hops is not None, row
        meta = row["metadata"]
        assert [h.answer for h in hops] == meta["hop_answers"]
        assert hops[0].subject and hops[0].subject.lower() in row["question"].lower()
        assert "the film" not in hops[0].subject and "the book" not in hops[0].subject
        for before, after in itertools.pairwise(hops):  # chains pass each answer on as the next subject
            if meta["type"] in ("bridge", "inference"):
                assert after.subject == before.answer
    assert hop_plan(make_row("x", "A real question?", ["a"])) is None


@pytest.mark.parametrize("protocol_name", PROTOCOLS)
def test_templated_trajectories_are_valid_and_grounded(world, bm25, protocol_name, tokenizer):
    protocol = get_protocol(protocol_name)
    rows = world.questions("train")
    items = templated_trajectories(rows, protocol, bm25, tokenizer=tokenizer, rollout=RolloutConfig(top_k=3, max_searches=4),
                                   seed=1)
    assert {item["qtype"] for item in items} == set(TYPES)
    assert len(items) >= 0.8 * len(rows)
    for item in items:
        parsed = protocol.parse(_text(item))
        assert parsed.format_ok, _text(item)
        assert parsed.answer == item["golden_answers"][0]
        assert len(parsed.queries) == item["hops"] == len(item["queries"])
        observations = [text for text, trainable in item["segments"] if not trainable]
        assert len(observations) == item["hops"]
        assert all(text.strip().startswith(protocol.obs_open) for text in observations)
        retrieved = " ".join(observations).lower()
        assert item["golden_answers"][0].lower() in retrieved  # never an answer the documents do not give
        # The prompt is the one evaluation builds (chat template included).
        assert item["prompt"] == protocol.build_prompt(item["question"], tokenizer)


def test_templated_wording_follows_the_seed(world, bm25):
    rows = world.questions("train", "single_hop")
    first = templated_trajectories(rows, SEARCH_R1, bm25, seed=0)
    again = templated_trajectories(rows, SEARCH_R1, bm25, seed=0)
    other = templated_trajectories(rows, SEARCH_R1, bm25, seed=5)
    assert [_text(i) for i in first] == [_text(i) for i in again]
    assert [_text(i) for i in first] != [_text(i) for i in other]
    # Wording also depends only on the row, not on which other rows come with it.
    assert _text(templated_trajectories(rows[3:4], SEARCH_R1, bm25, seed=0)[0]) == _text(
        next(i for i in first if i["id"] == rows[3]["id"]))


def test_plan_counts_the_facts_and_names_chained_subjects_by_relation():
    assert plan_sentence([Hop("Bromu", "capital", "X")]) == "This needs one fact: the capital of Bromu."
    chain = [Hop("Ada Lin", "mother", "Eva Lin"), Hop("Eva Lin", "father", "Tom Lin")]
    assert plan_sentence(chain) == "This needs two facts: the mother of Ada Lin, then the father of that mother."
    pair = [Hop("A", "birth_year", "1900"), Hop("B", "birth_year", "1901")]  # comparison: two separate subjects
    assert plan_sentence(pair) == "This needs two facts: the birth year of A, then the birth year of B."


def test_plan_replaces_only_the_first_thought(world, bm25):
    rows = world.questions("train", "inference") + world.questions("train", "single_hop")
    plain = templated_trajectories(rows, SEARCH_R1, bm25, seed=0)
    planned = templated_trajectories(rows, SEARCH_R1, bm25, seed=0, plan=True)
    assert [i["id"] for i in plain] == [i["id"] for i in planned]
    for a, b in zip(plain, planned, strict=True):
        first_a, rest_a = _text(a).split("</think>", 1)
        first_b, rest_b = _text(b).split("</think>", 1)
        assert rest_a == rest_b and first_a != first_b
        count = "two facts" if b["qtype"] == "inference" else "one fact"
        assert first_b.strip() == f"<think> {plan_sentence(hop_plan(next(r for r in rows if r['id'] == b['id'])))}"
        assert count in first_b


def test_rows_whose_answer_is_not_retrieved_are_skipped(world, bm25):
    rows = world.questions("train", "single_hop")
    # A retriever that knows nothing of this world: every answer is missing, so nothing may be kept.
    with pytest.raises(ValueError, match="kept none"):
        templated_trajectories(rows, SEARCH_R1, FakeRetriever())
    with pytest.raises(ValueError, match="kept none"):
        templated_trajectories(world.questions("train", "bridge_comparison"), SEARCH_R1, bm25,
                               rollout=RolloutConfig(max_searches=2))
    partial = templated_trajectories(rows + [make_row("x", "Not synthetic?", ["a"])], SEARCH_R1, bm25)
    assert all(item["id"] != "x" for item in partial)


def test_documents_that_only_name_the_answer_do_not_ground_a_row():
    # World seed 0, 60 entities: "which country is Kabrurn in" searched as "Kabrurn country located in" returns other
    # cities of the same country ("Vreharn is located in Sikeleirnova"), which name the answer without stating it.
    # Such a row used to be kept, and under R-Search it had no evidence sentence, so it raised "invalid trajectory".
    world = make_world(seed=0, n_entities=60, words_per_passage=40)
    bm25 = BM25Retriever(world.corpus, show_progress=False)
    rows = world.questions("train")
    r_search = get_protocol("r_search")
    items = templated_trajectories(rows, r_search, bm25, rollout=RolloutConfig(top_k=3, max_searches=4))
    assert len(items) >= 0.5 * len(rows)
    row = next(r for r in rows if r["id"] == "single_hop-00051")
    assert row["metadata"]["hop_subjects"] == ["Kabrurn"]  # the case this test was written for
    for protocol in (r_search, SEARCH_R1):
        with pytest.raises(ValueError, match="kept none"):
            templated_trajectories([row], protocol, bm25, rollout=RolloutConfig(top_k=3))
    for item in items:  # every searched hop's fact is quoted in the evidence box
        assert r_search.parse(_text(item)).evidence


def test_labels_mask_prompt_and_observations_and_train_eos(world, bm25, tokenizer):
    items = templated_trajectories(world.questions("train", "bridge")[:3], SEARCH_R1, bm25, tokenizer=tokenizer,
                                   rollout=RolloutConfig(top_k=1, max_searches=4))
    data = tokenize_sft(items, tokenizer, max_length=2048)
    assert data.column_names == ["input_ids", "attention_mask", "labels"]
    eos = tokenizer.eos_token_id
    for item, row in zip(items, data):
        ids, labels = row["input_ids"], row["labels"]
        assert len(ids) == len(labels) == len(row["attention_mask"])
        n_prompt = len(tokenizer(item["prompt"], add_special_tokens=False)["input_ids"])
        assert all(label == IGNORE_INDEX for label in labels[:n_prompt])
        trained = tokenizer.decode([t for t, label in zip(ids, labels) if label != IGNORE_INDEX])
        assert trained == "".join(text for text, ok in item["segments"] if ok) + tokenizer.eos_token
        masked = tokenizer.decode([t for t, label in zip(ids[n_prompt:], labels[n_prompt:]) if label == IGNORE_INDEX])
        assert masked == "".join(text for text, ok in item["segments"] if not ok)
        assert ids[-1] == eos and labels[-1] == eos  # the closing EOS is a target
        assert all(label in (IGNORE_INDEX, t) for t, label in zip(ids, labels))


def test_tokenize_sft_rejects_bad_items(tokenizer):
    with pytest.raises(ValueError, match="non-empty list"):
        tokenize_sft([], tokenizer)
    with pytest.raises(ValueError, match="segments"):
        tokenize_sft([{"text": "x"}], tokenizer)
    with pytest.raises(ValueError, match="differ in length"):
        tokenize_sft([{"prompt_ids": [1], "completion_ids": [5, 6], "env_mask": [1]}], tokenizer)
    with pytest.raises(ValueError, match="raise max_length"):
        tokenize_sft([{"prompt": "a " * 50, "segments": [("b", True)]}], tokenizer, max_length=10)


def test_rejection_sampling_keeps_correct_valid_trajectories(tokenizer):
    protocol = MiniProtocol()
    rows = [make_row("a", "When was Entity1 founded?", ["1901"], type="single_hop", hops=1),
            make_row("b", "When was Entity2 founded?", ["1902"], type="single_hop", hops=1)]
    scripts = [
        ["<search>Entity1</search>", "<answer>1901</answer>"],  # a: correct, searched -> kept
        ["<answer>1999</answer>"],  # a: wrong
        ["<search>Entity1</search>", "<answer>1901</answer>"],  # a: duplicate of the first -> dropped
        ["<answer>1902</answer>"],  # b: correct without a search -> kept
        ["1902 is my guess"],  # b: right words, no answer tag (invalid format)
        ["<answer>in 1902 probably</answer>"],  # b: covers the answer -> kept
    ]
    gen = ScriptedGenerator(tokenizer, scripts)
    docs = FakeRetriever().docs
    items = rejection_sampled_trajectories(None, tokenizer, protocol, FakeRetriever(), rows, samples_per_question=3,
                                           batch_size=6, generator=gen, rollout=RolloutConfig(max_completion_tokens=512),
                                           progress=False)
    assert [(i["id"], i["completion"]) for i in items] == [
        ("a", scripts[0][0] + protocol.format_observation([docs[1], docs[0], docs[2]])
         + scripts[0][1]),
        ("b", "<answer>1902</answer>"),
        ("b", "<answer>in 1902 probably</answer>"),
    ]
    # The engine's mask becomes the labels: the retrieved tokens of item 0 are not trained.
    data = tokenize_sft(items, tokenizer)
    first = items[0]
    labels = data[0]["labels"][len(first["prompt_ids"]):]
    assert [label == IGNORE_INDEX for label in labels[: len(first["env_mask"])]] == [m == 0 for m in first["env_mask"]]
    assert 0 in first["env_mask"] and labels[-1] == tokenizer.eos_token_id
    searched_only = rejection_sampled_trajectories(None, tokenizer, protocol, FakeRetriever(), rows,
                                                   samples_per_question=3, batch_size=6, require_search=True,
                                                   generator=ScriptedGenerator(tokenizer, scripts),
                                                   rollout=RolloutConfig(max_completion_tokens=512), progress=False)
    assert [i["id"] for i in searched_only] == ["a"]


def _sft_config(output_dir, **kwargs):
    from trl import SFTConfig

    return SFTConfig(output_dir=str(output_dir), use_cpu=True, bf16=False, activation_checkpointing=False,
                     report_to="none", save_strategy="no", logging_steps=1, max_length=1024, **kwargs)


def test_sft_train_lowers_the_loss_and_restores_mode(tokenizer, tmp_path):
    model, _ = tiny_test_policy(seed=1)  # a private copy: training changes the weights
    model.eval()
    out = sft_train(model, tokenizer, short_sft_items(tokenizer),
                    _sft_config(tmp_path, max_steps=3, per_device_train_batch_size=4, learning_rate=1e-2))
    losses = [entry["loss"] for entry in out["history"] if "loss" in entry]
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses)
    assert losses[-1] < losses[0]  # the same batch every step: the loss must fall
    assert out["steps"] == 3 and out["examples"] == 4 and out["trained_tokens"] > 0
    assert not model.training


def test_no_gradient_reaches_the_logits_of_retrieved_tokens(tokenizer, tmp_path):
    model, _ = tiny_test_policy(seed=2)
    model.train()
    trainer = make_sft_trainer(model, tokenizer, short_sft_items(tokenizer, n=2),
                               _sft_config(tmp_path, max_steps=1, per_device_train_batch_size=2))
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(2)])
    labels = batch["labels"][0]
    captured = {}

    def keep_hidden(module, inputs, output):  # the last hidden states: logits[t] = lm_head(hidden[t])
        output.retain_grad()
        captured["hidden"] = output

    hook = model.model.norm.register_forward_hook(keep_hidden)
    try:
        loss = trainer.compute_loss(model, dict(batch))  # TRL's own loss path
        loss.backward()
    finally:
        hook.remove()
    grad = captured["hidden"].grad[0].abs().sum(-1)
    # Where the observation sits, found from the item's own pieces (not from the labels under test).
    item = short_sft_items(tokenizer, n=1)[0]
    n_prompt, n_search, n_obs, n_answer = (len(tokenizer(t, add_special_tokens=False)["input_ids"])
                                           for t in [item["prompt"], *(text for text, _ in item["segments"])])
    obs_start = n_prompt + n_search
    assert len(labels) == obs_start + n_obs + n_answer + 1  # + EOS
    # Position t predicts token t+1: the positions predicting retrieved tokens get no gradient at all ...
    assert torch.all(grad[obs_start - 1: obs_start + n_obs - 1] == 0)
    assert torch.all(grad[: n_prompt - 1] == 0)  # nor those predicting the prompt
    # ... while every position predicting a token the model writes (query, answer, EOS) does.
    written = list(range(n_prompt - 1, obs_start - 1)) + list(range(obs_start + n_obs - 1, len(labels) - 1))
    assert torch.all(grad[written] > 0)


def test_grouping_by_length_pads_short_items_less(tokenizer, tmp_path):
    from searchrl.config import RunConfig
    from searchrl.trainer.arguments import sft_args

    # One long item in eight, as a knowledge cold start mixes trajectories with short fact statements.
    items = [{"prompt": "", "segments": [("word " * (200 if i % 8 == 0 else 4), True)]} for i in range(160)]
    model = tiny_test_policy(seed=1)[0]
    padded, long_batches = {}, {}
    for grouped in (False, True):
        args = sft_args(RunConfig(sft_group_by_length=grouped, seed=3), tmp_path, num_processes=1)
        shapes = [batch["input_ids"].shape for batch in make_sft_trainer(model, tokenizer, items, args)
                  .get_train_dataloader()]
        assert sum(n for n, _ in shapes) == 160  # every item once, in batches of 8
        padded[grouped] = sum(n * width for n, width in shapes)
        long_batches[grouped] = sum(width > 100 for _, width in shapes)
    # Random order scatters the 20 long items over most of the 20 batches; grouping (within mega-batches of 40
    # items here) packs them into few, so the short items stop paying for their padding.
    assert long_batches[True] <= 6 and long_batches[False] >= 10
    assert padded[True] < 0.5 * padded[False]
