"""Find a protocol by name: the one place that lists the four papers' formats."""

from __future__ import annotations

from searchrl.config.names import protocol_key
from searchrl.core.registry import Registry
from searchrl.protocols.base import SearchProtocol
from searchrl.protocols.r1_searcher import R1SearcherProtocol
from searchrl.protocols.r1_searcher_pp import R1SearcherPPProtocol
from searchrl.protocols.r_search import RSearchProtocol
from searchrl.protocols.search_r1 import SearchR1Protocol
from searchrl.protocols.search_r1_compact import SearchR1CompactProtocol

# name -> protocol class (instantiated without arguments); the spellings people write ("Search-R1", "r1-searcher++")
# are normalised by the schema's own function, so that it checks names as this registry does.
PROTOCOLS: Registry[type[SearchProtocol]] = Registry("protocol", normalize=protocol_key)
PROTOCOLS.register("search_r1", SearchR1Protocol, doc="Search-R1: <think>, <search>, <information>, <answer>")
PROTOCOLS.register("search_r1_compact", SearchR1CompactProtocol,
                   doc="Search-R1's tags and grammar under a short instruction (70 prompt tokens against 157; CPU budgets)")
PROTOCOLS.register("r1_searcher", R1SearcherProtocol,
                   doc="R1-Searcher: <|begin_of_query|> inside a pre-filled <think>, then <answer>")
PROTOCOLS.register("r1_searcher_pp", R1SearcherPPProtocol,
                   doc="R1-Searcher++: external search or internal answer spans, final \\boxed{}")
PROTOCOLS.register("r_search", RSearchProtocol,
                   doc="R-Search: <search>, <observation>, <original_evidence>, <answer>")


def get_protocol(name: str | SearchProtocol) -> SearchProtocol:
    """A fresh protocol instance for `name` (a registered name or an import path); an instance is returned as is."""
    if isinstance(name, SearchProtocol):
        return name
    entry = PROTOCOLS.get(name)
    protocol = entry() if isinstance(entry, type) else entry
    if not isinstance(protocol, SearchProtocol):
        raise TypeError(f"protocol {name!r} must be a SearchProtocol subclass or instance, got {type(protocol).__name__}")
    return protocol


__all__ = ["PROTOCOLS", "get_protocol"]
