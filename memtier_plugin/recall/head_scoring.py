"""The cross-encoder's logits for the head of a ranking, within a time budget.

Re-ranking (:mod:`.rerank`) reads the query and each of the best episodic
entries together, at 10-30 ms a pair on two cores: a hook cannot afford the
whole head. :class:`HeadScorer` scores the longest prefix of the head that
``rerank.budget_ms`` allows (Foresight's background preparations have their own
budget), at the time per pair it has measured, a pair's time taken as
proportional to its characters (a long query or long entries fit fewer pairs).
Logits are cached per (query, entry id): ledger entries never change, so a
prompt asked again, or prepared by Foresight before it was asked, costs nothing.
Any failure of the model keeps the fused order (warned once).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import OrderedDict
from typing import Callable

import numpy as np

log = logging.getLogger(__name__)

RERANK_BATCH = 16  # pairs per cross-encoder call when re-ranking within a budget
RERANK_BATCH_BACKGROUND = 8  # the same in the background: short calls, so a hook's recall soon has the CPU
PRIOR_PAIR_MS = 10.0  # the cross-encoder's time per pair assumed until the first call measures it


class LogitCache:
    """Cross-encoder logits per (query, entry id), least recently used dropped beyond ``size`` (0: off)."""

    def __init__(self, size: int):
        self.size = size
        self._d: OrderedDict[bytes, float] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(query: str, entry: str) -> bytes:
        return hashlib.blake2b(query.encode() + b"\x00" + entry.encode(), digest_size=16).digest()

    def get(self, query: str, entry: str) -> float | None:
        if not self.size:
            return None
        key = self._key(query, entry)
        with self._lock:
            v = self._d.get(key)
            if v is not None:
                self._d.move_to_end(key)
            return v

    def put(self, query: str, entry: str, value: float) -> None:
        if not self.size:
            return
        with self._lock:
            self._d[self._key(query, entry)] = value
            while len(self._d) > self.size:
                self._d.popitem(last=False)


class HeadScorer:
    """Scores (query, entry) pairs of a ranking's head with ``reranker.score(query, texts)`` within a budget."""

    def __init__(self, config, yield_to_foreground: Callable[[], None] = lambda: None):
        self.config = config  # the retriever's: rerank.budget_ms is read at each call
        self.reranker = None
        self.failed = False
        self.logits = LogitCache(config.rerank.cache_size)
        self.pair_ms: float | None = None  # measured time per pair
        self.char_ms: float | None = None  # the same per character of query + entry (a pair's time ∝ its length)
        self._yield = yield_to_foreground  # a background preparation's checkpoint between batches

    def set(self, reranker) -> None:
        self.reranker = reranker
        self.failed = False

    def affordable(self, query: str, ids: list[str], budget_ms: float | None = None) -> int:
        """How many of ``ids`` (in order) the budget could score: those already cached cost nothing, the rest
        take the measured time per pair (all of them without a budget)."""
        budget = self.config.rerank.budget_ms if budget_ms is None else budget_ms
        if budget <= 0:
            return len(ids)
        room = max(1, int(budget // (self.pair_ms or PRIOR_PAIR_MS)))
        n = 0
        for key in ids:
            if self.logits.get(query, key) is None:
                if room == 0:
                    break
                room -= 1
            n += 1
        return n

    def score(self, query: str, ids: list[str], texts: list[str], budget_ms: float | None = None,
              background: bool = False) -> np.ndarray | None:
        """Cross-encoder logits of the longest prefix of the head that ``rerank.budget_ms`` (or ``budget_ms``,
        when given) allows (None: failed). ``texts`` may be shorter than ``ids``: nothing past them is scored.

        Cached (query, entry) logits cost nothing; the rest is scored in batches of at
        most :data:`RERANK_BATCH`, each as large as the time left allows at the measured
        time per pair (:data:`PRIOR_PAIR_MS` before the first call), stopping when not
        one more pair fits (0: no budget, the whole head in one call).
        """
        budget = self.config.rerank.budget_ms if budget_ms is None else budget_ms
        t0 = time.perf_counter()
        out = np.full(len(texts), np.nan)
        for i, key in enumerate(ids[:len(texts)]):
            v = self.logits.get(query, key)
            if v is not None:
                out[i] = v
        todo = np.flatnonzero(np.isnan(out))
        try:
            if len(todo) and budget > 0 and hasattr(self.reranker, "load"):
                self.reranker.load()  # loading the model is not a cost per pair
            start = 0
            step = RERANK_BATCH_BACKGROUND if background else RERANK_BATCH
            while start < len(todo):
                n = len(todo) - start if not background else min(step, len(todo) - start)
                if background and start:
                    self._yield()  # (time paused for a hook counts against the budget)
                if budget > 0:  # as many pairs as the time left allows, at most a batch
                    left = budget - (time.perf_counter() - t0) * 1000
                    n = self.pairs_within(left, query, [texts[i] for i in todo[start: start + step]])
                    if n < 1:
                        if self.pair_ms is None and start == 0:
                            n = 1  # the first call ever measures the model on one pair
                        else:
                            break
                chunk = todo[start: start + n]
                start += n
                c0 = time.perf_counter()
                logits = np.asarray(self.reranker.score(query, [texts[i] for i in chunk.tolist()]), dtype=np.float64)
                if logits.shape != (len(chunk),) or not np.all(np.isfinite(logits)):
                    raise ValueError(f"reranker returned {logits.shape} values for {len(chunk)} candidates")
                ms = (time.perf_counter() - c0) * 1000
                per = ms / len(chunk)
                self.pair_ms = per if self.pair_ms is None else 0.7 * self.pair_ms + 0.3 * per
                chars = ms / max(1, sum(len(query) + len(texts[i]) for i in chunk.tolist()))
                self.char_ms = chars if self.char_ms is None else 0.7 * self.char_ms + 0.3 * chars
                out[chunk] = logits
                for i, v in zip(chunk.tolist(), logits.tolist()):
                    self.logits.put(query, ids[i], v)
        except Exception as exc:  # a memory failure never breaks the turn
            if not self.failed:
                log.warning("re-ranking failed, fused order kept: %s", exc)
                self.failed = True
            return None
        n = int(np.argmax(np.isnan(out))) if np.isnan(out).any() else len(out)
        return out[:n]

    def pairs_within(self, left_ms: float, query: str, texts: list[str]) -> int:
        """How many of ``texts`` (in order) the cross-encoder scores within ``left_ms``: a pair's time is taken
        as proportional to its characters (query + entry; measured), before any measurement as
        :data:`PRIOR_PAIR_MS` a pair. A long query or long entries fit fewer pairs."""
        if self.char_ms is None:
            return min(len(texts), int(left_ms // (self.pair_ms or PRIOR_PAIR_MS)))
        n, spent = 0, 0.0
        for t in texts:
            spent += self.char_ms * (len(query) + len(t))
            if spent > left_ms:
                break
            n += 1
        return n
