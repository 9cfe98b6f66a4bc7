"""The one small dumps/loads wrapper for every JSONL record memtier writes.

Every record carries ``"v": SCHEMA_VERSION``. Records are one JSON object per
line, UTF-8, no trailing spaces, keys in insertion order so a person reading a
ledger in an editor sees ``v, kind, id, timestamp, ...`` first.
"""

from __future__ import annotations

from typing import Any

import orjson

SCHEMA_VERSION = 1


def dumps(record: dict[str, Any]) -> bytes:
    """Serialise one record to a single line, newline included."""
    if "v" not in record:
        record = {"v": SCHEMA_VERSION, **record}
    return orjson.dumps(record) + b"\n"


def loads(line: bytes | str) -> dict[str, Any]:
    """Parse one line. Raises ValueError for anything that is not a JSON object."""
    obj = orjson.loads(line)
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    return obj
