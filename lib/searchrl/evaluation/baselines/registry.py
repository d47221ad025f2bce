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

from searchrl.core.registry import Registry
from searchrl.data.schema import check_rows
from searchrl.evaluation.baselines.harness import BaselineRun
from searchrl.evaluation.baselines.ircot import ircot
from searchrl.evaluation.baselines.prompted import prompted_search
from searchrl.evaluation.baselines.rstool import evidence_tool_baseline
from searchrl.evaluation.baselines.single_pass import cot, naive, rag
from searchrl.evaluation.baselines.trained import rl_no_search, sft
from searchrl.evaluation.evaluate import EvalResult
from searchrl.evaluation.rstool import tool_argument_problem
from searchrl.protocols import PROTOCOLS
from searchrl.rollout import RolloutConfig, TurnGenerator

# The papers' own names for the same rows.
_ALIASES = {
    "direct": "naive", "direct_inference": "naive", "naive_generation": "naive", "directly_gen": "naive",
    "llm_w/o_search": "naive", "standard_rag": "rag", "vanilla_rag": "rag", "r1": "rl_no_search",
    "prompted": "prompted_search", "rstool": "evidence_tool", "r_search_as_a_tool": "evidence_tool",
}


def _normalize(name: str) -> str:
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    return _ALIASES.get(key, key)


BASELINES: Registry[Callable[..., EvalResult]] = Registry("baseline", normalize=_normalize)
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

# Registered baselines whose name may carry an argument, and the keyword it stands for.
NAME_ARGUMENTS = {"prompted_search": "protocol", "sft": "checkpoint", "rl_no_search": "checkpoint",
                  "evidence_tool": "checkpoint"}


def split_name(name: str) -> tuple[str, str]:
    """(registry key, argument) of a baseline name: "prompted_search:r1_searcher" -> ("prompted_search",
    "r1_searcher"); unknown names raise with the list of known ones."""
    if not isinstance(name, str):
        raise TypeError(f"a baseline name must be a string, got {type(name).__name__}")
    head, sep, arg = name.partition(":")
    if sep and head.strip() and _normalize(head) in BASELINES:
        key = BASELINES.key(head)
        if key not in NAME_ARGUMENTS:
            raise ValueError(f"baseline {key!r} takes no ':' argument (got {name!r}); only "
                             f"{', '.join(sorted(NAME_ARGUMENTS))} do")
        if not arg.strip():
            raise ValueError(f"{name!r}: name the {NAME_ARGUMENTS[key]} after ':' or drop the ':'")
        return key, arg.strip()
    return BASELINES.key(name), ""


def baseline_problem(name: str) -> str | None:
    """What is wrong with baseline name `name` (for checking parameters before a run starts), or None. A
    checkpoint named after ':' is checked when the baseline runs (it may not exist yet)."""
    try:
        key, arg = split_name(name)
        if key == "prompted_search" and arg:
            return PROTOCOLS.problem(arg)
        if key == "evidence_tool" and arg:
            problem = tool_argument_problem(arg)
            return f"{name!r}: {problem}" if problem else None
    except (ValueError, TypeError) as err:  # UnknownNameError is a ValueError
        return str(err)
    except Exception as err:  # noqa: BLE001  (a user's module raised while importing: report it, do not crash)
        return f"{name!r}: importing it failed: {type(err).__name__}: {err}"
    return None


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
