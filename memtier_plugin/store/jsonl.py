"""The one small dumps/loads wrapper for every JSONL record memtier writes.

Every record carries ``"v": SCHEMA_VERSION``. Records are one JSON object per
line, UTF-8, no trailing spaces, keys in insertion order so a person reading a
ledger in an editor sees ``v, kind, id, timestamp, ...`` first.
"""

from __future__ import annotations

from typing import Any

import orjson

SCHEMA_VERSION = 1
_MAX_DEPTH = 64


def clean_text(text: str) -> str:
    """``text`` as valid UTF-8: a lone UTF-16 surrogate (a cut emoji from a JavaScript host)
    becomes U+FFFD, a surrogate pair becomes its character. Everything else is kept."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def clean_obj(value: Any, depth: int = 0) -> Any:
    """A JSON-ready copy of ``value``: strings cleaned (:func:`clean_text`), keys made strings,
    anything else JSON cannot hold turned into its ``str``; nesting past 64 levels cut."""
    if isinstance(value, str):
        return clean_text(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if depth >= _MAX_DEPTH:
        return "…"
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_obj(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_obj(v, depth + 1) for v in value]
    return clean_text(str(value))


def dumps(record: dict[str, Any]) -> bytes:
    """Serialise one record to a single line, newline included.

    A record orjson refuses (a lone surrogate, an odd type, deep nesting) is
    cleaned with :func:`clean_obj` and written, never dropped.
    """
    if "v" not in record:
        record = {"v": SCHEMA_VERSION, **record}
    try:
        return orjson.dumps(record) + b"\n"
    except (TypeError, orjson.JSONEncodeError):
        return orjson.dumps(clean_obj(record)) + b"\n"


def loads(line: bytes | str) -> dict[str, Any]:
    """Parse one line. Raises ValueError for anything that is not a JSON object."""
    obj = orjson.loads(line)
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    return obj
