"""Training the intervention policy with group-relative advantages (GRPO) and Pulse's reward.

Each training row is one proposed call: its features (:func:`policy.features`,
computed by a real pre_tool) and its label — ``violate`` (the call goes
against the standing evidence: intervening is the correct action) or
``follow`` (the evidence applies and the call agrees with it: a supplement is
the correct action). Pulse's reward (§3.4, §4.4): +1 for the correct action,
−1 for a wrong intervention, 0 for any other error.

GRPO: for each call in a batch, ``group_size`` actions are sampled from the
current policy; each sample's advantage is its reward minus the group's mean,
divided by the group's standard deviation (a group whose samples all earned the
same teaches nothing); the policy-gradient step raises the log-probability of
the samples with a positive advantage (Adam, a small L2 penalty). Sampling,
batching and initialisation all draw from one ``numpy`` generator seeded by
``seed``: the same rows and seed give the same policy, bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from dataclasses import asdict, dataclass

import numpy as np

from ..intervention.policy import ACTIONS, FEATURES, KNOWN_FEATURES, Policy

LABELS = ("follow", "violate")
CORRECT = {"follow": "supplement", "violate": "intervene"}


def reward(action: str, label: str) -> float:
    """Pulse: +1 the correct action, −1 a wrong intervention, 0 any other error."""
    if action == CORRECT[label]:
        return 1.0
    return -1.0 if action == "intervene" else 0.0


@dataclass
class GRPOConfig:
    seed: int = 0
    epochs: int = 150
    batch_size: int = 64
    group_size: int = 8
    lr: float = 0.05
    l2: float = 1e-3
    balance: bool = True  # weigh each label's calls equally (the dev options are 3 violating : 1 following)
    hidden: int = 0  # units of one tanh hidden layer (0: linear)
    features: tuple = FEATURES  # the features the policy reads (any of policy.KNOWN_FEATURES)


def _matrix(rows: Sequence[dict], names: Sequence[str] = FEATURES) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([[r["features"].get(k, 0.0) for k in names] for r in rows], dtype=float).reshape(-1, len(names))
    r = np.array([[reward(a, row["label"]) for a in ACTIONS] for row in rows], dtype=float).reshape(-1, len(ACTIONS))
    return x, r


def train(rows: Sequence[dict], cfg: GRPOConfig, embedder: str = "") -> tuple[Policy, dict]:
    """A policy from ``rows`` ({"features": dict, "label": follow|violate}); (policy, training summary)."""
    names = tuple(cfg.features)
    unknown = [n for n in names if n not in KNOWN_FEATURES]
    if unknown or not names or len(set(names)) != len(names):
        raise ValueError(f"features must be distinct names among {', '.join(KNOWN_FEATURES)} (got {', '.join(names)})")
    rows = [r for r in rows if r.get("features") is not None]
    if not rows:
        raise ValueError("no training rows with features (did any call find standing evidence?)")
    missing = sorted({n for n in names for r in rows if n not in r["features"]})
    if missing:
        raise ValueError(f"the traced calls have no {', '.join(missing)} (traced by an older memtier, or without "
                         "the cross-encoder or the judge): trace them again")
    x, rewards = _matrix(rows, names)
    labels = np.array([r["label"] for r in rows])
    counts = {lab: int((labels == lab).sum()) for lab in LABELS}
    weight = np.array([len(rows) / (len(LABELS) * counts[lab]) if cfg.balance else 1.0 for lab in labels])
    rng = np.random.default_rng(cfg.seed)
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    std = np.where(std > 1e-6, std, 1.0)
    xs = (x - mean) / std
    n, f = xs.shape
    k = len(ACTIONS)
    width = cfg.hidden or f
    params = [rng.normal(0.0, 0.01, size=(k, width)), np.zeros(k)]
    if cfg.hidden:
        params += [rng.normal(0.0, 1.0 / np.sqrt(f), size=(cfg.hidden, f)), np.zeros(cfg.hidden)]
    m = [np.zeros_like(q) for q in params]
    v = [np.zeros_like(q) for q in params]
    step = 0
    history = []
    for _epoch in range(cfg.epochs):
        order = rng.permutation(n)
        epoch_reward = 0.0
        for lo in range(0, n, cfg.batch_size):
            idx = order[lo:lo + cfg.batch_size]
            w, b = params[0], params[1]
            h = np.tanh(xs[idx] @ params[2].T + params[3]) if cfg.hidden else xs[idx]
            z = h @ w.T + b
            z -= z.max(axis=1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(axis=1, keepdims=True)
            # a group of sampled actions per call (inverse-CDF sampling: one uniform draw per sample)
            u = rng.random((len(idx), cfg.group_size))
            acts = (u[:, :, None] > np.cumsum(p, axis=1)[:, None, :]).sum(axis=2).clip(0, k - 1)
            r = np.take_along_axis(rewards[idx], acts, axis=1)
            epoch_reward += float(r.sum())
            adv = (r - r.mean(axis=1, keepdims=True)) / (r.std(axis=1, keepdims=True) + 1e-8)
            # d/dz of Σ_g A_g log p(a_g) = Σ_g A_g (onehot(a_g) − p)
            onehot = np.eye(k)[acts]  # (B, G, K)
            gz = weight[idx, None] * (adv[:, :, None] * (onehot - p[:, None, :])).sum(axis=1) \
                / (len(idx) * cfg.group_size)
            grads = [gz.T @ h - cfg.l2 * w, gz.sum(axis=0)]
            if cfg.hidden:  # back through tanh
                gpre = (gz @ w) * (1.0 - h * h)
                grads += [gpre.T @ xs[idx] - cfg.l2 * params[2], gpre.sum(axis=0)]
            step += 1
            for i, (param, g) in enumerate(zip(params, grads)):  # Adam, ascent
                m[i] = 0.9 * m[i] + 0.1 * g
                v[i] = 0.999 * v[i] + 0.001 * g * g
                mh = m[i] / (1 - 0.9 ** step)
                vh = v[i] / (1 - 0.999 ** step)
                param += cfg.lr * mh / (np.sqrt(vh) + 1e-8)
        history.append(epoch_reward / (n * cfg.group_size))
    policy = Policy(mean, std, params[0], params[1], embedder, names=names,
                    hidden_w=params[2] if cfg.hidden else None, hidden_b=params[3] if cfg.hidden else None)
    greedy = policy.probabilities(x).argmax(axis=1)
    summary = {"rows": n, "labels": counts,
               "config": {**asdict(cfg), "features": list(names)}, "mean_sampled_reward_first_epoch": round(history[0], 4),
               "mean_sampled_reward_last_epoch": round(history[-1], 4),
               "greedy_train_reward": round(float(rewards[np.arange(n), greedy].mean()), 4)}
    return policy, summary


# ---- labelled calls from real runs -----------------------------------------------------------
def rows_from_traces(memory_root) -> tuple[list[dict], dict[str, int]]:
    """Labelled calls from a workspace's real runs: (rows, skipped by reason).

    Each pre_tool ``decision`` trace that carries the policy's features (a run with ``scheduling.policy``
    set traces them) is joined by its ``tool_call_id`` to what happened to the call — its ``post_tool``
    entry in the episodic ledger (ran, and whether it failed) — and by its run to the run's outcome
    (``run_end``). The label says what the right action would have been, by Pulse's reading of outcomes:

    * let through (silent or supplement), the call **failed** with standing evidence at hand and the **run
      failed**: ``violate`` (memory should have held it);
    * let through, the call **succeeded** and the **run succeeded**: ``follow``;
    * **held**, and the run still **succeeded** (the agent replanned): ``violate``;
    * held, yet the call **ran and succeeded** (the host or the user let it through) and the run
      succeeded: ``follow`` (the hold was a wrong interruption).

    Anything else (no outcome logged, a failed call in a run that recovered, a held call in a failed
    run) says too little and is skipped, with its reason counted.
    """
    from ..store import traces
    from ..store.episodic import Ledger, iter_records

    root = Path(memory_root)
    decisions: list[dict] = []
    outcome: dict[str, bool] = {}
    for rec in traces.iter_traces(root):
        if rec.get("kind") == "decision":
            decisions.append(rec)
        elif rec.get("kind") == "run_end" and rec.get("run_id"):
            outcome[rec["run_id"]] = bool(rec.get("success"))
    ran: dict[tuple[str, str], bool] = {}  # (run, tool_call_id) -> the call succeeded
    ledger = Ledger(root)
    for path in ledger.files():
        for rec, _, problem in iter_records(path):
            prov = rec.get("provenance") if not problem and isinstance(rec, dict) else None
            if isinstance(prov, dict) and prov.get("source") == "post_tool" and prov.get("tool_call_id"):
                ran[(str(prov.get("run_id", "")), str(prov["tool_call_id"]))] = bool(prov.get("success"))
    rows: list[dict] = []
    skipped: dict[str, int] = {}

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1

    for rec in decisions:
        traced = rec.get("features") if isinstance(rec.get("features"), dict) else {}
        feats = traced.get("policy_features")
        if not isinstance(feats, dict) or not any(k in feats for k in KNOWN_FEATURES):
            skip("no policy features traced (a run without scheduling.policy, or the fixed rule held it)")
            continue
        if traced.get("explicit_choice"):
            skip("an explicit choice in the task (silent whatever the policy says)")
            continue
        run, call = rec.get("run_id", ""), rec.get("tool_call_id", "")
        if run not in outcome:
            skip("no run_end (outcome) logged")
            continue
        won, result = outcome[run], ran.get((run, call))
        held = rec.get("action") == "intervene"
        if not held and result is False and rec.get("evidence") and not won:
            label = "violate"
        elif not held and result is True and won:
            label = "follow"
        elif held and result is None and won:
            label = "violate"
        elif held and result is True and won:
            label = "follow"
        else:
            skip("outcome says too little (a failed call in a run that recovered, a held call in a failed run, "
                 "or no post_tool for a call let through)")
            continue
        rows.append({"topic": "traces", "features": {k: float(v) for k, v in feats.items()
                                                      if k in KNOWN_FEATURES and isinstance(v, (int, float))},
                     "label": label, "action": rec.get("action"), "run_id": run, "tool": rec.get("tool", "")})
    return rows, skipped
