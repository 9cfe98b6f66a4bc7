"""Cross-encoder re-ranking of the head of a ranking (optional, off by default).

The five-signal fusion scores every candidate cheaply; a cross-encoder reads
the query and one candidate *together* and judges how well the candidate
answers it, which neither BM25 nor a bi-encoder (φsem) can. It is far too slow
for the whole pool, so it re-orders only the best ``rerank.top_n`` (100) episodic
entries, among the places they already hold:

    order(head) = sort by  w / (k + rank_ce) + (1 − w) / (k + rank_fused)

(reciprocal-rank fusion, ranks from 0, ``w`` = ``rerank.weight``, ``k`` = ``rerank.k``). Semantic
facts keep their places: they are short, already distilled statements whose
fused score stage 1 relies on, and in a conversation's memory they can fill
two thirds of the head, which would leave the cross-encoder few raw entries to
judge. An entry that moves takes the score of the place it moves into, so the
list stays ordered and ``--explain`` reads top to bottom.

The model itself (loading, scoring pairs) is :mod:`memtier_plugin.models.cross_encoder`.
"""

from __future__ import annotations

import numpy as np

from ..models.cross_encoder import (  # noqa: F401  (where callers found the model before it had its own module)
    MODEL_NAME, SETUP_HINT, CrossEncoder, RerankerUnavailable, model_folder,
)

#: reciprocal-rank constant, the default of ``rerank.k``. Small k lets the top of either
#: list count most; how 3 was chosen is in docs/evaluation.md.
RANK_K = 3.0


def minmax(x: np.ndarray) -> np.ndarray:
    """Scale to [0, 1] over the array; a constant array maps to all ones."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return x
    span = float(x.max() - x.min())
    return np.ones_like(x) if span <= 0 else (x - x.min()) / span


def rerank_order(logits: np.ndarray, weight: float, k: float = RANK_K) -> tuple[np.ndarray, np.ndarray]:
    """Re-order a head that arrives in fused order by reciprocal-rank fusion:

        weight / (k + rank by logits) + (1 − weight) / (k + fused rank)     (ranks from 0)

    Ranks, not scores, are combined, so neither side's scale matters (a very
    confident logit cannot swamp the fusion, nor the fusion's spread the logits).
    Returns ``(order, ce)``: the permutation of the head and the min–max scaled
    cross-encoder value at each new position. Ties keep the fused order.
    """
    logits = np.asarray(logits, dtype=np.float64)
    n = len(logits)
    by_ce = np.empty(n, dtype=np.float64)
    by_ce[np.lexsort((np.arange(n), -logits))] = np.arange(n)
    comb = weight / (k + by_ce) + (1.0 - weight) / (k + np.arange(n))
    order = np.lexsort((np.arange(n), -comb))
    return order, minmax(logits)[order]
