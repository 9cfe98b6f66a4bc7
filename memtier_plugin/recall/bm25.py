"""Incremental Okapi BM25 over numpy (MemTier §3.2).

Layout. Postings live in a CSR "base" (``indptr`` per term id; doc ids int32,
ascending within a term; tf uint16, clipped at 65535 where BM25 has long
saturated) plus a "tail": per-term growable arrays for documents appended one
at a time. Tail doc ids exceed every base doc id, so a term's base slice then
tail slice is still sorted. The tail is folded into the base once it holds half
as many postings as the base (amortised O(1) per posting), and on ``add_many``
and ``save``. Doc lengths are float32 (exact below 2**24 tokens).

Scoring is float32. ``score`` adds each query term occurrence's
``idf * tf*(k1+1) / (tf + k1*(1-b+b*dl/avgdl))`` over its postings. With
``candidates`` it never walks a posting list: it binary-searches the candidates
in each list (or the list in the candidates, whichever is shorter). Ranking
the matches is the retriever's job (the fusion, not BM25 alone, orders them).

Not thread-safe: callers serialise writers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import chain
from pathlib import Path

import numpy as np

from ..store import jsonl
from ..store.files import atomic_write
from ..errors import SearchIndexError

IDF_VARIANTS = ("okapi", "lucene")
TF_MAX = 65535
_BULK_CHUNK_TOKENS = 1 << 22  # add_many builds blocks of ~4M tokens: bounded peak memory
_MIN_TAIL = 1 << 16  # fold the tail into the base beyond max(this, base postings / 2)
_FILES = ("indptr", "postings_doc", "postings_tf", "doc_len")
_EMPTY_IDS = np.empty(0, np.int64)
_EMPTY_SCORES = np.empty(0, np.float32)


# --- pure scoring math --------------------------------------------------------


def idf_okapi_raw(df: np.ndarray, n_docs: int) -> np.ndarray:
    """Robertson–Spärck Jones idf, negative for terms in more than half the docs."""
    return np.log(n_docs - df + 0.5) - np.log(df + 0.5)


def idf_okapi(df: np.ndarray, n_docs: int, epsilon: float, average_idf: float) -> np.ndarray:
    """rank_bm25's BM25Okapi idf: negative values floored to ``epsilon * average_idf``."""
    idf = idf_okapi_raw(df, n_docs)
    return np.where(idf < 0, epsilon * average_idf, idf)


def idf_lucene(df: np.ndarray, n_docs: int) -> np.ndarray:
    """Lucene's idf ``log(1 + (N - df + 0.5)/(df + 0.5))``: always positive."""
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


def term_scores(tf: np.ndarray, doc_len: np.ndarray, weight: float, k1: float, b: float,
                avgdl: float) -> np.ndarray:
    """One query term's contribution per posting, float32: ``w*tf*(k1+1) / (tf + k1*(1-b+b*dl/avgdl))``."""
    tf = tf.astype(np.float32)
    den = doc_len * np.float32(k1 * b / avgdl)
    den += np.float32(k1 * (1.0 - b))
    den += tf
    tf *= np.float32(weight * (k1 + 1.0))
    tf /= den
    return tf


def accumulate(doc_parts: list, score_parts: list, n_docs: int, positive: bool = False):
    """Sum contributions from several posting lists: (ascending doc ids, scores). ``positive``:
    every contribution is > 0, so a doc matched iff its sum is non-zero."""
    if len(doc_parts) == 1:  # one posting list is already unique and sorted
        return doc_parts[0].astype(np.int64), score_parts[0]
    size = sum(map(len, doc_parts))
    if size == 0:
        return _EMPTY_IDS, _EMPTY_SCORES
    if size * 4 < n_docs:  # few postings: merge the sorted runs rather than touch all docs
        docs = np.concatenate(doc_parts)
        order = np.argsort(docs, kind="stable")  # stable: a doc's terms keep query order
        docs, scores = docs[order], np.concatenate(score_parts)[order]
        starts = _run_starts(docs)
        return docs[starts].astype(np.int64), np.add.reduceat(scores, starts)
    dense = np.zeros(n_docs, np.float32)
    for docs, scores in zip(doc_parts, score_parts):
        np.add.at(dense, docs, scores)
    if positive:
        ids = np.flatnonzero(dense)
    else:
        hit = np.zeros(n_docs, bool)
        for docs in doc_parts:
            hit[docs] = True
        ids = np.flatnonzero(hit)
    return ids, dense[ids]


def _run_starts(values: np.ndarray) -> np.ndarray:
    """Start positions of the runs of equal values in a sorted non-empty array."""
    change = np.ones(len(values), bool)
    change[1:] = values[1:] != values[:-1]
    return np.flatnonzero(change)


def _radix_argsort(keys: np.ndarray) -> np.ndarray:
    """Stable argsort of non-negative int32 keys as two 16-bit radix passes."""
    order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    if len(keys) and int(keys.max()) > 0xFFFF:
        order = order[np.argsort((keys[order] >> 16).astype(np.uint16), kind="stable")]
    return order


def _grow(arr: np.ndarray, size: int) -> np.ndarray:
    """``arr`` with room for ``size`` items (capacity doubles), contents kept."""
    if size <= len(arr):
        return arr
    out = np.zeros(max(size, 2 * len(arr), 16), arr.dtype)
    out[: len(arr)] = arr
    return out


class _Vocab(dict):
    """term -> dense id; looking up an unknown term assigns the next id."""

    def __init__(self, terms: Sequence[str] = ()):
        super().__init__(zip(terms, range(len(terms))))
        self.terms = list(terms)

    def __missing__(self, term: str) -> int:
        self[term] = tid = len(self.terms)
        self.terms.append(term)
        return tid


class _Tail:
    """Growable postings of one term for incrementally added docs."""

    __slots__ = ("docs", "tf", "n")

    def __init__(self) -> None:
        self.docs, self.tf, self.n = np.empty(4, np.int32), np.empty(4, np.uint16), 0

    def append(self, doc: int, tf: int) -> None:
        if self.n == len(self.docs):
            self.docs, self.tf = _grow(self.docs, self.n + 1), _grow(self.tf, self.n + 1)
        self.docs[self.n], self.tf[self.n] = doc, tf
        self.n += 1


# --- the index ------------------------------------------------------------------


class BM25Index:
    """An append-only BM25 index over token lists; doc ids are 0, 1, 2, ... in add order."""

    def __init__(self, k1: float = 1.5, b: float = 0.75, idf: str = "lucene", epsilon: float = 0.25):
        if idf not in IDF_VARIANTS:
            raise SearchIndexError(f"unknown idf variant {idf!r}; expected one of {IDF_VARIANTS}")
        self.k1, self.b, self.idf, self.epsilon = float(k1), float(b), idf, float(epsilon)
        self._vocab = _Vocab()
        self._df = np.zeros(0, np.int64)  # capacity >= vocabulary size
        self._dl = np.zeros(0, np.float32)  # capacity >= number of docs
        self._n = self._total_len = 0
        self._indptr = np.zeros(1, np.int64)  # base CSR; terms past its end have no base postings
        self._pdocs, self._ptf = np.empty(0, np.int32), np.empty(0, np.uint16)
        self._tail: dict[int, _Tail] = {}
        self._tail_nnz = 0
        self._avg_idf: float | None = None  # cached okapi average idf

    def __len__(self) -> int:
        return self._n

    @property
    def avgdl(self) -> float:
        return self._total_len / self._n if self._n else 0.0

    # -- building -----------------------------------------------------------------

    def add(self, tokens: Iterable[str]) -> int:
        """Append one document; it is searchable at once. Returns its doc id."""
        tokens = list(tokens)
        doc = self._n
        counts = Counter(map(self._vocab.__getitem__, tokens))
        self._df = _grow(self._df, len(self._vocab.terms))
        for tid, tf in counts.items():
            tail = self._tail.get(tid)
            if tail is None:
                tail = self._tail[tid] = _Tail()
            tail.append(doc, min(tf, TF_MAX))
            self._df[tid] += 1
        self._dl = _grow(self._dl, doc + 1)
        self._dl[doc] = len(tokens)
        self._n += 1
        self._total_len += len(tokens)
        self._tail_nnz += len(counts)
        self._avg_idf = None
        if self._tail_nnz > max(_MIN_TAIL, len(self._pdocs) // 2):
            self._merge_tail()
        return doc

    def add_many(self, docs: Iterable[Sequence[str]]) -> range:
        """Append many documents with a vectorised build; returns their doc ids."""
        docs = docs if isinstance(docs, list) else list(docs)
        first = self._n
        self._merge_tail()
        lens = np.fromiter(map(len, docs), np.int64, count=len(docs))
        ends = np.cumsum(lens)
        lo = 0
        while lo < len(docs):
            done = int(ends[lo - 1]) if lo else 0
            hi = max(lo + 1, int(np.searchsorted(ends, done + _BULK_CHUNK_TOKENS, "right")))
            self._add_block(docs[lo:hi], lens[lo:hi])
            lo = hi
        return range(first, self._n)

    def _add_block(self, docs: list, lens: np.ndarray) -> None:
        first, total = self._n, int(lens.sum())
        ids = np.fromiter(map(self._vocab.__getitem__, chain.from_iterable(docs)), np.int32, count=total)
        doc_of = np.repeat(np.arange(first, first + len(docs), dtype=np.int32), lens)
        order = _radix_argsort(ids)  # term-major, doc ascending within a term
        st, sd = ids[order], doc_of[order]
        new = np.ones(total, bool)
        new[1:] = (st[1:] != st[:-1]) | (sd[1:] != sd[:-1])
        starts = np.flatnonzero(new)
        tf = np.minimum(np.diff(starts, append=total), TF_MAX).astype(np.uint16)
        p_terms, p_docs = st[starts], sd[starts]
        del ids, doc_of, order, st, sd, new, starts  # free the block's temporaries before merging
        term_starts = _run_starts(p_terms) if len(p_terms) else np.empty(0, np.int64)
        terms, counts = p_terms[term_starts], np.diff(term_starts, append=len(p_terms))
        self._df = _grow(self._df, len(self._vocab.terms))
        self._df[terms] += counts
        self._dl = _grow(self._dl, first + len(docs))
        self._dl[first : first + len(docs)] = lens
        self._n += len(docs)
        self._total_len += total
        self._avg_idf = None
        self._merge_block(terms, counts, p_docs, tf)

    def _merge_tail(self) -> None:
        if not self._tail:
            return
        terms = sorted(self._tail)
        parts = [self._tail[t] for t in terms]
        counts = np.array([p.n for p in parts], np.int64)
        docs = np.concatenate([p.docs[: p.n] for p in parts])
        tf = np.concatenate([p.tf[: p.n] for p in parts])
        self._tail, self._tail_nnz = {}, 0
        self._merge_block(np.array(terms, np.int64), counts, docs, tf)

    def _merge_block(self, terms: np.ndarray, counts: np.ndarray, docs: np.ndarray, tf: np.ndarray) -> None:
        """Fold term-sorted postings of docs newer than every base doc into the base CSR."""
        n_terms = len(self._vocab.terms)
        base_counts = np.zeros(n_terms, np.int64)
        base_counts[: len(self._indptr) - 1] = np.diff(self._indptr)
        new_counts = base_counts.copy()
        new_counts[terms] += counts
        indptr = np.zeros(n_terms + 1, np.int64)
        np.cumsum(new_counts, out=indptr[1:])
        if len(self._pdocs) == 0:
            self._indptr, self._pdocs, self._ptf = indptr, docs.astype(np.int32), tf
            return
        # the block's postings go right after each term's base postings
        block_start = np.cumsum(counts) - counts
        pos = np.repeat(indptr[terms] + base_counts[terms] - block_start, counts) + np.arange(len(docs))
        keep = np.ones(indptr[-1], bool)
        keep[pos] = False
        # one array at a time, each old one released before the next is built: the
        # peak is old + new doc ids (not old + new of both), which bounds a 1M build
        new_docs = np.empty(indptr[-1], np.int32)
        new_docs[keep], new_docs[pos] = self._pdocs, docs
        self._pdocs = new_docs
        new_tf = np.empty(indptr[-1], np.uint16)
        new_tf[keep], new_tf[pos] = self._ptf, tf
        self._ptf = new_tf
        self._indptr = indptr

    # -- scoring ------------------------------------------------------------------

    def _segments(self, tid: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """The posting list of a term as (docs, tf) pieces in doc order."""
        segs = []
        if tid < len(self._indptr) - 1:
            lo, hi = self._indptr[tid], self._indptr[tid + 1]
            if hi > lo:
                segs.append((self._pdocs[lo:hi], self._ptf[lo:hi]))
        tail = self._tail.get(tid)
        if tail is not None:
            segs.append((tail.docs[: tail.n], tail.tf[: tail.n]))
        return segs

    def _query(self, query_tokens: Iterable[str]) -> tuple[list[int], np.ndarray]:
        """Known query term ids (first-occurrence order) and weights ``count * idf``."""
        counts = Counter(t for t in map(self._vocab.get, query_tokens) if t is not None)
        tids = list(counts)
        if not tids:
            return tids, np.empty(0)
        df = self._df[tids].astype(np.float64)
        if self.idf == "lucene":
            idf = idf_lucene(df, self._n)
        else:
            if self._avg_idf is None:
                self._avg_idf = float(idf_okapi_raw(self._df[: len(self._vocab.terms)], self._n).mean())
            idf = idf_okapi(df, self._n, self.epsilon, self._avg_idf)
        return tids, np.array([counts[t] for t in tids], np.float64) * idf

    def _contributions(self, tids: list[int], weights: np.ndarray) -> tuple[list, list]:
        """Every posting of the terms as parallel lists of (doc ids, contributions) arrays."""
        doc_parts, score_parts, avgdl = [], [], self.avgdl or 1.0
        for tid, w in zip(tids, weights):
            for docs, tf in self._segments(tid):
                doc_parts.append(docs)
                score_parts.append(term_scores(tf, np.take(self._dl, docs), w, self.k1, self.b, avgdl))
        return doc_parts, score_parts

    def _score_docs(self, tids: list[int], weights: np.ndarray, cands: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Scores of sorted unique ``cands`` and whether each matched any term."""
        cands = cands.astype(np.int32)  # the postings' dtype: searchsorted must not convert them
        total, hit = np.zeros(len(cands), np.float32), np.zeros(len(cands), bool)
        if not len(cands):
            return total, hit
        dl, avgdl = np.take(self._dl, cands), self.avgdl or 1.0
        for tid, w in zip(tids, weights):
            for docs, tf in self._segments(tid):
                if len(docs) <= len(cands):  # look the postings up in the candidates
                    pos = np.minimum(np.searchsorted(cands, docs), len(cands) - 1)
                    found = cands[pos] == docs
                    idx, tf = pos[found], tf[found]
                else:  # look the candidates up in the postings
                    pos = np.minimum(np.searchsorted(docs, cands), len(docs) - 1)
                    idx = np.flatnonzero(docs[pos] == cands)
                    tf = tf[pos[idx]]
                total[idx] += term_scores(tf, dl[idx], w, self.k1, self.b, avgdl)
                hit[idx] = True
        return total, hit

    def score(self, query_tokens: Iterable[str], candidates=None) -> tuple[np.ndarray, np.ndarray]:
        """Raw BM25 (float32) of every doc matching a query term, within ``candidates`` when
        given (an int array of doc ids); doc ids (int64) ascending."""
        tids, weights = self._query(query_tokens)
        if candidates is None:
            return accumulate(*self._contributions(tids, weights), self._n, bool(np.all(weights > 0)))
        cands = np.sort(np.asarray(candidates, np.int64).ravel())
        if not tids or not len(cands):
            return _EMPTY_IDS, _EMPTY_SCORES
        if cands[0] < 0 or cands[-1] >= self._n:
            raise SearchIndexError(f"candidate doc ids must lie in [0, {self._n})")
        cands = cands[_run_starts(cands)]
        total, hit = self._score_docs(tids, weights, cands)
        return cands[hit], total[hit]

    def get_scores(self, query_tokens: Iterable[str]) -> np.ndarray:
        """Dense scores over all docs (0 where nothing matches), like rank_bm25."""
        dense = np.zeros(self._n, np.float32)
        ids, scores = self.score(query_tokens)
        dense[ids] = scores
        return dense

    # -- persistence ----------------------------------------------------------------

    def save(self, directory: Path | str) -> None:
        """Write .npy arrays and ``meta.json`` (vocabulary, params); each file replaced atomically."""
        self._merge_tail()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        arrays = (self._indptr, self._pdocs, self._ptf, self._dl[: self._n])
        for name, arr in zip(_FILES, arrays):
            atomic_write(directory / f"{name}.npy", lambda f, a=arr: np.save(f, a), fsync=False)
        meta = {"kind": "bm25_index", "k1": self.k1, "b": self.b, "idf": self.idf, "epsilon": self.epsilon,
                "n_docs": self._n, "n_postings": len(self._pdocs), "terms": self._vocab.terms}
        atomic_write(directory / "meta.json", jsonl.dumps(meta), fsync=False)

    @classmethod
    def load(cls, directory: Path | str, mmap: bool = False) -> BM25Index:
        """Read an index written by ``save``; ``mmap=True`` maps the postings read-only."""
        directory = Path(directory)
        try:
            meta = jsonl.loads((directory / "meta.json").read_bytes())
            index = cls(meta["k1"], meta["b"], meta["idf"], meta["epsilon"])
            indptr, pdocs, ptf, dl = (np.load(directory / f"{name}.npy", mmap_mode="r" if mmap else None)
                                      for name in _FILES)
            terms, n_docs, n_postings = meta["terms"], meta["n_docs"], meta["n_postings"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SearchIndexError(f"{directory}: cannot load BM25 index: {exc}") from exc
        if (len(indptr) != len(terms) + 1 or indptr[-1] != len(pdocs) or len(pdocs) != n_postings
                or len(ptf) != len(pdocs) or len(dl) != n_docs):
            raise SearchIndexError(f"{directory}: BM25 index files disagree with meta.json")
        index._vocab = _Vocab(terms)
        index._indptr, index._pdocs, index._ptf = indptr, pdocs, ptf
        index._df = np.diff(indptr)
        index._dl = np.array(dl, np.float32)
        index._n, index._total_len = n_docs, int(index._dl.sum(dtype=np.float64))
        return index
