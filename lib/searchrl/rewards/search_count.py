"""R1-Searcher's Stage-1 retrieval reward (eq. 1), a count of searches: 0.5 when the model searched at least once.

It applies only in Stage 1, where the reward is retrieval + format (eq. 1 + eq. 2) and the answer is not scored;
Stage 2 drops it (see REWARD_PRESETS). The count n is the rollout engine's `num_searches` when the rollout returns
it (retrievals really run), else the number of queries the protocol parses from the text.
"""

from __future__ import annotations

from typing import Any

from searchrl.protocols.base import SearchProtocol

from .base import REWARDS, RewardFunction, RewardSpec
from .inputs import Sample


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

__all__ = ["RetrievalReward"]
