"""`searchrl data prepare NAME`: turn what `fetch` wrote into <data>/<name>/raw/ into the layout the loaders read.

Each catalogue entry names one step (`DataEntry.prepare`). Steps write to a temporary name and rename when done,
so an interrupted prepare leaves no half-written file where a run would read it.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from searchrl.core.progress import progress_bar
from searchrl.data.catalog import (
    DataEntry,
    MissingDataError,
    data_dirs,
    entry,
    entry_files,
    fetch_command,
    write_dir,
)
from searchrl.data.loaders import load_qa, pooled_corpus

__all__ = ["PASSAGE_WORDS", "STEPS", "kilt_passages", "prepare", "search_r1_rows"]

PASSAGE_WORDS = 100  # KILT cut into passages of this many words, as R1-Searcher's corpus
_CHUNK = 1 << 20


def prepare(name: str, data_dir: str | Path | None = None) -> dict[str, Path]:
    """Run `name`'s prepare step in `data_dir` (default: `write_dir()`); returns its parts -> the files written."""
    e = entry(name)
    root = Path(data_dir).expanduser() if data_dir is not None else write_dir()
    if not e.prepare:
        raise ValueError(f"{name} needs no prepare step: its fetched files are read as they are")
    step = STEPS.get(e.prepare)
    if step is None:
        raise NotImplementedError(f"prepare {name}: the {e.prepare!r} step is not yet supported")
    raw = root / name / "raw"
    if e.files and not raw.is_dir():
        raise MissingDataError(f"{name}: nothing fetched in {raw}; run `searchrl data fetch {name}` first")
    if e.manual and not raw.is_dir() and not e.needs:
        raise MissingDataError(f"{name}: {raw} is missing; {e.manual}")
    step(e, raw, root)
    written = entry_files(name, [root])
    present = {part: path for part, path in written.items() if path is not None}
    if not present:
        raise RuntimeError(f"prepare {name} wrote nothing; expected {e.layout}")
    return present


def _target(e: DataEntry, root: Path, part: str) -> Path:
    path = root / e.layout[part][0]
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _commit(tmp: Path, final: Path) -> None:
    tmp.replace(final)


def _move(e: DataEntry, raw: Path, root: Path) -> None:
    """Each fetched file is one split already in a loader's format: move it into place."""
    for part in e.layout:
        source = raw / f"{part}.jsonl"
        if not source.is_file():
            raise MissingDataError(f"{e.name}: {source} is missing; run `searchrl data fetch {e.name}`")
        load_qa(source, limit=1)  # a readable question file, or a clear error naming its line
        shutil.copyfile(source, _target(e, root, part))


def _json_to_jsonl(e: DataEntry, raw: Path, root: Path) -> None:
    """Files holding one JSON array (HotpotQA's releases) rewritten one record a line, per fetched split."""
    for f in e.files:
        part = Path(f.path).stem
        records = json.loads((raw / f.path).read_text(encoding="utf-8"))
        _write_jsonl(records, _target(e, root, part), f"{e.name} {part}")


def _gunzip(e: DataEntry, raw: Path, root: Path) -> None:
    (source,) = [raw / f.path for f in e.files]
    out = _target(e, root, "corpus")
    tmp = out.with_suffix(".partial")
    with gzip.open(source, "rb") as src, tmp.open("wb") as dst, progress_bar(
            unit="B", unit_scale=True, desc=f"gunzip {source.name}") as bar:
        while block := src.read(_CHUNK):
            dst.write(block)
            bar.update(len(block))
    _commit(tmp, out)


def _concatenate(e: DataEntry, raw: Path, root: Path) -> None:
    """Hub files split in parts (part_aa, part_ab, ...) joined in order into the one index file."""
    out = _target(e, root, "index")
    tmp = out.with_suffix(".partial")
    parts = [raw / f.path for f in e.files]
    with tmp.open("wb") as dst, progress_bar(total=sum(p.stat().st_size for p in parts), unit="B",
                                             unit_scale=True, desc=f"join {out.name}") as bar:
        for part in parts:
            with part.open("rb") as src:
                while block := src.read(_CHUNK):
                    dst.write(block)
                    bar.update(len(block))
    _commit(tmp, out)


def _write_jsonl(records: Iterable[dict], out: Path, desc: str) -> int:
    tmp = out.with_suffix(".partial")
    count = 0
    with tmp.open("w", encoding="utf-8") as f:
        for record in progress_bar(records, desc=desc, unit=" rows"):
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    _commit(tmp, out)
    return count


def search_r1_rows(records: Iterable[dict]) -> Iterator[dict]:
    """FlashRAG-format rows (id, question, golden_answers, data_source) from Search-R1's parquet rows, which keep
    the source dataset's columns beside their prompt and `reward_model.ground_truth.target` (the column layout is
    read from Search-R1's data scripts, not from the released files: unverified)."""
    for i, r in enumerate(records):
        question = r.get("question")
        if not question:
            prompt = r.get("prompt")
            text = prompt[0]["content"] if isinstance(prompt, (list, tuple)) and prompt else str(prompt or "")
            question = text.rsplit("Question:", 1)[-1].strip()
        answers = r.get("golden_answers")
        if answers is None:
            answers = ((r.get("reward_model") or {}).get("ground_truth") or {}).get("target")
        answers = [str(a) for a in (list(answers) if answers is not None else [])]
        if question and answers:
            yield {"id": str(r.get("id", i)), "question": str(question).strip(), "golden_answers": answers,
                   "metadata": {"data_source": r.get("data_source", "")}}


def _search_r1_parquet(e: DataEntry, raw: Path, root: Path) -> None:
    import pandas as pd  # imported here: the data layer's other readers need no pandas

    for part in e.layout:
        frame = pd.read_parquet(raw / f"{part}.parquet")
        _write_jsonl(search_r1_rows(frame.to_dict("records")), _target(e, root, part), f"{e.name} {part}")


def kilt_passages(articles: Iterable[dict], words: int = PASSAGE_WORDS) -> Iterator[dict]:
    """100-word passages with titles from KILT knowledge-source articles ({"_id"/"wikipedia_id", "wikipedia_title",
    "text": [paragraphs]}): the article's words after its first paragraph (the title line), cut every `words`."""
    for article in articles:
        title = str(article.get("wikipedia_title", "")).strip()
        paragraphs = list(article.get("text") or [])
        body = paragraphs[1:] if paragraphs and paragraphs[0].strip() == title else paragraphs
        tokens = " ".join(p.strip() for p in body if not p.startswith("Section::::")).split()
        article_id = str(article.get("wikipedia_id", article.get("_id", "")))
        for n, start in enumerate(range(0, len(tokens), words)):
            yield {"id": f"{article_id}-{n}", "title": title, "text": " ".join(tokens[start:start + words])}


def _json_lines(path: Path) -> Iterator[dict]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def _kilt(e: DataEntry, raw: Path, root: Path) -> None:
    (source,) = [raw / f.path for f in e.files]
    _write_jsonl(kilt_passages(_json_lines(source)), _target(e, root, "corpus"), "KILT passages")


def _docs_jsonl(docs) -> Iterator[dict]:
    return ({"id": d.id, "title": d.title, "text": d.text} for d in docs)


def _pool_hotpotqa(e: DataEntry, raw: Path, root: Path) -> None:
    """Pool the context paragraphs of every present split of each entry this one needs."""
    rows = []
    for needed in e.needs:
        files = [p for p in entry_files(needed, [root, *data_dirs()]).values() if p is not None]
        if not files:
            raise MissingDataError(f"{e.name} is built from {needed}, which is absent: run `{fetch_command(needed)}`")
        for path in files:
            rows += load_qa(path)
    _write_jsonl(_docs_jsonl(pooled_corpus(rows)), _target(e, root, "corpus"), f"{e.name} passages")


def _pool_raw(e: DataEntry, raw: Path, root: Path) -> None:
    """Pool the context paragraphs of raw multi-hop files (2WikiMultiHopQA's train.json, dev.json)."""
    rows = [row for path in sorted(raw.glob("*.json*")) for row in load_qa(path)]
    if not rows:
        raise MissingDataError(f"{e.name}: no .json files in {raw}; {e.manual}")
    _write_jsonl(_docs_jsonl(pooled_corpus(rows)), _target(e, root, "corpus"), f"{e.name} passages")


def ircot_rows(records: Iterable[dict]) -> Iterator[dict]:
    """FlashRAG-format rows from IRCoT's processed files (question_id, question_text, answers_objects[].spans)."""
    for r in records:
        answers = [str(s) for a in r.get("answers_objects", []) for s in a.get("spans", [])]
        if r.get("question_text") and answers:
            yield {"id": str(r.get("question_id", "")), "question": r["question_text"], "golden_answers": answers}


def _ircot(e: DataEntry, raw: Path, root: Path) -> None:
    for part in e.layout:
        source = raw / f"{part}.jsonl"
        if not source.is_file():
            raise MissingDataError(f"{e.name}: {source} is missing; {e.manual}")
        _write_jsonl(ircot_rows(_json_lines(source)), _target(e, root, part), f"{e.name} {part}")


STEPS: dict[str, Callable[[DataEntry, Path, Path], None]] = {
    "move": _move,
    "json_to_jsonl": _json_to_jsonl,
    "gunzip": _gunzip,
    "concatenate": _concatenate,
    "search_r1_parquet": _search_r1_parquet,
    "kilt_passages": _kilt,
    "pool_hotpotqa": _pool_hotpotqa,
    "pool_raw": _pool_raw,
    "ircot": _ircot,
}
