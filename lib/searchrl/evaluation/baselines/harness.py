"""What every baseline shares: its inputs (`BaselineRun`), batching with a progress bar, and the `EvalResult` it
returns, built from the same per-question records as `searchrl.evaluation.evaluate.evaluate`.

A baseline fills one `Trajectory` per question (what the model wrote; the queries it sent and the ids of the
documents that came back) and hands it to `score_trajectory`, so em, f1, cem, searches (retriever queries),
format_ok and model_tokens (tokens the model wrote) mean exactly what they mean for a search policy, and one
table can hold both.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from searchrl.core.progress import progress_bar
from searchrl.evaluation.evaluate import EvalResult
from searchrl.evaluation.protocol import EvalProtocol
from searchrl.rollout import HFTurnGenerator, RolloutConfig, TurnGenerator


class MissingRetrieverError(ValueError):
    """A baseline that retrieves was given no retriever (e.g. a benchmark without a corpus)."""


@dataclass
class BaselineRun:
    """The inputs of one baseline evaluation; registered baselines take it as their first argument.

    `key` is the registry name, `arg` the text after ":" in the requested name ("prompted_search:r1_searcher"
    -> "r1_searcher"). `rollout` carries the documents per search (`top_k`), retriever timeouts and, for the
    baselines that run a search protocol, the search and token budgets. `max_new_tokens` None lets each baseline
    use its own default. `generator` replaces the transformers generator (a scripted one in tests).
    """

    key: str
    model: Any
    tokenizer: Any
    retriever: Any
    rows: list[Mapping]
    arg: str = ""
    name: str = ""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    max_new_tokens: int | None = None
    batch_size: int = 16
    chat: bool = True
    generator: TurnGenerator | None = None
    progress: bool = True
    desc: str = ""

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1 (or None for the baseline's default), got "
                             f"{self.max_new_tokens}")
        self.name = self.name or self.key
        self.desc = self.desc or f"baseline: {self.name}"

    @property
    def top_k(self) -> int:
        return self.rollout.top_k

    def tokens(self, default: int) -> int:
        """The generation budget: `max_new_tokens` when given, else the baseline's `default`."""
        return self.max_new_tokens or default

    def require_retriever(self) -> None:
        if self.retriever is None:
            raise MissingRetrieverError(f"baseline {self.name!r} retrieves documents: pass a retriever (e.g. "
                             "searchrl.retrieval.make_retriever('bm25', corpus))")

    def turn_generator(self, stop_strings: list[str], rollout: RolloutConfig, *,
                       reuse_cache: bool = True) -> TurnGenerator:
        """The given generator, else greedy transformers generation stopping at `stop_strings`."""
        if self.generator is not None:
            return self.generator
        if self.model is None:
            raise ValueError(f"baseline {self.name!r} generates text: pass a model (or a `generator`)")
        return HFTurnGenerator.from_rollout(self.model, self.tokenizer, stop_strings, rollout, greedy=True,
                                            reuse_cache=reuse_cache)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def batches(self, records: list[dict]) -> Iterator[list[Mapping]]:
        """The rows in batches of `batch_size`, under a progress bar whose postfix shows the running scores of
        `records` (the list the caller appends each question's record to), and the batch's step (`show_step`)."""
        self._bar = bar = progress_bar(total=len(self.rows), desc=self.desc, unit="question",
                                       disable=not self.progress)
        self._scores: dict[str, str] = {}
        try:
            for lo in range(0, len(self.rows), self.batch_size):
                batch = self.rows[lo: lo + self.batch_size]
                yield batch
                bar.update(len(batch))
                if records:
                    scored = pd.DataFrame(records)
                    self._scores = {"em": f"{scored['em'].mean():.3f}", "f1": f"{scored['f1'].mean():.3f}",
                                    "searches": f"{scored['searches'].mean():.2f}"}
                bar.set_postfix(self._scores)
        finally:
            bar.close()
            self._bar = None

    def show_step(self, text: str) -> None:
        """Say what the current batch is doing in the bar's postfix (a multi-step baseline's batch can take
        minutes, and the bar only moves when the batch ends); nothing outside `batches`."""
        bar = getattr(self, "_bar", None)
        if bar is not None:
            bar.set_postfix({**self._scores, "now": text})

    def result(self, records: list[dict], *, protocol: str, rollout: RolloutConfig, started: float,
               prompt: str = "", **settings: Any) -> EvalResult:
        """The `EvalResult`: records in row order, the settings that produced them (as `evaluate` records
        them, plus the baseline's name and its own options) and its protocol stamp. `prompt`: the baseline's
        instruction text, fingerprinted (default: its name and options). A `top_k` of None in `settings` says the
        baseline did not retrieve."""
        elapsed = time.perf_counter() - started
        config = {
            "baseline": self.name,
            "protocol": protocol,
            "retriever": repr(self.retriever),
            "model": model_name(self.model),
            "n": len(self.rows),
            "batch_size": self.batch_size,
            "rollout": rollout.to_dict(),
            "chat": self.chat,
            "greedy": True,
            **settings,
            "seconds": round(elapsed, 2),
            "questions_per_second": round(len(self.rows) / elapsed, 3) if elapsed > 0 else None,
        }
        retrieves = settings.get("top_k", rollout.top_k) is not None
        stamp = EvalProtocol.build(
            retriever=self.retriever if retrieves else None, rows=self.rows,
            rollout=rollout if retrieves else rollout.replace(max_searches=0), protocol=protocol, chat=self.chat,
            prompt=prompt or repr((self.name, sorted(settings.items(), key=str))), baseline=self.name)
        if not retrieves:
            stamp = stamp.replace(top_k=None)
        return EvalResult(pd.DataFrame(records), config, stamp)


@contextlib.contextmanager
def eval_mode(model):
    """The model in eval mode for the block, its previous mode restored after."""
    was_training = getattr(model, "training", None)
    if model is not None and hasattr(model, "eval"):
        model.eval()
    try:
        yield
    finally:
        if was_training is not None:
            model.train(was_training)


def model_name(model) -> str:
    if model is None:
        return "none"
    name = getattr(getattr(model, "config", None), "_name_or_path", "") or ""
    return name or type(model).__name__


__all__ = ["BaselineRun", "eval_mode", "model_name"]
