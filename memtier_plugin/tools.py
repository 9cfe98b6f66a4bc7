"""The memory tools an agent calls on purpose: memory_search, memory_get, memory_add, memory_forget,
memory_correct.

Plain functions over one workspace's :class:`~memtier_plugin.memory.Memory`,
free of pluggy and of any transport: the sidecar (``memtier serve``), the MCP
server (``memtier mcp``) and a reference host call the same code, so a tool
answers alike everywhere. Scoping is the hooks' scoping: ``ctx.agent_id`` is
checked before it becomes a path (:class:`~memtier_plugin.errors.InvalidIdError`),
an agent reads only the episodic ledgers it may read
(``agents.global_read``), and project-shared facts are visible to every agent.

memory_forget and memory_correct are the user's verbs (:mod:`memtier_plugin.forgetting`),
offered to agents and runtimes that act for the user; nothing forgotten is ever
handed out by memory_search or memory_get.

Each answer is a JSON-ready dict. A search writes no trace (the agent asked;
nothing was delivered on memory's initiative) and does not touch run state.
"""

from __future__ import annotations

from typing import Any

from .vocabulary import ROLES
from .errors import MemtierError
from .events import HookContext
from .intake import checked_context, query_text
from .memory import Memory
from . import forgetting

#: Roles an added entry may take (the ledger's own roles, less ``fact``: facts come from consolidation).
ADD_ROLES = ROLES
#: The longest id memory_get looks up (ids are short; anything longer cannot exist).
MAX_ID_CHARS = 200


def _hit(h) -> dict[str, Any]:
    return {"id": h.id, "tier": h.tier, "score": round(h.score, 6), "timestamp": h.timestamp,
            "agent_id": h.agent_id, "session_id": h.session_id, "role": h.role, "content": h.content,
            "layer": h.layer, "standing": h.standing}


def memory_search(mem: Memory, ctx: HookContext, query: str, *, limit: int | None = None) -> dict[str, Any]:
    """Recall for ``query`` as ``ctx.agent_id`` may see it (the before_prompt_build ranking and packing).

    Returns ``{"query", "mode", "hits": [{id, tier, score, timestamp, agent_id,
    session_id, role, content}], "block", "served"}``; ``limit`` only shortens ``hits``. With
    Foresight on, a query matching a prediction of the session's task is served from its cache
    (``served: "foresight"``, traced like a prompt); otherwise it is retrieved (``"retrieval"``).
    """
    ctx = checked_context(ctx)
    if not isinstance(query, str) or not query.strip():
        raise MemtierError("memory_search: 'query' must be a non-empty string")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise MemtierError(f"memory_search: 'limit' must be a positive integer, got {limit!r}")
    text = query_text(query)
    if mem.foresight is not None:  # the same path as a prompt: a matching prediction serves it from the cache
        result, access = mem.recall_for(text, ctx, start_task=False)
    else:
        result, access = mem.recall(text, ctx, record_trace=False), None  # standing included, as in before_prompt_build
    hits = result.hits[:limit] if limit else result.hits
    return {"query": text, "mode": result.mode, "hits": [_hit(h) for h in hits], "block": result.block,
            "served": "foresight" if access is not None and access.hit else "retrieval"}


def memory_get(mem: Memory, ctx: HookContext, entry_id: str) -> dict[str, Any]:
    """One episodic entry (``ep-...``), semantic fact (``sf-...``), standing node (``gk-...``), or the
    project's skill (``sk-...``) or working state (``ws-...``), by id (:meth:`Memory.entry_record`).

    ``{"found": false, "id"}`` when there is no such id *or* ``ctx.agent_id``
    may not read it (the answer does not tell the two apart).
    """
    ctx = checked_context(ctx)
    if not isinstance(entry_id, str) or not entry_id.strip() or len(entry_id) > MAX_ID_CHARS:
        raise MemtierError(f"memory_get: 'id' must be an entry or fact id, got {str(entry_id)[:60]!r}")
    entry_id = entry_id.strip()
    if entry_id in mem.forgotten:
        return {"found": False, "id": entry_id}
    rec = mem.entry_record(entry_id, ctx.agent_id, ctx.project)
    if rec is not None:
        return {"found": True, **rec}
    return {"found": False, "id": entry_id}


def memory_add(mem: Memory, ctx: HookContext, content: str, *, role: str = "user") -> dict[str, Any]:
    """Append one entry to ``ctx.agent_id``'s episodic ledger (redacted, durable before the answer).

    Returns ``{"id", "agent_id", "session_id", "project", "role", "timestamp", "redacted"}``.
    """
    ctx = checked_context(ctx)
    if not isinstance(content, str) or not content.strip():
        raise MemtierError("memory_add: 'content' must be a non-empty string")
    if role not in ADD_ROLES:
        raise MemtierError(f"memory_add: 'role' must be one of {', '.join(ADD_ROLES)}, got {str(role)[:30]!r}")
    text = content if role != "system" or content.startswith("[system]") else "[system] " + content
    rec = mem.ledger.add(agent_id=ctx.agent_id, session_id=ctx.session_id, project=ctx.project, content=text,
                         role=role, provenance={"run_id": ctx.run_id, "source": "memory_add"})
    return {"id": rec["id"], "agent_id": rec["agent_id"], "session_id": rec["session_id"],
            "project": rec["project"], "role": rec["role"], "timestamp": rec["timestamp"],
            "redacted": rec["provenance"].get("redacted", [])}


def memory_forget(mem: Memory, ctx: HookContext, ids: list[str]) -> dict[str, Any]:
    """Forget ``ids`` and what was derived only from them (:func:`memtier_plugin.forgetting.forget`).

    Returns ``{"forgotten": [{id, layer}], "derived": [{id, layer, because_of}], "already": [ids]}``;
    an unknown id is an error naming it, and then nothing is forgotten.
    """
    checked_context(ctx)
    out = forgetting.forget(mem, ids, reason="tool")
    if out["unknown"]:
        raise MemtierError(f"memory_forget: no memory item has the id {', '.join(out['unknown'][:5])}; "
                           "nothing was forgotten")
    return {k: out[k] for k in ("forgotten", "derived", "already")}


def memory_correct(mem: Memory, ctx: HookContext, item_id: str, text: str) -> dict[str, Any]:
    """Replace a fact's or standing item's value (:func:`memtier_plugin.forgetting.correct`):
    ``{"old", "new", "layer"}``."""
    checked_context(ctx)
    return forgetting.correct(mem, item_id, text)
