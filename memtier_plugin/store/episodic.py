"""The episodic JSONL ledger (MemTier §3.1).

``<memory>/episodic/<agent_id>/YYYY-MM-DD.jsonl``, one record per line. The
ledger is append-only: no line is ever rewritten. A change to an entry (its
cognitive weight, its promotion) is a later record, folded on read.

Durability and concurrency: every append takes an exclusive ``flock`` on the
file, writes whole lines with one ``write`` on an ``O_APPEND`` descriptor and
``fsync``s before it returns, so an id is acknowledged only once it is on disk
and lines of concurrent writers never interleave. A torn last line (a crash
mid-write) is detected by the next writer, which closes it with ``TORN_END``
and starts on a clean line; the torn bytes stay where they are, can never
become a record (not even when only the newline was missing), and are
reported, once, by every reader.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from . import jsonl
from ..errors import CorruptLineError
from .paths import (
    ID_RE, MAX_ID_CHARS, agent_day_file, checked_id, clean_id, clip_redacted, clip_text, day_of, derived_id, new_id, parse_iso, utc_iso,
)
from .files import TORN_END, append_lines, iter_records, read_lines, tail_records  # noqa: F401  (re-exported)
from .records import entry_problem, fold_cw, update_problem
from ..redact import redact_obj
from ..tokenize import count_tokens

log = logging.getLogger(__name__)

AGENT_ID_RE = ID_RE
#: Longest content kept in one entry (characters); a longer text is redacted, then cut with a marker.
MAX_CONTENT_CHARS = 32_000
SYSTEM_PREFIX = "[system]"



def check_agent_id(agent_id: str) -> str:
    """``agent_id`` when it is a plain name (see :func:`paths.checked_id`), else InvalidIdError."""
    return checked_id(agent_id)


@dataclass
class Entry:
    """One episodic entry with every appended change folded in."""

    id: str
    timestamp: str
    agent_id: str
    session_id: str
    project: str
    content: str
    role: str = "user"
    tokens: int = 0
    promoted: bool = False
    cognitive_weight: float = 0.0
    provenance: dict = field(default_factory=dict)
    fact_ids: list = field(default_factory=list)
    history: list = field(default_factory=list)
    ts: float = 0.0
    path: str = ""
    line: int = 0

    def public(self) -> dict[str, Any]:
        """The ledger fields, as `memtier inspect --json` prints them."""
        return {
            "id": self.id, "timestamp": self.timestamp, "agent_id": self.agent_id,
            "session_id": self.session_id, "project": self.project, "role": self.role,
            "content": self.content, "tokens": self.tokens, "promoted": self.promoted,
            "cognitive_weight": round(self.cognitive_weight, 6), "provenance": self.provenance,
        }


def entry_from_record(rec: dict, path: str = "", line: int = 0) -> Entry:
    """The :class:`Entry` of a valid entry record; ValueError naming the problem otherwise."""
    problem = entry_problem(rec)
    if problem:
        raise ValueError(problem)
    return Entry(
        id=rec["id"], timestamp=rec["timestamp"], agent_id=rec["agent_id"],
        session_id=rec["session_id"], project=rec.get("project") or "",
        content=rec["content"], role=rec.get("role") or "user",
        tokens=rec.get("tokens") or 0, promoted=bool(rec.get("promoted", False)),
        cognitive_weight=float(rec.get("cognitive_weight") or 0.0),
        provenance=rec.get("provenance") or {}, ts=parse_iso(rec["timestamp"]), path=path, line=line,
    )


def apply_update(entry: Entry, rec: dict) -> None:
    """Fold one valid change record into its entry (order matters: replay in ledger order)."""
    kind = rec.get("kind")
    if kind == "cw_update":
        entry.cognitive_weight = fold_cw(entry.cognitive_weight, rec)
    elif kind == "promoted":
        entry.promoted = True
        entry.fact_ids.extend(rec.get("fact_ids") or [])
    entry.history.append(rec)


@dataclass
class ReadResult:
    entries: dict[str, Entry]
    problems: list[CorruptLineError]


class Ledger:
    """Append and read the episodic ledgers under ``<memory_root>/episodic``."""

    def __init__(self, memory_root: Path | str, *, fsync: bool = True, clock=time.time):
        self.root = Path(memory_root)
        self.episodic = self.root / "episodic"
        self.fsync = fsync
        self.clock = clock

    # ---- writing -------------------------------------------------------
    def path_for(self, agent_id: str, ts: float) -> Path:
        return agent_day_file(self.root, "episodic", agent_id, day_of(ts))

    def make_entry(self, *, agent_id: str, session_id: str, project: str, content: str,
                   role: str = "user", provenance: dict | None = None,
                   timestamp: float | None = None) -> dict:
        """Build a redacted entry record (not yet written)."""
        ts = self.clock() if timestamp is None else timestamp
        agent_id = check_agent_id(agent_id)
        text = content if isinstance(content, str) else str(content)
        clean, kinds = clip_redacted(jsonl.clean_text(text), MAX_CONTENT_CHARS)
        prov, more = redact_obj(jsonl.clean_obj(dict(provenance or {})))
        kinds = kinds + more
        if kinds:
            prov["redacted"] = sorted(set(kinds))
        return {
            "v": jsonl.SCHEMA_VERSION, "kind": "entry", "id": new_id("ep", ts), "timestamp": utc_iso(ts),
            "agent_id": agent_id, "session_id": clean_id(session_id), "project": clean_id(project),
            "role": role, "content": clean, "tokens": count_tokens(clean), "promoted": False,
            "cognitive_weight": 0.0, "provenance": prov,
        }

    def append(self, agent_id: str, records: Iterable[dict], *, timestamp: float | None = None) -> tuple[Path, int]:
        """Durably append records to the ledger file of ``agent_id`` for ``timestamp`` (default: now).

        Returns the file and the byte offset where the first record starts.
        """
        records = list(records)
        ts = timestamp if timestamp is not None else (
            _record_ts(records[0], self.clock) if records else self.clock())
        path = self.path_for(agent_id, ts)
        if not records:
            return path, -1
        return path, append_lines(path, b"".join(jsonl.dumps(r) for r in records), fsync=self.fsync)

    def write_entry(self, **kwargs) -> tuple[dict, Path, int]:
        """Build, redact and durably append one entry: (record, file, byte offset)."""
        rec = self.make_entry(**kwargs)
        path, offset = self.append(rec["agent_id"], [rec], timestamp=parse_iso(rec["timestamp"]))
        return rec, path, offset

    def add(self, **kwargs) -> dict:
        """Build, redact and durably append one entry; returns the written record."""
        return self.write_entry(**kwargs)[0]

    def add_update(self, agent_id: str, rec: dict) -> dict:
        """Append a change record (cw_update, promoted, ...) to the agent's ledger of today."""
        ts = self.clock()
        rec = {"v": jsonl.SCHEMA_VERSION, **rec, "id": rec.get("id") or new_id("up", ts), "timestamp": utc_iso(ts)}
        self.append(agent_id, [rec], timestamp=ts)
        return rec

    # ---- reading -------------------------------------------------------
    def agents(self) -> list[str]:
        if not self.episodic.is_dir():
            return []
        return sorted(p.name for p in self.episodic.iterdir() if p.is_dir() and AGENT_ID_RE.fullmatch(p.name))

    def files(self, agents: Iterable[str] | None = None) -> list[Path]:
        names = self.agents() if agents is None else [a for a in agents if a in set(self.agents())]
        out: list[Path] = []
        for a in names:
            out.extend(sorted((self.episodic / a).glob("*.jsonl")))
        return out

    def read(self, agents: Iterable[str] | None = None) -> ReadResult:
        """Fold every record of the given agents (all when None); bad lines are reported, not fatal."""
        entries: dict[str, Entry] = {}
        pending: list[dict] = []
        problems: list[CorruptLineError] = []
        for path in self.files(agents):
            for rec, lineno, problem in iter_records(path):
                if problem:
                    problems.append(CorruptLineError(path, lineno, problem))
                    continue
                if rec.get("kind", "entry") == "entry":
                    try:
                        entries[rec["id"]] = entry_from_record(rec, str(path), lineno)
                    except (ValueError, TypeError) as exc:
                        problems.append(CorruptLineError(path, lineno, str(exc)))
                else:
                    problem = update_problem(rec) if rec.get("kind") in ("cw_update", "promoted") else None
                    if problem:
                        problems.append(CorruptLineError(path, lineno, problem))
                    elif rec.get("kind") in ("cw_update", "promoted"):
                        pending.append(rec)
                    else:
                        problems.append(CorruptLineError(path, lineno,
                                                         f"unknown record kind {str(rec.get('kind'))[:30]!r}"))
        for rec in pending:
            target = entries.get(rec.get("entry_id", ""))
            if target is not None:
                apply_update(target, rec)
        for p in problems:
            log.debug("skipped %s", p)
        return ReadResult(entries, problems)


def _record_ts(rec: dict, clock) -> float:
    try:
        return parse_iso(rec["timestamp"])
    except (KeyError, ValueError, TypeError):
        return clock()
