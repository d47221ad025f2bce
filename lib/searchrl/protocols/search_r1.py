"""Search-R1 (Jin et al. 2025): <think>, <search>query</search>, <information>docs</information>, <answer>."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from searchrl.protocols.base import Parsed, SearchProtocol, closed_spans, nonempty

if TYPE_CHECKING:
    from searchrl.data.schema import Doc

# Table 1 of the paper, the question taking the place of "question". The paper's typesetting puts spaces before
# some punctuation ("</search> ,"); those are dropped.
SEARCH_R1_PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get "
    "new information. After reasoning, if you find you lack some knowledge, you can call a search engine by "
    "<search> query </search>, and it will return the top searched results between <information> and "
    "</information>. You can search as many times as you want. If you find no further external knowledge needed, "
    "you can directly provide the answer inside <answer> and </answer> without detailed illustrations. For "
    "example, <answer> Beijing </answer>. Question: {question}"
)

_SYMBOLS = {"<think>": "T", "</think>": "t", "<search>": "S", "</search>": "s", "<answer>": "A", "</answer>": "a"}
# The paper trains without a format reward, so this is the structure its template asks for, made explicit:
# every turn opens with reasoning in <think> (the template: "first every time you get new information"), then
# either a search (whose <information> the engine appends) or, in the last turn, the answer. Only blank space may
# sit outside the tags, and no tag may be empty.
_GRAMMAR = re.compile(r"(?:TxtSxsO)*TxtAxa")


class SearchR1Protocol(SearchProtocol):
    """Search-R1's protocol: the whole Table 1 template (question included) is one user turn."""

    name = "search_r1"
    query_open, query_close = "<search>", "</search>"
    obs_open, obs_close = "<information>", "</information>"
    answer_open, answer_close = "<answer>", "</answer>"
    think_open, think_close = "<think>", "</think>"
    system_prompt = SEARCH_R1_PROMPT
    instruction_role = "user"

    def format_doc(self, index: int, doc: Doc) -> str:
        """Search-R1's passage line: `Doc 1(Title: X) text`."""
        title, text = " ".join(doc.title.split()), " ".join(doc.text.split())
        return f"Doc {index}(Title: {title}) {text}"

    def render_thought(self, text: str, first: bool) -> str:
        """Every turn opens with its reasoning in <think>."""
        return f"{self.think_open} {text} {self.think_close}\n"

    def render_finish(self, reasoning: str, answer: str, evidence: list[str]) -> str:
        return (f"{self.think_open} {reasoning.replace('{answer}', answer)} {self.think_close}\n"
                f"{self.answer_open} {answer} {self.answer_close}")

    def parse(self, text: str) -> Parsed:
        """Queries, the last closed answer, and whether the completion follows the template's structure."""
        view = self.model_view(text)
        answers = closed_spans(view, self.answer_open, self.answer_close)
        return Parsed(
            queries=nonempty(closed_spans(view, self.query_open, self.query_close)),
            answer=answers[-1].strip() if answers else None,
            format_ok=_GRAMMAR.fullmatch(self.symbolize(view, _SYMBOLS)) is not None,
        )
