"""The faiss index kinds (flat, hnsw, ivf, ivf-pq): parameters, fallbacks, and recall of each against flat.

Random clustered vectors stand in for embeddings and a tiny bag-of-words encoder for sentence-transformers, so
nothing here loads a model; the whole file runs in a few seconds.
"""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest

import searchrl.retrieval.dense as dense_module
from searchrl.data.schema import Doc
from searchrl.retrieval import DenseRetriever, load_retriever
from searchrl.retrieval.faiss_index import (
    INDEX_KINDS,
    build_index,
    fallback_reason,
    ivf_list_count,
    pq_bits,
    pq_code_count,
    prepare_search,
    training_sample,
    training_size,
)

faiss = pytest.importorskip("faiss")

DIMENSION = 64
PASSAGES = 4000
CLUSTERS = 40
K = 5
# recall@5 against exact search on clustered random vectors. A passage's four runners-up lie at almost the same
# distance inside its cluster, and ivf-pq's scores (8 codes of 6 bits per vector here) are too coarse to order such
# near-ties, so its bar is lower; its first hit must still be right
MIN_RECALL = {"hnsw": 0.9, "ivf": 0.85, "ivf-pq": 0.4}
MIN_FIRST_HIT = 0.9


def clustered_unit_vectors(count: int, seed: int = 0) -> np.ndarray:
    """`count` unit vectors around CLUSTERS random centres: a little of the topic structure real embeddings have."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((CLUSTERS, DIMENSION))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    vectors = centres[rng.integers(CLUSTERS, size=count)] + rng.standard_normal((count, DIMENSION)) / DIMENSION**0.5
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def vectors_and_queries():
    vectors = clustered_unit_vectors(PASSAGES)
    rng = np.random.default_rng(1)
    # queries near stored passages, as a question is near the passage that answers it
    queries = vectors[rng.integers(PASSAGES, size=200)] + 0.5 * rng.standard_normal((200, DIMENSION)) / DIMENSION**0.5
    queries = (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32)
    return vectors, queries


def top_ids(index, queries: np.ndarray, k: int = K) -> np.ndarray:
    prepare_search(index, k)
    return index.search(queries, k)[1]


def recall_against(exact: np.ndarray, approximate: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(e)) / len(e) for a, e in zip(approximate, exact)]))


@pytest.mark.parametrize("kind", ["hnsw", "ivf", "ivf-pq"])
def test_each_approximate_kind_finds_most_of_the_exact_neighbours(kind, vectors_and_queries):
    vectors, queries = vectors_and_queries
    exact = top_ids(build_index(faiss, vectors, "flat"), queries)
    index = build_index(faiss, vectors, kind)
    assert index.ntotal == PASSAGES
    found = top_ids(index, queries)
    assert recall_against(exact, found) >= MIN_RECALL[kind]
    assert np.mean(found[:, 0] == exact[:, 0]) >= MIN_FIRST_HIT


def test_flat_is_exact(vectors_and_queries):
    vectors, queries = vectors_and_queries
    expected = np.argsort(-(queries @ vectors.T), axis=1)[:, :K]
    assert recall_against(expected, top_ids(build_index(faiss, vectors, "flat"), queries)) > 0.99


def test_ivf_pq_stores_one_byte_per_code(vectors_and_queries):
    vectors, _ = vectors_and_queries
    ivf = faiss.extract_index_ivf(build_index(faiss, vectors, "ivf-pq"))
    assert ivf.nlist == ivf_list_count(PASSAGES)
    assert ivf.code_size == pq_code_count(DIMENSION) * pq_bits(PASSAGES) // 8


def test_pq_parameters_divide_the_dimension():
    assert pq_code_count(384) == 48 and pq_code_count(768) == 96  # MiniLM and e5-base
    assert pq_code_count(100) == 10 and pq_code_count(7) == 1
    assert pq_bits(1_000_000) == 8
    assert pq_bits(2000) == 5  # 2000 / 39 points per centroid: 32 centroids per sub-vector
    assert pq_bits(600) == 0


def test_small_corpora_fall_back_and_unknown_kinds_fail():
    assert fallback_reason("flat", 1) is None and fallback_reason("hnsw", 1) is None
    assert "156 passages" in fallback_reason("ivf", 100)
    assert "624 passages" in fallback_reason("ivf-pq", 500)
    assert fallback_reason("ivf-pq", 624) is None
    with pytest.raises(ValueError, match="unknown faiss index 'ivfpq'.*ivf-pq"):
        fallback_reason("ivfpq", 1000)
    with pytest.raises(ValueError, match="needs at least"):
        build_index(faiss, clustered_unit_vectors(100), "ivf")


def test_large_corpora_train_on_a_sample():
    assert training_size("flat", 10**6) == 0 and training_size("hnsw", 10**6) == 0
    assert training_size("ivf", 10**6) == 64 * ivf_list_count(10**6) < 10**6
    assert training_size("ivf-pq", 10_000) == 10_000  # small corpora train on everything
    vectors = clustered_unit_vectors(1000)
    sample = training_sample(vectors, 100, seed=3)
    assert sample.shape == (100, DIMENSION)
    assert np.array_equal(sample, training_sample(vectors, 100, seed=3))  # reproducible
    assert len({row.tobytes() for row in sample}) == 100  # no row drawn twice


def test_hnsw_search_widens_to_k():
    index = build_index(faiss, clustered_unit_vectors(300), "hnsw")
    prepare_search(index, 200)
    assert index.hnsw.efSearch == 200
    assert (index.search(clustered_unit_vectors(2, seed=5), 200)[1] >= 0).all()


# ---- through the retriever, with a tiny deterministic encoder ------------------------------------------------------


class BagOfWordsEncoder:
    """Hashes words into DIMENSION buckets; stands in for sentence-transformers."""

    def get_sentence_embedding_dimension(self) -> int:
        return DIMENSION

    def encode(self, texts, *, batch_size, show_progress_bar, convert_to_numpy, normalize_embeddings):
        vectors = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().replace(".", " ").split():
                vectors[row, zlib.crc32(word.encode()) % DIMENSION] += 1.0
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


@pytest.fixture
def fake_encoder(monkeypatch):
    monkeypatch.setattr(dense_module, "_load_encoder", lambda model_name_or_path, device: BagOfWordsEncoder())


def ledger(count: int) -> list[Doc]:
    words = ["grain", "salt", "copper", "wool", "amber", "tin", "honey", "timber", "dye", "glass", "wine", "iron"]
    return [Doc(f"d{i}", f"Ledger {i}", f"Entry {i}: {words[i % 12]} and {words[(i * 7) % 11]} for {i % 97} "
                f"guilders, sealed in {words[(i * 5) % 12]} wax.") for i in range(count)]


@pytest.mark.parametrize("kind", INDEX_KINDS)
def test_every_kind_builds_searches_and_reloads(kind, fake_encoder, tmp_path):
    corpus = ledger(1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 1000 passages train every kind: no fallback warning
        retriever = DenseRetriever(corpus, index=kind, show_progress=False, cache=False)
    assert retriever.index_kind == kind
    found = retriever.search(["copper and salt guilders"], k=K)[0]
    assert len(found) == K and len({doc.id for doc in found}) == K
    retriever.save(tmp_path / kind)
    loaded = load_retriever(tmp_path / kind)
    assert loaded.index_kind == kind
    assert [d.id for d in loaded.search(["copper and salt guilders"], k=K)[0]] == [d.id for d in found]


def test_ivf_pq_falls_back_to_flat_on_a_small_corpus(fake_encoder):
    with pytest.warns(UserWarning, match="ivf-pq index needs at least 624 passages.*exact flat index"):
        retriever = DenseRetriever(ledger(400), index="ivf-pq", show_progress=False, cache=False)
    assert retriever.index_kind == "flat"
