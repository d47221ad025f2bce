"""Evaluation: the training rollout engine, run greedily over a question set, scored per question.

    result = evaluate(model, tokenizer, "search_r1", retriever, world.questions("test", limit=48))
    result.summary()            # {"em": ..., "f1": ..., "searches": ..., "n": 48, ...}
    result.by_type()            # one row per question type
    result.by_knowledge()       # one row per knowledge label (internal / external / mixed), when the rows have them
    stage_table({"untrained": before, "after cold start": after})   # the paper-style table

Evaluation uses the same `SearchRollout` as training, so what is measured is exactly what the policy does during
RL (same prompts, same stop strings, same observation text), only with greedy decoding.
`render_trajectory` shows one trajectory as HTML with the retrieved spans boxed, so a reader can see at a glance
which tokens the model wrote and which the search engine appended.
"""

from __future__ import annotations

import dataclasses
import html
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from searchrl.core.files import atomic_write_text
from searchrl.core.progress import progress_bar
from searchrl.data.schema import check_rows
from searchrl.metrics.answers import cover_exact_match, exact_match, f1_score
from searchrl.protocols import get_protocol
from searchrl.protocols.base import SearchProtocol
from searchrl.rewards.search_count import has_repeated_query, support_recall
from searchrl.rollout import HFTurnGenerator, RolloutConfig, SearchRollout, Trajectory, TurnGenerator

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
    """Per-question records of one evaluation, with the settings that produced them."""

    records: pd.DataFrame
    config: dict[str, Any] = field(default_factory=dict)

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
        """Write summary, per-type table and config as one JSON file (and the per-knowledge table, when the
        questions carry knowledge labels)."""
        payload = {
            "summary": self.summary(),
            "by_type": json.loads(self.by_type().to_json(orient="index")),
            "config": self.config,
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
    return table


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


def rollout_questions(
    model,
    tokenizer,
    protocol: SearchProtocol,
    retriever,
    rows: Sequence[Mapping],
    rollout: RolloutConfig,
    *,
    greedy: bool,
    batch_size: int,
    chat: bool = True,
    repeats: int = 1,
    generator: TurnGenerator | None = None,
    desc: str = "rollouts",
    progress: bool = True,
    postfix: Callable[[], dict] | None = None,
) -> Iterator[tuple[Mapping, str, list[Trajectory]]]:
    """Roll out every question `repeats` times with the training engine; yields (row, prompt, trajectories).

    The loop that evaluation and rejection sampling share: prompts built by the protocol, batches of `batch_size`
    sequences (whole questions), the model in eval mode meanwhile (its mode restored after), and a progress bar
    whose postfix `postfix()` gives after each batch (running scores, say).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if generator is None:
        if model is None:
            raise ValueError("rollouts need a model (or a `generator` that produces the turns)")
        generator = HFTurnGenerator.from_rollout(model, tokenizer, protocol.stop_strings, rollout, greedy=greedy)
    engine = SearchRollout(protocol, retriever, tokenizer, generator, rollout)
    was_training = getattr(model, "training", None)
    if model is not None:
        model.eval()
    per_batch = max(1, batch_size // repeats)  # questions per batch, each repeated
    bar = progress_bar(total=len(rows), desc=desc, unit="question", disable=not progress)
    try:
        for lo in range(0, len(rows), per_batch):
            batch = rows[lo: lo + per_batch]
            prompts = [protocol.build_prompt(r["question"], tokenizer, chat=chat) for r in batch]
            prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
            trajs = engine.run([ids for ids in prompt_ids for _ in range(repeats)])
            for q, (row, prompt) in enumerate(zip(batch, prompts)):
                yield row, prompt, trajs[q * repeats: (q + 1) * repeats]
            bar.update(len(batch))
            if postfix is not None:
                bar.set_postfix(postfix())
    finally:
        bar.close()
        if model is not None and was_training is not None:
            model.train(was_training)


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
    return EvalResult(pd.DataFrame(records), settings)


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


# ------------------------------------------------------------------------------------------------ rendering


def trajectory_pieces(text: str, protocol: SearchProtocol) -> list[tuple[str, str]]:
    """Split a completion into (kind, text) pieces: "retrieved", "query", "internal", "evidence", "answer" or
    "text" ("internal": an internal-answer span of a protocol that has them, R1-Searcher++).

    Retrieved blocks run from the observation open tag to its close tag (or to the end when never closed), like
    the parsers read them; queries and answers are found only in the model's own text, tags included.
    """
    pieces: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        start = text.find(protocol.obs_open, pos)
        if start < 0:
            pieces += _model_pieces(text[pos:], protocol)
            break
        pieces += _model_pieces(text[pos:start], protocol)
        end = text.find(protocol.obs_close, start + len(protocol.obs_open))
        end = len(text) if end < 0 else end + len(protocol.obs_close)
        pieces.append(("retrieved", text[start:end]))
        pos = end
    return [(kind, piece) for kind, piece in pieces if piece]


def _model_pieces(text: str, protocol: SearchProtocol) -> list[tuple[str, str]]:
    """Queries, internal-answer spans (protocols with `internal_open`, R1-Searcher++), evidence boxes (protocols
    with `evidence_open`, R-Search) and answers in a stretch of model text; the rest is plain text."""
    spans = {"query": (protocol.query_open, protocol.query_close),
             "internal": (getattr(protocol, "internal_open", ""), getattr(protocol, "internal_close", "")),
             "evidence": (getattr(protocol, "evidence_open", ""), getattr(protocol, "evidence_close", "")),
             "answer": (protocol.answer_open, protocol.answer_close)}
    pieces: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        candidates = [(text.find(tags[0], pos), kind, tags[0]) for kind, tags in spans.items() if tags[0]]
        candidates = [c for c in candidates if c[0] >= 0]
        if not candidates:
            break
        start, kind, tag = min(candidates)
        end = _span_end(text, start, tag, spans[kind][1])
        if end is None:  # an unclosed tag: leave the rest as plain text
            break
        pieces += [("text", text[pos:start]), (kind, text[start:end])]
        pos = end
    pieces.append(("text", text[pos:]))
    return pieces


def _span_end(text: str, start: int, open_tag: str, close_tag: str) -> int | None:
    """End offset of the span opened at `start`; an opening tag ending in "{" (\\boxed{) closes at its balancing "}"."""
    if open_tag.endswith("{") and close_tag == "}":
        depth = 0
        for i in range(start + len(open_tag) - 1, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                return i + 1
        return None
    end = text.find(close_tag, start + len(open_tag))
    return None if end < 0 else end + len(close_tag)


def _unpack(record_or_text, question: str | None) -> tuple[str, dict[str, Any]]:
    if isinstance(record_or_text, str):
        return record_or_text, {"question": question} if question else {}
    if isinstance(record_or_text, pd.Series):
        record_or_text = record_or_text.to_dict()
    if not isinstance(record_or_text, Mapping) or "completion" not in record_or_text:
        raise TypeError("render a completion string or an evaluation record (a row of EvalResult.records with a "
                        f"'completion' column), got {type(record_or_text).__name__}")
    info = dict(record_or_text)
    if question:
        info["question"] = question
    return str(info["completion"]), info


_STYLES = {
    "retrieved": "display:block;background:#ececec;color:#555;border:1px solid #bdbdbd;border-radius:4px;"
                 "padding:4px 6px;margin:4px 0;",
    "query": "background:#cfe3ff;border-radius:3px;padding:0 2px;",
    "answer": "background:#c9f2c9;border-radius:3px;padding:0 2px;font-weight:bold;",
    "evidence": "display:block;background:#fff3cd;border:1px solid #e0b84c;border-radius:4px;padding:4px 6px;"
                "margin:4px 0;",
    "internal": "display:block;background:#efe6fb;border:1px solid #a98bd6;border-radius:4px;padding:4px 6px;"
                "margin:4px 0;",
}


def render_trajectory(record_or_text, protocol: SearchProtocol | str, question: str | None = None) -> str:
    """HTML for one trajectory: retrieved blocks in a grey box labelled "retrieved", queries blue, internal-answer
    spans (R1-Searcher++) in a violet box labelled "internal (from memory)", the evidence box (R-Search) in an amber
    box labelled "evidence", answer green.

    Accepts a completion string or an evaluation record (dict or DataFrame row); a record adds a header with the
    question, golden answers, prediction and scores. All text is HTML-escaped.
    """
    protocol = get_protocol(protocol)
    text, info = _unpack(record_or_text, question)
    parts = [('<div class="searchrl-trajectory" style="font-family:monospace;white-space:pre-wrap;'
              'line-height:1.4;border:1px solid #ddd;padding:8px;">')]
    parts.append(_header_html(info))
    for kind, piece in trajectory_pieces(text, protocol):
        body = html.escape(piece)
        if kind == "retrieved":
            parts.append(f'<span class="retrieved" title="retrieved: appended by the search engine, not trained" '
                         f'style="{_STYLES[kind]}"><small style="color:#888;font-weight:bold;">retrieved</small>\n'
                         f"{body}</span>")
        elif kind == "evidence":
            parts.append(f'<span class="evidence" title="evidence: written by the policy, trained, and judged by '
                         f'the evidence reward" style="{_STYLES[kind]}"><small style="color:#8a6d1a;'
                         f'font-weight:bold;">evidence</small>\n{body}</span>')
        elif kind == "internal":
            parts.append(f'<span class="internal" title="internal: answered from the model\'s own knowledge, no '
                         f'search" style="{_STYLES[kind]}"><small style="color:#6a4c9c;font-weight:bold;">internal '
                         f'(from memory)</small>\n{body}</span>')
        elif kind in _STYLES:
            parts.append(f'<mark class="{kind}" style="{_STYLES[kind]}">{body}</mark>')
        else:
            parts.append(body)
    parts.append("</div>")
    return "".join(parts)


def _header_html(info: Mapping[str, Any]) -> str:
    lines = []
    if info.get("question"):
        lines.append(f"<b>Question:</b> {html.escape(str(info['question']))}")
    if info.get("golden_answers") is not None:
        lines.append(f"<b>Gold:</b> {html.escape(' | '.join(map(str, info['golden_answers'])))}")
    if "prediction" in info:
        scores = ", ".join(f"{k}={float(info[k]):.2f}" for k in ("em", "f1") if k in info)
        lines.append(f"<b>Prediction:</b> {html.escape(str(info['prediction']))}"
                     + (f" ({html.escape(scores)})" if scores else ""))
    if "reward" in info:  # a training rollout (searchrl.trainer.levers.rollout_log): what it earned within its group
        shown = [f"reward={float(info['reward']):.2f}"]
        if info.get("advantage") is not None:
            shown.append(f"advantage={float(info['advantage']):.2f}")
        if info.get("searches") is not None:
            shown.append(f"searches={info['searches']}")
        lines.append(f"<b>Scored:</b> {html.escape(', '.join(shown))}")
    if not lines:
        return ""
    return '<div class="header" style="margin-bottom:6px;">' + "<br>".join(lines) + "</div>"


def render_trajectory_text(record_or_text, protocol: SearchProtocol | str, question: str | None = None) -> str:
    """Plain-text rendering for terminals: each retrieved block between [RETRIEVED] and [/RETRIEVED], its lines
    prefixed with "░ ", and the query, internal-answer, evidence and answer spans wrapped in »...«."""
    protocol = get_protocol(protocol)
    text, info = _unpack(record_or_text, question)
    out = []
    if info.get("question"):
        out.append(f"Question: {info['question']}\n")
    if info.get("golden_answers") is not None:
        out.append(f"Gold: {' | '.join(map(str, info['golden_answers']))}\n")
    if "prediction" in info:
        out.append(f"Prediction: {info['prediction']}\n")
    if out:
        out.append("-" * 40 + "\n")
    for kind, piece in trajectory_pieces(text, protocol):
        if kind == "retrieved":
            body = "\n".join("░ " + line for line in piece.strip("\n").splitlines())
            lead = "" if not out or out[-1].endswith("\n") else "\n"
            out.append(f"{lead}[RETRIEVED]\n{body}\n[/RETRIEVED]")
        elif kind in ("query", "internal", "evidence", "answer"):
            out.append(f"»{piece}«")
        else:
            out.append(piece)
    return "".join(out)


__all__ = [
    "EvalResult",
    "check_rows",
    "completion_text",
    "evaluate",
    "render_trajectory",
    "render_trajectory_text",
    "rollout_questions",
    "score_trajectory",
    "stage_table",
    "trajectory_pieces",
]
