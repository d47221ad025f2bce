"""Loaders for real QA data and passage corpora, in the formats the papers' code releases use.

Question files (`load_qa`), detected from their fields:

| format      | fields                                                               | example                       |
|-------------|----------------------------------------------------------------------|-------------------------------|
| flashrag    | id, question, golden_answers (list)                                  | FlashRAG jsonl (nq_test.jsonl) |
| hotpotqa    | id, question, answer, type, level, supporting_facts, context         | HotpotQA distractor rows      |
| nq_open     | question, answer (list)                                              | NQ-open jsonl                 |
| r1_searcher | question, answer (string), optional idx                              | R1-Searcher train/eval sets   |
| csv         | Question, Answer columns (any case)                                  | Bamboogle test.csv            |

Corpora (`load_corpus`): jsonl with id/title/text or FlashRAG's `contents` ('"Title"\\ntext'), or a tsv/csv with
a header naming id, text and title (DPR's psgs_w100.tsv). `pooled_corpus` builds a corpus from HotpotQA context
paragraphs, `corpus_from_traces` from the passages inside R1-Searcher trajectories. A corpus too big to hold as
Python objects (wiki-18's 21M passages) is opened instead with `searchrl.data.corpus_file.CorpusFile`, which reads
each passage from the file by its byte offset.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from searchrl.data.schema import Doc, QARow, make_row

QA_FORMATS = ("flashrag", "hotpotqa", "nq_open", "r1_searcher", "csv")
DATA_ENV_VAR = "SEARCHRL_DATA"
# Fields that hold whole trajectories or sampled predictions: large and not part of the question.
_BULKY_FIELDS = ("gen_text_store", "pred_anses")
_PROGRESS_BYTES = 50_000_000  # show a progress bar when reading files larger than this


# -- questions ----------------------------------------------------------------------------------------------


def load_qa(path: str | Path, *, limit: int | None = None) -> list[QARow]:
    """Read a question file, detecting its format from the fields of its first record (see the module docs).

    Every row gets metadata `format` and `source` (the file name); HotpotQA rows keep `type`, `level`,
    `supporting_facts` (a list of [title, sentence index]) and `context` (a list of {"title", "sentences"}).
    Raises FileNotFoundError for a missing file and ValueError, naming the file and line, for bad content.
    """
    path = _existing(path)
    records = _csv_records(path) if path.suffix.lower() in (".csv", ".tsv") else _json_records(path)
    rows: list[QARow] = []
    fmt = None
    for line, record in records:
        if limit is not None and len(rows) >= limit:
            break
        if fmt is None:
            fmt = _detect_qa_format(record, path, line)
        rows.append(_CONVERTERS[fmt](record, path, line))
    if not rows and limit != 0:
        raise ValueError(f"{path}: no questions in the file")
    return rows


def _detect_qa_format(record: dict, path: Path, line: int) -> str:
    keys = {k.lower() for k in record}
    if "question" in keys and "golden_answers" in keys:
        return "flashrag"
    if {"question", "answer", "context", "supporting_facts"} <= keys:
        return "hotpotqa"
    if "question" in record and "answer" in record:
        return "nq_open" if isinstance(record["answer"], list) else "r1_searcher"
    if "question" in keys and "answer" in keys:  # only the capitalised spelling: a CSV header like Bamboogle's
        return "csv"
    raise ValueError(
        f"{path}, line {line}: unknown question format (fields: {', '.join(sorted(record)) or 'none'}). "
        f"Known formats: flashrag (id, question, golden_answers), hotpotqa (id, question, answer, "
        f"supporting_facts, context), nq_open (question, answer list), r1_searcher (question, answer, idx), "
        f"csv (Question, Answer)."
    )


def _question(record: dict, path: Path, line: int, key: str = "question") -> str:
    value = _field(record, key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{path}, line {line}: the row has no question (expected a non-empty '{key}' field)")
    return value


def _answers(value: Any, path: Path, line: int, key: str) -> list[str]:
    answers = value if isinstance(value, list) else [value]
    answers = [str(a) for a in answers if a is not None and str(a).strip()]
    if not answers:
        raise ValueError(f"{path}, line {line}: the row has no answer (expected a non-empty '{key}' field)")
    return answers


def _field(record: dict, key: str) -> Any:
    """`record[key]`, matching the key case-insensitively (CSV headers vary: Question / question)."""
    if key in record:
        return record[key]
    for k, v in record.items():
        if k.lower() == key:
            return v
    return None


def _from_flashrag(record: dict, path: Path, line: int) -> QARow:
    question = _question(record, path, line)
    answers = _answers(record.get("golden_answers"), path, line, "golden_answers")
    extra = record.get("metadata") if isinstance(record.get("metadata"), dict) else {}
    return make_row(str(record.get("id", f"{path.stem}-{line}")), question, answers,
                    **{**extra, "format": "flashrag", "source": path.name})


def _from_r1_searcher(record: dict, path: Path, line: int) -> QARow:
    question = _question(record, path, line)
    answers = _answers(record.get("answer"), path, line, "answer")
    row_id = str(record["idx"]) if "idx" in record else f"{path.stem}-{line}"
    extra = {k: v for k, v in record.items() if k not in ("question", "answer", *_BULKY_FIELDS)}
    return make_row(row_id, question, answers, **{**extra, "format": "r1_searcher", "source": path.name})


def _from_nq_open(record: dict, path: Path, line: int) -> QARow:
    question = _question(record, path, line)
    answers = _answers(record.get("answer"), path, line, "answer")
    extra = {k: v for k, v in record.items() if k not in ("question", "answer")}
    return make_row(f"{path.stem}-{line}", question, answers, **{**extra, "format": "nq_open", "source": path.name})


def _from_csv(record: dict, path: Path, line: int) -> QARow:
    question = _question(record, path, line)
    answers = _answers(_field(record, "answer"), path, line, "Answer")
    extra = {k: v for k, v in record.items() if k.lower() not in ("question", "answer")}
    return make_row(f"{path.stem}-{line}", question, answers, **{**extra, "format": "csv", "source": path.name})


def _from_hotpotqa(record: dict, path: Path, line: int) -> QARow:
    question = _question(record, path, line)
    answers = _answers(record.get("answer"), path, line, "answer")
    try:
        context = _hotpot_context(_literal(record["context"]))
        supporting = _hotpot_supporting(_literal(record["supporting_facts"]))
    except (ValueError, SyntaxError, TypeError, KeyError) as err:
        raise ValueError(f"{path}, line {line}: unreadable HotpotQA context or supporting_facts ({err})") from None
    row_id = str(record.get("id", record.get("_id", f"{path.stem}-{line}")))
    return make_row(row_id, question, answers, type=record.get("type"), level=record.get("level"), hops=2,
                    supporting_facts=supporting, context=context, format="hotpotqa", source=path.name)


def _literal(value: Any) -> Any:
    """HotpotQA copies store context and supporting facts as JSON values or as Python-literal strings."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return ast.literal_eval(value)


def _hotpot_context(value: Any) -> list[dict[str, Any]]:
    """Paragraphs as [{"title", "sentences"}], from the columnar form ({"title": [...], "sentences": [[...]]})
    of the Hugging Face copy or the original list of [title, sentences] pairs."""
    if isinstance(value, dict):
        return [{"title": t, "sentences": list(s)} for t, s in zip(value["title"], value["sentences"], strict=True)]
    return [{"title": t, "sentences": list(s)} for t, s in value]


def _hotpot_supporting(value: Any) -> list[list[Any]]:
    """Supporting facts as [[title, sentence index], ...] from either HotpotQA layout."""
    if isinstance(value, dict):
        return [[t, int(i)] for t, i in zip(value["title"], value["sent_id"], strict=True)]
    return [[t, int(i)] for t, i in value]


_CONVERTERS = {
    "flashrag": _from_flashrag,
    "hotpotqa": _from_hotpotqa,
    "nq_open": _from_nq_open,
    "r1_searcher": _from_r1_searcher,
    "csv": _from_csv,
}


# -- corpora ------------------------------------------------------------------------------------------------


def load_corpus(path: str | Path, *, limit: int | None = None) -> list[Doc]:
    """Read passages from jsonl (id, title, text; or FlashRAG's id, contents) or tsv/csv (header: id, text, title).

    A missing id becomes the passage's line number. FlashRAG `contents` hold the title on the first line, in
    quotes. Raises FileNotFoundError for a missing file, ValueError (file and line) for bad rows, and
    ValueError for a file without passages.
    """
    path = _existing(path)
    tabular = path.suffix.lower() in (".tsv", ".csv")
    records = _csv_records(path) if tabular else _json_records(path)
    docs: list[Doc] = []
    for line, record in records:
        if limit is not None and len(docs) >= limit:
            break
        docs.append(doc_from_record(record, path, line))
    if not docs:
        raise ValueError(f"{path}: the corpus holds no passages")
    return docs


def doc_from_record(record: dict, path: Path, line: int) -> Doc:
    """One passage from one corpus record (id, title, text; or FlashRAG's id, contents); `line` names the record in
    errors and is its id when it has none."""
    doc_id = next((str(record[k]) for k in ("id", "_id", "doc_id", "docid") if record.get(k) not in (None, "")),
                  str(line))
    if isinstance(record.get("contents"), str):
        title, text = _split_contents(record["contents"])
    elif isinstance(record.get("text"), str):
        title, text = str(record.get("title") or ""), record["text"]
    else:
        raise ValueError(  # noqa: TRY004 - bad file content: callers catch ValueError for every kind of it
            f"{path}, line {line}: a passage needs a 'text' (with optional 'title') or a FlashRAG 'contents' "
            f"field; found {', '.join(sorted(record)) or 'no fields'}"
        )
    if not text.strip() and not title.strip():
        raise ValueError(f"{path}, line {line}: empty passage")
    return Doc(id=doc_id, title=title.strip(), text=text.strip())


def _split_contents(contents: str) -> tuple[str, str]:
    """FlashRAG's '"Title"\\ntext' -> (Title, text); without a newline the whole string is the text."""
    if "\n" not in contents:
        return "", contents
    title, text = contents.split("\n", 1)
    title = title.strip()
    if len(title) >= 2 and title[0] == title[-1] == '"':
        title = title[1:-1]
    return title, text


def pooled_corpus(rows: Iterable[QARow]) -> list[Doc]:
    """One corpus from the context paragraphs of HotpotQA-style rows (gold and distractor paragraphs alike).

    Paragraphs are deduplicated by title and text; ids hash the content, so the same paragraph gets the same
    id whichever rows it is pooled from.
    """
    seen: dict[str, Doc] = {}
    with_context = 0
    for row in rows:
        context = row.get("metadata", {}).get("context")
        if not context:
            continue
        with_context += 1
        for paragraph in context:
            title, text = paragraph["title"], "".join(paragraph["sentences"]).strip()
            if text:
                doc = Doc(id=_content_id("ctx", title, text), title=title, text=text)
                seen.setdefault(doc.id, doc)
    if not with_context:
        raise ValueError("the rows carry no context paragraphs: pooled_corpus needs HotpotQA-style rows "
                         "(load them with load_qa from a HotpotQA distractor file)")
    return list(seen.values())


_DOC_BLOCK = re.compile(r"<\|begin_of_documents\|>(.*?)<\|end_of_documents\|>", re.DOTALL)
_NUMBERED = re.compile(r"(?:^|\n)\(\d+\)")
_TITLE_TEXT = re.compile(r"^Title:\s*(.*?)\s+Text:\s*(.*)$", re.DOTALL)


def corpus_from_traces(path: str | Path) -> list[Doc]:
    """The unique passages R1-Searcher retrieved, read from the `gen_text_store` trajectories of a trace file.

    Inside each <|begin_of_documents|> ... <|end_of_documents|> block, passages are numbered "(1)..." and
    written either "Title: T Text: body" (sometimes CSV-quoted) or "T   body" (title, then several spaces).
    """
    path = _existing(path)
    seen: dict[str, Doc] = {}
    for line, record in _json_records(path):
        store = record.get("gen_text_store")
        if store is None:
            raise ValueError(f"{path}, line {line}: no 'gen_text_store' field; is this an R1-Searcher trace file?")
        for text in store if isinstance(store, list) else [store]:
            for block in _DOC_BLOCK.findall(text or ""):
                for passage in _NUMBERED.split(block)[1:]:
                    title, body = _trace_passage(passage)
                    if body:
                        doc = Doc(id=_content_id("trace", title, body), title=title, text=body)
                        seen.setdefault(doc.id, doc)
    if not seen:
        raise ValueError(f"{path}: no <|begin_of_documents|> blocks with passages in the traces")
    return list(seen.values())


def _trace_passage(raw: str) -> tuple[str, str]:
    raw = raw.strip()
    if raw.startswith('"Title:'):  # a CSV-quoted passage: outer quotes, inner quotes doubled
        raw = raw[1:-1] if raw.endswith('"') else raw[1:]
        raw = raw.replace('""', '"')
    match = _TITLE_TEXT.match(raw)
    if match:
        title, body = match.group(1), match.group(2)
    else:
        parts = re.split(r" {2,}", raw, maxsplit=1)
        title, body = (parts[0], parts[1]) if len(parts) == 2 else ("", raw)
    return title.strip(), " ".join(body.split())


def _content_id(prefix: str, title: str, text: str) -> str:
    digest = hashlib.sha1((title + "\n" + text).encode("utf-8")).hexdigest()
    return f"{prefix}-{digest[:16]}"


# -- where the data is --------------------------------------------------------------------------------------


def default_data_dir() -> Path | None:
    """The real-data folder: $SEARCHRL_DATA when set, else ../shared/data beside the repository, else None."""
    configured = os.environ.get(DATA_ENV_VAR)
    if configured:
        path = Path(configured).expanduser()
        if not path.is_dir():
            raise FileNotFoundError(f"${DATA_ENV_VAR} points to {path}, which is not a directory")
        return path
    beside_repo = Path(__file__).resolve().parents[3].parent / "shared" / "data"
    return beside_repo if beside_repo.is_dir() else None


# -- file reading -------------------------------------------------------------------------------------------


def _existing(path: str | Path) -> Path:
    path = Path(path).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory; give the path of a data file inside it")
    return path


def _json_records(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, record) for each non-blank line of a jsonl file; a .json file may also hold one array."""
    if path.suffix.lower() == ".json":
        text = path.read_text(encoding="utf-8")
        if text.lstrip().startswith("["):
            try:
                items = json.loads(text)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}, line {err.lineno}: not valid JSON ({err.msg})") from None
            for number, item in enumerate(items, 1):
                yield number, _as_record(item, path, number)
            return
    big = path.stat().st_size > _PROGRESS_BYTES
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(tqdm(f, desc=f"reading {path.name}", unit=" lines", disable=not big), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}, line {number}: not valid JSON ({err.msg}); each line must be one "
                                 f"JSON object") from None
            yield number, _as_record(record, path, number)


def _as_record(item: Any, path: Path, number: int) -> dict:
    if not isinstance(item, dict):
        raise ValueError(  # noqa: TRY004 - bad file content: callers catch ValueError for every kind of it
            f"{path}, line {number}: expected a JSON object, got {type(item).__name__}"
        )
    return item


def _csv_records(path: Path) -> Iterator[tuple[int, dict]]:
    """(line number, row) for a csv/tsv file with a header; line numbers count the header as line 1."""
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    with path.open(encoding="utf-8-sig", newline="") as f:  # -sig: spreadsheet exports often start with a BOM
        reader = csv.DictReader(f, delimiter=delimiter)
        if not reader.fieldnames:
            raise ValueError(f"{path}: empty file (expected a header line)")
        for row in reader:
            yield reader.line_num, {k: v for k, v in row.items() if k is not None}


__all__ = [
    "DATA_ENV_VAR",
    "QA_FORMATS",
    "corpus_from_traces",
    "default_data_dir",
    "doc_from_record",
    "load_corpus",
    "load_qa",
    "pooled_corpus",
]
