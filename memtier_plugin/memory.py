"""The facade the hooks call: one workspace's memory, free of pluggy.

One turn as data (DESIGN.md): before_prompt_build recalls and records the
prompt; post_tool records each outcome; agent_end records the run's own
messages and attributes tool outcomes to what was delivered.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .config import Config, load_config
from .events import (AgentEndEvent, HookContext, PromptAddition, PromptEvent, ToolCallEvent,
                     ToolDecision, ToolResultEvent)
from .jsonl import clean_obj, clean_text
from .ledger import Ledger, clean_id, clip_text
from .paths import checked_id
from .redact import redact, redact_obj

log = logging.getLogger(__name__)
MAX_TOOL_TEXT = 2000
#: The part of a prompt a recall reads: its head and its tail (a 10 MB paste cannot make a hook slow).
MAX_QUERY_CHARS = 4000
#: Runs that never reach agent_end are forgotten after this long idle, and beyond this many.
RUN_TTL_S = 3600.0
MAX_RUNS = 256
#: Per run: trace rows kept for attribution, tool calls kept.
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
    last_seen: float = 0.0


def _json_line(value: Any, limit: int) -> str:
    """Compact JSON of ``value`` (sorted keys), cut to ``limit`` characters."""
    text = value if isinstance(value, str) else orjson.dumps(
        clean_obj(value), option=orjson.OPT_SORT_KEYS, default=str).decode()
    return clip_text(clean_text(text), limit)


def bounded_value(value: Any, limit: int = MAX_TOOL_TEXT) -> Any:
    """A tool's params or result as memory keeps it: redacted; text, or JSON longer than
    ``limit``, cut to ``limit`` first (so redaction stays linear in ``limit``)."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return redact(clip_text(clean_text(value), limit))[0]
    text = _json_line(value, 1 << 62)
    if len(text) <= limit:
        return redact_obj(clean_obj(value))[0]
    return redact(clip_text(text, limit))[0]


def tool_text(name: str, params: Any, result: Any, error: str | None) -> str:
    """One readable line for a tool outcome entry (params and result bounded and redacted first)."""
    params = bounded_value(params)
    args = _json_line(params, MAX_TOOL_TEXT) if params else ""
    if error:
        outcome = f"FAILED: {redact(clip_text(clean_text(str(error)), MAX_TOOL_TEXT))[0]}"
    elif result is None:
        outcome = "ok"
    else:
        outcome = _json_line(bounded_value(result), MAX_TOOL_TEXT)
    text = f"{clip_text(clean_text(str(name)), 200)}({args}) -> {outcome}"
    return text if len(text) <= MAX_TOOL_TEXT else text[: MAX_TOOL_TEXT - 1] + "…"


def query_text(prompt: Any) -> str:
    """What recall searches with: the prompt's head and tail within MAX_QUERY_CHARS."""
    text = clean_text(prompt if isinstance(prompt, str) else str(prompt))
    if len(text) <= MAX_QUERY_CHARS:
        return text
    half = MAX_QUERY_CHARS // 2
    return text[:half] + " … " + text[-half:]


def checked_context(ctx: HookContext) -> HookContext:
    """The hook context with its agent id checked (InvalidIdError) and every other id cleaned.

    Everything a host sends is untrusted: ``agent_id`` becomes a folder, so it must
    be a plain name; ``session_id``, ``run_id``, ``project`` are bounded, valid
    text, redacted; a missing ``project`` is the empty project, never "all projects".
    """
    return HookContext(agent_id=checked_id(ctx.agent_id), session_key=clean_id(ctx.session_key),
                       session_id=clean_id(ctx.session_id), run_id=clean_id(ctx.run_id),
                       project=clean_id(ctx.project), workspace_dir=ctx.workspace_dir)


class Memory:
    """One workspace's memory service."""

    def __init__(self, config: Config, *, clock=time.time):
        self.config = config
        self.clock = clock
        self.ledger = Ledger(config.memory_root, clock=clock)
        self.runs: dict[str, RunState] = {}
        self._lock = threading.Lock()
        self._retriever = None
        self._model_client = None

    # ---- scoping ---------------------------------------------------------
    def visible_agents(self, agent_id: str) -> list[str] | None:
        """Agents whose episodic ledgers ``agent_id`` may read (None: all, for orchestrators)."""
        return None if agent_id in self.config.agents.global_read else [agent_id]

    def run(self, ctx: HookContext) -> RunState:
        """The state of ``ctx``'s run (keyed by session and run id); idle or surplus runs are forgotten."""
        run_id = ctx.run_id or f"{ctx.session_id}-run"
        key = (ctx.session_id, run_id)
        now = self.clock()
        with self._lock:
            state = self.runs.get(key)
            if state is None:
                self._expire_runs(now)
                state = self.runs[key] = RunState(run_id, ctx.session_id)
            state.last_seen = now
            return state

    def _expire_runs(self, now: float) -> None:
        """Drop runs idle for RUN_TTL_S, then the least recently seen beyond MAX_RUNS - 1 (lock held)."""
        for key in [k for k, st in self.runs.items() if now - st.last_seen > RUN_TTL_S]:
            del self.runs[key]
        while len(self.runs) >= MAX_RUNS:
            del self.runs[min(self.runs, key=lambda k: self.runs[k].last_seen)]

    def _now(self, ts: Any) -> float:
        """The event's time when the host gave a usable one, else the clock."""
        if isinstance(ts, (int, float)) and not isinstance(ts, bool) and 0 <= ts < 1e11:
            return float(ts)
        return self.clock()

    def _write(self, ctx: HookContext, content: str, role: str, prov: dict, ts: Any) -> dict:
        rec, path, offset = self.ledger.write_entry(
            agent_id=ctx.agent_id, session_id=ctx.session_id, project=ctx.project, content=content,
            role=role, timestamp=self._now(ts), provenance={"run_id": ctx.run_id, **prov})
        retriever = self._retriever
        if retriever is not None:
            retriever.notify_append(rec, path, offset)
        return rec

    # ---- retrieval -------------------------------------------------------
    @property
    def retriever(self):
        if self._retriever is None:
            from .retrieval import Retriever

            self._retriever = Retriever(self.config, self.ledger)
        return self._retriever

    @property
    def model_client(self):
        """The chat-model client (``llm.ModelClient``) when ``model.enabled``, else None; created on first use."""
        if not self.config.model.enabled:
            return None
        with self._lock:
            if self._model_client is None:
                from .llm import ModelClient, ModelConfig

                self._model_client = ModelClient(ModelConfig.from_section(self.config.model))
            return self._model_client

    def recall(self, query: str, ctx: HookContext, now: float | None = None):
        """Ranked, packed memory for ``query`` as ``ctx.agent_id`` may see it."""
        return self.retriever.recall(query, agent_id=ctx.agent_id, project=ctx.project,
                                     session_id=ctx.session_id, agents=self.visible_agents(ctx.agent_id),
                                     now=self._now(now), run_id=ctx.run_id)

    # ---- hooks -----------------------------------------------------------
    def on_prompt(self, event: PromptEvent, ctx: HookContext) -> PromptAddition | None:
        """Recall for the prompt, then record it: the prompt is written whether or not recall worked,
        and after it, so it is never delivered back as its own memory."""
        ctx = checked_context(ctx)
        state = self.run(ctx)
        state.turn += 1
        result = None
        try:
            result = self.recall(query_text(event.prompt), ctx, event.timestamp)
        except Exception:  # recall is best effort; the prompt below is not
            log.exception("memtier recall failed for agent %s; the prompt is still recorded", ctx.agent_id)
        self._write(ctx, clean_text(str(event.prompt)), "user",
                    {"turn": state.turn, "source": "before_prompt_build"}, event.timestamp)
        if result is None:
            return None
        # every entry delivered at any model call of the run may inform its tool calls
        seen = {row["id"]: i for i, row in enumerate(state.delivered)}
        for row in result.trace_rows():
            if row["id"] in seen:
                state.delivered[seen[row["id"]]] = row
            elif len(state.delivered) < MAX_DELIVERED:
                state.delivered.append(row)
        if not result.block:
            return None
        return PromptAddition(prepend_context=result.block)

    def on_pre_tool(self, event: ToolCallEvent, ctx: HookContext) -> ToolDecision | None:
        checked_context(ctx)
        return None

    def on_post_tool(self, event: ToolResultEvent, ctx: HookContext) -> None:
        ctx = checked_context(ctx)
        state = self.run(ctx)
        text = tool_text(event.tool_name, event.params, event.result, event.error)
        call_id = clean_id(event.tool_call_id)
        if len(state.tool_calls) < MAX_CALLS:  # held until agent_end: bounded and redacted, never raw payloads
            state.tool_calls.append({"tool_call_id": call_id, "name": clip_text(clean_text(str(event.tool_name)), 200),
                                     "params": bounded_value(event.params),
                                     "result": None if event.error else bounded_value(event.result),
                                     "error": None if event.error is None else bounded_value(str(event.error))})
        self._write(ctx, text, "tool", {"turn": state.turn, "tool_call_id": call_id,
                                        "source": "post_tool", "success": event.error is None},
                    event.timestamp)

    def on_agent_end(self, event: AgentEndEvent, ctx: HookContext) -> None:
        ctx = checked_context(ctx)
        state = self.run(ctx)
        for msg in event.messages if isinstance(event.messages, list) else []:
            if isinstance(msg, dict) and msg.get("role") == "assistant" and msg.get("content"):
                self._write(ctx, str(msg["content"]), "assistant",
                            {"turn": state.turn, "source": "agent_end"}, event.timestamp)
        from .attribution import attribute_run, record_run_end

        try:
            attribute_run(self, ctx, state, success=bool(event.success))
        finally:
            record_run_end(self, ctx, state, success=bool(event.success), timestamp=self._now(event.timestamp))
            with self._lock:
                self.runs.pop((state.session_id, state.run_id), None)

    def on_compaction(self, event, ctx: HookContext) -> None:
        """Nothing is held only in memory between hooks except run traces: keep them."""
        ctx = checked_context(ctx)
        log.debug("compaction in %s: ledgers are already durable", ctx.session_id)

    def on_session_end(self, ctx: HookContext) -> None:
        """Forget the runs of exactly this session (never another session's, whatever its name)."""
        ctx = checked_context(ctx)
        with self._lock:
            for key in [k for k, st in self.runs.items() if st.session_id == ctx.session_id]:
                self.runs.pop(key, None)


_services: dict[str, Memory] = {}
_services_lock = threading.Lock()


def memory_for(ctx: HookContext) -> Memory:
    """The Memory of ``ctx.workspace_dir`` (config: flag-free load, env > file > default)."""
    key = str(Path(ctx.workspace_dir).expanduser()) if ctx.workspace_dir else ""
    with _services_lock:
        mem = _services.get(key)
        if mem is None:
            cfg = load_config(flags={"paths.workspace": key or None})
            mem = _services[key] = Memory(cfg)
        return mem


def reset_services() -> None:
    """Forget cached services (tests, config reloads)."""
    with _services_lock:
        _services.clear()
