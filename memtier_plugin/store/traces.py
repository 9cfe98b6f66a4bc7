"""The trace ledger: what memory delivered, and how each run ended (the one owner).

``memory/traces/<agent_id>/YYYY-MM-DD.jsonl``, one JSON object per line, like
the episodic ledger, but derived for learning and inspection: written without
fsync (a lost trace costs a training example, never a memory).

Kinds:

* ``trace`` — one recall: ``run_id``, ``agent_id``, ``session_id``, ``query``
  (redacted), ``mode``, ``stage1_sessions``, ``delivered`` (rows: ``id``,
  ``agent_id``, ``score``, ``tier``, ``signals``, optional ``rerank``),
  ``left_out``, ``tokens``, ``elapsed_ms``;
* ``decision`` — a pre_tool decision: ``tool``, ``tool_call_id``, ``action``
  (silent / supplement / intervene), ``evidence`` (ids), ``features``;
* ``foresight`` — one access of the agent with Foresight on (docs/foresight.md):
  ``query`` (redacted), ``outcome`` (hit / no match / late / failed / no task /
  task start), ``prediction`` (the predicted query served), ``similarity``,
  ``wait_ms``, ``wait_saved_ms`` (what the normal retrieval of it took, less
  the wait), ``tokens`` (delivered);
* ``run_end`` — a finished run: ``run_id``, ``agent_id``, ``session_id``,
  ``project``, ``success``, ``tool_calls``, ``failed_calls``, ``delivered``
  (ids).

Readers go through :func:`iter_traces`, which validates each record's shape
and skips (and reports) the ones it cannot use.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterable, Iterator

from . import jsonl
from .episodic import append_lines, clean_id, iter_records, utc_iso
from .paths import agent_day_file, checked_id, day_of, is_valid_id
from ..redact import redact

log = logging.getLogger(__name__)
SUB = "traces"


def trace_file(memory_root: Path | str, agent_id: str, ts: float) -> Path:
    """The trace ledger of ``agent_id`` for the day of ``ts`` (``agent_id`` checked)."""
    return agent_day_file(memory_root, SUB, agent_id, day_of(ts))


def append(memory_root: Path | str, agent_id: str, rec: dict, ts: float) -> bool:
    """Append one trace record; False (logged) when it could not be written."""
    path = trace_file(memory_root, agent_id, ts)
    try:
        append_lines(path, jsonl.dumps(rec), fsync=False)
        return True
    except OSError as exc:
        log.warning("%s: %s not written: %s", path, rec.get("kind"), exc)
        return False


def recall_record(*, ts: float, run_id: str, agent_id: str, session_id: str, query: str, mode: str,
                  stage1_sessions: list[str], delivered: list[dict], left_out: list[str], tokens: int,
                  elapsed_ms: float) -> dict:
    """A ``trace`` record (query redacted, ids cleaned, delivered rows without their content)."""
    return {"v": jsonl.SCHEMA_VERSION, "kind": "trace", "timestamp": utc_iso(ts), "run_id": clean_id(run_id),
            "agent_id": checked_id(agent_id), "session_id": clean_id(session_id),
            "query": redact(jsonl.clean_text(query))[0], "mode": mode, "stage1_sessions": stage1_sessions,
            "delivered": [{k: v for k, v in row.items() if k != "content"} for row in delivered],
            "left_out": left_out, "tokens": tokens, "elapsed_ms": round(elapsed_ms, 3)}


def run_end_record(*, ts: float, run_id: str, agent_id: str, session_id: str, project: str, success: bool,
                   tool_calls: int, failed_calls: int, delivered: list[str]) -> dict:
    """A ``run_end`` record."""
    return {"v": jsonl.SCHEMA_VERSION, "kind": "run_end", "timestamp": utc_iso(ts), "run_id": clean_id(run_id),
            "agent_id": checked_id(agent_id), "session_id": clean_id(session_id), "project": clean_id(project),
            "success": bool(success), "tool_calls": tool_calls, "failed_calls": failed_calls,
            "delivered": delivered}


def trace_problem(rec: dict) -> str | None:
    """Why a trace-ledger record cannot be used, or None."""
    kind = rec.get("kind", "trace")
    if kind == "decision":
        ok = isinstance(rec.get("action"), str) and isinstance(rec.get("evidence", []), list)
        return None if ok else "decision record lacks a string 'action' or a list 'evidence'"
    if kind == "foresight":
        ok = isinstance(rec.get("outcome"), str) and all(
            isinstance(rec.get(k), (int, float)) and not isinstance(rec.get(k), bool)
            for k in ("wait_ms", "wait_saved_ms", "tokens"))
        return None if ok else "foresight record lacks a string 'outcome' or numeric wait_ms, wait_saved_ms, tokens"
    if kind not in ("trace", "run_end"):
        return f"unknown trace record kind {str(kind)[:30]!r}"
    for key in ("run_id", "agent_id", "session_id"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            return f"{kind} field {key!r} is not a string"
    if kind == "trace":
        rows = rec.get("delivered", [])
        if not isinstance(rows, list) or not all(isinstance(r, dict) and isinstance(r.get("id"), str)
                                                 and isinstance(r.get("signals", {}), dict) for r in rows):
            return "trace field 'delivered' is not a list of rows with string ids"
        for row in rows:
            for v in row.get("signals", {}).values():
                if not isinstance(v, (int, float)) or isinstance(v, bool):
                    return "trace signal value is not a number"
        tokens = rec.get("tokens", 0)
        if not isinstance(tokens, int) or isinstance(tokens, bool):
            return "trace field 'tokens' is not a whole number"
    else:
        if not isinstance(rec.get("success"), bool):
            return "run_end field 'success' is not true/false"
        ids = rec.get("delivered", [])
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return "run_end field 'delivered' is not a list of ids"
    return None


def trace_files(memory_root: Path | str, agents: Iterable[str] | None = None) -> list[Path]:
    """Every trace ledger file (of ``agents`` when given), in path order."""
    base = Path(memory_root) / SUB
    if not base.is_dir():
        return []
    names = sorted(p.name for p in base.iterdir() if p.is_dir() and is_valid_id(p.name))
    if agents is not None:
        wanted = set(agents)
        names = [n for n in names if n in wanted]
    return [f for n in names for f in sorted((base / n).glob("*.jsonl"))]


def iter_traces(memory_root: Path | str, agents: Iterable[str] | None = None,
                problems: list | None = None) -> Iterator[dict]:
    """Valid trace records, file by file; unusable lines are skipped (and appended to ``problems``)."""
    for path in trace_files(memory_root, agents):
        for rec, lineno, problem in iter_records(path):
            problem = problem or (trace_problem(rec) if rec else None)
            if problem:
                if problems is not None:
                    problems.append(f"{path}:{lineno}: {problem}")
                log.debug("%s:%d: skipped: %s", path, lineno, problem)
                continue
            if rec:
                yield rec


def decision_record(*, ts: float, run_id: str, agent_id: str, session_id: str, tool: str, tool_call_id: str,
                    action: str, evidence: list[str], features: dict) -> dict:
    """A ``decision`` record: what pre_tool decided for a proposed call, on which evidence and features."""
    return {"v": jsonl.SCHEMA_VERSION, "kind": "decision", "timestamp": utc_iso(ts), "run_id": clean_id(run_id),
            "agent_id": checked_id(agent_id), "session_id": clean_id(session_id), "tool": clean_id(tool),
            "tool_call_id": tool_call_id, "action": action, "evidence": evidence, "features": features}


def foresight_record(*, ts: float, run_id: str, agent_id: str, session_id: str, query: str, outcome: str,
                     prediction: str, similarity: float, wait_ms: float, wait_saved_ms: float, tokens: int) -> dict:
    """A ``foresight`` record: how one query of the agent was served (query and prediction redacted)."""
    return {"v": jsonl.SCHEMA_VERSION, "kind": "foresight", "timestamp": utc_iso(ts), "run_id": clean_id(run_id),
            "agent_id": checked_id(agent_id), "session_id": clean_id(session_id),
            "query": redact(jsonl.clean_text(query))[0], "outcome": outcome,
            "prediction": redact(jsonl.clean_text(prediction))[0], "similarity": round(float(similarity), 4),
            "wait_ms": round(float(wait_ms), 3), "wait_saved_ms": round(float(wait_saved_ms), 3), "tokens": int(tokens)}
