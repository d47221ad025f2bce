"""The common shape of every reward: a callable with TRL's reward signature, bound to one tag protocol.

TRL calls `fn(prompts=..., completions=..., completion_ids=..., **columns)` and logs the mean of the returned list
under `fn.__name__`, so each instance carries its registry name as `__name__`. Instances are plain objects (no
closures) so that they pickle with their protocol.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from searchrl.core.registry import Registry
from searchrl.protocols.base import SearchProtocol
from searchrl.rewards.inputs import Sample, read_samples


class RewardFunction:
    """Base class: subclasses implement `score(samples, prompts, kwargs)`; `__call__` does the parsing."""

    needs_golden_answers: bool = True

    def __init__(self, name: str, protocol: SearchProtocol) -> None:
        if not isinstance(protocol, SearchProtocol):
            raise TypeError(
                f"reward {name!r} needs a SearchProtocol instance (e.g. searchrl.protocols.get_protocol('search_r1')), "
                f"got {type(protocol).__name__}"
            )
        self.__name__ = name
        self.protocol = protocol

    def __call__(self, prompts: list[Any] | None = None, completions: list[Any] | None = None, **kwargs: Any):
        """Score a batch: one float (or None, meaning not applicable) per completion."""
        if completions is None:
            raise ValueError(f"reward {self.__name__!r} was called without `completions`")
        completions = list(completions)
        if prompts is not None and len(prompts) != len(completions):
            raise ValueError(
                f"reward {self.__name__!r}: {len(prompts)} prompts for {len(completions)} completions (they must pair up)"
            )
        samples = read_samples(
            self.protocol, completions, kwargs, self.__name__, needs_golden=self.needs_golden_answers
        )
        return self.score(samples, prompts, kwargs)

    def score(self, samples: list[Sample], prompts: list[Any] | None, kwargs: dict[str, Any]) -> list[float | None]:
        """The rewards of already-parsed samples."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__name__!r}, protocol={self.protocol.name!r})"


@dataclass(frozen=True)
class RewardSpec:
    """A registry entry: the class that computes a reward and the options that make it one paper's reward."""

    cls: type[RewardFunction]
    defaults: dict[str, Any] = field(default_factory=dict)


def class_and_defaults(entry: Any) -> tuple[type[RewardFunction] | None, dict[str, Any]]:
    """(the RewardFunction class an entry builds, the options it sets) for a RewardSpec or a RewardFunction class;
    (None, {}) for a plain function."""
    if isinstance(entry, RewardSpec):
        return entry.cls, dict(entry.defaults)
    if isinstance(entry, type) and issubclass(entry, RewardFunction):
        return entry, {}
    return None, {}


class RewardRegistry(Registry):
    """The rewards' registry, which also says what options each reward takes (the schema checks `reward_options`
    against them)."""

    def options(self, name: str) -> dict[str, Any]:
        """The options reward `name` accepts, with their effective defaults ({} for a plain reward function)."""
        cls, defaults = class_and_defaults(self.get(name))
        if cls is None:
            return {}
        parameters = inspect.signature(cls.__init__).parameters
        options = {p.name: p.default for p in parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY}
        return {**options, **defaults}


# Every reward by name. Entries are RewardSpecs; a user's entry may also be a RewardFunction subclass, or a plain
# function with TRL's reward signature (used as it is). Each module below registers its own rewards.
REWARDS: RewardRegistry[Any] = RewardRegistry("reward")

__all__ = ["REWARDS", "RewardFunction", "RewardRegistry", "RewardSpec", "class_and_defaults"]
