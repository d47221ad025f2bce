"""The baselines by name, and the one call that evaluates any of them into an `EvalResult`.

    result = evaluate_baseline("rag", model, tokenizer, retriever, rows, rollout=cfg.rollout_config())
    results = evaluate_baselines(["naive", "cot", "rag", "ircot", "prompted_search:search_r1"], model, ...)
    stage_table({**results, "after RL": trained})      # baselines and trained policies in one table

A name may carry an argument after ":": the protocol of `prompted_search`, the checkpoint of `sft` and
`rl_no_search`, the checkpoint and answering model of `evidence_tool` ("evidence_tool:<checkpoint>@<answerer>").
Other options are keyword arguments of the baseline (`evaluate_baseline("ircot", ..., max_steps=3)`).
A user's own baseline is a function `(run: BaselineRun, **options) -> EvalResult`, registered with
`BASELINES.register(name, function)` or named by import path ("my_package.baselines:mine").
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from searchrl.config.names import BASELINE_NAME_ARGUMENTS as NAME_ARGUMENTS
from searchrl.config.names import baseline_key, baseline_problem
from searchrl.config.names import split_baseline_name as split_name
from searchrl.core.registry import Registry
from searchrl.data.schema import check_rows
from searchrl.evaluation.baselines.harness import BaselineRun
from searchrl.evaluation.baselines.ircot import ircot
from searchrl.evaluation.baselines.prompted import prompted_search
from searchrl.evaluation.baselines.rstool import evidence_tool_baseline
from searchrl.evaluation.baselines.single_pass import cot, naive, rag
from searchrl.evaluation.baselines.trained import rl_no_search, sft
from searchrl.evaluation.evaluate import EvalResult
from searchrl.rollout import RolloutConfig, TurnGenerator

BASELINES: Registry[Callable[..., EvalResult]] = Registry("baseline", normalize=baseline_key)
BASELINES.register("naive", naive, doc="direct answer, no retrieval (Search-R1 'Direct Inference', 'Naive Generation')")
BASELINES.register("cot", cot, doc="step-by-step reasoning then answer, no retrieval (Search-R1 'CoT')")
BASELINES.register("rag", rag, doc="top_k documents for the question in the prompt, then answer ('RAG', 'Standard RAG')")
BASELINES.register("ircot", ircot, doc="retrieve after every reasoning sentence until 'So the answer is:' ('IRCoT')")
BASELINES.register("prompted_search", prompted_search,
                   doc="prompted_search:<protocol>: a protocol's prompt and search rollout on the untrained model")
BASELINES.register("sft", sft, doc="sft:<checkpoint>: the cold-start checkpoint with its search rollout (Search-R1 'SFT')")
BASELINES.register("rl_no_search", rl_no_search,
                   doc="rl_no_search:<checkpoint>: RL trained and evaluated with max_searches 0 (Search-R1 'R1')")
BASELINES.register("evidence_tool", evidence_tool_baseline,
                   doc="evidence_tool:<checkpoint>[@<answerer>]: an r_search policy's evidence answered by another "
                       "model (R-Search-as-a-Tool)")

def baseline_options(name: str) -> list[str] | None:
    """The keyword options a baseline takes besides the shared settings (None: any, it takes **options)."""
    params = inspect.signature(BASELINES.get(split_name(name)[0])).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.kind is p.KEYWORD_ONLY]


def evaluate_baseline(
    name: str,
    model,
    tokenizer,
    retriever,
    rows: Sequence[Mapping],
    *,
    rollout: RolloutConfig | None = None,
    top_k: int | None = None,
    max_new_tokens: int | None = None,
    batch_size: int = 16,
    chat: bool = True,
    generator: TurnGenerator | None = None,
    progress: bool = True,
    desc: str | None = None,
    **options: Any,
) -> EvalResult:
    """Evaluate baseline `name` on `rows`: one record per question, with the columns and metrics of
    `searchrl.evaluation.evaluate.evaluate` (em, f1, cem, searches = retriever queries, format_ok, model_tokens, ...).

    `rollout` is the run's rollout settings (documents per search, retriever timeouts, and the search and token
    budgets of the protocol baselines; default `RolloutConfig()`); `top_k` overrides its documents per search.
    `max_new_tokens` is the generation budget (None: each baseline's default; for the protocol baselines it
    replaces `max_completion_tokens`). `generator` replaces transformers generation (e.g. a scripted one; `model`
    may then be None). Decoding is greedy. `options` go to the baseline (see `baseline_options(name)`).
    """
    key, arg = split_name(name)
    entry = BASELINES.get(key)
    accepted = baseline_options(key)
    unknown = sorted(set(options) - set(accepted)) if accepted is not None else []
    if unknown:
        raise TypeError(f"baseline {key!r} has no option {', '.join(map(repr, unknown))}; its options: "
                        f"{', '.join(sorted(accepted)) or 'none'}")
    rows = check_rows(rows, what=f"baseline {name!r}")
    rollout = rollout or RolloutConfig()
    if top_k is not None:
        rollout = rollout.replace(top_k=top_k)
    run = BaselineRun(key=key, model=model, tokenizer=tokenizer, retriever=retriever, rows=rows, arg=arg,
                      name=f"{key}:{arg}" if arg else key, rollout=rollout, max_new_tokens=max_new_tokens,
                      batch_size=batch_size, chat=chat, generator=generator, progress=progress, desc=desc or "")
    return entry(run, **options)


def evaluate_baselines(names: Iterable[str], model, tokenizer, retriever, rows: Sequence[Mapping], *,
                       options: Mapping[str, Mapping[str, Any]] | None = None, **settings: Any
                       ) -> dict[str, EvalResult]:
    """{name: EvalResult} for each baseline, ready for `stage_table`; `options` gives per-baseline options
    ({"ircot": {"max_steps": 3}}), `settings` the shared keyword arguments of `evaluate_baseline`."""
    names = list(names)
    options = dict(options or {})
    stray = sorted(set(options) - set(names))
    if stray:
        raise ValueError(f"options given for baselines that are not run: {', '.join(stray)} (run: {', '.join(names)})")
    return {name: evaluate_baseline(name, model, tokenizer, retriever, rows, **settings, **dict(options.get(name, {})))
            for name in names}


__all__ = ["BASELINES", "NAME_ARGUMENTS", "baseline_options", "baseline_problem", "evaluate_baseline", "evaluate_baselines",
           "split_name"]
