"""Baselines that need training first: they evaluate a saved checkpoint with the settings their row requires.

`sft`: the cold start (supervised fine-tuning on written search trajectories, retrieved tokens masked), evaluated
with its protocol's search rollout. `rl_no_search`: the same RL trainer run with `max_searches: 0` (every query
answered by the budget notice, so the policy learns to answer without documents), evaluated with a search budget
of 0 too.

`checkpoint` is a saved policy folder (`config.json` in it) or a run folder, in which the stage's weights are
found under `checkpoints/` (`cold_start`; `rl`, or `rl_stage2` for a two-stage run). With a run folder its
`params.yaml` supplies the protocol and prompt layout, and `rl_no_search` refuses a run that trained with search.
The evaluation budgets (top_k, tokens) are the caller's `rollout`, the same as for every other row of the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from searchrl.evaluation.baselines.harness import BaselineRun
from searchrl.evaluation.evaluate import EvalResult, evaluate
from searchrl.models import load_policy
from searchrl.protocols import SearchProtocol, get_protocol

# Where each stage's final weights are saved inside a run folder, most specific first.
STAGE_FOLDERS = {"sft": ("cold_start",), "rl_no_search": ("rl_stage2", "rl")}

HOW_TO = {
    "sft": ("train a cold start first: run a notebook with sft_examples > 0 (rl_steps: 0 stops right after it); "
            "its weights are saved in <run folder>/checkpoints/cold_start"),
    "rl_no_search": ("train with RL and no search first: run a notebook with max_searches: 0 (sft_examples: 0 for "
                     "the papers' R1 rows); its weights are saved in <run folder>/checkpoints/rl"),
}


def sft(run: BaselineRun, *, checkpoint: str | Path | None = None, protocol: str | SearchProtocol | None = None,
        dtype: str | None = None, device: str = "auto") -> EvalResult:
    """A cold-start (SFT) checkpoint with its protocol's search rollout (Search-R1 Table 2 "SFT"; R1-Searcher
    Table 4 "SFT"). Needs `checkpoint` ("sft:<path>" or checkpoint=...)."""
    run.require_retriever()
    return evaluate_checkpoint(run, "sft", checkpoint, protocol, max_searches=None, dtype=dtype, device=device)


def rl_no_search(run: BaselineRun, *, checkpoint: str | Path | None = None,
                 protocol: str | SearchProtocol | None = None, dtype: str | None = None,
                 device: str = "auto") -> EvalResult:
    """A policy trained by the same RL trainer with max_searches 0, evaluated with a search budget of 0 (Search-R1
    Table 2 "R1-base" / "R1-instruct"). Needs `checkpoint` ("rl_no_search:<path>"
    or checkpoint=...)."""
    return evaluate_checkpoint(run, "rl_no_search", checkpoint, protocol, max_searches=0, dtype=dtype,
                               device=device)


def find_checkpoint(kind: str, checkpoint: str | Path | None) -> tuple[Path, dict[str, Any]]:
    """The weights folder of `checkpoint` for baseline `kind`, and the parameters of the run that made it ({}
    when it is not inside a run folder). Errors say how to produce what is missing."""
    if checkpoint is None or not str(checkpoint).strip():
        raise ValueError(f"baseline {kind!r} evaluates a trained checkpoint and none was given: {HOW_TO[kind]}; "
                         f"then pass checkpoint=<that folder or its run folder> (or name it '{kind}:<path>')")
    path = Path(str(checkpoint).strip()).expanduser()
    if (path / "config.json").is_file():
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else None
        return path, _params(run_dir)
    if (path / "params.yaml").is_file() or (path / "checkpoints").is_dir():
        for stage in STAGE_FOLDERS[kind]:
            if (path / "checkpoints" / stage / "config.json").is_file():
                return path / "checkpoints" / stage, _params(path)
        have = sorted(p.name for p in (path / "checkpoints").iterdir()) if (path / "checkpoints").is_dir() else []
        raise FileNotFoundError(
            f"run folder {path} has no finished {' or '.join(STAGE_FOLDERS[kind])} checkpoint (checkpoints/ holds: "
            f"{', '.join(have) or 'nothing'}); {HOW_TO[kind]}")
    raise FileNotFoundError(f"{path} is neither a saved policy (no config.json) nor a run folder (no params.yaml or "
                            f"checkpoints/); {HOW_TO[kind]}")


def _params(run_dir: Path | None) -> dict[str, Any]:
    if run_dir is None or not (run_dir / "params.yaml").is_file():
        return {}
    return yaml.safe_load((run_dir / "params.yaml").read_text(encoding="utf-8")) or {}


def evaluate_checkpoint(run: BaselineRun, kind: str, checkpoint: str | Path | None,
                        protocol: str | SearchProtocol | None, *, max_searches: int | None,
                        dtype: str | None = None, device: str = "auto") -> EvalResult:
    """Load the checkpoint's weights and evaluate them with `evaluate` (its protocol; `max_searches` overriding the
    caller's search budget when not None). The `model` given to the baseline is not used."""
    if run.arg and checkpoint is not None:
        raise ValueError(f"baseline {run.name!r} names its checkpoint already; drop checkpoint={checkpoint!r}")
    folder, params = find_checkpoint(kind, run.arg or checkpoint)
    trained_with = params.get("protocol")
    if protocol is None and trained_with is None:
        raise ValueError(f"{folder} is not inside a run folder, so its protocol is unknown: pass protocol=<the "
                         "protocol it was trained with> (e.g. 'search_r1')")
    chosen = get_protocol(protocol if protocol is not None else trained_with)
    if trained_with is not None and chosen.name != get_protocol(trained_with).name:
        raise ValueError(f"{folder} was trained with protocol {trained_with!r}, not {chosen.name!r}; evaluating it "
                         "under another protocol's prompt would not measure the trained policy")
    if kind == "rl_no_search" and int(params.get("max_searches", 0)) != 0:
        raise ValueError(f"{folder} was trained with max_searches={params['max_searches']}, so it is not the "
                         f"no-search baseline; {HOW_TO[kind]}")
    rollout = run.rollout
    if max_searches is not None:
        rollout = rollout.replace(max_searches=max_searches)
    if run.max_new_tokens is not None:
        rollout = rollout.replace(max_completion_tokens=run.max_new_tokens)
    dtype = dtype or ("bfloat16" if params.get("bf16") else "float32")
    model, tokenizer = load_policy(str(folder), dtype=dtype, device=device)
    chat = bool(params.get("chat_prompt", run.chat))
    result = evaluate(model, tokenizer, chosen, run.retriever, run.rows, rollout=rollout, batch_size=run.batch_size,
                      chat=chat, greedy=True, progress=run.progress, generator=run.generator, desc=run.desc)
    result.config = {"baseline": run.name, **result.config, "top_k": rollout.top_k, "checkpoint": str(folder)}
    return result


__all__ = ["HOW_TO", "STAGE_FOLDERS", "evaluate_checkpoint", "find_checkpoint", "rl_no_search", "sft"]
