"""What every part of a search rollout agrees on: its settings, one turn's output, and the generator interface.

`RolloutConfig` is the one declaration of the rollout settings (search budget, documents per search, turn and
completion budgets, query limits, sampling). `RunConfig` inherits its fields, so a params file sets them by the
same names; training (`SearchGRPOConfig.rollout`), evaluation, rejection sampling and the benchmarks take the
object itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["TurnGenerator", "TurnOutput", "cut_turn", "first_stop_end", "shortest_prefix"]


@dataclass
class TurnOutput:
    """The tokens one turn added to one sequence."""

    token_ids: list[int]
    finish: str  # "stop" (a stop string closed the turn), "eos", or "length"
    logprobs: list[float] | None = None  # sampling log-probabilities of token_ids (vLLM), else None


class TurnGenerator(Protocol):
    """What the rollout engine needs from a generation backend."""

    def generate_turn(self, sequences: list[list[int]], max_new_tokens: list[int]) -> list[TurnOutput]:
        """Continue every sequence until a stop string, EOS, or its own token budget."""
        ...

    def reset(self) -> None:
        """Drop state kept between the turns of one rollout (a KV cache); the engine calls it before and after
        each rollout, because the weights may change in between."""
        ...


def first_stop_end(text: str, stop_strings: list[str]) -> int | None:
    """End offset of the earliest stop string in text, or None."""
    ends = [text.find(s) + len(s) for s in stop_strings if s in text]
    return min(ends) if ends else None


def shortest_prefix(ids: list[int], holds: Callable[[list[int]], bool]) -> int | None:
    """The length of the shortest prefix of `ids` for which `holds` is true, or None when not even all of `ids`
    holds. `holds` must be monotone in the prefix length (what decoded text contains or how long it is), so a
    binary search finds it with a logarithmic number of decodes."""
    if not ids or not holds(ids):
        return None
    lo, hi = 1, len(ids)
    while lo < hi:
        mid = (lo + hi) // 2
        if holds(ids[:mid]):
            hi = mid
        else:
            lo = mid + 1
    return lo


def cut_turn(token_ids: list[int], tokenizer, stop_strings: list[str], eos_ids: set[int], budget: int) -> TurnOutput:
    """Trim the raw new tokens of one row to the turn that was really generated.

    Batched `generate` pads finished rows with the pad token, which for many models equals EOS; so a row that
    stopped on a stop string looks like it ended in EOS. Decide by the text: if a stop string is complete before the
    first EOS/pad, the turn ended there (keeping the token that completed it), otherwise the EOS ended it.
    """
    ids = list(token_ids[:budget])
    first_eos = next((i for i, t in enumerate(ids) if t in eos_ids), None)
    body = ids if first_eos is None else ids[:first_eos]
    # The shortest prefix whose text holds a stop string: the token that completes the tag ends the turn.
    end = shortest_prefix(body, lambda ids: first_stop_end(tokenizer.decode(ids, skip_special_tokens=False),
                                                            stop_strings) is not None)
    if end is not None:
        return TurnOutput(body[:end], "stop")
    if first_eos is not None:
        return TurnOutput(body + [ids[first_eos]], "eos")
    return TurnOutput(body, "length")
