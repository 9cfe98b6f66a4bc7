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
from .ledger import Ledger
from .redact import redact_obj

log = logging.getLogger(__name__)
MAX_TOOL_TEXT = 2000


@dataclass
class RunState:
    """What memory knows about one run while it is going on."""

    run_id: str
    turn: int = 0
    delivered: list[dict] = field(default_factory=list)  # trace rows: id, content, signals
    tool_calls: list[dict] = field(default_factory=list)  # name, params, result, error


def tool_text(name: str, params: Any, result: Any, error: str | None) -> str:
    """One readable line for a tool outcome entry (params and result redacted first)."""
    params, _ = redact_obj(params)
    result, _ = redact_obj(result)
    args = orjson.dumps(params, option=orjson.OPT_SORT_KEYS, default=str).decode() if params else ""
    if error:
        outcome = f"FAILED: {error}"
    elif isinstance(result, str):
        outcome = result
    else:
        outcome = orjson.dumps(result, default=str).decode() if result is not None else "ok"
    text = f"{name}({args}) -> {outcome}"
    return text if len(text) <= MAX_TOOL_TEXT else text[: MAX_TOOL_TEXT - 1] + "…"


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
        key = ctx.run_id or f"{ctx.session_id}-run"
        with self._lock:
            state = self.runs.get(key)
            if state is None:
                state = self.runs[key] = RunState(key)
            return state

    def _now(self, ts: float | None) -> float:
        return self.clock() if ts is None else ts

    def _write(self, ctx: HookContext, content: str, role: str, prov: dict, ts: float | None) -> dict:
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
        state = self.run(ctx)
        state.turn += 1
        result = self.recall(event.prompt, ctx, event.timestamp)
        # every entry delivered at any model call of the run may inform its tool calls
        seen = {row["id"]: i for i, row in enumerate(state.delivered)}
        for row in result.trace_rows():
            if row["id"] in seen:
                state.delivered[seen[row["id"]]] = row
            else:
                state.delivered.append(row)
        self._write(ctx, event.prompt, "user", {"turn": state.turn, "source": "before_prompt_build"},
                    event.timestamp)
        if not result.block:
            return None
        return PromptAddition(prepend_context=result.block)

    def on_pre_tool(self, event: ToolCallEvent, ctx: HookContext) -> ToolDecision | None:
        return None

    def on_post_tool(self, event: ToolResultEvent, ctx: HookContext) -> None:
        state = self.run(ctx)
        state.tool_calls.append({"tool_call_id": event.tool_call_id, "name": event.tool_name,
                                 "params": event.params, "result": event.result, "error": event.error})
        text = tool_text(event.tool_name, event.params, event.result, event.error)
        self._write(ctx, text, "tool", {"turn": state.turn, "tool_call_id": event.tool_call_id,
                                        "source": "post_tool", "success": event.error is None},
                    event.timestamp)

    def on_agent_end(self, event: AgentEndEvent, ctx: HookContext) -> None:
        state = self.run(ctx)
        for msg in event.messages:
            if msg.get("role") == "assistant" and msg.get("content"):
                self._write(ctx, str(msg["content"]), "assistant",
                            {"turn": state.turn, "source": "agent_end"}, event.timestamp)
        from .attribution import attribute_run, record_run_end

        try:
            attribute_run(self, ctx, state, success=event.success)
        finally:
            record_run_end(self, ctx, state, success=event.success, timestamp=event.timestamp)
        with self._lock:
            self.runs.pop(state.run_id, None)

    def on_compaction(self, event, ctx: HookContext) -> None:
        """Nothing is held only in memory between hooks except run traces: keep them."""
        log.debug("compaction in %s: ledgers are already durable", ctx.session_id)

    def on_session_end(self, ctx: HookContext) -> None:
        with self._lock:
            for key in [k for k in self.runs if k.startswith(ctx.session_id)]:
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
