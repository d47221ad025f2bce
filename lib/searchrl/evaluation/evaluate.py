"""Evaluation: the training rollout engine, run greedily over a question set, scored per question.

    result = evaluate(model, tokenizer, "search_r1", retriever, world.questions("test", limit=48))
    result.summary()            # {"em": ..., "f1": ..., "searches": ..., "n": 48, ...}
    result.by_type()            # one row per question type
    result.by_knowledge()       # one row per knowledge label (internal / external / mixed), when the rows have them
    stage_table({"untrained": before, "after cold start": after})   # the paper-style table

Evaluation uses the same `SearchRollout` as training, so what is measured is exactly what the policy does during
RL (same prompts, same stop strings, same observation text), only with greedy decoding; the batched question loop
is `searchrl.rollout.loop.rollout_questions`. Trajectories are rendered by `searchrl.evaluation.render`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from searchrl.core.files import atomic_write_text
from searchrl.data.schema import check_rows
from searchrl.evaluation.protocol import EvalProtocol, ProtocolComparison, compare_protocols
from searchrl.metrics.answers import cover_exact_match, exact_match, f1_score
from searchrl.protocols import get_protocol
from searchrl.protocols.base import SearchProtocol
from searchrl.rewards.search_count import has_repeated_query, support_recall
from searchrl.rollout import RolloutConfig, Trajectory, TurnGenerator
from searchrl.rollout.loop import rollout_questions

__all__ = ["EvalResult", "completion_text", "evaluate", "score_trajectory", "stage_protocols", "stage_table"]


# Columns of `EvalResult.summary()` that are plain means over questions.
SUMMARY_MEANS = ("em", "f1", "cem", "searches", "invalid_queries", "repeated_query", "format_ok", "answered",
                 "model_tokens", "total_tokens", "hit_length_budget")
BY_TYPE_MEANS = ("em", "f1", "cem", "searches", "format_ok", "answered", "model_tokens")
# Knowledge labels (a synthetic world with a knowledge split) in table order, and what is compared across them:
# R1-Searcher++'s claim is fewer searches where the model knows the fact, at no loss of accuracy.
KNOWLEDGE_ORDER = ("internal", "external", "mixed")
BY_KNOWLEDGE_MEANS = ("em", "f1", "cem", "searches", "no_search", "internal_answers", "format_ok")


# ------------------------------------------------------------------------------------------------ scoring


def completion_text(traj: Trajectory, tokenizer) -> str:
    """The completion as the rewards see it: sampled and appended tokens, special tokens (EOS) dropped."""
    return tokenizer.decode(traj.completion_ids, skip_special_tokens=True)


def score_trajectory(row: Mapping, traj: Trajectory, text: str, protocol: SearchProtocol) -> dict[str, Any]:
    """One question's record: the parsed answer, its metrics, search behaviour and token counts."""
    parsed = protocol.parse(text)
    golden = list(row["golden_answers"])
    meta = row.get("metadata") or {}
    answer = parsed.answer
    recall = support_recall(traj.doc_ids, list(meta.get("supporting_ids") or []))
    return {
        "id": row.get("id", ""),
        "question": row["question"],
        "golden_answers": golden,
        "qtype": str(meta.get("type", "unknown")),
        "hops": int(meta.get("hops", 1)),
        # "internal", "external" or "mixed" in a synthetic world with a knowledge split; None elsewhere.
        "knowledge": meta.get("knowledge"),
        "prediction": answer if answer is not None else "",
        "em": exact_match(answer, golden),
        "f1": f1_score(answer, golden),
        "cem": cover_exact_match(answer, golden),
        "searches": traj.num_searches,
        "internal_answers": len(parsed.internal),  # internal-answer spans (R1-Searcher++); 0 for other protocols
        "invalid_queries": traj.invalid_queries,
        # One query asked twice: a second search that looks for nothing new (what RL drifted into on this CPU).
        "repeated_query": has_repeated_query(list(traj.queries)),
        "empty_results": traj.empty_results,
        "format_ok": bool(parsed.format_ok),
        "answered": bool(answer and answer.strip()),
        "model_tokens": int(sum(traj.env_mask)),
        "total_tokens": len(traj.env_mask),
        "queries": list(traj.queries),
        "doc_ids": [list(ids) for ids in traj.doc_ids],
        # None when the row does not say which passages hold its answer (real QA data, mostly).
        "support_retrieved": (recall > 0) if recall is not None else None,
        "support_recall": recall,
        "finish": traj.finish,
        "hit_search_budget": traj.hit_search_budget,
        "hit_length_budget": traj.hit_length_budget,
        "completion": text,
    }


# ------------------------------------------------------------------------------------------------ results


@dataclass
class EvalResult:
    """Per-question records of one evaluation, with the settings that produced them and its protocol (None for an
    evaluation read back from a file written before protocols were recorded)."""

    records: pd.DataFrame
    config: dict[str, Any] = field(default_factory=dict)
    protocol: EvalProtocol | None = None

    def summary(self) -> dict[str, float]:
        """Means over all questions (em, f1, cem, searches, format_ok, answered, model_tokens, ...) and n."""
        df = self.records
        out: dict[str, float] = {name: float(df[name].mean()) for name in SUMMARY_MEANS if name in df}
        known = df["support_retrieved"].dropna() if "support_retrieved" in df else pd.Series(dtype=float)
        if len(known):
            out["support_retrieved"] = float(known.astype(float).mean())
        out["n"] = len(df)
        return out

    def by_type(self) -> pd.DataFrame:
        """One row per question type (index `qtype`): n and the means of the main metrics."""
        df = self.records
        table = df.groupby("qtype", sort=False)[list(BY_TYPE_MEANS)].mean(numeric_only=False).astype(float)
        table.insert(0, "n", df.groupby("qtype", sort=False).size())
        return table

    def by_knowledge(self) -> pd.DataFrame:
        """One row per knowledge label (index `knowledge`: internal, external, mixed, in that order) for questions
        from a world with a knowledge split: n, EM/F1/cover EM, searches per question, `no_search` (the share of
        questions answered with no search at all), internal-answer spans per question and format validity.
        Questions without a label are left out; with none labelled the table is empty (no rows)."""
        df = self.records
        columns = ["n", *BY_KNOWLEDGE_MEANS]
        if "knowledge" not in df:
            return pd.DataFrame(columns=columns, index=pd.Index([], name="knowledge"))
        labelled = df[df["knowledge"].notna()].assign(no_search=lambda d: d["searches"] == 0)
        if "internal_answers" not in labelled:  # records from before the column existed
            labelled = labelled.assign(internal_answers=0)
        groups = labelled.groupby("knowledge", sort=False)
        table = groups[list(BY_KNOWLEDGE_MEANS)].mean(numeric_only=False).astype(float)
        table.insert(0, "n", groups.size())
        order = [k for k in KNOWLEDGE_ORDER if k in table.index] + [k for k in table.index if k not in KNOWLEDGE_ORDER]
        return table.loc[order]

    def to_json(self, path: str | Path) -> Path:
        """Write summary, per-type table, config and protocol (`searchrl.evaluation.protocol`; null when not
        recorded) as one JSON file (and the per-knowledge table, when the questions carry knowledge labels)."""
        payload = {
            "summary": self.summary(),
            "by_type": json.loads(self.by_type().to_json(orient="index")),
            "config": self.config,
            "protocol": self.protocol.to_dict() if self.protocol is not None else None,
        }
        by_knowledge = self.by_knowledge()
        if len(by_knowledge):
            payload["by_knowledge"] = json.loads(by_knowledge.to_json(orient="index"))
        return atomic_write_text(path, json.dumps(payload, indent=1, default=str) + "\n")

    def trajectories_jsonl(self, path: str | Path) -> Path:
        """Write every record (completion text, queries, doc ids, metrics) as one JSON line per question.

        Written whole, then renamed over `path`: this is usually the records file `evaluate(records_path=...)`
        appended to, which a resumed evaluation reads back, so a kill mid-write must not truncate it."""
        return atomic_write_text(path, self.records.to_json(orient="records", lines=True, force_ascii=False))


def stage_table(results: Mapping[str, EvalResult]) -> pd.DataFrame:
    """The paper-style table: one row per stage ("untrained", "after cold start", "after RL", ...).

    Columns: EM, F1, searches/question, format-valid rate, then "F1 <type>" for each question type met, and
    "F1 multi-hop" (all questions with more than one hop) when both single- and multi-hop questions are present;
    when questions carry knowledge labels (a synthetic world with a knowledge split), "F1 <label>" and
    "searches/question <label>" for each of internal, external and mixed met; then the F1 change from the previous stage with its paired-bootstrap 95% interval (same questions only).
    When the stages' protocols differ (a no-search stage's search budget, say), a last column "protocol" marks each
    row ("P1", "P2", ...). The comparison of the stages' protocols is `table.attrs["protocols"]`
    (`stage_protocols`): its `text()` / `markdown()` / `html()` is the block shown under the table.
    """
    if not isinstance(results, Mapping) or not results:
        raise ValueError("stage_table needs a non-empty dict {stage name: EvalResult}")
    types: list[str] = []
    for res in results.values():
        types += [t for t in res.records["qtype"].unique() if t not in types]
    seen = {k for res in results.values() if "knowledge" in res.records for k in res.records["knowledge"].dropna()}
    labels = [k for k in KNOWLEDGE_ORDER if k in seen] + sorted(seen - set(KNOWLEDGE_ORDER))
    rows = {}
    for stage, res in results.items():
        df = res.records
        row = {"EM": df["em"].mean(), "F1": df["f1"].mean(), "searches/question": df["searches"].mean(),
               "format-valid rate": df["format_ok"].astype(float).mean()}
        for t in types:
            row[f"F1 {t}"] = df.loc[df["qtype"] == t, "f1"].mean()  # NaN when this stage saw no such question
        hops = df["hops"]
        if (hops > 1).any() and (hops <= 1).any():
            row["F1 multi-hop"] = df.loc[hops > 1, "f1"].mean()
            # Per-question search judgement: more searches where more hops are needed (Search-R1, R1-Searcher++).
            row["searches multi-hop"] = df.loc[hops > 1, "searches"].mean()
            row["searches single-hop"] = df.loc[hops <= 1, "searches"].mean()
        if "repeated_query" in df:
            row["repeated-query rate"] = df["repeated_query"].astype(float).mean()
        for k in labels:
            row[f"F1 {k}"] = df.loc[df["knowledge"] == k, "f1"].mean() if "knowledge" in df else float("nan")
        for k in labels:
            row[f"searches/question {k}"] = (df.loc[df["knowledge"] == k, "searches"].mean() if "knowledge" in df
                                             else float("nan"))
        rows[stage] = row
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "stage"
    _add_paired_intervals(table, results)
    protocols = stage_protocols(results)
    if protocols.mixed:
        table["protocol"] = [protocols.markers.get(stage, "not recorded") for stage in table.index]
    table.attrs["protocols"] = protocols
    return table


def stage_protocols(results: Mapping[str, EvalResult]) -> ProtocolComparison:
    """The stages' protocols compared: the fields they share, and the ones where they differ."""
    return compare_protocols({stage: res.protocol for stage, res in results.items()})


def paired_change(before: pd.Series, after: pd.Series) -> tuple[float, float, float, int]:
    """(mean change, 95% low, 95% high, questions) from `before` to `after`, two per-question scores indexed by
    question id, over the ids both hold (`searchrl.core.stats.paired_bootstrap`); NaN and 0 questions when they share none."""
    from searchrl.core.stats import paired_bootstrap

    shared = sorted(set(before.index) & set(after.index))
    if not shared:
        return float("nan"), float("nan"), float("nan"), 0
    return (*paired_bootstrap(before.loc[shared].to_numpy(), after.loc[shared].to_numpy()), len(shared))


def _add_paired_intervals(table: pd.DataFrame, results: Mapping[str, EvalResult], metric: str = "f1") -> None:
    """Columns "ΔF1 vs previous", its paired-bootstrap 95% interval and "ΔF1 questions" (how many it pairs), for
    each stage against the stage before it, over the questions both evaluated (the untrained stage may have seen a
    subset); NaN (and 0 questions) when they share none."""
    deltas, lows, highs, paired = [], [], [], []
    previous = None
    for res in results.values():
        values = (float("nan"),) * 3
        n_paired = 0
        if previous is not None:
            a = previous.records.set_index("id")[metric]
            b = res.records.set_index("id")[metric]
            if a.index.is_unique and b.index.is_unique:
                *values, n_paired = paired_change(a, b)
        deltas.append(values[0])
        lows.append(values[1])
        highs.append(values[2])
        paired.append(n_paired)
        previous = res
    label = metric.upper() if metric in ("f1", "em") else metric
    table[f"Δ{label} vs previous"] = deltas
    table[f"Δ{label} 95% low"] = lows
    table[f"Δ{label} 95% high"] = highs
    # How many questions the change is measured on: an untrained stage evaluated on a subset pairs only those.
    table[f"Δ{label} questions"] = paired


# ------------------------------------------------------------------------------------------------ evaluate


def evaluate(
    model,
    tokenizer,
    protocol: SearchProtocol | str,
    retriever,
    rows: Sequence[Mapping],
    *,
    rollout: RolloutConfig | None = None,
    batch_size: int = 16,
    chat: bool = True,
    greedy: bool = True,
    progress: bool = True,
    generator: TurnGenerator | None = None,
    desc: str = "evaluate",
    records_path: str | Path | None = None,
    resume: bool = False,
    corpus_name: str = "",
) -> EvalResult:
    """Roll out the policy on every question (batched, greedy by default) and score each one.

    `protocol` is a `SearchProtocol` or its name; `rollout` the search and token budgets (the run's
    `RunConfig.rollout_config()`; default `RolloutConfig()`), whose temperature and top_p apply when `greedy` is
    False. `generator` replaces the transformers generator (any `TurnGenerator`, e.g. vLLM or a scripted one in
    tests); `model` may then be None. The model is put in eval mode for the rollouts and its previous mode restored.

    `rollout.max_completion_tokens` counts sampled and appended tokens together, so it must leave room for
    `max_searches` observations of `top_k` passages each (a synthetic-world passage is ~150 tokens).

    With `records_path`, each question's record is appended there (JSON lines) as soon as it is scored, so a
    failure keeps what was done; with `resume`, the questions already recorded there are not rolled out again.

    The result's `protocol` records how its numbers were obtained (`searchrl.evaluation.protocol.EvalProtocol`:
    corpus and index fingerprints, retriever, top-k, question set, metrics, prompt, budgets, decoding);
    `corpus_name` names the corpus in it.
    """
    rows = check_rows(rows)
    protocol = get_protocol(protocol)
    # A search that failed must never change a score: whatever the run allows its training rollouts, an evaluation
    # stops at the first retriever outage (its records so far are kept, and `resume` continues from them).
    rollout = dataclasses.replace(rollout or RolloutConfig(), retriever_outage_s=0.0)
    done = _recorded(records_path, rows) if resume else {}
    records: list[dict[str, Any]] = list(done.values())
    sink = None
    if records_path is not None:
        Path(records_path).parent.mkdir(parents=True, exist_ok=True)
        sink = open(records_path, "a" if done else "w", encoding="utf-8")  # noqa: SIM115  (closed below)
    todo = [row for row in rows if str(row.get("id", "")) not in done]

    def running() -> dict:
        scored = pd.DataFrame(records)
        return {"em": f"{scored['em'].mean():.3f}", "f1": f"{scored['f1'].mean():.3f}",
                "searches": f"{scored['searches'].mean():.2f}"}

    start = time.perf_counter()
    try:
        if todo:
            for row, _, (traj,) in rollout_questions(model, tokenizer, protocol, retriever, todo, rollout,
                                                     greedy=greedy, batch_size=batch_size, chat=chat,
                                                     generator=generator, desc=desc, progress=progress,
                                                     postfix=running):
                records.append(score_trajectory(row, traj, completion_text(traj, tokenizer), protocol))
                if sink is not None:
                    sink.write(json.dumps(records[-1], ensure_ascii=False, default=str) + "\n")
                    sink.flush()
    finally:
        if sink is not None:
            sink.close()
    elapsed = time.perf_counter() - start
    order = {str(row.get("id", "")): i for i, row in enumerate(rows)}
    records.sort(key=lambda r: order.get(str(r["id"]), len(order)))
    settings = {
        "protocol": protocol.name,
        "retriever": repr(retriever),
        "model": _model_name(model),
        "n": len(rows),
        "batch_size": batch_size,
        "rollout": rollout.to_dict(),
        "chat": chat,
        "greedy": greedy,
        "seconds": round(elapsed, 2),
        "questions_per_second": round(len(todo) / elapsed, 3) if elapsed > 0 and todo else None,
        "resumed_questions": len(done),
    }
    stamp = EvalProtocol.build(retriever=retriever, rows=rows, rollout=rollout, protocol=protocol,
                               tokenizer=tokenizer, chat=chat, greedy=greedy, corpus=corpus_name)
    return EvalResult(pd.DataFrame(records), settings, stamp)


def _recorded(path: str | Path | None, rows: Sequence[Mapping]) -> dict[str, dict[str, Any]]:
    """Records already written to `path` for questions among `rows` (by id); a torn last line is ignored."""
    if path is None or not Path(path).is_file():
        return {}
    wanted = {str(row.get("id", "")) for row in rows}
    done = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # the line being written when the run died
            continue
        if str(record.get("id")) in wanted:
            done[str(record["id"])] = record
    return done


def _model_name(model) -> str:
    if model is None:
        return "none"
    name = getattr(getattr(model, "config", None), "_name_or_path", "") or ""
    return name or type(model).__name__
