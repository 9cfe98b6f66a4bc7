"""Official retrieval metrics of LongMemEval and LoCoMo, re-implemented exactly.

LongMemEval (xiaowu0162/LongMemEval ``src/retrieval/eval_utils.py``):

- ``recall_any@k``: 1.0 if any gold id is in the top k, else 0.0 (no gold -> 0.0).
- ``recall_all@k``: 1.0 if every gold id is in the top k, else 0.0 (no gold ->
  1.0, as Python's ``all([])``; averaging rules decide whether such questions
  count).
- ``ndcg_any@k``: binary relevance (1 if the id is gold), DCG with the first
  rank undiscounted and rank ``i >= 2`` discounted by ``log2(i)``; the ideal DCG
  puts every relevant corpus document first. 0.0 when the corpus holds no gold.
- turn -> session: a turn ranking is scored at session level by walking down
  the ranking until ``k`` distinct session ids (turn id minus its last
  ``_<n>``) are seen, then scoring the turns above that cut with session
  labels (:func:`evaluate_retrieval_turn2session`).

LoCoMo (snap-research/locomo ``task_eval/evaluation.py``): ``recall_acc`` is the
fraction of a question's evidence dialogue ids present in the retrieved set.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence

__all__ = [
    "KS",
    "dcg",
    "ndcg_any",
    "recall_any",
    "recall_all",
    "evaluate_retrieval",
    "strip_turn_id",
    "turn2session_k",
    "sessions_from_turn_ranking",
    "evaluate_retrieval_turn2session",
    "recall_acc",
]

#: The cut-offs the official LongMemEval runner records.
KS: tuple[int, ...] = (1, 3, 5, 10, 30, 50)


def _dedupe(ids: Iterable[str]) -> list[str]:
    """Keep the first occurrence of each id (the official ranking is a permutation)."""
    seen: set[str] = set()
    out = []
    for i in ids:
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


def dcg(relevances: Sequence[float], k: int) -> float:
    """Discounted cumulative gain at k: rel[0] + sum(rel[i] / log2(i + 1)) for i >= 1."""
    rel = list(relevances)[:k]
    if not rel:
        return 0.0
    return float(rel[0]) + sum(float(r) / math.log2(i + 1) for i, r in enumerate(rel) if i >= 1)


def ndcg_any(
    ranked_ids: Sequence[str],
    gold: Collection[str],
    k: int,
    corpus_ids: Sequence[str] | None = None,
) -> float:
    """nDCG@k with binary relevance.

    The ideal ranking places every relevant *corpus* document first. Pass
    ``corpus_ids`` when a corpus id may repeat or the gold set may name ids
    outside the corpus; by default the number of relevant documents is
    ``len(set(gold))`` (true for LongMemEval session and turn corpora, whose
    gold is taken from the corpus ids themselves).
    """
    gold = set(gold)
    ranked = _dedupe(ranked_ids)
    actual = dcg([1 if d in gold else 0 for d in ranked[:k]], k)
    n_rel = sum(1 for c in corpus_ids if c in gold) if corpus_ids is not None else len(gold)
    ideal = dcg([1] * min(k, n_rel), k)
    if ideal == 0:
        return 0.0
    return actual / ideal


def recall_any(ranked_ids: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 if any gold id is in the top k (0.0 when there is no gold)."""
    top = set(_dedupe(ranked_ids)[:k])
    return float(any(g in top for g in gold))


def recall_all(ranked_ids: Sequence[str], gold: Collection[str], k: int) -> float:
    """1.0 if all gold ids are in the top k (1.0 when there is no gold, as upstream)."""
    top = set(_dedupe(ranked_ids)[:k])
    return float(all(g in top for g in gold))


def evaluate_retrieval(
    ranked_ids: Sequence[str],
    gold: Collection[str],
    k: int,
    corpus_ids: Sequence[str] | None = None,
) -> tuple[float, float, float]:
    """``(recall_any, recall_all, ndcg_any)`` at k, as upstream ``evaluate_retrieval``."""
    return (
        recall_any(ranked_ids, gold, k),
        recall_all(ranked_ids, gold, k),
        ndcg_any(ranked_ids, gold, k, corpus_ids),
    )


def strip_turn_id(turn_id: str) -> str:
    """``<session_id>_<turn_number>`` -> ``<session_id>`` (drop the last ``_`` part)."""
    return "_".join(turn_id.split("_")[:-1])


def turn2session_k(ranked_turn_ids: Sequence[str], k: int) -> int:
    """The official effective cut-off: the smallest ``e >= k`` whose top-``e`` turns
    cover ``k`` distinct sessions. When the ranking has fewer, upstream's loop stops
    at ``len(ranking) + 1`` (or stays at ``k`` when ``k > len(ranking)``).
    """
    ranked = _dedupe(ranked_turn_ids)
    sessions = {strip_turn_id(t) for t in ranked[:k]}
    eff = k
    while eff <= len(ranked) and len(sessions) < k:
        eff += 1
        if eff <= len(ranked):
            sessions.add(strip_turn_id(ranked[eff - 1]))
    return eff


def sessions_from_turn_ranking(ranked_turn_ids: Sequence[str], k: int) -> list[str]:
    """Distinct session ids (in order of first appearance) of the turns above the
    official turn->session cut-off, i.e. walking down until k sessions are seen.
    """
    ranked = _dedupe(ranked_turn_ids)
    return _dedupe(strip_turn_id(t) for t in ranked[: turn2session_k(ranked, k)])


def evaluate_retrieval_turn2session(
    ranked_turn_ids: Sequence[str],
    gold_turn_ids: Collection[str],
    k: int,
    corpus_turn_ids: Sequence[str] | None = None,
) -> tuple[float, float, float]:
    """Score a turn ranking at session level exactly as upstream
    ``evaluate_retrieval_turn2session``.

    Gold sessions are the stripped gold turn ids. Recall uses the distinct
    sessions of the top ``turn2session_k`` turns. nDCG is computed over the turn
    positions (each turn of a gold session has relevance 1), with the ideal
    counting every corpus turn of a gold session; ``corpus_turn_ids`` defaults
    to the ranking itself (pass it when the ranking is partial).
    """
    ranked = _dedupe(ranked_turn_ids)
    gold_sessions = {strip_turn_id(t) for t in gold_turn_ids}
    eff = turn2session_k(ranked, k)
    top = {strip_turn_id(t) for t in ranked[:eff]}
    r_any = float(any(g in top for g in gold_sessions))
    r_all = float(all(g in top for g in gold_sessions))
    corpus = ranked if corpus_turn_ids is None else list(corpus_turn_ids)
    rel = [1 if strip_turn_id(t) in gold_sessions else 0 for t in ranked[:eff]]
    n_rel = sum(1 for t in corpus if strip_turn_id(t) in gold_sessions)
    ideal = dcg([1] * min(eff, n_rel), eff)
    nd = dcg(rel, eff) / ideal if ideal else 0.0
    return r_any, r_all, nd


def recall_acc(retrieved_ids: Collection[str], evidence_ids: Sequence[str]) -> float:
    """LoCoMo ``recall_acc``: fraction of evidence ids present in the retrieved set.

    Upstream scores a question without evidence as 1.0; callers that want to
    exclude such questions (and malformed ids) filter before calling.
    """
    if not evidence_ids:
        return 1.0
    got = set(retrieved_ids)
    return sum(1 for e in evidence_ids if e in got) / len(evidence_ids)
