"""The Workspace layer: skills learned from successful runs, and working state (MemSidecar §3.2, eq. 6).

Per project, append-only JSONL like the other ledgers:

* ``memory/procedural/<project>.jsonl`` — ``{"kind": "skill", "goal": <the run's request>,
  "steps": [{"tool", "params"}], "tools": [...], "outcome": "success", "content": <one readable
  line>, "provenance": {"run_id", "session_id", "agent_id", "entry_ids"}}``. A skill is written
  only from a run that succeeded and whose tool calls all succeeded after the last failure
  (the sequence that achieved the task); it is scored in the procedural tier (μ 1.4).
* ``memory/state/<project>.jsonl`` — ``{"kind": "state", "session_id", "progress", "pending",
  "artifacts"}`` at task boundaries: what the last run did and what it left open.

A skill whose goal and tool sequence a current skill already has is not written again.
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path

import orjson

from ..store import jsonl
from ..store.episodic import append_lines, clean_id, clip_text, new_id, utc_iso
from ..store.files import TailReader
from ..store.paths import clip_redacted
from ..redact import redact, redact_obj
from ..store.semantic import project_filename
from ..tokenize import jaccard, token_set

log = logging.getLogger(__name__)
SKILL_DUPLICATE = 0.8
_PENDING = re.compile(r"[^.!?\n]*\b(?:next|todo|pending|still need|remaining|will|follow[- ]up|tomorrow|later)\b[^.!?\n]*[.!?]?",
                      re.IGNORECASE)


def _short_params(params) -> dict:
    """Params as a skill keeps them: redacted, then scalar values cut to 80 characters, at most 8 keys."""
    if not isinstance(params, dict):
        return {}
    out = {}
    for k, v in list(params.items())[:8]:
        if isinstance(v, (str, int, float, bool)) or v is None:
            out[clip_redacted(str(k), 40)[0]] = v if not isinstance(v, str) else clip_redacted(v, 80)[0]
    return redact_obj(out)[0]


def skill_problem(rec: dict) -> str | None:
    kind = rec.get("kind")
    if kind == "skill":
        if not all(isinstance(rec.get(k), str) and rec[k] for k in ("id", "content", "goal", "timestamp")):
            return "skill record lacks a string id, content, goal or timestamp"
        steps = rec.get("steps")
        if not isinstance(steps, list) or not all(isinstance(s, dict) and isinstance(s.get("tool"), str) for s in steps):
            return "skill 'steps' is not a list of {tool, params}"
        return None
    if kind == "state":
        if not isinstance(rec.get("id"), str) or not isinstance(rec.get("progress", ""), str):
            return "state record lacks a string id or progress"
        return None
    return f"unknown record kind {str(kind)[:30]!r}"


class ProjectLedger:
    """One project's append-only file under ``memory/<sub>/`` folded in memory."""

    def __init__(self, memory_root: Path | str, sub: str, project: str, *, fsync: bool = True):
        self.path = Path(memory_root) / sub / project_filename(project)
        self.project = project
        self.fsync = fsync
        self.records: list[dict] = []
        self._tail = TailReader(self.path)
        self._lock = threading.RLock()

    def refresh(self) -> list[dict]:
        with self._lock:
            new = list(self._tail.read())
            if self._tail.restarted:
                self.records = []
            self.records.extend(rec for _at, _end, rec in new if rec is not None and skill_problem(rec) is None)
            return self.records

    def append(self, rec: dict) -> None:
        append_lines(self.path, jsonl.dumps(rec), fsync=self.fsync)
        self.refresh()


def learn_skill(store: ProjectLedger, *, goal: str, calls: list[dict], run_id: str, session_id: str,
                agent_id: str, entry_ids: list[str], ts: float) -> dict | None:
    """The skill a successful run shows (its tool calls after the last failure), unless already known."""
    tail = []
    for call in calls:
        if call.get("error"):
            tail = []  # what came before a failure did not achieve the task
        else:
            tail.append(call)
    if not tail or not goal.strip():
        return None
    steps = [{"tool": clip_redacted(str(c.get("name", "")), 80)[0], "params": _short_params(c.get("params"))} for c in tail[:12]]
    tools = list(dict.fromkeys(s["tool"] for s in steps))
    goal = clip_redacted(goal.strip(), 300)[0]
    gtoks = frozenset(token_set(goal))
    for rec in store.refresh():
        if rec.get("kind") == "skill" and [s["tool"] for s in rec["steps"]] == [s["tool"] for s in steps] \
                and jaccard(frozenset(token_set(rec["goal"])), gtoks) >= SKILL_DUPLICATE:
            return None
    lines = "; ".join(f"{i + 1}) {s['tool']}({orjson.dumps(s['params']).decode() if s['params'] else ''})"
                      for i, s in enumerate(steps))
    rec = {"v": jsonl.SCHEMA_VERSION, "kind": "skill", "id": new_id("sk", ts), "timestamp": utc_iso(ts),
           "project": store.project, "goal": goal, "steps": steps, "tools": tools, "outcome": "success",
           "content": clip_text(f"Skill that worked for \"{goal}\": {lines}", 1200),
           "provenance": {"run_id": clean_id(run_id), "session_id": clean_id(session_id), "agent_id": agent_id,
                          "entry_ids": entry_ids[:16]}}
    store.append(rec)
    return rec


def record_state(store: ProjectLedger, *, session_id: str, progress: str, calls: list[dict], ts: float) -> dict:
    """Working state at a task boundary: what was done, what is pending, what was produced."""
    progress = clip_redacted(progress.strip(), 600)[0]
    pending = [redact(p.strip())[0] for p in _PENDING.findall(progress)][:5]
    artifacts = []
    for c in calls:
        if not c.get("error"):
            for k, v in (c.get("params") or {}).items() if isinstance(c.get("params"), dict) else ():
                if isinstance(v, str) and re.search(r"(?:path|file|url|id|version|branch|ref)$", str(k), re.I):
                    artifacts.append(f"{k}={clip_redacted(v, 80)[0]}")
    rec = {"v": jsonl.SCHEMA_VERSION, "kind": "state", "id": new_id("ws", ts), "timestamp": utc_iso(ts),
           "project": store.project, "session_id": clean_id(session_id), "progress": progress,
           "pending": pending, "artifacts": redact_obj(list(dict.fromkeys(artifacts))[:10])[0]}
    store.append(rec)
    return rec
