"""Cost accounting: the store tokens model-backed maintenance spends, and per-session summaries.

``memory/costs.jsonl`` holds one ``store_cost`` record per model call made
while consolidating (none on the heuristic path). :func:`cost_summary` joins it
with the retrieval traces (Retrieve tokens) and the semantic store (facts per
session), MemSidecar's cost columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import jsonl, traces
from .episodic import append_lines, iter_records
from .semantic import SemanticStore

COSTS_FILE = "costs.jsonl"


def store_cost(entry: dict, result: Any, *, model: str, now: str) -> dict:
    """The ``store_cost`` record of one model extraction from episodic ``entry`` (``result``: a ChatResult)."""
    return {"v": jsonl.SCHEMA_VERSION, "kind": "store_cost", "timestamp": now, "entry_id": entry["id"],
            "agent_id": entry["agent_id"], "session_id": entry["session_id"], "project": entry.get("project") or "",
            "run_id": (entry.get("provenance") or {}).get("run_id") or "", "model": model,
            "prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens}


def append_costs(memory_root: Path | str, records: list[dict]) -> None:
    """Append ``records`` to ``costs.jsonl`` in one durable write (nothing when there are none)."""
    if records:
        append_lines(Path(memory_root) / COSTS_FILE, b"".join(jsonl.dumps(r) for r in records))


def cost_summary(memory_root: Path | str) -> list[dict]:
    """Store and Retrieve tokens per session (MemSidecar's cost columns), with a per-run breakdown.

    Store tokens: model output tokens spent on memory maintenance (``costs.jsonl``,
    ``completion_tokens``; 0 on the heuristic path). Retrieve tokens: memory text
    delivered to the agent (``traces/<agent>/*.jsonl``, ``tokens``).
    """
    root = Path(memory_root)
    rows: dict[str, dict] = {}

    def row(session: str) -> dict:
        return rows.setdefault(session, {"session_id": session, "agents": set(), "store_tokens": 0,
                                         "store_prompt_tokens": 0, "model_calls": 0, "retrieve_tokens": 0,
                                         "recalls": 0, "facts": 0, "runs": {}})

    def run(r: dict, run_id: str) -> dict:
        return r["runs"].setdefault(run_id or "-", {"store_tokens": 0, "retrieve_tokens": 0})

    costs = root / COSTS_FILE
    for rec, _lineno, problem in iter_records(costs) if costs.is_file() else ():
        if problem or rec.get("kind") != "store_cost" or not all(
                isinstance(rec.get(k, 0), int) and not isinstance(rec.get(k, 0), bool)
                for k in ("completion_tokens", "prompt_tokens")) or not isinstance(rec.get("session_id", ""), str):
            continue
        r = row(rec.get("session_id") or "")
        if isinstance(rec.get("agent_id"), str) and rec["agent_id"]:
            r["agents"].add(rec["agent_id"])
        n = rec.get("completion_tokens") or 0
        r["store_tokens"] += n
        r["store_prompt_tokens"] += rec.get("prompt_tokens") or 0
        r["model_calls"] += 1
        run(r, str(rec.get("run_id") or ""))["store_tokens"] += n
    for rec in traces.iter_traces(root):
        r = row(rec.get("session_id") or "")
        if rec.get("agent_id"):
            r["agents"].add(rec["agent_id"])
        if rec.get("kind", "trace") == "trace":
            n = rec.get("tokens") or 0
            r["retrieve_tokens"] += n
            r["recalls"] += 1
            run(r, rec.get("run_id") or "")["retrieve_tokens"] += n
    store = SemanticStore(root)
    for project in store.projects():
        for rec in store.project(project, refresh=False).records.values():
            for s in rec.get("session_ids") or []:
                row(s)["facts"] += 1
                if rec.get("origin_agent"):
                    row(s)["agents"].add(rec["origin_agent"])
    out = []
    for r in sorted(rows.values(), key=lambda r: r["session_id"]):
        r["agents"] = sorted(r["agents"])
        out.append(r)
    return out
