"""Sparse lexical retrieval with BM25 (bm25s): the default retriever, fast to build and needing no model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from searchrl.retrieval.base import BaseRetriever, Doc

BM25_METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
INDEX_FOLDER = "bm25s"  # bm25s's own files live in a subfolder so their names never clash with ours
TOKENIZER_VOCAB = "vocab.tokenizer.json"


def _load_stemmer(name: str | None) -> Callable[[str], str] | None:
    """A word stemmer from PyStemmer, or None. PyStemmer is optional, so only asking for one requires it."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise TypeError(f"stemmer must be a language name such as 'english' (or None), got {type(name).__name__}")
    try:
        import Stemmer
    except ImportError:
        raise ImportError(
            f"stemmer={name!r} needs PyStemmer, which is not installed: run `pip install PyStemmer`, "
            "or pass stemmer=None to index words as they are"
        ) from None
    try:
        return Stemmer.Stemmer(name).stemWord
    except KeyError:
        raise ValueError(f"unknown stemmer {name!r}; PyStemmer knows: {', '.join(Stemmer.algorithms())}") from None


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the `k` highest scores, best first; equal scores keep corpus order (lower index first).

    Linear in the corpus size (a partition, not a full sort), so it stays cheap on large corpora.
    """
    if k < len(scores):
        threshold = np.partition(scores, len(scores) - k)[len(scores) - k]  # the k-th largest score
        above = np.flatnonzero(scores > threshold)
        tied = np.flatnonzero(scores == threshold)[: k - len(above)]
        candidates = np.concatenate([above, tied])
    else:
        candidates = np.arange(len(scores))
    return candidates[np.lexsort((candidates, -scores[candidates]))]


class BM25Retriever(BaseRetriever):
    """BM25 over each passage's title and text.

    Args:
        corpus: passages to index (non-empty, unique ids).
        k1, b: the usual BM25 term-frequency saturation and length normalisation.
        method: BM25 variant, one of "lucene" (default), "robertson", "atire", "bm25l", "bm25+".
        stemmer: a PyStemmer language name (e.g. "english") or None for no stemming (default; PyStemmer is optional).
        stopwords: "en" to drop English stopwords (default) or None to keep every word.
        show_progress: progress bars while indexing (searching never shows one: it runs inside rollouts).

    Results: `k` passages per query, best first; among equal scores, corpus order decides. A query whose words
    are all absent from the corpus (or all stopwords) has no ranking at all, so it returns [] rather than `k`
    arbitrary passages at score 0. Partially matching queries are padded with score-0 passages up to `k`, so a
    query always yields either nothing or exactly min(k, len(corpus)) passages.
    """

    kind = "bm25"

    def __init__(
        self,
        corpus: Sequence[Doc],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        stemmer: str | None = None,
        stopwords: str | None = "en",
        show_progress: bool = True,
    ) -> None:
        super().__init__(corpus)
        if method not in BM25_METHODS:
            raise ValueError(f"unknown BM25 method {method!r}; choose one of {', '.join(BM25_METHODS)}")
        if k1 < 0 or not 0 <= b <= 1:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        self.k1, self.b, self.method = float(k1), float(b), method
        self.stemmer_name, self.stopwords = stemmer, stopwords
        self.show_progress = show_progress
        self._tokenizer = self._make_tokenizer()
        self._index = None
        self._build()

    def _make_tokenizer(self):
        import bm25s.tokenization

        return bm25s.tokenization.Tokenizer(stopwords=self.stopwords, stemmer=_load_stemmer(self.stemmer_name))

    def _build(self) -> None:
        import bm25s

        texts = [doc.as_text() for doc in self.corpus]
        tokens = self._tokenizer.tokenize(texts, update_vocab=True, return_as="tuple", show_progress=self.show_progress)
        self._index = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        self._index.index(tokens, show_progress=self.show_progress)

    def _query_token_ids(self, queries: list[str]) -> list[list[int]]:
        # update_vocab="never" keeps the index vocabulary fixed; allow_empty=False makes an all-unknown query []
        return self._tokenizer.tokenize(
            queries, update_vocab="never", return_as="ids", show_progress=False, allow_empty=False
        )

    def _search_batch(self, queries: list[str], k: int) -> list[list[Doc]]:
        # Scores come from bm25s; the top-k selection is ours because bm25s's `retrieve` picks among tied scores
        # by argpartition order, and a defined tie order (corpus order) keeps results explainable and stable.
        results: list[list[Doc]] = []
        for ids in self._query_token_ids(queries):
            if not ids:
                results.append([])
                continue
            scores = self._index.get_scores_from_ids(ids)
            results.append([self.corpus[int(i)] for i in top_k_indices(scores, k)])
        return results

    def _options(self) -> dict[str, Any]:
        return {
            "k1": self.k1,
            "b": self.b,
            "method": self.method,
            "stemmer": self.stemmer_name,
            "stopwords": self.stopwords,
        }

    def _save_index(self, directory: Path) -> None:
        folder = directory / INDEX_FOLDER
        self._index.save(folder, show_progress=False)
        self._tokenizer.save_vocab(folder, vocab_name=TOKENIZER_VOCAB)

    @classmethod
    def _load(cls, directory: Path, corpus: list[Doc], options: dict[str, Any], **overrides: Any) -> BM25Retriever:
        import bm25s

        folder = directory / INDEX_FOLDER
        if not (folder / TOKENIZER_VOCAB).is_file():
            raise FileNotFoundError(f"{directory} lacks the BM25 index files ({INDEX_FOLDER}/); re-save the retriever")
        unknown = set(overrides) - {"show_progress"}
        if unknown:
            raise TypeError(f"cannot override {sorted(unknown)} when loading a BM25 index (it would need rebuilding)")
        retriever = cls.__new__(cls)
        BaseRetriever.__init__(retriever, corpus)
        retriever.k1, retriever.b, retriever.method = options["k1"], options["b"], options["method"]
        retriever.stemmer_name, retriever.stopwords = options["stemmer"], options["stopwords"]
        retriever.show_progress = overrides.get("show_progress", True)
        retriever._tokenizer = retriever._make_tokenizer()
        retriever._tokenizer.load_vocab(folder, vocab_name=TOKENIZER_VOCAB)
        retriever._index = bm25s.BM25.load(folder, show_progress=False)
        indexed = retriever._index.scores["num_docs"]
        if indexed != len(corpus):
            raise ValueError(f"{directory}: the BM25 index covers {indexed} passages but the corpus has {len(corpus)}")
        return retriever
