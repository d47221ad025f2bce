"""Invented words for the synthetic world.

Every proper name in the world is built from syllables, so a language model cannot know any fact about it from
pretraining: it has to search. Words are drawn in bulk with numpy (a million-passage world needs hundreds of
thousands of them) and deduplicated in draw order, which keeps the result a pure function of the seed.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

# Short, pronounceable syllables (consonant + vowel, sometimes a closing consonant) keep names to a few tokens,
# which matters for a small reader model that has to copy them. A few clusters ("vr", "zh", "kv") make the words
# look foreign, so they rarely collide with real names.
_ONSETS = ["b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "b", "d", "k", "l", "m", "n", "r", "s", "t", "v", "br", "dr", "kr", "tr", "st", "th", "vr", "zh", "kv", "sk"]
_VOWELS = ["a", "e", "i", "o", "u", "a", "e", "i", "o", "u", "a", "e", "o", "ei", "ou"]
_CODAS = ["", "", "", "", "", "", "n", "r", "l", "s", "m", "k", "x", "nd", "rn", "st"]  # word-final syllable
_INNER_CODAS = ["", "", "", "", "", "n", "r", "l", "s"]  # a syllable inside a word closes lightly, if at all
_FEMININE_ENDINGS = ["a", "ia", "elle", "ine", "ara", "eth"]
_MASCULINE_ENDINGS = ["or", "an", "us", "ek", "o", "im"]


def _syllables(rng: np.random.Generator, n: int, codas: list[str] = _CODAS) -> list[str]:
    """`n` random onset+vowel+coda syllables."""
    onsets = rng.integers(0, len(_ONSETS), n).tolist()
    vowels = rng.integers(0, len(_VOWELS), n).tolist()
    ends = rng.integers(0, len(codas), n).tolist()
    return [_ONSETS[o] + _VOWELS[v] + codas[c] for o, v, c in zip(onsets, vowels, ends)]


def invented_words(
    rng: np.random.Generator, n: int, *, forbidden: Iterable[str] = (), min_len: int = 5, max_len: int = 11
) -> list[str]:
    """`n` distinct capitalised invented words (mostly two syllables), none in `forbidden` (case-insensitive).

    Words are drawn in batches until enough distinct ones exist; the order of first appearance is kept so the
    result depends on the seed only. The share of three-syllable words grows with `n`, because large worlds
    need more words than two syllables can spell.
    """
    banned = {w.lower() for w in forbidden}
    chosen: dict[str, None] = {}  # an ordered set: iteration order must not depend on string hashing
    share_long = min(0.9, 0.15 + n / 200_000)
    while len(chosen) < n:
        batch = max(64, int((n - len(chosen)) * 1.3))
        first, second = _syllables(rng, batch, _INNER_CODAS), _syllables(rng, batch, _INNER_CODAS)
        third = _syllables(rng, batch)
        long_words = (rng.random(batch) < share_long).tolist()
        for a, b, c, long_word in zip(first, second, third, long_words):
            # Inner syllables close lightly or not at all, which keeps the words pronounceable.
            word = (a + _open(b) + c if long_word else a + c).capitalize()
            if len(word) < min_len or len(word) > max_len or word.lower() in banned or word in chosen:
                continue
            # Triple letters ("Doooth") read as typos; skip them.
            if any(word[i] == word[i + 1] == word[i + 2] for i in range(len(word) - 2)):
                continue
            chosen[word] = None
            if len(chosen) == n:
                break
        share_long = min(0.95, share_long + 0.2)  # two-syllable space running out: lean on longer words
    return list(chosen)


def _open(syllable: str) -> str:
    """The syllable without its closing consonant ("Velora", not "Velnrora")."""
    return syllable.rstrip("nrls") or syllable


def gendered_given_names(stems: list[str], rng: np.random.Generator) -> tuple[list[str], list[str]]:
    """Split invented stems into feminine and masculine given names by adding a gendered ending.

    The endings make the grammatical gender of a name visible, which keeps "son"/"daughter" and the pronouns
    in the passages consistent for a reader model.
    """
    half = len(stems) // 2
    fem = rng.integers(0, len(_FEMININE_ENDINGS), half).tolist()
    mas = rng.integers(0, len(_MASCULINE_ENDINGS), len(stems) - half).tolist()
    feminine = [_trim_vowel(s) + _FEMININE_ENDINGS[i] for s, i in zip(stems[:half], fem)]
    masculine = [_trim_vowel(s) + _MASCULINE_ENDINGS[i] for s, i in zip(stems[half:], mas)]
    return _dedupe(feminine), _dedupe(masculine)


def _trim_vowel(stem: str) -> str:
    """Drop trailing vowels so that an ending does not produce "Kaea" or "Dorouo"."""
    trimmed = stem.rstrip("aeiou")
    return trimmed if len(trimmed) >= 3 else stem


def _dedupe(words: list[str]) -> list[str]:
    return list(dict.fromkeys(words))
