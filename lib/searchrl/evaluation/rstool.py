"""R-Search-as-a-Tool (RSTool): a trained policy searches and writes its evidence box, and another model answers
from that evidence alone; the other model's answers are scored (R-Search section 4, Figure 2).

    answerer = make_tool_answerer("gemma3-270m")                   # or "auto", or any callable prompts -> answers
    result = evidence_tool(model, tokenizer, retriever, rows, answerer=answerer, rollout=cfg.rollout_config())
    result.records[["question", "evidence", "prediction", "policy_prediction", "f1", "policy_f1"]]
    tool_summary(result)        # tool and policy scores, evidence rate, tool - policy F1 with a paired interval

The policy's rollouts are the evaluation rollouts (`searchrl.rollout.loop.rollout_questions`, greedy, the protocol's
own prompt), so the evidence is exactly what the policy writes when it is evaluated. The evidence is the one the
evidence reward judges (`judged_evidence`: the parsed box of a completion that searched), and the other model gets
the protocol's evidence prompt (R-Search's Table 5 template). A question without evidence is still put to the
other model, with no passages (`ask_without_evidence`), since a downstream model in RSTool answers every
question; `has_evidence` marks those records.

Each record holds what `evaluate` records for the policy's trajectory, with `prediction`, `em`, `f1`, `cem` (and
the extra `metrics`, from `searchrl.metrics.scoring`) scoring the other model's answer, so the evaluation suite and its
tables treat the tool like any method; the policy's own answer and scores sit beside them as `policy_prediction`,
`policy_em`, `policy_f1`, ... The baseline `evidence_tool:<checkpoint>[@<answerer>]` (searchrl.evaluation.baselines) runs it
on a saved policy.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from searchrl.config.evidence import AUTO, POLICY, answerer_problem, split_tool_argument, tool_argument_problem
from searchrl.data.schema import check_rows
from searchrl.evaluation.evaluate import EvalResult, completion_text, score_trajectory
from searchrl.evaluation.protocol import EvalProtocol
from searchrl.metrics.scoring import metric
from searchrl.protocols import get_protocol
from searchrl.protocols.base import SearchProtocol
from searchrl.rewards.evidence import (
    FALLBACK_POLICY,
    Answerer,
    TransformersAnswerer,
    evidence_prompt,
    judged_evidence,
    load_answerer,
    resolve_answerer,
)
from searchrl.rollout import RolloutConfig, TurnGenerator
from searchrl.rollout.loop import rollout_questions

TOOL_PROTOCOL = "r_search"
BASE_METRICS = ("em", "f1", "cem")  # always scored: the columns every evaluation record has
# Where a run folder keeps the policy whose evidence is used, most trained first.
TOOL_STAGES = ("rl_stage2", "rl", "cold_start")


def writes_evidence(protocol: SearchProtocol) -> bool:
    """Whether a protocol has an evidence box (R-Search's <original_evidence>)."""
    return bool(getattr(protocol, "evidence_open", None)) and callable(getattr(protocol, "evidence_prompt", None))


def evidence_tool(
    model,
    tokenizer,
    retriever,
    rows: Sequence[Mapping],
    *,
    answerer: Answerer,
    protocol: SearchProtocol | str = TOOL_PROTOCOL,
    rollout: RolloutConfig | None = None,
    batch_size: int = 16,
    chat: bool = True,
    generator: TurnGenerator | None = None,
    metrics: Sequence[str] = BASE_METRICS,
    ask_without_evidence: bool = True,
    progress: bool = True,
    desc: str = "evidence tool",
) -> EvalResult:
    """Roll out the policy (`model`, or `generator`) greedily on `rows`, hand each question's evidence to
    `answerer` (a callable list of prompts -> list of answers, called once per batch) and score its answers.

    `metrics` are `searchrl.metrics.scoring` names scored for both the tool's answer (column `<name>`) and the policy's own
    (`policy_<name>`); em, f1 and cem always are. Without `ask_without_evidence`, a question with no evidence is not
    put to the answerer and scores 0.
    """
    rows = check_rows(rows, what="evidence tool")
    protocol = get_protocol(protocol)
    if not writes_evidence(protocol):
        raise ValueError(f"protocol {protocol.name!r} writes no evidence box; R-Search-as-a-Tool needs a policy "
                         f"trained with the {TOOL_PROTOCOL!r} protocol")
    if not callable(answerer):
        raise TypeError(f"answerer must be a callable list[str] -> list[str], got {type(answerer).__name__}")
    names = list(dict.fromkeys([*BASE_METRICS, *metrics]))
    scorers = {name: metric(name) for name in names}  # unknown names fail here, before any rollout
    rollout = rollout or RolloutConfig()
    records: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []

    def flush() -> None:
        asked = [r for r in pending if r["tool_prompt"]]
        answers = list(answerer([r["tool_prompt"] for r in asked])) if asked else []
        if len(answers) != len(asked):
            raise ValueError(f"the answerer returned {len(answers)} answers for {len(asked)} prompts")
        for record, answer in zip(asked, answers):
            record["prediction"] = "" if answer is None else str(answer).strip()
        for record in pending:
            for name, score in scorers.items():
                record[name] = float(score(record["prediction"], record["golden_answers"]))
            record["answered"] = bool(record["prediction"])
            records.append(record)
        pending.clear()

    def running() -> dict:
        done = pd.DataFrame(records)
        if done.empty:
            return {}
        return {"tool_f1": f"{done['f1'].mean():.3f}", "policy_f1": f"{done['policy_f1'].mean():.3f}",
                "evidence": f"{done['has_evidence'].mean():.2f}"}

    start = time.perf_counter()
    for row, _, (traj,) in rollout_questions(model, tokenizer, protocol, retriever, rows, rollout, greedy=True,
                                             batch_size=batch_size, chat=chat, generator=generator, desc=desc,
                                             progress=progress, postfix=running):
        text = completion_text(traj, tokenizer)
        record = tool_record(row, score_trajectory(row, traj, text, protocol), protocol, scorers,
                             ask_without_evidence=ask_without_evidence)
        pending.append(record)
        if len(pending) >= batch_size:
            flush()
    flush()
    elapsed = time.perf_counter() - start
    config = {
        "protocol": protocol.name,
        "retriever": repr(retriever),
        "model": _name(model),
        "answerer": getattr(answerer, "name", None) or repr(answerer),
        "n": len(rows),
        "batch_size": batch_size,
        "rollout": rollout.to_dict(),
        "chat": chat,
        "greedy": True,
        "metrics": names,
        "ask_without_evidence": ask_without_evidence,
        "seconds": round(elapsed, 2),
        "questions_per_second": round(len(rows) / elapsed, 3) if elapsed > 0 else None,
    }
    stamp = EvalProtocol.build(retriever=retriever, rows=rows, rollout=rollout, protocol=protocol, tokenizer=tokenizer,
                               chat=chat, metrics=names, answerer=config["answerer"])
    return EvalResult(pd.DataFrame(records), config, stamp)


def tool_record(row: Mapping, scored: dict[str, Any], protocol: SearchProtocol, scorers: Mapping[str, Any], *,
                ask_without_evidence: bool = True) -> dict[str, Any]:
    """One question's record before the tool answers: the policy's record with its answer moved to `policy_*`
    columns, the evidence, and the prompt for the other model ("" when it is not asked)."""
    record = dict(scored)
    policy_answer = record.pop("prediction")
    record["policy_prediction"] = policy_answer
    record["policy_answered"] = record.pop("answered")
    for name, score in scorers.items():
        record[f"policy_{name}"] = float(score(policy_answer or None, record["golden_answers"]))
    evidence = judged_evidence(protocol.parse(record["completion"]), int(record["searches"]))
    record["evidence"] = evidence or ""
    record["has_evidence"] = evidence is not None
    asked = evidence is not None or ask_without_evidence
    record["tool_prompt"] = evidence_prompt(protocol, str(row["question"]), evidence or "") if asked else ""
    record["prediction"] = ""
    return record


def tool_summary(result: EvalResult, metric_name: str = "f1") -> dict[str, float]:
    """Means over questions of the tool's and the policy's scores, the evidence rate, the tool's `metric_name` on
    the questions that had evidence, and tool minus policy on `metric_name` with its paired-bootstrap 95% interval."""
    from searchrl.core.stats import paired_bootstrap

    df = result.records
    if df.empty:
        raise ValueError("tool_summary: the result has no records")
    out: dict[str, float] = {"n": len(df), "evidence_rate": float(df["has_evidence"].astype(float).mean())}
    for name in result.config.get("metrics", BASE_METRICS):
        out[f"tool_{name}"] = float(df[name].mean())
        out[f"policy_{name}"] = float(df[f"policy_{name}"].mean())
    with_evidence = df[df["has_evidence"].astype(bool)]
    out[f"tool_{metric_name}_with_evidence"] = (float(with_evidence[metric_name].mean()) if len(with_evidence)
                                               else float("nan"))
    diff, low, high = paired_bootstrap(df[f"policy_{metric_name}"].to_numpy(), df[metric_name].to_numpy())
    out[f"tool_minus_policy_{metric_name}"] = diff
    out[f"tool_minus_policy_{metric_name}_low"] = low
    out[f"tool_minus_policy_{metric_name}_high"] = high
    return out


# ------------------------------------------------------------------------------------------------ names


def resolve_tool_checkpoint(checkpoint: str | Path) -> tuple[str, str | None]:
    """(what `load_policy` loads, the protocol it was trained with or None) for a checkpoint: a saved policy
    folder, a run folder (its most trained saved policy: rl_stage2, rl, else cold_start), or a bundled name / hub
    id. Errors say what was expected."""
    text = str(checkpoint).strip()
    if not text:
        raise ValueError("R-Search-as-a-Tool needs the checkpoint whose evidence it uses: name it "
                         "'evidence_tool:<saved policy or run folder>' (train one with protocol: r_search)")
    path = Path(text).expanduser()
    if not path.exists():
        return text, None  # a bundled name or hub id: load_policy says what is wrong with it
    if (path / "config.json").is_file():
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else None
        return str(path), _trained_protocol(run_dir)
    for stage in TOOL_STAGES:
        if (path / "checkpoints" / stage / "config.json").is_file():
            return str(path / "checkpoints" / stage), _trained_protocol(path)
    raise FileNotFoundError(f"{path} is neither a saved policy (no config.json) nor a run folder with a saved "
                            f"policy under checkpoints/ ({', '.join(TOOL_STAGES)}); train one with "
                            "protocol: r_search first")


def _trained_protocol(run_dir: Path | None) -> str | None:
    params = run_dir / "params.yaml" if run_dir is not None else None
    if params is None or not params.is_file():
        return None
    return (yaml.safe_load(params.read_text(encoding="utf-8")) or {}).get("protocol")


def make_tool_answerer(setting: str | Answerer | None = AUTO, *, policy: str | None = None, fallback_model=None,
                       fallback_tokenizer=None, max_new_tokens: int = 32, batch_size: int = 8) -> Answerer:
    """The other model: a callable as it is; "auto" (an installed bundled model of another family than `policy`,
    the checkpoint's name or path, else the policy's family with a warning); "policy"; or a model name / path,
    loaded once.

    Where "auto" or "policy" come down to the policy's family, `fallback_model` / `fallback_tokenizer` answer when
    given (the baseline's untrained model: at least not the model that wrote the evidence), else `policy` by name.
    """
    if setting is not None and callable(setting):
        return setting
    setting = AUTO if setting is None else setting.strip()
    problem = answerer_problem(setting)
    if problem:
        raise ValueError(problem)
    if setting not in (AUTO, POLICY):
        return load_answerer(setting, max_new_tokens=max_new_tokens, batch_size=batch_size)
    name = resolve_answerer(setting, policy)
    fell_back = name == (policy or FALLBACK_POLICY)  # an "auto" pick is never the policy itself
    if fell_back and fallback_model is not None:
        return TransformersAnswerer(fallback_model, fallback_tokenizer, max_new_tokens=max_new_tokens,
                                    batch_size=batch_size)
    return load_answerer(name, max_new_tokens=max_new_tokens, batch_size=batch_size)


def _name(model) -> str:
    if model is None:
        return "none"
    return str(getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__)


__all__ = [
    "BASE_METRICS",
    "TOOL_PROTOCOL",
    "TOOL_STAGES",
    "evidence_tool",
    "make_tool_answerer",
    "resolve_tool_checkpoint",
    "split_tool_argument",
    "tool_argument_problem",
    "tool_record",
    "tool_summary",
    "writes_evidence",
]
