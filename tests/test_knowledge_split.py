"""The knowledge split (R1-Searcher++'s internal vs external facts): the split itself, the labels on every question,
the cold-start data written from it, and the per-label evaluation report."""

from __future__ import annotations

import pandas as pd
import pytest

from fakes import FakeRetriever, ScriptedGenerator
from searchrl.config.knowledge import KnowledgeConfig, knowledge_problems
from searchrl.data.schema import Doc, make_row
from searchrl.data.synthetic import World, make_world
from searchrl.data.synthetic.knowledge import all_facts, fact_id, internal_facts, row_knowledge
from searchrl.data.synthetic.trajectories import fact_statement_items, templated_trajectories
from searchrl.evaluation.evaluate import evaluate, stage_table
from searchrl.protocols import get_protocol
from searchrl.rollout import RolloutConfig

SMALL = {"seed": 3, "n_entities": 60, "n_questions_per_type": 60, "words_per_passage": 30}


@pytest.fixture(scope="module")
def split_world() -> World:
    return make_world(**SMALL, knowledge=KnowledgeConfig(knowledge_internal_frac=0.3))


# -- the split --------------------------------------------------------------------------------------------------


def test_split_is_deterministic_and_at_the_requested_fraction(split_world):
    facts = all_facts(split_world.entities)
    internal = split_world.internal_facts()
    assert len(internal) == round(0.3 * len(facts)) and internal <= set(facts)
    again = make_world(**SMALL, knowledge=KnowledgeConfig(knowledge_internal_frac=0.3))
    assert again.internal_facts() == internal and again.fingerprint() == split_world.fingerprint()
    other_seed = make_world(**{**SMALL, "seed": 4}, knowledge=KnowledgeConfig(knowledge_internal_frac=0.3))
    assert other_seed.internal_facts() != internal
    assert internal_facts(split_world.entities, 1.0, 3) == set(facts)
    assert internal_facts(split_world.entities, 0.0, 3) == frozenset()


def test_no_split_leaves_the_world_as_it_was(split_world):
    plain = make_world(**SMALL)
    assert make_world(**SMALL, knowledge=KnowledgeConfig()).fingerprint() == plain.fingerprint()
    assert "knowledge_internal_frac" not in plain.config and plain.internal_facts() == frozenset()
    assert all("knowledge" not in row["metadata"] for rows in plain.splits.values() for row in rows)
    # A split only adds labels: same passages, same questions in the same splits.
    assert plain.corpus == split_world.corpus
    for split, rows in plain.splits.items():
        assert [r["question"] for r in rows] == [r["question"] for r in split_world.splits[split]]


def test_every_row_is_labelled_from_its_hops_facts(split_world):
    internal = split_world.internal_facts()
    by_name = {e.name: e for e in split_world.entities}
    assert len(by_name) == len(split_world.entities), "names must identify entities for this check"
    seen = set()
    for rows in split_world.splits.values():
        for row in rows:
            meta = row["metadata"]
            expected = ["internal" if fact_id(by_name[s], k) in internal else "external"
                        for s, k in zip(meta["hop_subjects"], meta["hop_keys"])]
            assert meta["hop_knowledge"] == expected, row["id"]
            kinds = set(expected)
            assert meta["knowledge"] == (kinds.pop() if len(kinds) == 1 else "mixed"), row["id"]
            seen.add(meta["knowledge"])
    assert seen == {"internal", "external", "mixed"}
    assert set(split_world.stats()["questions_by_knowledge"]["train"]) == seen


def test_every_fact_internal_or_not_stays_in_the_corpus(split_world):
    """Design: as in R1-Searcher++, internal facts are ones the model knows, not ones the search engine lacks."""
    texts = {d.id: d.text for d in split_world.corpus}
    internal = split_world.internal_facts()
    assert internal and len(internal) < len(all_facts(split_world.entities))
    for entity in split_world.entities:
        for key in entity.facts:
            assert entity.fact_docs[key] in texts, fact_id(entity, key)


def test_split_survives_save_and_load(split_world, tmp_path):
    loaded = World.load(split_world.save(tmp_path / "w"))
    assert loaded.internal_facts() == split_world.internal_facts()
    assert loaded.fingerprint() == split_world.fingerprint()


def test_labels_and_settings_are_checked():
    assert row_knowledge(["internal", "internal"]) == "internal"
    assert row_knowledge(["external"]) == "external"
    assert row_knowledge(["internal", "external", "internal"]) == "mixed"
    with pytest.raises(ValueError, match="hop labels"):
        row_knowledge(["known"])
    assert knowledge_problems({"knowledge_internal_frac": 0.5, "sft_fact_repeats": 2}) == []
    assert [k for k, _ in knowledge_problems({"knowledge_internal_frac": 1.5, "sft_fact_repeats": -1})] == [
        "knowledge_internal_frac", "sft_fact_repeats"]
    with pytest.raises(ValueError, match=r"knowledge_internal_frac must be in \[0, 1\]"):
        KnowledgeConfig(knowledge_internal_frac=-0.1)


# -- cold-start data ----------------------------------------------------------------------------------------------

DOCS = [Doc("d1", "Ana Dros", "Ana Dros was born in Tamsek."), Doc("d2", "Tamsek", "Tamsek is located in Velaria.")]
PLAN = {"hop_subjects": ["Ana Dros", "Tamsek"], "hop_keys": ["birthplace", "country"],
        "hop_answers": ["Tamsek", "Velaria"]}
HAND_ROWS = [
    make_row("ext", "Where was Ana Dros born?", ["Tamsek"], type="single_hop", hops=1, hop_subjects=["Ana Dros"],
             hop_keys=["birthplace"], hop_answers=["Tamsek"], hop_knowledge=["external"], knowledge="external"),
    make_row("int", "Where was Ana Dros born?", ["Tamsek"], type="single_hop", hops=1, hop_subjects=["Ana Dros"],
             hop_keys=["birthplace"], hop_answers=["Tamsek"], hop_knowledge=["internal"], knowledge="internal"),
    make_row("mix", "In which country is the city where Ana Dros was born?", ["Velaria"], type="bridge", hops=2,
             **PLAN, hop_knowledge=["internal", "external"], knowledge="mixed"),
    make_row("both", "In which country is the city where Ana Dros was born?", ["Velaria"], type="bridge", hops=2,
             **PLAN, hop_knowledge=["internal", "internal"], knowledge="internal"),
]


def _retriever() -> FakeRetriever:
    retriever = FakeRetriever()
    retriever.docs = list(DOCS)
    return retriever


def test_r1_searcher_pp_trajectories_recall_internal_hops_and_search_external_ones():
    protocol = get_protocol("r1_searcher_pp")
    items = {it["id"]: it for it in templated_trajectories(HAND_ROWS, protocol, _retriever(), rollout=RolloutConfig(
        max_searches=2, top_k=1))}
    parsed = {name: protocol.parse("".join(text for text, _ in it["segments"])) for name, it in items.items()}
    assert parsed["ext"].internal == [] and len(parsed["ext"].queries) == 1 and "Ana Dros" in parsed["ext"].queries[0]
    assert parsed["int"].queries == [] and parsed["int"].internal == ["The birthplace of Ana Dros is Tamsek."]
    assert parsed["mix"].internal == ["The birthplace of Ana Dros is Tamsek."]
    assert len(parsed["mix"].queries) == 1 and "Tamsek" in parsed["mix"].queries[0]
    assert parsed["both"].queries == [] and parsed["both"].internal == [
        "The birthplace of Ana Dros is Tamsek.", "The country of Tamsek is Velaria."]
    assert {name: p.answer for name, p in parsed.items()} == {
        "ext": "Tamsek", "int": "Tamsek", "mix": "Velaria", "both": "Velaria"}
    assert all(p.format_ok for p in parsed.values())
    assert [items[n]["internal_hops"] for n in ("ext", "int", "mix", "both")] == [0, 1, 1, 2]
    assert items["mix"]["doc_ids"] == [["d2"]]
    # A recall is the model's own text: every segment without documents is trainable, the one observation is not.
    assert [trainable for _, trainable in items["mix"]["segments"]] == [True, False, True]


def test_only_searched_hops_count_against_the_budget_and_other_protocols_search_everything():
    pp = get_protocol("r1_searcher_pp")
    kept = templated_trajectories(HAND_ROWS, pp, _retriever(), rollout=RolloutConfig(max_searches=0, top_k=1))
    assert {it["id"] for it in kept} == {"int", "both"}
    search_r1 = templated_trajectories(HAND_ROWS, get_protocol("search_r1"), _retriever(),
                                       rollout=RolloutConfig(max_searches=2, top_k=1))
    assert [len(it["queries"]) for it in search_r1] == [1, 1, 2, 2]
    assert all("internal_answer" not in text for it in search_r1 for text, _ in it["segments"])


def test_fact_statements_teach_each_internal_fact_the_requested_number_of_times(split_world):
    internal = split_world.internal_facts()
    items = fact_statement_items(split_world, KnowledgeConfig(knowledge_internal_frac=0.3, sft_fact_repeats=3))
    assert len(items) == 3 * len(internal)
    first_round = items[: len(internal)]
    assert {it["id"].rsplit("-", 1)[0] for it in first_round} == {f"fact-{f}" for f in internal}
    assert [it["segments"] for it in items[len(internal): 2 * len(internal)]] == [it["segments"] for it in first_round]
    # One relation and one literal, worked by hand: the sentence names the subject, the relation and the answer.
    by_id = {e.id: e for e in split_world.entities}
    sentences = {it["id"]: it["segments"][0][0] for it in items}
    relation = min(f for f in internal if f.endswith(".father"))
    child = by_id[relation.split(".")[0]]
    assert sentences[f"fact-{relation}-2"] == f"The father of {child.name} is {by_id[child.facts['father']].name}."
    literal = min(f for f in internal if f.endswith(".birth_year"))
    person = by_id[literal.split(".")[0]]
    assert sentences[f"fact-{literal}-0"] == f"The birth year of {person.name} is {person.facts['birth_year']}."
    for it in items:
        (sentence, trainable), = it["segments"]
        assert trainable and it["prompt"] == "" and sentence.endswith(f" is {it['golden_answers'][0]}.")
    # Given a protocol with internal-answer tags, each statement is written inside them, as a recall is.
    knowledge = KnowledgeConfig(knowledge_internal_frac=0.3, sft_fact_repeats=1)
    wrapped = fact_statement_items(split_world, knowledge, get_protocol("r1_searcher_pp"))
    plain = fact_statement_items(split_world, knowledge, get_protocol("search_r1"))
    assert [it["segments"] for it in plain] == [it["segments"] for it in first_round]
    assert [it["segments"][0][0] for it in wrapped] == [
        f"<|begin_internal_answer|>{it['segments'][0][0]}<|end_internal_answer|>" for it in plain]
    # sft_fact_in_span False leaves the sentences bare even for a protocol with the tags.
    bare = fact_statement_items(split_world, KnowledgeConfig(knowledge_internal_frac=0.3, sft_fact_repeats=1,
                                                             sft_fact_in_span=False), get_protocol("r1_searcher_pp"))
    assert [it["segments"] for it in bare] == [it["segments"] for it in plain]
    assert fact_statement_items(split_world, KnowledgeConfig(knowledge_internal_frac=0.3)) == []
    assert fact_statement_items(make_world(**SMALL), KnowledgeConfig(sft_fact_repeats=3)) == []


# -- the per-knowledge report -------------------------------------------------------------------------------------

EVAL_ROWS = [
    make_row("m1", "Mixed?", ["1904"], type="bridge", hops=2, knowledge="mixed"),
    make_row("i1", "Internal one?", ["1901"], type="single_hop", hops=1, knowledge="internal"),
    make_row("e1", "External one?", ["1903"], type="single_hop", hops=1, knowledge="external"),
    make_row("i2", "Internal two?", ["1902"], type="single_hop", hops=1, knowledge="internal"),
    make_row("e2", "External two?", ["1905"], type="single_hop", hops=1, knowledge="external"),
    make_row("u1", "Unlabelled?", ["1906"], type="single_hop", hops=1),
]
S, E = "<|begin_external_search|>", "<|end_external_search|>"
I, J = "<|begin_internal_answer|>", "<|end_internal_answer|>"
EVAL_SCRIPTS = [
    [f"{I}It was 1904 or so.{J} {S} Entity4 {E}", "So \\boxed{New 1904}"],  # 1 search, 1 span, F1 2/3
    [f"{I}Entity1 was founded in 1901.{J} So \\boxed{{1901}}"],  # no search, right
    [f"{S} Entity3 {E}", f"{S} Entity0 {E}", "\\boxed{1903}"],  # 2 searches, right
    [f"{S} Entity2 {E}", "\\boxed{1902}"],  # 1 search, right
    ["\\boxed{1999}"],  # no search, wrong
    ["\\boxed{1906}"],  # no label: left out of the breakdown
]


def _knowledge_eval(tokenizer, scripts=EVAL_SCRIPTS):
    return evaluate(None, tokenizer, "r1_searcher_pp", FakeRetriever(), EVAL_ROWS,
                    generator=ScriptedGenerator(tokenizer, scripts), progress=False,
                    rollout=RolloutConfig(max_completion_tokens=1024, top_k=1))


def test_per_knowledge_breakdown_gives_hand_computed_numbers(tokenizer):
    result = _knowledge_eval(tokenizer)
    table = result.by_knowledge()
    assert list(table.index) == ["internal", "external", "mixed"]
    assert list(table["n"]) == [2, 2, 1]
    assert list(table["em"]) == pytest.approx([1.0, 0.5, 0.0])
    assert list(table["f1"]) == pytest.approx([1.0, 0.5, 2 / 3])
    assert list(table["searches"]) == pytest.approx([0.5, 1.0, 1.0])
    assert list(table["no_search"]) == pytest.approx([0.5, 0.5, 0.0])
    assert list(table["internal_answers"]) == pytest.approx([0.5, 0.0, 1.0])
    # The overall summary still counts every question, the unlabelled one included.
    assert result.summary()["n"] == 6 and result.summary()["searches"] == pytest.approx(4 / 6)


def test_per_knowledge_breakdown_is_written_and_tabled(tokenizer, tmp_path):
    import json

    result = _knowledge_eval(tokenizer)
    payload = json.loads(result.to_json(tmp_path / "eval.json").read_text())
    assert payload["by_knowledge"]["internal"]["searches"] == pytest.approx(0.5)
    assert payload["by_knowledge"]["external"]["no_search"] == pytest.approx(0.5)
    before = _knowledge_eval(tokenizer, scripts=[["\\boxed{x}"]] * 6)
    table = stage_table({"cold start": before, "after RL": result})
    assert table.loc["after RL", "F1 mixed"] == pytest.approx(2 / 3)
    assert table.loc["after RL", "searches/question internal"] == pytest.approx(0.5)
    assert table.loc["cold start", "searches/question external"] == 0.0
    cols = list(table.columns)
    assert cols.index("F1 internal") < cols.index("searches/question internal") < cols.index("ΔF1 vs previous")
    # Without labels there is no breakdown: an empty table, and no key in the JSON.
    plain = evaluate(None, tokenizer, "r1_searcher_pp", FakeRetriever(), EVAL_ROWS[-1:],
                     generator=ScriptedGenerator(tokenizer, EVAL_SCRIPTS[-1:]), progress=False)
    assert isinstance(plain.by_knowledge(), pd.DataFrame) and plain.by_knowledge().empty
    assert "by_knowledge" not in json.loads(plain.to_json(tmp_path / "plain.json").read_text())


def test_the_internal_answer_span_is_marked_in_the_rendered_trajectory():
    from searchrl.evaluation.render import render_trajectory, render_trajectory_text, trajectory_pieces

    text = ("I know this. <|begin_internal_answer|>The mother of A is B & C.<|end_internal_answer|> Next: "
            "<|begin_external_search|>father of B<|end_external_search|>\n<|begin_search_result|>(1) D was the father "
            "of B.<|end_search_result|>\nSo \\boxed{D}.")
    pieces = [(kind, piece) for kind, piece in trajectory_pieces(text, get_protocol("r1_searcher_pp")) if piece.strip()]
    assert [kind for kind, _ in pieces] == ["text", "internal", "text", "query", "retrieved", "text", "answer", "text"]
    assert dict(pieces)["internal"] == "<|begin_internal_answer|>The mother of A is B & C.<|end_internal_answer|>"
    page = render_trajectory(text, "r1_searcher_pp")
    start = page.index('<span class="internal"')
    box = page[start: page.index("</span>", start)]
    assert "background:#efe6fb" in box and ">internal (from memory)</small>" in box and "B &amp; C" in box
    assert "»<|begin_internal_answer|>The mother of A is B & C.<|end_internal_answer|>«" in \
        render_trajectory_text(text, "r1_searcher_pp")
    assert 'class="internal"' not in render_trajectory("<answer>x</answer>", "search_r1")  # no such span there
