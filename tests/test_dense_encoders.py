"""Dense encoders by name: the family table, the prefixes applied to queries vs passages, the pooling, the cache key.

A recording stand-in replaces sentence-transformers in all but the pooling test, which loads the bundled MiniLM from
its local folder; nothing is downloaded.
"""

from __future__ import annotations

import numpy as np
import pytest

import searchrl.retrieval.dense as dense_module
from fakes import BagOfWordsEncoder
from searchrl.config import RunConfig
from searchrl.data.schema import Doc
from searchrl.retrieval import DenseRetriever, load_retriever, make_retriever
from searchrl.retrieval.encoders import BGE_QUERY_INSTRUCTION, ENCODER_FAMILIES, PLAIN, conventions_for
from searchrl.retrieval.service import service_options

SIZE = 32
CORPUS = [
    Doc("p0", "Velmora", "Velmora is a harbour city founded by fishermen."),
    Doc("p1", "Ostrand River", "The Ostrand River flows west into the Grey Sea."),
    Doc("p2", "Pellinor Bridge", "A stone bridge with nine arches over the Ostrand."),
]


@pytest.fixture
def encoders(monkeypatch):
    made: list[tuple[str | None, BagOfWordsEncoder]] = []

    def load(model_name_or_path, device):
        made.append((model_name_or_path, BagOfWordsEncoder(SIZE)))
        return made[-1][1]

    monkeypatch.setattr(dense_module, "_load_encoder", load)
    return made


@pytest.mark.parametrize("name,family", [
    ("intfloat/e5-base-v2", "e5"), ("intfloat/e5-large-v2", "e5"), ("INTFLOAT/E5-small-v2", "e5"),
    ("intfloat/multilingual-e5-base", "e5"), ("/models/e5-base-v2", "e5"), ("/models/e5-base-v2/", "e5"),
    ("BAAI/bge-large-en-v1.5", "bge"), ("BAAI/bge-base-en", "bge"), ("./weights/bge-small-en-v1.5", "bge"),
    ("BAAI/bge-m3", "plain"), ("BAAI/bge-large-zh-v1.5", "plain"),
    ("sentence-transformers/all-MiniLM-L6-v2", "minilm"), (None, "minilm"),
    ("sentence-transformers/all-mpnet-base-v2", "plain"), ("my-encoder", "plain"),
])
def test_the_family_is_looked_up_by_name(name, family):
    assert conventions_for(name).family == family


def test_the_table_holds_the_papers_conventions():
    e5, bge, minilm = (conventions_for(n) for n in ("intfloat/e5-base-v2", "BAAI/bge-large-en-v1.5", None))
    assert (e5.query_prefix, e5.passage_prefix, e5.pooling, e5.normalize) == ("query: ", "passage: ", "mean", True)
    assert BGE_QUERY_INSTRUCTION == "Represent this sentence for searching relevant passages: "
    assert (bge.query_prefix, bge.passage_prefix, bge.pooling, bge.normalize) == (BGE_QUERY_INSTRUCTION, "", "cls",
                                                                                    True)
    assert minilm.is_plain and minilm.normalize and PLAIN.is_plain
    assert [c.family for _, c in ENCODER_FAMILIES] == ["e5", "bge", "minilm"]


def test_e5_prefixes_queries_and_passages_differently(encoders):
    retriever = DenseRetriever(CORPUS, model_name_or_path="intfloat/e5-base-v2", cache=False, show_progress=False)
    _, encoder = encoders[-1]
    assert encoder.encoded == ["passage: " + doc.as_text() for doc in CORPUS]
    retriever.search(["harbour city", "nine arches"], k=1)
    assert encoder.encoded[len(CORPUS):] == ["query: harbour city", "query: nine arches"]


def test_bge_instructs_queries_only(encoders):
    retriever = DenseRetriever(CORPUS, model_name_or_path="BAAI/bge-large-en-v1.5", cache=False,
                               show_progress=False)
    _, encoder = encoders[-1]
    assert encoder.encoded == [doc.as_text() for doc in CORPUS]
    retriever.search(["harbour city"], k=1)
    assert encoder.encoded[-1] == BGE_QUERY_INSTRUCTION + "harbour city"


def test_the_default_and_unknown_encoders_get_no_prefix(encoders):
    for name in (None, "my-encoder"):
        retriever = DenseRetriever(CORPUS, model_name_or_path=name, cache=False, show_progress=False)
        retriever.search(["harbour city"], k=1)
        _, encoder = encoders[-1]
        assert encoder.encoded == [doc.as_text() for doc in CORPUS] + ["harbour city"]
        assert retriever.normalize is True


def test_conventions_survive_save_and_load(encoders, tmp_path):
    DenseRetriever(CORPUS, model_name_or_path="intfloat/e5-base-v2", cache=False, show_progress=False).save(tmp_path)
    loaded = load_retriever(tmp_path)
    assert loaded.conventions == conventions_for("intfloat/e5-base-v2")
    loaded.search(["harbour city"], k=1)
    assert encoders[-1][1].encoded == ["query: harbour city"]


def test_the_cache_key_includes_the_conventions(encoders, tmp_path):
    encoder = BagOfWordsEncoder(SIZE)
    e5 = conventions_for("intfloat/e5-base-v2")
    plain_identity = dense_module._encoder_identity("same-name", encoder, PLAIN)
    e5_identity = dense_module._encoder_identity("same-name", encoder, e5)
    bge_identity = dense_module._encoder_identity("same-name", encoder, conventions_for("BAAI/bge-base-en"))
    keys = {dense_module.embedding_cache_key(i, CORPUS, True) for i in (plain_identity, e5_identity, bge_identity)}
    assert len(keys) == 3
    # plain conventions leave the key as it was before conventions existed: earlier cache entries still serve
    assert plain_identity == dense_module._encoder_identity("same-name", encoder)
    # and a retriever whose conventions change re-encodes instead of loading the other family's vectors
    first = DenseRetriever(CORPUS, model_name_or_path="intfloat/e5-base-v2", cache_dir=tmp_path, show_progress=False)
    again = DenseRetriever(CORPUS, model_name_or_path="intfloat/e5-base-v2", cache_dir=tmp_path, show_progress=False)
    assert not first.cache_hit and again.cache_hit and again.cache_path == first.cache_path


def test_a_run_passes_its_encoder_to_the_dense_retriever(encoders):
    cfg = RunConfig(retriever="dense", retriever_model="intfloat/e5-base-v2")
    assert service_options(cfg) == {"model_name_or_path": "intfloat/e5-base-v2"}
    retriever = make_retriever(cfg.retriever, CORPUS, cache=False, show_progress=False, **service_options(cfg))
    assert encoders[-1][0] == "intfloat/e5-base-v2" and retriever.conventions.family == "e5"
    assert service_options(RunConfig(retriever="dense")) == {}
    assert service_options(RunConfig(retriever="bm25", retriever_model="intfloat/e5-base-v2")) == {}


def test_the_family_pooling_replaces_the_models_own():
    # the bundled MiniLM, from its local folder: a real sentence-transformers model, pooled by mean
    encoder = dense_module._load_encoder(None, "cpu")
    texts = ["Velmora is a harbour city.", "A stone bridge with nine arches."]
    mean = encoder.encode(texts, convert_to_numpy=True, normalize_embeddings=True)
    dense_module._apply_pooling(encoder, "mean")  # already mean: nothing changes
    assert np.allclose(encoder.encode(texts, convert_to_numpy=True, normalize_embeddings=True), mean)
    dense_module._apply_pooling(encoder, "cls")
    pooling = [m for m in encoder._modules.values() if type(m).__name__ == "Pooling"]
    assert len(pooling) == 1 and dense_module._pooling_mode(pooling[0]) == "cls"
    cls = encoder.encode(texts, convert_to_numpy=True, normalize_embeddings=True)
    assert cls.shape == mean.shape and not np.allclose(cls, mean)


def test_retriever_model_is_checked_as_a_string():
    with pytest.raises(Exception, match="retriever_model"):
        RunConfig(retriever_model=3)
