"""Answer rewards: EM / cover-EM / F1 of the parsed answer against the golden answers, and the papers' variants.

- Search-R1 eq. 3: EM of the extracted answer (`em`).
- R1-Searcher eq. 4: word-level F1 (`f1`), with HotpotQA's rule that a yes/no answer or reference only matches
  itself (as R1-Searcher's released evaluation scores); R-Search eq. 3: the same F1 without that rule (`f1_r_search`,
  as R-Search's released code scores).
- Cover-EM here is a contiguous run of whole words after SQuAD normalisation; R1-Searcher's released evaluation uses
  a bag-of-words test (`searchrl.metrics.scoring`, `cem:r1_searcher`), so `cem_pm1` is the equation's reading, not its code's.
- R1-Searcher eq. 5 (the answer-reward ablation of Table 5): +1 when EM (resp. CEM) holds, -1 otherwise (`em_pm1`,
  `cem_pm1`). The paper uses F1 directly as its own reward in that ablation, so there is no +-1 form of F1.
- R1-Searcher++ eq. 4: cover-EM that counts as wrong when the answer exceeds 10 words (`cem_10w`).

A completion without an answer scores like a wrong answer: 0, or -1 for the +-1 variants.

Option `needs_support` (not from the papers): an answer counts only when every supporting passage of its question
was retrieved (the `supporting_ids` column, as `support_recall` reads it); otherwise it scores as wrong. A right
answer without its evidence is a guess, and on a question that names its candidates (a comparison between two
names) a guess wins half the time; gated, guessing earns nothing, so such questions can join the training mix.
Rows that name no supporting passages are not gated.
"""

from __future__ import annotations

from typing import Any

from searchrl.metrics.answers import cover_exact_match, exact_match, f1_score, word_count
from searchrl.protocols.base import SearchProtocol
from searchrl.rewards.base import REWARDS, RewardFunction, RewardSpec
from searchrl.rewards.inputs import Sample, column
from searchrl.rewards.search_count import support_recall

METRICS = {"em": exact_match, "cem": cover_exact_match, "f1": f1_score}


class AnswerReward(RewardFunction):
    """A metric of the parsed answer, optionally mapped to +-1 and with an answer-length limit."""

    def __init__(
        self,
        name: str,
        protocol: SearchProtocol,
        *,
        metric: str = "em",
        plus_minus_one: bool = False,
        max_words: int | None = None,
        whole_words: bool = True,
        needs_support: bool = False,
        closed_answers_match_only_themselves: bool = True,
    ) -> None:
        super().__init__(name, protocol)
        if metric not in METRICS:
            raise ValueError(f"reward {name!r}: metric must be one of {sorted(METRICS)}, got {metric!r}")
        if plus_minus_one and metric == "f1":
            raise ValueError(f"reward {name!r}: the +-1 mapping is defined for the 0/1 metrics em and cem, not f1")
        if max_words is not None and max_words < 1:
            raise ValueError(f"reward {name!r}: max_words must be a positive number of words or None, got {max_words}")
        self.metric = metric
        self.plus_minus_one = plus_minus_one
        self.max_words = max_words
        self.whole_words = whole_words
        self.needs_support = needs_support
        self.closed_answers_match_only_themselves = closed_answers_match_only_themselves

    def score_answer(self, answer: str | None, golden_answers: list[str]) -> float:
        """The reward of one answer (None: no answer found)."""
        if answer is None or (self.max_words is not None and word_count(answer) > self.max_words):
            value = 0.0
        elif self.metric == "cem":
            value = cover_exact_match(answer, golden_answers, whole_words=self.whole_words)
        elif self.metric == "f1":
            value = f1_score(answer, golden_answers,
                             closed_answers_match_only_themselves=self.closed_answers_match_only_themselves)
        else:
            value = METRICS[self.metric](answer, golden_answers)
        if self.plus_minus_one:
            return 1.0 if value == 1.0 else -1.0
        return value

    def score(self, samples: list[Sample], prompts: list[Any] | None, kwargs: dict[str, Any]) -> list[float | None]:
        if not self.needs_support:
            return [self.score_answer(s.parsed.answer, s.golden_answers) for s in samples]
        supporting = column(kwargs, "supporting_ids", len(samples), self.__name__)
        retrieved = column(kwargs, "doc_ids", len(samples), self.__name__)
        out = []
        for s, support, ids in zip(samples, supporting, retrieved):
            recall = support_recall(ids or [], list(support or []))
            answer = s.parsed.answer if recall is None or recall >= 1.0 else None  # unsupported: scored as wrong
            out.append(self.score_answer(answer, s.golden_answers))
        return out


REWARDS.register("em", RewardSpec(AnswerReward, {"metric": "em"}), doc="exact match of the answer (Search-R1 eq. 3)")
REWARDS.register("cem", RewardSpec(AnswerReward, {"metric": "cem"}), doc="cover exact match: a golden answer inside the answer")
REWARDS.register("f1", RewardSpec(AnswerReward, {"metric": "f1"}), doc="word-level F1 of the answer, yes/no only matching itself (R1-Searcher eq. 4)")
REWARDS.register("f1_r_search", RewardSpec(AnswerReward, {"metric": "f1", "closed_answers_match_only_themselves": False}), doc="word-level F1 of the answer without the yes/no rule (R-Search eq. 3)")
REWARDS.register("em_pm1", RewardSpec(AnswerReward, {"metric": "em", "plus_minus_one": True}), doc="+1 on exact match, else -1 (R1-Searcher eq. 5)")
REWARDS.register("cem_pm1", RewardSpec(AnswerReward, {"metric": "cem", "plus_minus_one": True}), doc="+1 on cover match, else -1 (R1-Searcher eq. 5)")
REWARDS.register("cem_10w", RewardSpec(AnswerReward, {"metric": "cem", "max_words": 10}), doc="cover match, wrong beyond 10 words (R1-Searcher++ eq. 4)")

__all__ = ["METRICS", "AnswerReward"]
