"""A user's reward, as a template: any function with TRL's reward signature can join a run by its import path.

    rewards: [f1, searchrl.rewards.examples:concise_answer]      # in a params file
    reward_weights: [1.0, 0.2]

TRL calls it with the prompts, the completions (text), every dataset column (`golden_answers`, `question`, `qtype`,
`hops`, `id`) and every rollout key (`num_searches`, `queries`, ...) as keyword arguments, and logs the mean under
the function's name. It returns one float per completion (None: not applicable to that sample).
"""

from __future__ import annotations

from typing import Any

from searchrl.metrics.answers import word_count
from searchrl.protocols import get_protocol


def concise_answer(prompts: list[Any], completions: list[Any], protocol: str = "search_r1", **kwargs: Any) -> list[float]:
    """1.0 for an answer of at most five words, 0.5 up to ten, 0 otherwise or without an answer (Search-R1 tags).

    A nudge towards the short answers that exact-match metrics reward; pair it with an answer reward.
    """
    parser = get_protocol(protocol)
    scores = []
    for completion in completions:
        text = completion if isinstance(completion, str) else "".join(m.get("content", "") for m in completion)
        answer = parser.parse(text).answer
        words = word_count(answer) if answer else None
        scores.append(0.0 if not words else 1.0 if words <= 5 else 0.5 if words <= 10 else 0.0)
    return scores
