"""Stored text made safe to print: no terminal control reaches the user's screen.

Ledger text is whatever a model, a tool or a person wrote. Printed raw it can
carry escape sequences (ESC [ … colours and cursor moves, ESC ] … titles and
hyperlinks), other C0/C1 controls (a CR that overwrites the line, a backspace)
and bidi overrides (U+202E turns ``txt.exe`` around) that restyle, retitle or
reorder what the user sees. Human output therefore shows each such character
as a visible escape (ESC as ``\\x1b``, U+202E as ``\\u202e``). JSON output is
escaped by orjson for C0 only, so :func:`json_line` escapes the rest too.
Printing never changes the ledger.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

# C0 and C1 controls, DEL, bidi marks/overrides/isolates, line/paragraph separators, lone surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# What orjson leaves raw inside JSON strings: everything above except C0 (it escapes those itself).
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: Any) -> str:
    """``text`` with every control or bidi character shown as a visible escape (one line stays one line)."""
    return _UNSAFE.sub(_escape, str(text))


def printable_lines(text: str) -> str:
    """Like :func:`printable` for multi-line output: each line made safe, the newlines kept."""
    return "\n".join(printable(line) for line in text.split("\n"))


def json_line(obj: Any) -> str:
    """One JSON document as text with no raw control or bidi character.

    Those characters can only occur inside JSON strings, so replacing each by
    its ``\\uXXXX`` escape yields the same JSON value.
    """
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", orjson.dumps(obj).decode())
