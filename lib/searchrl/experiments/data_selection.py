"""R1-Searcher's data selection on the rollout engine: a reference policy's sampled rollouts label each training
question by difficulty (`searchrl.data.difficulty`), and a recipe mixes the buckets.

    sampler = PolicySampler(model, tokenizer, protocol, retriever, cfg.rollout_config(), policy_name=cfg.model)
    labelled = label_difficulty(train_rows, sampler, cfg)
    difficulty_histogram(labelled)                       # questions per bucket, stacked by question type
    train_rows = mix_by_recipe(labelled, {"medium": 0.5, "difficult": 0.5}, seed=cfg.seed)

or all of it from a run's parameters: `select_training_rows(cfg, rows, protocol, retriever, ...)`.

The rollouts run through evaluation's loop (`searchrl.rollout.loop.rollout_questions`), so they are the rollouts RL
samples: same prompts, stop strings, observations and budgets, sampled at the rollout temperature. A rollout is
correct when the answer it gives scores at least `difficulty_min_score` under `difficulty_metric`; the format is
not judged, as the paper counts rollouts that answer correctly.

This module sits beside `evaluate.py` (it runs policies); `searchrl.data.difficulty` holds everything that needs no
model (buckets, cache, recipes), so the data layer imports nothing from the layers below it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from matplotlib.ticker import MaxNLocator

from searchrl.analysis.plots import ReportFigure
from searchrl.data.difficulty import difficulty_counts, label_difficulty, mix_by_recipe, recipe_for_stage
from searchrl.evaluation.evaluate import completion_text
from searchrl.metrics.scoring import metric
from searchrl.protocols import get_protocol
from searchrl.protocols.base import SearchProtocol
from searchrl.rollout import RolloutConfig, TurnGenerator
from searchrl.rollout.loop import rollout_questions

__all__ = ["PolicySampler", "difficulty_histogram", "policy_identity", "select_training_rows",
           "weights_fingerprint"]

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".gguf")


def policy_identity(name: str, model=None) -> str:
    """What names a policy's weights in the cache key: `name`, plus the size and modification time of its weight
    files when it is a local folder (a checkpoint overwritten in place is a new policy), or a fingerprint of the
    weights of `model` when no name is given."""
    if not name:
        if model is None:
            raise ValueError("policy_identity needs a policy name or the model itself")
        return f"weights:{weights_fingerprint(model)}"
    path = Path(name).expanduser()
    if not path.is_dir():
        return name
    files = sorted(p for p in path.rglob("*") if p.suffix in _WEIGHT_SUFFIXES)
    stamp = [(str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns) for p in files]
    return f"{name}@{hashlib.sha256(json.dumps(stamp).encode()).hexdigest()[:16]}"


@torch.no_grad()
def weights_fingerprint(model) -> str:
    """A short hash of every parameter's sum and absolute sum (to 6 significant digits, so that device and kernel
    rounding do not change it)."""
    stats = []
    for name, param in model.named_parameters():
        values = param.detach().double()
        stats.append(f"{name}:{values.sum().item():.6g}:{values.abs().sum().item():.6g}")
    return hashlib.sha256("\n".join(stats).encode()).hexdigest()[:16]


def _retriever_identity(retriever) -> str:
    """The retriever's repr (corpus size and options for ours); an object's default repr holds its memory address,
    which would make every run a cache miss, so such a retriever is named by its type and size instead."""
    text = repr(retriever)
    if " at 0x" not in text:
        return text
    size = len(retriever) if hasattr(retriever, "__len__") else "?"
    return f"{type(retriever).__name__}({size} passages)"


class PolicySampler:
    """Sampled search rollouts of a policy, judged correct by a metric: the `RolloutSampler` that labels difficulty.

    `generator` replaces the transformers generator (vLLM, or a scripted one in tests; `model` may then be None).
    `policy_name` names the policy in the cache key (see `policy_identity`); without it the weights are hashed.
    """

    def __init__(self, model, tokenizer, protocol: SearchProtocol | str, retriever, rollout: RolloutConfig, *,
                 metric_name: str = "cem", min_score: float = 1.0, policy_name: str = "", batch_size: int = 16,
                 chat: bool = True, seed: int = 0, generator: TurnGenerator | None = None, progress: bool = True):
        if rollout.temperature <= 0 and generator is None:
            raise ValueError("difficulty labelling compares repeated rollouts, which greedy decoding makes identical: "
                             "use a rollout temperature > 0")
        self.model, self.tokenizer, self.retriever, self.rollout = model, tokenizer, retriever, rollout
        self.protocol = get_protocol(protocol)
        self.metric_name, self.score, self.min_score = metric_name, metric(metric_name), min_score
        self.batch_size, self.chat, self.seed, self.generator = batch_size, chat, seed, generator
        self.calls = 0
        # A call samples up to difficulty.SAVE_EVERY questions x the round's rollouts (hundreds of rollouts, minutes
        # on a CPU): show its own bar over questions, since the labelling bar only moves when a call returns.
        self.progress = progress
        self.identity = {
            "policy": policy_identity(policy_name, model),
            "protocol": self.protocol.name,
            "retriever": _retriever_identity(retriever),
            "rollout": rollout.to_dict(),
            "metric": metric_name,
            "min_score": min_score,
            "chat": chat,
        }

    @classmethod
    def from_run(cls, cfg, protocol: SearchProtocol | str, retriever, *, model=None, tokenizer=None,
                 generator: TurnGenerator | None = None) -> PolicySampler:
        """The sampler a run's parameters describe (`cfg` a RunConfig): the policy `difficulty_policy` (empty: the
        run's `model`), loaded here, with the run's rollout settings, metric and batch size. A `model` passed in is
        used instead and named in the cache by its weights, since it may no longer be what its name loads."""
        name = cfg.difficulty_policy or cfg.model
        if model is None and generator is None:
            from searchrl.models import load_policy

            model, tokenizer = load_policy(name, dtype=torch.bfloat16 if cfg.bf16 else torch.float32,
                                           device=cfg.device)
        elif model is not None:
            name = ""
        return cls(model, tokenizer, protocol, retriever, cfg.rollout_config(), metric_name=cfg.difficulty_metric,
                   min_score=cfg.difficulty_min_score, policy_name=name, batch_size=cfg.eval_batch_size,
                   chat=cfg.chat_prompt, seed=cfg.seed, generator=generator)

    def correct(self, rows: Sequence[Mapping], repeats: int) -> list[list[bool]]:
        """For each row, whether each of `repeats` new sampled rollouts answered it correctly."""
        torch.manual_seed(self.seed * 100_003 + self.calls)  # each call draws new rollouts, reproducibly
        self.calls += 1
        out = []
        for row, _, trajs in rollout_questions(self.model, self.tokenizer, self.protocol, self.retriever, rows,
                                               self.rollout, greedy=False, batch_size=self.batch_size,
                                               chat=self.chat, repeats=repeats, generator=self.generator,
                                               progress=self.progress, desc=f"difficulty round ({repeats} each)"):
            answers = [self.protocol.parse(completion_text(t, self.tokenizer)).answer for t in trajs]
            out.append([self.score(a, row["golden_answers"]) >= self.min_score for a in answers])
        return out


def select_training_rows(cfg, rows: Sequence[Mapping], protocol: SearchProtocol | str, retriever, *,
                         stage: str = "", model=None, tokenizer=None, generator: TurnGenerator | None = None,
                         progress: bool = True) -> list[Mapping]:
    """The training questions of a run (`cfg` a RunConfig): `rows` unchanged when `difficulty_rollouts` is 0;
    otherwise labelled by the reference policy (`PolicySampler.from_run`) and, with a `data_recipe`, mixed by it
    (the recipe of `stage` when it holds one per stage)."""
    if cfg.difficulty_rollouts == 0:
        return list(rows)
    sampler = PolicySampler.from_run(cfg, protocol, retriever, model=model, tokenizer=tokenizer, generator=generator)
    labelled = label_difficulty(rows, sampler, cfg, progress=progress)
    if not cfg.data_recipe:
        return labelled
    return mix_by_recipe(labelled, recipe_for_stage(cfg.data_recipe, stage), seed=cfg.seed)


def difficulty_histogram(rows: Sequence[Mapping], *, by_type: bool = True, title: str | None = None) -> ReportFigure:
    """Questions per difficulty bucket; with `by_type`, each bar stacked by question type (metadata["type"])."""
    table = difficulty_counts(rows, by_type=by_type)
    fig = ReportFigure(figsize=(max(4.5, 1.3 * len(table) + 2), 3.2), layout="constrained")
    ax = fig.subplots()
    positions = range(len(table))
    bottom = [0] * len(table)
    for column in table.columns:
        heights = table[column].tolist()
        ax.bar(positions, heights, bottom=bottom, label=str(column))
        bottom = [b + h for b, h in zip(bottom, heights)]
    for x, total in zip(positions, bottom):
        ax.annotate(str(int(total)), (x, total), ha="center", va="bottom", fontsize="small")
    ax.set_xticks(list(positions), [str(b) for b in table.index])
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts of questions
    ax.set_ylabel("questions")
    ax.set_xlabel("difficulty (rollouts to first correct answer)")
    if by_type and len(table.columns) > 1:
        ax.legend(fontsize="small", title="type")
    ax.set_title(title or f"{sum(bottom)} questions by difficulty")
    return fig

