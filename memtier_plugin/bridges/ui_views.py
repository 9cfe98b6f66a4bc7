"""What ``memtier ui`` shows, as JSON-ready dicts: the workspace read the way the hooks read it.

Every function reads through the stores' own readers (append-only files read
to their end, no lock held), so the hooks and the daemon keep writing while the
page is open. Items the user told memory to forget (``store/tombstones.py``)
are left out of every view; a trace that delivered one says so instead of its
text. Text is returned as stored: the page renders it with ``textContent``
only (stored text is untrusted).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..events import HookContext
from ..intake import checked_context, query_text
from ..layers.topics import topic_tree
from ..layers.workspace_layer import current_skills
from ..memory import Memory
from ..store.episodic import iter_records
from ..store.semantic import SemanticStore
from ..store.traces import iter_traces

#: Episodes shown per view at most (newest first); the page says when more were left out.
MAX_EPISODES = 2000
#: Traced prompts shown at most (newest first).
MAX_TRACES = 300


def episodes(mem: Memory, forgotten: frozenset[str]) -> dict[str, Any]:
    """Episodes by agent, then session (sessions newest first, entries in time order)."""
    read = mem.ledger.read()
    entries = sorted((e for e in read.entries.values() if e.id not in forgotten), key=lambda e: e.ts, reverse=True)
    shown, more = entries[:MAX_EPISODES], max(0, len(entries) - MAX_EPISODES)
    agents: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for e in shown:
        agents[e.agent_id][e.session_id].append({
            "id": e.id, "timestamp": e.timestamp, "role": e.role, "project": e.project, "content": e.content,
            "promoted": e.promoted, "fact_ids": e.fact_ids, "cognitive_weight": round(e.cognitive_weight, 4)})
    return {"agents": [{"agent_id": a, "sessions": [{"session_id": s, "entries": list(reversed(rows))}
                                                   for s, rows in sessions.items()]}
                       for a, sessions in sorted(agents.items())],
            "left_out": more, "problems": [str(p) for p in read.problems[:50]]}


def facts(mem: Memory, forgotten: frozenset[str]) -> dict[str, Any]:
    """Every project's fact revision chains (oldest first), the current fact last."""
    store = SemanticStore(mem.config.memory_root)
    out = []
    for project in store.projects():
        chains = []
        for chain in store.chains(project):
            kept = [{"id": r["id"], "timestamp": r.get("timestamp", ""), "content": r["content"],
                     "fact_kind": r.get("fact_kind", ""), "attribute": r.get("attribute", ""),
                     "origin_agent": r.get("origin_agent", ""), "sources": r.get("source_entry_ids") or [],
                     "supersedes": r.get("supersedes")} for r in chain if r["id"] not in forgotten]
            if kept:
                chains.append(kept)
        out.append({"project": project, "chains": chains})
    return {"projects": out, "problems": store.problems[:50]}


def global_layer(mem: Memory, forgotten: frozenset[str]) -> dict[str, Any]:
    """The Global layer's topic tree: each topic with its parents and the standing items under it
    (current ones, and the ones they retired, marked)."""
    store = mem.global_store
    store.refresh()
    tree = topic_tree(mem.config.memory_root)
    by_topic: dict[str, list] = defaultdict(list)
    for n in store.nodes.values():
        if n.id in forgotten:
            continue
        rec = n.rec
        row = {"id": n.id, "kind": rec.get("node_kind", ""), "attribute": rec.get("attribute", ""),
               "content": rec["content"], "timestamp": rec.get("timestamp", ""),
               "projects": (rec.get("applies") or {}).get("projects", "*"), "retired_by": n.retired_by,
               "said_for": (rec.get("applies") or {}).get("requests", ""),
               "asked": (rec.get("applies") or {}).get("asked", ""),
               "sources": (rec.get("provenance") or {}).get("entry_ids") or []}
        for t in rec.get("topics") or ["(no topic)"]:
            by_topic[t].append(row)
    topics = sorted(set(by_topic) | {p for t in by_topic for p in tree.parents(t)})
    return {"topics": [{"topic": t, "depth": t.count("/"), "parents": tree.parents(t), "items": by_topic.get(t, [])}
                       for t in topics], "problems": store.problems[:50]}


def _workspace_projects(mem: Memory) -> list[str]:
    """Projects with skills or working state (the project is in each record; file names are derived)."""
    root, names = mem.config.memory_root, set()
    for sub in ("procedural", "state"):
        for path in sorted((root / sub).glob("*.jsonl")) if (root / sub).is_dir() else ():
            names.update(rec.get("project", "") for rec, _, problem in iter_records(path)
                         if not problem and isinstance(rec.get("project", ""), str))
    return sorted(names)


def workspace_layer(mem: Memory, forgotten: frozenset[str]) -> dict[str, Any]:
    """Each project's current skills (with the revisions they superseded) and its latest working state."""
    out = []
    for project in _workspace_projects(mem):
        store = mem.workspace_store("procedural", project)
        every = {r["id"]: r for r in store.refresh() if r.get("kind") == "skill"}
        skills = []
        for r in current_skills(store):
            chain, cur = [], r
            while cur is not None and len(chain) < 50:
                if cur["id"] not in forgotten:
                    chain.append({"id": cur["id"], "timestamp": cur.get("timestamp", ""), "content": cur["content"],
                                  "count": cur.get("count", 1)})
                cur = every.get(cur.get("supersedes") or "")
            if chain:
                skills.append(list(reversed(chain)))
        states = [r for r in mem.workspace_store("state", project).refresh()
                  if r.get("kind") == "state" and r.get("id") not in forgotten]
        st = states[-1] if states else None
        out.append({"project": project, "skills": skills, "state": None if st is None else {
            "id": st.get("id", ""), "timestamp": st.get("timestamp", ""), "session_id": st.get("session_id", ""),
            "progress": st.get("progress", ""), "pending": st.get("pending") or [],
            "artifacts": st.get("artifacts") or []}})
    return {"projects": out}


def _texts(mem: Memory) -> dict[str, str]:
    """Item id → its text, over every layer (what a trace's delivered ids stood for)."""
    out = {e.id: e.content for e in mem.ledger.read().entries.values()}
    for chain in SemanticStore(mem.config.memory_root).chains():
        out.update((r["id"], r["content"]) for r in chain)
    store = mem.global_store
    store.refresh()
    out.update((n.id, n.rec["content"]) for n in store.nodes.values())
    for project in _workspace_projects(mem):
        out.update((r["id"], r.get("content", "")) for r in mem.workspace_store("procedural", project).refresh())
    return out


def traces(mem: Memory, forgotten: frozenset[str], agent: str | None = None) -> dict[str, Any]:
    """Each traced prompt (newest first): what was delivered, with its probability and signals, and what was
    left out and why. A delivered item since forgotten is marked, its text not shown."""
    problems: list[str] = []
    recs = [r for r in iter_traces(mem.config.memory_root, [agent] if agent else None, problems)
            if r.get("kind", "trace") == "trace"]
    recs = sorted(recs, key=lambda r: str(r.get("timestamp", "")), reverse=True)[:MAX_TRACES]
    texts = _texts(mem) if recs else {}
    rows = []
    for r in recs:
        delivered = []
        for d in r.get("delivered") or []:
            gone = d["id"] in forgotten
            delivered.append({"id": d["id"], "tier": d.get("tier", ""), "score": d.get("score"),
                              "probability": d.get("probability"), "signals": d.get("signals") or {},
                              "rerank": d.get("rerank"), "forgotten": gone,
                              "content": None if gone else texts.get(d["id"])})
        rows.append({"timestamp": r.get("timestamp", ""), "agent_id": r.get("agent_id", ""),
                     "session_id": r.get("session_id", ""), "run_id": r.get("run_id", ""),
                     "query": r.get("query", ""), "mode": r.get("mode", ""), "tokens": r.get("tokens", 0),
                     "elapsed_ms": r.get("elapsed_ms"), "delivered": delivered,
                     "left_out": [str(x) for x in r.get("left_out") or []]})
    return {"traces": rows, "problems": problems[:50]}


def search(mem: Memory, forgotten: frozenset[str], query: str, *, agent: str = "main", project: str | None = None,
           session: str = "") -> dict[str, Any]:
    """``memtier search --explain`` for the page: every delivered hit with each signal's value, weight and
    contribution, its probability and layer, and what packing left out."""
    ctx = checked_context(HookContext(agent_id=agent, session_id=session, project=project or ""))
    result = mem.search(query_text(query), ctx, all_projects=project is None)
    hits = [h.row() for h in result.hits if h.id not in forgotten]
    return {"query": result.query, "mode": result.mode, "stage1_sessions": result.stage1_sessions,
            "tokens": result.tokens, "elapsed_ms": round(result.elapsed_ms, 3), "hits": hits,
            "left_out": [str(x) for x in result.left_out]}
