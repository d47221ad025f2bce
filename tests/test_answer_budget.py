"""The answer-budget check: whether a correct trajectory of each question type fits max_completion_tokens."""

from __future__ import annotations

import pytest

from searchrl.data.synthetic import make_world
from searchrl.data.synthetic.budget import answer_budget, budget_problems, completion_tokens, items_budget
from searchrl.data.synthetic.trajectories import FACT_QTYPE, templated_trajectories
from searchrl.protocols import get_protocol
from searchrl.retrieval import BM25Retriever
from searchrl.rollout import RolloutConfig

SEARCH_R1 = get_protocol("search_r1")


@pytest.fixture(scope="module")
def world():
    return make_world(seed=3, n_entities=60, n_questions_per_type=12, words_per_passage=40)


@pytest.fixture(scope="module")
def bm25(world):
    return BM25Retriever(world.corpus, show_progress=False)


def _rows(world, *types):
    return [row for qtype in types for row in world.questions("train", qtype)]


def test_token_counts_are_those_of_the_written_trajectory(world, bm25, tokenizer):
    rows = _rows(world, "single_hop", "inference")
    rollout = RolloutConfig(top_k=2, max_searches=2, max_completion_tokens=4000)
    report = answer_budget(rows, SEARCH_R1, bm25, rollout=rollout, tokenizer=tokenizer)
    items = templated_trajectories(world.questions("train", "inference"), SEARCH_R1, bm25, rollout=rollout,
                                   tokenizer=tokenizer)
    lengths = sorted(completion_tokens(item, tokenizer) for item in items)
    text = "".join(piece for piece, _ in items[0]["segments"])
    assert completion_tokens(items[0], tokenizer) >= len(tokenizer(text, add_special_tokens=False)["input_ids"]) - 2
    assert report["inference"]["max_tokens"] == lengths[-1]
    assert report["inference"]["written"] == len(items)
    assert report["inference"]["over_budget"] == 0.0
    # Two searches carry two observations: a two-hop answer is longer than a one-hop answer.
    assert report["inference"]["median_tokens"] > report["single_hop"]["median_tokens"]
    assert budget_problems(report, rollout.max_completion_tokens) == []


def test_a_budget_between_one_and_two_searches_is_reported_for_two_hop_questions_only(world, bm25, tokenizer):
    rows = _rows(world, "single_hop", "inference")
    wide = answer_budget(rows, SEARCH_R1, bm25, rollout=RolloutConfig(top_k=2, max_searches=2,
                                                                      max_completion_tokens=4000), tokenizer=tokenizer)
    between = (wide["single_hop"]["max_tokens"] + wide["inference"]["median_tokens"]) // 2
    assert wide["single_hop"]["max_tokens"] < between < wide["inference"]["median_tokens"]
    report = answer_budget(rows, SEARCH_R1, bm25, rollout=RolloutConfig(top_k=2, max_searches=2,
                                                                        max_completion_tokens=between),
                           tokenizer=tokenizer)
    assert report["single_hop"]["over_budget"] == 0.0
    assert report["inference"]["over_budget"] >= 0.5
    problems = budget_problems(report, between)
    assert len(problems) == 1
    assert "inference" in problems[0] and f"max_completion_tokens={between}" in problems[0]
    assert f"at least {report['inference']['max_tokens']}" in problems[0]


def test_questions_with_more_hops_than_searches_are_reported(world, bm25, tokenizer):
    report = answer_budget(_rows(world, "single_hop", "inference"), SEARCH_R1, bm25,
                           rollout=RolloutConfig(top_k=2, max_searches=1, max_completion_tokens=4000),
                           tokenizer=tokenizer)
    assert report["inference"]["written"] == 0
    assert report["inference"]["unwritable"] == report["inference"]["n"] > 0
    problems = budget_problems(report, 4000)
    assert len(problems) == 1 and "inference" in problems[0] and "max_searches" in problems[0]


def test_items_budget_skips_fact_statements(world, bm25, tokenizer):
    items = templated_trajectories(world.questions("train", "single_hop"), SEARCH_R1, bm25,
                                   rollout=RolloutConfig(top_k=2), tokenizer=tokenizer)
    fact = {"qtype": FACT_QTYPE, "prompt": "", "segments": [("The capital of X is Y.", True)]}
    report = items_budget(items + [fact], tokenizer, 10)
    assert set(report) == {"single_hop"}
    assert report["single_hop"]["over_budget"] == 1.0
    assert "cold-start demonstrations of type single_hop" in budget_problems(report, 10,
                                                                           what="cold-start demonstrations")[0]
