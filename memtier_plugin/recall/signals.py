"""The five retrieval signals as pure functions, and one explainable fusion (MemTier eq. 1).

    S = w_sem·φsem + w_bm25·φbm25 + w_decay·φdecay + w_cw·φcw  +  w_tier·(μ − 1)

Every φ is in [0, 1], so no signal's raw scale can drown another (MemTier's
limitation 2): BM25 is divided by the larger of the best raw score among the
candidates and the bypass threshold, so a weak best match stays weak instead of
being stretched to 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..vocabulary import SIGNALS, TIERS

SIGNAL_NAMES = SIGNALS
DAY = 86400.0


def phi_bm25(raw: np.ndarray, floor: float = 2.0) -> np.ndarray:
    """Raw BM25 → [0, 1]: raw / max(best raw, floor)."""
    raw = np.asarray(raw, dtype=np.float64)
    if raw.size == 0:
        return raw
    return np.clip(raw / max(float(raw.max()), floor, 1e-12), 0.0, 1.0)


def phi_decay(age_days: np.ndarray, lam: float, bypass: np.ndarray | None = None) -> np.ndarray:
    """e^(−λ·Δt) with Δt in days (future timestamps count as age 0); 1.0 where bypassed."""
    age = np.maximum(np.asarray(age_days, dtype=np.float64), 0.0)
    out = np.exp(-lam * age)
    if bypass is not None:
        out = np.where(bypass, 1.0, out)
    return out


def decay_bypass(raw_bm25: np.ndarray, threshold: float, from_stage1: np.ndarray | None = None) -> np.ndarray:
    """MemTier's bypass rule: raw BM25 > threshold, or the entry's session was chosen by stage 1."""
    mask = np.asarray(raw_bm25) > threshold
    if from_stage1 is not None:
        mask = mask | np.asarray(from_stage1, dtype=bool)
    return mask


def phi_cw(cw: np.ndarray) -> np.ndarray:
    """Cognitive weight CW ∈ [−1, 1] → (CW + 1)/2 ∈ [0, 1]."""
    return (np.clip(np.asarray(cw, dtype=np.float64), -1.0, 1.0) + 1.0) / 2.0


def tier_bonus(tier_codes: np.ndarray, multipliers: dict[str, float]) -> np.ndarray:
    """μ − 1 for each entry's tier code (0 episodic, 1 semantic, 2 procedural)."""
    mu = np.array([multipliers[t] for t in TIERS], dtype=np.float64)
    return mu[np.asarray(tier_codes, dtype=np.int64)] - 1.0


def phi_sem(cosine: np.ndarray) -> np.ndarray:
    """Cosine similarity of unit vectors → [0, 1], negatives (unrelated) as 0."""
    return np.clip(np.asarray(cosine, dtype=np.float64), 0.0, 1.0)


@dataclass
class Fused:
    """Scores and every signal's value, so each hit can explain itself."""

    scores: np.ndarray
    signals: dict[str, np.ndarray]
    weights: dict[str, float]

    def explain(self, i: int) -> dict[str, dict[str, float]]:
        """Per signal: value, weight, contribution (tier: value is μ − 1)."""
        return {name: {"value": float(self.signals[name][i]), "weight": self.weights[name],
                       "contribution": float(self.signals[name][i] * self.weights[name])}
                for name in SIGNAL_NAMES}


def fuse(weights, sem: np.ndarray, bm25: np.ndarray, decay: np.ndarray, cw: np.ndarray,
         tier: np.ndarray) -> Fused:
    """S = w·[φsem, φbm25, φdecay, φcw] + w_tier·(μ − 1); ``weights`` in SIGNAL_NAMES order."""
    w = dict(zip(SIGNAL_NAMES, (float(x) for x in weights)))
    signals = {"sem": sem, "bm25": bm25, "decay": decay, "cw": cw, "tier": tier}
    scores = (w["sem"] * sem + w["bm25"] * bm25 + w["decay"] * decay + w["cw"] * cw + w["tier"] * tier)
    return Fused(np.asarray(scores, dtype=np.float64), signals, w)
