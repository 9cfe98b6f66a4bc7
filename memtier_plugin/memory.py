"""The facade the hooks call: one workspace's memory, free of pluggy.

One turn as data (DESIGN.md): before_prompt_build recalls and records the
prompt; post_tool records each outcome; agent_end records the run's own
messages and attributes tool outcomes to what was delivered.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from .config import Config, load_config
from .errors import ConfigError
from .events import (AgentEndEvent, HookContext, PromptAddition, PromptEvent, ToolCallEvent,
                     ToolDecision, ToolResultEvent)
from .store.jsonl import clean_obj, clean_text
from .store.episodic import Ledger, clean_id, clip_text
from .store.paths import checked_id
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
    messages: list[tuple] = field(default_factory=list)  # (entry id, role, text) written in this run
    standing_task: tuple | None = None  # (task text, [(item, applicability)]): the learned policy's evidence
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



def _bounded(fn, timeout_s: float):
    """``fn()``'s value, or None when it has not returned within ``timeout_s`` (it then runs on, in a daemon
    thread, and nothing waits for it); its exception is raised here."""
    box: list = []

    def run():
        try:
            box.append((True, fn()))
        except BaseException as exc:  # handed to the caller
            box.append((False, exc))

    worker = threading.Thread(target=run, name="memtier-policy", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if not box:
        return None
    ok, value = box[0]
    if not ok:
        raise value
    return value


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
        self._global = None
        self._workspace: dict[tuple[str, str], Any] = {}
        self._scorer = None
        self._lexical = None
        self._hooks = None
        self._foresight = None
        self._warm_thread: threading.Thread | None = None
        self._items: dict[str, Any] = {}  # standing item per node/skill id (records never change: cached)
        self._policy_error = ""  # the last scheduling.policy problem logged (logged once, not per call)
        self.collect_policy_features = False  # evaluation and training: trace the policy features without a policy
        self.collect_policy_pairs = False  # ... and the cross-encoder's (call, clause) features with them
        self.last_decision = None  # the last pre_tool decision (intervention.Decision), for evaluation

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
            from .recall.retriever import COLD_EMBED, Retriever

            self._retriever = Retriever(self.config, self.ledger)
            self._retriever.cold_embed_limit = COLD_EMBED  # a hook never embeds a big cold store in place
        return self._retriever

    @property
    def model_client(self):
        """The chat-model client (``llm.ModelClient``) when ``model.enabled``, else None; created on first use."""
        if not self.config.model.enabled:
            return None
        with self._lock:
            if self._model_client is None:
                from .models.chat import ModelClient, ModelConfig

                self._model_client = ModelClient(ModelConfig.from_section(self.config.model))
            return self._model_client

    def recall(self, query: str, ctx: HookContext, now: float | None = None, *, record_trace: bool = True,
               standing_layers: bool = True, rerank_budget_ms: float | None = None, background: bool = False):
        """Ranked, packed memory for ``query`` as ``ctx.agent_id`` may see it, standing knowledge included
        (unless ``standing_layers`` is False: a Foresight prediction that targets episodes and facts only).
        ``rerank_budget_ms`` overrides ``rerank.budget_ms`` (Foresight's background preparations)."""
        when = self._now(now)
        standing = None
        if self.config.standing.enabled and standing_layers:
            try:
                standing = self.scorer.hits(query, self.standing_items(ctx.project, when))
            except Exception:  # standing knowledge is best effort; episodes are still recalled
                log.exception("memtier standing knowledge failed for this prompt")
        result = self.retriever.recall(query, agent_id=ctx.agent_id, project=ctx.project,
                                       session_id=ctx.session_id, agents=self.visible_agents(ctx.agent_id),
                                       now=when, run_id=ctx.run_id, standing=standing, record_trace=record_trace,
                                       rerank_budget_ms=rerank_budget_ms, background=background)
        if self.config.standing.enabled and result.hits:
            self._mark_revised(result)
        return result

    def _mark_revised(self, result) -> None:
        """Label delivered episodes whose standing knowledge was revised since (their old value is not current)."""
        revised = self.global_store.revised_sources()
        for hit in result.hits:
            if not hit.standing:
                by = next((revised[s] for s in hit.sources if s in revised), "")
                hit.revised_by = by

    # ---- Foresight (docs/foresight.md) ------------------------------------------
    @property
    def foresight(self):
        """The Foresight scheduler when ``foresight.enabled``, else None; created on first use."""
        if not self.config.foresight.enabled:
            return None
        if self._foresight is None:
            from .scheduling.foresight import Foresight
            from .layers.topics import topic_tree

            client = self.model_client if self.config.foresight.predictor == "model" else None
            r = self.retriever
            emb = r.embedder
            # queries and predictions are embedded as queries: the prompt's vector is the one retrieval needs
            # too (the embedder keeps it), so matching costs no model run of its own
            fs = Foresight(self.config.foresight, self._prepare,
                           embed=(lambda texts: [r._embed_query(t) for t in texts]) if emb is not None else None,
                           tree=topic_tree(self.config.memory_root), client=client,
                           idle=lambda: r.embed_pending(batch=4))  # small batches: a hook never waits long
            with self._lock:
                if self._foresight is None:
                    self._foresight = fs
        return self._foresight

    def _prepare(self, query: str, layers: tuple, job) -> Any:
        """Foresight's background retrieval: the normal path, untraced (the trace is written when it is served),
        re-ranking within ``rerank.background_budget_ms`` (off the critical path; -1: ``rerank.budget_ms``)."""
        ctx, when = job
        bg = self.config.rerank.background_budget_ms
        return self.recall(query, ctx, when, record_trace=False,
                           standing_layers=bool({"global", "procedural"} & set(layers)),
                           rerank_budget_ms=None if bg < 0 else bg, background=True)

    def directory(self, project: str, now: float) -> dict[str, list[str]]:
        """The visible topic directory (MemSidecar I): topic → the standing items of ``project`` under it."""
        if not self.config.standing.enabled:
            return {}
        tree = self.scorer.tree
        out: dict[str, list[str]] = {}
        for it in self.standing_items(project, now):
            for topic in tree.top(it.route, 3):
                out.setdefault(topic, []).append(it.id)
        return out

    def recall_for(self, query: str, ctx: HookContext, ts: Any = None, *, start_task: bool = True):
        """(result, access) for a query of the agent: served from the Foresight cache when a prediction matches
        (or, for the agent's own queries, a result retrieved earlier in this turn), else retrieved normally.
        ``start_task``: a prompt (the memory tools pass False); the first prompt of a task starts its
        predictions. While a retrieval of the hook runs, Foresight's preparations pause at their next
        checkpoint (not while the hook waits for a preparation: that one must finish)."""
        from .scheduling.foresight import Served

        fs = self.foresight
        if fs is None:
            return self._hook_recall(query, ctx, ts), None
        key = ctx.session_id or ctx.run_id or "-"
        when = self._now(ts)
        if fs.task(key) is None:
            access = Served(None, reason="no task")
            result = self._hook_recall(query, ctx, ts)
            if start_task:  # after this prompt's own recall, so the thread does not compete with it
                try:
                    fs.begin(key, query, self.directory(ctx.project, when), (ctx, when))
                    fs.remember(key, query, result)
                    access.reason = "task start"
                except Exception:  # predictions are best effort
                    log.exception("memtier foresight could not start task %s", key)
            self._trace_foresight(query, result, access, ctx, when)
            return result, access
        if start_task:  # a prompt: what was retrieved for the last one predates what the user just said
            fs.forget_retrieved(key)
        access = fs.lookup(key, query)
        if not access.hit:
            result = self._hook_recall(query, ctx, ts)
            try:  # a later query of the same need is served from it
                fs.remember(key, query, result)
            except Exception:
                log.exception("memtier foresight could not keep a result of task %s", key)
        else:
            result = access.result
            self._trace_served(query, result, access, ctx, when)
        self._trace_foresight(query, result, access, ctx, when)
        return result, access

    def _hook_recall(self, query: str, ctx: HookContext, ts: Any = None):
        with self.retriever.foreground():
            return self.recall(query, ctx, ts)

    def _trace_served(self, query: str, result, access, ctx: HookContext, when: float) -> None:
        from .store import traces

        traces.append(self.config.memory_root, ctx.agent_id, traces.recall_record(
            ts=when, run_id=ctx.run_id, agent_id=ctx.agent_id, session_id=ctx.session_id, query=query,
            mode=f"foresight: {result.mode}", stage1_sessions=result.stage1_sessions, delivered=result.trace_rows(),
            left_out=result.left_out, tokens=result.tokens, elapsed_ms=access.wait_ms), when)

    def _trace_foresight(self, query: str, result, access, ctx: HookContext, when: float) -> None:
        from .store import traces

        traces.append(self.config.memory_root, ctx.agent_id, traces.foresight_record(
            ts=when, run_id=ctx.run_id, agent_id=ctx.agent_id, session_id=ctx.session_id, query=query,
            outcome=access.reason, prediction=access.prediction.query if access.prediction else "",
            similarity=access.similarity, wait_ms=access.wait_ms, wait_saved_ms=access.wait_saved_ms,
            tokens=result.tokens if result is not None else 0), when)

    def warm_up(self) -> dict[str, float]:
        """Before a long-lived process serves (the sidecar, the MCP server): open the index, load the vectors
        and the models, so its first prompt does not pay for them. Best effort: a failure is logged and the
        first prompt loads what is missing, as without it. Seconds per part."""
        t0 = time.perf_counter()
        try:
            out = self.retriever.warm_up()
            emb = self.scorer.embedder if self.config.standing.enabled else None
            if emb is not None and emb is not self.retriever.embedder:
                t1 = time.perf_counter()
                emb.embed(["memtier warm-up"])
                out["standing_embedder_s"] = time.perf_counter() - t1
        except Exception:
            log.warning("memtier: warming up %s failed; the first prompt loads what it needs",
                        self.config.memory_root, exc_info=True)
            out = {}
        out["total_s"] = time.perf_counter() - t0
        return out

    def warm_up_in_background(self) -> threading.Thread:
        """:meth:`warm_up` in a thread of its own (the sidecar, the MCP server: neither their start nor their
        first request waits for it); :meth:`close` waits for it, so no model runs while the process exits."""
        with self._lock:
            if self._warm_thread is None or not self._warm_thread.is_alive():
                self._warm_thread = threading.Thread(target=self._warm_up_logged, name="memtier-warm-up",
                                                     daemon=True)
                self._warm_thread.start()
            return self._warm_thread

    def _warm_up_logged(self) -> None:
        warm = self.warm_up()
        log.info("memtier: warmed up in %.2f s (%s)", warm.get("total_s", 0.0),
                 ", ".join(f"{k} {v:.2f}" for k, v in warm.items() if k != "total_s") or "nothing to load")

    def close(self, timeout: float = 30.0) -> None:
        """Stop background work (the warm-up, Foresight's thread, background embedding) and wait for it, so no
        model is left running (a process exiting under one can crash); the Memory stays usable."""
        warm = self._warm_thread
        if warm is not None:
            warm.join(timeout)  # (a model load cannot be interrupted; it is short)
        fs = self._foresight
        if fs is not None:
            fs.close()
        if self._retriever is not None:
            self._retriever.close()

    # ---- standing knowledge (Global and Workspace layers) ------------------
    @property
    def global_store(self):
        from .layers.global_layer import GlobalStore

        with self._lock:
            if self._global is None:
                self._global = GlobalStore(self.config.memory_root, fsync=self.ledger.fsync)
            return self._global

    def workspace_store(self, sub: str, project: str):
        """The project's skills (``procedural``) or working state (``state``) ledger."""
        from .layers.workspace_layer import ProjectLedger

        with self._lock:
            key = (sub, project)
            if key not in self._workspace:
                self._workspace[key] = ProjectLedger(self.config.memory_root, sub, project, fsync=self.ledger.fsync)
            return self._workspace[key]

    @property
    def scorer(self):
        from .recall.backends import standing_embedder
        from .layers.standing import StandingScorer
        from .layers.topics import topic_tree

        with self._lock:
            if self._scorer is None:
                shared = self._retriever.embedder if self._retriever is not None else None
                emb, note = standing_embedder(self.config, shared)
                if note:
                    log.warning("%s", note)
                self._scorer = StandingScorer(self.config, topic_tree(self.config.memory_root), emb)
            return self._scorer

    def standing_items(self, project: str, now: float) -> list:
        """Every standing item in scope: current Global nodes for ``project`` and its skills."""
        from .layers.standing import Item
        from .tokenize import token_set

        tree = self.scorer.tree
        items = []
        for n in self.global_store.current(project, now):
            it = self._items.get(n.id)
            if it is None:
                r, prov = n.rec, n.rec.get("provenance") or {}
                it = self._items[n.id] = Item(r["id"], r["content"], r["node_kind"], "global", r["timestamp"],
                                              r.get("attribute", ""), list(prov.get("entry_ids") or []),
                                              tree.route(r["content"]), n.tokens, prov.get("agent_id", ""),
                                              prov.get("session_id", ""))
            items.append(it)
        for r in self.workspace_store("procedural", project).refresh():
            if r.get("kind") != "skill":
                continue
            it = self._items.get(r["id"])
            if it is None:
                prov = r.get("provenance") or {}
                text = f"{r['goal']} {' '.join(r.get('tools') or [])}"
                it = self._items[r["id"]] = Item(r["id"], r["content"], "skill", "procedural", r["timestamp"], "",
                                                 list(prov.get("entry_ids") or []), tree.route(text),
                                                 frozenset(token_set(text)), prov.get("agent_id", ""),
                                                 prov.get("session_id", ""))
            items.append(it)
        return items

    def maintain(self, ctx: HookContext, messages: list[tuple[str, str, str]], ts: float) -> list[dict]:
        """Task-boundary maintenance of the Global layer: extract from the user's words, dedupe, upsert."""
        if not self.config.standing.enabled or not messages:
            return []
        from .layers.extract import from_session, model_candidates

        candidates = from_session(messages)
        client = self.model_client if self.config.standing.extractor == "model" else None
        if client is not None:  # the model proposes too; its output is validated data, rules stay the floor
            try:
                deadline = time.monotonic() + self.config.model.hook_deadline_s
                candidates += model_candidates(client, messages, deadline=deadline)
            except Exception as exc:
                log.warning("model extraction of standing knowledge failed (%s); rules only", exc)
        return self.global_store.upsert(candidates, agent_id=ctx.agent_id, session_id=ctx.session_id,
                                        project=ctx.project, ts=ts)

    def session_messages(self, ctx: HookContext) -> list[tuple[str, str, str]]:
        """(entry id, role, text) of the session's entries of this agent, in order (from the index)."""
        r = self.retriever
        r.refresh()
        ep = r.episodic
        code = ep.sessions.code.get(ctx.session_id)
        agent = ep.agents.code.get(ctx.agent_id)
        if code is None or agent is None:
            return []
        from .recall.index import ROLES

        out = []
        for doc in ep.session_docs.get(code, []):
            if int(ep.cols["agent"][doc]) != agent:
                continue
            try:
                rec = ep.read_record(doc)
            except (OSError, ValueError):
                continue
            out.append((ep.ids[doc], ROLES[int(ep.cols["role"][doc])], rec.get("content", "")))
        return out[-400:]

    # ---- hooks -----------------------------------------------------------
    def on_prompt(self, event: PromptEvent, ctx: HookContext) -> PromptAddition | None:
        """Recall for the prompt, then record it: the prompt is written whether or not recall worked,
        and after it, so it is never delivered back as its own memory."""
        ctx = checked_context(ctx)
        state = self.run(ctx)
        state.turn += 1
        result = access = None
        try:
            result, access = self.recall_for(query_text(event.prompt), ctx, event.timestamp)
        except Exception:  # recall is best effort; the prompt below is not
            log.exception("memtier recall failed for agent %s; the prompt is still recorded", ctx.agent_id)
        rec = self._write(ctx, clean_text(str(event.prompt)), "user",
                          {"turn": state.turn, "source": "before_prompt_build"}, event.timestamp)
        if len(state.messages) < MAX_CALLS:
            state.messages.append((rec["id"], "user", rec["content"]))
        joint = self.config.foresight.enabled and self.config.foresight.delivery == "joint"
        matches = self.hook_match_list("query", ctx, self._now(event.timestamp), query=query_text(event.prompt))
        if joint:
            return self._joint(result, matches, state)
        from .scheduling.hooks import format_matches

        bound = format_matches(matches)
        if result is None:
            return PromptAddition(prepend_context=_hook_block(bound)) if bound else None
        _remember_delivered(state, result.trace_rows())
        block = "\n".join(b for b in (result.block, _hook_block(bound)) if b)
        return PromptAddition(prepend_context=block) if block else None

    def _joint(self, result, matches: list, state: RunState) -> PromptAddition | None:
        """Joint delivery (MemSidecar Table B2): Hooks' entries, then the recalled ones, as one block,
        deduplicated (entry id or text) within the shared budget (hooks.max_entries, hooks.max_chars)."""
        from .recall.packing import CLOSE, HEADER, OPEN

        cap, max_chars = self.config.hooks.max_entries, self.config.hooks.max_chars
        lines, seen_ids, seen_text, rows, chars = [], set(), set(), [], 0
        hits = result.hits if result is not None else []
        items = [(m.entry_id, m.entry, "- [" + m.hooks[0].rsplit(":", 1)[-1] + (f" | {m.entry_id}" if m.entry_id
                  else "") + "] " + " ".join(m.entry.split()), None) for m in matches]
        rows_by_id = {r["id"]: r for r in result.trace_rows()} if result is not None else {}
        items += [(h.id, h.content, h.line(), rows_by_id.get(h.id)) for h in hits]
        for entry_id, text, line, row in items:
            norm = " ".join(text.split()).casefold()
            if (entry_id and entry_id in seen_ids) or norm in seen_text:
                continue
            if len(lines) >= cap or chars + len(line) > max_chars:
                continue
            lines.append(line)
            chars += len(line)
            seen_text.add(norm)
            if entry_id:
                seen_ids.add(entry_id)
            if row is not None:
                rows.append(row)
        _remember_delivered(state, rows)
        if not lines:
            return None
        return PromptAddition(prepend_context="\n".join([OPEN, HEADER + " Some are bound to this situation by hooks.",
                                                          *lines, CLOSE]))

    def on_pre_tool(self, event: ToolCallEvent, ctx: HookContext) -> ToolDecision | None:
        """Pre-commit intervention (intervention.py): silent (None), a supplement, or a held call."""
        ctx = checked_context(ctx)
        tool = clip_text(clean_text(str(event.tool_name)), 200)
        params = clean_obj(event.params) if isinstance(event.params, dict) else {}
        ts = self._now(event.timestamp)
        bound = self.hook_matches("pre_tool", ctx, ts, tool_name=tool, params=params)
        if self.config.scheduling.mode not in ("intervention", "combined") or not self.config.standing.enabled:
            return ToolDecision(supplement=redact(f"[memtier] bound memory for this call:\n{bound}")[0]) if bound else None
        from .intervention.rules import decide

        state = self.run(ctx)
        task = " ".join(m[2] for m in state.messages if m[1] == "user")[-4000:]
        items = self.standing_items(ctx.project, ts)
        scored = [(it, s) for it, s, _ in self.lexical_scorer.score(f"{tool.replace('_', ' ')} {task[-500:]}", items)]
        decision = decide(tool, params, ts=ts, task_text=task, standing=scored, failures=self._failures(tool, params, ctx))
        policy = self.intervention_policy
        if (policy is not None or self.collect_policy_features) and decision.action != "intervene":
            decision = self._policy_decision(decision, policy, tool, params, task, ctx, state, ts)
        self.last_decision = decision
        from .store import traces

        traces.append(self.config.memory_root, ctx.agent_id, traces.decision_record(
            ts=ts, run_id=ctx.run_id, agent_id=ctx.agent_id, session_id=ctx.session_id, tool=tool,
            tool_call_id=clean_id(event.tool_call_id), action=decision.action,
            evidence=[e.id for e in decision.evidence], features=decision.features), ts)
        if decision.action == "intervene":
            return ToolDecision(block=True, block_reason=redact(decision.text())[0])
        parts = [decision.text()] if decision.action == "supplement" else []
        if bound:
            parts.append(f"[memtier] bound memory for this call:\n{bound}")
        return ToolDecision(supplement=redact("\n".join(parts))[0]) if parts else None

    @property
    def intervention_policy(self):
        """The learned policy ``scheduling.policy`` names (policy.py), or None: unset, or unusable (logged once,
        the fixed rule decides)."""
        from .intervention.policy import load_policy, policy_path

        path = policy_path(self.config)
        if path is None:
            return None
        try:
            pol = load_policy(path)
        except (ConfigError, OSError) as exc:
            return self._policy_refused(str(exc))
        emb = self.scorer.embedder
        if pol.embedder and getattr(emb, "name", "") != pol.embedder:
            return self._policy_refused(f"{path}: trained with the {pol.embedder} embedder, which "
                                        "standing.embedder does not give here")
        if pol.uses_pairs:
            from .recall.rerank import SETUP_HINT, CrossEncoder, model_folder

            if not CrossEncoder(model_folder(self.config.rerank.model_dir)).available():
                return self._policy_refused(f"{path}: reads cross-encoder features and the cross-encoder is not "
                                            f"set up ({SETUP_HINT})")
        return pol

    def _policy_refused(self, msg: str) -> None:
        """The configured policy cannot be used: log ``msg`` once (not on every call); the fixed rule decides."""
        if self._policy_error != msg:
            self._policy_error = msg
            log.error("memtier scheduling.policy: %s; the fixed rule decides", msg)
        return None

    def _policy_decision(self, rule, policy, tool: str, params: dict, task: str, ctx: HookContext, state: RunState,
                         ts: float):
        """The learned policy's action for a call the fixed rule did not hold (policy.py). Its features: the
        call's new text against the standing item that best applies to the task (the standing scorer, with
        the embedder when there is one; scored once per task). An explicit choice in the task (an argument its
        words name) is silent, as the fixed rule has it. A failure here keeps the fixed rule's hold or
        supplement, and turns its silence into a supplement saying the check failed (never a silent allow)."""
        from .intervention.rules import CHECKED_KINDS, Decision, Evidence
        from .intervention.policy import call_text, conflicting_item, explicit_choice, features, pair_scorer
        from .recall.rerank import SETUP_HINT

        try:
            request = task[-500:]

            def evidence_and_features():
                cached = state.standing_task
                if cached is None or cached[0] != request:
                    items = [it for it in self.standing_items(ctx.project, ts)
                             if it.label in (*CHECKED_KINDS, "choice")]
                    scored = [(it, s) for it, s, _ in self.scorer.score(request, items)] if request.strip() else []
                    cached = state.standing_task = (request, scored[:4])
                pairs = policy.uses_pairs if policy is not None else self.collect_policy_pairs
                ce = pair_scorer(self.config.rerank.model_dir) if pairs else None
                if ce is None and policy is not None and policy.uses_pairs:
                    raise RuntimeError("the policy reads cross-encoder features and the cross-encoder cannot run "
                                       f"here ({SETUP_HINT})")
                wide = policy.uses_evidence if policy is not None else True  # tracing: every feature
                return cached[1], features(call_text(params, task), request, cached[1], self.scorer.embedder, ce,
                                           evidence=wide)

            timeout_ms = self.config.scheduling.policy_timeout_ms
            done = _bounded(evidence_and_features, timeout_ms / 1000.0)
            if done is None:  # still embedding: it finishes in the background (cached for the next call)
                log.warning("memtier intervention policy: no answer for %s within %.0f ms", tool, timeout_ms)
                if policy is None or rule.action != "silent":
                    return rule
                return Decision("supplement", [], f"the learned intervention check did not finish within "
                                                  f"{timeout_ms:.0f} ms: review this call against the user's "
                                                  "standing preferences before it commits",
                                {**rule.features, "policy_timeout": True})
            scored, feats = done
            if feats is None:
                return rule
            explicit = explicit_choice(params, task)
            out = Decision(rule.action, rule.evidence, rule.reason, {**rule.features, "rule_action": rule.action,
                                                                     "explicit_choice": explicit, "policy_features": feats})
            if policy is None:
                return out
            action, probs = policy.act(feats)
            if explicit:
                action = "silent"  # the task asks for this explicitly: a general habit neither holds nor nags
            out.features.update(policy=policy.source, policy_action=action, policy_probs=probs)
            # a hold quotes first the item the call conflicts with (the evidence features' selection), then the
            # one that applies best to the task when that is another; a supplement the other way round
            picked = [conflicting_item(scored, feats, policy), scored[0]]
            picked = picked if action == "intervene" else picked[::-1]
            ev = [Evidence(it.id, it.content, it.label, f"applies to the task ({s:.2f})")
                  for it, s in dict((it.id, (it, s)) for it, s in picked).values()]
            if action == "intervene":
                return Decision("intervene", ev, f"held: this call goes against a standing {ev[0].kind}", out.features)
            if action == "supplement":
                return Decision("supplement", ev, "standing knowledge that applies to this call", out.features)
            return Decision("silent", [], "", out.features)
        except Exception:  # never a silent allow: with a policy set, a failed check says so in a supplement
            log.exception("memtier intervention policy failed for %s", tool)
            if policy is None or rule.action != "silent":
                return rule
            return Decision("supplement", [], "the learned intervention check failed for this call: review it "
                                              "against the user's standing preferences before it commits",
                            {**rule.features, "policy_error": True})

    # ---- Hooks (memory bound to event predicates; docs/hooks_memory.md) ------
    def hooks_active(self) -> bool:
        return self.config.hooks.enabled and self.config.scheduling.mode in ("hooks", "combined")

    @property
    def hook_scheduler(self):
        from .scheduling.hooks import HookScheduler

        with self._lock:
            if self._hooks is None:
                self._hooks = HookScheduler(self.config.memory_root / "hooks", max_entries=self.config.hooks.max_entries,
                                            max_chars=self.config.hooks.max_chars, clock=self.clock)
            return self._hooks

    def hook_matches(self, event_type: str, ctx: HookContext, ts: float, **call) -> str:
        """The entries bound hooks deliver at this event (each at most once per task), as cited lines; "" none."""
        from .scheduling.hooks import format_matches

        return format_matches(self.hook_match_list(event_type, ctx, ts, **call))

    def hook_match_list(self, event_type: str, ctx: HookContext, ts: float, **call) -> list:
        """The :class:`memory_hooks.Match` es bound hooks deliver at this event (each at most once per task)."""
        if not self.hooks_active():
            return []
        from datetime import datetime, timezone

        when = datetime.fromtimestamp(ts, tz=timezone.utc)
        state = {"weekday": when.strftime("%a"), "hour": when.hour, "project": ctx.project, "agent": ctx.agent_id,
                 **call.pop("state", {})}
        try:
            return self.hook_scheduler.match(event_type, state, task_key=ctx.session_id or ctx.run_id or "-", **call)
        except Exception:  # a hook problem costs the hooks of this event, never the turn
            log.exception("memtier hooks failed at %s", event_type)
            return []

    @property
    def lexical_scorer(self):
        """Standing applicability from topic routes and words only (pre_tool stays well under a millisecond)."""
        from .layers.standing import StandingScorer
        from .layers.topics import topic_tree

        with self._lock:
            if self._lexical is None:
                self._lexical = StandingScorer(self.config, topic_tree(self.config.memory_root), None)
            return self._lexical

    def _failures(self, tool: str, params: dict, ctx: HookContext) -> list:
        """Earlier identical calls (tool and arguments) of the agents ``ctx`` may read that failed, never succeeded since."""
        from .recall.index import ROLES
        from .intervention.rules import Evidence
        from .tokenize import tokenize

        prefix = tool_text(tool, params, None, None).rsplit(" -> ", 1)[0] + " -> "
        r = self.retriever
        r.refresh()
        ep = r.episodic
        if ep.n == 0:
            return []
        docs, raw = ep.bm25.score(tokenize(prefix))
        if not len(docs):
            return []
        tool_role = ROLES.index("tool")
        visible = self.visible_agents(ctx.agent_id)
        codes = None if visible is None else {ep.agents.code.get(a) for a in visible}
        rows = []
        for d in docs[(-raw).argsort()[:64]].tolist():
            if int(ep.cols["role"][d]) != tool_role or (codes is not None and int(ep.cols["agent"][d]) not in codes):
                continue
            try:
                rec = ep.read_record(d)
            except (OSError, ValueError):
                continue
            content = rec.get("content", "")
            if content.startswith(prefix):
                rows.append((float(ep.cols["ts"][d]), ep.ids[d], content))
        rows.sort()
        out = []
        for _ts, eid, content in rows:
            if content[len(prefix):].startswith("FAILED"):
                out.append(Evidence(eid, content[:300], "failure", "the same call failed"))
            else:
                out = []  # a later success of the same call: the failure is history
        return out

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
                rec = self._write(ctx, str(msg["content"]), "assistant",
                                  {"turn": state.turn, "source": "agent_end"}, event.timestamp)
                if len(state.messages) < MAX_CALLS:
                    state.messages.append((rec["id"], "assistant", rec["content"]))
        from .learning.attribution import attribute_run, record_run_end

        try:
            attribute_run(self, ctx, state, success=bool(event.success))
            self._task_boundary(ctx, state, success=bool(event.success), ts=self._now(event.timestamp))
            self._after_writes(ctx, self._now(event.timestamp))
        finally:
            record_run_end(self, ctx, state, success=bool(event.success), timestamp=self._now(event.timestamp))
            with self._lock:
                self.runs.pop((state.session_id, state.run_id), None)

    def _task_boundary(self, ctx: HookContext, state: RunState, *, success: bool, ts: float) -> None:
        """agent_end maintenance: standing knowledge from the run's words; a skill from a successful run;
        the working state. Best effort: a failure here never costs the run's records."""
        if not self.config.standing.enabled:
            return
        from .layers.workspace_layer import learn_skill, record_state

        try:
            self.maintain(ctx, state.messages, ts)
            goal = next((m[2] for m in state.messages if m[1] == "user"), "")
            if success and state.tool_calls and goal:
                learn_skill(self.workspace_store("procedural", ctx.project), goal=goal, calls=state.tool_calls,
                            run_id=state.run_id, session_id=ctx.session_id, agent_id=ctx.agent_id,
                            entry_ids=[m[0] for m in state.messages], ts=ts)
            last = next((m[2] for m in reversed(state.messages) if m[1] == "assistant"), "")
            if last or state.tool_calls:
                record_state(self.workspace_store("state", ctx.project), session_id=ctx.session_id,
                             progress=last, calls=state.tool_calls, ts=ts)
        except Exception:
            log.exception("memtier task-boundary maintenance failed for run %s", state.run_id)

    def _after_writes(self, ctx: HookContext, ts: float) -> None:
        """The run's writes are in: embed them now (never at the next query), and refill Foresight's cache
        when they changed the directory (Algorithm A2: MaintainObserved, then WakeBackground(Refill))."""
        r = self._retriever
        fs = self._foresight
        try:
            if r is not None and r.embedder is not None and (fs is None or not fs.running) \
                    and not r.embedding_in_background:
                r.embed_pending()  # with Foresight running, its thread embeds them when idle
            if fs is not None:
                fs.refill(ctx.session_id or ctx.run_id or "-", self.directory(ctx.project, ts), (ctx, ts))
        except Exception:
            log.exception("memtier: embedding or Foresight refill after run %s failed", ctx.run_id)

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
            self._forget_session(ctx)

    def _forget_session(self, ctx: HookContext) -> None:
        fs = self._foresight
        if fs is not None:  # the task is over: its cache goes, and the thread when no task is left
            fs.end(ctx.session_id or ctx.run_id or "-")
            if not fs.active():
                fs.close()
        with self._lock:
            for key in [k for k, st in self.runs.items() if st.session_id == ctx.session_id]:
                self.runs.pop(key, None)


def _remember_delivered(state: RunState, rows: list[dict]) -> None:
    """Every entry delivered at any model call of the run may inform its tool calls (bounded)."""
    seen = {row["id"]: i for i, row in enumerate(state.delivered)}
    for row in rows:
        if row["id"] in seen:
            state.delivered[seen[row["id"]]] = row
        elif len(state.delivered) < MAX_DELIVERED:
            state.delivered.append(row)


def _hook_block(lines: str) -> str:
    """Entries delivered by bound hooks, as their own fenced block (they hold for this task)."""
    if not lines:
        return ""
    from .recall.packing import CLOSE, OPEN

    return "\n".join([OPEN, "Memory bound to this situation by hooks (docs/hooks_memory.md); cite by id.", lines,
                      CLOSE])


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
    """Forget cached services (tests, config reloads), stopping their background work first."""
    with _services_lock:
        for mem in _services.values():
            try:
                mem.close()
            except Exception:
                log.exception("memtier: closing a service failed")
        _services.clear()


# A process that exits while a background thread is inside a model (the warm-up, Foresight, embedding) can
# abort in the interpreter's shutdown: stop and join them first.
atexit.register(reset_services)
