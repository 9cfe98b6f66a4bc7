"""What the user told memory to forget: ``memory/forgotten.jsonl``, append-only, ids only.

The ledgers stay append-only: forgetting an item appends one ``forget``
record naming it, and every path that delivers memory asks
:class:`Forgotten` before it hands an item over. The tombstone file never holds
the forgotten text (only ids, the layer, when and why), so a purge that removes
the text everywhere else leaves nothing behind here.

Kinds:

* ``forget``: ``id`` (``fg-…``), ``target`` (the forgotten item's id), ``layer``
  (one of :data:`LAYERS`), ``at`` (ISO-8601), ``reason`` (short text: ``user``,
  ``query``, ``session``…), ``because_of`` (the id whose forgetting took this
  derived item with it, or null).
* ``purged``: ``target``, ``at``: the item's text was removed from every file
  under ``memory/`` (``memtier purge``); the ``forget`` record stays.

Readers in long-running processes (the sidecar, the daemon, an MCP server)
hold one :class:`Forgotten` and call :meth:`Forgotten.ids` per use: it stats
the file and re-reads only what was appended, so a ``memtier forget`` run in
another process applies at the next recall.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Iterable

from . import jsonl
from .files import TailReader, append_lines
from .paths import new_id, parse_iso, utc_iso

log = logging.getLogger(__name__)

FILE = "forgotten.jsonl"
#: What a tombstone can name.
LAYERS = ("episode", "fact", "standing", "skill", "state", "hook")
_MAX_ID = 256
_MAX_REASON = 80


def path(memory_root: Path | str) -> Path:
    return Path(memory_root) / FILE


def forget_record(target: str, layer: str, *, ts: float | None = None, reason: str = "user",
                  because_of: str | None = None) -> dict:
    """The ``forget`` record for ``target`` (checked by :func:`problem` before it is written)."""
    at = utc_iso(ts)
    rec = {"v": jsonl.SCHEMA_VERSION, "kind": "forget", "id": new_id("fg", _ts(ts)), "target": target,
           "layer": layer, "at": at, "reason": reason[:_MAX_REASON], "because_of": because_of}
    p = problem(rec)
    if p:
        raise ValueError(p)
    return rec


def purged_record(target: str, *, ts: float | None = None) -> dict:
    rec = {"v": jsonl.SCHEMA_VERSION, "kind": "purged", "target": target, "at": utc_iso(ts)}
    p = problem(rec)
    if p:
        raise ValueError(p)
    return rec


def _ts(ts: float | None) -> float:
    return time.time() if ts is None else ts


def _id_problem(value, key: str) -> str | None:
    if not isinstance(value, str) or not value:
        return f"{key!r} is not a non-empty string"
    if len(value) > _MAX_ID or any(c in value for c in "\n\r\x00"):
        return f"{key!r} is not an id (too long or holds a line break)"
    return None


def problem(rec: dict) -> str | None:
    """Why ``rec`` is not a valid tombstone-file record, or None."""
    kind = rec.get("kind")
    if kind not in ("forget", "purged"):
        return f"unknown record kind {str(kind)[:30]!r}"
    p = _id_problem(rec.get("target"), "target")
    if p:
        return p
    try:
        parse_iso(rec["at"])
    except (KeyError, TypeError, AttributeError, ValueError, OverflowError):
        return "'at' is not an ISO-8601 time"
    if kind == "forget":
        if rec.get("layer") not in LAYERS:
            return f"'layer' {str(rec.get('layer'))[:20]!r} is not one of {', '.join(LAYERS)}"
        if not isinstance(rec.get("reason", ""), str):
            return "'reason' is not a string"
        if rec.get("because_of") is not None:
            p = _id_problem(rec["because_of"], "because_of")
            if p:
                return p
    return None


def append(memory_root: Path | str, records: Iterable[dict]) -> int:
    """Append tombstone-file records in one durable write; returns how many."""
    records = list(records)
    for rec in records:
        p = problem(rec)
        if p:
            raise ValueError(f"{FILE}: {p}")
    if records:
        append_lines(path(memory_root), b"".join(jsonl.dumps(r) for r in records))
    return len(records)


class Forgotten:
    """The set of forgotten ids of one workspace, kept current by re-reading what was appended.

    Thread-safe; cheap per call (one ``stat`` when nothing changed). A bad line is
    skipped and reported once (the rest is read); a replaced file is read again.
    """

    def __init__(self, memory_root: Path | str):
        self._reader = TailReader(path(memory_root))
        self._lock = threading.Lock()
        self._ids: frozenset[str] = frozenset()
        self._purged: frozenset[str] = frozenset()
        self._records: dict[str, dict] = {}
        self.problems: list[str] = []

    def _refresh(self) -> None:
        with self._lock:
            lines = [(self._reader.lines, rec) for _start, _end, rec in self._reader.read()]
            if self._reader.restarted:
                self._records, self._purged = {}, frozenset()
            elif not lines:
                return  # nothing appended: the same set (the same object, so callers may cache by identity)
            purged: set[str] = set()
            for lineno, rec in lines:
                if rec is None:
                    continue
                p = problem(rec)
                if p:
                    msg = f"{self._reader.path}:{lineno}: {p}"
                    if msg not in self.problems:
                        log.warning("%s (skipped)", msg)
                        self.problems.append(msg)
                    continue
                if rec["kind"] == "forget":
                    self._records.setdefault(rec["target"], rec)
                else:
                    purged.add(rec["target"])
            self._ids = frozenset(self._records)
            if purged:
                self._purged = self._purged | purged

    def ids(self) -> frozenset[str]:
        """Every forgotten id (after reading what was appended since the last call)."""
        self._refresh()
        return self._ids

    def __contains__(self, item_id: object) -> bool:
        return isinstance(item_id, str) and item_id in self.ids()

    def record(self, item_id: str) -> dict | None:
        """The ``forget`` record of ``item_id`` (the first one), or None."""
        self._refresh()
        return self._records.get(item_id)

    def purged(self) -> frozenset[str]:
        """Ids whose text was purged."""
        self._refresh()
        return self._purged

    def pending_purge(self) -> list[str]:
        """Forgotten ids not yet purged, in the order they were forgotten."""
        self._refresh()
        return [t for t in self._records if t not in self._purged]
