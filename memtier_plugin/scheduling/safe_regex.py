"""Regular expressions in Hooks' predicates: a safe subset with a bound on backtracking work.

A pattern is at most ``MAX_PATTERN`` characters of a subset with no
backreferences, lookarounds, atomic groups, possessive, nested repeats or
alternatives inside a repeat, parsed (never executed) with the stdlib regex
parser before it is compiled. Each compiled :class:`SafeRegex` knows how much of
an input it may read (at most ``MAX_INPUT`` characters, fewer when it holds an
unbounded repeat) so that one run stays within ``REGEX_WORK``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from re import _constants as _sc  # the stdlib regex parser: read, never executed
from re import _parser as _sp
from typing import Any

MAX_PATTERN = 200  # characters of a regex
MAX_INPUT = 4096  # characters of a value, a tool name or a query any operator reads
MIN_REGEX_INPUT = 256  # a regex that cannot read this much within REGEX_WORK is refused
REGEX_WORK = 1 << 18  # backtracking bound (input length x per-start work) of one regex run
REGEX_UNITS_PER_STEP = 32

_ATOMS = {_sc.LITERAL, _sc.NOT_LITERAL, _sc.ANY, _sc.IN, _sc.AT}
_REPEATS = {_sc.MAX_REPEAT, _sc.MIN_REPEAT}
_REFUSED = {
    _sc.GROUPREF: "backreferences are not allowed",
    _sc.GROUPREF_EXISTS: "conditional groups are not allowed",
    _sc.ASSERT: "lookarounds are not allowed",
    _sc.ASSERT_NOT: "lookarounds are not allowed",
    _sc.ATOMIC_GROUP: "atomic groups are not allowed",
    _sc.POSSESSIVE_REPEAT: "possessive repeats are not allowed",
}


def _simple(items) -> bool:
    """Only literals, classes and anchors (groups of them too): what a repeat may hold."""
    for op, av in items:
        if op is _sc.SUBPATTERN:
            if not _simple(av[-1]):
                return False
        elif op not in _ATOMS:
            return False
    return True


def _check_regex_tree(items) -> None:
    for op, av in items:
        if op in _REFUSED:
            raise ValueError(_REFUSED[op])
        if op is _sc.SUBPATTERN:
            _check_regex_tree(av[-1])
        elif op is _sc.BRANCH:
            for branch in av[1]:
                _check_regex_tree(branch)
        elif op in _REPEATS:
            if not _simple(av[2]):
                raise ValueError("a repeat may hold only characters and classes: nested repeats like (a+)+ and "
                                 "alternatives like (a|b)+ can take exponential time (write [ab]+)")
        elif op not in _ATOMS:
            raise ValueError(f"{str(op).lower()} is not in the allowed subset")


def _per_start(items, n: int) -> int:
    """Upper bound on backtracking work from one start position over ``n`` characters."""
    work = 1
    for op, av in items:
        if op is _sc.SUBPATTERN:
            work *= _per_start(av[-1], n)
        elif op is _sc.BRANCH:
            work *= sum(_per_start(b, n) for b in av[1])
        elif op in _REPEATS:
            work *= min(av[1], n) + 1
    return work


@dataclass(frozen=True, eq=False)  # identity: the per-event cache keys on it
class SafeRegex:
    """A compiled pattern of the safe subset and how much of an input it reads."""

    pattern: str
    compiled: re.Pattern
    max_input: int  # characters it reads (at most MAX_INPUT)
    per_start: int  # work bound per start position at max_input

    def steps(self, length: int) -> int:
        return 1 + min(length, self.max_input) * self.per_start // REGEX_UNITS_PER_STEP

    def search(self, text: str, ev, where: tuple) -> bool:
        """Whether it finds a match in ``text`` (the value at ``where``); run once per event and place (``ev``:
        the :class:`~.predicates.Event`, whose step count and per-event cache it uses)."""
        key = (self, where)
        hit = ev._cache.get(key)
        if hit is None:
            ev.steps += self.steps(len(text))
            hit = ev._cache[key] = self.compiled.search(text[: self.max_input]) is not None
        return hit


def safe_regex(pattern: Any) -> SafeRegex:
    """Check and compile ``pattern`` (case-insensitive); ValueError with the reason when it is refused.

    One object per pattern text, so hooks sharing a pattern share its per-event result.
    """
    if not isinstance(pattern, str):
        raise ValueError(f"expected a regular expression as a string, got a {type(pattern).__name__}")
    return _safe_regex(pattern)


@functools.lru_cache(maxsize=4096)
def _safe_regex(pattern: str) -> SafeRegex:
    if len(pattern) > MAX_PATTERN:
        raise ValueError(f"regular expression of {len(pattern)} characters; at most {MAX_PATTERN}")
    try:
        tree = _sp.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise ValueError(f"not a valid regular expression: {str(exc).splitlines()[0][:80]}") from None
    _check_regex_tree(list(tree))
    items = list(tree)
    if MIN_REGEX_INPUT * _per_start(items, MIN_REGEX_INPUT) > REGEX_WORK:
        raise ValueError(f"{pattern[:60]!r} could backtrack too long on {MIN_REGEX_INPUT} characters: use at most one "
                         "unbounded repeat (* + {n,}) and bound the others, e.g. {1,20}")
    lo, hi = MIN_REGEX_INPUT, MAX_INPUT  # the longest input whose work stays within REGEX_WORK
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if mid * _per_start(items, mid) <= REGEX_WORK:
            lo = mid
        else:
            hi = mid - 1
    try:
        compiled = re.compile(pattern, re.IGNORECASE)
    except (re.error, RecursionError, OverflowError) as exc:
        raise ValueError(f"not a valid regular expression: {str(exc).splitlines()[0][:80]}") from None
    return SafeRegex(pattern, compiled, lo, _per_start(items, lo))
