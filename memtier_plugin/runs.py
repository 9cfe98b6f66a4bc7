"""Runs in progress: what memory keeps of one run between its hooks, bounded however the host behaves.

A run is keyed by (session id, run id). Its state lives from the first hook that
names it until agent_end (or session_end) ends it; runs that never end are
forgotten after ``RUN_TTL_S`` idle and beyond ``MAX_RUNS``, so a host that never
sends agent_end cannot make memory grow.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

#: Runs that never reach agent_end are forgotten after this long idle, and beyond this many.
RUN_TTL_S = 3600.0
MAX_RUNS = 256
#: Per run: trace rows kept for attribution, tool calls and messages kept.
MAX_DELIVERED = 256
MAX_CALLS = 256


@dataclass
class RunState:
    """What memory knows about one run while it is going on (bounded: see MAX_DELIVERED, MAX_CALLS)."""

    run_id: str
    session_id: str = ""
    turn: int = 0
    delivered: list[dict] = field(default_factory=list)  # trace rows: id, agent_id, content, signals
    tool_calls: list[dict] = field(default_factory=list)  # name, params, result, error (bounded, redacted)
    messages: list[tuple] = field(default_factory=list)  # (entry id, role, text) written in this run
    standing_task: tuple | None = None  # (task text, [(item, applicability)]): the learned policy's evidence
    last_seen: float = 0.0

    @property
    def phase(self) -> str:
        """The task phase Hooks' ``phase:`` predicates read: ``plan`` before any tool call of the run has a
        result, ``act`` after one that succeeded, ``recover`` after one that failed."""
        if not self.tool_calls:
            return "plan"
        return "recover" if self.tool_calls[-1].get("error") else "act"

    def task_text(self) -> str:
        """The run's user messages so far, the last 4000 characters (what pre_tool reads as the task)."""
        return " ".join(m[2] for m in self.messages if m[1] == "user")[-4000:]

    def remember(self, rows: list[dict]) -> None:
        """Every entry delivered at any model call of the run may inform its tool calls (bounded)."""
        seen = {row["id"]: i for i, row in enumerate(self.delivered)}
        for row in rows:
            if row["id"] in seen:
                self.delivered[seen[row["id"]]] = row
            elif len(self.delivered) < MAX_DELIVERED:
                self.delivered.append(row)


class Runs(dict):
    """The runs in progress, (session id, run id) → :class:`RunState`; thread-safe through its methods."""

    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()

    def get_or_start(self, session_id: str, run_id: str, now: float) -> RunState:
        """The run's state, started when new (idle or surplus runs are forgotten first)."""
        key = (session_id, run_id or f"{session_id}-run")
        with self.lock:
            state = self.get(key)
            if state is None:
                for k in [k for k, st in self.items() if now - st.last_seen > RUN_TTL_S]:
                    del self[k]
                while len(self) >= MAX_RUNS:
                    del self[min(self, key=lambda k: self[k].last_seen)]
                state = self[key] = RunState(key[1], session_id)
            state.last_seen = now
            return state

    def end(self, state: RunState) -> None:
        with self.lock:
            self.pop((state.session_id, state.run_id), None)

    def end_session(self, session_id: str) -> None:
        """Forget exactly this session's runs (never another session's, whatever its name)."""
        with self.lock:
            for key in [k for k, st in self.items() if st.session_id == session_id]:
                self.pop(key, None)
