"""Verdicts kept on disk so that a re-run (or a resumed evaluation) does not ask the judge again.

One JSON line per verdict, appended after every batch. The key hashes the judge's name, the prompt version, the
question, the golden answers and the prediction, so a different judge or prompt never reuses another's verdict. The
raw reply is stored and parsed again on reading, so a parser fix applies to cached verdicts too. A line cut short by
a crash is skipped.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from searchrl.judge.verdict import PROMPT_VERSION, Verdict, parse_verdict

logger = logging.getLogger(__name__)


def verdict_key(judge_name: str, question: str, golden_answers: str | Sequence[str], prediction: str) -> str:
    golden = [golden_answers] if isinstance(golden_answers, str) else [str(a) for a in golden_answers]
    text = json.dumps([judge_name, PROMPT_VERSION, str(question).strip(), golden, str(prediction).strip()],
                      ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class VerdictCache:
    """An append-only JSONL file of verdicts (`path`), read once into memory; `path=None` keeps it in memory only."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._raw: dict[str, str] = {}
        self._lock = threading.Lock()
        self.skipped_lines = 0
        self._torn_tail = False  # the file ends mid-line (a crash while writing): start the next write on a new line
        if self.path is not None and self.path.exists():
            self._read()

    def _read(self) -> None:
        text = self.path.read_text(encoding="utf-8", errors="replace")
        self._torn_tail = bool(text) and not text.endswith("\n")
        for line in text.split("\n"):  # not splitlines(): replies may hold U+2028, which JSON leaves as is
            if line.strip():
                try:
                    entry = json.loads(line)
                    self._raw[entry["key"]] = str(entry["raw"])
                except (ValueError, KeyError, TypeError):
                    self.skipped_lines += 1
        if self.skipped_lines:
            logger.warning("judge cache %s: skipped %d unreadable line(s)", self.path, self.skipped_lines)

    def get(self, key: str) -> Verdict | None:
        raw = self._raw.get(key)
        return None if raw is None else parse_verdict(raw)

    def put_many(self, entries: Sequence[tuple[str, Verdict, dict]]) -> None:
        """Store `(key, verdict, context)` triples; `context` (question, prediction, judge) is kept for readers."""
        with self._lock:
            lines = []
            for key, verdict, context in entries:
                self._raw[key] = verdict.raw
                lines.append(json.dumps({"key": key, "raw": verdict.raw, "correct": verdict.correct, **context},
                                        ensure_ascii=False))
            if self.path is not None and lines:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as handle:
                    handle.write(("\n" if self._torn_tail else "") + "\n".join(lines) + "\n")
                    self._torn_tail = False
                    handle.flush()

    def __len__(self) -> int:
        return len(self._raw)

    def __contains__(self, key: object) -> bool:
        return key in self._raw


__all__ = ["VerdictCache", "verdict_key"]
