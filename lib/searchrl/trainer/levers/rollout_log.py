"""Every scored training rollout, written to disk: what RL actually sampled, and what each rollout earned.

The logged curves (reward, searches per sample, advantage by search count) say what moved; the rollouts say why:
the second query a policy asked, the answer it wrote after the documents, the group mates it was compared with. One
JSON Lines file per optimizer step, `step-NNNN.jsonl`, one line per rollout:

    step, draw         the optimizer step, and which scored batch of it (0: the scheduled questions; 1, 2, ...:
                       dynamic sampling's extra draws)
    group, id, qtype, question, golden_answers
    completion         the decoded completion, retrieved documents included as the model saw them
    searches           searches the rollout made
    reward, rewards    total (weighted) reward, and each reward function's own value by name
    advantage          its advantage when scored (mean over the rollout's trained tokens; NaN when its group was
                       masked out); with dynamic sampling, the step then trains on the informative groups of its
                       draws, first drawn first, up to the batch size

With the memorization loss on, `rewrites-NNNN.jsonl` holds every rewrite tried in that step: its question,
golden_answers, the rollout it rewrote (`completion`), the `rewrite`, and `kept` with the check's `rejected_because`.

A resumed run rewrites the files of the steps it repeats, so a step's file always holds one run of that step.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import torch
from accelerate.utils import gather_object

from searchrl.trainer.levers.base import Lever


class RolloutLog:
    """Appends scored batches to `<folder>/step-NNNN.jsonl`; the first batch of a step written by this object
    replaces an older file of that step (a resumed run repeats steps)."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self._started: set[Path] = set()
        self._draws: dict[int, int] = {}

    def path(self, step: int, kind: str = "step") -> Path:
        return self.folder / f"{kind}-{step:04d}.jsonl"

    def write(self, step: int, rows: list[dict]) -> Path:
        """Write one scored batch of `step` (its draw number is counted here: 0 for the step's first batch)."""
        draw = self._draws.get(step, -1) + 1
        self._draws[step] = draw
        return self._append(self.path(step), [{"step": step, "draw": draw, **row} for row in rows])

    def write_rewrites(self, step: int, rows: list[dict]) -> Path:
        """Write the memorization rewrites tried in `step` to `rewrites-NNNN.jsonl`."""
        return self._append(self.path(step, "rewrites"), [{"step": step, **row} for row in rows])

    def _append(self, path: Path, rows: list[dict]) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        mode = "a" if path in self._started else "w"  # this object's first write of a file replaces an older one
        self._started.add(path)
        with path.open(mode, encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False, default=_plain) + "\n")
        return path


def read_rollouts(folder: str | Path) -> pd.DataFrame:
    """Every logged rollout under `folder` (a stage's folder, or `trajectories/train` for all stages, each row then
    carrying its `stage`), in step order; empty when nothing was logged."""
    folder = Path(folder)
    frames = []
    for path in sorted(folder.rglob("step-*.jsonl")):
        frame = pd.read_json(path, lines=True)
        if path.parent != folder:
            frame["stage"] = path.parent.name
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def step_summary(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Per step and question type: rollouts, mean reward, mean searches, the share that searched twice or more, and
    the share of groups whose rewards differed (the ones GRPO learns from)."""
    if rollouts.empty:
        return pd.DataFrame()
    keys = ["stage", "step", "qtype"] if "stage" in rollouts else ["step", "qtype"]
    frame = rollouts.assign(two_or_more=rollouts["searches"] >= 2)
    groups = frame.groupby(keys + ["draw", "group"])["reward"].agg(lambda r: r.max() != r.min()).rename("informative")
    table = frame.groupby(keys).agg(rollouts=("reward", "size"), reward=("reward", "mean"),
                                    searches=("searches", "mean"), searched_twice=("two_or_more", "mean"))
    table["informative_groups"] = groups.groupby(keys).mean()
    return table


def _plain(value):
    """JSON for numpy / torch scalars; NaN stays NaN (JSON Lines readers such as pandas accept it)."""
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def mean_advantage(advantages, mask) -> list[float]:
    """Per rollout, the mean advantage over its trained tokens (`mask` 1) — GRPO's is one value per rollout, the
    per-token estimators' (REINFORCE++, PPO) vary along it; NaN for a rollout with no trained token."""
    adv = advantages if advantages.dim() == 2 else advantages.unsqueeze(1).expand_as(mask)
    mask = mask.to(adv.dtype)
    totals, counts = (adv * mask).sum(dim=1), mask.sum(dim=1)
    return [float(t / c) if c > 0 else math.nan for t, c in zip(totals.tolist(), counts.tolist())]


class TrainRolloutLog(Lever):
    """rollout_log_dir: every rollout of a scored training batch, gathered, to the rollout log, and the
    memorization rewrites tried (`write_rewrites`, called by the memorization lever)."""

    name = "rollout_log"

    def __init__(self, trainer) -> None:
        super().__init__(trainer)
        self.opened: RolloutLog | None = None  # opened on first use (it remembers which step files it has begun)

    def log(self) -> RolloutLog:
        if self.opened is None:
            self.opened = RolloutLog(self.args.rollout_log_dir)
        return self.opened

    def on_scored_batch(self, inputs, output, rewards, mode):
        if mode != "train" or not self.args.rollout_log_dir:
            return
        trainer = self.trainer
        texts = trainer.processing_class.batch_decode(output["completion_ids"], skip_special_tokens=True)
        mask = output["completion_mask"] * output.get("tool_mask", torch.ones_like(output["completion_mask"]))
        advantages = mean_advantage(output["advantages"], mask)
        searches = getattr(trainer, "_last_num_searches", [None] * len(texts))
        local = [{"id": str(row.get("id", "")), "qtype": str(row.get("qtype", "unknown")),
                  "question": row.get("question", ""), "golden_answers": list(row.get("golden_answers") or []),
                  "completion": text, "searches": n, "advantage": a}
                 for row, text, n, a in zip(inputs, texts, searches, advantages, strict=True)]
        if self.args.rollout.explore_openers:
            for row, (_, opener) in zip(local, getattr(trainer, "_last_openers", []), strict=False):
                row["opener"] = opener
        everyone = gather_object(local)  # in the order of the gathered rewards
        if not trainer.accelerator.is_main_process:
            return
        per_func = trainer._last_rewards_per_func.tolist()
        g = trainer.num_generations
        rows = [{"group": i // g, **row, "reward": float(rewards[i]),
                 "rewards": dict(zip(trainer.reward_func_names, per_func[i]))} for i, row in enumerate(everyone)]
        self.log().write(trainer.state.global_step + 1, rows)

    def write_rewrites(self, tried) -> None:
        """The memorization rewrites this process just tried (`Memorizer.last_tried`), gathered."""
        if not self.args.rollout_log_dir:
            return
        trainer = self.trainer
        local = [{"question": cand.question, "golden_answers": cand.golden_answers,
                  "completion": "".join(text for text, _ in cand.segments), "rewrite": text, "kept": reason is None,
                  "rejected_because": reason} for cand, text, reason in tried]
        everyone = gather_object(local)
        if everyone and trainer.accelerator.is_main_process:
            self.log().write_rewrites(trainer.state.global_step + 1, everyone)


__all__ = ["RolloutLog", "TrainRolloutLog", "mean_advantage", "read_rollouts", "step_summary"]
