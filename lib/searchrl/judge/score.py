"""Score evaluation records with a judge: adds `judge` (1/0) to each record and returns the mean (ACC_L).

Records are dicts with `question`, `golden_answers` and `prediction` (what `searchrl.evaluation.evaluate` writes per question),
or a DataFrame with those columns (`EvalResult.records`), which gets the judge columns added.
Verdicts already in the cache are not asked again; new ones are written to it batch by batch, so an interrupted run
resumes where it stopped. When an endpoint request fails for good, the replies its batch already got are cached
before the error is raised, so a rerun asks only for the missing ones.
"""

from __future__ import annotations

import math
from collections.abc import MutableMapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from searchrl.core.progress import progress_bar
from searchrl.judge.base import Judge
from searchrl.judge.cache import VerdictCache, verdict_key
from searchrl.judge.endpoint import JudgeEndpointError
from searchrl.judge.setting import make_judge
from searchrl.judge.verdict import Verdict, parse_verdict

JUDGE_FIELD = "judge"


@dataclass(frozen=True)
class JudgeSummary:
    """`mean` is the judge accuracy over all `n` records (empty predictions and unparsed replies count as wrong).
    `asked` went to the judge in this call, `cached` came from the cache, `empty` had no prediction to judge,
    `unparsed` got a reply that said neither yes nor no."""

    judge: str
    mean: float
    n: int
    correct: int
    asked: int
    cached: int
    empty: int
    unparsed: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def score_records(records: Sequence[MutableMapping[str, Any]] | Any, judge: Judge | str, *,
                  cache: VerdictCache | str | Path | None = None, field: str = JUDGE_FIELD,
                  progress: bool = True, desc: str = "LLM judge") -> JudgeSummary:
    """Judge every record in place: `record[field]` = 1/0, `record[field + "_raw"]` = the judge's reply text,
    `record[field + "_parsed"]` = whether that reply held a verdict. `judge` is a Judge or a setting string
    (see `searchrl.judge.setting`); `cache` a VerdictCache, a JSONL path, or None (no reuse across calls).
    A DataFrame gets the three columns instead."""
    if hasattr(records, "columns") and hasattr(records, "to_dict"):  # a DataFrame: judge its rows, add columns
        rows = records.to_dict("records")
        summary = score_records(rows, judge, cache=cache, field=field, progress=progress, desc=desc)
        for column in (field, f"{field}_raw", f"{field}_parsed"):
            records[column] = [row[column] for row in rows]
        return summary
    judge = make_judge(judge)
    if judge is None:
        raise ValueError("score_records needs a judge; the setting given means 'no judge' (none/off)")
    if not isinstance(cache, VerdictCache):
        cache = VerdictCache(cache)
    for i, record in enumerate(records):
        missing = [k for k in ("question", "golden_answers", "prediction") if k not in record]
        if missing:
            raise KeyError(f"record {i} lacks {', '.join(missing)}; judged records need question, golden_answers "
                           "and prediction")

    counts = {"asked": 0, "cached": 0, "empty": 0}
    keys = [verdict_key(judge.name, r["question"], r["golden_answers"], _text(r["prediction"])) for r in records]
    todo: list[int] = []
    for i, record in enumerate(records):
        if not _text(record["prediction"]).strip():
            _write(record, field, 0, "", True)
            counts["empty"] += 1
        elif (hit := cache.get(keys[i])) is not None:
            _write(record, field, hit.correct, hit.raw, hit.parsed)
            counts["cached"] += 1
        else:
            todo.append(i)

    bar = progress_bar(total=len(records), initial=len(records) - len(todo), desc=desc, unit="q", disable=not progress)
    try:
        step = max(1, int(judge.batch_size))
        for start in range(0, len(todo), step):
            chunk = todo[start: start + step]
            rows = [records[i] for i in chunk]
            try:
                verdicts = judge.judge([r["question"] for r in rows], [r["golden_answers"] for r in rows],
                                       [_text(r["prediction"]) for r in rows])
            except JudgeEndpointError as err:
                # Every prediction in `chunk` is non-empty, so the judge asked one chat per row, in order.
                answered = sorted(j for j in err.completed if j < len(chunk))
                _keep(records, cache, judge, field, keys, [chunk[j] for j in answered],
                      [parse_verdict(err.completed[j]) for j in answered])
                raise
            _keep(records, cache, judge, field, keys, chunk, verdicts)
            counts["asked"] += len(chunk)
            bar.update(len(chunk))
            bar.set_postfix(acc=f"{_mean(records, field):.3f}")
    finally:
        bar.close()

    correct = sum(int(r[field]) for r in records)
    return JudgeSummary(judge=judge.name, mean=correct / len(records) if records else math.nan, n=len(records),
                        correct=correct, unparsed=sum(not r[f"{field}_parsed"] for r in records), **counts)


def _keep(records: Sequence[MutableMapping[str, Any]], cache: VerdictCache, judge: Judge, field: str,
          keys: Sequence[str], indices: Sequence[int], verdicts: Sequence[Verdict]) -> None:
    """Write the verdicts of `records[indices]` into those records and the cache."""
    for i, verdict in zip(indices, verdicts):
        _write(records[i], field, verdict.correct, verdict.raw, verdict.parsed)
    cache.put_many([(keys[i], v, {"judge": judge.name, "question": str(records[i]["question"]),
                                  "prediction": _text(records[i]["prediction"])})
                    for i, v in zip(indices, verdicts)])


def _text(prediction: Any) -> str:
    return "" if prediction is None else str(prediction)


def _write(record: MutableMapping[str, Any], field: str, correct: int, raw: str, parsed: bool) -> None:
    record[field], record[f"{field}_raw"], record[f"{field}_parsed"] = int(correct), raw, bool(parsed)


def _mean(records: Sequence[MutableMapping[str, Any]], field: str) -> float:
    judged = [r[field] for r in records if field in r]
    return sum(judged) / len(judged) if judged else math.nan


__all__ = ["JUDGE_FIELD", "JudgeSummary", "score_records"]
