"""The semantic tier (MemTier §3.3): project-shared facts with revision links.

``<memory>/semantic/<project>.jsonl`` holds one ``kind: "fact"`` record per
line (shape in docs/ARCHITECTURE.md). Like the episodic ledger it is
append-only: a revision is a new fact whose ``supersedes`` names the fact it
replaces (Pulse A.2); an older revision that arrives late is appended together
with a ``{"kind": "superseded", "fact_id": ..., "by": ...}`` marker. Both are
folded on read, here and by the search index (``index.py``), so recall sees
only the current version while the chain stays in the file.

Fact ids are deterministic (``fact_id(entry_id, n)``): re-consolidating an
entry after a crash names the same facts, so the store can tell what is
already written. Appends go through :func:`memtier_plugin.store.files.append_lines` (flock,
one write, fsync).

This module owns the record shape: :func:`fact_record` builds a fact record,
:func:`fact_problem` checks one read from disk (a hand-edited line with a list
for its ``value`` is skipped and reported once as file:line, never folded in
where it would break every later batch), :func:`to_fact` turns one back into a
:class:`facts.Fact`.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from ..vocabulary import FACT_KINDS  # noqa: F401  (the fact kinds this tier holds; facts.py reads them here)
from . import jsonl
from .episodic import append_lines, parse_iso
from .files import TailReader
from ..tokenize import token_set

#: The kinds of fact the semantic tier holds; the first four are revised by a newer value.
REVISABLE_KINDS = frozenset({"preference", "constraint", "attribute", "decision"})
NOTE_PREFIX = "note:"  # attribute of fallback facts: never revision-keyed


@dataclass(frozen=True)
class Fact:
    """One fact as extracted (consolidation) and stored (a ``fact`` record's payload)."""

    fact_kind: str
    subject: str
    attribute: str
    value: str
    content: str
    confidence: float = 0.5
    effective_time: str | None = None


def revision_key(fact: Fact) -> tuple[str, str] | None:
    """(subject, attribute) for facts whose newer value replaces the older one."""
    if fact.fact_kind not in REVISABLE_KINDS or not fact.attribute or fact.attribute.startswith(NOTE_PREFIX):
        return None
    if fact.fact_kind == "constraint" and not fact.value:
        return None
    return fact.subject, fact.attribute

log = logging.getLogger(__name__)

FACT_PREFIX = "sf-"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,100}$")


def fact_id(entry_id: str, index: int) -> str:
    """The deterministic id of the ``index``-th fact extracted from ``entry_id``."""
    return FACT_PREFIX + hashlib.sha1(f"{entry_id}#{index}".encode()).hexdigest()[:16]


def project_filename(project: str) -> str:
    """File name of a project's fact ledger; unusual names get a slug plus a hash."""
    if not project:
        return "_none.jsonl"
    if _SAFE_NAME.match(project):
        return f"{project}.jsonl"
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", project).strip("-.")[:40]
    return f"_{slug}-{hashlib.sha1(project.encode()).hexdigest()[:8]}.jsonl"


_ISO_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}")
_FACT_TEXT = ("id", "timestamp", "project", "content")                  # required strings
_FACT_OPTIONAL_TEXT = ("origin_agent", "fact_kind", "subject", "attribute", "value", "extractor", "recorded_at")


def is_iso_time(value) -> bool:
    """A string that starts with YYYY-MM-DD and parses as an ISO-8601 date or time."""
    try:
        return isinstance(value, str) and bool(_ISO_DAY.match(value)) and parse_iso(value) is not None
    except (ValueError, OverflowError):
        return False


def type_name(value) -> str:
    """'missing' or 'a list', 'an int'-style wording for what a field holds (for one-line reasons)."""
    return "missing" if value is None else f"a {type(value).__name__}"


def fact_problem(rec: dict) -> str | None:
    """Why a record read from a fact ledger cannot be used (wrong kind, type or value), or None.

    Checks a ``kind: "fact"`` record (the shape :func:`fact_record` writes; optional fields
    may be absent, as in older files) or a ``kind: "superseded"`` marker.
    """
    kind = rec.get("kind")
    if kind == "superseded":
        for key in ("fact_id", "project"):
            if not isinstance(rec.get(key), str):
                return f"{key!r} must be a string, not {type_name(rec.get(key))}"
        if rec.get("by") is not None and not isinstance(rec["by"], str):
            return f"'by' must be a string, not {type_name(rec['by'])}"
        return None
    if kind != "fact":
        return f"'kind' {str(kind)[:40]!r} is not 'fact' or 'superseded'"
    for key in _FACT_TEXT:
        if not isinstance(rec.get(key), str):
            return f"{key!r} must be a string, not {type_name(rec.get(key))}"
    for key in _FACT_OPTIONAL_TEXT:
        if rec.get(key) is not None and not isinstance(rec[key], str):
            return f"{key!r} must be a string, not {type_name(rec[key])}"
    for key in ("source_entry_ids", "session_ids"):
        v = rec.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            return f"{key!r} must be a list of strings"
    if rec.get("supersedes") is not None and not isinstance(rec["supersedes"], str):
        return f"'supersedes' must be a fact id or null, not {type_name(rec['supersedes'])}"
    conf = rec.get("confidence")
    if conf is not None and (isinstance(conf, bool) or not isinstance(conf, (int, float)) or conf != conf):
        return "'confidence' must be a number"
    for key in ("timestamp", "effective_time"):
        v = rec.get(key)
        if not (v is None and key == "effective_time") and not is_iso_time(v):
            return f"{key!r} {str(v)[:40]!r} is not an ISO-8601 date or time"
    return None


def to_fact(rec: dict) -> Fact:
    """The :class:`facts.Fact` of a fact record (for ``is_duplicate`` / ``find_superseded``)."""
    conf = rec.get("confidence", 0.5)
    return Fact(str(rec.get("fact_kind") or "attribute"), str(rec.get("subject") or ""),
                str(rec.get("attribute") or ""), str(rec.get("value") or ""), str(rec.get("content") or ""),
                float(conf) if isinstance(conf, (int, float)) else 0.5, rec.get("effective_time"))


def fact_record(fact: Fact, *, fid: str, project: str, origin_agent: str, entry: dict,
                supersedes: str | None, extractor: str, recorded_at: str,
                effective_time: str | None = None) -> dict:
    """A ``kind: "fact"`` record for ``fact``, extracted from episodic ``entry`` (the one
    constructor of the shape :func:`fact_problem` checks). ``effective_time``, when given,
    replaces the fact's own (the evaluation dates facts by their session's start)."""
    return {
        "v": jsonl.SCHEMA_VERSION, "kind": "fact", "id": fid, "timestamp": entry["timestamp"],
        "project": project, "origin_agent": origin_agent, "fact_kind": fact.fact_kind,
        "subject": fact.subject, "attribute": fact.attribute, "value": fact.value, "content": fact.content,
        "confidence": round(float(fact.confidence), 3), "source_entry_ids": [entry["id"]],
        "session_ids": [entry["session_id"]], "effective_time": effective_time or fact.effective_time,
        "supersedes": supersedes, "extractor": extractor, "recorded_at": recorded_at,
    }


def retirement(rec: dict) -> tuple[str, str] | None:
    """(the fact id ``rec`` makes not current, by what) for a fact whose ``supersedes`` names one, or for a
    ``superseded`` marker; None for anything else. The one supersession rule: this tier's fold
    (:class:`ProjectFacts`) and the search index (``recall/index.py``) both apply it."""
    kind = rec.get("kind")
    if kind == "superseded":
        old = rec.get("fact_id")
        return (old, rec.get("by") or "?") if isinstance(old, str) and old else None
    if kind == "fact":
        old = rec.get("supersedes")
        return (old, rec.get("id") or "?") if isinstance(old, str) and old else None
    return None


@dataclass
class ProjectFacts:
    """Every fact of one project, with supersession folded in (file order)."""

    project: str
    records: dict[str, dict] = field(default_factory=dict)
    superseded_by: dict[str, str] = field(default_factory=dict)
    by_source: dict[str, list[str]] = field(default_factory=dict)
    _by_token: dict[str, set[str]] = field(default_factory=dict)
    _by_key: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def add(self, rec: dict) -> None:
        """Fold one record in; idempotent (a record seen twice changes nothing)."""
        retired = retirement(rec)
        if rec.get("kind") != "fact":
            if retired is not None:  # a superseded marker
                self.superseded_by.setdefault(*retired)
            return
        fid = rec.get("id")
        if not isinstance(fid, str) or fid in self.records or not isinstance(rec.get("content"), str):
            return
        self.records[fid] = rec
        for src in rec.get("source_entry_ids") or []:
            self.by_source.setdefault(src, []).append(fid)
        for tok in token_set(rec["content"]):
            self._by_token.setdefault(tok, set()).add(fid)
        key = revision_key(to_fact(rec))
        if key is not None:
            self._by_key.setdefault(key, []).append(fid)
        if retired is not None:
            self.superseded_by.setdefault(*retired)

    def is_current(self, fid: str) -> bool:
        return fid in self.records and fid not in self.superseded_by

    def current(self) -> list[dict]:
        return [r for fid, r in self.records.items() if fid not in self.superseded_by]

    def same_key(self, fact: Fact, *, current: bool = True) -> list[dict]:
        """Facts with ``fact``'s revision key: the current ones, or (``current=False``) every version."""
        key = revision_key(fact)
        if key is None:
            return []
        return [self.records[f] for f in self._by_key.get(key, []) if not current or self.is_current(f)]

    def near(self, fact: Fact) -> list[dict]:
        """Current facts sharing at least one content token with ``fact`` (dedup candidates)."""
        ids: set[str] = set()
        for tok in token_set(fact.content):
            ids |= self._by_token.get(tok, set())
        return [self.records[f] for f in sorted(ids) if self.is_current(f)]

    def history(self, fid: str) -> list[dict]:
        """The revision chain that contains ``fid``, oldest first (empty if unknown)."""
        if fid not in self.records:
            return []
        start, seen = fid, {fid}
        while True:
            prev = self.records[start].get("supersedes")
            if not isinstance(prev, str) or prev not in self.records or prev in seen:
                break
            seen.add(prev)
            start = prev
        chain, cur = [], start
        seen = set()
        while cur in self.records and cur not in seen:
            seen.add(cur)
            chain.append(self.records[cur])
            cur = self.superseded_by.get(cur, "")
        return chain


class SemanticStore:
    """Append to and read the fact ledgers under ``<memory_root>/semantic``.

    Reading is incremental: :meth:`refresh` folds only the bytes appended to
    each file since the last call, so a long-running daemon keeps a current
    view cheaply. Whole lines only; a torn or corrupt line is skipped, logged.
    """

    def __init__(self, memory_root: Path | str, *, fsync: bool = True):
        self.root = Path(memory_root)
        self.dir = self.root / "semantic"
        self.fsync = fsync
        self._tails: dict[str, TailReader] = {}  # per project file: what was read, lines counted for reports
        self._projects: dict[str, ProjectFacts] = {}
        self.problems: list[str] = []         # "file:line: reason" of each bad record skipped

    def path_for(self, project: str) -> Path:
        return self.dir / project_filename(project)

    def files(self) -> list[Path]:
        return sorted(self.dir.glob("*.jsonl")) if self.dir.is_dir() else []

    def refresh(self) -> None:
        """Fold what every project file gained (a replaced or shrunk file is read again; the fold is
        idempotent, so what it held stays until the process restarts)."""
        for path in self.files():
            tail = self._tails.get(str(path))
            if tail is None:
                tail = self._tails[str(path)] = TailReader(path)
            for _line_at, _end, rec in tail.read():
                if rec is None:
                    continue
                problem = fact_problem(rec)
                if problem is None:
                    self._fold(rec)
                elif rec.get("kind") in ("fact", "superseded"):  # other kinds are not ours to judge
                    where = f"{path}:{tail.lines}"
                    self.problems.append(f"{where}: {problem}")
                    log.warning("%s: fact record skipped: %s", where, problem)

    def _fold(self, rec: dict) -> None:
        project = rec.get("project")
        if isinstance(project, str):
            self.project(project, refresh=False).add(rec)

    def project(self, name: str, *, refresh: bool = True) -> ProjectFacts:
        if refresh:
            self.refresh()
        pf = self._projects.get(name)
        if pf is None:
            pf = self._projects[name] = ProjectFacts(name)
        return pf

    def projects(self) -> list[str]:
        self.refresh()
        return sorted(p for p, pf in self._projects.items() if pf.records)

    def append(self, project: str, records: Iterable[dict]) -> int:
        """Durably append records to ``project``'s fact ledger and fold them in; returns the offset."""
        records = [r if r.get("project") == project else {**r, "project": project} for r in records]
        if not records:
            return -1
        offset = append_lines(self.path_for(project), b"".join(jsonl.dumps(r) for r in records), fsync=self.fsync)
        for rec in records:
            self._fold(rec)
        return offset

    def get(self, fid: str) -> dict | None:
        self.refresh()
        for pf in self._projects.values():
            if fid in pf.records:
                return pf.records[fid]
        return None

    def history(self, fid: str) -> list[dict]:
        """The revision chain containing ``fid``, oldest first."""
        self.refresh()
        for pf in self._projects.values():
            if fid in pf.records:
                return pf.history(fid)
        return []

    def current(self, project: str | None = None) -> Iterator[dict]:
        """Current (not superseded) facts of one project, or of every project."""
        names = [project] if project is not None else self.projects()
        for name in names:
            yield from self.project(name).current()

    def chains(self, project: str | None = None) -> list[list[dict]]:
        """Every revision chain (oldest first) that ends in a current fact."""
        out = []
        names = [project] if project is not None else self.projects()
        for name in names:
            pf = self.project(name)
            out.extend(pf.history(r["id"]) for r in pf.current())
        return out
