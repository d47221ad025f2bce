"""Web-search results as text: the summarisers that shorten long pages (R1-Searcher 4.4, R1-Searcher++ 6.2 have a
model summarise them), and the readers of API answers and downloaded pages."""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

Summarizer = Callable[[str, str], str]
"""(question, text) -> a shorter text keeping what bears on the question."""

# ---- summarisers -------------------------------------------------------------------------------------------------

_WORD = re.compile(r"\w+")
_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")
# Words that say nothing about what a query is after; they would make every sentence look relevant.
_FILLER = frozenset({"a", "an", "the", "of", "in", "on", "at", "to", "for", "from", "by", "with", "and", "or", "is",
                     "are", "was", "were", "be", "been", "what", "who", "whom", "whose", "which", "when", "where",
                     "why", "how", "did", "do", "does", "that", "this", "it", "its", "as"})


def _content_words(text: str) -> set[str]:
    return {word for word in _WORD.findall(text.lower()) if word not in _FILLER}


def cut_words(text: str, max_words: int) -> str:
    """`text` cut to its first `max_words` words (whitespace between them normalised only when a cut is made)."""
    words = text.split()
    return text if len(words) <= max_words else " ".join(words[:max_words])


def keep_relevant_sentences(question: str, text: str, max_words: int) -> str:
    """The sentences of `text` sharing most words with `question`, up to `max_words` words, in their page order.

    Ties go to the earlier sentence; a best sentence longer than the whole budget is cut to it.
    """
    sentences = [s.strip() for s in _SENTENCE_BREAK.split(text) if s and s.strip()]
    wanted = _content_words(question)
    ranked = sorted(range(len(sentences)), key=lambda i: (-len(wanted & _content_words(sentences[i])), i))
    chosen: list[int] = []
    used = 0
    for index in ranked:
        size = len(sentences[index].split())
        if used + size <= max_words:
            chosen.append(index)
            used += size
    if not chosen and sentences:
        return cut_words(sentences[ranked[0]], max_words)
    return " ".join(sentences[i] for i in sorted(chosen))


@dataclass(frozen=True)
class OverlapSummarizer:
    """The default summariser: `keep_relevant_sentences` with a word budget; no model, deterministic."""

    max_words: int = 200

    def __call__(self, question: str, text: str) -> str:
        """The sentences of `text` most about `question`, at most `max_words` words."""
        return keep_relevant_sentences(question, text, self.max_words)


SUMMARY_INSTRUCTION = (
    "You are helping someone answer a question by searching the web. Below is a page that one of their searches "
    "found. In at most {max_words} words, write down what the page says that helps with the search, keeping names, "
    "dates and numbers exactly as the page gives them and leaving out everything else. If the page says nothing "
    "that helps, write: nothing relevant.\n\nSearch: {question}\n\nPage:\n{text}"
)


class ModelSummarizer:
    """Summarises long pages with a local causal LM and its tokenizer (e.g. from `searchrl.models.load_policy`).

    Greedy decoding of at most `max_new_tokens`; the page is cut to its first `max_page_tokens` tokens first so that
    one huge page cannot exhaust memory. The chat template is used when the tokenizer has one. Calls are serialised
    (a tokenizer and a model on one device serve one caller at a time).
    """

    def __init__(self, model: Any, tokenizer: Any, *, max_words: int = 200, max_new_tokens: int = 256,
                 max_page_tokens: int = 2048) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_words = max_words
        self.max_new_tokens = max_new_tokens
        self.max_page_tokens = max_page_tokens
        self._lock = threading.Lock()

    def prompt(self, question: str, text: str) -> str:
        """The full prompt the model continues: instruction, search, page (cut), in the chat template if any."""
        page_ids = self.tokenizer(text, add_special_tokens=False)["input_ids"][:self.max_page_tokens]
        page = self.tokenizer.decode(page_ids, skip_special_tokens=True)
        request = SUMMARY_INSTRUCTION.format(max_words=self.max_words, question=question, text=page)
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template([{"role": "user", "content": request}], tokenize=False,
                                                      add_generation_prompt=True)
        return request + "\n\nSummary:"

    def __call__(self, question: str, text: str) -> str:
        """The model's summary of `text` for the search `question` (new tokens only, special tokens dropped)."""
        with self._lock:
            prompt = self.prompt(question, text)
            templated = bool(getattr(self.tokenizer, "chat_template", None))  # the template already adds BOS
            inputs = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=not templated)
            inputs = inputs.to(self.model.device)
            pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else \
                self.tokenizer.eos_token_id
            output = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False,
                                         pad_token_id=pad)
            new_tokens = output[0, inputs["input_ids"].shape[1]:]
            return self.tokenizer.decode(new_tokens, skip_special_tokens=True).strip()


# ---- reading answers and pages ----------------------------------------------------------------------------------

MISSING = object()


def lookup(record: Any, paths: str) -> Any:
    """The value at the first of the '|'-separated dotted `paths` present in `record`, or `MISSING`."""
    for path in paths.split("|"):
        value = record
        for part in path.strip().split("."):
            if not isinstance(value, Mapping) or part not in value:
                value = MISSING
                break
            value = value[part]
        if value is not MISSING:
            return value
    return MISSING


_TAG = re.compile(r"<[^>]+>")


def plain_text(fragment: Any) -> str:
    """A snippet as plain text: tags (the <strong> highlights APIs add) removed, entities decoded, spaces collapsed."""
    if not isinstance(fragment, str):
        return ""
    return " ".join(html.unescape(_TAG.sub("", fragment)).split())


class _PageText(HTMLParser):
    """Collects the visible text of an HTML page, one line per block, without scripts, styles or page chrome."""

    _HIDDEN = frozenset({"script", "style", "noscript", "head", "template", "svg", "nav", "footer"})
    _BLOCKS = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
                         "blockquote", "pre", "table", "ul", "ol", "dd", "dt"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hidden = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in self._HIDDEN:
            self.hidden += 1
        elif tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in self._BLOCKS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)

    def text(self) -> str:
        lines = (" ".join(line.split()) for line in "".join(self.parts).split("\n"))
        return "\n".join(line for line in lines if line)


def page_text(body: bytes, content_type: str) -> str:
    """The readable text of a downloaded page (HTML or plain text); "" for anything else (PDF, images)."""
    charset = re.search(r"charset=([\w-]+)", content_type or "")
    try:
        decoded = body.decode(charset.group(1) if charset else "utf-8", "replace")
    except LookupError:  # a charset Python does not know: most of such a page still reads as UTF-8
        decoded = body.decode("utf-8", "replace")
    kind = (content_type or "text/html").split(";")[0].strip().lower()
    if kind == "text/plain":
        return decoded
    if kind not in ("text/html", "application/xhtml+xml"):
        return ""
    parser = _PageText()
    parser.feed(decoded)
    parser.close()
    return parser.text()


__all__ = ["MISSING", "SUMMARY_INSTRUCTION", "ModelSummarizer", "OverlapSummarizer", "Summarizer", "cut_words",
           "keep_relevant_sentences", "lookup", "page_text", "plain_text"]
