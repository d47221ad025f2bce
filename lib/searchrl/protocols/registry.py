"""Find a protocol by name: the one place that lists the four papers' formats."""

from __future__ import annotations

import difflib

from searchrl.protocols.base import SearchProtocol
from searchrl.protocols.r1_searcher import R1SearcherProtocol
from searchrl.protocols.r1_searcher_pp import R1SearcherPPProtocol
from searchrl.protocols.r_search import RSearchProtocol
from searchrl.protocols.search_r1 import SearchR1Protocol

PROTOCOLS: dict[str, type[SearchProtocol]] = {
    cls.name: cls for cls in (SearchR1Protocol, R1SearcherProtocol, R1SearcherPPProtocol, RSearchProtocol)
}


def _normalize(name: str) -> str:
    """Accept the spellings people write: "Search-R1", "r1-searcher++", " R_SEARCH "."""
    return name.strip().lower().replace("++", "_pp").replace("-", "_").replace(" ", "_")


def get_protocol(name: str | SearchProtocol) -> SearchProtocol:
    """A fresh protocol instance for `name` (one of `PROTOCOLS`); an instance is returned unchanged."""
    if isinstance(name, SearchProtocol):
        return name
    if not isinstance(name, str):
        raise TypeError(f"protocol name must be a string, got {type(name).__name__}")
    key = _normalize(name)
    if key in PROTOCOLS:
        return PROTOCOLS[key]()
    known = ", ".join(sorted(PROTOCOLS))
    close = difflib.get_close_matches(key, list(PROTOCOLS), n=1, cutoff=0.4)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown protocol {name!r}; known protocols: {known}.{hint}")


__all__ = ["PROTOCOLS", "get_protocol"]
