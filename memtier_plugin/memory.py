"""The facade the hooks call: one workspace's memory, free of pluggy, as a list of calls into the rooms.

One turn as data (DESIGN.md): before_prompt_build recalls (``recall``, with the
standing ``layers`` and Foresight's cache from ``scheduling``) and records the
prompt; pre_tool asks the bound Hooks (``scheduling``) and the pre-commit check
(``intervention``); post_tool records each outcome; agent_end records the run's
own messages, attributes tool outcomes to what was delivered (``learning``) and
maintains the layers (``layers``). Host input is made safe by ``intake``; a
memory failure never breaks the agent's turn (:func:`best_effort`).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterator

from .config import Config, load_config
from .events import (AgentEndEvent, HookContext, PromptAddition, PromptEvent, ToolCallEvent, ToolDecision,
                     ToolResultEvent)
from .intake import (checked_context, held_call, in_context, prompt_query, query_text, tool_name, tool_params,
                     tool_text)
from .store import traces
from .rooms import Rooms
from .runs import MAX_CALLS, RunState, Runs
from .store.jsonl import clean_text
from .store.paths import clean_id

log = logging.getLogger(__name__)


@contextlib.contextmanager
def best_effort(what: str, *args) -> Iterator[None]:
    """The one boundary for optional work inside a hook: a failure is logged (``what % args``) and the
    turn goes on without it. The hook body in ``plugin.py`` stays the outer boundary."""
    try:
        yield
    except Exception:
        log.exception("memtier: " + what, *args)


class Memory(Rooms):
    """One workspace's memory service: its rooms (:class:`~memtier_plugin.rooms.Rooms`) and one method per hook."""

    def __init__(self, config: Config, *, clock=time.time):
        super().__init__(config, clock=clock)
        self.runs = Runs()
        self.collect_policy_features = False  # evaluation and training: trace the policy features without a policy
        self.collect_policy_pairs = False  # ... and the cross-encoder's (call, clause) features with them
        self.collect_policy_judge = False  # ... and the pair model's (models/judge.py) when it is set up
        self.last_decision = None  # the last pre_tool decision (intervention.rules.Decision), for evaluation
        self._state_sessions: OrderedDict[str, None] = OrderedDict()  # sessions offered the working state

    @classmethod
    def from_config(cls, config: Config, **kw) -> Memory:
        """A Memory for ``config`` that :func:`memory_for` gives every hook of its workspace in this process
        (``memtier serve``, ``mcp`` and ``demo`` load their config once, from their own flags)."""
        mem = cls(config, **kw)
        with _services_lock:
            old = _services.get(_key(config.workspace))
            _services[_key(config.workspace)] = mem
        if old is not None and old is not mem:
            with best_effort("closing the replaced service failed"):
                old.close()
        return mem

    def run(self, ctx: HookContext) -> RunState:
        """The state of ``ctx``'s run (keyed by session and run id)."""
        return self.runs.get_or_start(ctx.session_id, ctx.run_id, self.clock())

    def _now(self, ts: Any) -> float:
        """The event's time when the host gave a usable one, else the clock."""
        if isinstance(ts, (int, float)) and not isinstance(ts, bool) and 0 <= ts < 1e11:
            return float(ts)
        return self.clock()

    def _write(self, ctx: HookContext, content: str, role: str, prov: dict, ts: Any) -> dict:
        rec, path, offset = self.ledger.write_entry(
            agent_id=ctx.agent_id, session_id=ctx.session_id, project=ctx.project, content=content,
            role=role, timestamp=self._now(ts), provenance={"run_id": ctx.run_id, **prov})
        if self._retriever is not None:
            self._retriever.notify_append(rec, path, offset)
        return rec

    # ---- recall ------------------------------------------------------------
    def recall(self, query: str, ctx: HookContext, now: float | None = None, *, record_trace: bool = True,
               standing_layers: bool = True, rerank_budget_ms: float | None = None, background: bool = False,
               skip=None, own: str | None = None):
        """Ranked, packed memory for ``query`` as ``ctx.agent_id`` may see it, standing knowledge included
        (unless ``standing_layers`` is False: a Foresight prediction that targets episodes and facts only).
        ``rerank_budget_ms`` overrides ``rerank.budget_ms`` (Foresight's background preparations); ``skip``:
        what the agent holds already (:func:`.intake.in_context`); ``own``: the user's own words when ``query``
        holds turns before them (only they can set a requirement that overrides a standing item)."""
        from .layers.maintain import mark_revised

        when, standing = self._now(now), None
        if self.config.standing.enabled and standing_layers:
            with best_effort("standing knowledge failed for this prompt; episodes are still recalled"):
                standing = self.scorer.hits(query, self.standing_items(ctx.project, when), own=own)
        result = self.retriever.recall(query, agent_id=ctx.agent_id, project=ctx.project,
                                       session_id=ctx.session_id, agents=self.visible_agents(ctx.agent_id),
                                       now=when, run_id=ctx.run_id, standing=standing, record_trace=record_trace,
                                       rerank_budget_ms=rerank_budget_ms, background=background, skip=skip)
        if self.config.standing.enabled and result.hits:
            mark_revised(self.global_store, result.hits)
        return result

    def search(self, query: str, ctx: HookContext, *, all_projects: bool = False):
        """Recall for a person looking (``memtier search``, ``memtier ui``): no trace written;
        ``all_projects``: episodes of every project and the standing knowledge for all of them."""
        if not all_projects:
            return self.recall(query, ctx, record_trace=False)
        standing = None
        if self.config.standing.enabled:
            standing = self.scorer.hits(query, self.standing_items("", self.clock()))
        return self.retriever.recall(query, agent_id=ctx.agent_id, project=None, session_id=ctx.session_id,
                                     agents=self.visible_agents(ctx.agent_id), record_trace=False,
                                     standing=standing)

    def recall_for(self, query: str, ctx: HookContext, ts: Any = None, *, start_task: bool = True, skip=None,
                   own: str | None = None):
        """(result, Foresight access or None) for a query of the agent: served from Foresight's cache when a
        prediction matches, else retrieved; ``start_task``: a prompt (the memory tools pass False); ``skip``:
        what the agent holds already (:func:`.intake.in_context`; a served result loses those items)."""
        import dataclasses
        import functools

        from .scheduling.foresight import ForesightRecall

        fs = self.foresight
        if fs is None:
            return self._hook_recall(query, ctx, ts, skip=skip, own=own), None
        result, access = ForesightRecall(fs, functools.partial(self._hook_recall, skip=skip, own=own), self.directory,
                                         self.config.memory_root, self.forgotten.ids)(
            query, ctx, self._now(ts), start_task=start_task)
        if skip is not None and result is not None and any(skip(h) for h in result.hits):
            result = dataclasses.replace(result, hits=[h for h in result.hits if not skip(h)])
        return result, access

    def _hook_recall(self, query: str, ctx: HookContext, ts: Any = None, *, skip=None, own: str | None = None):
        """A hook's own retrieval: Foresight's preparations pause at their next checkpoint meanwhile."""
        with self.retriever.foreground():
            return self.recall(query, ctx, ts, skip=skip, own=own)

    def _prepare(self, query: str, layers: tuple, job) -> Any:
        """Foresight's background retrieval: the normal path, untraced (traced when it is served), re-ranking
        within ``rerank.background_budget_ms`` (off the critical path; -1: ``rerank.budget_ms``)."""
        (ctx, when), bg = job, self.config.rerank.background_budget_ms
        return self.recall(query, ctx, when, record_trace=False,
                           standing_layers=bool({"global", "procedural"} & set(layers)),
                           rerank_budget_ms=None if bg < 0 else bg, background=True)

    def maintain(self, ctx: HookContext, messages: list[tuple[str, str, str]], ts: float) -> list[dict]:
        """Task-boundary maintenance of the Global layer (layers/maintain.py)."""
        from .layers.maintain import maintain

        return maintain(self.global_store, messages, config=self.config, client=self._extractor(),
                        agent_id=ctx.agent_id, session_id=ctx.session_id, project=ctx.project, ts=ts,
                        derive=self.derive_hooks, gate=self.gate)

    # ---- the hooks ---------------------------------------------------------
    def on_prompt(self, event: PromptEvent, ctx: HookContext) -> PromptAddition | None:
        """Recall for the prompt, then record it: the prompt is written whether or not recall worked,
        and after it, so it is never delivered back as its own memory."""
        step = self.config.step
        ctx = checked_context(ctx)
        own = query_text(event.prompt)
        query = prompt_query(event.prompt, event.messages, min_terms=step.min_terms, turns=step.context_turns,
                             own=own)
        state = self.run(ctx)
        state.turn += 1
        result = None
        with best_effort("recall failed for agent %s; the prompt is still recorded", ctx.agent_id):
            result, _access = self.recall_for(query, ctx, event.timestamp,
                                              skip=in_context(event.messages, ctx.session_id),
                                              own=own if own != query else None)
        with best_effort("the step's retrieval could not be delivered for agent %s", ctx.agent_id):
            result = self._step_into(result, ctx, event.timestamp)
        rec = self._write(ctx, clean_text(str(event.prompt)), "user",
                          {"turn": state.turn, "source": "before_prompt_build"}, event.timestamp)
        if len(state.messages) < MAX_CALLS:
            state.messages.append((rec["id"], "user", rec["content"]))
        matches = self.hook_due("query", ctx, state, self._now(event.timestamp), query=query)
        due = self.working_state_hits(ctx)
        if self.config.foresight.enabled and self.config.foresight.delivery == "joint":
            return self._joint(result, matches, state, due)
        result = self._with_due(result, [*map(_hook_hit, matches), *due], query)
        if result is not None:
            state.remember([r for r in result.trace_rows() if r["tier"] != "hook"])
        block = result.block if result is not None else ""
        return PromptAddition(prepend_context=block) if block else None

    def _with_due(self, result, due: list, query: str):
        """The recall ``result`` with the items due now (hooks' entries, working state) in the same block and
        budget (``RecallResult.with_due``); the due items alone when recall failed."""
        from .recall.retriever import RecallResult

        if not due:
            return result
        if result is None:
            result = RecallResult(query, [], [], 0, "due", [], 0.0)
        cfg = self.config
        return result.with_due(due, cfg.retrieval.top_k, cfg.packing.token_budget, cfg.packing.max_chars)

    def working_state_hits(self, ctx: HookContext) -> list:
        """The project's open working state at the first prompt of a session (a task) after the one that wrote
        it, once a session (layers/workspace_layer.state_hits)."""
        from .layers.workspace_layer import state_hits

        key = _task_key(ctx)
        if not self.config.standing.enabled:
            return []
        with self._lock:
            if key in self._state_sessions:
                return []
            self._state_sessions[key] = None
            while len(self._state_sessions) > 4096:
                self._state_sessions.popitem(last=False)
        with best_effort("reading the working state of project %s failed", ctx.project):
            return [h for h in state_hits(self.workspace_store("state", ctx.project), ctx.session_id)
                    if h.id not in self.forgotten]
        return []

    def _joint(self, result, matches: list, state: RunState, due: list = ()) -> PromptAddition | None:
        """Joint delivery (MemSidecar Table B2): Hooks' entries, then the recalled ones, in one block."""
        from .recall.packing import joint_block

        block, rows = joint_block([*due, *(result.hits if result else [])], result.trace_rows() if result else [],
                                  matches, cap=self.config.hooks.max_entries, max_chars=self.config.hooks.max_chars)
        state.remember(rows)
        return PromptAddition(prepend_context=block) if block else None

    def on_pre_tool(self, event: ToolCallEvent, ctx: HookContext) -> ToolDecision | None:
        """Pre-commit intervention (intervention/pre_commit.py): silent (None), a supplement, or a held call."""
        from .intervention.pre_commit import tool_decision

        from .scheduling.hooks import format_matches

        ctx = checked_context(ctx)
        tool, params, ts = tool_name(event.tool_name), tool_params(event.params), self._now(event.timestamp)
        state = self.run(ctx)
        matches = self.hook_due("pre_tool", ctx, state, ts, tool_name=tool, params=params)
        bound, held = format_matches(matches), any(m.hold for m in matches)
        if not self.pre_commit.enabled:
            return self._step_supplement(tool_decision(None, bound, held), ctx, ts)
        decision = self.last_decision = self.pre_commit.decide(
            tool, params, task=state.task_text(), state=state, project=ctx.project,
            agent_id=ctx.agent_id, ts=ts, collect_features=self.collect_policy_features,
            collect_pairs=self.collect_policy_pairs, collect_judge=self.collect_policy_judge)
        traces.append(self.config.memory_root, ctx.agent_id, traces.decision_record(
            ts=ts, run_id=ctx.run_id, agent_id=ctx.agent_id, session_id=ctx.session_id, tool=tool,
            tool_call_id=clean_id(event.tool_call_id), action=decision.action,
            evidence=[e.id for e in decision.evidence], features=decision.features), ts)
        return self._step_supplement(tool_decision(decision, bound, held), ctx, ts)

    def hooks_active(self) -> bool:
        return self.config.hooks.enabled and self.config.scheduling.mode in ("hooks", "combined")

    def hook_match_list(self, event_type: str, ctx: HookContext, ts: float, **call) -> list:
        """The :class:`scheduling.hooks.Match` es bound Hooks deliver at this event (docs/hooks_memory.md);
        ``entry_id`` hooks read the entry as ``ctx.agent_id`` may (:meth:`entry_record`)."""
        from .scheduling.hooks import event_state

        if not self.hooks_active():
            return []
        state = event_state(ts, ctx.project, ctx.agent_id, call.pop("state", {}))
        with best_effort("hooks failed at %s", event_type):  # costs the hooks of this event, never the turn
            return self.hook_scheduler.match(event_type, state, task_key=_task_key(ctx),
                                             resolve=lambda eid: self._entry_text(eid, ctx), **call)
        return []

    def hook_due(self, event_type: str, ctx: HookContext, run: RunState, ts: float, **call) -> list:
        """At a decision (a prompt, a tool call): what post_tool hooks kept for it, then this event's matches;
        the state predicates read holds the run's ``phase``, ``turn`` and ``tools`` (the names it called)."""
        if not self.hooks_active():
            return []
        kept = []
        with best_effort("hooks' kept deliveries failed at %s", event_type):
            kept = self.hook_scheduler.take_deferred(_task_key(ctx))
        state = {"phase": run.phase, "turn": run.turn, "tools": [c["name"] for c in run.tool_calls[-64:]]}
        return kept + self.hook_match_list(event_type, ctx, ts, state=state, **call)

    def _entry_text(self, entry_id: str, ctx: HookContext) -> str | None:
        rec = self.entry_record(entry_id, ctx.agent_id, ctx.project)
        return rec["content"] if rec is not None and rec.get("current", True) else None

    def _post_tool_hooks(self, event: ToolResultEvent, ctx: HookContext, run: RunState) -> None:
        """post_tool hooks see the result (``error`` or ``result``, ``success``, ``phase``); what they deliver
        is kept for the agent's next decision (:meth:`hook_due`)."""
        if not self.hooks_active():
            return
        outcome = {"success": event.error is None, "phase": run.phase, "turn": run.turn,
                   **({"error": str(event.error)[:4096]} if event.error is not None else
                      {"result": str(event.result)[:4096]})}
        matches = self.hook_match_list("post_tool", ctx, self._now(event.timestamp), state=outcome,
                                       tool_name=tool_name(event.tool_name), params=tool_params(event.params))
        with best_effort("keeping post_tool hooks' deliveries failed"):
            self.hook_scheduler.defer(_task_key(ctx), matches)

    def on_post_tool(self, event: ToolResultEvent, ctx: HookContext) -> None:
        ctx = checked_context(ctx)
        state, call_id = self.run(ctx), clean_id(event.tool_call_id)
        if len(state.tool_calls) < MAX_CALLS:  # held until agent_end: bounded and redacted, never raw payloads
            state.tool_calls.append(held_call(call_id, event.tool_name, event.params, event.result, event.error))
        self._write(ctx, tool_text(event.tool_name, event.params, event.result, event.error), "tool",
                    {"turn": state.turn, "tool_call_id": call_id, "source": "post_tool",
                     "success": event.error is None}, event.timestamp)
        self._post_tool_hooks(event, ctx, state)
        self._step_after_tool(event, ctx, state, call_id)  # memory for the step (issue 27): the only step line here

    # ---- memory for the step (scheduling/step.py) ----------------------------
    def _step_after_tool(self, event: ToolResultEvent, ctx: HookContext, state: RunState, call_id: str) -> None:
        """A tool result worth retrieving on (an error, a new name) is retrieved in the background; post_tool
        never waits for it."""
        from .scheduling.step import tool_query

        if not self.config.step.tool_results:
            return
        with best_effort("the step's retrieval could not start for tool %s", event.tool_name):
            known = " ".join([state.task_text(), *(f"{c['params']} {c['result']}" for c in state.tool_calls[:-1])])
            query, names = tool_query(tool_name(event.tool_name), event.params, event.result, event.error,
                                      known[-8000:])
            if query:
                self.step_recall.after_tool(self._step_key(ctx), query_text(query), call_id,
                                            (ctx, self._now(event.timestamp)), names)

    def _step_hits(self, ctx: HookContext, wait_s: float) -> tuple[list, str]:
        """(what the task's finished step retrievals bring that it has not had, taken once; their queries)."""
        if self._step is None:
            return [], ""
        return self._step.collect(self._step_key(ctx), wait_s, ctx.session_id,
                                  lambda: {row["id"] for row in self.run(ctx).delivered})

    @staticmethod
    def _step_key(ctx: HookContext) -> str:
        return ctx.session_id or ctx.run_id or "-"

    def _step_delivered(self, ctx: HookContext, result, step_hits: list, query: str, ts: float) -> None:
        """The step items the agent was just given: marked (never again in this task), remembered, traced."""
        from .scheduling.step import STEP_MODE

        ids = {h.id for h in step_hits}
        rows = [r for r in result.trace_rows() if r["id"] in ids]
        if not rows:
            return
        self._step.delivered(self._step_key(ctx), [r["id"] for r in rows])
        self.run(ctx).remember(rows)
        traces.append(self.config.memory_root, ctx.agent_id, traces.recall_record(
            ts=ts, run_id=ctx.run_id, agent_id=ctx.agent_id, session_id=ctx.session_id, query=query,
            mode=STEP_MODE, stage1_sessions=[], delivered=rows, left_out=[], tokens=result.tokens,
            elapsed_ms=0.0), ts)

    def _step_into(self, result, ctx: HookContext, ts: Any):
        """The prompt's recall with the step's finished retrievals merged in (same block and budget), waiting at
        most ``step.wait_ms`` for those still running."""
        from .scheduling.step import merge

        hits, query = self._step_hits(ctx, self.config.step.wait_ms / 1000.0)
        if not hits:
            return result
        merged = merge(result, hits, k=self.config.retrieval.top_k, budget=self.config.packing.token_budget,
                       max_chars=self.config.packing.max_chars)
        self._step_delivered(ctx, merged, hits, query, self._now(ts))
        return merged

    def _step_supplement(self, decision: ToolDecision | None, ctx: HookContext, ts: float) -> ToolDecision | None:
        """pre_tool's answer with the step's finished retrievals as a supplement (never waits for one)."""
        from .scheduling.step import supplement

        if decision is not None and decision.block:
            return decision
        with best_effort("the step's retrieval could not be delivered at pre_tool"):
            hits, query = self._step_hits(ctx, 0.0)
            text, result = supplement(hits, k=self.config.retrieval.top_k, budget=self.config.packing.token_budget,
                                      max_chars=self.config.packing.max_chars) if hits else ("", None)
            if text:
                self._step_delivered(ctx, result, hits, query, ts)
                parts = [decision.supplement] if decision is not None and decision.supplement else []
                return ToolDecision(supplement="\n\n".join([*parts, text]),
                                    params=decision.params if decision is not None else None)
        return decision

    def on_agent_end(self, event: AgentEndEvent, ctx: HookContext) -> None:
        from .layers.maintain import task_boundary
        from .learning.attribution import attribute_run, run_end

        ctx = checked_context(ctx)
        state, ts, success = self.run(ctx), self._now(event.timestamp), bool(event.success)
        for msg in event.messages if isinstance(event.messages, list) else []:
            if isinstance(msg, dict) and msg.get("role") == "assistant" and msg.get("content"):
                rec = self._write(ctx, str(msg["content"]), "assistant", {"turn": state.turn, "source": "agent_end"},
                                  event.timestamp)
                if len(state.messages) < MAX_CALLS:
                    state.messages.append((rec["id"], "assistant", rec["content"]))
        try:
            client = self.model_client if self.config.attribution.strategy == "logprob" else None
            if attribute_run(self.ledger, self.config, state, ctx.agent_id, client) and self._retriever is not None:
                self._retriever.refresh()  # the index reads the updates from the ledger (exactly once)
            with best_effort("task-boundary maintenance failed for run %s", state.run_id):
                task_boundary(self.global_store, self.workspace_store("procedural", ctx.project),
                              self.workspace_store("state", ctx.project), state.messages, state.tool_calls,
                              config=self.config, client=self._extractor(), success=success, run_id=state.run_id,
                              agent_id=ctx.agent_id, session_id=ctx.session_id, project=ctx.project, ts=ts,
                              earlier=lambda: self.session_messages(ctx), derive=self.derive_hooks, gate=self.gate)
            self._after_writes(ctx, ts)
        finally:
            traces.append(self.config.memory_root, ctx.agent_id, run_end(ctx, state, success=success, ts=ts), ts)
            self.runs.end(state)

    def _after_writes(self, ctx: HookContext, ts: float) -> None:
        """The run's writes are in: embed them now (never at the next query), and refill Foresight's cache
        when they changed the directory (Algorithm A2: MaintainObserved, then WakeBackground(Refill))."""
        r, fs = self._retriever, self._foresight
        with best_effort("embedding or Foresight refill after run %s failed", ctx.run_id):
            if r is not None and r.embedder is not None and (fs is None or not fs.running) \
                    and not r.embedding_in_background:
                r.embed_pending()  # with Foresight running, its thread embeds them when idle
            if fs is not None:
                fs.refill(ctx.session_id or ctx.run_id or "-", self.directory(ctx.project, ts), (ctx, ts))

    def on_compaction(self, event, ctx: HookContext) -> None:
        """The host compacts the conversation: make sure the session's standing knowledge is kept."""
        ctx = checked_context(ctx)
        self.maintain(ctx, self.session_messages(ctx), self.clock())

    def on_session_end(self, ctx: HookContext) -> None:
        """Keep the session's standing knowledge (maintenance over its entries), then forget exactly
        this session's runs (never another session's, whatever its name)."""
        ctx = checked_context(ctx)
        try:
            self.maintain(ctx, self.session_messages(ctx), self.clock())
        finally:
            if self._step is not None:  # the task is over: its step retrievals still waiting go
                self._step.end(self._step_key(ctx))
            fs = self._foresight
            if fs is not None:  # the task is over: its cache goes, and the thread when no task is left
                fs.end(ctx.session_id or ctx.run_id or "-")
                if not fs.active():
                    fs.close()
            self.runs.end_session(ctx.session_id)


def _task_key(ctx: HookContext) -> str:
    """The task Hooks fire once in: the session (else the run)."""
    return ctx.session_id or ctx.run_id or "-"


def _hook_hit(m):
    """A hook's match as an item of the block, on its fixed probability (recall/calibration.py ``FIXED``)."""
    from .recall.calibration import FIXED
    from .recall.packing import Hit

    hook_id = m.hooks[0].rsplit(":", 1)[-1]
    return Hit(m.entry_id or hook_id, m.entry, "", "", "", hook_id, "hook", FIXED["hook"], probability=FIXED["hook"])


_services: dict[str, Memory] = {}
_services_lock = threading.Lock()


def _key(workspace) -> str:
    return str(Path(workspace).expanduser()) if workspace else ""


def memory_for(ctx: HookContext) -> Memory:
    """The Memory of ``ctx.workspace_dir`` (config: flag-free load, env > file > default), or the one a command
    registered for that workspace with :meth:`Memory.from_config`."""
    key = _key(ctx.workspace_dir)
    with _services_lock:
        mem = _services.get(key)
        if mem is None:
            cfg = load_config(flags={"paths.workspace": key or None})
            mem = _services[key] = Memory(cfg)
            mem.start_shared()  # the in-process plugin is long-lived: its shared tiers sync beside it
        return mem


def reset_services() -> None:
    """Forget cached services (tests, config reloads), stopping their background work first (and the shared
    tiers' link, which pushes what is left on its way out)."""
    with _services_lock:
        for mem in _services.values():
            with best_effort("closing a service failed"):
                mem.close()
        _services.clear()
    if "memtier_plugin.shared.sync" in sys.modules:
        with best_effort("stopping the shared tiers' link failed"):
            sys.modules["memtier_plugin.shared.sync"].stop_all()


# A process that exits while a background thread is inside a model (the warm-up, Foresight, embedding) can
# abort in the interpreter's shutdown: stop and join them first.
atexit.register(reset_services)
