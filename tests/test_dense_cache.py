"""The dense retriever's on-disk embedding cache: hits skip the encoder, changes miss, damaged entries are rebuilt.

A tiny deterministic encoder stands in for sentence-transformers, so these tests load no model.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import searchrl.retrieval.dense as dense_module
from fakes import BagOfWordsEncoder
from searchrl.data.schema import Doc
from searchrl.retrieval import DenseRetriever, make_retriever

SIZE = 64
CORPUS = [
    Doc("p0", "Velmora", "Velmora is a harbour city founded by fishermen."),
    Doc("p1", "Ostrand River", "The Ostrand River flows west into the Grey Sea."),
    Doc("p2", "Pellinor Bridge", "A stone bridge with nine arches over the Ostrand."),
    Doc("p3", "Quillon Observatory", "A telescope that maps comets and planets."),
    Doc("p4", "Ember Festival", "Bonfires, drums and lantern parades at harvest."),
]
QUERIES = ["harbour city fishermen", "nine arches bridge", "comets telescope"]


@pytest.fixture
def encoders(monkeypatch):
    """Every build gets a fresh BagOfWordsEncoder; the list keeps them, in build order."""
    made: list[BagOfWordsEncoder] = []

    def load(model_name_or_path, device):
        made.append(BagOfWordsEncoder(SIZE))
        return made[-1]

    monkeypatch.setattr(dense_module, "_load_encoder", load)
    return made


def build(cache_dir, corpus=CORPUS, **options) -> DenseRetriever:
    options.setdefault("model_name_or_path", "fake-encoder")
    return DenseRetriever(corpus, cache_dir=cache_dir, show_progress=False, **options)


def ids(results):
    return [[doc.id for doc in docs] for docs in results]


def corpus_texts(encoder: BagOfWordsEncoder) -> list[str]:
    return [text for text in encoder.encoded if text not in QUERIES]


def test_second_build_loads_the_cache_instead_of_encoding(encoders, tmp_path):
    first = build(tmp_path)
    assert not first.cache_hit
    assert corpus_texts(encoders[0]) == [doc.as_text() for doc in CORPUS]
    assert first.cache_path.parent == tmp_path and first.cache_path.suffix == ".npy"
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".json", ".npy"]  # no temporary file left over

    second = build(tmp_path)
    assert second.cache_hit and second.cache_path == first.cache_path
    assert encoders[1].encoded == []  # the corpus was not encoded again
    assert ids(second.search(QUERIES, k=3)) == ids(first.search(QUERIES, k=3))
    assert ids(first.search(QUERIES, k=1)) == [["p0"], ["p2"], ["p3"]]
    assert np.array_equal(second._index.reconstruct_n(0, len(CORPUS)), first._index.reconstruct_n(0, len(CORPUS)))
    assert encoders[1].encoded == QUERIES  # only the queries


def test_index_kinds_share_the_cached_embeddings(encoders, tmp_path):
    build(tmp_path)
    hnsw = build(tmp_path, index="hnsw")
    assert hnsw.cache_hit and hnsw.index_kind == "hnsw" and encoders[1].encoded == []


@pytest.mark.parametrize("change", ["text", "id", "order", "normalize", "model"])
def test_a_changed_corpus_or_encoder_misses_the_cache(encoders, tmp_path, change):
    first = build(tmp_path)
    corpus, options = list(CORPUS), {}
    if change == "text":
        corpus[2] = Doc("p2", "Pellinor Bridge", "A stone bridge with ten arches over the Ostrand.")
    elif change == "id":
        corpus[2] = Doc("p2b", corpus[2].title, corpus[2].text)
    elif change == "order":
        corpus = corpus[::-1]
    elif change == "normalize":
        options["normalize"] = False
    else:
        options["model_name_or_path"] = "another-encoder"
    second = build(tmp_path, corpus, **options)
    assert not second.cache_hit and second.cache_path != first.cache_path
    assert corpus_texts(encoders[1]) == [doc.as_text() for doc in corpus]
    assert len(list(tmp_path.glob("*.npy"))) == 2


def damage_truncate(path):
    path.write_bytes(path.read_bytes()[:100])


def damage_flip_a_value(path):
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # inside the last float: the shape is right, the checksum is not
    path.write_bytes(bytes(data))


def damage_drop_metadata(path):
    path.with_suffix(".json").unlink()  # as if the process died between the two renames


def damage_wrong_shape(path):
    np.save(path, np.zeros((3, SIZE), dtype=np.float32))


def damage_garbage(path):
    path.write_bytes(b"not a numpy file at all")


@pytest.mark.parametrize("damage", [damage_truncate, damage_flip_a_value, damage_drop_metadata, damage_wrong_shape,
                                    damage_garbage])
def test_a_damaged_entry_is_rebuilt_never_trusted(encoders, tmp_path, damage):
    first = build(tmp_path)
    damage(first.cache_path)
    with pytest.warns(UserWarning, match="ignoring the cached embeddings .* encoding the corpus again"):
        second = build(tmp_path)
    assert not second.cache_hit
    assert corpus_texts(encoders[1]) == [doc.as_text() for doc in CORPUS]
    assert ids(second.search(QUERIES, k=3)) == ids(first.search(QUERIES, k=3))
    # the rebuilt entry was written back, whole: the next build hits it silently
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        third = build(tmp_path)
    assert third.cache_hit and encoders[2].encoded == []
    assert json.loads(first.cache_path.with_suffix(".json").read_text())["shape"] == [len(CORPUS), SIZE]


def test_cache_off_writes_nothing(encoders, tmp_path):
    retriever = build(tmp_path, cache=False)
    assert retriever.cache_path is None and not retriever.cache_hit
    assert list(tmp_path.iterdir()) == []


def test_an_unwritable_cache_only_warns(encoders, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.warns(UserWarning, match="could not cache the corpus embeddings"):
        retriever = build(blocker / "cache")
    assert ids(retriever.search(QUERIES, k=1)) == [["p0"], ["p2"], ["p3"]]


def test_default_cache_dir_and_its_override(encoders, tmp_path, monkeypatch):
    monkeypatch.delenv(dense_module.CACHE_ENV_VAR, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert dense_module.default_cache_dir() == tmp_path / "home" / ".cache" / "searchrl" / "indexes"
    monkeypatch.setenv(dense_module.CACHE_ENV_VAR, str(tmp_path / "elsewhere"))
    retriever = make_retriever("dense", CORPUS, model_name_or_path="fake-encoder", show_progress=False)
    assert retriever.cache_path.parent == tmp_path / "elsewhere" and retriever.cache_path.is_file()


def test_a_saved_and_loaded_retriever_does_not_touch_the_cache(encoders, tmp_path):
    built = build(tmp_path / "cache")
    built.save(tmp_path / "saved")
    loaded = DenseRetriever.load(tmp_path / "saved")
    assert loaded.cache_path is None and not loaded.cache_hit
    assert ids(loaded.search(QUERIES, k=3)) == ids(built.search(QUERIES, k=3))
