"""DAPO's dynamic sampling: keep drawing questions until the batch is filled with groups that carry a signal.

A group whose rollouts all earned the same reward has zero advantage everywhere: training on it only shrinks the
batch. Instead of dropping such groups and training on what is left, the trainer draws more questions, scores them
and fills the batch with informative groups (DAPO, Yu et al. 2025, section 3.2). What these helpers do: find the
informative groups, size each extra draw, and cut and join TRL's per-sample batch dictionaries (prompts are
left-padded, completions right-padded, so joining pads each side the way TRL did). The levers: `DropZeroVariance`
(drop_zero_variance: such groups leave the loss), `DynamicSampling` (the refills) and `RefillDraws` (the extra
draws' questions and their random stream).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import torch
import torch.nn.functional as F
from accelerate.utils import gather_object

from searchrl.config.choices import DRAW_SIZES
from searchrl.trainer.levers.base import Lever


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


class DropZeroVariance(Lever):
    """drop_zero_variance (DAPO; dynamic_sampling implies it): groups whose rewards are all equal leave the loss,
    and the token count TRL normalises by is recounted without them."""

    name = "drop_zero_variance"

    def on_advantages(self, output, rewards, mode, local):
        if not self.args.drop_zero_variance:
            return
        trainer = self.trainer
        num_generations = trainer.num_generations if mode == "train" else trainer.num_generations_eval
        kept_groups = informative_groups(rewards, num_generations)  # over the gathered batch: every group
        keep = kept_groups.repeat_interleave(num_generations)[local]
        output["completion_mask"] = output["completion_mask"] * keep.unsqueeze(1).to(output["completion_mask"])
        new_mask = output["completion_mask"] * output.get("tool_mask", 1)
        output["num_items_in_batch"] = trainer.accelerator.gather(new_mask.sum()).sum()
        # The share of the whole batch's groups, not of this process's slice (which may hold part of a group).
        trainer._metrics[mode]["search/kept_group_frac"].append(kept_groups.float().mean().item())


class DynamicSampling(Lever):
    """dynamic_sampling: a training step's batch refilled with informative groups from extra draws."""

    name = "dynamic_sampling"

    def on_step_batch(self, inputs, output, rewards):
        if not (self.args.dynamic_sampling and self.trainer.model.training):
            return output
        # TRL's "reward" averages every batch scored in the step, and dynamic sampling's extra draws are random
        # questions: this is the reward of the step's scheduled questions alone (stratified: the same type mix
        # every step), the curve that follows the policy rather than the draws.
        self.trainer._metrics["train"]["search/scheduled_reward"].append(rewards.mean().item())
        return self.fill(inputs, output, rewards)

    def fill(self, inputs, output, rewards):
        """DAPO dynamic sampling: draw and score more questions (at most dynamic_sampling_max_draws draws, each sized
        by dynamic_sampling_draw) until the batch holds as many informative groups as it has groups; the rest stays
        masked (drop_zero_variance). Under stratified selection each draw takes the types of the groups still
        missing, and a type takes no more groups than it lost, so the batch keeps its scheduled mix of types."""
        trainer, args = self.trainer, self.args
        g = trainer.num_generations
        size = len(inputs)
        wanted = size // g
        batches, keeps, draws = [output], [informative_groups(rewards, g)], 0
        # (draw, group) pairs that fill the batch: the first batch's informative groups, then the refills.
        chosen = [(0, grp) for grp in keeps[0].nonzero().flatten().tolist()]
        missing = None  # stratified: type -> groups still wanted (types gathered: every process decides alike)
        if args.prompt_selection == "stratified":
            types = gather_object([str(row.get("qtype", "unknown")) for row in inputs])[::g]
            missing = Counter(t for t, k in zip(types, keeps[0].tolist(), strict=True) if not k)
        found, drawn = len(chosen), wanted
        while found < wanted and draws < args.dynamic_sampling_max_draws:
            n = extra_draw_size(args.dynamic_sampling_draw, wanted - found, found, drawn, wanted)
            questions = trainer._draw_questions(n, None if missing is None else list(missing.elements()))
            trainer._rollout_label = f"extra draw {draws + 1} ({n} questions)"
            try:
                more, more_rewards = trainer._scored_batch(questions)
            finally:
                trainer._rollout_label = "rollouts"
            batches.append(more)
            keeps.append(informative_groups(more_rewards, g))
            if missing is not None:
                taken = take_within_quota(keeps[-1], [row["qtype"] for row in questions[::g]], missing)
            else:
                taken = keeps[-1].nonzero().flatten().tolist()
            chosen += [(len(batches) - 1, grp) for grp in taken]
            found, drawn, draws = len(chosen), drawn + n, draws + 1
        # Informative groups first, in the order drawn; then the first batch's other groups as masked filler.
        chosen = chosen[:wanted]  # uniform refills may overshoot; the filler counts from what is kept
        chosen += [(0, grp) for grp in (~keeps[0]).nonzero().flatten().tolist()][: wanted - len(chosen)]
        parts = []
        for i, batch in enumerate(batches):
            groups = [grp for j, grp in chosen if j == i]
            if groups:
                rows = torch.tensor([grp * g + k for grp in groups for k in range(g)])
                parts.append(take_rows(batch, rows, keeps[i].numel() * g))  # an extra draw may be smaller
        merged = concat_batches(parts, len(parts[0]["completion_ids"]))
        mask = merged["completion_mask"] * merged.get("tool_mask", 1)
        merged["num_items_in_batch"] = mask.sum()
        metrics = trainer._metrics["train"]
        metrics["search/dynamic_extra_draws"].append(float(draws))
        # Questions drawn beyond the scheduled ones: what the extra draws cost this step (dynamic_sampling_draw).
        metrics["search/dynamic_extra_questions"].append(float(drawn - wanted))
        informative = sum(1 for i, grp in chosen if keeps[i][grp])
        metrics["search/informative_group_frac"].append(informative / wanted)
        return merged


class RefillDraws(Lever):
    """The questions of dynamic sampling's extra draws (`draw`, the trainer's `_draw_questions`) and their random
    stream, which every checkpoint keeps (once a draw has been made, or a resumed checkpoint held one) and a resume
    restores, so that a resumed run draws what the uninterrupted one would have."""

    name = "refill_draws"

    def __init__(self, trainer) -> None:
        super().__init__(trainer)
        self.generator: torch.Generator | None = None
        self.columns = None  # (ids, qtypes) of the training table, read once: a column read walks the whole table

    def draw(self, n: int, types: list[str] | None = None) -> list[dict]:
        """`n` training questions, each repeated num_generations times, as TRL's sampler would batch them: of
        `types` in turn when given (stratified selection), by the selection record (informative), else at random."""
        trainer = self.trainer
        if self.generator is None:
            self.generator = torch.Generator().manual_seed(self.args.seed + 7919)
        if self.columns is None:
            self.columns = (trainer.train_dataset["id"], trainer.train_dataset["qtype"])
        ids, qtypes = self.columns
        selection = trainer.lever("prompt_selection")
        idx = selection.refill(ids, qtypes, n, types, self.generator) if selection is not None else None
        if idx is None:
            idx = torch.randperm(len(trainer.train_dataset), generator=self.generator)[:n].tolist()
        return [dict(trainer.train_dataset[i]) for i in idx for _ in range(trainer.num_generations)]

    def save(self, folder: str) -> None:
        save_draw_stream(self.generator, folder)

    def load(self, checkpoint: str) -> None:
        self.generator = load_draw_stream(checkpoint)  # None: no extra draw yet, `draw` seeds it


__all__ = ["DRAW_SIZES", "DRAW_STREAM_FILE", "DropZeroVariance", "DynamicSampling", "RefillDraws", "concat_batches",
           "extra_draw_size", "informative_groups", "load_draw_stream", "save_draw_stream", "take_rows",
           "take_within_quota"]
