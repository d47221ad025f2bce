"""Difficulty labels (R1-Searcher section 2.1): buckets from the first correct rollout, the cache, recipe mixing."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from fakes import FakeRetriever, MiniProtocol
from searchrl.config.difficulty import DifficultyConfig, difficulty_problems
from searchrl.data.difficulty import (
    bucket_of,
    difficulty_counts,
    label_difficulty,
    mix_by_recipe,
    mixture_problems,
    recipe_counts,
    recipe_for_stage,
)
from searchrl.data.schema import make_row
from searchrl.experiments.data_selection import PolicySampler, difficulty_histogram, policy_identity
from searchrl.rollout import RolloutConfig, TurnOutput

# The rollout at which each question is first answered correctly (None: never), and the bucket that gives under
# the paper's bounds (easy below 10, difficult above 20).
SOLVE_AT = {"q0": 1, "q1": 9, "q2": 10, "q3": 20, "q4": 21, "q5": None}
BUCKET = {"q0": "easy", "q1": "easy", "q2": "medium", "q3": "medium", "q4": "difficult", "q5": "unsolved"}


class SolveAtGenerator:
    """A scripted policy: its k-th rollout of a question answers "right" when k is that question's chosen index,
    "wrong" otherwise. Rollouts are counted per question, in the order the engine asks for them."""

    def __init__(self, tokenizer, solve_at):
        self.tokenizer, self.solve_at = tokenizer, solve_at
        self.rollouts: Counter = Counter()

    def generate_turn(self, sequences, max_new_tokens):
        outs = []
        for seq in sequences:
            qid = re.search(r"question (q\d+)", self.tokenizer.decode(seq)).group(1)
            self.rollouts[qid] += 1
            answer = "right" if self.rollouts[qid] == self.solve_at[qid] else "wrong"
            ids = self.tokenizer(f"<answer>{answer}</answer>", add_special_tokens=False)["input_ids"]
            outs.append(TurnOutput(ids + [self.tokenizer.eos_token_id], "eos"))
        return outs

    def reset(self):
        pass


@pytest.fixture(scope="module")
def tokenizer():
    """The policy tokenizer alone (the shared fixture builds a tiny model too, which these tests do not need)."""
    from searchrl.models import load_tokenizer

    return load_tokenizer()


def _rows(ids=SOLVE_AT):
    return [make_row(q, f"What does question {q} ask?", ["right"], type="bridge" if q < "q3" else "comparison")
            for q in ids]


def _sampler(tokenizer, generator, retriever, rollout=None, **kwargs):
    return PolicySampler(None, tokenizer, MiniProtocol(), retriever, rollout or RolloutConfig(), chat=False, **kwargs,
                         policy_name="scripted", batch_size=64, generator=generator)


def _cfg(tmp_path, **changes):
    return DifficultyConfig(difficulty_rollouts=25, difficulty_chunk=8,
                            difficulty_cache=str(tmp_path / "difficulty.jsonl"), **changes)


def _labels(rows):
    return {r["id"]: (r["metadata"]["rollouts_to_solve"], r["metadata"]["difficulty"]) for r in rows}


def test_buckets_follow_the_papers_bounds():
    cfg = DifficultyConfig()
    assert [bucket_of(k, cfg) for k in (1, 9, 10, 20, 21, 40, None)] == [
        "easy", "easy", "medium", "medium", "difficult", "difficult", "unsolved"]
    narrow = DifficultyConfig(difficulty_easy_below=2, difficulty_hard_above=3)
    assert [bucket_of(k, narrow) for k in (1, 2, 3, 4)] == ["easy", "medium", "medium", "difficult"]


@pytest.mark.parametrize("progress", [True, False])
def test_a_sampling_round_shows_its_own_bar_over_questions(tokenizer, capsys, progress):
    sampler = _sampler(tokenizer, SolveAtGenerator(tokenizer, SOLVE_AT), FakeRetriever(), progress=progress)
    assert len(sampler.correct(_rows(), 3)) == len(_rows())
    err = capsys.readouterr().err
    assert ("difficulty round (3 each)" in err and f"{len(_rows())}/{len(_rows())}" in err) == progress


def test_labels_come_from_the_first_correct_rollout_of_the_engine(tokenizer, tmp_path):
    generator = SolveAtGenerator(tokenizer, SOLVE_AT)
    labelled = label_difficulty(_rows(), _sampler(tokenizer, generator, FakeRetriever()), _cfg(tmp_path),
                                progress=False)
    assert _labels(labelled) == {q: (SOLVE_AT[q], BUCKET[q]) for q in SOLVE_AT}
    # Rounds of 8 rollouts: q0 stops after round 1; q1, q2 after round 2 (16); q3, q4 after round 3 (24); q5
    # gets the one rollout left of its budget of 25.
    assert dict(generator.rollouts) == {"q0": 8, "q1": 16, "q2": 16, "q3": 24, "q4": 24, "q5": 25}
    assert [r["metadata"]["rollouts_sampled"] for r in labelled] == [8, 16, 16, 24, 24, 25]
    assert [r["metadata"]["type"] for r in labelled] == ["bridge"] * 3 + ["comparison"] * 3  # metadata kept
    assert "difficulty" not in _rows()[0]["metadata"]  # the input rows are not changed


def test_cache_hit_samples_nothing_and_a_larger_budget_samples_only_the_rest(tokenizer, tmp_path):
    retriever = FakeRetriever()
    label_difficulty(_rows(), _sampler(tokenizer, SolveAtGenerator(tokenizer, SOLVE_AT), retriever), _cfg(tmp_path),
                     progress=False)
    cache = tmp_path / "difficulty.jsonl"
    assert len(cache.read_text().splitlines()) == 6
    assert [p.name for p in tmp_path.iterdir()] == ["difficulty.jsonl"]  # no temporary file left behind

    again = SolveAtGenerator(tokenizer, SOLVE_AT)
    labelled = label_difficulty(_rows(), _sampler(tokenizer, again, FakeRetriever()), _cfg(tmp_path), progress=False)
    assert sum(again.rollouts.values()) == 0
    assert _labels(labelled) == {q: (SOLVE_AT[q], BUCKET[q]) for q in SOLVE_AT}

    # A budget of 30: only q5 (unsolved after 25) is sampled, 5 more times; it is right on the 3rd of them.
    more = SolveAtGenerator(tokenizer, {**SOLVE_AT, "q5": 3})
    labelled = label_difficulty(_rows(), _sampler(tokenizer, more, retriever), _cfg(tmp_path).__class__(
        difficulty_rollouts=30, difficulty_chunk=8, difficulty_cache=str(cache)), progress=False)
    assert dict(more.rollouts) == {"q5": 5}
    assert _labels(labelled)["q5"] == (28, "difficult")
    # A smaller budget reads the same cache: q4 (solved at 21) and q5 (28) are unsolved within 20.
    small = label_difficulty(_rows(), _sampler(tokenizer, SolveAtGenerator(tokenizer, SOLVE_AT), retriever),
                             DifficultyConfig(difficulty_rollouts=20, difficulty_cache=str(cache)), progress=False)
    assert [r["metadata"]["difficulty"] for r in small] == ["easy", "easy", "medium", "medium", "unsolved",
                                                            "unsolved"]

    # Other rollout settings are another key: everything is sampled again.
    other = SolveAtGenerator(tokenizer, SOLVE_AT)
    label_difficulty(_rows(["q0"]), _sampler(tokenizer, other, retriever, RolloutConfig(top_k=2)), _cfg(tmp_path),
                     progress=False)
    assert dict(other.rollouts) == {"q0": 8}


def test_cache_keeps_entries_written_by_another_run_and_skips_a_torn_line(tokenizer, tmp_path):
    cache = tmp_path / "difficulty.jsonl"
    cache.write_text('{"key": "someone-else", "solved_at": 3, "sampled": 8}\n{"key": "torn", "sol')
    label_difficulty(_rows(["q0"]), _sampler(tokenizer, SolveAtGenerator(tokenizer, SOLVE_AT), FakeRetriever()),
                     _cfg(tmp_path), progress=False)
    keys = [json.loads(line)["key"] for line in cache.read_text().splitlines()]
    assert keys[0] == "someone-else" and len(keys) == 2


def _labelled(counts):
    rows = []
    for bucket, n in counts.items():
        rows += [{**make_row(f"{bucket}{i}", f"Question {bucket} {i}?", ["a"], type="bridge"),
                  "metadata": {"type": "bridge" if i % 2 else "comparison", "difficulty": bucket}} for i in range(n)]
    return rows


ROWS = _labelled({"easy": 4, "medium": 6, "difficult": 3, "unsolved": 1})


def test_recipe_counts_and_fractions():
    mixed = mix_by_recipe(ROWS, {"medium": 4, "difficult": 2}, seed=0)
    assert Counter(r["metadata"]["difficulty"] for r in mixed) == {"medium": 4, "difficult": 2}
    assert len({r["id"] for r in mixed}) == 6  # drawn without replacement
    assert [r["id"] for r in mix_by_recipe(ROWS, {"medium": 4, "difficult": 2}, seed=0)] == [r["id"] for r in mixed]
    # Fractions without a total: the largest half-and-half mixture 3 difficult questions allow.
    halves = mix_by_recipe(ROWS, {"medium": 0.5, "difficult": 0.5}, seed=1)
    assert Counter(r["metadata"]["difficulty"] for r in halves) == {"medium": 3, "difficult": 3}
    # Largest remainders: 7 x (0.2, 0.3, 0.5) = 1.4, 2.1, 3.5 -> 1, 2, 3 and the last one to difficult.
    assert recipe_counts({"easy": 0.2, "medium": 0.3, "difficult": 0.5}, {}, total=7) == {
        "easy": 1, "medium": 2, "difficult": 4}
    assert recipe_counts({"medium": 0.5, "difficult": 0.5}, {}, total=5) == {"medium": 3, "difficult": 2}


def test_recipe_errors_say_what_to_fix():
    with pytest.raises(ValueError, match=r"4 difficult \(only 3 labelled difficult\)"):
        mix_by_recipe(ROWS, {"medium": 2, "difficult": 4})
    with pytest.raises(ValueError, match=r"3 easy \(only 0 labelled easy\)"):
        mix_by_recipe(_labelled({"medium": 6}), {"easy": 0.5, "medium": 0.5}, total=6)
    with pytest.raises(ValueError, match="hold no labelled question"):
        mix_by_recipe(_labelled({"medium": 6}), {"easy": 0.5, "medium": 0.5})
    with pytest.raises(ValueError, match="unknown difficulty bucket"):
        mix_by_recipe(ROWS, {"hard": 2})
    with pytest.raises(ValueError, match="mixes counts and fractions"):
        mix_by_recipe(ROWS, {"medium": 2, "difficult": 0.5})
    with pytest.raises(ValueError, match="sum to 1"):
        mix_by_recipe(ROWS, {"medium": 0.5, "difficult": 0.6})
    with pytest.raises(ValueError, match="labelled by label_difficulty"):
        mix_by_recipe([make_row("x", "Q?", ["a"])], {"medium": 1})


def test_settings_are_checked():
    with pytest.raises(ValueError, match="difficulty_rollouts is 20; raise it"):
        DifficultyConfig(difficulty_rollouts=20, data_recipe={"medium": 0.5, "difficult": 0.5})
    with pytest.raises(ValueError, match="needs labels"):
        DifficultyConfig(data_recipe={"medium": 10})
    with pytest.raises(ValueError, match="no question could be medium"):
        DifficultyConfig(difficulty_easy_below=10, difficulty_hard_above=5)
    # R1-Searcher's Table 1, one recipe per stage, is valid; a stage's recipe is picked by name.
    table1 = {"rl_stage1": {"medium": 350}, "rl_stage2": {"medium": 3648, "difficult": 4500}}
    cfg = DifficultyConfig(difficulty_rollouts=32, data_recipe=table1)
    assert recipe_for_stage(cfg.data_recipe, "rl_stage2") == {"medium": 3648, "difficult": 4500}
    with pytest.raises(ValueError, match="none for 'rl'"):
        recipe_for_stage(cfg.data_recipe, "rl")
    values = {**DifficultyConfig().__dict__, "difficulty_chunk": 0, "difficulty_min_score": 2.0}
    assert [key for key, _ in difficulty_problems(values)] == ["difficulty_chunk", "difficulty_min_score"]


def test_greedy_sampling_is_refused(tokenizer):
    with pytest.raises(ValueError, match="temperature > 0"):
        PolicySampler(object(), tokenizer, MiniProtocol(), FakeRetriever(), RolloutConfig(temperature=0.0))


def test_policy_identity_changes_when_a_local_checkpoint_is_rewritten(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"12345")
    first = policy_identity(str(tmp_path))
    assert policy_identity(str(tmp_path)) == first
    (tmp_path / "model.safetensors").write_bytes(b"123456")
    assert policy_identity(str(tmp_path)) != first
    assert policy_identity("smollm2-135m-instruct") == "smollm2-135m-instruct"


def test_an_unnamed_policy_is_named_by_its_weights():
    import torch

    layer = torch.nn.Linear(3, 2)
    first = policy_identity("", layer)
    assert first.startswith("weights:") and policy_identity("", layer) == first
    with torch.no_grad():
        layer.weight[0, 0] += 0.5
    assert policy_identity("", layer) != first


def test_histogram_counts_per_bucket_and_type():
    table = difficulty_counts(ROWS, by_type=True)
    # Odd indices are bridge: easy 0-3 -> 2/2, medium 0-5 -> 3/3, difficult 0-2 -> 1 bridge 2 comparison, unsolved 0.
    assert table.loc[["easy", "medium", "difficult", "unsolved"], "bridge"].tolist() == [2, 3, 1, 0]
    assert table.loc[["easy", "medium", "difficult", "unsolved"], "comparison"].tolist() == [2, 3, 2, 1]
    fig = difficulty_histogram(ROWS)
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches]
    assert sorted(heights) == sorted([2, 3, 1, 0, 2, 3, 2, 1])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["easy", "medium", "difficult", "unsolved"]
    assert fig._repr_png_()[:4] == b"\x89PNG"
    assert difficulty_counts(ROWS)["questions"].tolist() == [4, 6, 3, 1]


def test_a_mixture_that_loses_a_question_type_is_reported_with_that_types_labels():
    # Two-hop questions all unsolved, as the 135M reference policy left them: a medium/difficult recipe keeps only
    # single-hop ones.
    pool = [{**make_row(f"s{i}", f"Single {i}?", ["a"]), "metadata": {"type": "single_hop", "difficulty": b}}
            for i, b in enumerate(["easy", "medium", "medium", "difficult", "difficult", "unsolved"])]
    pool += [{**make_row(f"t{i}", f"Two {i}?", ["a"]), "metadata": {"type": "inference", "difficulty": "unsolved"}}
             for i in range(3)]
    chosen = mix_by_recipe(pool, {"medium": 0.5, "difficult": 0.5}, seed=0)
    assert {r["metadata"]["type"] for r in chosen} == {"single_hop"}
    (line,) = mixture_problems(pool, chosen)
    assert "kept 4 questions" in line and "type(s) inference" in line and "inference: unsolved 3" in line
    assert mixture_problems(pool, pool) == []  # every type kept: nothing to say
