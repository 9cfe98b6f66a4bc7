"""Two-stage semantic→episodic retrieval (MemTier §3.2).

Stage 1 (:mod:`.scoping`) runs BM25 over the project's current semantic facts and
takes the top sessions named by the matching facts' provenance. Stage 2 scores only those
sessions' episodic entries (plus the current session's) with the five-signal
fusion; the matching facts themselves compete too, with their tier bonus. When
the semantic tier is empty or stage 1 finds nothing, every episodic entry the
agent may see is scored, and the trace says so. Only entries that share a term
with the query (or, with an embedding backend, are close to it) are eligible.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from typing import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..vocabulary import TIERS
from ..store import traces
from ..store.tombstones import Forgotten
from .backends import Backends
from .backends import choose as choose_backends
from .calibration import for_config as calibration_for
from ..config import Config
from .dense import Rows
from .exchange import add_exchanges
from .head_scoring import HeadScorer
from .index import ROLES, DocIndex, StaleLedger
from .index_files import open_index, save_index
from .watch import LedgerWatch
from ..store.episodic import Ledger
from .packing import Hit, Packed, pack, repack
from .same_message import one_per_message
from .scoping import Stage1, session_scope, stage1
from .signals import DAY, decay_bypass, fuse, phi_bm25, phi_cw, phi_decay, phi_sem, tier_bonus
from ..tokenize import tokenize

log = logging.getLogger(__name__)
TIER_NAMES = TIERS
YIELD_LIMIT_S = 2.0  # longest a background checkpoint waits for the hooks in progress
DEFER_EMBED = 32  # new documents a recall leaves unembedded (zero rows); past this it embeds them first
COLD_EMBED = 256  # a hook's first recall embeds a cold store in place up to this many uncached texts
REPLY_CHARS = 400  # the end of the answered message that goes into an entry's reply-context vector
RANK_DEPTH = 50  # rank()'s depth when a caller gives none (recall asks for max(4k, 16), evaluation for its own)


@dataclass
class Ranked:
    """Ranking before packing: parallel arrays over (index, doc) pairs, best first."""

    docs: list[tuple[DocIndex, int]]
    scores: np.ndarray
    raw_bm25: np.ndarray
    signals: dict[str, np.ndarray]
    weights: dict[str, float]
    mode: str
    stage1_sessions: list[str] = field(default_factory=list)
    rerank: np.ndarray | None = None  # scaled cross-encoder value per position; NaN below the re-ranked head


@dataclass
class RecallResult:
    query: str
    hits: list[Hit]
    left_out: list[str]
    tokens: int
    mode: str
    stage1_sessions: list[str]
    elapsed_ms: float
    candidates: list[Hit] = field(default_factory=list)  # the ranked hits packing chose from, best first

    @property
    def block(self) -> str:
        return Packed(self.hits, self.left_out, self.tokens).block

    def with_due(self, due: list[Hit], k: int, budget: int, max_chars: int) -> RecallResult:
        """This result with the items due now (hooks' entries, working state) packed into the same block
        within the same k and budgets (:func:`..packing.repack`)."""
        if not due:
            return self
        packed = repack(self.hits, due, k, budget, max_chars)
        return dataclasses.replace(self, hits=packed.hits, left_out=self.left_out + packed.left_out,
                                   tokens=packed.tokens)

    def trace_rows(self) -> list[dict]:
        return [{"id": h.id, "agent_id": h.agent_id, "content": h.content, "score": round(h.score, 6), "tier": h.tier,
                 **({} if h.probability is None else {"probability": round(h.probability, 6)}),
                 "signals": {k: round(v["value"], 6) for k, v in h.signals.items()},
                 **({} if h.rerank is None else {"rerank": round(h.rerank, 6)}),
                 # the entry its line showed as context (recall/exchange.py): its id only, never its words
                 **({"exchange_id": h.exchange_id} if h.exchange_id else {})} for h in self.hits]


def _without(hits: list[Hit], skip: Callable[[Hit], str | None]) -> tuple[list[Hit], list[str]]:
    """(the hits ``skip`` lets through, "id: why" for the others)."""
    kept, left = [], []
    for h in hits:
        why = skip(h)
        if why:
            left.append(f"{h.id}: {why}")
        else:
            kept.append(h)
    return kept, left


def merge_standing(ranked: list[Hit], standing: list[Hit]) -> list[Hit]:
    """Every layer's candidates in one list, each id once (standing first: calibration then orders them)."""
    seen, out = set(), []
    for h in [*standing, *ranked]:
        if h.id not in seen:
            seen.add(h.id)
            out.append(h)
    return out


def _top_order(scores: np.ndarray, depth: int) -> np.ndarray:
    """Indices of the ``depth`` best scores, best first, ties by position (argpartition, then sort)."""
    n = len(scores)
    if n > 4 * depth:
        cut = np.partition(scores, n - depth)[n - depth]
        idx = np.flatnonzero(scores >= cut)  # keeps every tie at the cut
        return idx[np.lexsort((idx, -scores[idx]))][:depth]
    return np.lexsort((np.arange(n), -scores))[:depth]


def _cap_at_sources(scores: np.ndarray, raw: np.ndarray, e_docs: np.ndarray, of_fact: list[list[int]]) -> None:
    """A fact restates the entries it was made from. Where the agent can see one of them (``of_fact[j]``: the
    visible source docs of fact j, which sits at ``len(e_docs) + j``), the fact ranks no higher than the best
    of them would, by fused score and raw BM25 (what calibration reads): shorter and exempt from decay, it
    would otherwise outrank its own turn on any one-word match ("I totally agree, Melanie") and push the
    evidence out of the block. At that rank the fact stands just before its source, so the block holds the
    fact (current, and shorter) and packing skips the entry it repeats. A fact whose sources this agent
    cannot see (another agent's) keeps its own score: that is what the semantic tier shares."""
    at = {d: i for i, d in enumerate(e_docs.tolist())}
    n_ep = len(e_docs)
    for j, docs in enumerate(of_fact):
        mine = [at[d] for d in docs if d in at]
        if not mine:
            continue
        best = max(mine, key=lambda i: scores[i])
        k = n_ep + j
        scores[k] = min(scores[k], np.nextafter(scores[best], np.inf))
        raw[k] = min(raw[k], raw[best])


def _cut(ranked: Ranked, depth: int) -> Ranked:
    """The best ``depth`` of a ranking."""
    if len(ranked.docs) <= depth:
        return ranked
    return Ranked(ranked.docs[:depth], ranked.scores[:depth], ranked.raw_bm25[:depth],
                  {k: v[:depth] for k, v in ranked.signals.items()}, ranked.weights, ranked.mode,
                  ranked.stage1_sessions, None if ranked.rerank is None else ranked.rerank[:depth])


class Retriever:
    """Holds the episodic and semantic indexes of one memory root and answers queries."""

    def __init__(self, config: Config, ledger: Ledger | None = None, *, progress=None,
                 backends: Backends | None = None, vector_cache: Path | None = None,
                 forgotten: Forgotten | None = None):
        """``backends``: the embedder, re-ranker and weights to use (default: :func:`.backends.choose` of
        ``config``, its notes logged as warnings); ``vector_cache``: where φsem vectors are cached
        (default ``<memory>/.index/vectors``). Evaluation passes both to share one model and cache.
        ``forgotten``: the workspace's forgotten ids (the Memory's one reader; default a reader of its own):
        a forgotten entry or fact is never a candidate (:meth:`_mask`)."""
        self.config = config
        self.root = Path(config.memory_root)
        self.forgotten = forgotten if forgotten is not None else Forgotten(self.root)
        self._gone: dict[str, tuple] = {}  # index kind -> (ids, index object, n, mask): forgotten docs
        self.ledger = ledger or Ledger(self.root)
        if backends is None:
            backends = choose_backends(config)
            for note in backends.notes:
                log.warning("%s", note)
        self.weights = list(backends.weights)
        self.embedder = None
        self.vector_cache = None
        self._vectors: dict[str, Rows] = {}
        self._lock = threading.RLock()  # the indexes and vectors; held for the cheap stages only (see recall)
        self._embed_lock = threading.Lock()  # the vector cache (embedding runs outside _lock)
        self._busy = threading.Condition()  # foreground recalls in progress: background work yields to them
        self._foreground = 0
        self._generation = 0  # bumped when an index is rebuilt: doc numbers read before then are void
        self.head = HeadScorer(config, self.yield_to_foreground)  # the cross-encoder within a budget (None: off)
        self.last_result: RecallResult | None = None
        self.calibration = calibration_for(config)  # every layer on one scale (recall/calibration.py)
        # None: a cold store is embedded in place at its first recall (evaluation, benchmarks); a number
        # (the hooks' Memory: COLD_EMBED): past that many uncached texts it is embedded in the background
        self.cold_embed_limit: int | None = None
        self._cold_thread: threading.Thread | None = None
        self._cold_stop = threading.Event()
        if backends.embedder is not None:
            self.set_embedder(backends.embedder, vector_cache)
        if backends.reranker is not None:
            self.set_reranker(backends.reranker)
        self._save_failed = False
        t0 = time.perf_counter()
        changed_e = self._open("episodic", progress=progress)
        changed_s = self._open("semantic")
        self.open_s = time.perf_counter() - t0
        self._unsaved = len(self.episodic.ids) if changed_e else 0
        self._watch = {sub: LedgerWatch(self.root / sub) for sub in ("episodic", "semantic")}
        self.refresh(full=True)  # prime the change detection (and read anything appended meanwhile)
        if changed_e or changed_s:
            self.save()

    # ---- freshness -------------------------------------------------------
    def refresh(self, full: bool = False) -> None:
        """Read whatever other processes appended to the ledgers since we last looked.

        Cheap on every recall (see :class:`LedgerWatch`); ``full=True`` checks every file.
        A ledger edited by hand (shrunk, replaced, rewritten, removed) makes that
        index be rebuilt from the ledgers, so nothing removed is ever recalled.
        """
        with self._lock:
            for kind in ("episodic", "semantic"):
                try:
                    self._unsaved += self._watch[kind].poll(getattr(self, kind), full=full)
                except StaleLedger as exc:
                    log.warning("%s; rebuilding the %s index from the ledgers", exc, kind)
                    self._rebuild(kind)

    def _open(self, kind: str, *, fresh: bool = False, progress=None) -> bool:
        bm = self.config.bm25
        index, changed = open_index(self.root, kind, kind, k1=bm.k1, b=bm.b, idf=bm.idf,
                                    reply_context=self.config.retrieval.reply_context if kind == "episodic" else False,
                                    fresh=fresh, progress=progress)
        setattr(self, kind, index)
        self._vectors.pop(kind, None)  # vectors are per doc number
        return changed

    def _rebuild(self, kind: str) -> None:
        self._generation += 1
        self._open(kind, fresh=True)
        self._watch[kind] = LedgerWatch(self.root / kind)
        self._watch[kind].poll(getattr(self, kind), full=True)
        self.save()

    def notify_append(self, rec: dict, path: Path, offset: int) -> None:
        """Make a record this process just wrote at ``path``:``offset`` searchable at once."""
        with self._lock:
            index = self.semantic if rec.get("kind") == "fact" else self.episodic
            if index.ingest(rec, index.files.get(str(path)), offset) is not None:
                self._unsaved += 1

    def save(self) -> bool:
        """Save both indexes (see :func:`.index_files.save_index`); False when they stay in memory only.

        The index is a cache: a read-only workspace, a full disk or another process
        saving at the same moment costs only the save, never the recall.
        """
        with self._lock:
            try:
                saved = all([save_index(self.episodic, self.root / ".index" / "episodic"),
                             save_index(self.semantic, self.root / ".index" / "semantic")])
            except OSError as exc:
                if not self._save_failed:
                    log.warning("%s: index kept in memory only (cannot save: %s)", self.root / ".index", exc)
                self._save_failed = True
                return False
            if saved:
                self._unsaved = 0
            return saved

    # ---- dense vectors (φsem) -------------------------------------------
    def set_embedder(self, embedder, cache_path: Path | None = None) -> None:
        """Enable φsem: vectors for every document, cached on disk beside the index."""
        from .vector_cache import VectorCache

        self.embedder = embedder
        self._vectors = {}
        if embedder is not None:
            path = cache_path or (self.root / ".index" / "vectors")
            self.vector_cache = VectorCache(path, embedder)

    def embed_query(self, query: str) -> np.ndarray:
        """The query's vector: ``embed_query`` when the backend embeds queries differently (an instruction prefix)."""
        from ..models.embedders import embed_as_query  # here: a lexical recall loads no model module

        return embed_as_query(self.embedder, query)

    # ---- cross-encoder re-ranking ----------------------------------------
    @property
    def reranker(self):
        return self.head.reranker

    def set_reranker(self, reranker) -> None:
        """Re-order the best ``rerank.top_n`` episodic entries with ``reranker.score(query, texts)`` (None: off)."""
        self.head.set(reranker)

    def _rerank_head(self, ranked: Ranked, query: str = "",
                     budget_ms: float | None = None) -> tuple[np.ndarray, list[str], list[str]]:
        """The head the cross-encoder may re-order: positions of the best ``rerank.top_n`` episodic entries, their
        entry ids, and the texts of the prefix the budget could score (all of them without a budget): only
        those texts are read from the ledger, not the whole head (:meth:`.HeadScorer.affordable`)."""
        slots = np.array([i for i, (idx, _) in enumerate(ranked.docs) if idx.kind == "episodic"]
                         [: self.config.rerank.top_n], dtype=np.int64)
        if len(slots) < 2:
            return slots[:0], [], []
        ids = [ranked.docs[i][0].ids[ranked.docs[i][1]] for i in slots.tolist()]
        n = self.head.affordable(query, ids, budget_ms)
        return slots, ids, [self.content(*ranked.docs[i]) for i in slots[:n].tolist()]

    def _apply_rerank(self, ranked: Ranked, slots: np.ndarray, logits: np.ndarray | None) -> Ranked:
        """Re-order the scored prefix of the head among its places (facts keep theirs; see :mod:`.rerank`)."""
        from .rerank import rerank_order

        if logits is None or len(logits) < 2:
            return ranked
        slots = slots[: len(logits)]
        order, ce = rerank_order(logits, self.config.rerank.weight, self.config.rerank.k)
        perm = np.arange(len(ranked.docs))
        perm[slots] = slots[order]
        rr = np.full(len(ranked.docs), np.nan)
        rr[slots] = ce
        return Ranked([ranked.docs[i] for i in perm.tolist()], ranked.scores, ranked.raw_bm25[perm],
                      {k: v[perm] for k, v in ranked.signals.items()}, ranked.weights, ranked.mode,
                      ranked.stage1_sessions, rr)

    def _rerank(self, query: str, ranked: Ranked) -> Ranked:
        """Re-order the best ``rerank.top_n`` episodic entries among their places (as much as the budget allows).

        Facts keep their places; each moved entry takes its new place's score. Any
        failure of the model keeps the fused order (warned once).
        """
        slots, ids, texts = self._rerank_head(ranked, query)
        if not texts:
            return ranked
        return self._apply_rerank(ranked, slots, self.head.score(query, ids, texts))

    @contextlib.contextmanager
    def foreground(self):
        """Mark a hook's recall in progress: background work (Foresight's preparations) pauses at its next
        checkpoint — before its ranking, between re-ranking batches — until no hook is running."""
        with self._busy:
            self._foreground += 1
        try:
            yield
        finally:
            with self._busy:
                self._foreground -= 1
                if not self._foreground:
                    self._busy.notify_all()

    def yield_to_foreground(self, limit_s: float = YIELD_LIMIT_S) -> None:
        """Background work: wait while a hook's recall runs (at most ``limit_s``: a hook stuck elsewhere never
        stalls the background for good)."""
        with self._busy:
            if self._foreground:
                self._busy.wait_for(lambda: not self._foreground, timeout=limit_s)

    def _unembedded(self) -> int:
        """Documents of a warm store not embedded yet (0 without an embedder or before the first recall)."""
        if self.embedder is None:
            return 0
        n = 0
        for kind in ("episodic", "semantic"):
            have = self._vectors.get(kind)
            if have is not None and have.embedded:
                n += max(0, getattr(self, kind).n - have.embedded)
        return n

    def embed_pending(self, batch: int = 16, *, wait: bool = True, stop: threading.Event | None = None) -> int:
        """Embed the entries written since the last embedding (agent_end, the daemon, Foresight's thread), so
        recall never embeds the workspace at query time. The model runs outside the index lock, ``batch``
        texts at a time; returns how many were embedded. ``wait=False``: stop rather than wait while
        another thread is embedding (it is catching up already). ``stop``: set, it stops before its next batch."""
        if self.embedder is None or self.vector_cache is None:
            return 0
        total = 0
        for kind in ("episodic", "semantic"):
            while stop is None or not stop.is_set():
                with self._lock:
                    idx, gen = getattr(self, kind), self._generation
                    have = self._vectors.get(kind)
                    done = 0 if have is None else have.embedded
                    if done >= idx.n:
                        break
                    keys = self._key_texts(idx, range(done, min(idx.n, done + batch)))
                if not self._embed_lock.acquire(blocking=wait):
                    return total
                try:
                    new = self._key_vectors(keys)
                finally:
                    self._embed_lock.release()
                with self._lock:
                    now = self._vectors.get(kind)
                    if gen != self._generation or (0 if now is None else now.embedded) != done:
                        continue  # rebuilt or extended meanwhile: read again
                    self._vectors[kind] = Rows(new) if now is None else now.append(new)
                total += len(new)
        return total

    def vectors(self, idx: DocIndex) -> np.ndarray:
        """(idx.n, dim) unit vectors, computing only the documents added since the last call.

        Only a cold store (nothing embedded yet: a workspace just opened, an evaluation's) is
        embedded here, under the index lock. A warm store's new documents (the prompt just
        written, the run's turns, another process's appends) are zero rows — cosine 0, still
        found by their words — until ``embed_pending`` fills them outside the lock (agent_end,
        Foresight's idle thread, or :meth:`recall` itself past :data:`DEFER_EMBED` of them),
        so no recall ever waits on another thread's embedding.
        """
        have = self._vectors.get(idx.kind)
        done = 0 if have is None else have.embedded
        if done < idx.n:
            if have is not None:
                return have.pad(idx.n).view()
            keys = self._key_texts(idx, range(done, idx.n))
            with self._embed_lock:
                new = self._key_vectors(keys, max_new=self.cold_embed_limit)
            if new is None:  # too many to embed here (a hook's recall): zero rows, embedded in the background
                self._vectors[idx.kind] = have = Rows(np.zeros((0, self.vector_cache.dim), np.float32))
                self._embed_cold()
                return have.pad(idx.n).view()
            have = Rows(new)
            self._vectors[idx.kind] = have
        return None if have is None else have.view()[:idx.n]  # None: an empty index, never embedded

    def _key_texts(self, idx: DocIndex, docs: range) -> tuple[list[str], list[tuple[int, str]]]:
        """What the vectors of ``docs`` are made of: their own texts, and (episodic entries that answer another
        role's message, with ``embeddings.reply_context`` > 0) (position, that message's end + the entry's text)."""
        texts = idx.read_contents(np.arange(docs.start, docs.stop))
        contexts: list[tuple[int, str]] = []
        if idx.kind == "episodic" and self.config.embeddings.reply_context > 0 and len(docs):
            answered = idx.col("reply")[docs.start:docs.stop].astype(np.int64) - 1
            rows = np.flatnonzero(answered >= 0)
            outside = np.unique(answered[rows][(answered[rows] < docs.start)])  # usually the batch's first only
            earlier = dict(zip(outside.tolist(), idx.read_contents(outside)))
            for i in rows.tolist():
                a = int(answered[i])
                said = texts[a - docs.start] if a >= docs.start else earlier[a]
                contexts.append((i, said[-REPLY_CHARS:] + "\n" + texts[i]))
        return texts, contexts

    def _key_vectors(self, key_texts: tuple[list[str], list[tuple[int, str]]], *,
                     max_new: int | None = None) -> np.ndarray | None:
        """Unit vectors of :meth:`_key_texts`: an entry with a reply context gets (1 − w)·own + w·context,
        renormalised (w = ``embeddings.reply_context``; cached as one row). None when more than ``max_new``
        texts are uncached."""
        texts, contexts = key_texts
        items: list[tuple[str, str | None]] = [(t, None) for t in texts]
        for i, context in contexts:
            items[i] = (texts[i], context)
        got = self.vector_cache.get_mixed(items, self.config.embeddings.reply_context, max_new=max_new)
        return None if got is None else got.astype(np.float32, copy=False)

    def _embed_cold(self) -> None:
        """A hook found a cold store too big to embed in place: its vectors stay zero rows (the lexical
        signals still rank) while a background thread embeds it, 64 texts at a time."""
        if self._cold_thread is not None and self._cold_thread.is_alive():
            return
        log.warning("memtier: %s holds entries not embedded yet; embedding them in the background (the "
                    "semantic signal is off for them until then)", self.root)

        stop = self._cold_stop = threading.Event()

        def run() -> None:
            try:
                self.embed_pending(batch=64, stop=stop)
            except Exception:
                log.exception("memtier: embedding %s in the background failed", self.root)

        self._cold_thread = threading.Thread(target=run, name="memtier-embed", daemon=True)
        self._cold_thread.start()

    def warm_up(self) -> dict[str, float]:
        """Load what a process's first recall would: the vectors of both tiers (a big uncached store goes to
        the background, as for a hook) and the models, one query each. Seconds per part."""
        out: dict[str, float] = {}
        if self.embedder is not None:
            t0 = time.perf_counter()
            with self._lock:
                self.refresh()
                for idx in (self.episodic, self.semantic):
                    if idx.n:
                        self.vectors(idx)
            out["vectors_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            self.embed_query("memtier warm-up")
            out["embedder_s"] = time.perf_counter() - t0
        if self.reranker is not None and not self.head.failed:
            t0 = time.perf_counter()
            self.reranker.score("memtier warm-up", ["memtier warm-up"])
            out["reranker_s"] = time.perf_counter() - t0
        return out

    @property
    def embedding_in_background(self) -> bool:
        """A cold store is being embedded by the background thread (nobody else needs to)."""
        return self._cold_thread is not None and self._cold_thread.is_alive()

    def close(self, timeout: float = 5.0) -> bool:
        """Stop background embedding (at its next batch); True when no such thread is left running."""
        self._cold_stop.set()
        t = self._cold_thread
        if t is not None:
            t.join(timeout)
        return t is None or not t.is_alive()

    def _dense(self, idx: DocIndex, qv: np.ndarray, scope: np.ndarray | None, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k documents by cosine within ``scope`` (all when None): (docs, cosines)."""
        if idx.n == 0:
            return np.empty(0, np.int64), np.empty(0)
        V = self.vectors(idx)
        docs = np.arange(idx.n) if scope is None else scope
        cos = V @ qv if scope is None else V[docs] @ qv  # (V[docs] would copy every row)
        if len(docs) > k:
            part = np.argpartition(-cos, k)[:k]
            docs, cos = docs[part], cos[part]
        return docs.astype(np.int64), cos.astype(np.float64)

    # ---- ranking ---------------------------------------------------------
    def forgotten_docs(self, idx: DocIndex) -> np.ndarray | None:
        """A mask over ``idx``'s docs of the forgotten ones (None: none is), rebuilt only when another id was
        forgotten or the index grew (one ``stat`` of ``forgotten.jsonl`` otherwise)."""
        ids = self.forgotten.ids()
        if not ids:
            return None
        held = self._gone.get(idx.kind)
        if held is not None and held[0] is ids and held[1] is idx and held[2] == idx.n:
            return held[3]
        mask = np.zeros(idx.n, dtype=bool)
        for i in ids:
            doc = idx.pos.get(i)
            if doc is not None and doc < idx.n:
                mask[doc] = True
        self._gone[idx.kind] = (ids, idx, idx.n, mask)
        return mask

    def _mask(self, idx: DocIndex, docs: np.ndarray, agents: list[str] | None, project: str | None) -> np.ndarray:
        """Visibility of ``docs``: not [system], not forgotten, the agent may read it, same project, recalled
        role, current."""
        keep = ~idx.col("system")[docs]
        gone = self.forgotten_docs(idx)
        if gone is not None:
            keep &= ~gone[docs]
        if agents is not None:
            allowed = np.zeros(len(idx.agents.names) + 1, dtype=bool)
            allowed[[idx.agents.code[a] for a in agents if a in idx.agents.code]] = True
            keep &= allowed[idx.col("agent")[docs]]
        if project is not None:
            keep &= idx.col("project")[docs] == idx.projects.code.get(project, -1)
        if idx.kind == "episodic":
            roles = np.zeros(len(ROLES), dtype=bool)
            roles[[ROLES.index(r) for r in self.config.retrieval.include_roles if r in ROLES]] = True
            keep &= roles[idx.col("role")[docs]]
        else:
            keep &= ~idx.col("superseded")[docs]
        return keep

    def _fused(self, query: str, *, agents: list[str] | None, project: str | None, session_id: str,
               now: float | None, depth: int, two_stage: bool | None, weights: list[float] | None) -> Ranked:
        """The fused ranking before re-ranking (deep enough for the re-ranker's head)."""
        cfg = self.config.retrieval
        now = time.time() if now is None else now
        two_stage = cfg.two_stage if two_stage is None else two_stage
        weights = list(self.weights if weights is None else weights)
        q = tokenize(query)
        ep = self.episodic
        mode = "all episodic entries (two-stage off)"
        found = Stage1()
        if two_stage:
            found = stage1(self.semantic, ep, q, lambda docs: self._mask(self.semantic, docs, None, project),
                           cfg.stage1_sessions)
            mode = "two-stage" if found.sessions else ("fallback: semantic tier empty" if self.semantic.n == 0
                                                       else "fallback: stage 1 found no session")
        s_codes = found.sessions
        qv = self.embed_query(query) if (self.embedder is not None and weights[0] > 0) else None
        facts = (found.fact_docs[:depth], found.fact_raw[:depth])
        # soft scoping: every visible entry competes; stage-1 sessions skip decay
        scope = session_scope(ep, s_codes, session_id) if s_codes and cfg.scoping == "hard" else None
        pool = max(depth, 4 * self.config.rerank.top_n) if self._reranks() else depth  # facts may fill much of it
        first = self._score(q, qv, scope, s_codes, facts, agents, project, now, pool, weights)
        first.mode, first.stage1_sessions = mode, [ep.sessions.names[c] for c in s_codes]
        return first

    def _reranks(self) -> bool:
        return self.reranker is not None and self.config.rerank.weight > 0

    def rank(self, query: str, *, agents: list[str] | None, project: str | None, session_id: str = "",
             now: float | None = None, depth: int | None = None, two_stage: bool | None = None,
             weights: list[float] | None = None) -> Ranked:
        """Score candidates with the five-signal fusion (then re-rank the head); best ``depth`` first (no packing).

        ``retrieval.scoping: hard`` (MemTier) scores only the stage-1 sessions'
        entries plus the current session's; ``soft`` lets every visible entry
        compete in the same fusion, stage-1 sessions keeping their decay
        bypass — recall-first, at the cost of scoring the whole pool.
        """
        depth = depth or RANK_DEPTH
        first = self._fused(query, agents=agents, project=project, session_id=session_id, now=now, depth=depth,
                            two_stage=two_stage, weights=weights)
        return _cut(self._rerank(query, first), depth) if self._reranks() else first

    def _score(self, q: list[str], qv, scope, s_codes, facts, agents, project, now, depth, weights,
               exclude: np.ndarray | None = None) -> Ranked:
        """Lexical (+ dense) candidates within ``scope`` (all when None), fused and sorted."""
        cfg = self.config.retrieval
        ep = self.episodic
        if scope is not None:
            e_docs, e_raw = ep.bm25.score(q, scope) if len(scope) and q else (np.empty(0, np.int64), np.empty(0))
        else:
            e_docs, e_raw = ep.bm25.score(q) if ep.n and q else (np.empty(0, np.int64), np.empty(0))
        dense = qv is not None
        e_cos = np.empty(0)
        min_sim = self.config.embeddings.min_similarity
        if dense:
            d_docs, d_cos = self._dense(ep, qv, scope, depth)
            extra = np.setdiff1d(d_docs[d_cos >= min_sim], e_docs)
            e_docs = np.concatenate([e_docs, extra]).astype(np.int64)
            e_raw = np.concatenate([e_raw, np.zeros(len(extra))])
            e_cos = self.vectors(ep)[e_docs] @ qv if len(e_docs) else np.empty(0)
        keep = self._mask(ep, e_docs, agents, project)
        keep &= ((e_raw > 0) | (e_cos >= min_sim)) if dense else (e_raw > 0)
        if exclude is not None and len(exclude):
            keep &= ~np.isin(e_docs, exclude)
        e_docs, e_raw = e_docs[keep], e_raw[keep]
        e_cos = e_cos[keep] if dense else e_cos
        f_docs, f_raw = facts
        # a fact's visible source entries compete too, whatever their match: the fact ranks at theirs (below)
        src, of_fact = self._visible_sources(f_docs, agents, project, exclude)
        extra = np.setdiff1d(src, e_docs)
        if len(extra):
            x_docs, x_raw = ep.bm25.score(q, extra) if q else (np.empty(0, np.int64), np.empty(0))
            raw_of = dict(zip(x_docs.tolist(), x_raw.tolist()))
            e_docs = np.concatenate([e_docs, extra]).astype(np.int64)
            e_raw = np.concatenate([e_raw, [raw_of.get(d, 0.0) for d in extra.tolist()]])
            if dense:
                e_cos = np.concatenate([e_cos, self.vectors(ep)[extra] @ qv])
        from_stage1 = np.isin(ep.col("session")[e_docs], s_codes) if s_codes else np.zeros(len(e_docs), bool)
        n_ep = len(e_docs)
        names = ("sem", "bm25", "decay", "cw", "tier")
        if n_ep + len(f_docs) == 0:
            return Ranked([], np.empty(0), np.empty(0), {n: np.empty(0) for n in names}, dict(zip(names, weights)), "")
        raw = np.concatenate([e_raw, f_raw]).astype(np.float64)
        ts = np.concatenate([ep.col("ts")[e_docs], self.semantic.col("ts")[f_docs]])
        cw = np.concatenate([ep.col("cw")[e_docs], self.semantic.col("cw")[f_docs]])
        tiers = np.concatenate([ep.col("tier")[e_docs], self.semantic.col("tier")[f_docs]])
        stage1 = np.concatenate([from_stage1, np.ones(len(f_docs), dtype=bool)])
        bm = phi_bm25(raw, cfg.bypass_threshold)
        decay = phi_decay((now - ts) / DAY, cfg.decay_lambda, decay_bypass(raw, cfg.bypass_threshold, stage1))
        if dense:
            f_cos = self.vectors(self.semantic)[f_docs] @ qv if len(f_docs) else np.empty(0)
            sem = phi_sem(np.concatenate([e_cos, f_cos]))
        else:
            sem = np.zeros(len(raw))
        fused = fuse(weights, sem, bm, decay, phi_cw(cw), tier_bonus(tiers, cfg.tier_multipliers))
        if len(src):
            _cap_at_sources(fused.scores, raw, e_docs, of_fact)
        order = _top_order(fused.scores, depth)
        pairs = [(ep, int(e_docs[i])) if i < n_ep else (self.semantic, int(f_docs[i - n_ep])) for i in order.tolist()]
        return Ranked(pairs, fused.scores[order], raw[order],
                      {k: v[order] for k, v in fused.signals.items()}, fused.weights, "")

    def _visible_sources(self, f_docs: np.ndarray, agents, project,
                         exclude) -> tuple[np.ndarray, list[list[int]]]:
        """The episodic docs, visible to this recall, that the facts ``f_docs`` were made from: all of them
        (ascending) and each fact's own."""
        ep, sources = self.episodic, self.semantic.fact_sources
        per_fact = [[d for d in (ep.pos.get(i) for i in sources.get(f, ())) if d is not None and d < ep.n]
                    for f in f_docs.tolist()]
        arr = np.array(sorted({d for docs in per_fact for d in docs}), dtype=np.int64)
        if not len(arr):
            return arr, []
        keep = self._mask(ep, arr, agents, project)
        if exclude is not None and len(exclude):
            keep &= ~np.isin(arr, exclude)
        seen = set(arr[keep].tolist())
        return arr[keep], [[d for d in docs if d in seen] for docs in per_fact]

    # ---- hits and packing ------------------------------------------------
    def content(self, idx: DocIndex, doc: int) -> str:
        return self.record(idx, doc).get("content", "")

    def record(self, idx: DocIndex, doc: int) -> dict:
        return idx.read_record(doc)

    def hits(self, ranked: Ranked, limit: int) -> list[Hit]:
        out = []
        for i, (idx, doc) in enumerate(ranked.docs[:limit]):
            rec = self.record(idx, doc)
            out.append(Hit(
                id=idx.ids[doc], content=rec.get("content", ""), timestamp=rec.get("timestamp", ""),
                session_id=rec.get("session_id") or ",".join(rec.get("session_ids") or [])[:40],
                agent_id=rec.get("agent_id") or rec.get("origin_agent", ""),
                role=rec.get("role", "fact"), tier=TIER_NAMES[int(idx.cols["tier"][doc])],
                score=float(ranked.scores[i]), raw_bm25=float(ranked.raw_bm25[i]),
                signals={k: {"value": float(v[i]), "weight": ranked.weights[k],
                             "contribution": float(v[i]) * ranked.weights[k]} for k, v in ranked.signals.items()},
                rerank=None if ranked.rerank is None or np.isnan(ranked.rerank[i]) else float(ranked.rerank[i]),
                sources=[idx.ids[doc]] if idx.kind == "episodic" else
                [x for x in rec.get("source_entry_ids") or [] if isinstance(x, str)],
            ))
        return out

    def recall(self, query: str, *, agent_id: str, project: str | None, session_id: str = "",
               agents: list[str] | None, now: float | None = None, run_id: str = "",
               record_trace: bool = True, standing: list[Hit] | None = None,
               rerank_budget_ms: float | None = None, background: bool = False,
               skip: Callable[[Hit], str | None] | None = None) -> RecallResult:
        """The full path of before_prompt_build: rank, merge standing knowledge, pack within budget, trace.

        ``skip``: why a candidate is not handed over at all (the agent has it in its context already), or None;
        a skipped candidate leaves its slot to the next one.

        ``rerank_budget_ms`` overrides ``rerank.budget_ms`` for this recall (Foresight's background
        preparations have their own, ``rerank.background_budget_ms``). ``background``: a preparation,
        which yields to hooks' recalls in progress (:meth:`foreground`) at its checkpoints.

        ``standing``: hits of the Global and Workspace layers that apply to this
        query (see :mod:`standing`), already scored; they compete with the
        episodic and semantic hits for the same k and budget.
        """
        if background:
            self.yield_to_foreground()
        t0 = time.perf_counter()
        pending = self._unembedded()
        if pending > DEFER_EMBED and not self.embedding_in_background:  # many new entries, no agent_end yet:
            if self.cold_embed_limit is not None and pending > self.cold_embed_limit:
                self._embed_cold()  # too many for a hook (another process wrote them): in the background
            else:
                self.embed_pending(wait=False)  # outside the lock (unless another thread is at it: no wait)
        k, budget = self.config.retrieval.top_k, self.config.packing.token_budget
        depth = max(4 * k, 16)
        kw = dict(agents=agents, project=project, session_id=session_id, now=now, depth=depth, two_stage=None,
                  weights=None)
        # The index lock covers the cheap stages only; the cross-encoder runs outside it, so a hook never
        # waits on another thread's re-ranking (Foresight's background preparation) for longer than its own
        # fused stage takes.
        with self._lock:
            self.refresh()
            ranked = self._fused(query, **kw)
            gen = self._generation
            slots, ids, texts = (self._rerank_head(ranked, query, rerank_budget_ms) if self._reranks()
                                 else (None, [], []))
        logits = self.head.score(query, ids, texts, rerank_budget_ms, background) if texts else None
        with self._lock:
            if gen != self._generation:  # an index was rebuilt meanwhile: its doc numbers are void
                ranked = self.rank(query, **kw)
            elif texts:
                ranked = _cut(self._apply_rerank(ranked, slots, logits), depth)
            else:
                ranked = _cut(ranked, depth)
            candidates = merge_standing(self.hits(ranked, depth), standing or [])
            skipped: list[str] = []
            if skip is not None:
                candidates, skipped = _without(candidates, skip)
            applying, below = self.calibration.apply(candidates, self.config.calibration.threshold)
            applying, merged = one_per_message(applying)
            self._exchanges(applying, agents, project)
            packed = pack(applying, k, budget, self.config.packing.max_chars)
        result = RecallResult(query, packed.hits, skipped + packed.left_out + below + merged, packed.tokens, ranked.mode,
                              ranked.stage1_sessions, (time.perf_counter() - t0) * 1000, candidates)
        if not background:  # a background preparation never stands for the hook's own recall
            self.last_result = result
        if record_trace:
            self._trace(result, agent_id, session_id, run_id, now)
        return result

    def _exchanges(self, hits: list[Hit], agents: list[str] | None, project: str | None) -> None:
        """The first ``packing.exchange`` episodic ``hits`` with their exchange's other half (recall/exchange.py),
        read only where a candidate could be."""
        n = self.config.packing.exchange
        if n <= 0:
            return
        ep = self.episodic

        def visible(doc: int) -> bool:
            return bool(self._mask(ep, np.array([doc], dtype=np.int64), agents, project)[0])

        add_exchanges(hits, n, ep, visible, lambda doc: self.content(ep, doc), self.config.packing.exchange_tokens)

    def _trace(self, result: RecallResult, agent_id: str, session_id: str, run_id: str, now) -> None:
        ts = time.time() if now is None else now
        traces.append(self.root, agent_id, traces.recall_record(
            ts=ts, run_id=run_id, agent_id=agent_id, session_id=session_id, query=result.query, mode=result.mode,
            stage1_sessions=result.stage1_sessions, delivered=result.trace_rows(), left_out=result.left_out,
            tokens=result.tokens, elapsed_ms=result.elapsed_ms), ts)
