"""Reading what TRL hands a reward function: completions in either format, and per-sample dataset/rollout columns."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from searchrl.metrics.answers import as_answer_list
from searchrl.protocols.base import Parsed, SearchProtocol


def completion_text(completion: Any) -> str:
    """The text of one completion: a plain string, or a conversational list of messages (contents concatenated).

    Message contents may themselves be lists of parts ({"type": "text", "text": ...}); non-text parts are skipped.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):  # a single message instead of a list of them
        completion = [completion]
    if isinstance(completion, (list, tuple)):
        return "".join(_message_text(message) for message in completion)
    raise TypeError(f"a completion must be a string or a list of chat messages, got {type(completion).__name__}")


def _message_text(message: Any) -> str:
    if not isinstance(message, dict) or "content" not in message:
        raise TypeError(
            f"a conversational completion must hold messages like {{'role': ..., 'content': ...}}, got {message!r}"
        )
    content = message["content"]
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict) and part.get("type") == "text")


def prompt_key(prompt: Any) -> str:
    """A hashable identity for a prompt (string or list of messages), used to group a question's responses."""
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)


def column(kwargs: dict[str, Any], name: str, size: int, reward: str) -> list[Any]:
    """The per-sample values of a dataset or rollout column, checked for presence and length."""
    if name not in kwargs or kwargs[name] is None:
        raise ValueError(
            f"reward {reward!r} needs the column {name!r} (a dataset column or a key returned by the rollout); "
            f"available keys: {sorted(kwargs)}"
        )
    values = list(kwargs[name])
    if len(values) != size:
        raise ValueError(f"reward {reward!r}: column {name!r} has {len(values)} values for {size} completions")
    return values


@dataclass
class Sample:
    """One completion as the rewards see it."""

    text: str
    parsed: Parsed
    golden_answers: list[str] | None  # None when the reward does not need them
    num_searches: int


def read_samples(
    protocol: SearchProtocol,
    completions: list[Any],
    kwargs: dict[str, Any],
    reward: str,
    *,
    needs_golden: bool,
) -> list[Sample]:
    """Parse every completion with the protocol and attach golden answers and search counts.

    The search count is the rollout engine's `num_searches` when given (it counts the retrievals really run), else the
    number of queries the protocol parses out of the text.
    """
    size = len(completions)
    golden = column(kwargs, "golden_answers", size, reward) if needs_golden else [None] * size
    searches = column(kwargs, "num_searches", size, reward) if kwargs.get("num_searches") is not None else None
    samples = []
    for i, completion in enumerate(completions):
        text = completion_text(completion)
        parsed = protocol.parse(text)
        count = int(searches[i]) if searches is not None else len(parsed.queries)
        answers = as_answer_list(golden[i]) if needs_golden else None
        samples.append(Sample(text=text, parsed=parsed, golden_answers=answers, num_searches=count))
    return samples


__all__ = ["Sample", "column", "completion_text", "prompt_key", "read_samples"]
