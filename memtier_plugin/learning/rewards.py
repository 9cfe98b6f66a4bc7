"""Reward functions for the weight trainer (MemTier §3.5): episodes from logged runs and from LongMemEval.

Both sources give ``reward(w, i) -> ±1`` for :func:`memtier_plugin.learning.ppo.train`,
and both make the reward depend on the sampled weights ``w``, so a group of
samples of one item can disagree and carry a gradient (no zero-variance trap).

**Traces** (``memtier train``, the default). A run is an episode when the
workspace logged (a) its retrieval traces — the delivered candidates with the
five signal values they had then, ``memory/traces/<agent>/<day>.jsonl`` kind
``trace`` — (b) its outcome, kind ``run_end`` (agent_end's ``success``), and
(c) attribution records (``cw_update`` with its ``run_id`` in the episodic
ledgers). s = +1 if the run succeeded, −1 if it failed. The run's *acted-on*
entries are those whose net credit in this run has the run's sign (what
helped a successful run; what was behind a failed one). The episode re-scores
the logged candidates with w (S = w·φ, the logged φ) and

    reward(w) = s   if the top-scored candidate is an acted-on entry,
               −s   otherwise.

So weights that would again lead with what helped are rewarded, and weights
that would again lead with what failed are punished. Runs without an outcome,
with fewer than two candidates or with no acted-on entry say nothing about w
and are left out (counted in :class:`TraceStats`).

**LongMemEval** (``memtier train --longmemeval``). MemTier eq. 2 with the
retrieval evidence as the task: every question's haystack is written once
through the ledger (:mod:`.evaluation.runner`) and ranked with the sampled w;
reward +1 when every gold session is among the top 5 ranked sessions
(session recall_all@5 of the official protocol), −1 otherwise.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..store import traces
from ..store.episodic import Ledger, iter_records
from ..store.records import update_problem
from ..recall.signals import SIGNAL_NAMES

log = logging.getLogger(__name__)


# ---- traces -------------------------------------------------------------------
@dataclass
class TraceEpisode:
    run_id: str
    agent_id: str
    success: bool
    ids: list[str]
    signals: np.ndarray  # (candidates, 5) in SIGNAL_NAMES order
    acted_on: set[int]  # indices into ids

    @property
    def sign(self) -> float:
        return 1.0 if self.success else -1.0


@dataclass
class TraceStats:
    runs: int = 0  # runs with at least one trace
    with_outcome: int = 0  # ... and a run_end record
    episodes: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


def load_trace_episodes(memory_root: Path | str) -> tuple[list[TraceEpisode], TraceStats]:
    """Join traces, run outcomes and attribution records of one workspace into episodes."""
    root = Path(memory_root)
    delivered: dict[str, dict[str, list[float]]] = defaultdict(dict)  # run -> id -> signal row
    agent_of: dict[str, str] = {}
    outcome: dict[str, bool] = {}
    for rec in traces.iter_traces(root):
        if rec.get("run_id"):
            run = rec["run_id"]
            if rec.get("kind") == "trace":
                agent_of.setdefault(run, rec.get("agent_id", ""))
                for row in rec.get("delivered") or []:
                    sig = row.get("signals") or {}
                    if isinstance(row.get("id"), str) and row["id"] not in delivered[run]:
                        delivered[run][row["id"]] = [float(sig.get(k, 0.0)) for k in SIGNAL_NAMES]
            elif rec.get("kind") == "run_end":
                outcome[run] = bool(rec.get("success"))
    credit: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    ledger = Ledger(root)
    for path in ledger.files():
        for rec, _, problem in iter_records(path):
            if not problem and rec.get("kind") == "cw_update" and isinstance(rec.get("run_id"), str) \
                    and update_problem(rec) is None:
                credit[rec["run_id"]][rec["entry_id"]] += float(rec["delta"])
    stats = TraceStats(runs=len(delivered))
    episodes = []
    for run in sorted(delivered):
        rows = delivered[run]
        if run not in outcome:
            stats.skip("no run_end (outcome) logged")
            continue
        stats.with_outcome += 1
        if len(rows) < 2:
            stats.skip("fewer than 2 candidates")
            continue
        success = outcome[run]
        s = 1.0 if success else -1.0
        ids = list(rows)
        acted = {i for i, e in enumerate(ids) if credit[run].get(e, 0.0) * s > 0}
        if not acted:
            stats.skip("no entry credited with the run's sign")
            continue
        episodes.append(TraceEpisode(run, agent_of.get(run, ""), success, ids,
                                     np.array([rows[e] for e in ids], dtype=float), acted))
    stats.episodes = len(episodes)
    return episodes, stats


def top_index(scores: np.ndarray) -> int:
    """The best candidate; ties go to the earlier (logged) position."""
    return int(np.flatnonzero(scores >= scores.max() - 1e-12)[0])


def trace_reward(episodes: list[TraceEpisode]) -> Callable[[np.ndarray, int], float]:
    """reward(w, i) = s if the top candidate under w was acted on in run i, else −s."""

    def reward(w: np.ndarray, i: int) -> float:
        ep = episodes[i]
        top = top_index(ep.signals @ np.asarray(w, dtype=float))
        return ep.sign if top in ep.acted_on else -ep.sign

    return reward


# ---- LongMemEval ---------------------------------------------------------------
class _MemoEmbedder:
    """Wraps an embedder so a repeated query is embedded once (same name: same vector cache)."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._memo: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        if len(texts) == 1:
            t = texts[0]
            if t not in self._memo:
                self._memo[t] = np.asarray(self.inner.embed([t]))[0]
            return self._memo[t][None, :]
        return self.inner.embed(texts)


class _MemoReranker:
    """Wraps a re-ranker so each (query, text) pair is scored once: every sampled weight vector
    re-ranks the same question's head again, and most of it is the same entries."""

    def __init__(self, inner):
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        self._memo: dict[tuple[str, str], float] = {}

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if (query, t) not in self._memo]
        if new:
            for t, logit in zip(new, np.asarray(self.inner.score(query, new), dtype=np.float64).tolist()):
                self._memo[(query, t)] = logit
        return np.array([self._memo[(query, t)] for t in texts], dtype=np.float64)


@dataclass
class _Built:
    question: object
    retriever: object
    now: float
    gold: set[str]
    official: dict[str, str]  # raw session id -> official id


class LongMemEvalEnv:
    """Every question's workspace built once; rewards and recall with any weight vector.

    ``backends`` (:func:`..backends.choose` of the user's config) gives the embedder and
    re-ranker every question shares; ``config_path`` and ``flags`` give each question's
    workspace the user's retrieval settings, as ``memtier eval`` does.
    """

    PROJECT = "longmemeval"

    def __init__(self, questions: list, *, backends=None, config_path: str | None = None,
                 flags: dict | None = None, cache_dir: Path | None = None, workdir: Path | None = None,
                 progress: Callable[[int, int], None] | None = None):
        from dataclasses import replace

        from ..evaluation.longmemeval import corpus
        from ..evaluation.runner import Options, _ts, open_retriever, question_sessions, write_sessions

        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="memtier-train-"))
        emb = ce = None
        if backends is not None:
            emb = _MemoEmbedder(backends.embedder) if backends.embedder is not None else None
            ce = _MemoReranker(backends.reranker) if backends.reranker is not None else None
            backends = replace(backends, embedder=emb, reranker=ce)
        cache = Path(cache_dir) if cache_dir else self.workdir / "vectors"
        self.opts = Options(flags=dict(flags or {}), config_path=config_path, backends=backends,
                            vector_cache=cache if emb is not None else None)
        self.items: list[_Built] = []
        for n, q in enumerate(questions):
            root = self.workdir / "ws" / q.question_id / "memory"
            shutil.rmtree(root.parent, ignore_errors=True)
            write_sessions(root, question_sessions(q), self.PROJECT, self.opts)
            retriever = open_retriever(root, self.opts)
            if emb is not None:  # embed the haystack now, not inside the first sampled episode
                retriever.vectors(retriever.episodic)
                retriever.vectors(retriever.semantic)
            docs = corpus(q, "session")
            self.items.append(_Built(q, retriever, _ts(q.question_date), {d.id for d in docs if "answer" in d.id},
                                     {d.raw_id: d.id for d in docs}))
            if progress:
                progress(n + 1, len(questions))

    def __len__(self) -> int:
        return len(self.items)

    def ranked_sessions(self, w, i: int, k: int = 5) -> list[str]:
        """The first ``k`` distinct sessions (official ids) of question i's ranking with weights w."""
        from ..evaluation.runner import doc_sessions

        b = self.items[i]
        ranked = b.retriever.rank(b.question.question, agents=None, project=self.PROJECT, now=b.now,
                                  depth=self.opts.depth, weights=[float(x) for x in w])
        out: list[str] = []
        for idx, doc in ranked.docs:
            for s in doc_sessions(idx, doc):
                s = b.official.get(s, s)
                if s not in out:
                    out.append(s)
                    if len(out) == k:
                        return out
        return out

    def hit(self, w, i: int) -> bool:
        """Session recall_all@5: every gold session in the top 5."""
        b = self.items[i]
        return bool(b.gold) and b.gold <= set(self.ranked_sessions(w, i, 5))

    def reward(self, w, i: int) -> float:
        return 1.0 if self.hit(w, i) else -1.0

    def recall_all_at_5(self, w, indices) -> float:
        indices = list(indices)
        return float(np.mean([self.hit(w, i) for i in indices])) if indices else float("nan")

    def close(self) -> None:
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            shutil.rmtree(self.workdir / "ws", ignore_errors=True)


# ---- choosing what to keep ----------------------------------------------------------
def choose_iterate(result, evaluate: Callable[[np.ndarray], float]) -> dict:
    """The weights to keep: the best-evaluated of PPO's iterates, never worse than w0.

    Candidates are the policy mean after every batch (the last one is PPO's
    final answer), each scored by ``evaluate`` (the deterministic mean reward
    on the training items). The final iterate is kept unless an earlier one
    scores strictly higher; if every iterate scores below w0, w0 is kept.
    """
    frozen = result.frozen
    w0 = np.clip(result.weights_before, 0.0, 1.0)
    base = evaluate(w0)
    cands: list[tuple[str, np.ndarray]] = []
    for h in result.history:
        mu = np.clip(np.asarray(h["mu"], dtype=float), 0.0, 1.0)
        mu[frozen] = result.weights_before[frozen]
        cands.append((f"epoch {h['epoch'] + 1} batch {h['batch'] + 1}", mu))
    scored: list[tuple[float, int, str, np.ndarray]] = []
    memo: dict[bytes, float] = {}
    for order, (name, mu) in enumerate(cands):
        key = np.round(mu, 12).tobytes()
        if key not in memo:
            memo[key] = evaluate(mu)
        scored.append((memo[key], order, name, mu))
    final = scored[-1] if scored else (base, -1, "w0", w0)
    best = max(scored, key=lambda t: (t[0], t[1])) if scored else final
    chosen = final if best[0] <= final[0] else best
    rule = "final iterate" if chosen is final else f"best evaluated iterate ({chosen[2]})"
    if chosen[0] < base:
        chosen, rule = (base, -1, "w0", w0), "w0 (every iterate scored below it)"
    return {"weights": chosen[3], "mean_reward": chosen[0], "rule": rule, "w0_mean_reward": base,
            "final_mean_reward": final[0], "candidates": len(scored)}
