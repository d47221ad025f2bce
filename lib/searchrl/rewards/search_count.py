"""Rewards that look at a rollout's searches: R1-Searcher's Stage-1 retrieval reward (eq. 1), a penalty for
repeating a query word for word, the share of the question's supporting passages that were retrieved, and a
penalty for searches beyond the number of supporting passages.

R1-Searcher's retrieval reward is 0.5 when the model searched at least once.

It applies only in Stage 1, where the reward is retrieval + format (eq. 1 + eq. 2) and the answer is not scored;
Stage 2 drops it (see REWARD_PRESETS). The count n is the rollout engine's `num_searches` when the rollout returns
it (retrievals really run), else the number of queries the protocol parses from the text.
"""

from __future__ import annotations

from typing import Any

from searchrl.metrics.answers import normalize_answer
from searchrl.protocols.base import SearchProtocol
from searchrl.rewards.base import REWARDS, RewardFunction, RewardSpec
from searchrl.rewards.inputs import Sample, column


class RetrievalReward(RewardFunction):
    """`value` when the completion made at least `min_searches` searches, else 0."""

    needs_golden_answers = False

    def __init__(self, name: str, protocol: SearchProtocol, *, value: float = 0.5, min_searches: int = 1) -> None:
        super().__init__(name, protocol)
        if min_searches < 1:
            raise ValueError(f"reward {name!r}: min_searches must be at least 1, got {min_searches}")
        self.value = float(value)
        self.min_searches = int(min_searches)

    def score(self, samples: list[Sample], prompts: list[Any] | None, kwargs: dict[str, Any]) -> list[float | None]:
        return [self.value if s.num_searches >= self.min_searches else 0.0 for s in samples]


REWARDS.register("retrieval_r1s", RewardSpec(RetrievalReward, {"value": 0.5, "min_searches": 1}),
                 doc="0.5 when the rollout searched at least once (R1-Searcher eq. 1, stage 1)")


class _Penalty(RewardFunction):
    """A reward that only subtracts: its `penalty` option must be negative."""

    needs_golden_answers = False

    def __init__(self, name: str, protocol: SearchProtocol, *, penalty: float = -0.5) -> None:
        super().__init__(name, protocol)
        if penalty >= 0:
            raise ValueError(f"reward {name!r}: penalty must be negative, got {penalty}")
        self.penalty = float(penalty)


class RepeatedQueryPenalty(_Penalty):
    """`penalty` (a negative number) when a rollout issues the same query twice (compared as answers are: case,
    punctuation, articles and spacing ignored; `normalize_answer`), else 0.

    Not from the papers: a guard. With one document per search, a repeated query retrieves the same document again,
    so the second search adds nothing; yet a small policy learns to make two searches by repeating the first
    (measured: docs/levers.md). Added to an answer reward, it makes such rollouts score below an honest one-search
    answer.
    """

    def score(self, samples: list[Sample], prompts: list[Any] | None, kwargs: dict[str, Any]) -> list[float | None]:
        return [self.penalty if has_repeated_query(s.parsed.queries) else 0.0 for s in samples]


def has_repeated_query(queries: list[str]) -> bool:
    """Whether one query was asked twice (case, punctuation and articles ignored); evaluation reports it too."""
    seen = [normalize_answer(q) for q in queries]
    return len(set(seen)) < len(seen)


REWARDS.register("repeated_query_penalty", RewardSpec(RepeatedQueryPenalty, {"penalty": -0.5}),
                 doc="-0.5 when a rollout repeats one of its queries word for word (a guard, not from the papers)")


class SupportRecallReward(RewardFunction):
    """`value` times the share of the question's supporting passages (its `supporting_ids` column) that the rollout
    retrieved; None (not scored) for a question without such labels.

    Not from the four papers: a process reward, for datasets that say which passages hold the answer chain (the
    synthetic world; HotpotQA, 2Wiki and MuSiQue label supporting facts). Unlike an answer reward it pays for a
    second search that finds the second hop even when the final answer is wrong, and pays nothing for a second
    search that finds nothing new, so it separates questions that need two searches from those that need one.
    Retrieval is what it rewards, so pair it with an answer reward.
    """

    needs_golden_answers = False

    def __init__(self, name: str, protocol: SearchProtocol, *, value: float = 1.0) -> None:
        super().__init__(name, protocol)
        if value <= 0:
            raise ValueError(f"reward {name!r}: value must be positive, got {value}")
        self.value = float(value)

    def score(self, samples: list[Sample], prompts: list[Any] | None, kwargs: dict[str, Any]) -> list[float | None]:
        supporting = column(kwargs, "supporting_ids", len(samples), self.__name__)
        retrieved = column(kwargs, "doc_ids", len(samples), self.__name__)
        out: list[float | None] = []
        for ids, support in zip(retrieved, supporting):
            recall = support_recall(ids or [], list(support or []))
            out.append(None if recall is None else self.value * recall)
        return out


def support_recall(doc_ids: list[list[str]], supporting_ids: list[str]) -> float | None:
    """The share of `supporting_ids` among the passages retrieved (`doc_ids`: one list per search, as rollouts
    record them); None when there are no supporting ids."""
    if not supporting_ids:
        return None
    found = {doc for ids in doc_ids for doc in ids}
    return sum(doc in found for doc in supporting_ids) / len(supporting_ids)


REWARDS.register("support_recall", RewardSpec(SupportRecallReward, {"value": 1.0}),
                 doc="share of the question's supporting passages retrieved (a process reward, not from the papers; "
                     "needs a supporting_ids column)")


class ExcessSearchPenalty(_Penalty):
    """`penalty` (a negative number) for each search beyond the number of the question's supporting passages (its
    `supporting_ids` column: one for a single-hop question, two for a 2-hop one); None (not scored) for a question
    without such labels.

    Not from the four papers; a process reward in the spirit of R1-Searcher++'s group reward (fewer retrievals among
    correct answers), but it needs no second correct rollout in the group to fire. It makes the extra search on a
    1-hop question cost something while leaving a needed one free (why: docs/levers.md). Pair it with an answer
    reward; alone it pays for not searching.
    """

    def score(self, samples: list[Sample], prompts: list[Any] | None, kwargs: dict[str, Any]) -> list[float | None]:
        supporting = column(kwargs, "supporting_ids", len(samples), self.__name__)
        out: list[float | None] = []
        for sample, support in zip(samples, supporting):
            needed = len(set(support or []))
            out.append(None if needed == 0 else self.penalty * max(0, sample.num_searches - needed))
        return out


REWARDS.register("excess_search_penalty", RewardSpec(ExcessSearchPenalty, {"penalty": -0.5}),
                 doc="-0.5 per search beyond the number of supporting passages (a process reward, not from the "
                     "papers; needs a supporting_ids column)")


__all__ = ["ExcessSearchPenalty", "RepeatedQueryPenalty", "RetrievalReward", "SupportRecallReward", "has_repeated_query",
           "support_recall"]
