"""R1-Searcher++ (Song et al. 2025): internal-knowledge spans, external searches, and a \\boxed{} final answer."""

from __future__ import annotations

import re

from searchrl.protocols.base import OBS_MARK, Parsed, SearchProtocol, closed_spans, looks_garbled, nonempty

# Appendix B, "System Prompt for Generation with Internal and External". The extracted text lost its line breaks;
# they are put back before the numbered tools and the "Remember" items, where the list structure shows them. The
# PDF's curly quotes around the formats are the backticks of the original and "…" is written "...".
GENERATION_PROMPT = (
    "You are a reasoning assistant. When tackling a question, you should first thinks about the reasoning process "
    "in the mind and then provides the final answer. You should break down the original complex question into "
    "straightforward sub-questions and address them step by step. For each sub-question, You MUST choose one of "
    "the following two tools to solve it:\n"
    "1. **Internal Reasoning Elaboration:**If you determine your existing knowledge is sufficient to answer the "
    "sub-question, you **should choose** this tool to answer the sub-question directly: "
    "`<|begin_internal_answer|>your structured thought and answer here <|end_internal_answer|>`. **Use it "
    "whenever you rely solely on internal information** for a significant reasoning step.\n"
    "2. **External Search:**If you determine that your internal knowledge is insufficient, potentially outdated, "
    "or requires verification with external, up-to-date information to answer the sub-question, you MUST initiate "
    "a web search using the following format: `<|begin_external_search|>your search query here "
    "<|end_external_search|>`. The system will then search and provide results in the format: "
    "`<|begin_search_result|>...search results... <|end_search_result|>`. The results will assist you in answering "
    "the sub-question.\n"
    "Remember:\n"
    "- Whenever you encounter the sub-question you need to elaborate on, verify, or research further, you should "
    "**assess** if your internal knowledge is adequate. **Prioritize leveraging your internal knowledge.**\n"
    "- Use `<|begin_internal_answer|>... <|end_internal_answer|>` **to demonstrate your reasoning steps** when "
    "relying on internal knowledge.\n"
    "- Use `<|begin_external_search|>... <|end_external_search|>` **only** when external information is genuinely "
    "necessary.\n"
    "- Wait for the system to provide `<|begin_search_result|>... <|end_search_result|>`. **Do not** generate these "
    "result tags yourself.\n"
    "- After performing the web search or demonstrating internal reasoning, continue towards the final answer.\n"
    "Please answer the following question. You must adhere to all instructions above regarding tool usage. Provide "
    "your final answer in the format \\boxed{YOUR_ANSWER}. Question: {question}"
)


BOXED = "\\boxed{"

_SYMBOLS = {
    "<|begin_internal_answer|>": "I",
    "<|end_internal_answer|>": "i",
    "<|begin_external_search|>": "E",
    "<|end_external_search|>": "e",
}
# The format rule of section 4.2.1 (eq. 3), structural part: a query is enclosed in the external-search tags and
# is not empty; search results only ever follow a query ("prohibited from generating document content directly
# without first invoking retrieval"). Ours, beyond eq. 3: internal-knowledge spans must be closed and not empty (the
# paper's rule names only the search tags; an unclosed span would otherwise hide the answer from the parser).
# Free text between.
_GRAMMAR = re.compile(r"(?:x|Ixi|ExeO)*")


def last_boxed(text: str) -> tuple[str, int] | None:
    """The content of the last \\boxed{...} whose braces balance, and where it starts; None when there is none.

    Braces nest (\\boxed{\\frac{1}{2}} or \\boxed{\\text{b}}), so the close is found by counting, not by the first
    "}". One pass pairs every brace, so even text full of unclosed boxes is read in linear time.
    """
    closing: dict[int, int] = {}  # position of "{" -> position of its matching "}"
    stack: list[int] = []
    for pos, ch in enumerate(text):
        if ch == "{":
            stack.append(pos)
        elif ch == "}" and stack:
            closing[stack.pop()] = pos
    start = text.rfind(BOXED)
    while start >= 0:
        brace = start + len(BOXED) - 1
        if brace in closing:
            return text[brace + 1 : closing[brace]], start
        start = text.rfind(BOXED, 0, start)  # unbalanced (cut off): an earlier box may still be whole
    return None


class R1SearcherPPProtocol(SearchProtocol):
    """R1-Searcher++'s protocol. The final answer is not a tag pair but \\boxed{...} in free text."""

    name = "r1_searcher_pp"
    query_open, query_close = "<|begin_external_search|>", "<|end_external_search|>"
    obs_open, obs_close = "<|begin_search_result|>", "<|end_search_result|>"
    internal_open, internal_close = "<|begin_internal_answer|>", "<|end_internal_answer|>"
    # Descriptive only: the answer opens with "\boxed{" and ends at its balancing "}", which no plain search finds.
    answer_open, answer_close = BOXED, "}"
    system_prompt = GENERATION_PROMPT
    instruction_role = "user"  # the prompt ends in "Question:", so the question is part of the same turn
    obs_inner_lead = "\n"
    obs_inner_trail = "\n"

    @property
    def stop_strings(self) -> list[str]:
        """Only a closed search ends a turn early. A "}" stop would cut every answer at its first brace, so the
        final turn runs to end-of-sequence (or the length limit), as the paper's free-text answers do."""
        return [self.query_close]

    def render_finish(self, reasoning: str, answer: str, evidence: list[str]) -> str:
        """Free text that names the answer in \\boxed{} where the reasoning reaches it."""
        return reasoning.replace("{answer}", f"{self.answer_open}{answer}{self.answer_close}")

    def parse(self, text: str) -> Parsed:
        """Queries, internal spans, the last \\boxed{} answer, and the format rule of eq. 3."""
        view = self.model_view(text)
        boxed = last_boxed(view)
        answer = boxed[0].strip() if boxed is not None and OBS_MARK not in boxed[0] else None
        format_ok = (
            _GRAMMAR.fullmatch(self.symbolize(view, _SYMBOLS)) is not None
            # "when the reasoning process finishes ... the final answer must be enclosed within boxed{}": a
            # non-empty box after the last search result
            and bool(answer)
            and boxed[1] > view.rfind(OBS_MARK)
            and not looks_garbled(view.replace(OBS_MARK, " "))  # "should not contain any garbled content"
        )
        return Parsed(
            queries=nonempty(closed_spans(view, self.query_open, self.query_close)),
            answer=answer,
            internal=nonempty(closed_spans(view, self.internal_open, self.internal_close)),
            format_ok=format_ok,
        )
