"""Answer metrics picked by name, including per-paper variants that score the way a paper's released code does.

Our metrics (rewards/metrics.py) follow the papers' equations with SQuAD normalisation. Where a paper's released
evaluation computes its reported numbers differently, a variant named ``<metric>:<paper>`` reproduces that
computation, so a table from the paper can be compared with ours number for number:

    score = metric("cem:r1_searcher")          # score(prediction, golden_answers) -> float in [0, 1]
    METRICS.describe()                         # every name, one line each

Side by side (all metrics take the best score over the golden answers; a None prediction scores 0):

    em               SQuAD normalisation: lowercase, delete ASCII punctuation, drop a/an/the, collapse spaces;
                     1 when the prediction equals a golden answer.
    f1               SQuAD normalisation; word-level F1; a yes/no/noanswer prediction or gold scores 0 unless the
                     other side is the same word.
    cem              SQuAD normalisation; 1 when a golden answer occurs in the prediction as a contiguous run of
                     whole words ("1" does not cover "1990").
    em:r1_searcher   R1-Searcher normalisation (below); otherwise as em (but, as the released code, an empty
                     answer matches a golden answer that normalises to nothing, such as "The").
    f1:r1_searcher   R1-Searcher normalisation; otherwise as f1 (same yes/no rule).
    cem:r1_searcher  R1-Searcher normalisation; 1 when every word of a golden answer appears somewhere among the
                     prediction's words, in any order and not necessarily adjacent (a bag-of-words test). This is
                     how R1-Searcher's released evaluation computes ACC_R (its Table 2): it reproduces the five
                     released traces to one decimal, where our cem scores them 0.8-4.8 points lower.
    f1:r_search      SQuAD normalisation; word-level F1 without the yes/no rule ("no" against "no it is not"
                     earns 0.4, ours 0), as R-Search's released evaluation computes F1.

R1-Searcher normalisation, against ours: a prediction or gold that is exactly the string "True" / "False" is read
as "yes" / "no" first; underscores become spaces; ASCII punctuation and the typographic quotes ‘ ’ ´ ` are replaced
by a space instead of deleted ("Jean-Paul" -> "jean paul", ours "jeanpaul"; "1,000" -> "1 000", ours "1000");
then lowercase, a/an/the dropped, spaces collapsed as in SQuAD.

Where the released evaluation agrees with ours, there is no variant: Search-R1's EM (and the EM R-Search reports)
normalise and compare exactly as ``em`` does. R1-Searcher++ reports F1 and an LLM judge; its repository publishes
no evaluation code, so it has no variant here.

Users add metrics like any registry entry: ``METRICS.register("my_metric", fn)`` or an import path
(``my_package.metrics:fn``) wherever a metric name is accepted.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Sequence

from searchrl.config.names import check_metric_name, metric_key
from searchrl.core.registry import Registry
from searchrl.metrics.answers import as_answer_list, cover_exact_match, exact_match, f1_score, normalize_answer, word_f1

MetricFn = Callable[[str | None, str | Sequence[str]], float]

__all__ = [
    "METRICS",
    "MetricFn",
    "cover_exact_match_r1_searcher",
    "exact_match_r1_searcher",
    "f1_score_r1_searcher",
    "f1_score_r_search",
    "mean_scores",
    "metric",
    "normalize_answer_r1_searcher",
]


# "CEM:R1-Searcher" and "cem:r1_searcher" name the same entry, as protocol names do (metric_key).
METRICS: Registry[MetricFn] = Registry("metric", normalize=metric_key)

# ---- R1-Searcher's normalisation ------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_R1S_PUNCTUATION_TO_SPACE = str.maketrans({ch: " " for ch in string.punctuation + "\u2018\u2019\u00b4`"})
_R1S_BOOLEANS = {"True": "yes", "False": "no"}
_CLOSED_ANSWERS = frozenset({"yes", "no", "noanswer"})


def normalize_answer_r1_searcher(text: str) -> str:
    """R1-Searcher's normalisation: "True"/"False" -> yes/no, punctuation to spaces, then lowercase/articles/spaces.

    The True/False reading applies only when the whole string is exactly "True" or "False" (its released code
    compares the raw string), so " True" stays the word "true".
    """
    if not isinstance(text, str):
        raise TypeError(f"normalize_answer_r1_searcher expects a string, got {type(text).__name__}")
    text = _R1S_BOOLEANS.get(text, text)
    text = text.lower().translate(_R1S_PUNCTUATION_TO_SPACE)  # "_" is ASCII punctuation, so it becomes a space too
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


# ---- the variants ---------------------------------------------------------------------------------------------


def exact_match_r1_searcher(prediction: str | None, golden_answers: str | Sequence[str]) -> float:
    """R1-Searcher's EM: equality after R1-Searcher's normalisation (punctuation to spaces, True/False as yes/no)."""
    answers = as_answer_list(golden_answers)
    if prediction is None:
        return 0.0
    predicted = normalize_answer_r1_searcher(prediction)
    return float(any(predicted == normalize_answer_r1_searcher(gold) for gold in answers))


def f1_score_r1_searcher(prediction: str | None, golden_answers: str | Sequence[str]) -> float:
    """R1-Searcher's F1: word F1 after R1-Searcher's normalisation, with the same yes/no rule as ours."""
    answers = as_answer_list(golden_answers)
    if prediction is None:
        return 0.0
    predicted = normalize_answer_r1_searcher(prediction)
    return max(word_f1(predicted, normalize_answer_r1_searcher(gold), closed_answers_match_only_themselves=True)
               for gold in answers)


def cover_exact_match_r1_searcher(prediction: str | None, golden_answers: str | Sequence[str]) -> float:
    """R1-Searcher's ACC_R: every word of a golden answer is among the prediction's words (any order, any gaps).

    Both sides go through R1-Searcher's normalisation first. Against our ``cem``: the gold's words need not be
    adjacent nor in order ("Smith, John" covers "John Smith"), and since punctuation splits words rather than
    vanishing, "Tom's Diner" covers "Tom" (ours: "toms diner" does not) while "1,000" no longer covers "1000".
    A golden answer that normalises to nothing covers nothing (the released code would credit it only against an
    equally empty prediction). R1-Searcher's evaluation sets have no such answer; a few NQ and TriviaQA aliases do.
    """
    answers = as_answer_list(golden_answers)
    if prediction is None:
        return 0.0
    predicted_words = set(normalize_answer_r1_searcher(prediction).split())
    for gold in answers:
        gold_words = normalize_answer_r1_searcher(gold).split()
        if gold_words and all(word in predicted_words for word in gold_words):
            return 1.0
    return 0.0


def f1_score_r_search(prediction: str | None, golden_answers: str | Sequence[str]) -> float:
    """R-Search's F1: SQuAD normalisation and word F1 as ours, but a yes/no answer earns partial overlap credit."""
    answers = as_answer_list(golden_answers)
    if prediction is None:
        return 0.0
    predicted = normalize_answer(prediction)
    return max(word_f1(predicted, normalize_answer(gold), closed_answers_match_only_themselves=False)
               for gold in answers)


METRICS.register("em", exact_match, doc="exact match after SQuAD normalisation")
METRICS.register("f1", f1_score, doc="word-level F1 after SQuAD normalisation (yes/no only match themselves)")
METRICS.register("cem", cover_exact_match, doc="a golden answer occurs in the prediction as whole words, in order")
METRICS.register("em:r1_searcher", exact_match_r1_searcher,
                 doc="R1-Searcher's released EM: punctuation to spaces, True/False read as yes/no")
METRICS.register("f1:r1_searcher", f1_score_r1_searcher,
                 doc="R1-Searcher's released F1: its normalisation, same yes/no rule")
METRICS.register("cem:r1_searcher", cover_exact_match_r1_searcher,
                 doc="R1-Searcher's released ACC_R (Table 2): bag-of-words cover after its normalisation")
METRICS.register("f1:r_search", f1_score_r_search,
                 doc="R-Search's released F1: SQuAD normalisation, no yes/no rule")

# ---- lookup and aggregation -----------------------------------------------------------------------------------


def metric(name: str) -> MetricFn:
    """The metric registered as ``name`` (or an import path to one); unknown names list the known ones.

    ``name:paper`` looks like an import path to the registry, so a mistyped variant ("cem:r1searcher") is caught
    here, before it would be imported as module "cem".
    """
    check_metric_name(name, METRICS)  # the schema's check, so that both say the same
    return METRICS.get(name)


def mean_scores(
    predictions: Sequence[str | None], golden_answers: Sequence[str | Sequence[str]], names: Iterable[str]
) -> dict[str, float]:
    """Each named metric's mean over the rows (predictions[i] against golden_answers[i]), in [0, 1]."""
    if len(predictions) != len(golden_answers):
        raise ValueError(f"{len(predictions)} predictions for {len(golden_answers)} golden answers; give one each")
    if not predictions:
        raise ValueError("nothing to score: no predictions")
    functions = {name: metric(name) for name in names}
    return {name: sum(fn(p, g) for p, g in zip(predictions, golden_answers)) / len(predictions)
            for name, fn in functions.items()}
