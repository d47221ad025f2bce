"""The headroom table: what is within the search budget, what retrieval found, and the two ceilings."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from searchrl.analysis.headroom import ALL, headroom, main, run_headroom


def record(qtype: str, hops: int | None, f1: float, recall: float) -> dict:
    return {"id": f"{qtype}-{hops}-{f1}-{recall}", "qtype": qtype, "hops": hops, "f1": f1, "support_recall": recall}


RECORDS = pd.DataFrame([
    # single-hop: one found and right, one found and wrong (reading), one missed
    record("single_hop", 1, 1.0, 1.0), record("single_hop", 1, 0.0, 1.0), record("single_hop", 1, 0.0, 0.0),
    # bridge: a 2-hop question half found, and a 4-hop one out of a 2-search budget that was guessed right
    record("bridge", 2, 0.0, 0.5), record("bridge", 4, 1.0, 0.25),
])


def test_shares_and_ceilings_per_type_and_overall() -> None:
    table = headroom(RECORDS, max_searches=2)
    assert list(table.index) == ["single_hop", "bridge", ALL]
    single, bridge, overall = table.loc["single_hop"], table.loc["bridge"], table.loc[ALL]
    assert single["n"] == 3 and single["F1"] == pytest.approx(1 / 3)
    assert single["within budget"] == 1.0 and single["ceiling: budget"] == 1.0
    assert single["support found"] == pytest.approx(2 / 3)
    assert single["F1 support found"] == pytest.approx(0.5) and single["F1 support missed"] == 0.0
    # better reading alone lifts the found-but-wrong question only
    assert single["ceiling: retrieval"] == pytest.approx(2 / 3)
    # the 4-hop question stays at its own (guessed) F1 in the budget ceiling
    assert bridge["within budget"] == 0.5 and bridge["ceiling: budget"] == 1.0
    assert bridge["support found"] == 0.0 and math.isnan(bridge["F1 support found"])
    assert overall["n"] == 5 and overall["within budget"] == pytest.approx(4 / 5)
    assert overall["ceiling: budget"] == pytest.approx(1.0)
    # a larger budget brings the 4-hop question within reach; a budget of 1 leaves the 2-hop one out
    assert headroom(RECORDS, max_searches=4).loc["bridge", "within budget"] == 1.0
    one = headroom(RECORDS, max_searches=1).loc["bridge"]
    assert one["within budget"] == 0.0 and one["ceiling: budget"] == pytest.approx(0.5)


def test_unknown_hops_and_missing_retrieval_columns() -> None:
    real = pd.DataFrame([{"qtype": "hotpotqa", "hops": None, "f1": 0.4}, {"qtype": "hotpotqa", "hops": 2, "f1": 0.0}])
    row = headroom(real, max_searches=2).loc["hotpotqa"]
    assert row["within budget"] == 1.0  # of the questions whose hop count is known
    assert row["ceiling: budget"] == pytest.approx(0.7)  # the unknown one is counted at its own F1
    assert "support found" not in row.index


def test_errors_say_what_to_fix(tmp_path) -> None:
    with pytest.raises(KeyError, match="hops"):
        headroom(RECORDS.drop(columns="hops"), 2)
    with pytest.raises(ValueError, match="empty"):
        headroom(RECORDS.iloc[:0], 2)
    with pytest.raises(ValueError, match="max_searches"):
        headroom(RECORDS, -1)
    (tmp_path / "trajectories").mkdir()
    (tmp_path / "trajectories" / "after_RL.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match="after_RL"):
        run_headroom(tmp_path, "after_cold_start")


def test_command_reads_the_budget_from_the_run_and_saves_json(tmp_path, capsys) -> None:
    (tmp_path / "trajectories").mkdir()
    RECORDS.to_json(tmp_path / "trajectories" / "after_cold_start.jsonl", orient="records", lines=True)
    (tmp_path / "params.yaml").write_text("max_searches: 4\n", encoding="utf-8")
    assert main([str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "eval" / "headroom-after_cold_start.json").read_text(encoding="utf-8"))
    assert [r["qtype"] for r in saved] == ["single_hop", "bridge", ALL]
    assert saved[1]["within budget"] == 1.0  # budget 4 from params.yaml
    assert "ceiling: retrieval" in capsys.readouterr().out


class ListRetriever:
    """Returns, for every query, the passages whose id is in `ids` (all of them, whatever the query and k)."""

    def __init__(self, docs):
        self.docs = docs

    def search(self, queries, k):
        return [self.docs[:k] for _ in queries]


def test_query_reach_counts_hops_whose_fact_passage_is_in_the_top_k() -> None:
    from searchrl.analysis.headroom import query_reach
    from searchrl.data.synthetic import make_world
    from searchrl.retrieval import make_retriever

    world = make_world(seed=3, n_entities=40, n_questions_per_type=8, words_per_passage=40)
    rows = world.questions("train")
    n_hops = sum(len(r["metadata"]["hop_keys"]) for r in rows)
    # a retriever that returns every fact passage of the world reaches every hop; one that returns none, none
    facts = {doc_id for e in world.entities for doc_id in e.fact_docs.values()}
    everything = ListRetriever([d for d in world.corpus if d.id in facts])
    full = query_reach(world, rows, everything, k=len(world.corpus))
    assert full.loc[ALL, "hops"] == n_hops
    assert (full[["form 1", "form 2", "chain: form 1"]] == 1.0).all().all()
    none = query_reach(world, rows, ListRetriever([]), k=3)
    assert (none[["form 1", "form 2", "chain: form 1"]] == 0.0).all().all()
    # BM25: a larger k never reaches fewer hops
    bm25 = make_retriever("bm25", world.corpus)
    one, three = query_reach(world, rows, bm25, 1), query_reach(world, rows, bm25, 3)
    assert (three["form 1"] >= one["form 1"]).all() and 0 < one.loc[ALL, "form 1"] <= 1
    # one search at the deepest k gives each shallower k's table exactly
    from searchrl.analysis.headroom import query_reach_at

    at = query_reach_at(world, rows, bm25, [1, 3])
    pd.testing.assert_frame_equal(at[1], one)
    pd.testing.assert_frame_equal(at[3], three)
    with pytest.raises(ValueError, match="k must be"):
        query_reach(world, rows, bm25, 0)
