"""Retrieval: the `Retriever` protocol and local BM25 / dense retrievers, built by name or loaded from a folder; clients
of a shared retrieval service (`http://HOST:PORT`) and of web search APIs (`web+https://HOST/PATH`).

Importing this package is cheap: bm25s, sentence-transformers and faiss load only when a retriever is built.
"""

from searchrl.config.service import MAX_QUERY_CHARS
from searchrl.retrieval.base import BaseRetriever, Doc, Retriever
from searchrl.retrieval.bm25 import BM25Retriever
from searchrl.retrieval.dense import DenseRetriever
from searchrl.retrieval.registry import RETRIEVERS, load_retriever, make_retriever
from searchrl.retrieval.web import WebSearchConfig, WebSearchRetriever

__all__ = [
    "MAX_QUERY_CHARS",
    "RETRIEVERS",
    "BM25Retriever",
    "BaseRetriever",
    "DenseRetriever",
    "Doc",
    "Retriever",
    "WebSearchConfig",
    "WebSearchRetriever",
    "load_retriever",
    "make_retriever",
]
