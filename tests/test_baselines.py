"""Baselines: the registry, answer parsing, retrieval behaviour of each baseline, and records shaped like
`evaluate`'s, on scripted generators and a fake retriever (plus one pass of the tiny random model)."""

from __future__ import annotations

import pytest
import yaml

from fakes import FakeRetriever, MiniProtocol, ScriptedGenerator
from searchrl.core.registry import UnknownNameError
from searchrl.data.schema import make_row
from searchrl.evaluation.baselines import (
    BASELINES,
    MissingRetrieverError,
    baseline_problem,
    evaluate_baseline,
    evaluate_baselines,
    first_sentence,
    parse_answer,
)
from searchrl.evaluation.baselines.ircot import demo_path, load_demos
from searchrl.evaluation.evaluate import SUMMARY_MEANS, EvalResult, evaluate, stage_table
from searchrl.rollout import RolloutConfig

ROWS = [
    make_row("q0", "When was Entity1 founded?", ["1901"], type="single_hop", hops=1, supporting_ids=["1"]),
    make_row("q1", "When was Entity2 founded?", ["1902"], type="bridge", hops=2, supporting_ids=["2"]),
]
# What evaluate() writes for every question; a baseline's records must carry the same columns.
EVAL_COLUMNS = {"id", "question", "golden_answers", "qtype", "hops", "prediction", "em", "f1", "cem", "searches",
                "invalid_queries", "empty_results", "format_ok", "answered", "model_tokens", "total_tokens",
                "queries", "doc_ids", "support_retrieved", "support_recall", "finish", "hit_search_budget",
                "hit_length_budget", "completion"}


class Recording(ScriptedGenerator):
    """A scripted generator that also keeps the decoded prompts it was given, call by call."""

    def __init__(self, tokenizer, scripts):
        super().__init__(tokenizer, scripts)
        self.prompts: list[list[str]] = []

    def generate_turn(self, sequences, max_new_tokens):
        self.prompts.append([self.tokenizer.decode(s) for s in sequences])
        return super().generate_turn(sequences, max_new_tokens)


def _run(name, tokenizer, scripts, retriever=None, rows=ROWS, **kwargs):
    retriever = retriever if retriever is not None else FakeRetriever()
    gen = Recording(tokenizer, scripts)
    result = evaluate_baseline(name, None, tokenizer, retriever, rows, generator=gen, progress=False, **kwargs)
    return result, retriever, gen


# ------------------------------------------------------------------------------------------------ parsing


@pytest.mark.parametrize(("text", "answer"), [
    ("Answer: Paris", "Paris"),
    ("Let me think.\nThe city is old.\nAnswer: **New Paris**.", "New Paris"),
    ("Entity1 was founded in 1901. So the answer is: 1901.", "1901"),
    ("So the answer is: St. Louis. It lies on the Mississippi.", "St. Louis"),
    ("<answer> 1901 </answer>", "1901"),
    ("Answer: Paris\nWait, that is wrong.\nFinal answer: Lyon", "Lyon"),
    ("Answer:\n  Rome\n", "Rome"),
    ("Answer: no. It is not the same country.", "no"),
    ('The answer is "Velmora".', "Velmora"),
    ("The answer to this question is: Kridor Bengou.", "Kridor Bengou"),
    ("Answer: 1901\nI am not sure what the answer is.", "1901"),  # an empty later statement does not count
    ("I do not know what the answer is.", None),
    ("Paris", None),  # no answer statement: nothing is guessed
    ("Answer:", None),
    ("", None),
])
def test_parse_answer(text, answer):
    assert parse_answer(text) == answer


@pytest.mark.parametrize("text", [None, 3, "<answer></answer> the answer is: : :", "Answer: **", "\ue000" * 5,
                                  "the answer is\n\n\n", "<answer>unclosed", "Answer: " + "x" * 10000])
def test_parse_answer_never_raises_on_odd_input(text):
    answer = parse_answer(text)
    assert answer is None or (isinstance(answer, str) and answer.strip() == answer and answer)


@pytest.mark.parametrize(("text", "sentence"), [
    ("Entity1 was founded in 1901. Then more text", "Entity1 was founded in 1901."),
    ("  J. R. R. Tolkien wrote it. Yes.", "J. R. R. Tolkien wrote it."),
    ("It cost 3.5 million dollars! Next", "It cost 3.5 million dollars!"),
    ("He moved to Washington, D.C. in 1990. Later", "He moved to Washington, D.C. in 1990."),
    ("He lives in Washington, D.C. The city is large.", "He lives in Washington, D.C."),
    ("line one\nline two.", "line one"),
    ("1. Reserine Trape was born in 1878. 2. Next", "1. Reserine Trape was born in 1878."),
    ("no end in sight", "no end in sight"),
    ("\n\n", ""),
])
def test_first_sentence(text, sentence):
    assert first_sentence(text) == sentence


# ------------------------------------------------------------------------------------------------ registry


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(UnknownNameError) as err:
        evaluate_baseline("raggy", None, None, None, ROWS)
    message = str(err.value)
    assert "did you mean 'rag'" in message
    for name in BASELINES.names():
        assert name in message
    assert set(BASELINES.names()) == {"naive", "cot", "rag", "ircot", "prompted_search", "sft", "rl_no_search",
                                       "evidence_tool"}


def test_names_arguments_and_options_are_checked(tokenizer):
    with pytest.raises(ValueError, match="takes no ':' argument"):
        evaluate_baseline("naive:foo", None, tokenizer, None, ROWS)
    with pytest.raises(TypeError, match="max_steps"):  # the error lists what ircot does take
        evaluate_baseline("ircot", None, tokenizer, FakeRetriever(), ROWS, max_step=3)
    with pytest.raises(ValueError, match="needs a retriever|pass a retriever"):
        evaluate_baseline("rag", None, tokenizer, None, ROWS, generator=ScriptedGenerator(tokenizer, [["x"]] * 2))
    # Every baseline that searches says so with one error type, before generating (a benchmark without a corpus
    # skips exactly these); the ones that never search run without a retriever.
    for name in ("rag", "ircot", "prompted_search", "sft:/no/such/folder"):
        with pytest.raises(MissingRetrieverError):
            evaluate_baseline(name, None, tokenizer, None, ROWS, generator=ScriptedGenerator(tokenizer, []))
    # What a parameter check before a run would report.
    assert baseline_problem("prompted_search:r1_searcher") is None and baseline_problem("RAG") is None
    assert "known: cot" in baseline_problem("bm25") and "takes no" in baseline_problem("cot:x")
    assert "unknown protocol 'search_r2'" in baseline_problem("prompted_search:search_r2")
    # The papers' names for the same rows resolve to the registered entries.
    result, _, _ = _run("Direct-Inference", tokenizer, [["Answer: 1901"], ["Answer: 1900"]])
    assert result.config["baseline"] == "naive"


def _trained_checkpoint(tmp_path, tiny_policy_path, max_searches):
    run_dir = tmp_path / f"run-{max_searches}"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "rl").symlink_to(tiny_policy_path, target_is_directory=True)
    (run_dir / "checkpoints" / "cold_start").symlink_to(tiny_policy_path, target_is_directory=True)
    (run_dir / "params.yaml").write_text(yaml.safe_dump({"protocol": "search_r1", "max_searches": max_searches,
                                                         "chat_prompt": True, "bf16": False}))
    return run_dir


@pytest.mark.parametrize("name", ["naive", "cot", "rag", "ircot", "prompted_search", "prompted_search:search_r1",
                                  "sft", "rl_no_search"])
def test_every_baseline_returns_one_record_per_row(name, tokenizer, tiny_policy_path, tmp_path):
    assert name.partition(":")[0] in BASELINES
    options = {}
    if name in ("sft", "rl_no_search"):
        options["checkpoint"] = _trained_checkpoint(tmp_path, tiny_policy_path, max_searches=0)
    scripts = [["<answer>1901</answer> So the answer is: 1901."], ["Answer: 1903"]]
    result, _, _ = _run(name, tokenizer, scripts, **options)
    assert isinstance(result, EvalResult)
    assert list(result.records["id"]) == ["q0", "q1"]
    assert EVAL_COLUMNS <= set(result.records.columns)
    assert list(result.records["em"]) == [1.0, 0.0]
    assert list(result.records["prediction"]) == ["1901", "1903" if "search" not in name and name != "sft" else ""]
    summary = result.summary()
    assert summary["n"] == 2 and set(SUMMARY_MEANS) <= set(summary)
    assert result.config["baseline"].startswith(name.partition(":")[0])


# ------------------------------------------------------------------------------------------------ single pass


def test_naive_and_cot_never_retrieve(tokenizer):
    for name in ("naive", "cot"):
        result, retriever, gen = _run(name, tokenizer, [["Answer: 1901"], ["Thinking.\nAnswer: 1902"]])
        assert retriever.calls == []
        assert list(result.records["searches"]) == [0, 0]
        assert list(result.records["em"]) == [1.0, 1.0] and result.records["format_ok"].all()
        assert "Question: When was Entity1 founded?" in gen.prompts[0][0]
        assert "Documents:" not in gen.prompts[0][0]
    # No retriever at all is fine for them.
    gen = ScriptedGenerator(tokenizer, [["Answer: 1901"], ["Answer: 1902"]])
    assert evaluate_baseline("naive", None, tokenizer, None, ROWS, generator=gen, progress=False).summary()["em"] == 1


def test_cot_and_naive_prompts_differ_and_budgets_apply(tokenizer):
    _, _, naive_gen = _run("naive", tokenizer, [["Answer: 1"], ["Answer: 2"]])
    result, _, cot_gen = _run("cot", tokenizer, [["A long line of reasoning that never ends"], ["Answer: 2"]],
                              max_new_tokens=4)
    assert naive_gen.prompts[0][0] != cot_gen.prompts[0][0] and "step by step" in cot_gen.prompts[0][0]
    first = result.records.iloc[0]
    assert first["model_tokens"] == 4 and first["hit_length_budget"] and not first["format_ok"]
    assert result.config["max_new_tokens"] == 4


def test_rag_retrieves_once_per_question_with_the_question(tokenizer):
    result, retriever, gen = _run("rag", tokenizer, [["Answer: 1901"], ["Answer: 1900"]], top_k=2)
    assert [q for call in retriever.calls for q in call] == [r["question"] for r in ROWS]
    df = result.records
    assert list(df["searches"]) == [1, 1]
    assert df.loc[0, "queries"] == [ROWS[0]["question"]]
    assert df.loc[0, "doc_ids"] == [["1", "0"]]  # FakeRetriever ranks the entity named in the query first
    assert df.loc[1, "doc_ids"] == [["2", "0"]]
    assert list(df["support_retrieved"]) == [True, True]
    # The documents are in the prompt; the completion and its token counts are the model's answer alone.
    assert "Entity1 was founded in 1901." in gen.prompts[0][0]
    assert "Entity2 was founded in 1902." not in gen.prompts[0][0]
    assert (df["model_tokens"] == df["total_tokens"]).all()
    assert list(df["em"]) == [1.0, 0.0] and result.config["top_k"] == 2


# ------------------------------------------------------------------------------------------------ ircot


IRCOT_SCRIPTS = [
    ["Entity2 is a company. This second sentence is dropped.", "It was founded in 1902.", "So the answer is: 1901."],
    ["So the answer is: Entity3."],
]


def test_ircot_retrieves_after_each_sentence_and_stops_at_the_answer(tokenizer):
    result, retriever, gen = _run("ircot", tokenizer, IRCOT_SCRIPTS, demos=None)
    # One batched call with the questions, then one query per reasoning sentence that did not answer.
    assert retriever.calls == [[ROWS[0]["question"], ROWS[1]["question"]], ["Entity2 is a company."],
                               ["It was founded in 1902."]]
    assert gen.calls == 3  # the first question's three sentences; the second answered at once
    df = result.records.set_index("id")
    assert df.loc["q0", "searches"] == 3 and df.loc["q1", "searches"] == 1
    assert df.loc["q0", "queries"] == [ROWS[0]["question"], "Entity2 is a company.", "It was founded in 1902."]
    assert df.loc["q0", "reasoning_steps"] == 3
    assert df.loc["q0", "completion"] == "Entity2 is a company. It was founded in 1902. So the answer is: 1901."
    assert df.loc["q0", "prediction"] == "1901" and df.loc["q0", "em"] == 1.0
    assert list(df["finish"]) == ["answer", "answer"] and df["format_ok"].all()
    assert (df["model_tokens"] == df["total_tokens"]).all()
    # The second step's prompt holds the documents the first sentence found and the reasoning so far.
    step2 = gen.prompts[1][0]
    assert "Entity2 was founded in 1902." in step2
    assert step2.rstrip().endswith("Entity2 is a company.") and "dropped" not in step2


def test_ircot_step_limit_forces_an_answer(tokenizer):
    scripts = [["Entity1 is old.", "It is very old.", "1901."], ["So the answer is: 1902."]]
    result, retriever, gen = _run("ircot", tokenizer, scripts, demos=None, max_steps=2)
    df = result.records.set_index("id")
    # No retrieval after the last allowed sentence.
    assert [q for call in retriever.calls for q in call] == [ROWS[0]["question"], ROWS[1]["question"],
                                                             "Entity1 is old."]
    assert df.loc["q0", "finish"] == "step_limit" and df.loc["q0", "hit_search_budget"]
    assert df.loc["q0", "prediction"] == "1901" and df.loc["q0", "em"] == 1.0
    assert not df.loc["q0", "format_ok"]  # the harness, not the model, wrote "So the answer is:"
    assert df.loc["q0", "model_tokens"] < df.loc["q0", "total_tokens"]
    assert gen.prompts[-1][0].rstrip().endswith("It is very old. So the answer is:")
    assert df.loc["q1", "format_ok"] and df.loc["q1", "searches"] == 1


def test_ircot_shows_the_step_each_batch_is_on(tokenizer, monkeypatch):
    # a batch of IRCoT runs several retrieve-and-generate steps before the question bar moves
    from searchrl.evaluation.baselines.harness import BaselineRun

    seen = []
    monkeypatch.setattr(BaselineRun, "show_step", lambda self, text: seen.append(text))
    scripts = [["Entity1 is old.", "It is very old.", "1901."], ["So the answer is: 1902."]]
    _run("ircot", tokenizer, scripts, demos=None, max_steps=2)
    assert seen == ["step 1 of at most 2, 2 reasoning", "step 2 of at most 2, 1 reasoning",
                    "answering for 1 without an answer"]


def test_ircot_without_forced_answer_leaves_it_unanswered(tokenizer):
    result, _, _ = _run("ircot", tokenizer, [["Entity1 is old."], ["So the answer is: 1902."]], demos=None,
                        max_steps=1, force_answer=False)
    first = result.records.iloc[0]
    assert first["prediction"] == "" and first["em"] == 0.0 and first["finish"] == "step_limit"


DEMO_FILE = """# METADATA: {"qid": "a"}
Wikipedia Title: Harbor Town
Harbor Town is a fishing village on the north coast.

Wikipedia Title: Old Mill
The old mill was built in 1820 near Harbor Town.

Q: Answer the following question.
When was the mill near Harbor Town built?
A: 1820


# METADATA: {"qid": "b"}
Wikipedia Title: Blue Lake
Blue Lake is a lake.

Q: Answer the following question.
What is Blue Lake?
A: a lake
"""


def test_ircot_demonstrations_are_read_from_a_file(tokenizer, tmp_path):
    path = tmp_path / "toy_gold_with_3_distractors.txt"
    path.write_text(DEMO_FILE)
    demos = load_demos(path, max_words=4)
    assert [(d.question, d.answer, len(d.docs)) for d in demos] == [
        ("When was the mill near Harbor Town built?", "1820", 2), ("What is Blue Lake?", "a lake", 1)]
    assert demos[0].docs[1].title == "Old Mill" and demos[0].docs[1].text == "The old mill was"
    result, _, gen = _run("ircot", tokenizer, IRCOT_SCRIPTS, demos=str(path), n_demos=1)
    assert "When was the mill near Harbor Town built?" in gen.prompts[0][0]
    assert "So the answer is: 1820." in gen.prompts[0][0] and "Blue Lake" not in gen.prompts[0][0]
    assert result.config["n_demos"] == 1 and result.config["demos"] == str(path)
    with pytest.raises(FileNotFoundError, match="zero-shot"):
        demo_path(tmp_path / "missing.txt")


def test_ircot_demo_files_in_shared_data(shared_data):
    for name in ("hotpotqa", "2wikimultihopqa", "musique"):
        demos = load_demos(demo_path(name))
        assert len(demos) >= 20
        assert all(d.question and d.answer and d.docs for d in demos)


# ------------------------------------------------------------------------------------------------ protocol rows


def test_prompted_search_is_evaluate_itself(tokenizer):
    scripts = [["<search>Entity1</search>", "<answer>1901</answer>"], ["<answer>Paris</answer>"]]
    rollout = RolloutConfig(max_completion_tokens=512)
    base, _, _ = _run("prompted_search", tokenizer, scripts, protocol=MiniProtocol(), rollout=rollout)
    direct = evaluate(None, tokenizer, MiniProtocol(), FakeRetriever(), ROWS, rollout=rollout, progress=False,
                      generator=ScriptedGenerator(tokenizer, scripts))
    assert base.records.equals(direct.records)
    assert base.config["baseline"] == "prompted_search:mini" and base.config["protocol"] == "mini"
    named, _, _ = _run("prompted_search:r1_searcher", tokenizer, [["x"], ["y"]])
    assert named.config["protocol"] == "r1_searcher"


def test_trained_baselines_need_a_checkpoint_and_say_how_to_make_one(tokenizer):
    with pytest.raises(ValueError, match="max_searches: 0"):
        evaluate_baseline("rl_no_search", None, tokenizer, FakeRetriever(), ROWS)
    with pytest.raises(ValueError, match="sft_examples"):
        evaluate_baseline("sft", None, tokenizer, FakeRetriever(), ROWS)


def test_rl_no_search_evaluates_without_search_and_refuses_a_searching_run(tokenizer, tiny_policy_path, tmp_path):
    searching = _trained_checkpoint(tmp_path, tiny_policy_path, max_searches=2)
    with pytest.raises(ValueError, match="max_searches=2"):
        _run(f"rl_no_search:{searching}", tokenizer, [["x"], ["y"]])
    run_dir = _trained_checkpoint(tmp_path, tiny_policy_path, max_searches=0)
    scripts = [["<search> Entity1 </search>", "<answer> 1901 </answer>"], ["<answer> 1902 </answer>"]]
    result, retriever, _ = _run(f"rl_no_search:{run_dir}", tokenizer, scripts)
    assert retriever.calls == []  # the query got the budget notice instead of documents
    df = result.records
    assert list(df["searches"]) == [0, 0] and bool(df.loc[0, "hit_search_budget"])
    assert result.config["rollout"]["max_searches"] == 0 and result.config["protocol"] == "search_r1"
    assert result.config["checkpoint"] == str(run_dir / "checkpoints" / "rl")
    # sft takes the cold start of the same run folder and keeps the search budget.
    sft, retriever, _ = _run("sft", tokenizer, scripts, checkpoint=run_dir, rollout=RolloutConfig(max_searches=1))
    assert sft.config["checkpoint"] == str(run_dir / "checkpoints" / "cold_start")
    assert list(sft.records["searches"]) == [1, 0] and len(retriever.calls) == 1


def test_baselines_and_policies_share_one_table(tokenizer):
    naive, _, _ = _run("naive", tokenizer, [["Answer: 1901"], ["Answer: 1900"]])
    rag, _, _ = _run("rag", tokenizer, [["Answer: 1901"], ["Answer: 1902"]])
    table = stage_table({"naive": naive, "rag": rag})
    assert list(table.index) == ["naive", "rag"]
    assert table.loc["naive", "F1"] == 0.5 and table.loc["rag", "F1"] == 1.0
    assert table.loc["rag", "searches/question"] == 1.0


def test_evaluate_baselines_runs_each_with_its_options(tokenizer):
    retriever = FakeRetriever()
    gen = ScriptedGenerator(tokenizer, [["Answer: 1901"], ["Answer: 1902"], ["Entity1 x."], ["Entity2 y."],
                                        ["1901"], ["1902"]])
    results = evaluate_baselines(["naive", "ircot"], None, tokenizer, retriever, ROWS, generator=gen,
                                 progress=False, options={"ircot": {"max_steps": 1, "demos": None}})
    assert list(results) == ["naive", "ircot"]
    assert results["ircot"].config["max_steps"] == 1
    assert list(results["ircot"].records["finish"]) == ["step_limit", "step_limit"]
    with pytest.raises(ValueError, match="not run"):
        evaluate_baselines(["naive"], None, tokenizer, retriever, ROWS, options={"rag": {}})


# ------------------------------------------------------------------------------------------------ real model


def test_tiny_model_runs_every_generating_baseline(tiny_policy, tokenizer):
    model, _ = tiny_policy
    was_training = model.training
    model.train()  # evaluation switches to eval mode and must give the mode back
    for name, options in (("naive", {}), ("rag", {}), ("ircot", {"max_steps": 2, "demos": None})):
        result = evaluate_baseline(name, model, tokenizer, FakeRetriever(), ROWS, max_new_tokens=3, batch_size=2,
                                   progress=False, **options)
        df = result.records
        assert len(df) == 2 and (df["model_tokens"] <= (3 * 2 + 24 if name == "ircot" else 3)).all()
        assert result.config["model"] != "none"
        assert model.training
    model.train(was_training)
