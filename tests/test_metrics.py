"""Answer metrics, checked on hand-worked examples (SQuAD normalisation; R1-Searcher eq. 4 for F1)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from searchrl.metrics.answers import (
    as_answer_list,
    cover_exact_match,
    exact_match,
    f1_score,
    normalize_answer,
    word_count,
)


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("The Cat, an  Animal.", "cat animal"),  # articles, punctuation, spacing
        ("  A\tBanana\n", "banana"),  # the article "a" goes, the a's inside "banana" stay
        ("Eiffel-Tower", "eiffeltower"),  # punctuation is deleted, not replaced by a space (SQuAD)
        ("THEATRE of the Absurd", "theatre of absurd"),  # "the" only as a whole word
        ("", ""),
    ],
)
def test_normalize_answer(raw, normalised):
    assert normalize_answer(raw) == normalised


def test_normalize_answer_rejects_non_strings():
    with pytest.raises(TypeError, match="expects a string"):
        normalize_answer(None)


def test_golden_answers_str_or_list_and_never_empty():
    assert as_answer_list("Paris") == ["Paris"]
    assert as_answer_list(("Paris", "paris, France")) == ["Paris", "paris, France"]
    with pytest.raises(ValueError, match="empty"):
        as_answer_list([])
    with pytest.raises(TypeError, match="string or a list"):
        as_answer_list(3)


def test_exact_match_takes_the_best_golden_answer():
    assert exact_match("the Paris!", "Paris") == 1.0
    assert exact_match("Paris", ["London", "paris"]) == 1.0
    assert exact_match("Paris France", ["Paris"]) == 0.0
    assert exact_match(None, ["Paris"]) == 0.0


def test_an_empty_answer_never_matches_a_golden_answer_that_normalises_to_nothing():
    # "The" normalises to "", as an empty answer does: EM would otherwise pay for answering nothing
    assert exact_match("", ["The"]) == 0.0 and exact_match("  ", ["The"]) == 0.0
    assert exact_match("the", ["The"]) == 1.0  # written as the golden answer is (case aside): still a match
    assert exact_match("", ["The", "Paris"]) == 0.0 and exact_match("paris", ["The", "Paris"]) == 1.0


def test_cover_exact_match_whole_words_versus_substring():
    # golden answer inside the prediction as a word sequence
    assert cover_exact_match("He was born in Paris, France.", "paris france") == 1.0
    assert cover_exact_match("born in 1990", ["1990"]) == 1.0
    # "199" is a substring of "1990" but not a word of it: whole-word CEM says no, FlashRAG's substring CEM says yes
    assert cover_exact_match("born in 1990", "199") == 0.0
    assert cover_exact_match("born in 1990", "199", whole_words=False) == 1.0
    # word order matters: the golden answer is a contiguous sequence
    assert cover_exact_match("France Paris", "Paris France") == 0.0
    # a golden answer that normalises to nothing never covers (else "" would be in everything)
    assert cover_exact_match("anything", "The") == 0.0
    assert cover_exact_match("anything", "The", whole_words=False) == 0.0
    assert cover_exact_match(None, "Paris") == 0.0


def test_f1_by_hand():
    # R1-Searcher eq. 4: 2*IN/(PN+RN). "barack obama jr" vs "barack obama": IN=2, PN=3, RN=2 -> 4/5
    assert f1_score("Barack Obama Jr.", "Barack Obama") == pytest.approx(0.8)
    # words counted with multiplicity: "cat cat" vs "cat": IN=1, PN=2, RN=1 -> 2/3
    assert f1_score("the cat, the cat", "cat") == pytest.approx(2 / 3)
    # best over golden answers: "new york" vs "new york city" -> 2*2/(2+3) = 0.8, vs "nyc" -> 0
    assert f1_score("New York", ["NYC", "New York City"]) == pytest.approx(0.8)
    assert f1_score("Berlin", "Paris") == 0.0
    assert f1_score(None, "Paris") == 0.0
    assert f1_score("", "Paris") == 0.0


def test_f1_yes_no_answers_only_match_themselves():
    # overlap of "no" with "no it is not" would give 2*1/(1+4) = 0.4; the FlashRAG/SQuAD rule makes it 0
    assert f1_score("no", "no it is not") == 0.0
    assert f1_score("no it is not", "no") == 0.0
    assert f1_score("Yes.", "yes") == 1.0
    assert f1_score("noanswer", "no answer") == 0.0


def test_word_count_counts_the_answer_as_written():
    assert word_count("The city of Paris, France") == 5
    assert word_count("") == 0
    assert word_count(None) == 0


# ------------------------------------------------------------------------------------------------ properties

_words = st.lists(st.sampled_from(["the", "a", "Paris", "paris,", "France", "yes", "no", "1990", "city"]), max_size=6)
_answers = _words.map(" ".join)


@given(prediction=_answers, golden=st.lists(_answers, min_size=1, max_size=3))
def test_metric_ordering(prediction, golden):
    """EM implies cover-EM (when the golden answer is not empty after normalisation) and F1 = 1; all lie in [0, 1]."""
    em, cem, f1 = exact_match(prediction, golden), cover_exact_match(prediction, golden), f1_score(prediction, golden)
    assert {em, cem} <= {0.0, 1.0} and 0.0 <= f1 <= 1.0
    if em and normalize_answer(prediction):
        assert cem == 1.0 and f1 == 1.0
    if cover_exact_match(prediction, golden):
        assert cover_exact_match(prediction, golden, whole_words=False) == 1.0
