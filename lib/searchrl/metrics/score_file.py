"""Score any JSONL file of predictions with metrics picked by name: ``python -m searchrl.score``.

    python -m searchrl.score traces.jsonl --prediction pred_ans --metric cem:r1_searcher --metric cem

Each row needs the prediction field (a string, or null for "no answer", which scores 0) and a gold field (a
string or a list of strings): ``--gold`` names it, otherwise each row's ``answer`` is used, else its
``golden_answers``. The command prints a short summary and, as its last line, one JSON object:
``{"file": ..., "n": rows, "prediction_field": ..., "missing_predictions": rows with null, "metrics": {name: mean
in [0, 1]}}``, so scripts can read ``tail -n 1``. ``--list-metrics`` prints the metric names (scoring.py explains
how each per-paper variant departs from ours).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from searchrl.core.registry import UnknownNameError
from searchrl.metrics.scoring import METRICS, mean_scores, metric

DEFAULT_METRICS = ("em", "f1", "cem")
DEFAULT_GOLD_FIELDS = ("answer", "golden_answers")

__all__ = ["DEFAULT_METRICS", "ScoreInputError", "main", "read_jsonl", "score_file", "score_rows"]


class ScoreInputError(ValueError):
    """The file or its rows cannot be scored as asked (missing field, wrong type, bad JSON)."""


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, one per non-blank line; errors name the line to fix."""
    path = Path(path)
    if not path.is_file():
        raise ScoreInputError(f"no file {path} (relative paths start at {Path.cwd()})")
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ScoreInputError(f"{path}:{number}: not valid JSON ({err.msg}); give one JSON object a line")
            if not isinstance(row, dict):
                raise ScoreInputError(f"{path}:{number}: a JSON {type(row).__name__}, not an object")
            rows.append(row)
    if not rows:
        raise ScoreInputError(f"{path} has no rows to score")
    return rows


def _gold(row: dict[str, Any], gold_field: str | None, where: str) -> str | list[str]:
    fields = [gold_field] if gold_field else list(DEFAULT_GOLD_FIELDS)
    for field in fields:
        if field in row:
            gold = row[field]
            if isinstance(gold, str) or (isinstance(gold, list) and gold and all(isinstance(g, str) for g in gold)):
                return gold
            raise ScoreInputError(f"{where}: gold field {field!r} holds {gold!r}; it must be a string or a non-empty "
                                  f"list of strings")
    asked = f"field {gold_field!r}" if gold_field else f"fields {' / '.join(DEFAULT_GOLD_FIELDS)}"
    raise ScoreInputError(f"{where}: no gold {asked}; this row has {sorted(row)} (name the gold field with --gold)")


def _prediction(row: dict[str, Any], field: str, where: str) -> str | None:
    if field not in row:
        raise ScoreInputError(f"{where}: no prediction field {field!r}; this row has {sorted(row)} "
                              f"(name the prediction field with --prediction)")
    value = row[field]
    if value is not None and not isinstance(value, str):
        raise ScoreInputError(f"{where}: prediction field {field!r} holds a {type(value).__name__}, not a string")
    return value


def score_rows(rows: Sequence[dict[str, Any]], prediction_field: str, metrics: Sequence[str] = DEFAULT_METRICS,
               gold_field: str | None = None, *, source: str = "row") -> dict[str, Any]:
    """The summary object for ``rows``: n, missing_predictions and each metric's mean over all rows.

    A null prediction counts as a wrong answer (0), as the papers count a generation that never answered.
    """
    if not metrics:
        raise ScoreInputError("no metrics asked for; give at least one --metric")
    for name in metrics:
        metric(name)  # unknown names fail here, before any row is read
    predictions, golds = [], []
    for index, row in enumerate(rows):
        where = f"{source} {index + 1}"
        predictions.append(_prediction(row, prediction_field, where))
        golds.append(_gold(row, gold_field, where))
    return {
        "n": len(predictions),
        "prediction_field": prediction_field,
        "missing_predictions": sum(p is None for p in predictions),
        "metrics": mean_scores(predictions, golds, metrics),
    }


def score_file(path: str | Path, prediction_field: str, metrics: Sequence[str] = DEFAULT_METRICS,
               gold_field: str | None = None) -> dict[str, Any]:
    """score_rows over a JSONL file, with the file's path in the result and in every error."""
    result = score_rows(read_jsonl(path), prediction_field, metrics, gold_field, source=f"{path}, row")
    return {"file": str(path), **result}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m searchrl.score",
        description="Score a JSONL file of predictions against its golden answers.",
        epilog="The last line printed is a JSON object with n and each metric's mean in [0, 1].")
    parser.add_argument("file", nargs="?", help="JSONL file, one prediction per line")
    parser.add_argument("--prediction", metavar="FIELD", help="the field holding each row's predicted answer")
    parser.add_argument("--metric", metavar="NAME", action="append", dest="metrics",
                        help=f"a metric name (repeatable; default: {', '.join(DEFAULT_METRICS)}); "
                             f"see --list-metrics")
    parser.add_argument("--gold", metavar="FIELD",
                        help=f"the field holding the golden answer(s) (default: {' or '.join(DEFAULT_GOLD_FIELDS)})")
    parser.add_argument("--list-metrics", action="store_true", help="print the known metric names and exit")
    return parser


def _summary(result: dict[str, Any]) -> str:
    width = max(len(name) for name in result["metrics"])
    lines = [f"{result['file']}: {result['n']} rows, prediction field {result['prediction_field']!r}"]
    if result["missing_predictions"]:
        lines.append(f"  {result['missing_predictions']} rows have no prediction (null): scored 0")
    lines += [f"  {name.ljust(width)}  {100 * value:5.1f}" for name, value in result["metrics"].items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status (0, or 2 with the reason on stderr)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.list_metrics:
        print(METRICS.describe())
        return 0
    if not args.file or not args.prediction:
        parser.print_usage(sys.stderr)
        print("error: give the FILE and --prediction FIELD (or --list-metrics)", file=sys.stderr)
        return 2
    try:
        result = score_file(args.file, args.prediction, args.metrics or DEFAULT_METRICS, args.gold)
    except (ValueError, UnknownNameError) as err:  # ScoreInputError, unknown metric, bad golden answers
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(_summary(result))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
