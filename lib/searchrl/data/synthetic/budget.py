"""Does a correct answer fit the rollout's token budget? Measured on the templated trajectories of the questions.

A rollout stops at `max_completion_tokens` (sampled plus retrieved tokens). Each search adds its observation, which
is most of a trajectory's length, so a budget that fits one search can be too small for two: with the CPU
profiles' 40-word passages and top-2 documents a single-hop trajectory is about 250 tokens and a two-search one
about 500. Under a 384-token budget no two-search answer can finish: RL is never rewarded for a second search,
and a cold start that demonstrates one teaches trajectories that rollouts cut off. Nothing in training says so,
the second search simply never appears; this module measures it before any compute is spent.

    report = answer_budget(rows, protocol, retriever, rollout=cfg.rollout_config(), tokenizer=tokenizer)
    for line in budget_problems(report, cfg.max_completion_tokens): warnings.warn(line)
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from searchrl.data.synthetic.trajectories import FACT_QTYPE, templated_trajectories


def completion_tokens(item: Mapping, tokenizer) -> int:
    """Tokens of one templated trajectory's completion (its segments, retrieved ones included), tokenized piece by
    piece as the rollout engine appends them."""
    return sum(len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text, _ in item["segments"])


def answer_budget(rows: Sequence[Mapping], protocol, retriever, *, rollout, tokenizer, chat: bool = True,
                  seed: int = 0, plan: bool = False) -> dict[str, dict[str, Any]]:
    """Per question type: how many tokens the written (templated) correct trajectory needs, against `rollout`'s
    `max_completion_tokens`. Rows that cannot be written (more searches than `max_searches`, or a hop's fact not
    retrieved) are counted as `unwritable`: no rollout within the budget can answer them from the documents.

    Returns {qtype: {"n", "written", "unwritable", "median_tokens", "max_tokens", "over_budget"}}, where
    `over_budget` is the share of written trajectories longer than the budget.
    """
    by_type: dict[str, list[Mapping]] = defaultdict(list)
    for row in rows:
        by_type[str((row.get("metadata") or {}).get("type", "unknown"))].append(row)
    report: dict[str, dict[str, Any]] = {}
    for qtype, group in sorted(by_type.items()):
        try:
            items = templated_trajectories(group, protocol, retriever, rollout=rollout, tokenizer=tokenizer,
                                           chat=chat, seed=seed, plan=plan)
        except ValueError:  # none of the group could be written
            items = []
        row = items_budget(items, tokenizer, rollout.max_completion_tokens).get(qtype) or _lengths_row([], 0)
        report[qtype] = {**row, "n": len(group), "unwritable": len(group) - len(items)}
    return report


def items_budget(items: Sequence[Mapping], tokenizer, max_completion_tokens: int) -> dict[str, dict[str, Any]]:
    """The same report for trajectories already written (a cold start's items), per `qtype`."""
    lengths: dict[str, list[int]] = defaultdict(list)
    for item in items:
        if item.get("segments") and item.get("qtype") != FACT_QTYPE:  # fact statements are no rollout
            lengths[str(item.get("qtype", "unknown"))].append(completion_tokens(item, tokenizer))
    return {qtype: _lengths_row(values, max_completion_tokens) for qtype, values in sorted(lengths.items())}


def _lengths_row(lengths: list[int], max_completion_tokens: int) -> dict[str, Any]:
    return {
        "n": len(lengths),
        "written": len(lengths),
        "unwritable": 0,
        "median_tokens": int(statistics.median(lengths)) if lengths else None,
        "max_tokens": max(lengths) if lengths else None,
        "over_budget": round(sum(n > max_completion_tokens for n in lengths) / len(lengths), 3) if lengths else None,
    }


def budget_problems(report: Mapping[str, Mapping[str, Any]], max_completion_tokens: int, *,
                    what: str = "training questions") -> list[str]:
    """One sentence per question type whose correct trajectories mostly do not fit `max_completion_tokens`, or
    that cannot be answered from the documents within the search budget; each names what to change."""
    lines = []
    for qtype, row in report.items():
        if row["written"] and row["over_budget"] >= 0.5:
            lines.append(
                f"{what} of type {qtype}: {row['over_budget']:.0%} of their correct trajectories are longer than "
                f"max_completion_tokens={max_completion_tokens} (median {row['median_tokens']} tokens, most "
                f"{row['max_tokens']}), so rollouts are cut before the answer and RL cannot reward answering them. "
                f"Raise max_completion_tokens to at least {row['max_tokens']}, or shorten observations (top_k, "
                "world_passage_words), or leave this type out (train_question_types, train_max_hops).")
        if row["n"] and row["unwritable"] / row["n"] >= 0.5:
            lines.append(
                f"{what} of type {qtype}: {row['unwritable']} of {row['n']} cannot be answered from the documents "
                "within max_searches (more hops than searches, or a fact the retriever does not return); raise "
                "max_searches or leave them out (train_question_types, train_max_hops).")
    return lines


__all__ = ["answer_budget", "budget_problems", "completion_tokens", "items_budget"]
