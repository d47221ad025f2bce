"""The papers' evaluation benchmarks by name, each with its questions and the corpus a retriever searches.

``load_benchmark("r1s_2wiki", limit=100, seed=0)`` reads the question file from the data folder
(``default_data_dir()``: ``$SEARCHRL_DATA`` or ``../shared/data``; or ``data_dir=``), subsamples it, and builds
the benchmark's corpus. Benchmarks are a :class:`~searchrl.core.registry.Registry` (``BENCHMARKS``), so an evaluation
picks one by string and users add their own :class:`BenchmarkSpec`.

No full Wikipedia dump is available offline, so every corpus here is a small real one, chosen per benchmark and
named in ``BENCHMARK_CORPORA``:

- ``hotpotqa_pool``: the context paragraphs (2 gold + 8 distractors per question) of all 1,100 HotpotQA
  distractor rows, deduplicated;
- ``r1_traces``: the Wikipedia passages R1-Searcher retrieved in its released evaluation trajectories (HotpotQA,
  2Wiki and Bamboogle questions, two policies each), pooled over every trace file;
- ``offline_union``: both of the above;
- ``none``: no corpus, for baselines that answer without retrieval.

Any benchmark also takes ``corpus=`` a passage file (jsonl / tsv, see ``load_corpus``), e.g. a Wikipedia dump
on a machine that has one.

How much searching a corpus can help is bounded by whether it holds the answer. ``answer_in_corpus_rate`` gives
the share of questions with a golden answer occurring, as whole words after SQuAD normalisation, in some passage:
a loose bound, since short answers ("1972", "USA") occur in passages about other things. The last column is the
tighter bound of one BM25 search with the question itself: its top 5 passages hold an answer. Measured on the
full question files of ../shared/data:

| benchmark      | hops   | questions | default corpus | passages | answer in corpus | answer in BM25 top 5 |
|----------------|--------|-----------|----------------|----------|------------------|----------------------|
| hotpotqa       | multi  | 500       | hotpotqa_pool  | 10,787   | 99.6%            | 66.2%                |
| nq             | single | 1000      | offline_union  | 25,159   | 57.9%            | 11.2%                |
| triviaqa       | single | 1000      | offline_union  | 25,159   | 65.2%            | 11.0%                |
| popqa          | single | 1000      | offline_union  | 25,159   | 63.0%            | 11.0%                |
| bamboogle      | multi  | 125       | r1_traces      | 14,372   | 77.6%            | 28.0%                |
| r1s_hotpotqa   | multi  | 500       | r1_traces      | 14,372   | 95.8%            | 68.4%                |
| r1s_2wiki      | multi  | 500       | r1_traces      | 14,372   | 91.8%            | 51.6%                |
| r1s_musique    | multi  | 500       | r1_traces      | 14,372   | 32.6%            | 2.0%                 |
| r1s_bamboogle  | multi  | 125       | r1_traces      | 14,372   | 77.6%            | 28.0%                |

r1_traces was mined from what a trained searcher retrieved for these very questions, so it is denser in useful
passages than Wikipedia would be: scores over it are optimistic. Only hotpotqa and the R1-Searcher HotpotQA,
2Wiki and Bamboogle sets have a corpus that answers most questions. NQ, TriviaQA and PopQA (single-hop,
Wikipedia-wide) and MuSiQue (no released trajectories) are searched over corpora that rarely hold their answer:
their scores with search measure little beyond answering from memory, and are not comparable to the papers'
tables (which search all of Wikipedia). Pass ``corpus="none"`` for a no-retrieval baseline, or ``corpus=`` a
Wikipedia passage file where one exists.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from searchrl.config.names import benchmark_key
from searchrl.core.registry import Registry, is_import_path
from searchrl.data.loaders import (
    DATA_ENV_VAR,
    corpus_from_traces,
    default_data_dir,
    load_corpus,
    load_qa,
    pooled_corpus,
)
from searchrl.data.schema import Doc, QARow

HOTPOTQA_FILES = tuple(f"hotpotqa-distractor/hotpotqa_{split}.jsonl" for split in ("train", "dev", "test"))
HOPS = ("single", "multi", "any")
TRACE_FILES = tuple(f"r1-searcher/traces/{name}.jsonl" for name in (
    "2wiki_qwen", "bamboogle_llama", "bamboogle_qwen", "hotpotqa_llama", "hotpotqa_qwen"))


# ---- what a benchmark is --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchmarkSpec:
    """Where a benchmark's questions are and which corpus it searches by default.

    Args:
        name: registry name, also written into each row's ``metadata["benchmark"]``.
        question_file: path relative to the data folder (absolute paths are used as they are); "" means the
            caller passes ``questions=`` (the ``custom`` entry).
        default_corpus: a ``BENCHMARK_CORPORA`` name, or "" when the caller must pass ``corpus=``.
        hops: "single", "multi", or "any" (a user's file may mix them).
        papers: the papers (of the four this project implements) whose tables report this benchmark.
        expected_questions: rows the shipped file holds (None: unknown); a mismatch means a different file.
        description: one line for listings; the corpus choice and its reason go here.
    """

    name: str
    question_file: str
    default_corpus: str
    hops: str
    papers: tuple[str, ...] = ()
    expected_questions: int | None = None
    description: str = ""

    def __post_init__(self) -> None:
        if self.hops not in HOPS:
            raise ValueError(f"benchmark {self.name!r}: hops must be one of {', '.join(HOPS)}, got {self.hops!r}")


@dataclass
class Benchmark:
    """A loaded benchmark: question rows (after `limit`) and the corpus (None for no-retrieval baselines)."""

    spec: BenchmarkSpec
    rows: list[QARow]
    corpus: list[Doc] | None
    corpus_source: str  # a BENCHMARK_CORPORA name or the passage file's path
    available_questions: int  # rows in the question file, before `limit`
    options: dict[str, Any] = field(default_factory=dict)  # limit, seed, data_dir: enough to load it again

    @property
    def name(self) -> str:
        return self.spec.name

    def answer_in_corpus_rate(self) -> float | None:
        """Share of this benchmark's rows whose answer occurs in its corpus (None without a corpus)."""
        return None if self.corpus is None else answer_in_corpus_rate(self.rows, self.corpus)

    def summary(self, *, coverage: bool = False) -> dict[str, Any]:
        """One row for a table of benchmarks; `coverage` adds the answer-in-corpus rate (a few seconds)."""
        out = {
            "benchmark": self.name,
            "hops": self.spec.hops,
            "papers": ", ".join(self.spec.papers),
            "questions": len(self.rows),
            "available_questions": self.available_questions,
            "corpus": self.corpus_source,
            "corpus_passages": 0 if self.corpus is None else len(self.corpus),
        }
        if coverage:
            out["answer_in_corpus"] = self.answer_in_corpus_rate()
        return out


# ---- corpora --------------------------------------------------------------------------------------------------

# name -> function(data folder) -> passages (None: no corpus)
BENCHMARK_CORPORA: Registry[Callable[[Path], list[Doc] | None]] = Registry("benchmark corpus",
                                                                            normalize=benchmark_key)


@lru_cache(maxsize=8)
def _cached_corpus(source: str, data_dir: str) -> tuple[Doc, ...] | None:
    # Several benchmarks share one corpus (four use r1_traces): read it once per process. The data files are
    # read-only releases, so a cache keyed by folder and name cannot go stale.
    docs = BENCHMARK_CORPORA.get(source)(Path(data_dir))
    return None if docs is None else tuple(docs)


def _hotpotqa_pool(data_dir: Path) -> list[Doc]:
    """Context paragraphs of all 1,100 HotpotQA distractor rows (train, dev, test), deduplicated."""
    rows = [row for name in HOTPOTQA_FILES for row in load_qa(_data_file(data_dir, name, "hotpotqa_pool"))]
    return pooled_corpus(rows)


def _r1_traces(data_dir: Path) -> list[Doc]:
    """Passages R1-Searcher retrieved in its released trajectories, pooled over all five trace files."""
    seen: dict[str, Doc] = {}
    for name in TRACE_FILES:
        for doc in corpus_from_traces(_data_file(data_dir, name, "r1_traces")):
            seen.setdefault(doc.id, doc)
    return list(seen.values())


def _offline_union(data_dir: Path) -> list[Doc]:
    """Every offline corpus at once: hotpotqa_pool followed by r1_traces."""
    seen: dict[str, Doc] = {}
    for doc in (*_hotpotqa_pool(data_dir), *_r1_traces(data_dir)):
        seen.setdefault(doc.id, doc)
    return list(seen.values())


BENCHMARK_CORPORA.register("hotpotqa_pool", _hotpotqa_pool)
BENCHMARK_CORPORA.register("r1_traces", _r1_traces)
BENCHMARK_CORPORA.register("offline_union", _offline_union)
BENCHMARK_CORPORA.register("none", lambda data_dir: None, doc="no corpus: for baselines that answer without search")


# ---- the registry -----------------------------------------------------------------------------------------

class BenchmarkRegistry(Registry):
    """The benchmarks' registry, which also tells the benchmarks whose question file is named when they load."""

    def without_questions(self, name: str) -> bool:
        """Whether benchmark `name` reads its questions from a file named when it loads (`custom`), which no
        parameter can name."""
        spec = self.get(name)
        return isinstance(spec, BenchmarkSpec) and not spec.question_file


BENCHMARKS: BenchmarkRegistry[BenchmarkSpec] = BenchmarkRegistry("benchmark", normalize=benchmark_key)

_ALL_FOUR = ("Search-R1", "R1-Searcher", "R1-Searcher++", "R-Search")
_SPECS = (
    BenchmarkSpec(
        "hotpotqa", "hotpotqa-distractor/hotpotqa_test.jsonl", "hotpotqa_pool", "multi", _ALL_FOUR, 500,
        "HotpotQA distractor rows; corpus: every row's 10 context paragraphs pooled (not the papers' Wikipedia)"),
    BenchmarkSpec(
        "nq", "flashrag-subsamples/nq_test_1k.jsonl", "offline_union", "single", ("Search-R1", "R-Search"), 1000,
        "Natural Questions, FlashRAG test 1k; no Wikipedia offline, so offline_union, which rarely holds the "
        "answer (BM25 top 5: 11%); corpus= a dump or 'none'"),
    BenchmarkSpec(
        "triviaqa", "flashrag-subsamples/triviaqa_test_1k.jsonl", "offline_union", "single",
        ("Search-R1", "R-Search"), 1000,
        "TriviaQA, FlashRAG test 1k; no Wikipedia offline, so offline_union, which rarely holds the answer "
        "(BM25 top 5: 11%); corpus= a dump or 'none'"),
    BenchmarkSpec(
        "popqa", "flashrag-subsamples/popqa_test_1k.jsonl", "offline_union", "single", ("Search-R1", "R-Search"),
        1000,
        "PopQA, FlashRAG test 1k; no Wikipedia offline, so offline_union, which rarely holds the answer "
        "(BM25 top 5: 11%); corpus= a dump or 'none'"),
    BenchmarkSpec(
        "bamboogle", "flashrag-subsamples/bamboogle_test_1k.jsonl", "r1_traces", "multi", _ALL_FOUR, 125,
        "Bamboogle, all 125 (FlashRAG copy); corpus: R1-Searcher's retrieved passages, mined for these questions"),
    BenchmarkSpec(
        "r1s_hotpotqa", "r1-searcher/eval_set/hotpotqa_500.jsonl", "r1_traces", "multi",
        ("R1-Searcher", "R1-Searcher++"), 500,
        "R1-Searcher's 500 HotpotQA dev questions; corpus: passages from its released trajectories"),
    BenchmarkSpec(
        "r1s_2wiki", "r1-searcher/eval_set/2wiki_500.jsonl", "r1_traces", "multi", ("R1-Searcher", "R1-Searcher++"),
        500, "R1-Searcher's 500 2WikiMultiHopQA dev questions; corpus: passages from its released trajectories"),
    BenchmarkSpec(
        "r1s_musique", "r1-searcher/eval_set/musique_500.jsonl", "r1_traces", "multi",
        ("R1-Searcher", "R1-Searcher++"), 500,
        "R1-Searcher's 500 MuSiQue dev questions; no MuSiQue trajectories were released, so its corpus is the "
        "other sets' trace passages, which almost never hold the answer (BM25 top 5: 2%)"),
    BenchmarkSpec(
        "r1s_bamboogle", "r1-searcher/eval_set/bamboogle.jsonl", "r1_traces", "multi",
        ("R1-Searcher", "R1-Searcher++"), 125,
        "Bamboogle as R1-Searcher evaluates it (125); corpus: passages from its released trajectories"),
    BenchmarkSpec(
        "custom", "", "", "any", (),
        None, "any question file (questions=) searched over any corpus (corpus= a passage file or corpus name)"),
)
for _spec in _SPECS:
    BENCHMARKS.register(_spec.name, _spec, doc=_spec.description)


# ---- loading --------------------------------------------------------------------------------------------------


def load_benchmark(
    name: str | BenchmarkSpec,
    *,
    data_dir: str | Path | None = None,
    limit: int | None = None,
    seed: int | None = 0,
    corpus: str | Path | None = None,
    questions: str | Path | None = None,
) -> Benchmark:
    """Questions and corpus of the benchmark registered as `name` (or given as a spec).

    Args:
        data_dir: folder holding the released files; None: ``default_data_dir()``.
        limit: keep this many questions (None or 0: all). Which ones depends only on `seed`, and a smaller
            limit with the same seed keeps a subset of a larger one's questions (one seeded shuffle, cut).
        seed: the subsample's seed; None keeps the first `limit` rows of the file. Rows come back in file order.
        corpus: None for the benchmark's default, a ``BENCHMARK_CORPORA`` name ("none" for no corpus), or a
            passage file. The corpus never depends on `limit`, so scores on subsamples stay comparable.
        questions: the question file, for ``custom`` (or a spec without ``question_file``) only.

    Raises FileNotFoundError naming the expected file when it is missing, and UnknownNameError listing the
    benchmarks for an unknown name.
    """
    spec = name if isinstance(name, BenchmarkSpec) else BENCHMARKS.get(name)
    if not isinstance(spec, BenchmarkSpec):
        raise TypeError(f"benchmark {name!r} must resolve to a BenchmarkSpec, got {type(spec).__name__}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a non-negative integer (0 or None: all questions), got {limit!r}")
    folder = Path(data_dir).expanduser() if data_dir is not None else None

    rows = load_qa(_question_path(spec, questions, folder))
    available = len(rows)
    rows = subsample(rows, limit, seed)
    for row in rows:
        row["metadata"]["benchmark"] = spec.name

    source = str(corpus) if corpus is not None else spec.default_corpus
    if not source:
        raise ValueError(
            f"benchmark {spec.name!r} has no default corpus: pass corpus= a passage file (jsonl/tsv), one of "
            f"{', '.join(BENCHMARK_CORPORA.names())}, or 'none' to evaluate without retrieval")
    docs = _load_corpus(source, folder, spec.name)
    return Benchmark(spec=spec, rows=rows, corpus=docs, corpus_source=source, available_questions=available,
                     options={"limit": limit, "seed": seed, "data_dir": None if folder is None else str(folder)})


def subsample(rows: Sequence[QARow], limit: int | None, seed: int | None) -> list[QARow]:
    """`limit` rows in their original order, picked by a shuffle seeded with `seed` (None: the first ones)."""
    rows = list(rows)
    if not limit or limit >= len(rows):
        return rows
    if seed is None:
        return rows[:limit]
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    return [rows[i] for i in sorted(order[:limit])]


def _question_path(spec: BenchmarkSpec, questions: str | Path | None, folder: Path | None) -> Path:
    if spec.question_file:
        if questions is not None:
            raise ValueError(f"benchmark {spec.name!r} has its own question file ({spec.question_file}); "
                             f"questions= is for 'custom' only")
        return _data_file(_resolve_data_dir(folder, spec.name), spec.question_file, spec.name)
    if questions is None:
        raise ValueError(f"benchmark {spec.name!r} needs questions= the path of a question file "
                         f"(jsonl in FlashRAG, HotpotQA, NQ-open or R1-Searcher format, or a Question/Answer csv)")
    path = Path(questions).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"benchmark {spec.name!r}: no question file at {path.resolve()}")
    return path


def _load_corpus(source: str, folder: Path | None, benchmark: str) -> list[Doc] | None:
    if source in BENCHMARK_CORPORA or (is_import_path(source) and not Path(source).exists()):
        if BENCHMARK_CORPORA.key(source) == "none":
            return None
        docs = _cached_corpus(BENCHMARK_CORPORA.key(source), str(_resolve_data_dir(folder, benchmark)))
        return list(docs)
    path = Path(source).expanduser()
    if path.is_file():
        return load_corpus(path)
    if path.suffix or "/" in source or "\\" in source:
        raise FileNotFoundError(f"benchmark {benchmark!r}: no passage file at {path.resolve()} (corpus=)")
    raise ValueError(f"benchmark {benchmark!r}: corpus {source!r} is neither a passage file nor a corpus name; "
                     f"known corpora: {', '.join(BENCHMARK_CORPORA.names())}")


def _resolve_data_dir(folder: Path | None, benchmark: str) -> Path:
    if folder is None:
        folder = default_data_dir()
    if folder is None:
        raise FileNotFoundError(
            f"benchmark {benchmark!r} reads released data files, and no data folder was found: pass data_dir=, "
            f"set $SEARCHRL_DATA, or put the folder at ../shared/data beside the repository")
    if not folder.is_dir():
        raise FileNotFoundError(f"benchmark {benchmark!r}: the data folder {folder} does not exist; point data_dir "
                                f"at the folder holding the released benchmark files, or leave data_dir empty to use "
                                f"${DATA_ENV_VAR} (else ../shared/data)")
    return folder


def _data_file(folder: Path, relative: str, needed_by: str) -> Path:
    path = folder / relative
    if not path.is_file():
        raise FileNotFoundError(
            f"{needed_by!r} needs {relative} inside the data folder {folder}, and it is missing "
            f"(expected at {path}); see the folder's SOURCES.md for where each file comes from")
    return path


# ---- does the corpus hold the answer? ----------------------------------------------------------------------------

_PUNCTUATION = str.maketrans({ch: " " for ch in string.punctuation})
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def _normalize_text(text: str) -> str:
    # SQuAD's normalisation (as the reward metrics use), except that punctuation becomes a space rather than
    # vanishing: "Dunmore's" in a passage must still contain the word "Dunmore".
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def answer_in_corpus(rows: Sequence[QARow], corpus: Sequence[Doc]) -> list[bool]:
    """For each row, whether one of its golden answers occurs as whole words in some passage (title or text).

    Answers that normalise to nothing (e.g. "The") never count. An inverted index keeps it to a few seconds for
    thousands of questions over tens of thousands of passages.
    """
    texts = [" " + _normalize_text(doc.as_text()) + " " for doc in corpus]
    postings: dict[str, list[int]] = {}
    for position, text in enumerate(texts):
        for token in set(text.split()):
            postings.setdefault(token, []).append(position)

    def found(answer: str) -> bool:
        tokens = _normalize_text(answer).split()
        if not tokens:
            return False
        candidates = min((postings.get(token, []) for token in tokens), key=len)
        needle = " " + " ".join(tokens) + " "
        return any(needle in texts[i] for i in candidates)

    return [any(found(answer) for answer in row["golden_answers"]) for row in rows]


def answer_in_corpus_rate(rows: Sequence[QARow], corpus: Sequence[Doc]) -> float:
    """Share of `rows` whose answer occurs in `corpus` (see :func:`answer_in_corpus`); an upper bound on what
    searching this corpus can contribute."""
    if not rows:
        raise ValueError("answer_in_corpus_rate needs at least one question row")
    hits = answer_in_corpus(rows, corpus)
    return sum(hits) / len(hits)


__all__ = [
    "BENCHMARKS",
    "BENCHMARK_CORPORA",
    "Benchmark",
    "BenchmarkSpec",
    "answer_in_corpus",
    "answer_in_corpus_rate",
    "load_benchmark",
    "subsample",
]
