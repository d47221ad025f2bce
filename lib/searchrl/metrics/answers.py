"""Answer metrics shared by rewards and evaluation: SQuAD-style normalisation, EM, cover-EM and word-level F1.

All metrics take one prediction and one or several golden answers and return the best score over the golden answers,
as a float in [0, 1]. A missing prediction (None) scores 0.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
# HotpotQA's official evaluator (and FlashRAG's, and R1-Searcher's): a yes/no/noanswer prediction or reference only
# ever matches itself, because word overlap between "no" and "no it is not" would otherwise give partial credit for
# the opposite answer. R-Search's F1 has no such rule (`f1_score(..., closed_answers_match_only_themselves=False)`).
_CLOSED_ANSWERS = frozenset({"yes", "no", "noanswer"})


def normalize_answer(text: str) -> str:
    """Lowercase, drop ASCII punctuation, remove the articles a/an/the and collapse whitespace (SQuAD order)."""
    if not isinstance(text, str):
        raise TypeError(f"normalize_answer expects a string, got {type(text).__name__}")
    text = text.lower().translate(_PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def as_answer_list(golden_answers: str | Sequence[str]) -> list[str]:
    """One golden answer or several, as a non-empty list of strings (a clear error for anything else)."""
    if isinstance(golden_answers, str):
        return [golden_answers]
    if not isinstance(golden_answers, Sequence) or isinstance(golden_answers, bytes):
        raise TypeError(f"golden_answers must be a string or a list of strings, got {type(golden_answers).__name__}")
    answers = [str(a) for a in golden_answers]
    if not answers:
        raise ValueError("golden_answers is empty: every question needs at least one reference answer")
    return answers


def exact_match(prediction: str | None, golden_answers: str | Sequence[str]) -> float:
    """1.0 when the normalised prediction equals a normalised golden answer, else 0.0.

    A golden answer that normalises to nothing (e.g. "The") is compared as written, case aside: otherwise an empty
    answer would match it, and a reward built on EM would pay for answering nothing."""
    answers = as_answer_list(golden_answers)
    if prediction is None:
        return 0.0
    predicted = normalize_answer(prediction)
    for gold in answers:
        gold_norm = normalize_answer(gold)
        if gold_norm and predicted == gold_norm:
            return 1.0
        if not gold_norm and gold.strip() and prediction.strip().lower() == gold.strip().lower():
            return 1.0
    return 0.0


def _contains_word_sequence(words: list[str], sequence: list[str]) -> bool:
    width = len(sequence)
    return any(words[i : i + width] == sequence for i in range(len(words) - width + 1))


def cover_exact_match(
    prediction: str | None, golden_answers: str | Sequence[str], *, whole_words: bool = True
) -> float:
    """1.0 when a normalised golden answer occurs inside the normalised prediction, else 0.0.

    With `whole_words` (default) the golden answer must appear as a contiguous sequence of whole words, so "1" does
    not cover "1990" and "art" does not cover "martial arts"; `whole_words=False` gives the plain substring test used
    by FlashRAG. A golden answer that normalises to nothing (e.g. "The") never covers anything.
    """
    answers = as_answer_list(golden_answers)
    if prediction is None:
        return 0.0
    predicted = normalize_answer(prediction)
    for gold in answers:
        gold_norm = normalize_answer(gold)
        if not gold_norm:
            continue
        if whole_words:
            if _contains_word_sequence(predicted.split(), gold_norm.split()):
                return 1.0
        elif gold_norm in predicted:
            return 1.0
    return 0.0


def word_f1(predicted: str, gold: str, *, closed_answers_match_only_themselves: bool = True) -> float:
    """Word-level F1 between two already normalised strings (the closed-answer rule is on unless turned off)."""
    closed = predicted in _CLOSED_ANSWERS or gold in _CLOSED_ANSWERS
    if closed_answers_match_only_themselves and closed and predicted != gold:
        return 0.0
    predicted_words, gold_words = predicted.split(), gold.split()
    overlap = sum((Counter(predicted_words) & Counter(gold_words)).values())
    if overlap == 0:
        return 0.0
    # 2*IN / (PN + RN): R1-Searcher eq. 4, identical to the harmonic mean of word precision and recall.
    return 2.0 * overlap / (len(predicted_words) + len(gold_words))


def f1_score(prediction: str | None, golden_answers: str | Sequence[str], *,
             closed_answers_match_only_themselves: bool = True) -> float:
    """Word-level F1 between the normalised prediction and the best-matching normalised golden answer.

    A yes/no/noanswer prediction or golden answer scores 0 unless the other side is the same word (HotpotQA's
    evaluator; off for R-Search's F1, which scores "no" against "no it is not" 0.4).
    """
    answers = as_answer_list(golden_answers)
    if prediction is None:
        return 0.0
    predicted = normalize_answer(prediction)
    return max(word_f1(predicted, normalize_answer(gold),
                       closed_answers_match_only_themselves=closed_answers_match_only_themselves) for gold in answers)


def word_count(text: str | None) -> int:
    """Words in an answer as written (whitespace-separated), the unit of R1-Searcher++'s 10-word limit."""
    return 0 if text is None else len(text.split())


__all__ = ["as_answer_list", "cover_exact_match", "exact_match", "f1_score", "normalize_answer", "word_count", "word_f1"]
