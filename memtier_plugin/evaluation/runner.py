"""memtier's own ranking on the benchmarks, through the same paths a host uses.

For every LongMemEval question (every LoCoMo conversation) a fresh workspace
is written through :class:`~memtier_plugin.store.episodic.Ledger` (haystack dates as
timestamps), given semantic facts by the heuristic extractor the daemon uses
(without the daemon's batch dedup, supersession and eligibility rules), and
queried with :meth:`Retriever.rank` — the ranking before_prompt_build packs
from — at the question date as "now". Durability (fsync) is off for these
throwaway workspaces. Standing layers, Hooks and Foresight are not part of
this ranking.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..store import jsonl
from ..recall.backends import Backends
from ..config import Config, load_config
from ..dates import parse_timestamp
from ..consolidation.facts import extract_facts
from ..recall.index import DocIndex
from ..store.episodic import Ledger, append_lines, new_id, utc_iso
from ..recall.packing import pack
from ..recall.retriever import Ranked, Retriever

AGENT = "user"


@dataclass
class Options:
    """What one evaluation run varies (the ablations of MemTier Table 2)."""

    flags: dict[str, Any] = field(default_factory=dict)  # dotted config keys
    config_path: str | None = None  # the user's config file, read for every question's workspace too
    roles: tuple[str, ...] = ("user",)
    facts: bool = True
    # embedder, re-ranker and weights shared by every question (None: each retriever chooses from its config)
    backends: Backends | None = None
    vector_cache: Path | None = None  # shared across questions: haystacks repeat sessions
    depth: int = 1000


def make_config(workspace: Path, opts: Options) -> Config:
    """The run's config (file, environment, ``opts.flags``) with ``workspace`` as the workspace."""
    return load_config(opts.config_path, flags={**opts.flags, "paths.workspace": str(workspace)})


def _ts(date_string: str) -> float:
    dt = parse_timestamp(date_string)
    if dt is None:
        raise ValueError(f"unparseable date {date_string!r}")
    if dt.tzinfo is None:
        from datetime import timezone

        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def write_sessions(root: Path, sessions: list[tuple[str, float, list[tuple[str, str, str]]]], project: str,
                   opts: Options) -> dict[str, str]:
    """Write (session id, start ts, [(turn id, role, text)]) through the ledger; entry id → turn id."""
    from ..store.semantic import fact_record

    ledger = Ledger(root, fsync=False)
    turn_of: dict[str, str] = {}
    facts: list[bytes] = []
    for session_id, start, turns in sessions:
        records = []
        for i, (turn_id, role, text) in enumerate(turns):
            if role not in opts.roles or not text.strip():
                continue
            rec = ledger.make_entry(agent_id=AGENT, session_id=session_id, project=project, content=text,
                                    role=role, timestamp=start + i, provenance={"turn": turn_id})
            records.append(rec)
            turn_of[rec["id"]] = turn_id
            if opts.facts:
                for f in extract_facts(text, role=role, timestamp=utc_iso(start)):
                    facts.append(jsonl.dumps(fact_record(
                        f, fid=new_id("sf", start), project=project, origin_agent=AGENT, entry=rec,
                        supersedes=None, extractor="heuristic", recorded_at=rec["timestamp"],
                        effective_time=utc_iso(start))))
        if records:
            ledger.append(AGENT, records, timestamp=start)
    if facts:
        append_lines(root / "semantic" / f"{project}.jsonl", b"".join(facts), fsync=False)
    return turn_of


def open_retriever(root: Path, opts: Options) -> Retriever:
    return Retriever(make_config(root.parent, opts), backends=opts.backends, vector_cache=opts.vector_cache)


def rank_question(retriever: Retriever, query: str, now: float, project: str, opts: Options) -> Ranked:
    """The ranking before_prompt_build packs from, ``opts.depth`` deep, every agent's entries visible."""
    return retriever.rank(query, agents=None, project=project, now=now, depth=opts.depth)


def doc_sessions(idx: DocIndex, doc: int) -> list[str]:
    """The session ids a ranked document stands for: an entry its own, a fact those it was extracted from."""
    if idx.kind == "episodic":
        return [idx.sessions.names[int(idx.cols["session"][doc])]]
    return [idx.sessions.names[s] for s in idx.fact_sessions.get(doc, [])]


def read_ranking(retriever: Retriever, ranked: Ranked, turn_of: dict[str, str]) -> tuple[list[str], list[str], int]:
    """(ranked session ids, ranked turn ids, tokens delivered at the configured k/budget)."""
    cfg = retriever.config
    sessions: list[str] = []
    turns: list[str] = []
    seen_s: set[str] = set()
    for idx, doc in ranked.docs:
        turn = turn_of.get(idx.ids[doc]) if idx.kind == "episodic" else None
        if turn and turn not in turns:
            turns.append(turn)
        for s in doc_sessions(idx, doc):
            if s not in seen_s:
                seen_s.add(s)
                sessions.append(s)
    packed = pack(retriever.hits(ranked, max(16, 4 * cfg.retrieval.top_k)), cfg.retrieval.top_k,
                  cfg.packing.token_budget, cfg.packing.max_chars)
    return sessions, turns, packed.tokens


def rank_workspace(retriever: Retriever, query: str, now: float, project: str, opts: Options,
                   turn_of: dict[str, str]) -> tuple[list[str], list[str], int]:
    """:func:`rank_question`, read by :func:`read_ranking`."""
    return read_ranking(retriever, rank_question(retriever, query, now, project, opts), turn_of)


def question_sessions(q) -> list[tuple[str, float, list[tuple[str, str, str]]]]:
    """A LongMemEval question's haystack as (session id, start ts, [(turn id, role, text)])."""
    return [(s.session_id, _ts(s.date),
             [(f"{s.session_id}_{n}", t.get("role", "user"), t.get("content", "")) for n, t in enumerate(s.turns, 1)])
            for s in q.sessions]


class LongMemEvalRanker:
    """``rank_fn`` for :func:`..longmemeval.evaluate_longmemeval`."""

    def __init__(self, opts: Options, workdir: Path | None = None):
        self.opts = opts
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="memtier-eval-"))
        self.tokens: dict[str, int] = {}
        self.seconds: dict[str, float] = {}

    def __call__(self, q) -> tuple[list[str], list[str]]:
        t0 = time.perf_counter()
        ws = self.workdir / q.question_id
        shutil.rmtree(ws, ignore_errors=True)
        root = ws / "memory"
        sessions = question_sessions(q)
        turn_of = write_sessions(root, sessions, "longmemeval", self.opts)
        ranked_s, ranked_t, tokens = rank_workspace(open_retriever(root, self.opts), q.question,
                                                    _ts(q.question_date), "longmemeval", self.opts, turn_of)
        shutil.rmtree(ws, ignore_errors=True)
        # sessions no candidate came from follow, newest first, so @30/@50 compare with BM25's full ranking
        seen = set(ranked_s)
        ranked_s += [sid for sid, start, _ in sorted(sessions, key=lambda x: -x[1]) if sid not in seen]
        self.tokens[q.question_id] = tokens
        self.seconds[q.question_id] = time.perf_counter() - t0
        return ranked_s, ranked_t


    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)


class LoCoMoRanker:
    """``rank_fn`` for :func:`..locomo.evaluate_locomo`: one workspace per conversation."""

    def __init__(self, opts: Options, workdir: Path | None = None):
        self.opts = Options(**{**opts.__dict__, "roles": ("user", "assistant")})
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="memtier-eval-"))
        self._built: dict[int, tuple[Retriever, dict[str, str], float]] = {}
        self.tokens: list[int] = []

    def _build(self, conv):
        key = id(conv)
        if key not in self._built:
            from .locomo import turn_document

            ws = self.workdir / f"conv-{len(self._built)}"
            shutil.rmtree(ws, ignore_errors=True)
            sessions, last = [], 0.0
            for s in conv.sessions:
                start = _ts(s.date)
                last = max(last, start)
                # speaker A plays "user", speaker B "assistant": both are written, as a host would
                turns = [(t.dia_id, "user" if t.speaker == conv.speaker_a else "assistant", turn_document(t))
                         for t in s.turns]
                sessions.append((f"session_{s.index}", start, turns))
            turn_of = write_sessions(ws / "memory", sessions, "locomo", self.opts)
            self._built[key] = (open_retriever(ws / "memory", self.opts), turn_of, last + 86400.0)
        return self._built[key]

    def __call__(self, conv, qa) -> list[str]:
        root, turn_of, now = self._build(conv)
        _, turns, tokens = rank_workspace(root, qa.question, now, "locomo", self.opts, turn_of)
        self.tokens.append(tokens)
        return turns

    def close(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)
