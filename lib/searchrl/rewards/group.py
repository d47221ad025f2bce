"""R1-Searcher++'s group reward (eq. 5-6): favour the correct response that needed the fewest retrievals.

For the responses to one question, sigma is the (population) standard deviation of the retrieval counts of ALL
responses; among the correct responses (answer reward = 1, by default cover-EM with the 10-word rule, eq. 4), those
whose count equals the smallest count among correct responses get min(2 * sigma^2, eta); every other response gets 0.

The reward needs whole groups. In TRL each process scores only its slice of the batch, and one question's responses
can be split across processes, so under `torch.distributed` (world size > 1) the (group key, count, correct) triples of
all processes are all-gathered first; each process then returns the rewards of its own slice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from searchrl.protocols.base import SearchProtocol
from searchrl.rewards.answer import AnswerReward
from searchrl.rewards.base import REWARDS, RewardFunction, RewardSpec
from searchrl.rewards.inputs import Sample, column, prompt_key


def group_reward(num_searches: Sequence[int], correct: Sequence[bool], eta: float = 2.0) -> list[float]:
    """Rewards of one group of responses to the same question (R1-Searcher++ eq. 5 with the eq. 6 clip)."""
    if len(num_searches) != len(correct):
        raise ValueError(f"group_reward: {len(num_searches)} retrieval counts for {len(correct)} correctness flags")
    if any(int(t) < 0 for t in num_searches):
        raise ValueError(f"group_reward: retrieval counts cannot be negative, got {list(num_searches)}")
    if eta < 0:
        raise ValueError(f"group_reward: eta is an upper clip on the reward and must be >= 0, got {eta}")
    size = len(num_searches)
    if size == 0:
        return []
    mean = sum(num_searches) / size
    variance = sum((t - mean) ** 2 for t in num_searches) / size
    correct_counts = [t for t, ok in zip(num_searches, correct) if ok]
    if not correct_counts:
        return [0.0] * size
    fewest = min(correct_counts)
    bonus = min(2.0 * variance, float(eta))
    return [bonus if ok and t == fewest else 0.0 for t, ok in zip(num_searches, correct)]


def gather_across_processes(local: list[Any]) -> tuple[list[list[Any]], int]:
    """Every process's `local` list (in rank order) and this process's rank.

    A single process (torch.distributed absent, not initialised, or world size 1) gets ([local], 0). This is a
    collective call under torch.distributed: every rank must reach it, which holds because TRL calls every reward
    function on every rank at every step.
    """
    try:
        import torch.distributed as dist
    except ImportError:  # torch built without distributed support
        return [local], 0
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [local], 0
    parts: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(parts, local)
    return [list(p) for p in parts], dist.get_rank()


def rewards_by_group(rows: Sequence[tuple[str, int, bool]], eta: float) -> list[float]:
    """Group reward of every (group key, retrieval count, correct) row, computed over the rows sharing a key."""
    members: dict[str, list[int]] = defaultdict(list)
    for index, (key, _, _) in enumerate(rows):
        members[key].append(index)
    rewards = [0.0] * len(rows)
    for indices in members.values():
        values = group_reward([rows[i][1] for i in indices], [rows[i][2] for i in indices], eta=eta)
        for i, value in zip(indices, values):
            rewards[i] = value
    return rewards


def retrieval_std_by_group(rows: Sequence[tuple[str, int, bool]]) -> list[float]:
    """The population std-dev of retrieval counts of each group (for logging)."""
    counts: dict[str, list[int]] = defaultdict(list)
    for key, count, _ in rows:
        counts[key].append(count)
    stds = []
    for values in counts.values():
        mean = sum(values) / len(values)
        stds.append((sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5)
    return stds


class GroupReward(RewardFunction):
    """Eq. 5-6 over complete groups; groups are identified by the prompt or by a column such as `id`."""

    def __init__(
        self,
        name: str,
        protocol: SearchProtocol,
        *,
        eta: float = 2.0,
        correct_by: str = "cem_10w",
        group_by: str = "prompt",
        needs_support: bool = False,
    ) -> None:
        super().__init__(name, protocol)
        if eta < 0:
            raise ValueError(f"reward {name!r}: eta must be >= 0, got {eta}")
        spec = REWARDS.get(correct_by) if correct_by in REWARDS else None
        if not (isinstance(spec, RewardSpec) and issubclass(spec.cls, AnswerReward)):
            answers = [n for n, s in REWARDS.items() if isinstance(s, RewardSpec) and issubclass(s.cls, AnswerReward)]
            raise ValueError(f"reward {name!r}: correct_by must name an answer reward {answers}")  # noqa: TRY004
        # needs_support: a right answer counts as correct only with its evidence retrieved (answer.py says why).
        self.correctness: AnswerReward = spec.cls(f"{name}:{correct_by}", protocol,
                                                  **{**spec.defaults, "needs_support": needs_support})
        self.eta = float(eta)
        self.group_by = group_by

    def group_keys(self, prompts: list[Any] | None, kwargs: dict[str, Any], size: int) -> list[str]:
        """The group identity of each sample."""
        if self.group_by == "prompt":
            if prompts is None:
                raise ValueError(f"reward {self.__name__!r} groups by prompt but was called without `prompts`")
            return [prompt_key(p) for p in prompts]
        return [prompt_key(v) for v in column(kwargs, self.group_by, size, self.__name__)]

    def score(self, samples: list[Sample], prompts: list[Any] | None, kwargs: dict[str, Any]) -> list[float | None]:
        keys = self.group_keys(prompts, kwargs, len(samples))
        correct = self.correctness.score(samples, prompts, kwargs)
        # eq. 5 counts a response as correct when R_answer = 1 (a partial F1 is not correct)
        local = [(key, s.num_searches, value >= 1.0) for key, s, value in zip(keys, samples, correct)]
        parts, rank = gather_across_processes(local)
        if not 0 <= rank < len(parts) or len(parts[rank]) != len(local):
            raise RuntimeError(f"reward {self.__name__!r}: the gathered batch does not contain this process's slice")
        rows = [row for part in parts for row in part]
        offset = sum(len(part) for part in parts[:rank])
        rewards = rewards_by_group(rows, self.eta)
        log_metric = kwargs.get("log_metric")
        if callable(log_metric) and rows:
            stds = retrieval_std_by_group(rows)
            log_metric(f"{self.__name__}/retrieval_std", sum(stds) / len(stds))
        return rewards[offset : offset + len(local)]


REWARDS.register("group_r1spp", RewardSpec(GroupReward, {"eta": 2.0, "correct_by": "cem_10w", "group_by": "prompt"}), doc="fewest-retrieval correct answers get the retrieval-count variance (R1-Searcher++ eq. 5-6)")

__all__ = [
        "GroupReward",
    "gather_across_processes",
    "group_reward",
    "rewards_by_group",
]
