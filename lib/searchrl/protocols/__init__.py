"""The tag protocols of the four papers: prompts, stop strings, observation framing and parsing."""

from searchrl.protocols.base import Parsed, SearchProtocol
from searchrl.protocols.r1_searcher import R1SearcherProtocol
from searchrl.protocols.r1_searcher_pp import R1SearcherPPProtocol
from searchrl.protocols.r_search import RSearchFormat, RSearchProtocol
from searchrl.protocols.registry import PROTOCOLS, get_protocol
from searchrl.protocols.search_r1 import SearchR1Protocol
from searchrl.protocols.search_r1_compact import SearchR1CompactProtocol

__all__ = [
    "PROTOCOLS",
    "Parsed",
    "R1SearcherPPProtocol",
    "R1SearcherProtocol",
    "RSearchFormat",
    "RSearchProtocol",
    "SearchProtocol",
    "SearchR1CompactProtocol",
    "SearchR1Protocol",
    "get_protocol",
]
