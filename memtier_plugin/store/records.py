"""Record shapes of the episodic ledger and their validation: the one owner.

A ledger line that parses as JSON is still untrusted: a hand edit, another
tool or an older writer can leave ``"timestamp": 12345`` or a list-valued
``project``. Every reader (the fold in :mod:`ledger`, the search index, the
CLI) asks :func:`problem` first; a record with a problem is skipped and
reported once with its file and line, and the rest of the file is read.

Kinds written to ``memory/episodic/<agent>/<day>.jsonl``:

* ``entry``: ``id``, ``timestamp`` (ISO-8601), ``agent_id`` (a plain name),
  ``session_id``, ``content`` (strings); optional ``project`` (string),
  ``role`` (string), ``tokens`` (int ≥ 0), ``promoted`` (bool),
  ``cognitive_weight`` (finite number in [-1, 1]), ``provenance`` (object),
  ``tier`` (episodic/semantic/procedural).
* ``cw_update``: ``entry_id`` (string), ``delta`` (finite number); folded as
  CW ← clip(CW + delta, -1, 1) by :func:`fold_cw`.
* ``promoted``: ``entry_id`` (string), ``fact_ids`` (list of strings).

Any other ``kind`` is reported as unknown and skipped (a newer writer's
record is never misread as an entry).
"""

from __future__ import annotations

import math
from typing import Any

from ..vocabulary import TIERS
from .paths import is_valid_id, parse_iso

ENTRY_KINDS = ("entry",)
UPDATE_KINDS = ("cw_update", "promoted")


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _iso_problem(value: Any, key: str) -> str | None:
    if not isinstance(value, str):
        return f"{key!r} is {type(value).__name__}, expected an ISO-8601 string"
    try:
        ts = parse_iso(value)
    except (ValueError, OverflowError):
        return f"{key!r} {value[:40]!r} is not an ISO-8601 time"
    if not math.isfinite(ts):
        return f"{key!r} {value[:40]!r} is not a finite time"
    return None


def entry_problem(rec: dict) -> str | None:
    """Why ``rec`` is not a valid entry record, or None."""
    for key in ("id", "agent_id", "session_id", "content"):
        if not isinstance(rec.get(key), str):
            got = "missing" if key not in rec else f"{type(rec[key]).__name__}"
            return f"entry field {key!r} is {got}, expected a string"
    if not rec["id"]:
        return "entry field 'id' is empty"
    if not is_valid_id(rec["agent_id"]):
        return f"entry 'agent_id' {rec['agent_id'][:40]!r} is not a plain name (letters, digits, '.', '_', '-')"
    p = _iso_problem(rec.get("timestamp"), "timestamp")
    if p:
        return p
    for key in ("project", "role"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            return f"entry field {key!r} is {type(rec[key]).__name__}, expected a string"
    if "tier" in rec and rec["tier"] not in TIERS:
        return f"entry 'tier' {str(rec['tier'])[:20]!r} is not one of {', '.join(TIERS)}"
    tokens = rec.get("tokens", 0)
    if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0):
        return "entry field 'tokens' is not a whole number >= 0"
    cw = rec.get("cognitive_weight", 0.0)
    if cw is not None and (not _finite(cw) or not -1.0 <= cw <= 1.0):
        return "entry field 'cognitive_weight' is not a number in [-1, 1]"
    if rec.get("promoted") is not None and not isinstance(rec["promoted"], bool):
        return "entry field 'promoted' is not true/false"
    if rec.get("provenance") is not None and not isinstance(rec["provenance"], dict):
        return "entry field 'provenance' is not an object"
    return None


def update_problem(rec: dict) -> str | None:
    """Why ``rec`` is not a valid change record (cw_update, promoted), or None."""
    kind = rec.get("kind")
    if not isinstance(rec.get("entry_id"), str) or not rec["entry_id"]:
        return f"{kind} record has no string 'entry_id'"
    if kind == "cw_update" and not _finite(rec.get("delta")):
        return f"cw_update 'delta' {str(rec.get('delta'))[:20]!r} is not a finite number"
    if kind == "promoted":
        ids = rec.get("fact_ids", [])
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return "promoted 'fact_ids' is not a list of strings"
    if "id" in rec and not isinstance(rec["id"], str):
        return f"{kind} record 'id' is not a string"
    return None


def problem(rec: dict) -> str | None:
    """Why an episodic-ledger record cannot be used, or None (entries and change records)."""
    kind = rec.get("kind", "entry")
    if kind in ENTRY_KINDS:
        return entry_problem(rec)
    if kind in UPDATE_KINDS:
        return update_problem(rec)
    return f"unknown record kind {str(kind)[:30]!r}"


def clip_cw(value: float) -> float:
    return max(-1.0, min(1.0, value))


def fold_cw(cw: float, rec: dict) -> float:
    """The cognitive weight after one (valid) ``cw_update`` record: clip(CW + delta, -1, 1)."""
    return clip_cw(cw + float(rec["delta"]))
