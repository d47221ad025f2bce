"""The answer format of the baselines that have no tag protocol (naive, cot, rag, ircot), and its parser.

A baseline asks for its final answer as a line "Answer: <a few words>"; IRCoT ends its reasoning with a sentence
"So the answer is: <answer>." Both are read by one parser, `parse_answer`, which also accepts protocol-style
`<answer>...</answer>` tags (small models copy whatever tags they have seen). The parser takes the last answer
statement that holds some text, so a model that drafts an answer and then corrects itself is scored on the
correction. Nothing else is guessed: a completion with no answer statement has no answer (None) and is not
format-valid, exactly as a protocol completion without its answer tag.

`AnswerFormat` wraps the parser as a `SearchProtocol`, so that `searchrl.evaluation.evaluate.score_trajectory` builds the
baselines' per-question records, and every metric is computed by the same code as for the search policies.
"""

from __future__ import annotations

import re

from searchrl.protocols.base import Parsed, SearchProtocol

# What the instructions of naive, cot and rag ask for; the parser accepts more than this.
ANSWER_PREFIX = "Answer:"
# IRCoT's closing sentence.
ANSWER_SENTENCE = "So the answer is:"

_TAGGED = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
# "Answer: x", "Final answer: x", "**Answer:** x" at the start of a line.
_LINE = re.compile(r"^[ \t>*#_-]*(?:final[ \t]+)?answer[ \t*_]*[:：]", re.IGNORECASE | re.MULTILINE)
# "... the answer is: x", "the final answer is x" anywhere.
_SENTENCE = re.compile(r"\bthe[ \t]+(?:final[ \t]+)?answer(?:[ \t]+to[ \t]+(?:this|the)[ \t]+question)?[ \t]+is\b"
                       r"[ \t*_]*[:：]?", re.IGNORECASE)

# A period after these does not end a sentence ("St. Louis", "J. R. R. Tolkien").
_ABBREVIATION = re.compile(
    r"(?:^|[\s(\"'])(?:[A-Za-z]|Mr|Mrs|Ms|Dr|St|Jr|Sr|Mt|Ft|Gen|Col|Lt|Sgt|Capt|Prof|Rev|Co|Inc|Ltd|Corp|vs|etc)$"
)
# Dotted initials ("D.C.", "U.S.") end a sentence only when a capital letter follows.
_INITIALS = re.compile(r"(?:^|[\s(\"'])(?:[A-Za-z]\.)+[A-Za-z]$")
# Sentence-ending punctuation (closing quotes or brackets may follow) before whitespace or the end; or a newline.
_BOUNDARY = re.compile(r"[.!?]+[\"')\]]*(?=\s|$)|\n")


def first_sentence(text: str) -> str:
    """The first sentence of `text` (leading whitespace dropped): up to the first sentence-ending punctuation that
    is followed by whitespace or the end and does not close an abbreviation or an initial, or up to a newline.
    Text without such an end is returned whole (stripped)."""
    text = str(text).lstrip()
    for match in _BOUNDARY.finditer(text):
        if match.group() == "\n":
            return text[: match.start()].rstrip()
        if match.group().startswith("."):
            before, after = text[: match.start()], text[match.end():].lstrip(" \t")
            if _ABBREVIATION.search(before) or before.strip().isdigit():  # "1." numbers a list item
                continue
            if _INITIALS.search(before) and after and not after[0].isupper():
                continue
        return text[: match.end()]
    return text.rstrip()


def clean_answer(text: str) -> str:
    """An answer span as written after an answer marker, cut to its first sentence and stripped of decoration
    (markdown emphasis, quotes, a final period)."""
    span = re.sub(r"</?answer>", "", first_sentence(text), flags=re.IGNORECASE)
    previous = None
    while span != previous:  # peel decoration in any order: **"Paris".** -> Paris
        previous = span
        span = span.strip().strip("*_`").rstrip(".").strip()
        if len(span) >= 2 and span[0] == span[-1] and span[0] in "\"'":
            span = span[1:-1]
    return span


def _after(text: str, end: int) -> str:
    """What follows an answer marker: the rest of its line, or the next non-blank line when that is empty."""
    rest = text[end:]
    line, _, more = rest.partition("\n")
    if line.strip():
        return line
    for following in more.split("\n"):
        if following.strip():
            return following
    return ""


def find_answers(text: str) -> list[tuple[int, str]]:
    """Every answer statement in `text` as (position, cleaned answer), in order; empty answers left out."""
    found = [(m.start(), clean_answer(m.group(1))) for m in _TAGGED.finditer(text)]
    for pattern in (_LINE, _SENTENCE):
        found += [(m.start(), clean_answer(_after(text, m.end()))) for m in pattern.finditer(text)]
    return sorted((pos, answer) for pos, answer in found if answer)


def parse_answer(text: str) -> str | None:
    """The final answer a completion states ("Answer: x", "... the answer is: x", or <answer>x</answer>): the last
    statement that holds some text, cleaned; None when there is none. Never raises."""
    if not isinstance(text, str):
        return None
    answers = find_answers(text)
    return answers[-1][1] if answers else None


class AnswerFormat(SearchProtocol):
    """The baselines' answer format as a protocol, so evaluation scores their completions like any other.

    It never searches (no turn ends in a query): retrieval, where a baseline has any, happens outside the model's
    turn and is written into the trajectory by the baseline itself.
    """

    query_open = query_close = ""
    obs_open, obs_close = "\ue001", "\ue002"  # never in model text: nothing is cut out of a completion
    answer_open, answer_close = "", ""

    def __init__(self, name: str = "baseline", stop_strings: list[str] | None = None):
        self.name = name
        self._stop_strings = list(stop_strings or [])

    @property
    def stop_strings(self) -> list[str]:
        return list(self._stop_strings)

    def extract_query(self, segment: str) -> str | None:
        return None

    def parse(self, text: str) -> Parsed:
        answer = parse_answer(text)
        return Parsed(answer=answer, format_ok=answer is not None)


__all__ = ["ANSWER_PREFIX", "ANSWER_SENTENCE", "AnswerFormat", "clean_answer", "find_answers", "first_sentence",
           "parse_answer"]
