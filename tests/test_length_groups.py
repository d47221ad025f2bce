"""`length_grouped` recuts TRL's micro-batches by length and drops the columns that are padding in all their rows,
keeping every rollout once with all of its per-sample entries."""

from __future__ import annotations

import torch

from searchrl.trainer.length_groups import length_grouped, trim_padding


def rollout_batch(prompt_lengths, completion_lengths, prompt_width=6, completion_width=8) -> dict:
    """A TRL-style batch: prompts left-padded, completions right-padded; token ids encode (row, position)."""
    size = len(prompt_lengths)
    prompt_mask = torch.zeros(size, prompt_width, dtype=torch.long)
    completion_mask = torch.zeros(size, completion_width, dtype=torch.long)
    for row, (p, c) in enumerate(zip(prompt_lengths, completion_lengths, strict=True)):
        prompt_mask[row, prompt_width - p:] = 1
        completion_mask[row, :c] = 1
    rows = torch.arange(size).unsqueeze(1)
    return {
        "prompt_ids": (rows * 100 + torch.arange(prompt_width)) * prompt_mask,
        "prompt_mask": prompt_mask,
        "completion_ids": (rows * 100 + 50 + torch.arange(completion_width)) * completion_mask,
        "completion_mask": completion_mask,
        "tool_mask": completion_mask.clone(),
        "advantages": torch.arange(size, dtype=torch.float),
        "num_items_in_batch": torch.tensor(float(completion_mask.sum())),
        "qtypes": [f"type{row}" for row in range(size)],
    }


def cut(batch: dict, parts: int) -> list[dict]:
    size = batch["prompt_mask"].size(0) // parts
    return [{k: (v[i * size:(i + 1) * size] if (torch.is_tensor(v) and v.dim()) or isinstance(v, list) else v)
             for k, v in batch.items()} for i in range(parts)]


def test_rollouts_are_grouped_shortest_first_without_shared_padding():
    batch = rollout_batch([3, 5, 2, 4], [8, 2, 3, 7])  # totals 11, 7, 5, 11
    parts = length_grouped(cut(batch, 2), "dapo")
    assert [p["advantages"].tolist() for p in parts] == [[2.0, 1.0], [0.0, 3.0]]
    short, long = parts
    assert short["prompt_ids"].size(1) == 5 and short["completion_ids"].size(1) == 3
    assert long["prompt_ids"].size(1) == 4 and long["completion_ids"].size(1) == 8
    # Every row keeps its own tokens, aligned with its masks, and its list entries follow it.
    for part in parts:
        for row, advantage in enumerate(part["advantages"].tolist()):
            original = int(advantage)
            kept = part["completion_ids"][row][part["completion_mask"][row].bool()]
            assert kept.tolist() == batch["completion_ids"][original][batch["completion_mask"][original].bool()].tolist()
            kept = part["prompt_ids"][row][part["prompt_mask"][row].bool()]
            assert kept.tolist() == batch["prompt_ids"][original][batch["prompt_mask"][original].bool()].tolist()
            assert part["qtypes"][row] == f"type{original}"
        assert torch.equal(part["tool_mask"], part["completion_mask"])
        assert part["num_items_in_batch"] is batch["num_items_in_batch"]


def test_bnpo_keeps_the_order_and_only_drops_padding():
    batch = rollout_batch([3, 5, 2, 4], [8, 2, 3, 7])
    parts = length_grouped(cut(batch, 2), "bnpo")
    assert [p["advantages"].tolist() for p in parts] == [[0.0, 1.0], [2.0, 3.0]]
    assert parts[0]["completion_ids"].size(1) == 8 and parts[1]["prompt_ids"].size(1) == 4


def test_trim_padding_keeps_a_batch_without_shared_padding_whole():
    batch = rollout_batch([6, 2], [1, 8])
    trimmed = trim_padding(batch)
    for key in ("prompt_ids", "completion_ids", "tool_mask"):
        assert torch.equal(trimmed[key], batch[key])


def test_a_micro_batch_of_empty_completions_keeps_two_columns():
    # Not 0 (TRL would compute every logit) and not 1 (TRL reads a width of 1 as one value per sequence).
    batch = rollout_batch([2, 3], [0, 0])
    trimmed = trim_padding(batch)
    assert trimmed["completion_ids"].size(1) == 2 and trimmed["completion_mask"].sum() == 0
    assert trim_padding(rollout_batch([2, 3], [1, 1]))["completion_ids"].size(1) == 2
    assert trimmed["prompt_ids"].size(1) == 3
