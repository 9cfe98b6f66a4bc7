"""The user's own hands on memory: forget items (and what was derived only from them), or correct one.

``forget`` appends one tombstone per item to ``memory/forgotten.jsonl``
(:mod:`memtier_plugin.store.tombstones`: ids only, the ledgers stay append-only)
and, for each forgotten episode, one for every fact, Global-layer item and skill
whose sources are all forgotten now (``because_of`` names the episode). Every
room asks the Memory's one :class:`~memtier_plugin.store.tombstones.Forgotten`
before it offers an item, so nothing forgotten is delivered again, by this
process or by a sidecar, MCP server or daemon that was running before.

``correct`` is a revision, as if the user had said it: a fact gets a new fact
that supersedes it (the semantic tier's revision link), a Global-layer item a new
node that retires it (:meth:`~memtier_plugin.layers.global_layer.GlobalStore.revise`);
the old value stays in the file as history and is never delivered as current.

``select`` lists what a filter (words, session, agent, project, time) would
forget, for the user to see before anything is written (``memtier forget --query``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import MemtierError
from .memory import Memory
from .redact import redact
from .store import tombstones
from .store.files import tail_records
from .store.jsonl import clean_text
from .store.paths import parse_iso, utc_iso
from .store.semantic import SemanticStore, fact_id
from .tokenize import token_set

PREVIEW_CHARS = 160  # a selected item's text as the user sees it before forgetting it
MAX_CORRECTION_CHARS = 2000  # a correction is one statement, as a standing item or a fact holds
DERIVED_LAYERS = ("fact", "standing", "skill")


@dataclass
class Item:
    """One item of the workspace as forgetting sees it: where it lives, its text, who and when, its sources."""

    id: str
    layer: str  # one of tombstones.LAYERS
    text: str
    when: str = ""
    agents: tuple = ()
    sessions: tuple = ()
    projects: tuple = ()  # ("*",) for a Global-layer item of every project
    sources: set = field(default_factory=set)  # the episodes it was derived from

    def public(self) -> dict[str, Any]:
        text = " ".join(self.text.split())
        return {"id": self.id, "layer": self.layer,
                "text": text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS - 1] + "…", "when": self.when}


def _records(path: Path):
    for _at, _end, rec in tail_records(path):
        if isinstance(rec, dict) and isinstance(rec.get("id"), str):
            yield rec


def _strs(*values) -> tuple:
    return tuple(v for v in values if isinstance(v, str) and v)


def catalog(mem: Memory) -> dict[str, Item]:
    """Every item of the workspace by id: episodes, facts, Global-layer items, skills, working state, hooks."""
    root = Path(mem.config.memory_root)
    items: dict[str, Item] = {}
    promoted: dict[str, set] = {}  # fact id -> the entries whose promotion named it (a restated fact)
    for path in mem.ledger.files():
        for _at, _end, rec in tail_records(path):
            if not isinstance(rec, dict):
                continue
            kind = rec.get("kind", "entry")
            if kind == "entry" and isinstance(rec.get("id"), str) and isinstance(rec.get("content"), str):
                items.setdefault(rec["id"], Item(rec["id"], "episode", rec["content"], str(rec.get("timestamp", "")),
                                                 _strs(rec.get("agent_id")), _strs(rec.get("session_id")),
                                                 _strs(rec.get("project"))))
            elif kind == "promoted" and isinstance(rec.get("entry_id"), str):
                for fid in rec.get("fact_ids") or []:
                    if isinstance(fid, str):
                        promoted.setdefault(fid, set()).add(rec["entry_id"])
    facts = SemanticStore(root)
    for name in facts.projects():
        for fid, rec in facts.project(name, refresh=False).records.items():
            src = {s for s in rec.get("source_entry_ids") or [] if isinstance(s, str)} | promoted.get(fid, set())
            items.setdefault(fid, Item(fid, "fact", rec["content"], rec.get("timestamp", ""),
                                       _strs(rec.get("origin_agent")), _strs(*(rec.get("session_ids") or [])),
                                       _strs(name), src))
    mem.global_store.refresh()
    for node in list(mem.global_store.nodes.values()):
        r, prov = node.rec, node.rec.get("provenance") or {}
        scope = (r.get("applies") or {}).get("projects", "*")
        items.setdefault(node.id, Item(node.id, "standing", r["content"], r["timestamp"], _strs(prov.get("agent_id")),
                                       _strs(prov.get("session_id")), ("*",) if scope == "*" else _strs(*scope),
                                       set(prov.get("entry_ids") or [])))
    for sub, layer in (("procedural", "skill"), ("state", "state")):
        for path in sorted((root / sub).glob("*.jsonl")) if (root / sub).is_dir() else []:
            for rec in _records(path):
                if rec.get("kind") != ("skill" if layer == "skill" else "state"):
                    continue
                prov = rec.get("provenance") or {}
                text = str(rec.get("content") or rec.get("progress") or "")
                items.setdefault(rec["id"], Item(
                    rec["id"], layer, text, str(rec.get("timestamp", "")), _strs(prov.get("agent_id")),
                    _strs(prov.get("session_id") or rec.get("session_id")), _strs(rec.get("project")),
                    {s for s in prov.get("entry_ids") or [] if isinstance(s, str)} if layer == "skill" else set()))
    if (root / "hooks").is_dir():
        sched = mem.hook_scheduler
        sched.refresh()
        for hook in sched.hooks:
            items.setdefault(hook.key, Item(hook.key, "hook", hook.entry or hook.entry_id))
    return items


def _checked_ids(ids) -> list[str]:
    if isinstance(ids, str) or not isinstance(ids, (list, tuple)) or not ids:
        raise MemtierError("forget: 'ids' must be a non-empty list of ids")
    for i in ids:
        if not isinstance(i, str) or not i.strip() or len(i) > 256 or any(c in i for c in "\n\r\x00"):
            raise MemtierError(f"forget: {str(i)[:60]!r} is not an id")
    return list(dict.fromkeys(i.strip() for i in ids))


def forget(mem: Memory, ids: list[str], *, reason: str = "user") -> dict:
    """Forget ``ids`` and what was derived only from them (module docstring).

    Returns ``{"forgotten": [{id, layer}], "derived": [{id, layer, because_of}], "unknown": [ids],
    "already": [ids]}``. When any id is unknown nothing at all is forgotten (``forgotten`` and
    ``derived`` are empty): a typo never forgets half of what was asked. An id forgotten before is
    listed under ``already`` and written again never.
    """
    ids = _checked_ids(ids)
    items = catalog(mem)
    unknown = [i for i in ids if i not in items]
    if unknown:
        return {"forgotten": [], "derived": [], "unknown": unknown, "already": []}
    gone = mem.forgotten.ids()
    already = [i for i in ids if i in gone]
    new = [i for i in ids if i not in gone]
    after = gone | set(new)
    derived = []
    for it in items.values():
        if it.layer in DERIVED_LAYERS and it.id not in after and it.sources and it.sources <= after:
            cause = next((s for s in new if s in it.sources), None)
            if cause is not None:
                derived.append({"id": it.id, "layer": it.layer, "because_of": cause})
    ts = mem.clock()
    records = [tombstones.forget_record(i, items[i].layer, ts=ts, reason=reason) for i in new]
    records += [tombstones.forget_record(d["id"], d["layer"], ts=ts, reason=reason, because_of=d["because_of"])
                for d in derived]
    tombstones.append(mem.config.memory_root, records)
    return {"forgotten": [{"id": i, "layer": items[i].layer} for i in new], "derived": derived,
            "unknown": [], "already": already}


def _day_start(value: str) -> float:
    try:
        return parse_iso(value.strip())
    except (AttributeError, ValueError, OverflowError):
        raise MemtierError(f"--before: {str(value)[:40]!r} is not a date (YYYY-MM-DD) or an ISO-8601 time") from None


def _when(it: Item) -> float | None:
    try:
        return parse_iso(it.when) if it.when else None
    except (ValueError, OverflowError):
        return None


def select(mem: Memory, *, query: str | None = None, session: str | None = None, agent: str | None = None,
           project: str | None = None, before: str | None = None, limit: int | None = 50) -> list[dict]:
    """What ``memtier forget`` with these filters would forget (all filters given must hold), oldest first,
    none forgotten already: ``[{id, layer, text (a preview), when}]``, at most ``limit`` (None: all).

    ``query`` matches an item whose text holds it (case ignored) or holds every one of its words;
    ``project`` matches items of that project (a Global-layer item of every project is not one);
    ``before`` is a date (``2026-11-01``) or an ISO-8601 time: items from before it.
    """
    if not any(v for v in (query, session, agent, project, before)):
        raise MemtierError("forget: give ids, or at least one of --query, --session, --agent, --project, --before")
    cutoff = _day_start(before) if before else None
    needle = query.strip().lower() if query else ""
    words = frozenset(token_set(query)) if query else frozenset()
    gone = mem.forgotten.ids()
    out = []
    for it in catalog(mem).values():
        if it.id in gone or it.layer == "hook":
            continue
        if session and session not in it.sessions or agent and agent not in it.agents \
                or project and project not in it.projects:
            continue
        if cutoff is not None:
            t = _when(it)
            if t is None or t >= cutoff:
                continue
        if needle and needle not in it.text.lower() and not (words and words <= token_set(it.text)):
            continue
        out.append(it)
    out.sort(key=lambda it: (it.when, it.id))
    return [it.public() for it in (out if limit is None else out[:limit])]


def correct(mem: Memory, item_id: str, text: str) -> dict:
    """Replace a fact's or a Global-layer item's value with ``text`` (module docstring).

    Returns ``{"old": id, "new": id, "layer": "fact"|"standing"}``; raises :class:`MemtierError` (one line
    naming the id) for an unknown, forgotten or no longer current item, or an episode (what was said is
    forgotten, not rewritten).
    """
    if not isinstance(item_id, str) or not item_id.strip():
        raise MemtierError("correct: 'id' must be a fact (sf-…) or standing item (gk-…) id")
    item_id = item_id.strip()
    if not isinstance(text, str) or not text.strip():
        raise MemtierError(f"correct {item_id}: the new text must be a non-empty string")
    text = redact(clean_text(" ".join(text.split())))[0][:MAX_CORRECTION_CHARS]
    if item_id in mem.forgotten:
        raise MemtierError(f"correct {item_id}: it was forgotten; add the new text instead")
    ts = mem.clock()
    store = mem.global_store
    store.refresh()
    if item_id in store.nodes:
        try:
            new = store.revise(item_id, text, ts=ts)
        except ValueError as exc:
            raise MemtierError(f"correct {exc}") from None
        return {"old": item_id, "new": new["id"], "layer": "standing"}
    facts = SemanticStore(mem.config.memory_root, fsync=mem.ledger.fsync)
    old = facts.get(item_id)
    if old is None:
        raise MemtierError(f"correct {item_id}: no fact (sf-…) or standing item (gk-…) has this id")
    pf = facts.project(old["project"], refresh=False)
    if not pf.is_current(item_id):
        raise MemtierError(f"correct {item_id}: not current (superseded by {pf.superseded_by.get(item_id)}); "
                           "correct that one")
    at = utc_iso(ts)
    rec = {"v": old.get("v", 1), "kind": "fact", "id": fact_id(f"{item_id}#corrected@{at}", 0), "timestamp": at,
           "project": old["project"], "origin_agent": old.get("origin_agent") or "", "fact_kind":
           old.get("fact_kind") or "attribute", "subject": old.get("subject") or "user",
           "attribute": old.get("attribute") or "", "value": text, "content": text, "confidence": 1.0,
           "source_entry_ids": [], "session_ids": [], "effective_time": at, "supersedes": item_id,
           "extractor": "user", "recorded_at": at}
    facts.append(old["project"], [rec])
    return {"old": item_id, "new": rec["id"], "layer": "fact"}
