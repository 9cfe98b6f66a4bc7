"""Benchmark evaluation: LongMemEval / LoCoMo loaders, official metrics, runners.

Any retriever plugs in as a ranking function:

- LongMemEval: ``rank_fn(question) -> (ranked_session_ids, ranked_turn_ids)``
  with raw ids (``session_id``, ``session_id_<n>``), run by
  :func:`evaluate_longmemeval`;
- LoCoMo: ``rank_fn(conversation, qa) -> ranked_dia_ids``, run by
  :func:`evaluate_locomo`.

The plain BM25 baselines of the data README go through the same scoring code
(:func:`bm25_baseline_longmemeval`, :func:`bm25_baseline_locomo`). Data is read
by path; nothing here ships benchmark files.
"""

from .locomo import CATEGORIES, bm25_baseline_locomo, evaluate_locomo
from .longmemeval import bm25_baseline_longmemeval, evaluate_longmemeval

__all__ = [
    "CATEGORIES",
    "bm25_baseline_locomo",
    "bm25_baseline_longmemeval",
    "evaluate_locomo",
    "evaluate_longmemeval",
]
