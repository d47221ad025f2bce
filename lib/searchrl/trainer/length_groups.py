"""Micro-batches of rollouts of similar length, without the padding the whole step needed.

TRL pads a step's rollouts to its longest prompt and its longest completion, shuffles them and cuts them into
micro-batches that all keep that width. A micro-batch of four one-search rollouts then pays the forward and
backward passes of the step's longest two-search rollout: on a CPU, where those passes are two thirds of a step and
cost grows with every column, that padding is time spent on nothing. Sorting the step's rollouts by length before
the cut puts short ones together, and dropping the columns that are padding in every row of a micro-batch removes
their cost.

Neither changes the update. A padded column that no row of the micro-batch uses is masked out of the loss and
attended by no token; dropping the prompt's leading ones shifts every position by the same amount, which rotary
position embeddings do not see. Which rollouts share a micro-batch does not matter to the loss types that normalise
per sequence or by the whole step (grpo, dr_grpo, dapo, cispo, ...); it does to bnpo, which divides each
micro-batch's loss by its own token count, so for bnpo the rollouts keep TRL's shuffled order and only the padding
is dropped.
"""

from __future__ import annotations

import torch

from searchrl.trainer.levers.dynamic_sampling import concat_batches, take_rows

# Loss types whose normaliser is the micro-batch's own token count: the grouping of rollouts would reweight them.
PER_MICRO_BATCH_NORMALISED = ("bnpo",)


def trim_padding(batch: dict) -> dict:
    """`batch` without the prompt columns that are padding in every row (prompts are left-padded) and the
    completion columns that are padding in every row (right-padded), in every per-token tensor of each side."""
    prompt_mask, completion_mask = batch["prompt_mask"], batch["completion_mask"]
    size, prompt_width, completion_width = prompt_mask.size(0), prompt_mask.size(1), completion_mask.size(1)
    # Some columns always stay (a micro-batch whose completions are all empty, or all masked, would lose every one):
    # TRL keeps the last `completion width` logits, and a width of 0 asks the model for all of them; a width of 1
    # is TRL's sign of sequence-level values, which its logged entropy then averages without the mask.
    used = prompt_mask.any(dim=0).nonzero()
    start = min(int(used[0]) if len(used) else prompt_width, prompt_width - 1)
    used = completion_mask.any(dim=0).nonzero()
    end = max(int(used[-1]) + 1 if len(used) else 0, min(2, completion_width))
    out = {}
    for key, value in batch.items():
        two_d = torch.is_tensor(value) and value.dim() >= 2 and value.size(0) == size
        if two_d and key.startswith("prompt_") and value.size(1) == prompt_width:
            value = value[:, start:]
        elif two_d and not key.startswith("prompt_") and value.size(1) == completion_width:
            value = value[:, :end]
        out[key] = value
    return out


def length_grouped(micro_batches: list[dict], loss_type: str) -> list[dict]:
    """The rollouts of TRL's micro-batches (one generation batch, cut into equal parts) cut again into as many
    parts of the same size, shortest rollouts first (unless `loss_type` normalises per micro-batch: then in the
    given order), each without its all-padding columns."""
    size = micro_batches[0]["prompt_mask"].size(0)
    batch = concat_batches(micro_batches, size)  # TRL cut them from one batch: equal widths, nothing padded
    total = batch["prompt_mask"].size(0)
    if loss_type in PER_MICRO_BATCH_NORMALISED:
        order = torch.arange(total)
    else:
        lengths = batch["prompt_mask"].sum(dim=1) + batch["completion_mask"].sum(dim=1)
        order = torch.argsort(lengths, stable=True)
    parts = []
    for i in range(len(micro_batches)):
        rows = order[i * size:(i + 1) * size]
        parts.append(trim_padding(take_rows(batch, rows, total)))
    return parts


__all__ = ["PER_MICRO_BATCH_NORMALISED", "length_grouped", "trim_padding"]
