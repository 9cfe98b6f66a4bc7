"""Reward functions for the weight trainer (MemTier §3.5): episodes from logged runs.

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

**LongMemEval** (``memtier train --longmemeval``) is a reward source of the
evaluation room: :class:`memtier_plugin.evaluation.longmemeval_env.LongMemEvalEnv`.
"""

from __future__ import annotations

import logging
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
