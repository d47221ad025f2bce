"""Difficulty-aware prompt selection, estimated from the rollouts already made (R1-Searcher section 2.1, online).

R1-Searcher keeps the questions its policy solves sometimes: a question every rollout solves, or none does, gives a
group with one reward and so zero advantage. It labels difficulty offline with extra rollouts
(`searchrl.data.difficulty`). This module does the same online, at no generation cost: every scored group tells
whether its question was informative (its rewards differed), and the next questions are drawn with weights from
that record.

- A question's type (single_hop, inference, ...) gets the smoothed share of its groups that were informative,
  (informative + 1) / (groups + 2), so types the policy never or always solves are drawn less as evidence comes
  in, and a type not yet seen starts at one half.
- A question whose last group was uninformative keeps RECHECK_WEIGHT of that, not zero: the policy changes, and a
  question it could not solve yesterday may be the informative one today.

`InformativeSampler` replaces TRL's RepeatSampler with the same index layout (each question repeated
num_generations times, each generation batch repeated for its accumulation windows), drawing each batch's
questions by these weights when the batch is needed. Every process draws from the same seed and the same record
(built from the gathered batch), so all processes draw the same questions.

`StratifiedSampler` ("stratified") keeps the same layout and takes the question types in turn, so every batch
holds them in equal shares (as equal as its size allows). With a handful of questions per step, TRL's shuffled
order gives one step three inference questions and the next none: the mean training reward then swings with the
mix of types drawn, not with what the policy learned, and the advantages of one type dominate a step. Type weights
give a type several places in each turn: a choice that some types reward and others penalise (one search or two)
is pulled by the number of informative groups on each side, and weights can even those numbers out.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import torch
from torch.utils.data import Sampler

from searchrl.config.choices import PROMPT_SELECTIONS
from searchrl.trainer.levers.base import Lever
from searchrl.trainer.levers.dynamic_sampling import informative_groups

RECHECK_WEIGHT = 0.25  # a question last seen uninformative is drawn at a quarter of its type's weight
STATE_FILE = "prompt_selection.json"
DRAWS_FILE = "prompt_selection_draws.pt"  # the informative sampler's batches this epoch and its stream


def indices_by_type(qtypes: Sequence[str]) -> dict[str, list[int]]:
    """Question type -> the indices of its questions, in table order."""
    by_type: dict[str, list[int]] = {}
    for index, qtype in enumerate(qtypes):
        by_type.setdefault(str(qtype), []).append(index)
    return by_type


class SelectionRecord:
    """Which groups were informative, per question type and per question, from the rollouts made so far."""

    def __init__(self) -> None:
        self.by_type: dict[str, list[int]] = {}  # qtype -> [informative groups, groups]
        self.last_informative: dict[str, bool] = {}  # question id -> whether its latest group was informative

    def record(self, ids: Sequence[str], qtypes: Sequence[str], informative: Sequence[bool]) -> None:
        """One entry per scored group: its question's id and type, and whether its rewards differed."""
        for qid, qtype, flag in zip(ids, qtypes, informative, strict=True):
            counts = self.by_type.setdefault(str(qtype), [0, 0])
            counts[0] += int(bool(flag))
            counts[1] += 1
            self.last_informative[str(qid)] = bool(flag)

    def type_rate(self, qtype: str) -> float:
        informative, groups = self.by_type.get(str(qtype), (0, 0))
        return (informative + 1) / (groups + 2)

    def weight(self, qid: str, qtype: str) -> float:
        w = self.type_rate(qtype)
        return w * RECHECK_WEIGHT if self.last_informative.get(str(qid)) is False else w

    def draw(self, ids: Sequence[str], qtypes: Sequence[str], candidates: Sequence[int], n: int,
             generator: torch.Generator) -> list[int]:
        """`n` distinct indices from `candidates` (indices into ids/qtypes), drawn with the record's weights."""
        if n > len(candidates):
            raise ValueError(f"cannot draw {n} questions from {len(candidates)}")
        weights = torch.tensor([self.weight(ids[i], qtypes[i]) for i in candidates], dtype=torch.float64)
        picked = torch.multinomial(weights, n, replacement=False, generator=generator).tolist()
        return [candidates[p] for p in picked]

    def state_dict(self) -> dict:
        return {"by_type": self.by_type, "last_informative": self.last_informative}

    def load_state_dict(self, state: dict) -> None:
        self.by_type = {k: list(v) for k, v in state.get("by_type", {}).items()}
        self.last_informative = dict(state.get("last_informative", {}))

    def save(self, folder: str | Path) -> None:
        (Path(folder) / STATE_FILE).write_text(json.dumps(self.state_dict(), indent=1))

    def load(self, folder: str | Path) -> bool:
        """Restore from a checkpoint folder; False when it holds no record (a run without selection saved it)."""
        path = Path(folder) / STATE_FILE
        if not path.exists():
            return False
        self.load_state_dict(json.loads(path.read_text()))
        return True


class _RepeatLayout(Sampler[int]):
    """TRL's RepeatSampler index layout for `questions` questions an epoch, cut into batches of `batch_size`: each
    question repeated `mini_repeat_count` times (its group), each batch repeated `repeat_count` times (its windows).
    Subclasses choose the batches; `generator` (seeded by `seed`) is their one random stream.

    The Trainer calls `set_epoch` before each epoch, which reseeds the stream with `seed + epoch`: a run resumed in
    its third epoch then draws that epoch as the uninterrupted run did, without replaying the first two."""

    def __init__(self, questions: int, *, mini_repeat_count: int, batch_size: int, repeat_count: int,
                 seed: int) -> None:
        self.questions, self.seed, self.epoch = questions, seed, 0
        self.mini_repeat_count, self.batch_size, self.repeat_count = mini_repeat_count, batch_size, repeat_count
        self.generator = torch.Generator().manual_seed(seed)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.generator.manual_seed(self.seed + epoch)

    def __len__(self) -> int:
        return (self.questions // self.batch_size) * self.batch_size * self.mini_repeat_count * self.repeat_count

    def _laid_out(self, chunk: list[int]) -> Iterator[int]:
        for _ in range(self.repeat_count):
            for index in chunk:
                yield from [index] * self.mini_repeat_count


class InformativeSampler(_RepeatLayout):
    """TRL's RepeatSampler layout, with each batch's `batch_size` questions drawn by the record's weights (without
    replacement within an epoch) at the moment the batch is needed.

    A resumed run cannot redraw the batches its checkpoint had already drawn: they were drawn with the record as it
    stood then, and the record comes back as it stood at the checkpoint. So `draw_state` keeps the epoch's batches
    and the stream, and a sampler given it (`resume_draws`) hands out those batches again before drawing anew; the
    Trainer skips the trained ones, and the batches drawn ahead of the checkpoint are the uninterrupted run's."""

    def __init__(self, ids: Sequence[str], qtypes: Sequence[str], record: SelectionRecord, *,
                 mini_repeat_count: int, batch_size: int, repeat_count: int, seed: int) -> None:
        super().__init__(len(ids), mini_repeat_count=mini_repeat_count, batch_size=batch_size,
                         repeat_count=repeat_count, seed=seed)
        self.ids, self.qtypes, self.record = list(ids), list(qtypes), record
        self.drawn: list[list[int]] = []  # this epoch's batches so far, in order
        self._replay: dict | None = None

    def draw_state(self) -> dict:
        """What a checkpoint keeps: the epoch, its batches drawn so far and the stream after them."""
        return {"epoch": self.epoch, "chunks": [list(c) for c in self.drawn], "generator": self.generator.get_state()}

    def resume_draws(self, state: dict) -> None:
        """Hand out `state`'s batches again when its epoch is iterated, then draw on from its stream."""
        self._replay = state

    def save(self, folder: str | Path) -> None:
        """Keep `draw_state` in checkpoint `folder` (beside the record's STATE_FILE)."""
        torch.save(self.draw_state(), Path(folder) / DRAWS_FILE)

    def load(self, folder: str | Path) -> bool:
        """Resume from the draws checkpoint `folder` kept; False when it kept none."""
        path = Path(folder) / DRAWS_FILE
        if not path.exists():
            return False
        self.resume_draws(torch.load(path, weights_only=True))
        return True

    def __iter__(self) -> Iterator[int]:
        replay, self._replay = self._replay, None
        if replay is not None and replay["epoch"] != self.epoch:
            replay = None  # the checkpoint ended its epoch: this one starts from the epoch's seed
        self.drawn = []
        unused = list(range(len(self.ids)))
        for b in range(len(self.ids) // self.batch_size):
            if replay is not None and b == len(replay["chunks"]):
                self.generator.set_state(replay["generator"])
            if replay is not None and b < len(replay["chunks"]):
                chunk = list(replay["chunks"][b])
            else:
                chunk = self.record.draw(self.ids, self.qtypes, unused, self.batch_size, self.generator)
            self.drawn.append(chunk)
            taken = set(chunk)
            unused = [i for i in unused if i not in taken]
            yield from self._laid_out(chunk)


class StratifiedSampler(_RepeatLayout):
    """TRL's RepeatSampler layout, with the questions taken from each type in turn (shuffled within each type by
    `seed`, anew each epoch: one generator stream), so consecutive batches hold the types in equal shares until a
    type runs out. Balanced types (`balance_question_types`) run out together."""

    def __init__(self, qtypes: Sequence[str], *, mini_repeat_count: int, batch_size: int, repeat_count: int,
                 seed: int, type_weights: Mapping[str, int] | None = None) -> None:
        super().__init__(len(qtypes), mini_repeat_count=mini_repeat_count, batch_size=batch_size,
                         repeat_count=repeat_count, seed=seed)
        self.qtypes = [str(q) for q in qtypes]
        self.type_weights = {str(k): int(v) for k, v in (type_weights or {}).items()}

    def order(self) -> list[int]:
        """The next epoch's question indices: each type in turn (types in sorted order; `type_weights[type]` of it
        a turn, 1 for a type not named), until all are used."""
        queues = [([members[i] for i in torch.randperm(len(members), generator=self.generator).tolist()],
                   self.type_weights.get(qtype, 1)) for qtype, members in sorted(indices_by_type(self.qtypes).items())]
        out = []
        while any(queue for queue, _ in queues):
            for queue, weight in queues:
                out += [queue.pop() for _ in range(min(weight, len(queue)))]
        return out

    def __iter__(self) -> Iterator[int]:
        order = self.order()
        for start in range(0, len(order) // self.batch_size * self.batch_size, self.batch_size):
            yield from self._laid_out(order[start:start + self.batch_size])


def draw_of_types(qtypes: Sequence[str], wanted: Sequence[str], n: int, generator: torch.Generator) -> list[int]:
    """`n` question indices whose types follow `wanted` in turn (cycled when `n` is longer): what dynamic sampling
    draws under stratified selection to replace the uninformative groups of those types, so that a refill keeps
    the batch's scheduled mix instead of drawing the whole table's. Questions are drawn at random within their type,
    without repeats until a type's questions are used up."""
    if not wanted:
        raise ValueError("draw_of_types needs at least one wanted type")
    by_type = indices_by_type(qtypes)
    unknown = sorted({str(t) for t in wanted} - set(by_type))
    if unknown:
        raise ValueError(f"no training questions of type {unknown}; the table holds {sorted(by_type)}")
    queues: dict[str, list[int]] = {}
    out = []
    for i in range(n):
        qtype = str(wanted[i % len(wanted)])
        if not queues.get(qtype):
            members = by_type[qtype]
            queues[qtype] = [members[j] for j in torch.randperm(len(members), generator=generator).tolist()]
        out.append(queues[qtype].pop())
    return out


class PromptSelection(Lever):
    """prompt_selection informative or stratified: the sampler that replaces TRL's RepeatSampler, the record of
    which questions gave informative groups (kept in every checkpoint with the batches the informative sampler has
    drawn), and the questions of dynamic sampling's extra draws (`refill`)."""

    name = "prompt_selection"

    def __init__(self, trainer) -> None:
        super().__init__(trainer)
        self.record = SelectionRecord()  # which questions gave informative groups (informative)
        self.sampler: InformativeSampler | None = None  # kept: checkpoints save the batches it has drawn

    @property
    def informative(self) -> bool:
        return self.args.prompt_selection == "informative"

    def train_sampler(self, dataset):
        trainer, args = self.trainer, self.args
        if args.prompt_selection == "uniform":
            return None  # TRL's RepeatSampler
        dataset = trainer.train_dataset if dataset is None else dataset
        if args.prompt_selection == "stratified":
            return StratifiedSampler(
                dataset["qtype"], mini_repeat_count=trainer.num_generations,
                batch_size=args.generation_batch_size // trainer.num_generations,
                repeat_count=trainer.num_iterations * args.steps_per_generation, seed=args.seed,
                type_weights=args.stratified_type_weights)
        self.sampler = InformativeSampler(
            dataset["id"], dataset["qtype"], self.record, mini_repeat_count=trainer.num_generations,
            batch_size=args.generation_batch_size // trainer.num_generations,
            repeat_count=trainer.num_iterations * args.steps_per_generation, seed=args.seed)
        return self.sampler

    def on_batch_rewards(self, rows, rewards, mode):
        """Note, per group of the gathered batch (its (id, qtype) `rows`), its question and whether its rewards
        differed; every process records the same groups, so every process's sampler draws the same questions."""
        if mode != "train" or not self.informative:
            return
        g = self.trainer.num_generations
        firsts = rows[::g]
        self.record.record([r[0] for r in firsts], [r[1] for r in firsts], informative_groups(rewards, g).tolist())

    def refill(self, ids: Sequence[str], qtypes: Sequence[str], n: int, types: list[str] | None,
               generator: torch.Generator) -> list[int] | None:
        """An extra draw's `n` question indices: of `types` in turn when given (stratified), by the record
        (informative); None leaves the draw to chance."""
        if types:
            return draw_of_types(qtypes, types, n, generator)
        if self.informative:
            return self.record.draw(ids, qtypes, range(len(ids)), n, generator)
        return None

    def save(self, folder: str) -> None:
        if not self.informative:
            return
        os.makedirs(folder, exist_ok=True)
        self.record.save(folder)
        if self.sampler is not None:
            self.sampler.save(folder)

    def load(self, checkpoint: str) -> None:
        if self.informative and not self.record.load(checkpoint):
            warnings.warn(f"{checkpoint} has no prompt-selection record: informative selection starts afresh")
        if self.sampler is not None:
            self.sampler.load(checkpoint)  # none kept (an older checkpoint): draws anew, as before


__all__ = ["DRAWS_FILE", "PROMPT_SELECTIONS", "RECHECK_WEIGHT", "InformativeSampler", "PromptSelection",
           "SelectionRecord", "StratifiedSampler", "draw_of_types"]
