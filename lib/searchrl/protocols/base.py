"""What every tag protocol provides. The rollout engine and the rewards talk to protocols through this class only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # avoid importing the retrieval layer at run time
    from searchrl.data.schema import Doc


@dataclass
class Parsed:
    """What a protocol reads out of one completion (the model's text, observations included)."""

    queries: list[str] = field(default_factory=list)  # every search query, in order
    answer: str | None = None  # the final answer text, None when there is none
    evidence: str | None = None  # R-Search's <original_evidence> content, else None
    internal: list[str] = field(default_factory=list)  # internal-knowledge spans (R1-Searcher++)
    format_ok: bool = False  # valid under the paper's own format rules


class SearchProtocol:
    """Base class: the tags, prompt and parser of one paper's search format.

    Subclasses set the tag attributes and `system_prompt`, and may override any method.
    """

    name: str = "base"
    query_open: str = "<search>"
    query_close: str = "</search>"
    obs_open: str = "<information>"
    obs_close: str = "</information>"
    answer_open: str = "<answer>"
    answer_close: str = "</answer>"
    system_prompt: str = ""  # contains "{question}" when the paper puts the question inside the prompt

    @property
    def stop_strings(self) -> list[str]:
        """Strings that end one generation turn: a closed query or a closed answer."""
        return [self.query_close, self.answer_close]

    def build_prompt(self, question: str, tokenizer=None, *, chat: bool = True) -> str:
        """The full prompt text for one question (chat template applied when `chat` and the tokenizer has one)."""
        raise NotImplementedError

    def extract_query(self, segment: str) -> str | None:
        """The query that a just-generated turn ends with, or None when the turn did not end in a closed query."""
        raise NotImplementedError

    def format_observation(self, docs: "list[Doc]") -> str:
        """The exact text appended after a query: observation tags around the numbered documents."""
        raise NotImplementedError

    def invalid_query_observation(self, reason: str) -> str:
        """The observation appended when a query is empty, unclosed or too long."""
        return f"\n{self.obs_open}{reason}{self.obs_close}\n"

    def parse(self, text: str) -> Parsed:
        """Read a completion. Never raises, whatever the text."""
        raise NotImplementedError
