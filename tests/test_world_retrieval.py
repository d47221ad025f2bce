"""The synthetic world is searchable: BM25 finds the passages that questions need.

Single-hop questions name their entity, so plain BM25 should find a supporting passage almost always; the first
hop of a multi-hop question names its starting entity too, so its first passage is findable as well. (Later hops
need the answer of the previous hop: that is what the trained policy has to search for.)
"""

from __future__ import annotations

import pytest

from searchrl.data.synthetic import World, make_world
from searchrl.retrieval import BM25Retriever


def recall_at(world: World, retriever: BM25Retriever, rows: list, k: int, *, first_hop_only: bool = False) -> float:
    """Share of `rows` with a supporting passage (or, with `first_hop_only`, the first one) among the top `k`."""
    results = retriever.search([r["question"] for r in rows], k)
    hits = 0
    for row, docs in zip(rows, results, strict=True):
        wanted = set(row["metadata"]["supporting_ids"][:1] if first_hop_only else row["metadata"]["supporting_ids"])
        hits += bool(wanted & {d.id for d in docs})
    return hits / len(rows)


@pytest.fixture(scope="module")
def default_world() -> tuple[World, BM25Retriever]:
    world = make_world()
    return world, BM25Retriever(world.corpus, show_progress=False)


def test_bm25_finds_single_hop_evidence_in_top_5(default_world):
    world, retriever = default_world
    rows = world.questions("test", ["single_hop"])
    assert len(rows) >= 50
    assert recall_at(world, retriever, rows, 5) >= 0.9


@pytest.mark.parametrize("qtype", ["bridge", "inference", "comparison"])
def test_bm25_finds_the_first_hop_of_multi_hop_questions(default_world, qtype):
    world, retriever = default_world
    rows = world.questions("test", [qtype])
    assert recall_at(world, retriever, rows, 5, first_hop_only=True) >= 0.85


def test_single_hop_recall_holds_in_a_larger_world():
    world = make_world(seed=5, n_entities=3000, n_questions_per_type=200, types=("single_hop",))
    retriever = BM25Retriever(world.corpus, show_progress=False)
    assert len(world.corpus) == 9000
    assert recall_at(world, retriever, world.questions("train"), 5) >= 0.9
