"""The protocol stamped on every evaluation: built from the run's settings, saved with each result, compared in
every table that puts evaluations side by side, and absent (not recorded) in folders from before it existed."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from fakes import FakeRetriever, MiniProtocol, ScriptedGenerator
from searchrl.config import RunConfig, eval_decoding
from searchrl.data.schema import Doc, make_row
from searchrl.evaluation.evaluate import EvalResult, evaluate, stage_table
from searchrl.evaluation.paper_tables import paper_table
from searchrl.evaluation.protocol import (
    NOT_RECORDED,
    EvalProtocol,
    compare_protocols,
    protocol_of,
    stage_rows,
)
from searchrl.retrieval import make_retriever
from searchrl.retrieval.service import corpus_fingerprint
from searchrl.rollout import RolloutConfig

DOCS = [Doc(str(i), f"Entity{i}", f"Entity{i} was founded in {1900 + i}.") for i in range(6)]
ROWS = [make_row("q0", "When was Entity1 founded?", ["1901"]), make_row("q1", "When was Entity2 founded?", ["1902"])]
SCRIPTS = [["<search>Entity1</search>", "<answer>1901</answer>"], ["<answer>1900</answer>"]]


def _stamp(cfg: RunConfig, rows=ROWS, retriever=None) -> EvalProtocol:
    rollout, greedy = cfg.eval_rollout_config(), eval_decoding(cfg)["greedy"]
    return EvalProtocol.build(retriever=retriever if retriever is not None else make_retriever("bm25", DOCS),
                              rows=rows, rollout=rollout, protocol=MiniProtocol(), greedy=greedy, corpus="six")


def _evaluate(tokenizer, rollout: RolloutConfig, retriever=None) -> EvalResult:
    retriever = retriever if retriever is not None else make_retriever("bm25", DOCS)
    return evaluate(None, tokenizer, MiniProtocol(), retriever, ROWS, rollout=rollout, progress=False,
                    generator=ScriptedGenerator(tokenizer, SCRIPTS), corpus_name="six passages")


def test_the_stamp_follows_the_run_settings():
    base = _stamp(RunConfig())
    assert base.top_k == RunConfig().top_k and base.decoding == "greedy" and base.retriever == "bm25"
    assert base.corpus_fingerprint == corpus_fingerprint(DOCS) and base.corpus_size == 6
    assert base.n_questions == 2 and base.metrics == ("em", "f1", "cem") and base.prompt
    changed = _stamp(RunConfig().replace(top_k=5))
    assert changed.top_k == 5 and changed != base
    assert _stamp(RunConfig().replace(max_observation_tokens=500)).max_observation_tokens == 500
    # The question set is fingerprinted by its ids, in any order; another set has another fingerprint.
    assert _stamp(RunConfig(), rows=ROWS[::-1]).questions == base.questions
    assert _stamp(RunConfig(), rows=ROWS[:1]).questions != base.questions
    # Another corpus changes the corpus and index fingerprints.
    other = _stamp(RunConfig(), retriever=make_retriever("bm25", DOCS[:5]))
    assert other.corpus_fingerprint != base.corpus_fingerprint and other.index != base.index
    # A retriever that cannot say what it searches leaves the corpus unrecorded rather than guessing.
    assert _stamp(RunConfig(), retriever=FakeRetriever()).describe()["corpus"] == "six"


def test_a_corpus_or_retriever_that_knows_its_fingerprint_is_not_hashed_again():
    class Named:
        corpus_fingerprint = "abc123"
        kind = "replay"

        def __len__(self):
            return 3

    stamp = EvalProtocol.build(retriever=Named(), rows=ROWS, rollout=RolloutConfig(), protocol="mini")
    assert stamp.corpus_fingerprint == "abc123" and stamp.retriever == "replay"


def test_the_stamp_round_trips():
    stamp = _stamp(RunConfig().replace(top_k=4)).with_metrics(["cem:r1_searcher"])
    assert stamp.metrics[-1] == "cem:r1_searcher"
    again = EvalProtocol.from_dict(json.loads(json.dumps(stamp.to_dict())))
    assert again == stamp and again.to_dict() == stamp.to_dict()
    newer = EvalProtocol.from_dict({**stamp.to_dict(), "a_later_field": 1})  # a newer file still loads
    assert newer == stamp and newer.extra["a_later_field"] == 1


def test_an_evaluation_json_carries_its_protocol(tokenizer, tmp_path):
    result = _evaluate(tokenizer, RolloutConfig(top_k=2, max_completion_tokens=512))
    payload = json.loads(result.to_json(tmp_path / "after_RL.json").read_text())
    block = payload["protocol"]
    assert block["top_k"] == 2 and block["retriever"] == "bm25" and block["corpus"] == "six passages"
    assert block["corpus_fingerprint"] == corpus_fingerprint(DOCS) and block["n_questions"] == 2
    assert block["decoding"] == "greedy" and block["protocol"] == "mini" and block["max_searches"] == 2
    assert protocol_of(payload) == result.protocol


def test_a_table_of_two_protocols_names_where_they_differ(tokenizer):
    three = _evaluate(tokenizer, RolloutConfig(top_k=3, max_completion_tokens=512))
    five = _evaluate(tokenizer, RolloutConfig(top_k=5, max_completion_tokens=512))
    table = stage_table({"top 3": three, "top 5": five})
    protocols = table.attrs["protocols"]
    assert protocols.difference_note() == "protocols differ in: top_k (3 vs 5)"
    assert list(table["protocol"]) == ["P1", "P2"]
    assert "top_k" not in protocols.shared and protocols.shared["retriever"] == "bm25"
    text = protocols.text()
    assert "[P1] top 3: top_k 3" in text and "[P2] top 5: top_k 5" in text
    assert "protocols differ in: top_k (3 vs 5)" in protocols.html()


def test_identical_protocols_make_no_difference_note(tokenizer):
    a = _evaluate(tokenizer, RolloutConfig(max_completion_tokens=512))
    b = _evaluate(tokenizer, RolloutConfig(max_completion_tokens=512))
    table = stage_table({"a": a, "b": b})
    protocols = table.attrs["protocols"]
    assert not protocols.mixed and protocols.difference_note() == "" and "protocol" not in table
    assert protocols.text().startswith("protocol (every row): corpus six passages #")


def test_old_evaluations_without_a_stamp_still_load_and_say_so(tokenizer):
    old = {"summary": {"em": 0.5, "n": 2}, "by_type": {}, "config": {"protocol": "mini"}}
    assert protocol_of(old) is None and protocol_of(None) is None
    rows = [{"stage": "after RL", "F1": 0.4}]
    assert stage_rows(rows) == rows and stage_rows({"rows": rows, "protocols": {}}) == rows and stage_rows(None) == []
    assert compare_protocols({"after RL": None}).text() == f"protocol: {NOT_RECORDED}"
    new = _evaluate(tokenizer, RolloutConfig(max_completion_tokens=512))
    unstamped = EvalResult(new.records, {})
    protocols = stage_table({"old": unstamped, "new": new}).attrs["protocols"]
    assert protocols.unrecorded == ["old"] and f"protocol {NOT_RECORDED} for: old" in protocols.text()


def test_a_paper_table_sets_our_protocol_against_the_papers():
    ours = pd.DataFrame([("grpo", "nq", "em", 0.3, 2, 0.1, 0.5)],
                        columns=["method", "dataset", "metric", "value", "n", "ci_low", "ci_high"])
    stamp = _stamp(RunConfig().replace(top_k=5))
    table = paper_table(ours, "search_r1_table2", models=["Qwen2.5-3B"], protocols={"grpo / nq": stamp})
    text = table.to_markdown()
    assert "rows 'paper': the paper's own protocol" in text and "top_k 3" in text
    assert "differ in: " in text and "top_k (paper 3; ours 5)" in text
    assert "not stated by the paper: " in text and "prompt" in text.split("not stated by the paper: ")[1]
    assert "searchrl-protocol" in table.to_html()
    # Without protocols the table is as before (no block).
    assert paper_table(ours, "search_r1_table2", models=["Qwen2.5-3B"]).protocol == []


def test_baselines_are_stamped_and_one_without_retrieval_has_no_top_k(tokenizer):
    from searchrl.evaluation.baselines import evaluate_baseline

    kwargs = {"generator": None, "progress": False}
    naive = evaluate_baseline("naive", None, tokenizer, FakeRetriever(), ROWS,
                              **{**kwargs, "generator": ScriptedGenerator(tokenizer, [["Answer: 1901"]] * 2)})
    rag = evaluate_baseline("rag", None, tokenizer, make_retriever("bm25", DOCS), ROWS,
                            **{**kwargs, "generator": ScriptedGenerator(tokenizer, [["Answer: 1901"]] * 2)})
    assert naive.protocol.top_k is None and naive.protocol.retriever == ""
    assert rag.protocol.top_k == RolloutConfig().top_k and rag.protocol.retriever == "bm25"
    note = compare_protocols({"naive": naive.protocol, "rag": rag.protocol}).difference_note()
    assert "top_k" in note and "protocol (baseline:naive vs baseline:rag)" in note


@pytest.mark.parametrize("top_ks", [(3, 3), (3, 5)])
def test_an_ablation_table_marks_arms_of_different_protocols(tmp_path, top_ks):
    from searchrl.core.files import write_json
    from searchrl.experiments.ablation.layout import DONE, EVAL_SLUG, arm_folder
    from searchrl.experiments.ablation.tables import arm_protocols, mark_protocols

    for arm, k in zip(("k_small", "k_large"), top_ks):
        folder = arm_folder(tmp_path, arm, 0)
        write_json(folder / "eval" / f"{EVAL_SLUG}.json", {"protocol": _stamp(RunConfig().replace(top_k=k)).to_dict()})
        write_json(folder / DONE, {})
    protocols = arm_protocols(tmp_path, ["k_small", "k_large"])
    table = mark_protocols(pd.DataFrame({"F1": [0.1, 0.2]}, index=pd.Index(["k_small", "k_large"], name="arm")),
                           protocols)
    if top_ks[0] == top_ks[1]:
        assert not protocols.mixed and "protocol" not in table
    else:
        assert protocols.difference_note() == "protocols differ in: top_k (3 vs 5)"
        assert list(table["protocol"]) == ["P1", "P2"]


def test_the_seeds_report_compares_each_seeds_protocol(tmp_path):
    from searchrl.analysis.seeds import seed_protocols
    from searchrl.core.files import write_json

    runs = {}
    for seed, k in ((0, 3), (1, 3), (2, 5)):
        runs[seed] = tmp_path / f"seed{seed}"
        write_json(runs[seed] / "eval" / "table.json", {"rows": [{"stage": "after RL", "F1": 0.3}], "protocols": {}})
        write_json(runs[seed] / "eval" / "after_RL.json",
                   {"summary": {}, "protocol": _stamp(RunConfig().replace(top_k=k)).to_dict()})
    protocols = seed_protocols(runs)
    assert protocols.difference_note() == "protocols differ in: top_k (3 vs 5)"
    assert protocols.markers == {"seed 0 / after RL": "P1", "seed 1 / after RL": "P1", "seed 2 / after RL": "P2"}
    old = tmp_path / "old"  # a run folder from before protocols: a bare list of rows, no protocol block
    write_json(old / "eval" / "table.json", [{"stage": "after RL", "F1": 0.3}])
    write_json(old / "eval" / "after_RL.json", {"summary": {}})
    assert seed_protocols({0: old}).text() == f"protocol: {NOT_RECORDED}"


def test_the_type_table_compares_its_stages_protocols(tokenizer):
    from searchrl.evaluation.type_table import type_table

    after = _evaluate(tokenizer, RolloutConfig(max_completion_tokens=512))
    no_search = _evaluate(tokenizer, RolloutConfig(max_completion_tokens=512, max_searches=0))
    table = type_table({"before": after, "after": after, "no search": no_search}, "before", "after", "no search")
    assert table.attrs["protocols"].difference_note() == "protocols differ in: max_searches (2 vs 0)"
