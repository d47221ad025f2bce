"""R-Search-as-a-Tool as a baseline row: `evidence_tool:<checkpoint>[@<answerer>]`.

A policy trained with the r_search protocol (a saved folder or a run folder) searches and writes its evidence; the
other model (`<answerer>`: auto, policy, a bundled name, a folder or hub id; default auto) answers from that
evidence, and its answers are what the row scores. "auto" takes an installed bundled model of another family than
the checkpoint (gemma3-270m for a SmolLM2 policy); with none installed it warns and uses the model given to the
baseline (the run's untrained `model`). The records keep the policy's own answer and scores as `policy_*` columns
(see `searchrl.evaluation.rstool`).
"""

from __future__ import annotations

from searchrl.evaluation.baselines.harness import BaselineRun
from searchrl.evaluation.evaluate import EvalResult
from searchrl.evaluation.rstool import (
    TOOL_PROTOCOL,
    Answerer,
    evidence_tool,
    make_tool_answerer,
    resolve_tool_checkpoint,
    split_tool_argument,
)
from searchrl.models import load_policy, load_tokenizer
from searchrl.protocols import get_protocol


def evidence_tool_baseline(run: BaselineRun, *, checkpoint: str | None = None, answerer: str | Answerer | None = None,
                           dtype: str = "float32", device: str = "auto", ask_without_evidence: bool = True
                           ) -> EvalResult:
    """The checkpoint's evidence answered by another model (R-Search Figure 2, "RSTool + <model>").

    `checkpoint` and `answerer` may come from the name ("evidence_tool:<checkpoint>@<answerer>") or as options,
    not both. With a `generator` (tests), the checkpoint's tokenizer is loaded but not its weights.
    """
    named_checkpoint, named_answerer = split_tool_argument(run.arg) if run.arg else (None, None)
    if named_checkpoint and checkpoint is not None:
        raise ValueError(f"baseline {run.name!r} names its checkpoint already; drop checkpoint={checkpoint!r}")
    if named_answerer and answerer is not None:
        raise ValueError(f"baseline {run.name!r} names its answerer already; drop answerer={answerer!r}")
    run.require_retriever()
    path, trained_with = resolve_tool_checkpoint(named_checkpoint or checkpoint or "")
    if trained_with is not None and get_protocol(trained_with).name != TOOL_PROTOCOL:
        raise ValueError(f"{path} was trained with protocol {trained_with!r}, which writes no evidence; "
                         f"R-Search-as-a-Tool needs a policy trained with protocol: {TOOL_PROTOCOL}")
    rollout = run.rollout
    if run.max_new_tokens is not None:
        rollout = rollout.replace(max_completion_tokens=run.max_new_tokens)
    if run.generator is not None:
        model, tokenizer = None, load_tokenizer(path)
    else:
        model, tokenizer = load_policy(path, dtype=dtype, device=device)
    other = make_tool_answerer(named_answerer or answerer, policy=path, fallback_model=run.model,
                               fallback_tokenizer=run.tokenizer)
    result = evidence_tool(model, tokenizer, run.retriever, run.rows, answerer=other, protocol=TOOL_PROTOCOL,
                           rollout=rollout, batch_size=run.batch_size, chat=run.chat, generator=run.generator,
                           ask_without_evidence=ask_without_evidence, progress=run.progress, desc=run.desc)
    result.config = {"baseline": run.name, **result.config, "top_k": rollout.top_k, "checkpoint": path}
    return result


__all__ = ["evidence_tool_baseline"]
