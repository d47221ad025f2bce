"""What every tag protocol provides. The rollout engine and the rewards talk to protocols through this class only.

Besides the interface, this module holds the machinery the four papers' protocols share: reading a completion as
"model text" with the observation blocks cut out (so that tags inside retrieved documents never count), turning the
model text into a string of one-letter symbols that a per-paper regular expression (its format grammar) can judge,
and the default prompt, query and observation handling that every paper uses with different tags.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from searchrl.data.schema import Finish, Search, Think

if TYPE_CHECKING:  # avoid importing the retrieval layer at run time
    from searchrl.data.schema import Doc

# Stands for one whole observation block in the model-text view. A private-use character: models do not write it,
# and any copy already in a completion is removed before scanning so that it cannot be mistaken for a block.
OBS_MARK = "\ue000"

# Symbols used in grammars besides the per-protocol tag letters: a run of non-blank model text, and an observation.
TEXT_SYMBOL = "x"
OBS_SYMBOL = "O"


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

    Subclasses set the tag attributes and `system_prompt`, and may override any method. Most subclasses only need
    `format_doc` and `parse`; prompt building, query extraction and observation framing are shared.
    """

    name: str = "base"
    query_open: str = "<search>"
    query_close: str = "</search>"
    obs_open: str = "<information>"
    obs_close: str = "</information>"
    answer_open: str = "<answer>"
    answer_close: str = "</answer>"
    system_prompt: str = ""  # contains "{question}" when the paper puts the question inside the prompt

    # Layout settings read by the shared methods below (the rollout engine needs none of them).
    # Chat role of the instruction when it already holds the question ("user": one user turn, as Search-R1 does).
    instruction_role: str = "user"
    # Base-model prompt layout; "{system}" is the instruction, "{question}" the question (plain replacement, so
    # braces elsewhere in a prompt, such as \boxed{...}, are safe).
    plain_template: str = "{system}\n\nQuestion: {question}\n"
    # Text the prompt ends with that belongs to the model's own turn (R1-Searcher pre-fills "<think>"). `parse`
    # reads completions that start right after it.
    response_prefix: str = ""
    # Framing of an observation: newlines before the open tag, inside the tags, and after the close tag.
    obs_lead: str = "\n\n"
    obs_inner_lead: str = ""
    obs_inner_trail: str = ""
    obs_trail: str = "\n\n"
    doc_separator: str = "\n"
    no_docs_text: str = "No documents were found for this query."

    @property
    def stop_strings(self) -> list[str]:
        """Strings that end one generation turn: a closed query or a closed answer."""
        return [self.query_close, self.answer_close]

    # ----------------------------------------------------------------------------------------------- prompts

    def build_prompt(self, question: str, tokenizer=None, *, chat: bool = True) -> str:
        """The full prompt text for one question (chat template applied when `chat` and the tokenizer has one)."""
        if not isinstance(question, str):
            raise TypeError(f"{self.name}: question must be a string, got {type(question).__name__}")
        question = question.strip()
        if chat and tokenizer is not None and getattr(tokenizer, "chat_template", None):
            text = tokenizer.apply_chat_template(
                self.chat_messages(question), tokenize=False, add_generation_prompt=True
            )
            return text + self.response_prefix
        return self.plain_prompt(question) + self.response_prefix

    def chat_messages(self, question: str) -> list[dict[str, str]]:
        """The chat turns for one question: the instruction as a system turn, or one turn when it holds the question."""
        if "{question}" in self.system_prompt:
            return [{"role": self.instruction_role, "content": self.system_prompt.replace("{question}", question)}]
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": question}]

    def plain_prompt(self, question: str) -> str:
        """The prompt for a model without a chat template (base models), before `response_prefix`."""
        if "{question}" in self.system_prompt:
            return self.system_prompt.replace("{question}", question) + "\n"
        return self.plain_template.replace("{system}", self.system_prompt).replace("{question}", question)

    # ------------------------------------------------------------------------------------------------ queries

    def extract_query(self, segment: str) -> str | None:
        """The query that a just-generated turn ends with, or None when the turn did not end in a closed query.

        The turn must end (trailing whitespace aside) with the query close tag and hold an open tag before it; the
        query is the stripped text between the last open tag and that close tag. "" means the model wrote a closed
        but unusable query (empty, or a stray close tag inside it): the engine answers it as invalid.
        """
        if not isinstance(segment, str):
            return None
        body = segment.rstrip()
        if not body.endswith(self.query_close):
            return None
        body = body[: len(body) - len(self.query_close)]
        start = body.rfind(self.query_open)
        if start < 0:
            return None
        query = body[start + len(self.query_open) :]
        if self.query_close in query:  # "<q>a</q> b</q>": the final close tag has no open tag of its own
            return ""
        return query.strip()

    # ------------------------------------------------------------------------------------------- observations

    def format_doc(self, index: int, doc: Doc) -> str:
        """One retrieved document as shown inside an observation (`index` counts from 1)."""
        return f"({index}){_one_line(doc.title)} {_one_line(doc.text)}".strip()

    def format_observation(self, docs: list[Doc]) -> str:
        """The exact text appended after a query: observation tags around the numbered documents."""
        if docs:
            body = self.doc_separator.join(self.format_doc(i, doc) for i, doc in enumerate(docs, start=1))
        else:
            body = self.no_docs_text
        return self.wrap_observation(body)

    def invalid_query_observation(self, reason: str) -> str:
        """The observation appended when a query is empty, unclosed or too long."""
        return self.wrap_observation(str(reason).strip())

    def observation_frame(self) -> tuple[str, str]:
        """The text before and after the documents in every observation of this protocol (where a cut observation
        is cut inside: `searchrl.data.tokenize.cut_observation`)."""
        marker = "\x00"
        head, _, tail = self.wrap_observation(marker).partition(marker)
        return head, tail

    def wrap_observation(self, body: str) -> str:
        """Frame an observation body with this protocol's tags, after removing any copy of those tags from it.

        A document that contained the close tag would end the block early and let its remaining text pass for the
        model's own; removing the tags keeps every observation one unbroken block.
        """
        body = _remove_all(body, (self.obs_open, self.obs_close, OBS_MARK))
        inner = f"{self.obs_inner_lead}{body}{self.obs_inner_trail}"
        return f"{self.obs_lead}{self.obs_open}{inner}{self.obs_close}{self.obs_trail}"

    # ------------------------------------------------------------------------------------ writing trajectories

    def render(self, steps: list[Think | Search | Finish]) -> list[tuple[str, bool]]:
        """A written trajectory (for a cold start) as (text, trainable) segments in this protocol's format.

        Thoughts and queries are the model's text (trainable); each search's documents become exactly the
        observation the rollout engine would append (not trainable); `Finish` writes the last reasoning and the
        answer. Subclasses change the layout through `render_thought`, `render_query` and `render_finish`.
        """
        segments: list[tuple[str, bool]] = []
        pending, first = "", True
        for step in steps:
            if isinstance(step, Think):
                pending += self.render_thought(step.text, first)
                first = False
            elif isinstance(step, Search):
                segments += [(pending + self.render_query(step.query), True), (self.format_observation(step.docs), False)]
                pending = ""
            elif isinstance(step, Finish):
                segments.append((pending + self.render_finish(step.reasoning, step.answer, step.evidence), True))
                pending = ""
            else:
                raise TypeError(f"render takes Think, Search and Finish steps, got {type(step).__name__}")
        return segments

    def render_thought(self, text: str, first: bool) -> str:
        """Reasoning before a search: plain text by default."""
        return f"{text} "

    def render_query(self, query: str) -> str:
        return f"{self.query_open} {query} {self.query_close}"

    def render_finish(self, reasoning: str, answer: str, evidence: list[str]) -> str:
        """The last reasoning (its `{answer}` filled in) and the answer in its tags."""
        return f"{reasoning.replace('{answer}', answer)}\n{self.answer_open} {answer} {self.answer_close}"

    # ---------------------------------------------------------------------------------------------- parsing

    def parse(self, text: str) -> Parsed:
        """Read a completion. Never raises, whatever the text."""
        raise NotImplementedError

    def model_view(self, text: str) -> str:
        """The completion with every observation block (tags included) replaced by one `OBS_MARK`.

        A block runs from an observation open tag to the next close tag, or to the end when it is never closed.
        Whatever a block holds (retrieved documents can contain anything) is invisible to the rest of parsing.
        The `response_prefix` the prompt pre-filled is put back in front when the completion does not repeat it.
        """
        text = str(text).replace(OBS_MARK, "")
        if self.response_prefix and not text.lstrip().startswith(self.response_prefix):
            text = self.response_prefix + text
        pieces: list[str] = []
        pos = 0
        while True:
            start = text.find(self.obs_open, pos)
            if start < 0:
                pieces.append(text[pos:])
                break
            pieces.append(text[pos:start])
            pieces.append(OBS_MARK)
            end = text.find(self.obs_close, start + len(self.obs_open))
            if end < 0:
                break
            pos = end + len(self.obs_close)
        return "".join(pieces)

    def symbolize(self, view: str, symbols: dict[str, str]) -> str:
        """The model view as a string of symbols, for a format grammar (a regular expression over symbols).

        Each tag in `symbols` becomes its letter, each observation `OBS_SYMBOL`, each stretch of non-blank text
        between them `TEXT_SYMBOL`; blank stretches vanish. The observation tags always get letters of their own
        ("<" and ">"), so a stray one written by the model breaks every grammar.
        """
        table = {self.obs_open: "<", self.obs_close: ">", **symbols, OBS_MARK: OBS_SYMBOL}
        splitter = re.compile("|".join(re.escape(tag) for tag in sorted(table, key=len, reverse=True)))
        out: list[str] = []
        pos = 0
        for match in splitter.finditer(view):
            if view[pos : match.start()].strip():
                out.append(TEXT_SYMBOL)
            out.append(table[match.group(0)])
            pos = match.end()
        if view[pos:].strip():
            out.append(TEXT_SYMBOL)
        return "".join(out)


# ------------------------------------------------------------------------------------------ shared text helpers


def closed_spans(view: str, open_tag: str, close_tag: str) -> list[str]:
    """Contents of every closed `open_tag ... close_tag` pair in the model view, in order, unstripped.

    Each close tag pairs with the last open tag before it, so "<a> x <a> y </a>" yields " y ". A pair that would
    enclose an observation is skipped: tags never pair across retrieved text.
    """
    pattern = re.compile(
        re.escape(open_tag) + "((?:(?!" + re.escape(open_tag) + ").)*?)" + re.escape(close_tag), re.DOTALL
    )
    return [m.group(1) for m in pattern.finditer(view) if OBS_MARK not in m.group(1)]


def nonempty(spans: list[str]) -> list[str]:
    """The stripped spans that hold some text."""
    return [s.strip() for s in spans if s.strip()]


def looks_garbled(text: str) -> bool:
    """A conservative reading of "garbled or unreadable content" (R1-Searcher rule 2, R1-Searcher++'s format rule).

    Flags what a degenerate policy produces and readable prose never holds: decoding debris (U+FFFD, control
    characters other than tab and newlines), one character repeated 40 times or more (spaces aside), and one word
    repeated 10 times or more in a row. Deliberately narrow: a false alarm costs the format reward of a good answer.
    """
    if "\ufffd" in text:
        return True
    if any(unicodedata.category(ch) == "Cc" and ch not in "\t\n\r" for ch in text):
        return True
    if re.search(r"(\S)\1{39,}", text):
        return True
    return bool(re.search(r"\b(\w+)(?:\s+\1\b){9,}", text))


def _one_line(text: str) -> str:
    """Collapse all whitespace to single spaces so that each document stays on its own line."""
    return " ".join(str(text).split())


def _remove_all(text: str, tags: tuple[str, ...]) -> str:
    """Remove every tag, repeating until none is left (removal can join halves into a new copy: "<i<i>>")."""
    text = str(text)
    changed = True
    while changed:
        changed = False
        for tag in tags:
            if tag and tag in text:
                text = text.replace(tag, "")
                changed = True
    return text
