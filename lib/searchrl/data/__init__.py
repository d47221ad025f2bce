"""Questions and corpora: the synthetic world and loaders for real QA data."""
from searchrl.data.loaders import corpus_from_traces, default_data_dir, load_corpus, load_qa, pooled_corpus
from searchrl.data.schema import Doc, QARow, make_row
from searchrl.data.synthetic import QUESTION_TYPES, World, make_world

__all__ = [
    "QUESTION_TYPES",
    "Doc",
    "QARow",
    "World",
    "corpus_from_traces",
    "default_data_dir",
    "load_corpus",
    "load_qa",
    "make_row",
    "make_world",
    "pooled_corpus",
]
