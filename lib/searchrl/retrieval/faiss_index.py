"""The faiss index kinds behind dense retrieval: how each is sized, trained and filled.

Every kind searches by inner product over unit vectors (cosine similarity). Per passage, at d dimensions:

- ``flat``: exact search; 4*d bytes (1,536 at 384 dims). Nothing to train; search time grows with the corpus.
- ``hnsw``: a graph of M=32 neighbours per node over the full vectors (4*d bytes plus about 2*M*4 of links);
  fast approximate search, slow single-threaded build, no GPU version in faiss.
- ``ivf``: an inverted file of about 4*sqrt(N) k-means lists; a query scans ``ivf_probe_count`` of them.
  Full vectors plus an 8-byte id.
- ``ivf-pq``: the same inverted file with each vector compressed by product quantisation to d/8 one-byte codes
  (48 bytes at 384 dims) plus an 8-byte id: about 27x smaller than flat, with approximate scores.

The trained kinds learn from a random sample of the corpus rather than all of it: k-means cost grows with the sample,
and beyond a few dozen points per cluster more points barely move the centroids (faiss would subsample anyway, with a
warning). Vectors are added in chunks, so a caller can stream a corpus that does not fit in memory twice.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

INDEX_KINDS = ("flat", "hnsw", "ivf", "ivf-pq")
HNSW_NEIGHBOURS = 32  # graph degree M: faiss's usual choice, good recall at modest memory
HNSW_EF_SEARCH = 128  # search breadth; raised to k when k is larger
IVF_POINTS_PER_LIST = 39  # faiss warns below ~39 training points per cluster
IVF_MIN_LISTS = 4  # below this an inverted file saves nothing over a flat scan
TRAIN_POINTS_PER_CLUSTER = 64  # training sample per k-means centroid: enough for stable centroids, bounded cost
PQ_DIMS_PER_CODE = 8  # dimensions per one-byte PQ code: 48 codes at 384 dims, 96 at 768 (e5-base)
PQ_MAX_BITS = 8  # 256 centroids per sub-vector, the standard (and GPU-supported) PQ code
PQ_MIN_BITS = 4  # fewer centroids than 16 per sub-vector make scores too coarse to rank with
ADD_CHUNK = 65_536  # vectors added per call: bounds the temporary copies faiss makes while adding


def ivf_list_count(corpus_size: int) -> int:
    """Number of IVF clusters for a corpus: about 4*sqrt(N), capped so every cluster gets enough training points.

    Returns 0 when the corpus is too small for an inverted file to be worth training.
    """
    lists = min(round(4 * math.sqrt(corpus_size)), corpus_size // IVF_POINTS_PER_LIST)
    return lists if lists >= IVF_MIN_LISTS else 0


def ivf_probe_count(lists: int) -> int:
    """Lists scanned per query: 1/16 of them but at least 8 (all of them for tiny indexes), for high recall."""
    return min(lists, max(8, lists // 16))


def pq_code_count(dimension: int) -> int:
    """Sub-vectors (one-byte codes) per vector for IVF-PQ: the largest divisor of `dimension` that leaves at least
    PQ_DIMS_PER_CODE dimensions per code (48 at 384 dims, 96 at 768); PQ needs the count to divide the dimension."""
    limit = max(1, dimension // PQ_DIMS_PER_CODE)
    return next(m for m in range(limit, 0, -1) if dimension % m == 0)


def pq_bits(corpus_size: int) -> int:
    """Bits per PQ code: 8 when the corpus has enough points to train 256 centroids per sub-vector, fewer on small
    corpora (0 when even PQ_MIN_BITS cannot be trained)."""
    if corpus_size < IVF_POINTS_PER_LIST << PQ_MIN_BITS:
        return 0
    return min(PQ_MAX_BITS, int(math.log2(corpus_size / IVF_POINTS_PER_LIST)))


def fallback_reason(kind: str, corpus_size: int) -> str | None:
    """Why `kind` cannot be trained on a corpus of `corpus_size` passages (a flat index is then used), or None."""
    if kind not in INDEX_KINDS:
        raise ValueError(f"unknown faiss index {kind!r}; choose one of {', '.join(INDEX_KINDS)}")
    if kind in ("ivf", "ivf-pq") and ivf_list_count(corpus_size) == 0:
        return (f"{kind} index needs at least {IVF_MIN_LISTS * IVF_POINTS_PER_LIST} passages to train, the corpus "
                f"has {corpus_size}")
    if kind == "ivf-pq" and pq_bits(corpus_size) == 0:
        return (f"ivf-pq index needs at least {IVF_POINTS_PER_LIST << PQ_MIN_BITS} passages to train its codes, the "
                f"corpus has {corpus_size}")
    return None


def training_size(kind: str, corpus_size: int) -> int:
    """Vectors sampled to train `kind` on a corpus of `corpus_size` (0 for the kinds that need no training)."""
    if kind == "ivf":
        return min(corpus_size, TRAIN_POINTS_PER_CLUSTER * ivf_list_count(corpus_size))
    if kind == "ivf-pq":
        clusters = max(ivf_list_count(corpus_size), 1 << pq_bits(corpus_size))  # the PQ codebooks train on it too
        return min(corpus_size, TRAIN_POINTS_PER_CLUSTER * clusters)
    return 0


def new_index(faiss, kind: str, dimension: int, corpus_size: int):
    """An empty, untrained index of `kind` with its parameters chosen for `corpus_size` vectors.

    `kind` must be trainable at that size (see `fallback_reason`). Built with faiss's index factory, so the index
    owns its coarse quantizer and nothing else has to be kept alive beside it.
    """
    metric = faiss.METRIC_INNER_PRODUCT
    if kind == "flat":
        return faiss.IndexFlatIP(dimension)
    if kind == "hnsw":
        index = faiss.index_factory(dimension, f"HNSW{HNSW_NEIGHBOURS},Flat", metric)
        index.hnsw.efSearch = HNSW_EF_SEARCH
        return index
    lists = ivf_list_count(corpus_size)
    # "np": no polysemous training, which only serves Hamming-distance filtering (unused here) and makes PQ training
    # about 20x slower
    codes = "Flat" if kind == "ivf" else f"PQ{pq_code_count(dimension)}x{pq_bits(corpus_size)}np"
    index = faiss.index_factory(dimension, f"IVF{lists},{codes}", metric)
    faiss.extract_index_ivf(index).nprobe = ivf_probe_count(lists)
    return index


def training_sample(embeddings: np.ndarray, size: int, seed: int = 0) -> np.ndarray:
    """`size` rows of `embeddings` drawn without replacement (all of them when size >= len), as float32."""
    if size >= len(embeddings):
        return np.ascontiguousarray(embeddings, dtype=np.float32)
    rows = np.sort(np.random.default_rng(seed).choice(len(embeddings), size=size, replace=False))
    return np.ascontiguousarray(embeddings[rows], dtype=np.float32)


def add_in_chunks(index, chunks: Iterable[np.ndarray], progress=None) -> None:
    """Add vectors chunk by chunk; `progress` (a tqdm-like object or None) is advanced by each chunk's rows."""
    for chunk in chunks:
        index.add(np.ascontiguousarray(chunk, dtype=np.float32))
        if progress is not None:
            progress.update(len(chunk))


def build_index(faiss, embeddings: np.ndarray, kind: str, *, seed: int = 0, show_progress: bool = False):
    """An index of `kind` over `embeddings` (float32, one row per passage): trained on a sample, filled in chunks.

    The caller checks `fallback_reason` first; a kind that cannot train at this size raises ValueError here.
    """
    reason = fallback_reason(kind, len(embeddings))
    if reason is not None:
        raise ValueError(reason)
    index = new_index(faiss, kind, embeddings.shape[1], len(embeddings))
    if not index.is_trained:
        index.train(training_sample(embeddings, training_size(kind, len(embeddings)), seed))
    chunks = (embeddings[start:start + ADD_CHUNK] for start in range(0, len(embeddings), ADD_CHUNK))
    progress = None
    if show_progress and len(embeddings) > ADD_CHUNK:  # only worth a bar when adding takes a while (hnsw, big N)
        from tqdm.auto import tqdm

        progress = tqdm(total=len(embeddings), desc=f"adding to the {kind} index", unit="vec")
    try:
        add_in_chunks(index, chunks, progress)
    finally:
        if progress is not None:
            progress.close()
    return index


def prepare_search(index, k: int) -> None:
    """Widen an HNSW search to at least `k` candidates: HNSW returns at most efSearch neighbours."""
    hnsw = getattr(index, "hnsw", None)
    if hnsw is not None:
        hnsw.efSearch = max(HNSW_EF_SEARCH, k)


__all__ = [
    "INDEX_KINDS",
    "add_in_chunks",
    "build_index",
    "fallback_reason",
    "ivf_list_count",
    "ivf_probe_count",
    "new_index",
    "pq_bits",
    "pq_code_count",
    "prepare_search",
    "training_sample",
    "training_size",
]
