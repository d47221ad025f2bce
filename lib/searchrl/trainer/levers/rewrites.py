"""The rewrites of R1-Searcher++'s memorization loss (section 4.2.2): which rollouts are rewritten, what a rewrite
model is asked, the extractive rewrite that needs no model, and the check a rewrite must pass to be kept.

`searchrl.trainer.levers.memorization` trains the kept rewrites; its docstring gives the choices made.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from searchrl.protocols.base import SearchProtocol

__all__ = ["EXTRACTIVE", "REWRITE_TEMPLATE", "SOURCE_PHRASES", "AnswerCheck", "Candidate", "answer_checker",
           "best_sentence", "check_rewrite", "extractive_rewrite", "observation_texts", "retrieved_documents",
           "rewrite_candidate", "rewrite_prompt", "rollout_segments"]

# Our wording of the instructions of the paper's Appendix B rewriting prompt: the documents are to be treated as the
# model's own memory, nothing may suggest they were handed over, every sub-question is answered as internal
# reasoning in the internal-answer tags, and the answer ends in \boxed{}. The tags come from the protocol.
REWRITE_TEMPLATE = (
    "You are a careful reasoning assistant with a large store of knowledge. The facts listed under 'What you know' "
    "are part of that store: you learned them long ago, and there is no difference between them and anything else "
    "you know. Never write or hint that any of this was given, provided, supplied, retrieved or looked up for this "
    "question; state it as something you remember.\n"
    "Work out the answer step by step. Split the question into simple sub-questions and take them one at a time. "
    "Answer every sub-question from memory, in this form: {internal_open} your reasoning and the answer to the "
    "sub-question {internal_close}. Every sub-question is answered this way; there is nothing to search.\n"
    "End with the final answer written as {answer_format}.\n"
    "What you know:\n{documents}\n"
    "Question: {question}"
)


def rewrite_prompt(protocol: SearchProtocol, question: str, documents: str) -> str:
    """The rewrite instruction for one question and the documents its rollout retrieved (plain replacement, so
    braces in documents or questions are safe)."""
    fills = {
        "{internal_open}": protocol.internal_open,
        "{internal_close}": protocol.internal_close,
        "{answer_format}": f"{protocol.answer_open}YOUR_ANSWER{protocol.answer_close}",
        "{documents}": str(documents).strip(),
        "{question}": str(question).strip(),
    }
    text = REWRITE_TEMPLATE
    for key in ("{internal_open}", "{internal_close}", "{answer_format}"):
        text = text.replace(key, fills[key])
    # Documents and question last, so that text inside them is never taken for a placeholder.
    head, tail = text.split("{documents}")
    return head + fills["{documents}"] + tail.replace("{question}", fills["{question}"])


def retrieved_documents(observations: Sequence[str], protocol: SearchProtocol, notices: Sequence[str] = ()) -> str:
    """The documents of a rollout's observation blocks as plain text: tags removed, repeated blocks and blocks
    that hold no document (the protocol's "nothing found" text, or one of `notices`) dropped."""
    skip = {protocol.no_docs_text.strip(), *(n.strip() for n in notices)}
    blocks: list[str] = []
    for text in observations:
        body = str(text).replace(protocol.obs_open, "").replace(protocol.obs_close, "").strip()
        if body and body not in skip and body not in blocks:
            blocks.append(body)
    return "\n".join(blocks)


def rollout_segments(completion_ids: Sequence[int], env_mask: Sequence[int], tokenizer) -> list[tuple[str, bool]]:
    """One completion as decoded runs of (text, model-written): env_mask 1 runs the model sampled, 0 runs the rollout
    engine appended (observations)."""
    runs: list[tuple[list[int], bool]] = []
    for token, sampled in zip(completion_ids, env_mask, strict=True):
        if not runs or runs[-1][1] != bool(sampled):
            runs.append(([], bool(sampled)))
        runs[-1][0].append(token)
    return [(tokenizer.decode(ids, skip_special_tokens=True), sampled) for ids, sampled in runs]


def observation_texts(completion_ids: Sequence[int], env_mask: Sequence[int], tokenizer) -> list[str]:
    """The decoded runs of environment-appended tokens (env_mask 0) of one completion, in order."""
    return [text for text, sampled in rollout_segments(completion_ids, env_mask, tokenizer) if not sampled]


EXTRACTIVE = "extractive"


_WORD = re.compile(r"[a-z0-9]+")


_STOP = frozenset(("the", "a", "an", "of", "in", "on", "at", "to", "is", "was", "were", "who", "what", "where", "when",
                   "which", "how", "did", "does", "do", "by", "for", "and", "or", "from", "with", "as", "its", "it",
                   "his", "her", "their", "this", "that", "be"))


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _without_title(sentence: str) -> str:
    """A document's first sentence without the title the layout "(k)Title text" puts before it, found as the longest
    run of leading words (at most 8) that the sentence names again later: "Ann Lee Ann Lee was born in 1871." and
    "Ann Lee Bo Lee was the father of Ann Lee." lose "Ann Lee". A title the sentence never names again stays."""
    words = sentence.split()
    bare = [w.strip(".,;:!?\"'()").lower() for w in words]  # "Lee." names "Lee" again
    for k in range(min(8, len(words) // 2), 0, -1):
        if any(bare[j:j + k] == bare[:k] for j in range(k, len(words) - k + 1)):
            return " ".join(words[k:])
    return sentence


def _document_sentences(body: str) -> list[str]:
    """The sentences of an observation body, without the "(k)" numbering and the documents' titles."""
    sentences = []
    for doc in re.split(r"(?:^|\n)\s*\(\d+\)", body):
        parts = [s.strip() for s in re.split(r"(?<=[.!?])\s+", " ".join(doc.split())) if s.strip()]
        sentences += [_without_title(parts[0]), *parts[1:]] if parts else []
    return sentences


def best_sentence(body: str, query: str, answer: str = "", reading: str = "") -> str | None:
    """The sentence of an observation that best answers `query`: most content words shared with it, half a point for
    each shared with `reading` (what the rollout wrote after the observation, which names what it took from it), and,
    when `answer` is given, one that states the answer before any that does not (first on ties; None: none)."""
    wanted, used, answer = _content_words(query), _content_words(reading), answer.strip().lower()
    best, best_score = None, -1.0
    for sentence in _document_sentences(body):
        words = _content_words(sentence)
        states_answer = bool(answer) and answer in sentence.lower()
        score = len(wanted & words) + 0.5 * len(used & words) + (100.0 if states_answer else 0.0)
        if score > best_score:
            best, best_score = sentence, score
    return best


# A sentence of the rollout's own text that speaks of searching ("I will search for...", "The results say...") has
# no place in reasoning from memory; the extractive rewrite leaves it out.
_SEARCH_TALK = re.compile(r"\b(search\w*|results?|look(?:ing|ed)? (?:it |this |that )?up|quer(?:y|ies)|retriev\w*|"
                          r"found|documents?|passages?|sources?)\b", re.IGNORECASE)


def _without_search_talk(text: str, protocol: SearchProtocol) -> str:
    """`text` without its sentences that speak of searching, but never one that holds the answer box."""
    sentences = re.split(r"(?<=[.!?])(\s+)", text)
    return "".join(s for s in sentences if protocol.answer_open in s or not _SEARCH_TALK.search(s))


def extractive_rewrite(candidate: Candidate, protocol: SearchProtocol, notices: Sequence[str] = ()) -> str:
    """The rollout rewritten without searching: its model-written text kept, each query it closed removed, and each
    observation the engine appended replaced by an internal-answer span holding the sentence that best answers that
    query and that the rollout went on to use (the last one: the sentence stating the final answer, if one does).
    Sentences that speak of searching ("I will search for...") are left out of the rollout's text, as a rewriter told
    to reason from memory would. Observations that held no document (nothing found, or one of `notices`:
    `rollout.engine.engine_notices`) are dropped. A fake result block the model wrote itself stays in the text, so
    `check_rewrite` rejects the rewrite."""
    skip = {protocol.no_docs_text.strip(), *(n.strip() for n in notices)}
    segments = candidate.segments
    observed = [i for i, (_, sampled) in enumerate(segments) if not sampled]
    out, query = [], ""
    for i, (text, sampled) in enumerate(segments):
        if sampled:
            start = text.rfind(protocol.query_open)
            if start >= 0 and i + 1 < len(segments) and not segments[i + 1][1]:  # the query this observation answers
                query = text[start + len(protocol.query_open):].replace(protocol.query_close, "")
                text = text[:start]
            out.append(_without_search_talk(text, protocol))
            continue
        body = text.replace(protocol.obs_open, "").replace(protocol.obs_close, "").strip()
        if not body or body in skip:
            continue
        reading = segments[i + 1][0].split(protocol.query_open)[0] if i + 1 < len(segments) else ""
        sentence = best_sentence(body, query, candidate.answer if i == observed[-1] else "", reading)
        if sentence:
            out.append(f" {protocol.internal_open}{sentence}{protocol.internal_close} ")
    return re.sub(r"[ \t]+", " ", "".join(out)).strip()


# Phrases that give away that knowledge came from outside (the rewrite prompt forbids them), lower case.
SOURCE_PHRASES = ("what you know", "search result", "retrieved", "information provided", "provided information",
                  "given information", "the documents", "the passage", "according to the document")


AnswerCheck = Callable[[str | None, Sequence[str]], bool]


def answer_checker(protocol: SearchProtocol) -> AnswerCheck:
    """Whether an answer is correct, as R1-Searcher++'s answer reward judges it (eq. 4: cover-EM, at most 10
    words; the `cem_10w` reward)."""
    from searchrl.rewards import make_reward

    reward = make_reward("cem_10w", protocol)
    return lambda answer, golden: reward.score_answer(answer, list(golden)) == 1.0


@dataclass
class Candidate:
    """A correct rollout that searched: what its rewrite needs."""

    prompt_ids: list[int]  # the rollout's prompt: the rewrite is trained as the answer to it
    question: str
    golden_answers: list[str]
    documents: str  # what the rollout retrieved, as plain text
    answer: str = ""  # the rollout's (correct) final answer
    segments: list[tuple[str, bool]] = field(default_factory=list)  # its text as (piece, model-written) runs


def rewrite_candidate(prompt_ids: list[int], completion: str, row: Mapping[str, Any], protocol: SearchProtocol,
                      is_correct: AnswerCheck) -> Candidate | None:
    """A Candidate when the rollout searched, retrieved documents and answered correctly, else None.

    `row` is the dataset row as the reward functions see it: `question`, `golden_answers`, and the rollout's
    `num_searches` and `retrieved_text` (observation texts) from `SearchGRPOTrainer`'s rollout.
    """
    missing = [k for k in ("question", "golden_answers", "num_searches", "retrieved_text") if k not in row]
    if missing:
        raise KeyError(f"memorization needs the columns {missing} beside each rollout: the dataset must have "
                       "`question` and `golden_answers` (searchrl.trainer.prompt_dataset makes them)")
    if not row["num_searches"] or not row["retrieved_text"]:
        return None
    golden = row["golden_answers"]
    golden = [golden] if isinstance(golden, str) else list(golden)
    answer = protocol.parse(completion).answer
    if not is_correct(answer, golden):
        return None
    segments = [(str(text), bool(sampled)) for text, sampled in row.get("rollout_segments") or []]
    return Candidate(list(prompt_ids), str(row["question"]), golden, str(row["retrieved_text"]), str(answer), segments)


def check_rewrite(text: str, finished: bool, golden_answers: Sequence[str], protocol: SearchProtocol,
                  is_correct: AnswerCheck) -> str | None:
    """Why a rewrite is rejected, or None when it is kept.

    Kept: it ended on its own (not cut by the token limit), holds no search or search-result tag, does not mention
    an outside source, answers its sub-questions in at least one closed internal-answer span, is well formed under
    the protocol's format rule, and its final answer is correct.
    """
    if not finished:
        return "cut off by rewrite_max_new_tokens"
    tags = (protocol.query_open, protocol.query_close, protocol.obs_open, protocol.obs_close)
    if any(tag in text for tag in tags):
        return "contains a search or search-result tag"
    lowered = text.lower()
    if any(phrase in lowered for phrase in SOURCE_PHRASES):
        return "mentions an outside source"
    parsed = protocol.parse(text)
    if not parsed.internal:
        return "no internal-answer span"
    if not parsed.format_ok:
        return "breaks the protocol's format"
    if not is_correct(parsed.answer, golden_answers):
        return "wrong or missing final answer"
    return None
