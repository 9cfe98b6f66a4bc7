"""The tokeniser BM25, Jaccard overlap and token counts share (the hashing embedder keeps its own stop words).

Runs on every hook call, so it is one precompiled regex and one frozenset
lookup per token. Tokens are case-folded runs of Unicode letters and digits
(``[^\\W_]+``): "300", "aisle", "café" and "東京" are tokens; underscores and
apostrophes split ("don't" -> "don", "t", both stop words).
"""

from __future__ import annotations

import math
import re
from collections.abc import Set

_WORD = re.compile(r"[^\W_]+")

# NLTK's English stop-word list, minus the apostrophe forms the regex can never
# produce ("don't" becomes "don" + "t", which are listed on their own).
STOP_WORDS: frozenset[str] = frozenset(
    """
    a about above after again against ain all am an and any are aren as at
    be because been before being below between both but by can couldn d did
    didn do does doesn doing don down during each few for from further had
    hadn has hasn have haven having he her here hers herself him himself his
    how i if in into is isn it its itself just ll m ma me mightn more most
    mustn my myself needn no nor not now o of off on once only or other our
    ours ourselves out over own re s same shan she should shouldn so some
    such t than that the their theirs them themselves then there these they
    this those through to too under until up ve very was wasn we were weren
    what when where which while who whom why will with won wouldn y you your
    yours yourself yourselves
    """.split()
)


def stem(word: str) -> str:
    """A light English suffix stripper: plurals, -ing, -ed (seats → seat, named → name).

    Deliberately conservative (no Porter step 2–5): it merges the inflections a
    memory query and a memory entry most often disagree on, and nothing else.
    Words of three letters or fewer and numbers are left alone.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("sses"):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("eed"):
        return word[:-1]  # agreed → agree, not agr
    for suffix in ("ing", "ed"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            if word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]  # stopped → stopp → stop
            elif (word.endswith(("at", "bl", "iz")) and not _LONG_AT.search(word)) or _short_cvc(word) \
                    or word.endswith("v"):
                # named → name, created → create (Porter step 1b); eating → eat, seated → seat; no English word
                # ends in v: driving → drive, arrived → arrive, served → serve
                word += "e"
            break
    return word


_VOWELS = frozenset("aeiou")
# a stem whose "at" closes a long vowel with no silent e after it: eat, seat, heat, treat, repeat, boat, float, coat
# (not create, which keeps its e)
_LONG_AT = re.compile(r"(?:(?<!cr)eat|oat)$")


def _short_cvc(word: str) -> bool:
    """A three-letter consonant-vowel-consonant stem (nam, lik, mov) that lost a silent e."""
    return (len(word) == 3 and word[0] not in _VOWELS and word[1] in _VOWELS
            and word[2] not in _VOWELS and word[2] not in "wxy")


_STEMS: dict[str, str] = {}


def _stem_cached(word: str) -> str:
    s = _STEMS.get(word)
    if s is None:
        s = stem(word)
        if len(_STEMS) < 500_000:
            _STEMS[word] = s
    return s


def tokenize(text: str, stop: bool = True, stemming: bool = True) -> list[str]:
    """Case-folded, lightly stemmed word tokens; English stop words dropped unless ``stop=False``."""
    words = _WORD.findall(text.casefold())
    if stop:
        words = [w for w in words if w not in STOP_WORDS]
    if stemming:
        words = [_stem_cached(w) for w in words]
    return words


def count_tokens(text: str) -> int:
    """Approximate model-token count: ``ceil(len/4)``, at least 1; 0 for empty text."""
    if not text:
        return 0
    return max(1, math.ceil(len(text) / 4))


def token_set(text: str) -> frozenset[str]:
    """The set of (stop-word-free) tokens of ``text``, the unit of Jaccard overlap."""
    return frozenset(tokenize(text))


def jaccard(a: Set[str], b: Set[str]) -> float:
    """|a ∩ b| / |a ∪ b|; 0.0 when both sets are empty."""
    if not a and not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)
