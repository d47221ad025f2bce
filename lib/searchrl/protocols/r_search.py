"""R-Search (Zhao et al. 2025): <search>, <observation>, one <original_evidence> box, one <answer> box."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from searchrl.protocols.base import Parsed, SearchProtocol, closed_spans, nonempty

if TYPE_CHECKING:
    from searchrl.data.schema import Doc

# Table 1, the system template (the extraction's escaped underscores restored). The question is appended after it.
R_SEARCH_PROMPT = (
    "You are a helpful assistant that can solve the given question step by step. For each step, start by "
    "explaining your thought process. If additional information is needed, provide a specific query enclosed in "
    "<search> and </search>. The system will return the top search results within <observation> and "
    "</observation>. You can perform multiple searches as needed. When you know the final answer, use "
    "<original_evidence> and </original_evidence> to provide all potentially relevant original information from "
    "the observations. Ensure the information is complete and preserves the original wording without "
    "modification. If no searches were conducted or observations were made, omit the evidence section. Finally, "
    "provide the final answer within <answer> and </answer> tags."
)

# Table 5, the evidence template: a frozen model of another family answers from the evidence alone (eq. 4).
EVIDENCE_TEMPLATE = (
    "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n"
    "The following are given passages: {evidence}\n"
    "Question: {query}\n"
    "Answer:"
)

_SYMBOLS = {
    "<search>": "S",
    "</search>": "s",
    "<original_evidence>": "V",
    "</original_evidence>": "v",
    "<answer>": "A",
    "</answer>": "a",
}
# Reasoning is free text (the paper deliberately has no <think>); searches are non-empty and each is followed by
# its observation; then at most one evidence box after the last observation ("when you know the final answer"),
# then exactly one answer box, and nothing after it. Whether the evidence box is required depends on whether the
# model searched (eq. 5), checked in `parse`.
_GRAMMAR = re.compile(r"(?:x|SxsO)*(?:Vxvx?)?Axa")


@dataclass(frozen=True)
class RSearchFormat:
    """The indicators of R-Search's format reward (eq. 5)."""

    searched: bool  # I_S: retrieval was triggered (at least one closed, non-empty query)
    answer_ok: bool  # I_A: exactly one <answer> box, closed, not empty
    evidence_ok: bool  # I_E: exactly one <original_evidence> box, closed, not empty


class RSearchProtocol(SearchProtocol):
    """R-Search's protocol: the Table 1 template as the system turn, the question as the user turn."""

    name = "r_search"
    query_open, query_close = "<search>", "</search>"
    obs_open, obs_close = "<observation>", "</observation>"
    evidence_open, evidence_close = "<original_evidence>", "</original_evidence>"
    answer_open, answer_close = "<answer>", "</answer>"
    system_prompt = R_SEARCH_PROMPT
    evidence_template = EVIDENCE_TEMPLATE
    instruction_role = "system"
    doc_separator = "\n\n"  # the paper's trajectories show one passage per paragraph

    def format_doc(self, index: int, doc: Doc) -> str:
        """R-Search's passage: `(Title: "X") text` (the index is not shown, as in the paper's trajectories)."""
        title, text = " ".join(doc.title.split()), " ".join(doc.text.split())
        return f'(Title: "{title}") {text}' if title else text

    def evidence_prompt(self, question: str, evidence: str) -> str:
        """The Table 5 prompt asking a (cross-family) model to answer `question` from `evidence` alone."""
        return self.evidence_template.replace("{evidence}", str(evidence).strip()).replace(
            "{query}", str(question).strip()
        )

    def format_indicators(self, text: str) -> RSearchFormat:
        """The three indicators of eq. 5, read from the model text (observations ignored)."""
        view = self.model_view(text)
        return RSearchFormat(
            searched=bool(nonempty(closed_spans(view, self.query_open, self.query_close))),
            answer_ok=_one_box(view, self.answer_open, self.answer_close),
            evidence_ok=_one_box(view, self.evidence_open, self.evidence_close),
        )

    def render_finish(self, reasoning: str, answer: str, evidence: list[str]) -> str:
        """Reasoning, then the evidence box (when there is evidence), then the answer."""
        text = f"{reasoning.replace('{answer}', answer)}\n"
        if evidence:
            text += f"{self.evidence_open} {' '.join(evidence)} {self.evidence_close}\n"
        return text + f"{self.answer_open} {answer} {self.answer_close}"

    def parse(self, text: str) -> Parsed:
        """Queries, evidence, answer, and the format rules: one answer box, one evidence box when searched. With
        several boxes the last one is the answer (or evidence) scored; the format rule then fails."""
        view = self.model_view(text)
        queries = nonempty(closed_spans(view, self.query_open, self.query_close))
        answers = closed_spans(view, self.answer_open, self.answer_close)
        evidences = closed_spans(view, self.evidence_open, self.evidence_close)
        symbols = self.symbolize(view, _SYMBOLS)
        # "If no searches were conducted ... omit the evidence section": evidence is required only after a search
        # (eq. 5 grants gamma_e unconditionally without one, so a box there is tolerated, not required).
        evidence_rule = "V" in symbols if queries else True
        return Parsed(
            queries=queries,
            answer=answers[-1].strip() if answers else None,
            evidence=evidences[-1].strip() if evidences else None,
            format_ok=_GRAMMAR.fullmatch(symbols) is not None and evidence_rule,
        )


def _one_box(view: str, open_tag: str, close_tag: str) -> bool:
    """Exactly one open and one close tag, in that order, around some text."""
    if view.count(open_tag) != 1 or view.count(close_tag) != 1:
        return False
    spans = closed_spans(view, open_tag, close_tag)
    return len(spans) == 1 and bool(spans[0].strip())
