"""Rejection sampling: the policy's own search rollouts, kept when correct and well formed (a cold start source).

It runs through evaluation's rollout loop (`searchrl.rollout.loop.rollout_questions`), so the trajectories are exactly
what RL would sample: same prompts, stop strings, observations and budgets (`RolloutConfig`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from searchrl.data.schema import check_rows
from searchrl.evaluation.evaluate import completion_text, score_trajectory
from searchrl.protocols import get_protocol
from searchrl.protocols.base import SearchProtocol
from searchrl.rollout import RolloutConfig
from searchrl.rollout.loop import rollout_questions


def rejection_sampled_trajectories(
    model,
    tokenizer,
    protocol: SearchProtocol | str,
    retriever,
    rows: Sequence[Mapping],
    *,
    rollout: RolloutConfig | None = None,
    samples_per_question: int = 4,
    min_f1: float = 0.8,
    require_search: bool = False,
    max_per_question: int | None = None,
    batch_size: int = 16,
    chat: bool = True,
    seed: int = 0,
    progress: bool = True,
    generator=None,
) -> list[dict[str, Any]]:
    """The policy's own sampled trajectories that are correct and well formed, ready for `tokenize_sft`.

    Each question is rolled out `samples_per_question` times, sampling at `rollout.temperature` / `top_p`
    (`rollout.temperature` 0: greedy). A trajectory is kept when the protocol accepts its format and its answer
    covers a golden answer (cover EM) or reaches `min_f1`; with `require_search`, only trajectories that searched.
    Identical completions are kept once, and at most `max_per_question` per question (None: all). `batch_size`
    counts sequences per generation batch (questions x samples). Items hold token ids and the engine's `env_mask`
    directly (mask 0 = retrieved, not trained), plus the prompt and completion text for inspection.
    """
    rows = check_rows(rows, "rejection_sampled_trajectories")
    protocol = get_protocol(protocol)
    rollout = rollout or RolloutConfig()
    if samples_per_question < 1:
        raise ValueError(f"samples_per_question must be >= 1, got {samples_per_question}")
    torch.manual_seed(seed)
    items: list[dict[str, Any]] = []
    for row, prompt, trajs in rollout_questions(
        model, tokenizer, protocol, retriever, rows, rollout, greedy=rollout.temperature <= 0,
        batch_size=batch_size, chat=chat, repeats=samples_per_question, generator=generator,
        desc="rejection sampling", progress=progress, postfix=lambda: {"kept": len(items)},
    ):
        seen: set[tuple[int, ...]] = set()
        for traj in trajs:
            text = completion_text(traj, tokenizer)
            record = score_trajectory(row, traj, text, protocol)
            correct = record["cem"] >= 1.0 or record["f1"] >= min_f1
            key = tuple(traj.completion_ids)
            if not (record["format_ok"] and correct) or key in seen:
                continue
            if require_search and record["searches"] == 0:
                continue
            if max_per_question is not None and len(seen) >= max_per_question:
                break
            seen.add(key)
            items.append({
                "id": record["id"], "question": row["question"], "golden_answers": record["golden_answers"],
                "qtype": record["qtype"], "hops": record["hops"], "prompt": prompt,
                "prompt_ids": list(traj.prompt_ids), "completion_ids": list(traj.completion_ids),
                "env_mask": list(traj.env_mask), "completion": text, "f1": record["f1"],
                "cem": record["cem"], "searches": record["searches"],
            })
    return items


__all__ = ["rejection_sampled_trajectories"]
