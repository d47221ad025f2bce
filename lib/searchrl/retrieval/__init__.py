"""Retrieval: the `Retriever` protocol and local BM25 / dense retrievers, built by name or loaded from a folder.

Importing this package is cheap: bm25s, sentence-transformers and faiss load only when a retriever is built.
"""

from searchrl.retrieval.base import MAX_QUERY_CHARS, BaseRetriever, Doc, Retriever
from searchrl.retrieval.bm25 import BM25Retriever
from searchrl.retrieval.dense import DenseRetriever
from searchrl.retrieval.registry import RETRIEVERS, load_retriever, make_retriever

__all__ = [
    "MAX_QUERY_CHARS",
    "RETRIEVERS",
    "BM25Retriever",
    "BaseRetriever",
    "DenseRetriever",
    "Doc",
    "Retriever",
    "load_retriever",
    "make_retriever",
]
