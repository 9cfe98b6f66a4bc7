"""The rooms one workspace's memory is made of, each created on first use (a hook pays only for what it uses).

:class:`Rooms` holds the ledger and, lazily, the retriever (``recall``), the chat
model (``models``), the Global and Workspace layers and their scorers
(``layers``), Foresight and the Hooks scheduler (``scheduling``) and the
pre-commit check (``intervention``), and the one reader of what the user told memory to forget
(:class:`~memtier_plugin.store.tombstones.Forgotten`) that every room asks before it offers an item; it warms them up before a long-lived
process serves and stops their background work on close. The facade
(:class:`memtier_plugin.memory.Memory`) adds the hooks.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from .config import Config
from .events import HookContext
from .store.episodic import Ledger
from .store.tombstones import Forgotten

log = logging.getLogger(__name__)


class Rooms:
    """One workspace's rooms, created on first use and shared by every hook of the process."""

    def __init__(self, config: Config, *, clock=time.time):
        self.config = config
        self.clock = clock
        self.ledger = Ledger(config.memory_root, clock=clock)
        self.forgotten = Forgotten(config.memory_root)  # one per Memory: a forget by any process applies at the next call
        self._lock = threading.RLock()  # a room made on first use may need another (Foresight: the retriever)
        self._retriever = self._model_client = self._global = self._scorer = self._lexical = None
        self._hooks = self._foresight = self._pre_commit = self._items = self._derived = None
        self._gate = None  # (the learned standing gate, the embedder it reads): layers/gate.py
        if config.standing.enabled and config.standing.gate != "none" and config.standing.gate_file:
            from .layers.gate import for_config

            for_config(config)  # a bad gate file stops startup, naming standing.gate_file
        if config.standing.enabled and config.standing.center != "none" and config.standing.center_file:
            from .layers.center import for_config as center_for_config

            center_for_config(config)  # a bad center file stops startup, naming standing.center_file
        if config.standing.enabled and config.standing.request_model != "none" and config.standing.request_model_file:
            from .layers.asking import for_config as request_model_for_config

            request_model_for_config(config)  # a bad model file stops startup, naming standing.request_model_file
        self._step = self._step_worker = None  # memory for the step (scheduling/step.py)
        self._workspace: dict[tuple[str, str], Any] = {}
        self._warm_thread: threading.Thread | None = None
        self._shared_started = False

    def visible_agents(self, agent_id: str) -> list[str] | None:
        """Agents whose episodic ledgers ``agent_id`` may read (None: all, for orchestrators)."""
        return None if agent_id in self.config.agents.global_read else [agent_id]

    def _once(self, name: str, make):
        with self._lock:
            if getattr(self, name) is None:
                setattr(self, name, make())
            return getattr(self, name)

    @property
    def retriever(self):
        from .recall.retriever import COLD_EMBED, Retriever

        def make():
            r = Retriever(self.config, self.ledger, forgotten=self.forgotten)
            r.cold_embed_limit = COLD_EMBED  # a hook never embeds a big cold store in place
            return r
        return self._retriever if self._retriever is not None else self._once("_retriever", make)

    @property
    def model_client(self):
        """The chat-model client (``models.chat.ModelClient``) when ``model.enabled``, else None."""
        if not self.config.model.enabled:
            return None
        from .models.chat import ModelClient, ModelConfig

        return self._once("_model_client", lambda: ModelClient(ModelConfig.from_section(self.config.model)))

    @property
    def global_store(self):
        from .layers.global_layer import GlobalStore

        return self._once("_global", lambda: GlobalStore(self.config.memory_root, fsync=self.ledger.fsync,
                                                         forgotten=self.forgotten))

    def workspace_store(self, sub: str, project: str):
        """The project's skills (``procedural``) or working state (``state``) ledger."""
        from .layers.workspace_layer import ProjectLedger

        with self._lock:
            if (sub, project) not in self._workspace:
                self._workspace[(sub, project)] = ProjectLedger(self.config.memory_root, sub, project,
                                                                fsync=self.ledger.fsync)
            return self._workspace[(sub, project)]

    @property
    def scorer(self):
        """Standing applicability with the embedder (``standing.embedder``), for prompts."""
        from .layers.standing import StandingScorer
        from .layers.topics import topic_tree
        from .recall.backends import standing_embedder

        def make():
            emb, note = standing_embedder(self.config, self._retriever.embedder if self._retriever else None)
            if note:
                log.warning("%s", note)
            from .layers import asking, center

            return StandingScorer(self.config, topic_tree(self.config.memory_root), emb,
                                  center=center.resolve(self.config, emb),
                                  request_model=asking.resolve(self.config, emb))
        return self._once("_scorer", make)

    @property
    def gate(self) -> tuple:
        """(the learned standing gate, the embedder it reads) for task-boundary extraction (layers/gate.py), or
        (None, None): ``standing.gate: none``, no standing embedder, or not the one the gate was fitted with."""
        from .layers.gate import resolve

        return self._once("_gate", lambda: resolve(self.config, lambda: self.scorer.embedder))

    @property
    def lexical_scorer(self):
        """Standing applicability from topic routes and words only (pre_tool stays well under a millisecond)."""
        from .layers.standing import StandingScorer
        from .layers.topics import topic_tree

        return self._once("_lexical", lambda: StandingScorer(self.config, topic_tree(self.config.memory_root), None))

    @property
    def foresight(self):
        """The Foresight scheduler when ``foresight.enabled``, else None (docs/foresight.md)."""
        if not self.config.foresight.enabled:
            return None
        from .layers.topics import topic_tree
        from .scheduling.foresight import build

        client = self.model_client if self.config.foresight.predictor == "model" else None
        return self._foresight or self._once("_foresight", lambda: build(
            self.config, self._prepare, self.retriever, topic_tree(self.config.memory_root), client))

    @property
    def step_recall(self):
        """Memory for the step's retrievals of tool results (scheduling/step.py), run on Foresight's background
        thread (a worker of its own, with no predictions, when Foresight is off)."""
        from .scheduling.step import StepRecall

        return self._step if self._step is not None else self._once("_step", lambda: StepRecall(self._submit_step))

    def _submit_step(self, query: str, job):
        from .scheduling.foresight import Foresight

        fs = self.foresight or self._step_worker or self._once(
            "_step_worker", lambda: Foresight(self.config.foresight, self._prepare))
        return fs.submit(query, ("episodic", "semantic", "global", "procedural"), job)

    @property
    def hook_scheduler(self):
        """The Hooks scheduler; its files start loading in the background when it is made (no event waits)."""
        from .scheduling.hooks import HookScheduler

        def make():
            hooks = self.config.hooks
            sched = HookScheduler(self.config.memory_root / "hooks", clock=self.clock, max_entries=hooks.max_entries,
                                  max_chars=hooks.max_chars, skip=self.forgotten.__contains__)
            if hooks.from_memory:  # the hooks derived from memory load with the files, off the event path
                sched.add_source("memory", self.derived_hooks.load)
            sched.load_in_background()
            return sched
        return self._hooks if self._hooks is not None else self._once("_hooks", make)

    @property
    def derived_hooks(self):
        """The hooks memory derives when it is written (scheduling/derived.py), over the current Global nodes."""
        from .layers.workspace_layer import current_skills
        from .scheduling.derived import DerivedHooks

        return self._once("_derived", lambda: DerivedHooks(
            self.config.memory_root, lambda: [n.rec for n in self.global_store.current()],
            lambda project: current_skills(self.workspace_store("procedural", project)),
            fsync=self.ledger.fsync))

    def derive_hooks(self, records: list[dict], ts: float) -> None:
        """Maintenance wrote ``records`` (Global nodes, a skill): store the hooks rules propose for them beside
        them, and give them to a running scheduler now (at agent_end, never in an event; another process's
        load sees the file)."""
        if not (self.config.hooks.enabled and self.config.hooks.from_memory):
            return
        derived, propose = self.derived_hooks, None
        client = self.model_client if self.config.hooks.proposer == "model" else None
        if client is not None:  # at write time (agent_end), within the model's hook deadline, never in an event
            from .scheduling.rule_hooks import model_proposal

            deadline = time.monotonic() + self.config.model.hook_deadline_s
            propose = lambda rec: model_proposal(client, rec, deadline=deadline)  # noqa: E731
        derived.write(records, ts, propose)
        if self._hooks is not None:
            hooks = derived.load(force=True)
            if hooks is not None:
                self._hooks.set_hooks("memory", hooks)

    def entry_record(self, entry_id: str, agent_id: str, project: str) -> dict | None:
        """The record of ``entry_id`` that ``agent_id`` may read, or None: a Global node (``gk-``), a skill
        (``sk-``) or working state (``ws-``) of ``project``, an episodic entry (``ep-``) or a fact (``sf-``).
        ``memory_get`` and ``entry_id`` hooks read through it; a forgotten id is never found."""
        if entry_id in self.forgotten:
            return None
        if entry_id.startswith("gk-"):
            store = self.global_store
            store.refresh()
            node = store.nodes.get(entry_id)
            if node is None:
                return None
            r = node.rec
            return {"id": entry_id, "tier": "global", "timestamp": r["timestamp"], "role": r["node_kind"],
                    "agent_id": (r.get("provenance") or {}).get("agent_id", ""), "project": "",
                    "session_id": (r.get("provenance") or {}).get("session_id", ""), "content": r["content"],
                    "current": node.retired_by is None}
        if entry_id.startswith(("sk-", "ws-")):
            from .layers.workspace_layer import state_content

            sub = "procedural" if entry_id.startswith("sk-") else "state"
            r = next((r for r in self.workspace_store(sub, project).refresh() if r.get("id") == entry_id), None)
            if r is None:
                return None
            return {"id": entry_id, "tier": "procedural", "timestamp": r["timestamp"], "role": r["kind"],
                    "agent_id": (r.get("provenance") or {}).get("agent_id", ""), "project": project,
                    "session_id": r.get("session_id") or (r.get("provenance") or {}).get("session_id", ""),
                    "content": r["content"] if r["kind"] == "skill" else state_content(r)}
        retriever = self.retriever
        retriever.refresh()
        visible = self.visible_agents(agent_id)
        for tier in ("episodic", "semantic"):
            idx = getattr(retriever, tier)
            doc = idx.pos.get(entry_id)
            if doc is None:
                continue
            rec = idx.read_record(doc)
            if tier == "episodic":
                if visible is not None and rec.get("agent_id") not in visible:
                    return None
                if idx.col("system")[doc]:
                    return None  # [system] entries are never recalled; they are not handed out by id either
            return {"id": entry_id, "tier": tier, "timestamp": rec.get("timestamp", ""),
                    "agent_id": rec.get("agent_id") or rec.get("origin_agent", ""),
                    "session_id": rec.get("session_id") or ",".join(rec.get("session_ids") or []),
                    "project": rec.get("project", ""), "role": rec.get("role", "fact" if tier == "semantic" else ""),
                    "content": rec.get("content", ""),
                    **({"current": not bool(idx.col("superseded")[doc])} if tier == "semantic" else {})}
        return None

    @property
    def pre_commit(self):
        """Pulse's pre-commit check (intervention/pre_commit.py)."""
        from .intervention.pre_commit import PreCommit

        return self._once("_pre_commit", lambda: PreCommit(
            self.config, items=self.standing_items, lexical=lambda: self.lexical_scorer, scorer=lambda: self.scorer,
            history=self._tool_history))

    def standing_items(self, project: str, now: float) -> list:
        """Every standing item in scope: current Global nodes for ``project`` and its skills, none forgotten."""
        from .layers.standing import StandingItems

        items = self._items or self._once("_items", StandingItems)
        return items(self.global_store, self.workspace_store("procedural", project), self.scorer.tree, project, now,
                     forgotten=self.forgotten.ids())

    def directory(self, project: str, now: float) -> dict[str, list[str]]:
        """The visible topic directory (MemSidecar I): topic → the standing items of ``project`` under it."""
        from .layers.standing import directory

        if not self.config.standing.enabled:
            return {}
        return directory(self.standing_items(project, now), self.scorer.tree)

    def session_messages(self, ctx: HookContext) -> list[tuple[str, str, str]]:
        """(entry id, role, text) of the session's entries of this agent, in order (the last 400), none forgotten
        (maintenance never learns standing knowledge from a forgotten entry)."""
        self.retriever.refresh()
        gone = self.forgotten.ids()
        return [m for m in self.retriever.episodic.session_entries(ctx.session_id, ctx.agent_id)
                if m[0] not in gone][-400:]

    def _tool_history(self, prefix: str, agent_id: str) -> list[tuple[float, str, str]]:
        self.retriever.refresh()
        gone = self.forgotten.ids()
        return [r for r in self.retriever.episodic.tool_history(prefix, self.visible_agents(agent_id))
                if r[1] not in gone]

    def _extractor(self):
        return self.model_client if self.config.standing.extractor == "model" else None

    def warm_up(self) -> dict[str, float]:
        """Before a long-lived process serves (the sidecar, the MCP server): open the index, load the vectors
        and the models, so its first prompt does not pay for them. Best effort: a failure is logged and the
        first prompt loads what is missing, as without it. Seconds per part."""
        t0 = time.perf_counter()
        if self.config.hooks.enabled and self.config.scheduling.mode in ("hooks", "combined"):
            self.hook_scheduler  # noqa: B018 -- made now: its files load in their own thread from the start
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

    def start_shared(self) -> None:
        """With ``shared.backend: postgres``, start this workspace's link to the shared tiers (docs/shared.md) in
        a thread of its own (psycopg is imported there, never on a hook's path); otherwise nothing (nothing of
        ``memtier_plugin.shared`` is imported)."""
        if self.config.shared.backend == "none":
            return
        with self._lock:
            if self._shared_started:
                return
            self._shared_started = True

        def start() -> None:
            try:
                from .shared.sync import start_sync
            except ImportError:
                log.error("memtier shared: shared.backend is postgres but psycopg is not installed "
                          "(pip install 'memtier-plugin[shared]'); memory stays on this host")
                return
            start_sync(self.config)
        threading.Thread(target=start, name="memtier-shared-start", daemon=True).start()

    def warm_up_in_background(self) -> threading.Thread:
        """:meth:`warm_up` in a thread of its own (the sidecar, the MCP server: neither their start nor their
        first request waits for it); :meth:`close` waits for it, so no model runs while the process exits.
        The shared tiers' link starts beside it (:meth:`start_shared`)."""
        self.start_shared()
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
        """Stop background work (the warm-up, Foresight's thread, background embedding, the hooks' background
        load, which writes the derived hooks' file) and wait for it, so no model is left running (a process
        exiting under one can crash) and nothing writes into the memory folder after close; the Memory stays
        usable."""
        warm = self._warm_thread
        if warm is not None:
            warm.join(timeout)  # (a model load cannot be interrupted; it is short)
        if self._hooks is not None:
            self._hooks.wait_loaded(timeout)
        for fs in (self._foresight, self._step_worker):
            if fs is not None:
                fs.close()
        if self._retriever is not None:
            self._retriever.close()
