"""DAPO's dynamic sampling: keep drawing questions until the batch is filled with groups that carry a signal.

A group whose rollouts all earned the same reward has zero advantage everywhere: training on it only shrinks the
batch. Instead of dropping such groups and training on what is left, the trainer draws more questions, scores them
and fills the batch with informative groups (DAPO, Yu et al. 2025, section 3.2). What these helpers do: find the
informative groups, size each extra draw, and cut and join TRL's per-sample batch dictionaries (prompts are
left-padded, completions right-padded, so joining pads each side the way TRL did).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import torch
import torch.nn.functional as F

from searchrl.config.choices import DRAW_SIZES


def informative_groups(rewards: torch.Tensor, num_generations: int) -> torch.Tensor:
    """(groups,) bool: whether the rewards within each group of `num_generations` consecutive samples differ."""
    grouped = rewards.view(-1, num_generations)
    return grouped.max(dim=1).values != grouped.min(dim=1).values




def extra_draw_size(mode: str, missing: int, found: int, drawn: int, batch: int) -> int:
    """Questions to draw next when `missing` informative groups are still wanted and `found` of the `drawn` questions
    scored so far this step were informative. "batch" draws a whole `batch` every time. "shortfall" draws the
    number that the step's informative rate so far expects to yield the missing groups (a step whose first batch
    had 12 of 16 informative needs 4 more and draws 6 questions, not 16), at most a batch; with no informative group
    yet it has no rate to go by and draws a batch. A draw that falls short is followed by another, up to the cap."""
    if mode not in DRAW_SIZES:
        raise ValueError(f"dynamic_sampling_draw must be one of {DRAW_SIZES}, not {mode!r}")
    if missing <= 0:
        return 0
    if mode == "batch" or found == 0:
        return batch
    return min(batch, math.ceil(missing * drawn / found))


def take_within_quota(keep: torch.Tensor, types: list[str], missing: Counter) -> list[int]:
    """The informative groups of an extra draw (`keep`, one flag per group of type `types[i]`) that a type still
    short in the batch can take, in order; `missing` (type -> groups still wanted) is decremented for each. Under
    stratified selection the refill then keeps the scheduled mix of types: a surplus group of one type stays out
    rather than tilt a choice that the types pull different ways (prompt_selection's type weights)."""
    taken = []
    for group, (informative, qtype) in enumerate(zip(keep.tolist(), types, strict=True)):
        if informative and missing[qtype] > 0:
            missing[qtype] -= 1
            taken.append(group)
    return taken


def _per_sample(value, size: int) -> bool:
    """Whether a batch entry holds one item per sample: a tensor or a list whose first dimension is `size`."""
    return (torch.is_tensor(value) and value.dim() > 0 and value.size(0) == size) or (
        isinstance(value, list) and len(value) == size)


def take_rows(batch: dict, rows: torch.Tensor, size: int) -> dict:
    """The batch restricted to `rows`: every tensor or list whose first dimension is the batch `size` is indexed;
    other entries (scalars such as num_items_in_batch) are kept as they are, for the caller to recompute."""
    out = {}
    for key, value in batch.items():
        if torch.is_tensor(value) and _per_sample(value, size):
            value = value[rows]
        elif _per_sample(value, size):
            value = [value[i] for i in rows.tolist()]
        out[key] = value
    return out


def concat_batches(batches: list[dict], size: int) -> dict:
    """Join per-sample batches along the batch dimension (`size`: the first batch's number of samples, which tells
    per-sample tensors and lists from the rest). 2-D tensors are padded to the widest: on the left for `prompt_*`
    keys (TRL left-pads prompts), on the right otherwise; padding is 0, which is also a masked position."""
    out = {}
    for key, first in batches[0].items():
        if not _per_sample(first, size):
            out[key] = first
            continue
        parts = [b[key] for b in batches]
        if isinstance(first, list):
            out[key] = [item for part in parts for item in part]
            continue
        if first.dim() == 2:
            width = max(p.size(1) for p in parts)
            left = key.startswith("prompt_")
            parts = [F.pad(p, (width - p.size(1), 0) if left else (0, width - p.size(1))) for p in parts]
        out[key] = torch.cat(parts, dim=0)
    return out


DRAW_STREAM_FILE = "extra_draws_rng.pt"
"""Where a checkpoint keeps the extra draws' random stream (a torch.Generator state)."""


def save_draw_stream(generator: torch.Generator | None, folder: str | Path) -> None:
    """Keep the extra draws' random stream in checkpoint `folder`, so that a resumed run draws what the uninterrupted
    one would have (nothing to keep before the first extra draw)."""
    if generator is not None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        torch.save(generator.get_state(), Path(folder) / DRAW_STREAM_FILE)


def load_draw_stream(folder: str | Path) -> torch.Generator | None:
    """The extra draws' random stream as checkpoint `folder` kept it; None when it kept none (no extra draw had been
    made by then, so the stream starts from its seed, as it did in the run that wrote the checkpoint)."""
    path = Path(folder) / DRAW_STREAM_FILE
    if not path.exists():
        return None
    generator = torch.Generator()
    generator.set_state(torch.load(path, weights_only=True))
    return generator


__all__ = ["DRAW_SIZES", "DRAW_STREAM_FILE", "concat_batches", "extra_draw_size", "informative_groups",
           "load_draw_stream", "save_draw_stream", "take_rows", "take_within_quota"]
