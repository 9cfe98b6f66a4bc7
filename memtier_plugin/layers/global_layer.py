"""The Global layer: the user's standing knowledge, shared by every project (MemSidecar §3.2).

``memory/global/knowledge.jsonl``, append-only JSONL like the other ledgers,
readable by hand. A topic tree (:mod:`topics`) indexes knowledge nodes:

* ``{"kind": "knowledge", "id": "gk-…", "node_kind": "preference|constraint|rule|identity|choice|pick",
  "content": <the user's words>, "attribute": <what a revision replaces, or "">,
  "topics": [...], "applies": {"projects": "*" | [names], "from": null, "until": null,
  "requests": <the kind of request it was said for, as said: "anything you book for me"; optional>,
  "asked": <the question the user answered, choosing among offered options, when they said it; optional>},
  "provenance": {"entry_ids": [...], "session_id", "agent_id", "speaker": "user", "form": "stated|choice|pick"}}``
* ``{"kind": "retired", "node_id": …, "by": <newer node>, "reason": …}``: a revision.

Maintenance (:meth:`GlobalStore.upsert`, MemSidecar eq. A3–A4): a candidate
whose content a current node already holds is dropped (the stored wording
stays); one with the attribute of a current node in the same scope retires
that node only (per attribute: revising the hotel budget leaves "aisle seat"
alone); anything else is inserted. Standing knowledge has validity, not age:
a node is current until retired or out of its ``applies`` window. What the user
told memory to forget (store/tombstones.py) is never learned again: a candidate
whose every source entry is forgotten is dropped, and a forgotten node does not
hold back a new statement of the same thing. :meth:`GlobalStore.revise` is the
user's own correction (``memtier correct``): a new node that retires the old one.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..vocabulary import NODE_KINDS
from ..store import jsonl
from ..store.episodic import append_lines, clean_id, derived_id, parse_iso, utc_iso
from ..store.files import TailReader
from ..store.paths import is_valid_id
from ..store.tombstones import Forgotten
from .extract import Candidate
from .requests import ruled_scope
from ..redact import redact
from ..tokenize import jaccard, token_set
from .topics import topic_tree

log = logging.getLogger(__name__)
SUB, FILE = "global", "knowledge.jsonl"
DUPLICATE_JACCARD = 0.8


def node_problem(rec: dict) -> str | None:
    """Why a Global-layer record cannot be used, or None."""
    kind = rec.get("kind")
    if kind == "retired":
        return None if isinstance(rec.get("node_id"), str) else "retired record has no string 'node_id'"
    if kind != "knowledge":
        return f"unknown record kind {str(kind)[:30]!r}"
    for key in ("id", "content", "timestamp"):
        if not isinstance(rec.get(key), str) or not rec[key]:
            return f"knowledge field {key!r} is not a non-empty string"
    if rec.get("node_kind") not in NODE_KINDS:
        return f"knowledge 'node_kind' {str(rec.get('node_kind'))[:20]!r} is not one of {', '.join(NODE_KINDS)}"
    if not isinstance(rec.get("attribute", ""), str):
        return "knowledge 'attribute' is not a string"
    topics = rec.get("topics", [])
    if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
        return "knowledge 'topics' is not a list of strings"
    applies = rec.get("applies", {})
    if not isinstance(applies, dict):
        return "knowledge 'applies' is not an object"
    projects = applies.get("projects", "*")
    if projects != "*" and not (isinstance(projects, list) and all(isinstance(p, str) for p in projects)):
        return "knowledge 'applies.projects' is not '*' or a list of names"
    for key in ("from", "until"):
        v = applies.get(key)
        if v is not None:
            try:
                parse_iso(v)
            except (TypeError, ValueError, AttributeError):
                return f"knowledge 'applies.{key}' is not an ISO-8601 time"
    requests = applies.get("requests", "")
    if not isinstance(requests, str) or len(requests) > 200:
        return "knowledge 'applies.requests' is not a text of at most 200 characters"
    asked = applies.get("asked", "")
    if not isinstance(asked, str) or len(asked) > 200:
        return "knowledge 'applies.asked' is not a text of at most 200 characters"
    prov = rec.get("provenance", {})
    if not isinstance(prov, dict) or not all(isinstance(i, str) for i in prov.get("entry_ids", [])):
        return "knowledge 'provenance.entry_ids' is not a list of strings"
    try:
        parse_iso(rec["timestamp"])
    except ValueError:
        return "knowledge 'timestamp' is not an ISO-8601 time"
    return None


@dataclass
class Node:
    """One current or retired knowledge node, as folded from the ledger."""

    rec: dict
    retired_by: str | None = None
    tokens: frozenset = field(default_factory=frozenset)

    @property
    def id(self) -> str:
        return self.rec["id"]

    def applies(self, project: str, now: float) -> bool:
        """In scope for ``project`` at ``now`` (and not retired)."""
        if self.retired_by is not None:
            return False
        a = self.rec.get("applies") or {}
        projects = a.get("projects", "*")
        if projects != "*" and project not in projects:
            return False
        if a.get("from") and now < parse_iso(a["from"]):
            return False
        return not (a.get("until") and now > parse_iso(a["until"]))


class GlobalStore:
    """Read, fold and upsert ``memory/global/knowledge.jsonl`` (safe across processes)."""

    def __init__(self, memory_root: Path | str, *, fsync: bool = True, forgotten: Forgotten | None = None):
        self.root = Path(memory_root)
        self.path = self.root / SUB / FILE
        self.fsync = fsync
        self.forgotten = forgotten if forgotten is not None else Forgotten(self.root)
        self.nodes: dict[str, Node] = {}
        self._tail = TailReader(self.path)
        self._lock = threading.RLock()
        self.problems: list[str] = []
        self._revised: tuple[int, dict[str, str]] | None = None  # (offset it was computed at, the map)
        self._early: dict[str, str] = {}  # node id -> by, for a retirement read before its node (a fleet's mirror)

    # ---- reading -----------------------------------------------------------
    def refresh(self) -> None:
        """Fold what was appended since the last read (a replaced or shrunk file is read again)."""
        with self._lock:
            new = list(self._tail.read())
            if self._tail.restarted:
                self.nodes, self._early = {}, {}
            for line_at, _end, rec in new:
                if rec is None:
                    continue
                problem = node_problem(rec)
                if problem:
                    self.problems.append(f"{self.path}: byte {line_at}: {problem}")
                    log.warning("%s: byte %d: skipped: %s", self.path, line_at, problem)
                    continue
                self._fold(rec)

    def _fold(self, rec: dict) -> None:
        if rec["kind"] == "knowledge":
            if rec["id"] not in self.nodes:
                self.nodes[rec["id"]] = Node(rec, tokens=frozenset(token_set(rec["content"])),
                                             retired_by=self._early.pop(rec["id"], None))
        else:
            node = self.nodes.get(rec["node_id"])
            if node is None:
                self._early.setdefault(rec["node_id"], rec.get("by") or "?")
            elif node.retired_by is None:
                node.retired_by = rec.get("by") or "?"

    def current(self, project: str | None = None, now: float | None = None) -> list[Node]:
        """Nodes not retired (and, given a project and time, in scope there), in ledger order."""
        self.refresh()
        return [n for n in self.nodes.values() if n.retired_by is None and
                (project is None or n.applies(project, now if now is not None else 0.0))]

    def revised_sources(self) -> dict[str, str]:
        """Entry id → the node that revised what it said, for every retired node's sources."""
        self.refresh()
        if self._revised is not None and self._revised[0] == self._tail.offset:
            return self._revised[1]  # nothing appended since: the map still holds (asked on every prompt)
        out: dict[str, str] = {}
        for n in self.nodes.values():
            if n.retired_by is not None:
                for eid in (n.rec.get("provenance") or {}).get("entry_ids") or []:
                    out.setdefault(eid, n.retired_by)
        self._revised = (self._tail.offset, out)
        return out

    def history(self, node_id: str) -> list[Node]:
        """``node_id`` and every node it retired or that retired it, oldest first."""
        self.refresh()
        chain, seen = [], set()
        cur = self.nodes.get(node_id)
        while cur is not None and cur.id not in seen:  # walk back to the oldest
            seen.add(cur.id)
            prev = next((n for n in self.nodes.values() if n.retired_by == cur.id), None)
            if prev is None:
                break
            cur = prev
        while cur is not None and cur.id not in {n.id for n in chain}:
            chain.append(cur)
            cur = self.nodes.get(cur.retired_by or "")
        return chain

    # ---- maintenance -------------------------------------------------------
    def upsert(self, candidates: list[Candidate], *, agent_id: str, session_id: str, project: str,
               ts: float) -> list[dict]:
        """Insert new knowledge, retire what a candidate revises; returns the records written."""
        gone = self.forgotten.ids()
        candidates = [c for c in candidates if not (c.entry_ids and all(i in gone for i in c.entry_ids))]
        if not candidates:
            return []
        tree = topic_tree(self.root)

        def decide() -> list[dict]:
            out: list[dict] = []
            for cand in candidates:
                recs = self._decide(cand, tree, agent_id=agent_id, session_id=session_id, project=project, ts=ts)
                for rec in recs:
                    self._fold(rec)
                out.extend(recs)
            return out
        return self._locked(decide)

    def _locked(self, decide) -> list[dict]:
        """Read, ``decide()`` the records to write, append them: one step across processes (flock)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / SUB / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            with self._lock:
                self.refresh()
                out = decide()
                if out:
                    append_lines(self.path, b"".join(jsonl.dumps(r) for r in out), fsync=self.fsync)
                    self.refresh()
                return out
        finally:
            os.close(fd)

    def revise(self, node_id: str, content: str, *, ts: float) -> dict:
        """The user's correction of current node ``node_id``: a new node with ``content`` (redacted; the old
        one's kind, attribute and scope, ``provenance.corrects`` naming it) and a ``retired`` record for the
        old one. Returns the new node. Raises ValueError when ``node_id`` is not a current node."""
        tree = topic_tree(self.root)

        def decide() -> list[dict]:
            old = self.nodes.get(node_id)
            if old is None:
                raise ValueError(f"{node_id}: no such standing item")
            if old.retired_by is not None:
                raise ValueError(f"{node_id}: not current (revised by {old.retired_by}); correct that one")
            text = redact(content)[0]
            route = tree.route(text)
            r = old.rec
            rec = {"v": jsonl.SCHEMA_VERSION, "kind": "knowledge", "id": derived_id("gk", ts, "correct", node_id, text),
                   "timestamp": utc_iso(ts),
                   "node_kind": r["node_kind"], "content": text, "attribute": r.get("attribute", ""),
                   "topics": tree.top(route, 4), "applies": corrected_applies(r, text),
                   "provenance": {"entry_ids": [], "session_id": "", "agent_id": "", "speaker": "user",
                                  "form": "stated", "corrects": node_id}}
            retired = retirement(node_id, rec["id"], ts, "corrected by the user")
            for x in (rec, retired):
                self._fold(x)
            return [rec, retired]
        return self._locked(decide)[0]

    def _decide(self, cand: Candidate, tree, *, agent_id: str, session_id: str, project: str,
                ts: float) -> list[dict]:
        content = redact(cand.content)[0]
        toks = frozenset(token_set(content))
        if not toks:
            return []
        scope = [project] if cand.project_scoped and project else "*"
        gone = self.forgotten.ids()
        same_scope = [n for n in self.nodes.values() if n.retired_by is None and n.id not in gone
                      and (n.rec.get("applies") or {}).get("projects", "*") == scope]
        held = next((n for n in same_scope if n.tokens == toks or jaccard(n.tokens, toks) >= DUPLICATE_JACCARD), None)
        if held is not None:
            if not cand.requests or (held.rec.get("applies") or {}).get("requests"):
                return []  # already held: its wording stays
            # held with no scope, now read with the one it was said for (a pass that saw the run alone came first,
            # as the daemon's can): the same words, scoped, replace it
            content = held.rec["content"]
        route = tree.route(content)
        entry_ids = [i for i in cand.entry_ids if isinstance(i, str)][:8]
        source = (*entry_ids,) if entry_ids else (clean_id(session_id), round(ts, 3))
        salt = (cand.requests,) if held is not None else ()  # the scoped replacement is a node of its own
        rec = {"v": jsonl.SCHEMA_VERSION, "kind": "knowledge", "id": derived_id("gk", ts, str(scope), content, *source,
                                                                              *salt),
               "timestamp": utc_iso(ts),
               "node_kind": cand.node_kind, "content": content, "attribute": cand.attribute,
               "topics": tree.top(route, 4),
               "applies": {"projects": scope, "from": None, "until": None,
                           **({"requests": cand.requests} if cand.requests else {}),
                           **({"asked": redact(cand.asked)[0][:200]} if cand.asked else {})},
               "provenance": {"entry_ids": entry_ids,
                              "session_id": clean_id(session_id), "agent_id": agent_id if is_valid_id(agent_id) else "",
                              "speaker": "user", "form": cand.form}}
        out = [rec]
        if held is not None:
            return [rec, retirement(held.id, rec["id"], ts, "said for a kind of request")]
        if cand.attribute:
            for n in same_scope:
                if n.rec.get("attribute") == cand.attribute and n.rec["node_kind"] != "choice":
                    if stated_after(n.rec, rec):
                        out.append(retirement(n.id, rec["id"], ts, f"{cand.attribute} revised"))
                        said = (n.rec.get("applies") or {}).get("requests")
                        if said and not cand.requests:  # a revision holds where the old version held
                            rec["applies"]["requests"] = said
                    else:  # stated before the current version (a host's clock behind): history at once
                        out.append(retirement(rec["id"], n.id, ts, "stated before the current version"))
                        break
        return out


def corrected_applies(old: dict, text: str) -> dict:
    """The ``applies`` of a correction of ``old`` to ``text``: the old one's, except a scope the old rule's own
    words gave it ("never book flights before 8am" → "book flights"), which the new words give again or not."""
    applies = dict(old.get("applies") or {"projects": "*"})
    said = applies.get("requests") or ""
    if said and said == ruled_scope(old.get("content") or ""):
        applies["requests"] = ruled_scope(text)
        if not applies["requests"]:
            del applies["requests"]
    return applies


def stated_after(old: dict, new: dict) -> bool:
    """Whether ``new`` was stated after ``old`` or at the same time (the statement time decides which version
    of an attribute is current, not the order they reached a host in; on a tie the newcomer wins)."""
    return parse_iso(new["timestamp"]) >= parse_iso(old["timestamp"])


def retirement(node_id: str, by: str, ts: float, reason: str) -> dict:
    """The ``retired`` record of ``node_id`` by ``by`` (its id derived from the two: written once per fleet)."""
    return {"v": jsonl.SCHEMA_VERSION, "kind": "retired", "id": derived_id("up", ts, node_id, by),
            "timestamp": utc_iso(ts), "node_id": node_id, "by": by, "reason": reason}
