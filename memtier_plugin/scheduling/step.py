"""Memory for the step (issue 27, MemSidecar §3.2): a tool result retrieved on in the background, delivered at the
agent's next decision.

A tool outcome is worth a retrieval when it carries content the run has not had yet (:func:`tool_query`): an
error (a failed call, or a result that reports one: ``ok: false``, a non-zero exit code, an ``error`` or
``stderr`` text) with the names of the call, or names (hosts, addresses, identifiers) its result brings that the
run has not seen. The retrieval runs on Foresight's background thread (:meth:`.foresight.Foresight.submit`), so
post_tool never waits for it. :class:`StepRecall` keeps it, per task, until the agent's next decision takes it
(:meth:`StepRecall.take`): the next before_prompt_build merges it into the same block and budget on the
calibrated scale (:func:`merge`), or, when it is ready by then, the next pre_tool hands it over as a supplement
(:func:`supplement`). Each result is delivered once, and an item once per task; items of the task's own session
(the agent has them already) are left out; what reaches the agent cleared the calibrated threshold in its own
retrieval (recall/calibration.py), and still competes for the prompt's k and token budget.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..recall.packing import pack, render
from ..redact import redact

#: Names a tool result may bring: host names, IPv4 addresses, identifiers of letters and digits joined by - or _.
NAME = re.compile(r"(?<![\w.-])(?:\d{1,3}(?:\.\d{1,3}){3}|[A-Za-z][\w-]*(?:\.[A-Za-z][\w-]*)+|"
                  r"(?=[\w-]*[A-Za-z])(?=[\w-]*\d)[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+)(?![\w-])")
MAX_NAMES = 6  # names a query holds
MAX_TEXT = 600  # characters of an error a query holds
MAX_PENDING = 4  # step retrievals waiting per task (the oldest goes)
MAX_TASKS = 64
PENDING_TTL_S = 600.0  # a step retrieval nobody took within this is dropped
FAILED_KEYS = ("error", "stderr", "failure", "reason", "message")
STEP_MODE = "step: a tool result"  # the mode of a step delivery's recall trace record
SKIP_TOOLS = ("memory_search", "memory_get")  # the agent's own memory tools: their answers are memory already


def _text(value: Any, limit: int = 4000) -> str:
    """The words of a tool payload (keys and values), bounded."""
    out: list[str] = []

    def walk(v: Any, depth: int) -> None:
        if sum(map(len, out)) > limit or depth > 6:
            return
        if isinstance(v, dict):
            for k, x in list(v.items())[:50]:
                out.append(str(k))
                walk(x, depth + 1)
        elif isinstance(v, (list, tuple)):
            for x in list(v)[:50]:
                walk(x, depth + 1)
        elif v is not None:
            out.append(str(v))
    walk(value, 0)
    return " ".join(out)[:limit]


def reported_error(result: Any) -> str:
    """The error a successful call's result reports (``ok: false``, a non-zero exit code, an error text), or ""."""
    if not isinstance(result, dict):
        return ""
    failed = result.get("ok") is False or result.get("success") is False or \
        (isinstance(result.get("exit_code"), int) and not isinstance(result.get("exit_code"), bool)
         and result["exit_code"] != 0)
    texts = [str(result[k]) for k in FAILED_KEYS if isinstance(result.get(k), str) and result[k].strip()]
    return " ".join(texts) if texts and (failed or "error" in result or "stderr" in result) else \
        ("failed" if failed else "")


def names(text: str) -> list[str]:
    """The names in ``text``, in order, each once (lower-cased)."""
    seen: dict[str, None] = {}
    for m in NAME.finditer(text):
        seen.setdefault(m.group(0).lower().strip("._-"), None)
    return [n for n in seen if n]


def tool_query(tool: str, params: Any, result: Any, error: Any, known: str) -> tuple[str, tuple[str, ...]]:
    """What a tool outcome is worth retrieving on, redacted, and the names an item must hold to be delivered for
    it; ("", ()) for nothing. An error (the host's, or one the result reports): the tool's name, the error and the
    names of the call, any item that clears the threshold. Else the names the result brings that ``known`` (the
    run so far: its prompts and earlier calls) does not hold, with the tool's name: only items naming one of them
    (a retrieval on a bare name says nothing about an item that does not name it)."""
    if not tool or tool in SKIP_TOOLS:
        return "", ()
    call_names = names(_text(params))[:MAX_NAMES]
    failure = str(error) if error else reported_error(result)
    if failure.strip():
        text = " ".join(failure.split())[:MAX_TEXT]
        return redact(" ".join([tool, text, *[n for n in call_names if n not in text.lower()]]))[0], ()
    seen = {n for n in names(known)} | set(call_names) | {w.lower() for w in known.split()}
    new = [n for n in names(_text(result)) if n not in seen][:MAX_NAMES]
    if not new:
        return "", ()
    return redact(" ".join([tool, *new]))[0], tuple(new)


@dataclass
class Pending:
    """One step retrieval: its query, the call it answers, and the background entry (``ready``, ``result``)."""

    query: str
    call_id: str
    entry: Any
    created: float
    names: tuple = ()  # an item must name one of these to be delivered for it (none: any item)

    def hits(self) -> list:
        """The retrieval's items that may be delivered for it."""
        hits = list(self.entry.result.hits) if self.entry.result is not None else []
        return [h for h in hits if not self.names or any(n in h.content.lower() for n in self.names)]


@dataclass
class _Task:
    pending: list[Pending] = field(default_factory=list)
    delivered: set = field(default_factory=set)  # item ids the task's step retrievals delivered
    last_seen: float = 0.0


class StepRecall:
    """The step retrievals of one Memory, per task (session) key; thread-safe.

    ``submit(query, job)`` queues one background retrieval and returns its entry (``ready`` event, ``result``,
    ``error``), or None when it was dropped; ``clock`` is monotonic seconds (injectable for tests).
    """

    def __init__(self, submit: Callable[[str, Any], Any], *, clock: Callable[[], float] = time.monotonic):
        self.submit, self.clock = submit, clock
        self._tasks: dict[str, _Task] = {}
        self._lock = threading.Lock()
        self.dropped = 0

    def _task(self, key: str, now: float) -> _Task:
        for k in [k for k, t in self._tasks.items() if now - t.last_seen > PENDING_TTL_S]:
            del self._tasks[k]
        while len(self._tasks) >= MAX_TASKS and key not in self._tasks:
            del self._tasks[min(self._tasks, key=lambda k: self._tasks[k].last_seen)]
        task = self._tasks.setdefault(key, _Task())
        task.last_seen = now
        return task

    def after_tool(self, key: str, query: str, call_id: str, job: Any, names: tuple = ()) -> bool:
        """Queue the retrieval of ``query`` for task ``key`` (never waits); True when queued."""
        if not query:
            return False
        entry = self.submit(query, job)
        if entry is None:
            self.dropped += 1
            return False
        with self._lock:
            task = self._task(key, self.clock())
            task.pending.append(Pending(query, call_id, entry, self.clock(), tuple(names)))
            del task.pending[:-MAX_PENDING]
        return True

    def pending(self, key: str) -> int:
        with self._lock:
            t = self._tasks.get(key)
            return len(t.pending) if t else 0

    def wait(self, key: str, timeout_s: float) -> bool:
        """Wait at most ``timeout_s`` until every step retrieval of task ``key`` is done; True when they are."""
        with self._lock:
            task = self._tasks.get(key)
            waiting = list(task.pending) if task else []
        deadline = time.perf_counter() + timeout_s
        return all(p.entry.ready.wait(max(0.0, deadline - time.perf_counter())) for p in waiting)

    def take(self, key: str, wait_s: float = 0.0) -> list[Pending]:
        """The task's step retrievals that are done, each taken once (failed ones are dropped); waits at most
        ``wait_s`` in all for those still running (0: never waits). Those not done stay for the next decision."""
        with self._lock:
            task = self._tasks.get(key)
            if task is None or not task.pending:
                return []
            waiting = list(task.pending)
        deadline = time.perf_counter() + wait_s
        for p in waiting:
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            p.entry.ready.wait(left)
        with self._lock:
            done = [p for p in task.pending if p.entry.ready.is_set()]
            task.pending = [p for p in task.pending if not p.entry.ready.is_set()]
        return [p for p in done if p.entry.result is not None]

    def fresh(self, key: str, hits: list, session_id: str, had: set | frozenset = frozenset()) -> list:
        """``hits`` the task has not had: not of its own session, not delivered by an earlier step retrieval,
        not among ``had`` (the ids the run was given already)."""
        with self._lock:
            task = self._tasks.get(key)
            done = set(task.delivered) | set(had) if task else set(had)
        return [h for h in hits if h.id not in done and not (session_id and h.session_id == session_id)]

    def collect(self, key: str, wait_s: float, session_id: str, had: Callable[[], set]) -> tuple[list, str]:
        """(the items of task ``key``'s finished step retrievals it has not had, each retrieval taken once; their
        queries). ``had()``: the ids the run was given already (read only when something is taken)."""
        taken = self.take(key, wait_s)
        if not taken:
            return [], ""
        return self.fresh(key, [h for p in taken for h in p.hits()], session_id, had()), \
            " | ".join(p.query for p in taken)

    def delivered(self, key: str, ids: list[str]) -> None:
        with self._lock:
            task = self._tasks.get(key)
            if task is not None:
                task.delivered.update(ids)

    def end(self, key: str) -> None:
        """The task is over: what it still waits for goes."""
        with self._lock:
            self._tasks.pop(key, None)


def _by_probability(hits: list) -> list:
    """Best first on the calibrated scale (an item without a probability last), each id and text once."""
    seen, seen_text, out = set(), set(), []
    for h in sorted(hits, key=lambda h: -(h.probability if h.probability is not None else -1.0)):
        text = " ".join(h.content.split()).casefold()
        if h.id in seen or text in seen_text:
            continue
        seen.add(h.id)
        seen_text.add(text)
        out.append(h)
    return out


def merge(result: Any, step_hits: list, *, k: int, budget: int, max_chars: int) -> Any:
    """The prompt's recall result with ``step_hits`` merged in: one list best first by calibrated probability,
    packed again within the prompt's k and token budget. ``result`` may be None (the prompt's recall failed)."""
    if not step_hits:
        return result
    own = list(result.hits) if result is not None else []
    packed = pack(_by_probability(own + step_hits), k, budget, max_chars)
    if result is None:
        return _result(packed, step_hits)
    return dataclasses.replace(result, hits=packed.hits, left_out=result.left_out + packed.left_out,
                               tokens=packed.tokens)


def _result(packed, candidates: list):
    from ..recall.retriever import RecallResult

    return RecallResult("", packed.hits, packed.left_out, packed.tokens, STEP_MODE, [], 0.0, list(candidates))


def supplement(step_hits: list, *, k: int, budget: int, max_chars: int) -> tuple[str, Any]:
    """A pre_tool supplement of ``step_hits`` (best first, within k and the token budget): (its text or "", the
    RecallResult it delivers)."""
    packed = pack(_by_probability(step_hits), k, budget, max_chars)
    text = "Memory about the last tool result:\n" + render(packed.hits) if packed.hits else ""
    return text, _result(packed, step_hits)
