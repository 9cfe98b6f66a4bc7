"""Foresight: memory prepared before the agent asks (MemSidecar §3.4, Algorithm A2, eq. 13).

At a task's start (its first prompt) a predictor turns the instruction and the
visible topic directory of the standing layer into at most ``foresight.k``
predicted queries, each with its target layers (eq. 11). One background
thread retrieves them through the normal retrieval path into a task-scoped
cache (an entry lives ``entry_ttl_s``, an idle task ``task_ttl_s``). When a
later prompt (or a ``memory_search`` call) expresses the same need as a
prediction — embedding cosine when an embedder is loaded, else word Jaccard —
it is served from the cache and waits only for what remains of that
preparation (eq. 13: ``w = max(0, ready - request) + overhead``), at most
``foresight.wait_ms``; anything else is retrieved normally.

The predictor (:mod:`.predict`) is rules and keywords, and with
``predictor: model`` the configured model too (validated data, never executed).
Writes that change the directory refill the cache with the budget left
(Algorithm A2, Refill).

The background thread never blocks a hook: a hook never waits on its queue
(a full queue drops the preparation), waits on a prepared entry for at most
``wait_ms``, and the retriever runs its re-ranking outside the index lock
(retrieval.py), so a hook never waits on a background retrieval for more than
the cheap fused stage. :meth:`Foresight.close` stops and joins the thread.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..tokenize import token_set
from .predict import MAX_QUERY, Prediction, _signature, predict

log = logging.getLogger(__name__)
MAX_TASKS = 64
NICE = 10  # the background thread's nice value (where the OS allows one per thread)
MIN_COVER = 0.25  # lexical match: share of the query's distinctive words a prediction must hold
MAX_RETRIEVED = 8  # normally retrieved results kept per task (the oldest goes first)
#: words that make a step out of an instruction's clause (verbs of a task, or a list after a colon)
# ---- the task cache ------------------------------------------------------------------------------
@dataclass
class Prepared:
    """One prediction and its preparation (ready once retrieved, or failed)."""

    prediction: Prediction
    tokens: frozenset
    requested: float  # clock when it was queued
    vocab: frozenset = frozenset()  # its words and the words of the topics it routes to (lexical matching)
    vector: Any = None
    ready: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: str = ""
    ready_at: float | None = None
    prep_ms: float = 0.0  # how long its retrieval took (what a normal retrieval of it costs)
    previous: Any = None  # the entry it re-prepares (served meanwhile)


@dataclass
class Task:
    key: str
    instruction: str
    started: float
    last_seen: float
    budget: int  # predictions left (K minus those made)
    directory: frozenset = frozenset()
    entries: list = field(default_factory=list)
    ended: bool = False


@dataclass
class Served:
    """One access: the prepared result (None: retrieve normally, ``reason`` says why), its wait and saving."""

    result: Any
    prediction: Prediction | None = None
    similarity: float = 0.0
    wait_ms: float = 0.0
    wait_saved_ms: float = 0.0
    reason: str = "hit"  # hit | no task | no match | late | failed | forgotten (held an id the user forgot)

    @property
    def hit(self) -> bool:
        return self.result is not None


@dataclass
class Stats:
    queries: int = 0
    hits: int = 0
    late: int = 0  # matched, but the preparation was not ready within wait_ms
    predicted: int = 0
    prepared: int = 0
    dropped: int = 0  # the queue was full
    wait_ms: float = 0.0
    wait_saved_ms: float = 0.0


class Foresight:
    """Predictions, the task caches and the one background thread of one Memory.

    ``retrieve(query, layers, ctx)`` is the normal retrieval path (it returns a
    result with ``elapsed_ms``); ``embed(texts)`` (optional) gives unit vectors for
    matching; ``idle()`` (optional) runs when the queue is empty (embedding what
    was written); ``clock`` (seconds, monotonic) is injectable for tests.
    """

    def __init__(self, cfg, retrieve: Callable[[str, tuple, Any], Any], *, embed: Callable | None = None,
                 tree=None, client=None, idle: Callable[[], Any] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.cfg = cfg
        self.retrieve = retrieve
        self.embed = embed
        self.tree = tree
        self.client = client
        self.idle = idle
        self.clock = clock
        self.stats = Stats()
        self._tasks: dict[str, Task] = {}
        self._lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue(maxsize=cfg.queue_size)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._embed_failed = False

    # ---- tasks -------------------------------------------------------------
    def task(self, key: str) -> Task | None:
        """The live task ``key`` (None when unknown, ended or idle past task_ttl_s)."""
        now = self.clock()
        with self._lock:
            self._expire(now)
            t = self._tasks.get(key)
            return t if t is not None and not t.ended else None

    def _expire(self, now: float) -> None:
        for k in [k for k, t in self._tasks.items() if t.ended or now - t.last_seen > self.cfg.task_ttl_s]:
            self._tasks.pop(k).ended = True
        while len(self._tasks) > MAX_TASKS:
            oldest = min(self._tasks, key=lambda k: self._tasks[k].last_seen)
            self._tasks.pop(oldest).ended = True

    def begin(self, key: str, instruction: str, directory: dict[str, list[str]], ctx: Any) -> list[Prediction]:
        """Start task ``key``: predict from its instruction and the directory, queue their preparation."""
        now = self.clock()
        task = Task(key, instruction, now, now, self.cfg.k, _signature(directory))
        with self._lock:
            self._expire(now)
            old = self._tasks.get(key)
            if old is not None:
                old.ended = True
            self._tasks[key] = task
        return self._refill(task, directory, ctx)

    def refill(self, key: str, directory: dict[str, list[str]], ctx: Any) -> list[Prediction]:
        """Memory writes changed the directory: predict again with the budget left, and prepare every
        prediction again (their results predate the writes); normally retrieved results are dropped.
        Nothing when the directory is unchanged."""
        task = self.task(key)
        if task is None or _signature(directory) == task.directory:
            return []
        task.directory = _signature(directory)
        self.forget_retrieved(key)
        for e in list(task.entries):
            self._prepare(task, e.prediction, ctx, again=e)
        return self._refill(task, directory, ctx)

    def forget_retrieved(self, key: str) -> None:
        """A new prompt: the normally retrieved results of task ``key`` go (they predate what the user just
        said); its predictions stay."""
        task = self.task(key)
        if task is not None:
            with self._lock:
                task.entries = [e for e in task.entries if e.prediction.source != "retrieved"]

    def remember(self, key: str, query: str, result: Any) -> bool:
        """A normally retrieved result joins task ``key``'s cache (MemSidecar §3.2: the cache holds
        "prefetched or normally retrieved query results"): the agent's later queries of the same need in
        this turn (its ``memory_search`` after the prompt) are served from it, until the next prompt
        (:meth:`forget_retrieved`), its expiry (entry_ttl_s) or memory writes that change the directory. It
        costs no prediction budget, and a prediction that matches a query is always preferred to it. True
        when kept."""
        task = self.task(key)
        tokens = token_set(query)
        if task is None or result is None or not tokens:
            return False
        now = self.clock()
        vector = self._vector(query) if self.embed is not None and not self._embed_failed else None
        entry = Prepared(Prediction(" ".join(query.split())[:MAX_QUERY], (), "retrieved"), tokens, now,
                         self._vocab(query), vector=vector, result=result, ready_at=now,
                         prep_ms=float(getattr(result, "elapsed_ms", 0.0)))
        entry.ready.set()
        with self._lock:
            others = [e for e in task.entries if e.prediction.source != "retrieved"]
            kept = [e for e in task.entries if e.prediction.source == "retrieved" and e.tokens != tokens]
            task.entries = others + kept[max(0, len(kept) - MAX_RETRIEVED + 1):] + [entry]
        return True

    def _refill(self, task: Task, directory: dict[str, list[str]], ctx: Any, *,
                in_worker: bool = False) -> list[Prediction]:
        if task.budget <= 0:
            return []
        client = self.client if self.cfg.predictor == "model" else None
        if client is not None and not in_worker:  # a model call never runs in a hook: the thread predicts
            self._ensure_thread()
            try:
                self._queue.put_nowait(("predict", task, directory, ctx))
            except queue.Full:
                self.stats.dropped += 1
            return []
        preds = predict(task.instruction, directory, task.budget, tree=self.tree, client=client,
                        exclude=[e.prediction.query for e in task.entries])
        task.budget -= len(preds)
        self.stats.predicted += len(preds)
        for p in preds:
            self._prepare(task, p, ctx)
        return preds

    def end(self, key: str) -> None:
        """The task is over: drop its cache (queued preparations of it are skipped)."""
        with self._lock:
            t = self._tasks.pop(key, None)
            if t is not None:
                t.ended = True

    def active(self) -> int:
        with self._lock:
            self._expire(self.clock())
            return len(self._tasks)

    # ---- preparation ---------------------------------------------------------
    def _prepare(self, task: Task, pred: Prediction, ctx: Any, again: Prepared | None = None) -> None:
        entry = Prepared(pred, token_set(pred.query), self.clock(), self._vocab(pred.query),
                         vector=again.vector if again else None,
                         previous=again if again is not None and again.result is not None else None)
        self._ensure_thread()
        try:
            self._queue.put_nowait(("prepare", task, entry, ctx))
        except queue.Full:
            self.stats.dropped += 1
            return
        with self._lock:
            if again is not None and again in task.entries:
                task.entries[task.entries.index(again)] = entry
            else:
                task.entries.append(entry)

    def submit(self, query: str, layers: tuple, ctx: Any) -> Prepared | None:
        """One retrieval of ``query`` on the background thread, outside any task's cache (a tool result's step
        retrieval, scheduling/step.py): its ``ready`` is set when done. None when the queue is full (dropped)."""
        entry = Prepared(Prediction(" ".join(query.split())[:MAX_QUERY], layers, "step"), token_set(query),
                         self.clock())
        self._ensure_thread()
        try:
            self._queue.put_nowait(("step", None, entry, ctx))
        except queue.Full:
            self.stats.dropped += 1
            return None
        return entry

    def _vocab(self, text: str) -> frozenset:
        words = token_set(text)
        if self.tree is None:
            return words
        for topic in self.tree.top(self.tree.route(text), 2):
            words |= self.tree.words.get(topic, frozenset())
        return frozenset(words)

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._work, name="memtier-foresight", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        try:  # background work yields the CPU to the agent's hooks (Linux: a thread's own nice value)
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
        except (AttributeError, OSError):
            pass
        while not self._stop.is_set():
            try:
                item = self._queue.get(timeout=0.2)
            except queue.Empty:
                if self.idle is not None:
                    try:
                        self.idle()
                    except Exception:
                        log.exception("foresight: idle work failed")
                continue
            if item is None:
                break
            job, task, entry, ctx = item
            if job == "predict":
                if not task.ended:
                    try:
                        self._refill(task, entry, ctx, in_worker=True)
                    except Exception:
                        log.exception("foresight: prediction failed")
                continue
            if task is not None and task.ended:  # (a step retrieval belongs to no task: see submit)
                entry.error = "task ended"
                entry.ready.set()
                continue
            t0 = time.perf_counter()
            try:
                if job == "prepare" and entry.vector is None and self.embed is not None and not self._embed_failed:
                    entry.vector = self._vector(entry.prediction.query)
                entry.result = self.retrieve(entry.prediction.query, entry.prediction.layers, ctx)
                self.stats.prepared += 1
            except Exception as exc:  # a failed preparation is a miss, never a failed hook
                entry.error = f"{type(exc).__name__}: {exc}"
                log.warning("foresight: preparing %r failed: %s", entry.prediction.query[:60], entry.error)
            except BaseException as exc:  # the worker is stopping (SystemExit, ...): nobody waits for it
                entry.error = f"worker stopped: {type(exc).__name__}"
                raise
            finally:
                entry.prep_ms = (time.perf_counter() - t0) * 1000
                entry.ready_at = self.clock()
                if entry.result is not None:
                    entry.previous = None  # (the earlier result is not kept alive)
                entry.ready.set()

    def _vector(self, text: str):
        try:
            v = np.asarray(self.embed([text])[0], dtype=np.float32)
            n = float(np.linalg.norm(v))
            return v / n if n > 0 else None
        except Exception as exc:
            log.warning("foresight: embedding failed (%s); matching by words", exc)
            self._embed_failed = True
            return None

    def close(self, timeout: float = 5.0) -> bool:
        """Stop the background thread and join it; True when nothing is left running."""
        with self._lock:
            thread = self._thread
            for t in self._tasks.values():
                t.ended = True
            self._tasks.clear()
        self._stop.set()
        if thread is None:
            return True
        try:
            self._queue.put_nowait(None)
        except queue.Full:
            pass
        thread.join(timeout)
        alive = thread.is_alive()
        if not alive:
            with self._lock:
                if self._thread is thread:
                    self._thread = None
            while True:  # whatever was queued is released (its waiters fall back to normal retrieval)
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is not None and item[0] in ("prepare", "step"):
                    item[2].error = "closed"
                    item[2].ready.set()
        return not alive

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # ---- access --------------------------------------------------------------
    def match(self, task: Task, query: str) -> tuple[Prepared | None, float]:
        """The prepared entry expressing the same need as ``query``, and its similarity.

        Lexical (always): of the query's distinctive words (not common to every prediction of the task: the
        task's subject says nothing about which need) that some prediction's vocabulary holds (its words and
        the words of the topics it routes to), the share this prediction's holds: at least
        ``match_threshold``, with at least MIN_COVER of all the distinctive words in it. Embedding (when an embedder is loaded): the cosine of query and prediction, at
        least ``embed_threshold``. Either makes a candidate; the best by their sum is served.
        """
        now = self.clock()
        with self._lock:
            entries = [e for e in task.entries if now - e.requested <= self.cfg.entry_ttl_s]
        if not entries:
            return None, 0.0
        qv = self._vector(query) if self.embed is not None and not self._embed_failed and \
            any(e.vector is not None for e in entries) else None
        predicted = [e for e in entries if e.prediction.source != "retrieved"]
        common = frozenset.intersection(*(e.tokens for e in predicted)) if len(predicted) > 1 else frozenset()
        qt = token_set(query) - common
        need = qt & frozenset().union(*(e.vocab for e in entries))  # the query's words that name some need
        best, best_s, best_rank = None, -1.0, -1
        for e in entries:
            shared = len(qt & e.vocab)
            lex = shared / len(need) if need and len(qt) and shared / len(qt) >= MIN_COVER else 0.0
            cos = float(qv @ e.vector) if qv is not None and e.vector is not None else None
            ok = lex >= self.cfg.match_threshold or (cos is not None and cos >= self.cfg.embed_threshold)
            score, rank = lex + (cos or 0.0), int(e.prediction.source != "retrieved")  # predictions first
            if ok and (rank, score) > (best_rank, best_s):
                best, best_s, best_rank = e, score, rank
        return best, max(best_s, 0.0)

    def lookup(self, key: str, query: str) -> Served:
        """Serve ``query`` from task ``key``'s cache, waiting at most wait_ms for its preparation (eq. 13);
        ``.result`` is None when it must be retrieved normally (``.reason`` says why)."""
        t0 = time.perf_counter()
        task = self.task(key)
        self.stats.queries += 1
        if task is None:
            return Served(None, reason="no task")
        task.last_seen = self.clock()
        entry, sim = self.match(task, query)
        if entry is None:
            return Served(None, similarity=sim, reason="no match")
        prev = entry.previous
        if prev is not None and not entry.ready.is_set():
            entry = prev  # being prepared again after writes: the earlier result meanwhile
        if not entry.ready.is_set() and not self.running:  # its worker died: nothing will come; no wait
            self.stats.late += 1
            self._ensure_thread()  # (a new worker takes what is still queued, for the next queries)
            return Served(None, entry.prediction, sim, (time.perf_counter() - t0) * 1000, reason="late")
        ready = entry.ready.wait(self.cfg.wait_ms / 1000.0)
        wait = (time.perf_counter() - t0) * 1000
        if not ready or entry.result is None:
            self.stats.late += 1
            return Served(None, entry.prediction, sim, wait, reason="late" if not ready else "failed")
        saved = max(0.0, float(getattr(entry.result, "elapsed_ms", entry.prep_ms)) - wait)
        self.stats.hits += 1
        self.stats.wait_ms += wait
        self.stats.wait_saved_ms += saved
        return Served(entry.result, entry.prediction, sim, wait, saved)


def build(config, prepare: Callable[[str, tuple, Any], Any], retriever, tree, client=None) -> Foresight:
    """The Foresight of one workspace: predictions matched with the retriever's query vectors (the prompt's
    vector is the one retrieval needs too, so matching costs no model run of its own), and the retriever's
    pending embeddings done in small batches when idle (a hook never waits long)."""
    emb = retriever.embedder
    return Foresight(config.foresight, prepare,
                     embed=(lambda texts: [retriever.embed_query(t) for t in texts]) if emb is not None else None,
                     tree=tree, client=client, idle=lambda: retriever.embed_pending(batch=4))


class ForesightRecall:
    """A query of the agent served from Foresight's cache when a prediction matches (or, for the agent's own
    queries, from a result retrieved earlier in this turn), else retrieved; both traced.

    ``recall(query, ctx, when)``: the hook's own retrieval; ``directory(project, when)``: the topic
    directory predictions are made over; ``memory_root``: where the traces go; ``forgotten()``: the ids the
    user told memory to forget: a prepared result that holds one is not served (it is retrieved again).
    """

    def __init__(self, fs: Foresight, recall: Callable, directory: Callable, memory_root,
                 forgotten: Callable[[], frozenset] = frozenset):
        self.fs, self.recall, self.directory, self.memory_root = fs, recall, directory, memory_root
        self.forgotten = forgotten

    def __call__(self, query: str, ctx, when: float, *, start_task: bool = True):
        """(result, access). ``start_task``: a prompt (the memory tools pass False); the first prompt of a task
        starts its predictions, after its own recall so the thread does not compete with it."""
        fs, key = self.fs, ctx.session_id or ctx.run_id or "-"
        if fs.task(key) is None:
            access = Served(None, reason="no task")
            result = self.recall(query, ctx, when)
            if start_task:
                try:
                    fs.begin(key, query, self.directory(ctx.project, when), (ctx, when))
                    fs.remember(key, query, result)
                    access.reason = "task start"
                except Exception:  # predictions are best effort
                    log.exception("memtier foresight could not start task %s", key)
            self._trace(query, result, access, ctx, when, served=False)
            return result, access
        if start_task:  # a prompt: what was retrieved for the last one predates what the user just said
            fs.forget_retrieved(key)
        access = fs.lookup(key, query)
        if access.hit and self._holds_forgotten(access.result):
            fs.forget_retrieved(key)
            access = Served(None, access.prediction, access.similarity, access.wait_ms, reason="forgotten")
        if not access.hit:
            result = self.recall(query, ctx, when)
            try:  # a later query of the same need is served from it
                fs.remember(key, query, result)
            except Exception:
                log.exception("memtier foresight could not keep a result of task %s", key)
        else:
            result = access.result
        self._trace(query, result, access, ctx, when, served=access.hit)
        return result, access

    def _holds_forgotten(self, result) -> bool:
        gone = self.forgotten()
        return bool(gone) and any(h.id in gone for h in [*result.hits, *getattr(result, "candidates", [])])

    def _trace(self, query: str, result, access: Served, ctx, when: float, *, served: bool) -> None:
        from ..store import traces

        common = dict(ts=when, run_id=ctx.run_id, agent_id=ctx.agent_id, session_id=ctx.session_id, query=query)
        if served:  # a served result is traced like a recall (what was delivered), then as a Foresight access
            traces.append(self.memory_root, ctx.agent_id, traces.recall_record(
                **common, mode=f"foresight: {result.mode}", stage1_sessions=result.stage1_sessions,
                delivered=result.trace_rows(), left_out=result.left_out, tokens=result.tokens,
                elapsed_ms=access.wait_ms), when)
        traces.append(self.memory_root, ctx.agent_id, traces.foresight_record(
            **common, outcome=access.reason, prediction=access.prediction.query if access.prediction else "",
            similarity=access.similarity, wait_ms=access.wait_ms, wait_saved_ms=access.wait_saved_ms,
            tokens=result.tokens if result is not None else 0), when)
