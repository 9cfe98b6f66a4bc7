"""A benchmark lived through the reference host, and the block before_prompt_build returns, scored.

The ranking-only runners (:mod:`.runner`) score :meth:`Retriever.rank`; an
agent receives something else: the packed block, with every layer the config
enables merged in (the Global layer's standing items, the Workspace layer's
skills, facts, bound Hooks' entries). :class:`HostReplay` lives a benchmark's
history as a runtime would drive the hooks (docs/evaluation.md, "Through the
host"):

* each user turn is a prompt (``before_prompt_build``, its own run), the
  assistant turns that follow it are the run's reply (``agent_end`` with those
  messages), and ``session_end`` closes each session;
* consolidation runs as the config runs it: ``consolidation.enabled`` runs the
  daemon's batch (:class:`~memtier_plugin.consolidation.batch.Consolidator`)
  synchronously at each session's close, so its facts are there for the next
  session, as a daemon keeping up would have them;
* every :class:`~memtier_plugin.memory.Memory` gets the replay's clock (the
  turn being replayed), the only thing replaced;
* each question is asked as the prompt of a fresh session in a throwaway copy
  of the lived workspace (:meth:`MemtierPrefEval._start`: ledgers hard-linked,
  index copied), so no question is ever written back where another is asked.

What is scored is the block the host returned: :func:`delivered` reads the
items of the recall that made it (captured at the facade's ``recall_for``) and
keeps those whose id is in the block, plus the Hooks' lines. Each item stands
for the benchmark turns it came from (:func:`.prefeval.covered`: an episode its
own, a fact or standing item its ``sources``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from .delivered import Delivery, Item, block_row, block_summary, delivered
from .prefeval import MemtierPrefEval

TURN_GAP_S = 30.0  # between consecutive turns of a session (LoCoMo and LongMemEval give one date a session)


@dataclass
class Turn:
    key: str  # the benchmark's id for the turn (LoCoMo dia_id, LongMemEval "<session>_<n>")
    role: str  # "user" (a prompt) or "assistant" (the reply, at agent_end)
    text: str


@dataclass
class ReplaySession:
    sid: str
    start: float  # the session's date; turn i happens at start + i * TURN_GAP_S
    turns: list[Turn]


@dataclass
class HostReplay(MemtierPrefEval):
    """Replays :class:`ReplaySession` s into one workspace and asks questions of throwaway copies of it."""

    project: str = "eval"
    vector_cache: Path | None = None  # φsem vectors shared across workspaces and runs (--cache)
    clock_now: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        self._captured = None
        self._scorers: dict[Path, Any] = {}  # base → the standing scorer its copies share (item vectors embedded once)

    def _ctx(self, ws: Path, sid: str):
        from ..events import HookContext

        return HookContext(agent_id="main", session_key=self.project, session_id=sid, run_id=f"{sid}-r1",
                           project=self.project, workspace_dir=str(ws))

    def _clock(self) -> float:
        return self.clock_now

    def _start(self, base: Path | None, link: bool = True) -> Path:
        """A fresh workspace (see :meth:`MemtierPrefEval._start`) whose Memory is the host's (loaded from its
        memtier.yaml) with the replay's clock, the run's backends and vector cache, and its recall captured
        (what the block was made from)."""
        from ..config import load_config
        from ..memory import Memory
        from ..recall.retriever import Retriever

        ws = super()._start(base, link)
        mem = Memory.from_config(load_config(flags={"paths.workspace": str(ws)}), clock=self._clock)
        mem._retriever = Retriever(mem.config, mem.ledger, backends=self._backends, vector_cache=self.vector_cache)
        if base is not None:  # every copy holds the base's standing items under the same ids, at the same path
            mem._scorer = self._scorers.get(base)
            if mem._scorer is None and mem.config.standing.enabled:
                self._scorers[base] = mem.scorer
        recall_for = mem.recall_for

        def capture(*args, **kwargs):
            out = recall_for(*args, **kwargs)
            self._captured = out[0]
            return out

        mem.recall_for = capture
        return ws

    # -- living the history --
    def replay(self, ws: Path, sessions: Sequence[ReplaySession]) -> dict[str, str]:
        """Every session through the hooks, in order; consolidation at each close. Entry id → turn key."""
        from ..consolidation.batch import Consolidator
        from ..events import AgentEndEvent, PromptEvent, SessionEndEvent

        cons = None
        for s in sessions:
            ctx = self._ctx(ws, s.sid)
            mem = self._memory(ctx)
            run, reply, ts = 0, None, s.start

            def end_run(at: float) -> None:
                if reply is not None:
                    self.clock_now = at
                    self.host.agent_end(AgentEndEvent(messages=reply, success=True, timestamp=at), ctx)

            for i, t in enumerate(s.turns):
                ts = s.start + i * TURN_GAP_S
                if t.role == "user" or reply is None:
                    end_run(ts)
                    run += 1
                    ctx.run_id = f"{s.sid}-r{run}"
                    reply = []
                if t.role == "user":
                    self.clock_now = ts
                    self.host.before_prompt_build(PromptEvent(t.text, timestamp=ts), ctx)
                else:
                    reply.append({"role": "assistant", "content": t.text})
            end_run(ts)
            self.clock_now = ts
            self.host.session_end(SessionEndEvent(reason="completed", timestamp=ts), ctx)
            if mem.config.consolidation.enabled:
                if cons is None:
                    cons = Consolidator(mem.config, clock=self._clock)
                    cons.ledger.fsync = cons.store.fsync = False
                while cons.run_batch().more:
                    pass
                mem.retriever.refresh()
        if cons is not None:
            cons.close()
        return entry_keys(ws / self.config.paths.memory_dir, sessions)

    def ask_block(self, ws: Path, sid: str, text: str, now: float, keys: dict) -> Delivery:
        """``text`` as the first prompt of session ``sid`` in ``ws``: the block it is handed."""
        from ..events import PromptEvent

        ctx = self._ctx(ws, sid)
        mem = self._memory(ctx)
        self._captured = None
        self.clock_now = now
        addition = self.host.before_prompt_build(PromptEvent(text, timestamp=now), ctx)
        if self._captured is None:
            self.failed += 1
        if not self.backends:
            r = mem.retriever
            self.backends = {"embedder": getattr(r.embedder, "name", None),
                             "reranker": None if r.reranker is None
                             else getattr(r.reranker, "name", type(r.reranker).__name__)}
        return delivered(self._captured, addition.prepend_context or "", keys)

    def lived(self, name: str, sessions: Sequence[ReplaySession]) -> tuple[Path, dict[str, str]]:
        """A base workspace holding ``sessions`` lived through the hooks (index saved, ledgers read-only)."""
        ws = self._start(None)
        keys = self.replay(ws, sessions)
        base = self.workdir / f"base-{name}"
        self._snapshot(ws, base)
        return base, keys

    def ask_each(self, base: Path, questions: Sequence[tuple[str, float]], keys: dict,
                 on_answer: Callable[[int, Delivery], None]) -> None:
        """Each (text, time) as a fresh session's prompt in its own throwaway copy of ``base``."""
        for n, (text, now) in enumerate(questions):
            ws = self._start(base)
            on_answer(n, self.ask_block(ws, f"question-{n}", text, now, keys))
            self._finish(ws, f"q{n}")

    def drop(self, base: Path) -> None:
        self._scorers.pop(base, None)
        shutil.rmtree(base, ignore_errors=True)


def entry_keys(memory_root: Path, sessions: Sequence[ReplaySession]) -> dict[str, str]:
    """Entry id → turn key: each session's user (assistant) entries, in ledger order, are its user (assistant)
    turns in order (the hooks write a prompt at before_prompt_build and each reply at agent_end)."""
    from ..store.episodic import Ledger

    by_session: dict[tuple[str, str], list[str]] = {}
    for e in Ledger(memory_root).read().entries.values():
        by_session.setdefault((e.session_id, e.role), []).append(e.id)
    out: dict[str, str] = {}
    for s in sessions:
        for role in ("user", "assistant"):
            turns = [t.key for t in s.turns if t.role == role]
            for eid, key in zip(by_session.get((s.sid, role), []), turns):
                out[eid] = key
    return out


# ---------------------------------------------------------------- the benchmarks


def _ranked_keys(d: Delivery) -> list[str]:
    return list(dict.fromkeys(k for i in d.candidates for k in sorted(i.keys)))


def locomo_sessions(conv) -> list[ReplaySession]:
    """A LoCoMo conversation as lived: speaker A's turns are the prompts, speaker B's the replies."""
    from .locomo import turn_document
    from .runner import _ts

    return sorted((ReplaySession(f"session_{s.index}", _ts(s.date),
                                 [Turn(t.dia_id, "user" if t.speaker == conv.speaker_a else "assistant",
                                       turn_document(t)) for t in s.turns if t.text.strip()])
                   for s in conv.sessions), key=lambda s: s.start)


def locomo(convs, rp: HostReplay, progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Each conversation lived once, each question (with valid evidence) asked of a copy of it the day after
    its last session. ``{"ranking": evaluate_locomo-shaped result over the recall's candidates,
    "block": {"overall": block_summary, category: ...}, "per_question": [...]}``."""
    from .locomo import CATEGORIES, aggregate, score_qa, valid_evidence

    rows, blocks, excluded = [], [], 0
    total = sum(len(c.qa) for c in convs)
    done = 0
    for ci, conv in enumerate(convs):
        sessions = locomo_sessions(conv)
        base, keys = rp.lived(f"conv-{ci}", sessions)
        now = max(s.start for s in sessions) + 86400.0
        asked = [(j, qa) for j, qa in enumerate(conv.qa) if valid_evidence(conv, qa)]
        excluded += len(conv.qa) - len(asked)

        def answer(n: int, d: Delivery) -> None:
            nonlocal done
            j, qa = asked[n]
            rows.append({"sample_id": conv.sample_id, "qa_index": j, **score_qa(_ranked_keys(d), conv, qa)})
            blocks.append({"category": qa.category, **block_row(d, set(valid_evidence(conv, qa)))})
            done += 1
            if progress is not None:
                progress(done + excluded, total)

        rp.ask_each(base, [(qa.question, now) for _, qa in asked], keys, answer)
        rp.drop(base)
    scored = [{k: v for k, v in r.items() if k not in ("sample_id", "qa_index")} for r in rows]
    block = {"overall": block_summary(blocks)}
    for cat, name in CATEGORIES.items():
        sub = [b for b in blocks if b["category"] == cat]
        if sub:
            block[name] = block_summary(sub)
    return {"ranking": {"per_question": rows, "excluded": excluded, **aggregate(scored)}, "block": block,
            "per_question": blocks}


def longmemeval_sessions(q) -> list[ReplaySession]:
    """A LongMemEval haystack as lived, in date order (user turns prompts, assistant turns replies); turn keys
    ``<session>_<n>``, n over all turns as the official protocol numbers them."""
    from .runner import _ts

    return sorted((ReplaySession(s.session_id, _ts(s.date),
                                 [Turn(f"{s.session_id}_{n}", "assistant" if t.get("role") == "assistant" else "user",
                                       str(t.get("content", ""))) for n, t in enumerate(s.turns, 1)
                                  if str(t.get("content", "")).strip()])
                   for s in q.sessions), key=lambda s: s.start)


def longmemeval_question(q, rp: HostReplay) -> tuple[dict[str, Any], dict[str, Any]]:
    """One question's haystack lived in a fresh workspace, the question asked at its date (a session of its
    own; the workspace is then dropped). (official per-question scores over the recall's candidates, block
    row: evidence = the answer sessions, an item counting for every session it stands for)."""
    from . import longmemeval as lme
    from .metrics import strip_turn_id
    from .runner import _ts

    sessions = longmemeval_sessions(q)
    ws = rp._start(None)
    keys = rp.replay(ws, sessions)
    d = rp.ask_block(ws, "question", q.question, _ts(q.question_date), keys)
    rp._finish(ws, q.question_id)
    turns = _ranked_keys(d)
    ranked_sessions = list(dict.fromkeys(strip_turn_id(t) for t in turns))
    per_q = lme.score_question(ranked_sessions, turns, q)
    gold = {doc.raw_id for doc in lme.corpus(q, "session") if "answer" in doc.id}
    by_session = Delivery(d.block, [Item(i.id, i.layer, {strip_turn_id(k) for k in i.keys}) for i in d.items],
                          d.tokens)
    return per_q, {"question_type": q.question_type, **block_row(by_session, gold)}
