"""A search protocol's own prompt on a model that was never trained to search: `evaluate` itself, under a
baseline name, so the prompted row and the trained rows come from one code path."""

from __future__ import annotations

from searchrl.evaluation.baselines.harness import BaselineRun
from searchrl.evaluation.evaluate import EvalResult, evaluate
from searchrl.protocols import SearchProtocol, get_protocol

DEFAULT_PROTOCOL = "search_r1"


def prompted_search(run: BaselineRun, *, protocol: str | SearchProtocol | None = None) -> EvalResult:
    """The untrained model following a protocol's prompt with the search rollout ("prompted_search:r1_searcher";
    plain "prompted_search" uses search_r1): the prompting-only search rows, Search-o1 in Search-R1 Table 2 and
    R1-Searcher++ Table 1, and each paper's starting point before training.

    Budgets are the run's `rollout` (search budget, top_k, tokens); `max_new_tokens`, when given, replaces
    `max_completion_tokens`, which counts retrieved tokens too.
    """
    if run.arg and protocol is not None:
        raise ValueError(f"baseline {run.name!r} names its protocol already; drop protocol={protocol!r}")
    chosen = get_protocol(run.arg or protocol or DEFAULT_PROTOCOL)
    run.require_retriever()
    rollout = run.rollout
    if run.max_new_tokens is not None:
        rollout = rollout.replace(max_completion_tokens=run.max_new_tokens)
    result = evaluate(run.model, run.tokenizer, chosen, run.retriever, run.rows, rollout=rollout,
                      batch_size=run.batch_size, chat=run.chat, greedy=True, progress=run.progress,
                      generator=run.generator, desc=run.desc)
    name = run.name if run.arg else f"{run.key}:{chosen.name}"
    result.config = {"baseline": name, **result.config, "top_k": rollout.top_k}
    return result


__all__ = ["DEFAULT_PROTOCOL", "prompted_search"]
