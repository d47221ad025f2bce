"""Reward functions against hand-worked examples from the papers' equations.

A small fake protocol (tags <search>/<information>/<original_evidence>/<answer>) keeps these tests independent of
the concrete protocols; the integration tests at the end use the real ones when they are importable.
"""

from __future__ import annotations

import pickle
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from searchrl.protocols.base import Parsed, SearchProtocol
from searchrl.rewards import (
    EVIDENCE_TEMPLATE,
    REWARD_PRESETS,
    REWARDS,
    completion_text,
    group_reward,
    make_preset,
    make_reward,
    r_search_format_reward,
    reward_options,
)
from searchrl.rewards import group as group_module


class FakeProtocol(SearchProtocol):
    """Tags as in R-Search; well formed = a <think> block and exactly one closed answer."""

    name = "fake"
    query_open, query_close = "<search>", "</search>"
    obs_open, obs_close = "<information>", "</information>"
    answer_open, answer_close = "<answer>", "</answer>"

    def parse(self, text: str) -> Parsed:
        own = re.sub(r"<information>.*?</information>", " ", text, flags=re.DOTALL)
        answers = re.findall(r"<answer>(.*?)</answer>", own, flags=re.DOTALL)
        evidence = re.findall(r"<original_evidence>(.*?)</original_evidence>", own, flags=re.DOTALL)
        return Parsed(
            queries=[q.strip() for q in re.findall(r"<search>(.*?)</search>", own, flags=re.DOTALL)],
            answer=answers[-1].strip() if answers else None,
            evidence=evidence[-1].strip() if evidence else None,
            format_ok="<think>" in own and len(answers) == 1,
        )


PROTOCOL = FakeProtocol()


def answer(text: str, think: bool = True) -> str:
    return ("<think>reasoning</think>" if think else "") + f"<answer>{text}</answer>"


def searched(query: str, docs: str, rest: str) -> str:
    return f"<think>need facts</think><search>{query}</search><information>{docs}</information>{rest}"


def score(name: str, completions, golden=None, **kwargs):
    fn = make_reward(name, PROTOCOL, **kwargs.pop("opts", {}))
    prompts = kwargs.pop("prompts", ["Q"] * len(completions))
    if golden is not None:
        kwargs["golden_answers"] = golden
    return fn(prompts=prompts, completions=completions, **kwargs)


# ------------------------------------------------------------------------------------------------ inputs


def test_completion_text_accepts_strings_and_messages():
    assert completion_text("plain") == "plain"
    assert completion_text([{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]) == "ab"
    assert (
        completion_text([{"role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": "image"}]}]) == "x"
    )
    with pytest.raises(TypeError, match="string or a list of chat messages"):
        completion_text(42)
    with pytest.raises(TypeError, match="'content'"):
        completion_text([{"role": "assistant"}])


def test_both_completion_formats_score_the_same():
    texts = [answer("Paris"), answer("Lyon"), "no answer at all"]
    chats = [[{"role": "assistant", "content": t}] for t in texts]
    golden = [["Paris"]] * 3
    assert score("em", texts, golden) == score("em", chats, golden) == [1.0, 0.0, 0.0]


def test_missing_columns_and_mismatched_lengths_are_clear_errors():
    with pytest.raises(ValueError, match="golden_answers"):
        score("em", [answer("Paris")])
    with pytest.raises(ValueError, match="2 values for 1 completions"):
        score("em", [answer("Paris")], [["Paris"], ["Paris"]])
    with pytest.raises(ValueError, match="must pair up"):
        score("em", [answer("Paris")], [["Paris"]], prompts=["a", "b"])
    with pytest.raises(TypeError, match="SearchProtocol"):
        make_reward("em", "search_r1")


# ------------------------------------------------------------------------------------------------ answer rewards


def test_em_cem_f1_on_the_parsed_answer():
    completions = [answer("The Eiffel Tower"), answer("the tower of Eiffel"), answer("Eiffel Tower in Paris"), "none"]
    golden = [["Eiffel Tower"]] * 4
    # Search-R1 eq. 3: EM of the extracted answer
    assert score("em", completions, golden) == [1.0, 0.0, 0.0, 0.0]
    # cover-EM: "eiffel tower" is a word sequence of "eiffel tower in paris", not of "tower of eiffel"
    assert score("cem", completions, golden) == [1.0, 0.0, 1.0, 0.0]
    # R1-Searcher eq. 4 / R-Search eq. 3: F1 = 2*IN/(PN+RN): "tower of eiffel" -> 2*2/(3+2) = 0.8;
    # "eiffel tower in paris" -> 2*2/(4+2) = 2/3
    assert score("f1", completions, golden) == pytest.approx([1.0, 0.8, 2 / 3, 0.0])


def test_only_the_answer_counts_not_the_reasoning():
    # the golden answer appears in the reasoning, the answer itself is wrong
    assert score("cem", ["<think>maybe Paris</think><answer>Lyon</answer>"], [["Paris"]]) == [0.0]


def test_plus_minus_one_variants_of_r1_searcher_eq5():
    # R1-Searcher eq. 5: +1 when EM/CEM is true, -1 when false (a missing answer is false)
    completions = [answer("Paris"), answer("It is Paris, France"), answer("Lyon"), "no answer"]
    golden = [["Paris"]] * 4
    assert score("em_pm1", completions, golden) == [1.0, -1.0, -1.0, -1.0]
    assert score("cem_pm1", completions, golden) == [1.0, 1.0, -1.0, -1.0]
    # the paper uses F1 directly in that ablation: there is no +-1 form of F1
    assert "f1_pm1" not in REWARDS
    with pytest.raises(ValueError, match="not f1"):
        make_reward("f1", PROTOCOL, plus_minus_one=True)


def test_cem_10w_of_r1_searcher_pp_eq4():
    ten = "I am quite sure that the answer is Paris France"  # 10 words: within the limit
    eleven = "I am really quite sure that the answer is Paris France"  # 11 words: counted as wrong
    assert len(ten.split()) == 10 and len(eleven.split()) == 11
    golden = [["Paris"]] * 3
    assert score("cem_10w", [answer(ten), answer(eleven), answer("Lyon")], golden) == [1.0, 0.0, 0.0]
    assert score("cem", [answer(eleven)], [["Paris"]]) == [1.0]  # plain cover-EM has no limit
    # the limit is an option
    assert score("cem_10w", [answer("surely Paris")], [["Paris"]], opts={"max_words": 1}) == [0.0]


def test_answer_rewards_return_zero_for_empty_or_missing_answers():
    completions = ["<think>x</think><answer>   </answer>", "<think>x</think>", ""]
    golden = [["Paris"]] * 3
    for name in ("em", "cem", "f1", "cem_10w"):
        assert score(name, completions, golden) == [0.0, 0.0, 0.0], name


# ------------------------------------------------------------------------------------------------ format rewards


def test_protocol_verdict_format_rewards():
    valid, invalid = answer("Paris"), answer("Paris", think=False)
    completions = [valid, invalid]
    assert score("format_r1s_stage1", completions) == [0.5, 0.0]  # R1-Searcher eq. 2
    assert score("format_r1s_stage2", completions) == [0.0, -2.0]  # R1-Searcher eq. 3
    assert score("format_r1spp", completions) == [0.0, -2.0]  # R1-Searcher++ eq. 3


@pytest.mark.parametrize(
    ("searched_", "evidence_ok", "answer_ok", "expected"),
    [
        # R-Search eq. 5 with g_e = g_a = 0.2: without a search the evidence term g_e is granted
        (False, False, False, 0.2),
        (False, False, True, 0.4),
        (False, True, True, 0.4),
        (False, True, False, 0.2),
        # with a search: g_e * I_E + g_a * I_A
        (True, False, False, 0.0),
        (True, True, False, 0.2),
        (True, False, True, 0.2),
        (True, True, True, 0.4),
    ],
)
def test_r_search_format_formula(searched_, evidence_ok, answer_ok, expected):
    assert r_search_format_reward(searched_, evidence_ok, answer_ok) == pytest.approx(expected)


def test_r_search_format_formula_weights():
    assert r_search_format_reward(True, True, False, gamma_e=0.3, gamma_a=0.1) == pytest.approx(0.3)
    assert r_search_format_reward(False, False, True, gamma_e=0.3, gamma_a=0.1) == pytest.approx(0.4)


def test_format_r_search_reads_the_indicators_from_the_text():
    evidence = "<original_evidence>Paris is the capital.</original_evidence>"
    completions = [
        answer("Paris"),  # no search, answer box: g_e + g_a
        "no tags at all",  # no search, no answer: g_e
        searched("capital", "Paris is the capital.", evidence + "<answer>Paris</answer>"),  # both boxes
        searched("capital", "docs", "<answer>Paris</answer>"),  # searched, no evidence
        searched("capital", "docs", evidence + "<answer>A</answer><answer>B</answer>"),  # two answer boxes
        searched("capital", "docs", evidence + "<answer> </answer>"),  # empty answer box
        # tags quoted inside an observation are not the model's own boxes
        searched("capital", "<answer>x</answer><original_evidence>y</original_evidence>", "<answer>Paris</answer>"),
        searched("capital", "docs", evidence + evidence + "<answer>Paris</answer>"),  # two evidence boxes
    ]
    expected = [0.4, 0.2, 0.4, 0.2, 0.2, 0.2, 0.2, 0.2]
    assert score("format_r_search", completions) == pytest.approx(expected)
    # the rollout's search count wins over the parsed queries: a completion that wrote a query but was never served
    assert score("format_r_search", [answer("Paris")], num_searches=[1]) == pytest.approx([0.2])
    # options override g_e / g_a; the ablation without evidence sets g_e = 0
    assert score("format_r_search", completions[:2], opts={"gamma_e": 0.5}) == pytest.approx([0.7, 0.5])
    assert score("format_r_search_no_evidence", completions[:4]) == pytest.approx([0.2, 0.0, 0.2, 0.2])


# ------------------------------------------------------------------------------------------------ retrieval reward


def test_retrieval_r1s_of_r1_searcher_eq1():
    completions = [answer("x"), searched("q", "d", answer("x")), searched("q", "d", searched("r", "e", answer("x")))]
    # eq. 1: 0.5 for n >= 1, else 0; n from the parsed queries when the rollout gives no count
    assert score("retrieval_r1s", completions) == [0.0, 0.5, 0.5]
    # n from the rollout engine's num_searches when present
    assert score("retrieval_r1s", completions, num_searches=[2, 0, 1]) == [0.5, 0.0, 0.5]


def test_repeated_query_penalty_only_for_a_query_asked_twice():
    completions = [answer("x"), searched("mother of Ann", "d", answer("x")),
                   searched("mother of Ann", "d", searched("father of Bo", "e", answer("x"))),
                   searched("mother of Ann", "d", searched("Mother of  ann?", "d", answer("x")))]
    # case, punctuation and spacing do not make a query new; a different second hop is no repeat
    assert score("repeated_query_penalty", completions) == [0.0, 0.0, 0.0, -0.5]
    assert score("repeated_query_penalty", completions[3:], opts={"penalty": -1.0}) == [-1.0]
    with pytest.raises(ValueError, match="negative"):
        score("repeated_query_penalty", completions, opts={"penalty": 0.5})


def test_support_recall_pays_for_each_supporting_passage_found():
    completions = [answer("x")] * 5
    doc_ids = [[["a"], ["b"]], [["a"], ["a"]], [["c", "a"]], [], [["a"]]]
    supporting = [["a", "b"], ["a", "b"], ["a"], ["a"], []]
    # both hops found; the same passage twice counts once; top-2 with one hit; no search; no labels -> not scored
    got = score("support_recall", completions, doc_ids=doc_ids, supporting_ids=supporting)
    assert got == [1.0, 0.5, 1.0, 0.0, None]
    assert score("support_recall", completions[:2], doc_ids=doc_ids[:2], supporting_ids=supporting[:2],
                 opts={"value": 0.5}) == [0.5, 0.25]
    with pytest.raises(ValueError, match="supporting_ids"):
        score("support_recall", completions, doc_ids=doc_ids)
    with pytest.raises(ValueError, match="positive"):
        score("support_recall", completions, doc_ids=doc_ids, supporting_ids=supporting, opts={"value": 0.0})


def test_needs_support_scores_an_answer_without_its_evidence_as_wrong():
    completions = [answer("Paris")] * 4
    golden = [["Paris"]] * 4
    doc_ids = [[["a"], ["b"]], [["a"]], [], [["z"]]]
    supporting = [["a", "b"], ["a", "b"], ["a"], []]
    # evidence complete; half of it; none; a row naming no supporting passages is not gated
    gated = {"needs_support": True}
    assert score("em_pm1", completions, golden, doc_ids=doc_ids, supporting_ids=supporting,
                 opts=gated) == [1.0, -1.0, -1.0, 1.0]
    assert score("f1", completions, golden, doc_ids=doc_ids, supporting_ids=supporting, opts=gated) == [1, 0, 0, 1]
    assert score("em_pm1", completions, golden) == [1.0] * 4  # off by default, and then needs no columns
    with pytest.raises(ValueError, match="supporting_ids"):
        score("em", completions, golden, doc_ids=doc_ids, opts=gated)
    # the group reward judges correctness the same way: a guess that found nothing is not the fewest-search answer
    group = score("group_r1spp", completions, golden, prompts=["q"] * 4, num_searches=[2, 1, 0, 1],
                  doc_ids=doc_ids, supporting_ids=supporting, opts={"correct_by": "em", "needs_support": True})
    ungated = score("group_r1spp", completions, golden, prompts=["q"] * 4, num_searches=[2, 1, 0, 1],
                    opts={"correct_by": "em"})
    assert group[2] == 0.0 and ungated[2] > 0  # the 0-search guess earns the bonus only ungated
    assert group[3] > 0 and group[0] == 0.0  # gated, the fewest-search supported answers are row 3's (1 search)


def test_excess_search_penalty_costs_only_searches_beyond_the_hops():
    one, two = searched("q1", "d", answer("x")), searched("q1", "d", searched("q2", "e", answer("x")))
    three = searched("q1", "d", searched("q2", "e", searched("q3", "f", answer("x"))))
    completions = [answer("x"), one, two, two, three, two]
    supporting = [["a"], ["a"], ["a"], ["a", "b"], ["a", "b"], []]
    # no search and a needed search cost nothing; each search past the hops costs the penalty; no labels -> None
    got = score("excess_search_penalty", completions, supporting_ids=supporting)
    assert got == [0.0, 0.0, -0.5, 0.0, -0.5, None]
    assert score("excess_search_penalty", [three], supporting_ids=[["a"]], opts={"penalty": -0.25}) == [-0.5]
    with pytest.raises(ValueError, match="supporting_ids"):
        score("excess_search_penalty", completions)
    with pytest.raises(ValueError, match="negative"):
        score("excess_search_penalty", completions, supporting_ids=supporting, opts={"penalty": 0.5})


def test_prompt_dataset_carries_the_supporting_passages(tokenizer):
    from searchrl.data.schema import make_row
    from searchrl.trainer.data import prompt_dataset

    rows = [make_row("q1", "Who?", ["x"], type="inference", hops=2, supporting_ids=["d1", "d2"]),
            make_row("q2", "What?", ["y"])]
    data = prompt_dataset(rows, PROTOCOL, tokenizer)
    assert data["supporting_ids"] == [["d1", "d2"], []]


# ------------------------------------------------------------------------------------------------ group reward


def test_group_reward_by_hand():
    # R1-Searcher++ eq. 5-6. counts [0,1,2,2]: mean 1.25, squared deviations 1.5625+0.0625+0.5625+0.5625 = 2.75,
    # population variance 2.75/4 = 0.6875, 2*sigma^2 = 1.375 < eta = 2. Correct responses have counts {0,1,2}:
    # t_min = 0, so only the first response is rewarded.
    assert group_reward([0, 1, 2, 2], [True, True, False, True]) == pytest.approx([1.375, 0.0, 0.0, 0.0])
    # the std-dev is over ALL responses: the incorrect response with 5 retrievals raises it.
    # counts [1,1,5]: mean 7/3, variance ((4/3)^2*2 + (8/3)^2)/3 = (32/9+64/9)/3 = 32/9, 2*sigma^2 = 64/9 -> clip to 2
    assert group_reward([1, 1, 5], [True, True, False]) == pytest.approx([2.0, 2.0, 0.0])  # ties share t_min
    assert group_reward([1, 1, 5], [True, True, False], eta=10.0) == pytest.approx([64 / 9, 64 / 9, 0.0])
    # counts [1,1,3]: mean 5/3, variance (4/9*2 + 16/9)/3 = 8/9, 2*sigma^2 = 16/9
    assert group_reward([1, 1, 3], [True, True, False]) == pytest.approx([16 / 9, 16 / 9, 0.0])
    # the minimum is taken among correct responses only: the 0-retrieval response is wrong
    # counts [0,2,4]: mean 2, variance 8/3, 2*sigma^2 = 16/3 -> 2; t_min = 2
    assert group_reward([0, 2, 4], [False, True, True]) == pytest.approx([0.0, 2.0, 0.0])


def test_group_reward_degenerate_groups():
    assert group_reward([1, 3], [False, False]) == [0.0, 0.0]  # nobody correct
    assert group_reward([2, 2, 2], [True, True, True]) == [0.0, 0.0, 0.0]  # sigma = 0
    assert group_reward([], []) == []
    with pytest.raises(ValueError, match="counts for"):
        group_reward([1], [True, False])
    with pytest.raises(ValueError, match="negative"):
        group_reward([-1], [True])


def test_group_r1spp_groups_by_prompt_and_uses_cem_10w_correctness():
    long_correct = "I am really quite sure that the answer is Paris France"  # 11 words: not correct under eq. 4
    completions = [
        answer("Paris"),  # q1, 0 searches, correct -> t_min
        answer("Paris"),  # q1, 2 searches, correct
        answer("Berlin"),  # q2, 0 searches, wrong
        answer(long_correct),  # q1, 0 searches, wrong (too long)
        answer("Berlin"),  # q2, 3 searches, correct
        answer("Rome"),  # q1, 2 searches, wrong
    ]
    prompts = ["q1", "q1", "q2", "q1", "q2", "q1"]
    golden = [["Paris"], ["Paris"], ["Germany"], ["Paris"], ["Berlin"], ["Paris"]]
    searches = [0, 2, 0, 0, 3, 2]
    # q1 counts [0,2,0,2]: variance 1, 2*sigma^2 = 2; correct counts {0,2} -> t_min 0 -> first response gets 2.
    # q2 counts [0,3]: variance 2.25, 2*sigma^2 = 4.5 -> clipped to 2; only the 3-search response is correct.
    expected = [2.0, 0.0, 0.0, 0.0, 2.0, 0.0]
    logged = {}
    rewards = score(
        "group_r1spp",
        completions,
        golden,
        prompts=prompts,
        num_searches=searches,
        log_metric=lambda name, value: logged.__setitem__(name, value),
    )
    assert rewards == pytest.approx(expected)
    assert logged["group_r1spp/retrieval_std"] == pytest.approx((1.0 + 1.5) / 2)
    # eta as an option
    assert score("group_r1spp", completions, golden, prompts=prompts, num_searches=searches, opts={"eta": 1.0}) == (
        pytest.approx([1.0, 0.0, 0.0, 0.0, 1.0, 0.0])
    )
    # the same groups identified by an id column instead of the prompt text
    by_id = score(
        "group_r1spp",
        completions,
        golden,
        prompts=["same"] * 6,
        id=[1, 1, 2, 1, 2, 1],
        num_searches=searches,
        opts={"group_by": "id"},
    )
    assert by_id == pytest.approx(expected)


def test_group_r1spp_with_conversational_prompts():
    prompts = [[{"role": "user", "content": "q1"}]] * 2 + [[{"role": "user", "content": "q2"}]] * 2
    completions = [[{"role": "assistant", "content": answer("Paris")}]] * 4
    rewards = score("group_r1spp", completions, [["Paris"]] * 4, prompts=prompts, num_searches=[0, 2, 1, 1])
    # q1: counts [0,2], variance 1 -> 2; q2: counts [1,1], sigma 0 -> 0
    assert rewards == pytest.approx([2.0, 0.0, 0.0, 0.0])


def test_group_r1spp_gathers_split_groups_across_processes(monkeypatch):
    """Two processes each hold part of every group; each must get the rewards the whole groups give."""
    completions = [answer(a) for a in ("Paris", "Paris", "Berlin", "Berlin", "Paris", "Berlin")]
    prompts = ["q1", "q2", "q1", "q2", "q1", "q2"]
    golden = [["Paris"] if p == "q1" else ["Berlin"] for p in prompts]
    columns = {"golden_answers": golden, "num_searches": [1, 0, 0, 2, 3, 0]}
    # q1 = responses 0,2,4: counts [1,0,3], correct [T,F,T]; variance 14/9, 2*sigma^2 = 28/9 -> clipped to 2;
    #      t_min among correct = 1 -> response 0.
    # q2 = responses 1,3,5: counts [0,2,0], correct [F,T,T]; variance 8/9, 2*sigma^2 = 16/9; t_min = 0 -> response 5.
    whole = score("group_r1spp", completions, prompts=prompts, **columns)
    assert whole == pytest.approx([2.0, 0.0, 0.0, 0.0, 0.0, 16 / 9])

    fn = make_reward("group_r1spp", PROTOCOL)
    halves = [slice(0, 3), slice(3, 6)]

    def call(part: slice):
        return fn(prompts=prompts[part], completions=completions[part], **{k: v[part] for k, v in columns.items()})

    # scored alone, the first slice sees q1 as counts [1,0] (variance 1/4 -> 0.5): the wrong reward
    assert call(halves[0]) == pytest.approx([0.5, 0.0, 0.0])

    # first pass: record what each process contributes
    payloads = []
    monkeypatch.setattr(group_module, "gather_across_processes", lambda local: payloads.append(local) or [[local], 0])
    for part in halves:
        call(part)
    # second pass: every process sees both payloads, in rank order, and returns its own slice
    results = []
    for rank, part in enumerate(halves):
        monkeypatch.setattr(group_module, "gather_across_processes", lambda local, r=rank: (payloads, r))
        results.extend(call(part))
    assert results == pytest.approx(whole)


def test_gather_across_processes_is_identity_without_distributed():
    assert group_module.gather_across_processes([("k", 1, True)]) == ([[("k", 1, True)]], 0)


def test_group_reward_rejects_a_gather_without_this_slice(monkeypatch):
    monkeypatch.setattr(group_module, "gather_across_processes", lambda local: ([[]], 0))
    with pytest.raises(RuntimeError, match="slice"):
        score("group_r1spp", [answer("Paris")], [["Paris"]])


# ------------------------------------------------------------------------------------------------ evidence reward


class RecordingAnswerer:
    def __init__(self, replies):
        self.replies = list(replies)
        self.prompts: list[str] = []

    def __call__(self, prompts):
        self.prompts.extend(prompts)
        return self.replies[: len(prompts)]


def test_evidence_r_search_of_eq4_with_a_fake_answerer():
    evidence = "<original_evidence>Paris is the capital of France.</original_evidence>"
    completions = [
        searched("capital", "docs", evidence + "<answer>Paris</answer>"),  # judged: cross answer "Paris" -> F1 1
        answer("Paris"),  # no search: not judged -> 0
        searched("capital", "docs", "<answer>Paris</answer>"),  # searched but no evidence -> 0
        searched("capital", "docs", evidence + "<answer>Lyon</answer>"),  # judged: "the city of Paris" -> 2/(3+1)
    ]
    answerer = RecordingAnswerer(["Paris", "The city of Paris"])
    fn = make_reward("evidence_r_search", PROTOCOL, answerer=answerer)
    rewards = fn(
        prompts=["p"] * 4,
        completions=completions,
        golden_answers=[["Paris"]] * 4,
        question=["What is the capital of France?"] * 4,
    )
    # F1("the city of paris" -> "city of paris", "paris") = 2*1/(3+1) = 0.5
    assert rewards == pytest.approx([1.0, 0.0, 0.0, 0.5])
    # one batched call, prompts built from the R-Search Table 5 template
    filled = EVIDENCE_TEMPLATE.replace("{evidence}", "Paris is the capital of France.")
    assert answerer.prompts == [filled.replace("{query}", "What is the capital of France?")] * 2
    assert answerer.prompts[0].startswith("Answer the question based on the given passages.")
    assert "Paris is the capital of France." in answerer.prompts[0]
    assert re.search(r"Question: What is the capital of France\?\s*Answer:$", answerer.prompts[0])


def test_r_search_scores_f1_without_the_yes_no_rule():
    # R-Search eq. 3 and eq. 4 are plain word F1: "no" against "no it is not" earns 2*1/(1+4); R1-Searcher's F1
    # (`f1`, as its released evaluation) lets a yes/no answer match only itself
    completions = [answer("no"), answer("yes")]
    golden = [["no it is not"], ["yes"]]
    assert score("f1_r_search", completions, golden) == pytest.approx([0.4, 1.0])
    assert score("f1", completions, golden) == pytest.approx([0.0, 1.0])
    evidence = "<original_evidence>It is not.</original_evidence>"
    fn = make_reward("evidence_r_search", PROTOCOL, answerer=RecordingAnswerer(["no"]))
    rewards = fn(prompts=["p"], completions=[searched("q", "docs", evidence + "<answer>no</answer>")],
                 golden_answers=[["no it is not"]], question=["Is it?"])
    assert rewards == pytest.approx([0.4])


def test_group_reward_counts_only_a_full_answer_score_as_correct():
    # eq. 5: correct means R_answer = 1; with F1 as the correctness test, a partial answer (F1 0.67) is not correct
    completions = [answer("Paris"), answer("Paris France"), answer("Rome")]
    golden = [["Paris"]] * 3
    rewards = score("group_r1spp", completions, golden, prompts=["q"] * 3, num_searches=[2, 0, 1],
                    opts={"correct_by": "f1"})
    # counts [2, 0, 1]: 2*sigma^2 = 4/3; the only correct response (2 searches) is the fewest among the correct
    assert rewards == pytest.approx([4 / 3, 0.0, 0.0])


def test_evidence_r_search_options_and_errors():
    evidence_completion = searched("q", "d", "<original_evidence>e</original_evidence><answer>Bob</answer>")
    columns = {"golden_answers": [["Bob"]] * 2, "question": ["Q?"] * 2}
    fn = make_reward("evidence_r_search", PROTOCOL, answerer=RecordingAnswerer(["Bob"]), missing=None)
    assert fn(prompts=["p"] * 2, completions=[evidence_completion, answer("a")], **columns) == [1.0, None]
    with pytest.raises(ValueError, match="question"):
        fn(prompts=["p"], completions=[evidence_completion], golden_answers=[["a"]])
    broken = make_reward("evidence_r_search", PROTOCOL, answerer=lambda prompts: [])
    with pytest.raises(ValueError, match="0 answers for 1 prompts"):
        broken(prompts=["p"], completions=[evidence_completion], golden_answers=[["a"]], question=["Q?"])
    with pytest.raises(ValueError, match="not both"):
        make_reward("evidence_r_search", PROTOCOL, answerer=lambda p: p, answerer_model="somewhere")


def test_evidence_prompt_comes_from_the_protocol_when_it_has_one():
    class WithEvidencePrompt(FakeProtocol):
        def evidence_prompt(self, question, evidence):
            return f"E={evidence} Q={question}"

    answerer = RecordingAnswerer(["a"])
    fn = make_reward("evidence_r_search", WithEvidencePrompt(), answerer=answerer)
    completion = searched("q", "d", "<original_evidence>ev</original_evidence><answer>a</answer>")
    fn(prompts=["p"], completions=[completion], golden_answers=[["a"]], question=["Q?"])
    assert answerer.prompts == ["E=ev Q=Q?"]


def test_evidence_reward_does_not_load_a_model_until_used(monkeypatch):
    from searchrl.rewards import evidence as evidence_module

    loads = []
    monkeypatch.setattr(evidence_module, "load_answerer", lambda *a, **k: loads.append(a) or (lambda p: ["x"] * len(p)))
    fn = make_reward("evidence_r_search", PROTOCOL, answerer_model="some/model")
    assert loads == []
    fn(prompts=["p"], completions=[answer("a")], golden_answers=[["a"]], question=["Q?"])  # nothing to judge
    assert loads == []
    completion = searched("q", "d", "<original_evidence>ev</original_evidence><answer>a</answer>")
    fn(prompts=["p"], completions=[completion], golden_answers=[["a"]], question=["Q?"])
    assert loads == [("some/model",)]


@pytest.mark.slow
def test_evidence_reward_with_the_bundled_model():
    # The real answerer reads the evidence and answers from it: "Paris" (F1 1), or a longer phrase holding it
    fn = make_reward("evidence_r_search", PROTOCOL, max_new_tokens=8)
    completion = searched(
        "q", "d", "<original_evidence>Paris is the capital of France.</original_evidence><answer>Paris</answer>"
    )
    rewards = fn(
        prompts=["p"], completions=[completion], golden_answers=[["Paris"]], question=["What is the capital of France?"]
    )
    assert len(rewards) == 1 and rewards[0] >= 0.5


# ------------------------------------------------------------------------------------------------ registry


def test_reward_names_are_what_trl_logs():
    from trl.trainer.utils import get_callable_name, is_async_callable

    for name in REWARDS:
        fn = make_reward(name, PROTOCOL, **({"answerer": RecordingAnswerer([])} if name.startswith("evidence") else {}))
        assert fn.__name__ == name
        assert get_callable_name(fn) == name
        assert not is_async_callable(fn)


def test_rewards_pickle_with_their_protocol():
    fn = pickle.loads(pickle.dumps(make_reward("cem_10w", PROTOCOL)))
    assert fn.__name__ == "cem_10w"
    assert fn(prompts=["p"], completions=[answer("Paris")], golden_answers=[["Paris"]]) == [1.0]


def test_unknown_names_and_options_suggest_the_nearest():
    with pytest.raises(ValueError, match="did you mean 'cem_10w'"):
        make_reward("cem10w", PROTOCOL)
    with pytest.raises(ValueError, match="did you mean 'max_words'"):
        make_reward("cem_10w", PROTOCOL, max_word=3)
    with pytest.raises(ValueError, match="did you mean 'r_search'"):
        make_preset("rsearch", PROTOCOL)
    assert reward_options("format_r_search") == {"gamma_e": 0.2, "gamma_a": 0.2}


def test_presets_name_registered_rewards():
    expected = {
        "search_r1": [("em", 1.0)],
        "r1_searcher_stage1": [("retrieval_r1s", 1.0), ("format_r1s_stage1", 1.0)],
        "r1_searcher_stage2": [("f1", 1.0), ("format_r1s_stage2", 1.0)],
        "r1_searcher_pp": [("format_r1spp", 1.0), ("cem_10w", 1.0), ("group_r1spp", 1.0)],
        "r_search": [("f1_r_search", 1.0), ("evidence_r_search", 1.0), ("format_r_search", 1.0)],
    }
    for preset, entries in expected.items():
        assert REWARD_PRESETS[preset] == entries
    for entries in REWARD_PRESETS.values():
        assert all(name in REWARDS for name, _ in entries)


def test_make_preset_builds_functions_and_weights():
    answerer = RecordingAnswerer(["Paris"])
    funcs, weights = make_preset("r_search", PROTOCOL, {"evidence_r_search": {"answerer": answerer}})
    assert [f.__name__ for f in funcs] == ["f1_r_search", "evidence_r_search", "format_r_search"]
    assert weights == [1.0, 1.0, 1.0]
    completion = searched("capital", "docs", "<original_evidence>Paris.</original_evidence><answer>Paris</answer>")
    columns = {"golden_answers": [["Paris"]], "question": ["Capital?"]}
    total = sum(w * f(prompts=["p"], completions=[completion], **columns)[0] for f, w in zip(funcs, weights))
    assert total == pytest.approx(1.0 + 1.0 + 0.4)  # R-Search eq. 6: answer + evidence + format
    with pytest.raises(ValueError, match="has no reward"):
        make_preset("search_r1", PROTOCOL, {"f1": {}})


# ------------------------------------------------------------------------------------------------ real protocols


def _protocol(name: str):
    from searchrl.protocols import get_protocol

    return get_protocol(name)


def _doc():
    from searchrl.data.schema import Doc

    return Doc("1", "France", "Paris is the capital of France.")


def test_search_r1_em_with_the_real_protocol():
    protocol = _protocol("search_r1")
    em = make_reward("em", protocol)
    good = "<think>I know it.</think>\n<answer> Paris </answer>"
    rewards = em(prompts=["p", "p"], completions=[good, "<think>no idea</think>"], golden_answers=[["Paris"]] * 2)
    assert rewards == [1.0, 0.0]


def test_r1_searcher_stage_presets_with_the_real_protocol():
    protocol = _protocol("r1_searcher")
    obs = protocol.format_observation([_doc()])
    good = f"reasoning <|begin_of_query|>capital of France<|end_of_query|>{obs}so</think><answer>Paris</answer>"
    no_search = "I know it.</think><answer>Paris</answer>"
    made_up_docs = "<|begin_of_documents|>fake<|end_of_documents|></think><answer>Paris</answer>"  # issue 1, sec. 4.2
    completions = [good, no_search, made_up_docs]
    stage1, _ = make_preset("r1_searcher_stage1", protocol)
    per_reward = [f(prompts=["p"] * 3, completions=completions, golden_answers=[["Paris"]] * 3) for f in stage1]
    # eq. 1 (retrieval) then eq. 2 (format): documents without a query break the format rule 3
    assert per_reward == [[0.5, 0.0, 0.0], [0.5, 0.5, 0.0]]
    stage2, _ = make_preset("r1_searcher_stage2", protocol)
    per_reward = [f(prompts=["p"] * 3, completions=completions, golden_answers=[["Paris"]] * 3) for f in stage2]
    assert per_reward == [[1.0, 1.0, 1.0], [0.0, 0.0, -2.0]]  # eq. 4 (F1), eq. 3 (format)


def test_r1_searcher_pp_preset_with_the_real_protocol():
    protocol = _protocol("r1_searcher_pp")
    obs = protocol.format_observation([_doc()])
    searched_ok = f"<|begin_external_search|>capital of France<|end_external_search|>{obs}So \\boxed{{Paris}}."
    internal_ok = "<|begin_internal_answer|>It is Paris.<|end_internal_answer|> So \\boxed{Paris}."
    wrong = "<|begin_internal_answer|>It is Lyon.<|end_internal_answer|> So \\boxed{Lyon}."
    completions = [searched_ok, internal_ok, wrong, "no box at all"]
    assert [protocol.parse(c).answer for c in completions] == ["Paris", "Paris", "Lyon", None]
    funcs, _ = make_preset("r1_searcher_pp", protocol)
    columns = {"golden_answers": [["Paris"]] * 4, "num_searches": [1, 0, 0, 0]}
    rewards = {f.__name__: f(prompts=["q"] * 4, completions=completions, **columns) for f in funcs}
    assert rewards["format_r1spp"][3] == -2.0 and rewards["format_r1spp"][:3] == [0.0, 0.0, 0.0]
    assert rewards["cem_10w"] == [1.0, 1.0, 0.0, 0.0]
    # counts [1,0,0,0]: variance 3/16, 2*sigma^2 = 3/8; correct counts {1,0}: t_min 0 -> the internal answer
    assert rewards["group_r1spp"] == pytest.approx([0.0, 0.375, 0.0, 0.0])


def test_r_search_preset_with_the_real_protocol():
    protocol = _protocol("r_search")
    obs = protocol.format_observation([_doc()])
    evidence = "<original_evidence>Paris is the capital of France.</original_evidence>"
    full = f"I need facts. <search>capital of France</search>{obs}{evidence}<answer>Paris</answer>"
    no_evidence = f"I need facts. <search>capital of France</search>{obs}<answer>Paris</answer>"
    answerer = RecordingAnswerer(["Paris"])
    funcs, _ = make_preset("r_search", protocol, {"evidence_r_search": {"answerer": answerer}})
    columns = {"golden_answers": [["Paris"]] * 2, "question": ["Capital of France?"] * 2}
    rewards = {f.__name__: f(prompts=["q"] * 2, completions=[full, no_evidence], **columns) for f in funcs}
    assert rewards["f1_r_search"] == [1.0, 1.0]  # eq. 3
    assert rewards["evidence_r_search"] == [1.0, 0.0]  # eq. 4
    assert rewards["format_r_search"] == pytest.approx([0.4, 0.2])  # eq. 5
    assert answerer.prompts == [protocol.evidence_prompt("Capital of France?", "Paris is the capital of France.")]


@given(
    group=st.lists(st.tuples(st.integers(0, 8), st.booleans()), min_size=1, max_size=16),
    eta=st.floats(0.0, 5.0),
)
def test_group_reward_properties(group, eta):
    """Only correct responses with the fewest retrievals among correct ones are rewarded, all by the same amount."""
    counts, correct = [t for t, _ in group], [ok for _, ok in group]
    rewards = group_reward(counts, correct, eta=eta)
    assert all(0.0 <= r <= eta + 1e-12 for r in rewards)
    rewarded = {counts[i] for i, r in enumerate(rewards) if r > 0}
    assert all(correct[i] for i, r in enumerate(rewards) if r > 0)
    assert len(rewarded) <= 1 and len({r for r in rewards if r > 0}) <= 1
    if rewarded:
        assert rewarded == {min(t for t, ok in group if ok)}
