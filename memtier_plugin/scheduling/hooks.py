"""Hooks: memory entries bound to events by predicates, each fired at most once per task.

MemSidecar §3.3 and Algorithm A1. A hook is h_j = (m_j, E_j, χ_j): a bound
entry, the event types it listens to (``query``, ``pre_tool``, ``post_tool``)
and a predicate over the visible state and the proposed action
(:mod:`.predicates`). At an event, every valid hook not yet delivered in this
task whose event type matches and whose predicate holds returns its entry; the
entries are merged, deduplicated and packed (at most 6 entries and 6,000
characters), and the hooks behind them join the task's fired set (eq. 10).

Where hooks come from:

* people write them in ``<workspace>/memory/hooks/*.yaml`` (or ``.yml``/``.json``):
  :class:`HookFiles` loads each file on its own (a bad one is skipped with one
  line naming the file, the hook and the key; the others load) and reloads a
  file when its mtime, size or inode changes. The scheduler does it in a
  background thread (at start and when an event finds the folder due for a
  look): an event never waits for a parse, it matches the last loaded set;
* memory proposes them when it is written (:mod:`.derived`: a standing rule's
  own hook, stored beside the node, retired with it), a source the scheduler
  polls with the files (:meth:`HookScheduler.add_source`); other sources are set
  with :meth:`HookScheduler.set_hooks`. A person's file wins on conflict: a
  hook of another source bound to an entry a file's hook binds is left out.

Events: ``query`` (a prompt), ``pre_tool`` (a proposed call) and ``post_tool``
(a result: the caller puts ``error``/``result`` and ``success`` in the state;
what it delivers is kept for the task's next decision, :meth:`HookScheduler.defer`).
A hook derived from a standing rule's violation ``hold`` s the call: it is not
marked fired, so it holds every such call.

:class:`HookScheduler` holds the hooks of one Memory, indexed by event type and
tool name (or another value a predicate requires, such as ``state.project``)
so an event evaluates only the hooks that could hold for it, and the per-task fired sets (a task is idle-expired after an hour).
One event walks at most EVENT_CANDIDATES of them and spends at most EVENT_STEPS evaluation steps.
"""

from __future__ import annotations

import gc
import heapq
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import islice
from operator import itemgetter
from pathlib import Path
from typing import Any, Callable, Iterable

from ..safe_yaml import parse_yaml
from ..errors import ConfigError
from .predicates import (
    EVENTS, Event, HookError, Predicate, _Bad, _show, compile_predicate, index_key,
)
from ..store.paths import is_valid_id

log = logging.getLogger(__name__)

HOOKS_DIR = "hooks"  # under the memory root
SUFFIXES = (".yaml", ".yml", ".json")
MAX_FILE_BYTES = 1 << 20
MAX_HOOKS_PER_FILE = 1000
MAX_FILES = 256
MAX_ENTRY = 2000  # characters of an entry a hook carries (a delivery holds 6,000)
YAML_DEPTH = 24  # hooks / [i] / when / 8 levels of all/any/not / leaf / operator / [i]
YAML_VALUES = 200_000  # values after alias expansion (1,000 hooks of ~64 nodes)
EVENT_STEPS = 20_000  # evaluation steps one event may spend on all its hooks (~5-10 ms at worst)
#: how long an event waits for the user's hooks files before their first load has finished (a process just
#: started under load: a person's hook must hold from the first call). Never again after it: later loads
#: run beside the events, which match the last loaded set.
FIRST_LOAD_WAIT_S = 0.5
EVENT_CANDIDATES = 5_000  # hooks one event may walk, in load order (the walk, not only evaluation, is bounded)
MAX_ENTRIES, MAX_CHARS = 6, 6000  # MemSidecar's delivery budget
TASK_TTL_S = 3600.0  # MemSidecar's task lifetime
MAX_TASKS = 1024
HOOK_KEYS = ("id", "entry", "entry_id", "events", "when")
_HOOK_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class Hook:
    """h_j = (m_j, E_j, χ_j): the bound entry (its text, or the id of a memory entry), events, predicate."""

    key: str  # unique among loaded hooks: "<file name>:<id>", "rule:<node id>", "model:<node id>:<id>"
    id: str
    events: frozenset
    predicate: Predicate
    entry: str = ""  # the text delivered ("" when only entry_id names it)
    entry_id: str = ""  # the memory entry it is bound to (gk-…, sk-…, an episode id)
    source: str = ""  # the file it came from, or "rule gk-…" / "model gk-…"
    hold: bool = False  # a standing rule's violation: pre_tool holds the call (only hooks derived from memory)


def parse_hook(data: Any, where: str, *, index: int = 0, entry: str | None = None, entry_id: str | None = None,
               key_prefix: str = "", source: str = "", hold: bool = False) -> Hook:
    """Check one hook mapping against the schema and compile its predicate.

    ``where`` names the file (or "rule gk-…"); every problem is one HookError line
    ``<where>: hook '<id>': <key>: <what was expected>``. ``entry``/``entry_id``
    given here bind the hook to that entry (rules and model proposals), and the
    mapping may then not name one itself.
    """
    label = f"hooks[{index}]"
    if not isinstance(data, dict):
        raise HookError(f"{where}: {label}: expected a mapping with {', '.join(HOOK_KEYS)}, got {_show(data)}")
    hid = data.get("id")
    if not (isinstance(hid, str) and _HOOK_ID.fullmatch(hid)):
        raise HookError(f"{where}: {label}: id: expected letters, digits, '.', '_' or '-' (starting with a letter "
                        f"or digit, at most 64), got {_show(hid)}")
    at = f"{where}: hook {hid!r}"
    bound = entry is not None or entry_id is not None
    for k in data:
        if k not in HOOK_KEYS or (bound and k in ("entry", "entry_id")):
            allowed = [x for x in HOOK_KEYS if not (bound and x in ("entry", "entry_id"))]
            raise HookError(f"{at}: unknown key {_show(k)}; expected one of: {', '.join(allowed)}")
    if not bound:
        entry, entry_id = data.get("entry"), data.get("entry_id")
        if (entry is None) == (entry_id is None):
            raise HookError(f"{at}: entry: give exactly one of entry (the text) or entry_id (a memory entry's id)")
    entry = "" if entry is None else entry
    entry_id = "" if entry_id is None else entry_id
    if not isinstance(entry, str) or (not bound and entry_id == "" and not entry.strip()):
        raise HookError(f"{at}: entry: expected non-empty text, got {_show(entry)}")
    if len(entry) > MAX_ENTRY:
        raise HookError(f"{at}: entry: {len(entry)} characters; at most {MAX_ENTRY}")
    if entry_id and not is_valid_id(entry_id):
        raise HookError(f"{at}: entry_id: expected a memory entry id (letters, digits, '.', '_' or '-'), "
                        f"got {_show(entry_id)}")
    events = data.get("events")
    if not isinstance(events, list) or not events or not all(isinstance(e, str) and e in EVENTS for e in events):
        raise HookError(f"{at}: events: expected a non-empty list of {', '.join(EVENTS)}, got {_show(events)}")
    if "when" not in data:
        raise HookError(f"{at}: when: missing (the predicate deciding when the entry is delivered)")
    try:
        predicate = compile_predicate(data["when"], "when")
    except _Bad as exc:
        raise HookError(f"{at}: {exc}") from None
    except RecursionError:
        raise HookError(f"{at}: when: nested too deeply") from None
    return Hook(f"{key_prefix}{hid}", hid, frozenset(events), predicate, entry.strip(), entry_id, source or where,
                hold)


class Pacer:
    """A checkpoint for work in a background thread: after ``work_s`` of running it sleeps ``rest_s``, so the
    threads serving events get the interpreter lock within ``work_s`` (a load never holds it for long).

    At each pause what is alive also leaves the cyclic collector's generations (``gc.freeze``, O(1)): a load
    allocates enough to trigger full collections, and one of those walked the whole heap while holding the
    lock (measured with a 4 MiB folder: 85-340 ms in which no event ran). Frozen objects are still freed by
    reference counting; :meth:`release` (at the end of the load) hands them back to the collector, so cyclic
    garbage frozen during a load is collected later, as it would have been without it."""

    def __init__(self, work_s: float = 0.0005, rest_s: float = 0.0005):
        self.work_s, self.rest_s = work_s, rest_s
        self.froze = False
        self._since = time.perf_counter()

    def release(self) -> None:
        """The load is over: what was frozen goes back to the cyclic collector (the process's own garbage too)."""
        if self.froze:
            gc.unfreeze()
            self.froze = False

    def __call__(self) -> None:
        if time.perf_counter() - self._since >= self.work_s:
            gc.freeze()
            self.froze = True
            time.sleep(self.rest_s)
            self._since = time.perf_counter()


def parse_hooks(data: Any, where: str, key_prefix: str = "", pace: Callable[[], None] | None = None) -> list[Hook]:
    """Every hook of one parsed file ``{"hooks": [...]}``; the first problem raises one HookError line."""
    if data is None:
        return []
    if not isinstance(data, dict):
        raise HookError(f"{where}: top level: expected a mapping with 'hooks', got {_show(data)}")
    for k in data:
        if k != "hooks":
            raise HookError(f"{where}: unknown key {_show(k)}; expected: hooks")
    items = data.get("hooks")
    if items is None:
        return []
    if not isinstance(items, list):
        raise HookError(f"{where}: hooks: expected a list of hooks, got {_show(items)}")
    if len(items) > MAX_HOOKS_PER_FILE:
        raise HookError(f"{where}: hooks: {len(items)} hooks; at most {MAX_HOOKS_PER_FILE} per file")
    out, seen = [], set()
    for i, item in enumerate(items):
        if pace is not None:
            pace()
        hook = parse_hook(item, where, index=i, key_prefix=key_prefix)
        if hook.id in seen:
            raise HookError(f"{where}: hook {hook.id!r}: id: given twice in this file")
        seen.add(hook.id)
        out.append(hook)
    return out


def load_hooks_file(path: Path | str, pace: Callable[[], None] | None = None) -> list[Hook]:
    """The hooks of one file (YAML or JSON, read with the safe loader); HookError names what is wrong.
    ``pace``: called as it goes (a :class:`Pacer` in a background load)."""
    path = Path(path)
    return parse_hooks(read_hooks_data(path, pace), str(path), key_prefix=f"{path.name}:", pace=pace)


def read_hooks_data(path: Path, pace: Callable[[], None] | None = None) -> Any:
    """One hooks file's data, read within the bounds (size, UTF-8, YAML depth and values); HookError otherwise."""
    where = str(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise HookError(f"{where}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise HookError(f"{where}: larger than {MAX_FILE_BYTES // (1 << 20)} MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HookError(f"{where}: not UTF-8 (byte {exc.start})") from None
    try:
        return parse_yaml(text, where, max_depth=YAML_DEPTH, max_nodes=YAML_VALUES, checkpoint=pace)
    except ConfigError as exc:
        raise HookError(str(exc)) from None


CHILD_TIMEOUT_S = 300.0
#: the files of a load go to the child only from this many bytes on: a child interpreter costs 0.2-1 s to start
#: (more under load), while a few KB of hooks parse here, paced, in milliseconds
CHILD_MIN_BYTES = 64 * 1024


def read_in_child(paths: list[str]) -> dict[str, bytes] | None:
    """Each file's pickled (True, data) or (False, its one-line problem), read by :func:`read_hooks_data` in a
    child process: the YAML parse (most of a load's work) then never holds this process's interpreter lock
    nor fills its heap; each file is unpickled when its turn comes (:func:`_unpickled`). None when the child
    could not do it (the caller parses here instead)."""
    import pickle
    import subprocess
    import sys

    pkg_parent = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (pkg_parent, os.environ.get("PYTHONPATH")) if p)}
    try:
        proc = subprocess.run([sys.executable, "-c", "from memtier_plugin.scheduling.hooks import _child; _child()",
                               *paths], capture_output=True, timeout=CHILD_TIMEOUT_S, env=env, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            log.warning("hooks: the parsing process exited %d (%s); parsing here", proc.returncode,
                        (proc.stderr.decode("utf-8", "replace").strip().splitlines() or ["no message"])[-1][:300])
            return None
        out = pickle.loads(proc.stdout)  # our own child's answer: {path: pickled bytes}, unpickled one by one
    except (OSError, subprocess.SubprocessError, pickle.UnpicklingError, EOFError) as exc:
        log.warning("hooks: the parsing process failed (%s); parsing here", type(exc).__name__)
        return None
    return out if isinstance(out, dict) and set(out) == set(paths) else None


def _unpickled(raw: bytes) -> tuple[bool, Any]:
    import pickle

    try:
        got = pickle.loads(raw)
    except Exception as exc:  # our child's answer, so a bug: the file is skipped with one line
        return False, f"the parsing process's answer could not be read ({type(exc).__name__})"
    return got if isinstance(got, tuple) and len(got) == 2 else (False, "the parsing process's answer is malformed")


def _child() -> None:
    """The parsing process: argv are hooks files; stdout the pickled {path: (ok, data or problem)}."""
    import pickle
    import sys

    out: dict[str, bytes] = {}
    for path in sys.argv[1:]:
        try:
            got: tuple[bool, Any] = (True, read_hooks_data(Path(path)))
        except HookError as exc:
            got = (False, str(exc))
        out[path] = pickle.dumps(got, protocol=pickle.HIGHEST_PROTOCOL)
    sys.stdout.buffer.write(pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.flush()


class HookFiles:
    """``<memory root>/hooks/*.yaml``: loaded file by file, reloaded when a file changes."""

    def __init__(self, directory: Path | str):
        self.dir = Path(directory)
        self._files: dict[str, tuple[tuple, list[Hook]]] = {}  # name -> (stat signature, hooks)
        self.problems: dict[str, str] = {}  # name -> the one line saying why it was skipped

    def refresh(self, pace: Callable[[], None] | None = None, in_child: bool = False) -> bool:
        """Load new and changed files, forget removed ones; True when the set of hooks changed. ``pace``: called
        as the files are parsed; ``in_child``: their YAML is parsed in a child process (:func:`read_in_child`) when
        they hold ``CHILD_MIN_BYTES`` or more."""
        try:
            entries = sorted((e for e in os.scandir(self.dir) if e.name.endswith(SUFFIXES)
                              and not e.name.startswith(".")), key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            entries = []
        except OSError as exc:
            log.warning("%s: cannot list hooks: %s", self.dir, exc.strerror or exc)
            return False
        changed = False
        names = set()
        todo = []
        for e in entries[:MAX_FILES]:
            try:
                st = e.stat()
            except OSError:
                continue
            if not e.is_file():
                continue
            names.add(e.name)
            sig = (st.st_mtime_ns, st.st_size, st.st_ino)
            old = self._files.get(e.name)
            if old is None or old[0] != sig:
                todo.append((e.name, e.path, sig))
        big = sum(sig[1] for _, _, sig in todo) >= CHILD_MIN_BYTES
        read = read_in_child([path for _, path, _ in todo]) if in_child and todo and big else None
        for name, path, sig in todo:
            changed = True
            try:
                if read is None:
                    hooks = load_hooks_file(path, pace)
                else:
                    ok, data = _unpickled(read[path])
                    if not ok:
                        raise HookError(str(data))
                    hooks = parse_hooks(data, path, key_prefix=f"{name}:", pace=pace)
                self.problems.pop(name, None)
            except HookError as exc:
                hooks = []
                self.problems[name] = str(exc)
                log.warning("hooks file skipped: %s", exc)
            self._files[name] = (sig, hooks)
        if len(entries) > MAX_FILES:
            self.problems["*"] = f"{self.dir}: {len(entries)} hooks files; only the first {MAX_FILES} are read"
        for gone in set(self._files) - names:
            del self._files[gone]
            self.problems.pop(gone, None)
            changed = True
        return changed

    @property
    def hooks(self) -> list[Hook]:
        return [h for name in sorted(self._files) for h in self._files[name][1]]


# ---- scheduling -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Match:
    """One delivered entry and the hooks that matched it (merged when several bind the same text)."""

    entry: str
    entry_id: str
    hooks: tuple  # keys of the hooks behind it
    source: str  # where the first of them came from
    hold: bool = False  # one of them marks a standing rule's violation (pre_tool holds the call)


@dataclass
class Delivery:
    """What one event delivered, and what it left out and why."""

    matches: list[Match] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (hook key, reason)
    evaluated: int = 0  # predicates evaluated
    steps: int = 0  # evaluation steps spent
    unwalked: int = 0  # candidate hooks past the event's candidate bound (not looked at; they may fire later)


@dataclass
class _Task:
    fired: set = field(default_factory=set)
    deferred: list = field(default_factory=list)  # post_tool matches waiting for the agent's next decision
    last_seen: float = 0.0


@dataclass(frozen=True)
class _Index:
    """Hooks per event type, each under one gate of its predicate (a value it requires), in load order.

    A hook whose predicate requires ``tool in {deploy, release}`` is filed under
    the tool names; one requiring ``state.project == payments`` under that key of
    that dimension; one without such a gate is evaluated at every event of its type.
    """

    gated: dict  # event -> {(source, path) -> {key -> [(order, hook)]}}
    ungated: dict  # event -> [(order, hook)]
    hooks: tuple  # all of them, in load order


def _gate(hook: Hook):
    """The gate a hook is filed under: its tool names when it has them, else the state gate, else an arg gate."""
    gates = hook.predicate.gates
    if ("tool", ()) in gates:
        return ("tool", ()), gates[("tool", ())]
    for source in ("state", "arg"):
        dims = sorted((len(keys), dim) for dim, keys in gates.items() if dim[0] == source)
        if dims:
            dim = dims[0][1]
            return dim, gates[dim]
    return None


def _build_index(hooks: list[Hook], pace: Callable[[], None] | None = None) -> _Index:
    gated: dict = {e: {} for e in EVENTS}
    ungated: dict = {e: [] for e in EVENTS}
    for order, h in enumerate(hooks):
        if pace is not None and order % 64 == 0:
            pace()
        gate = _gate(h)
        for e in h.events:
            if gate is None:
                ungated[e].append((order, h))
            else:
                dim, keys = gate
                buckets = gated[e].setdefault(dim, {})
                for k in keys:
                    buckets.setdefault(k, []).append((order, h))
    return _Index(gated, ungated, tuple(hooks))


def _candidates(idx: _Index, ev: Event, limit: int = EVENT_CANDIDATES) -> tuple[list, int]:
    """(the first ``limit`` (order, hook) of the hooks whose gate the event passes and the ungated ones, in load
    order; how many there are in all). Each list is in load order already: merged lazily, never sorted whole."""
    lists = [idx.ungated[ev.type]] if idx.ungated[ev.type] else []
    for dim, buckets in idx.gated[ev.type].items():
        if dim[0] == "tool":
            key = ev.tool
        else:
            found, value = ev.lookup(dim[0], dim[1])
            key = index_key(value) if found else None
        if key is not None:
            hit = buckets.get(key)
            if hit:
                lists.append(hit)
    total = sum(len(lst) for lst in lists)
    if len(lists) <= 1:
        return (lists[0][:limit] if lists else []), total
    if total <= limit:  # within the bound: one sort in C is the fastest merge
        return sorted((p for lst in lists for p in lst), key=itemgetter(0)), total
    return list(islice(heapq.merge(*lists, key=itemgetter(0)), limit)), total


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


class HookScheduler:
    """The hooks of one Memory and the task-local fired sets (MemSidecar Algorithm A1).

    ``match`` is the one entry point for query, pre_tool and post_tool events;
    they share each task's fired set. Thread-safe. ``clock`` (seconds, monotonic)
    is injectable for tests.

    The hooks files are parsed in a background thread, never in an event: :meth:`load_in_background` (at
    start) and ``match`` when the folder is due for a look (every ``refresh_s``) start one unless one runs;
    an event meanwhile matches the last loaded set. Before the files' first load has finished an event waits
    for it, at most ``FIRST_LOAD_WAIT_S`` (the derived sources are not waited for). :meth:`refresh` loads
    in the caller's thread (tools, benchmarks); :meth:`wait_loaded` waits for a background load.
    """

    def __init__(self, hooks_dir: Path | str | None = None, *, max_entries: int = MAX_ENTRIES,
                 max_chars: int = MAX_CHARS, task_ttl_s: float = TASK_TTL_S, max_tasks: int = MAX_TASKS,
                 event_steps: int = EVENT_STEPS, event_candidates: int = EVENT_CANDIDATES, refresh_s: float = 1.0,
                 resolve_entry: Callable[[str], str | None] | None = None,
                 skip: Callable[[str], bool] | None = None, clock: Callable[[], float] = time.monotonic):
        """``skip(id)``: True for an id the user told memory to forget (store/tombstones.py): a hook whose
        key or bound entry it names is never delivered."""
        self.skip = skip
        self.files = HookFiles(hooks_dir) if hooks_dir is not None else None
        self.max_entries, self.max_chars = max_entries, max_chars
        self.task_ttl_s, self.max_tasks, self.event_steps = task_ttl_s, max_tasks, event_steps
        self.event_candidates = event_candidates
        self.refresh_s = refresh_s
        self.resolve_entry = resolve_entry
        self.clock = clock
        self._sources: dict[str, list[Hook]] = {}  # replaced whole by set_hooks
        self._loaders: dict[str, Callable[[], list[Hook] | None]] = {}  # polled with the files (add_source)
        self._sources_version = 0
        self._file_hooks: list[Hook] = []  # the files' hooks as the last finished load left them
        self._index = _build_index([])  # replaced whole: an event reads one consistent set without a lock
        self._tasks: OrderedDict[str, _Task] = OrderedDict()
        self._lock = threading.Lock()  # tasks
        self._load_lock = threading.Lock()  # files (held while they are parsed)
        self._index_lock = threading.Lock()  # sources, the index (held only to rebuild it)
        self._loader_lock = threading.Lock()  # starting the background load
        self._loader: threading.Thread | None = None
        self._next_refresh = self._next_warning = float("-inf")
        self._files_loaded = threading.Event()  # the files' first load finished (or there is no folder)
        if self.files is None:
            self._files_loaded.set()

    # ---- the hooks ---------------------------------------------------------------------------------
    def refresh(self, *, wait: bool = True, pace: Callable[[], None] | None = None, in_child: bool = False) -> None:
        """Reload changed hooks files now, in this thread (events start it in the background instead, at most
        every ``refresh_s`` seconds); ``wait=False`` returns at once when another thread is at it. ``pace``:
        called as the files are parsed (the background load passes a :class:`Pacer`)."""
        if not self._load_lock.acquire(blocking=wait):
            return
        try:
            self._next_refresh = self.clock() + self.refresh_s
            if self.files is not None and self.files.refresh(pace, in_child):
                hooks = self.files.hooks
                with self._index_lock:
                    sources, version = self._sources, self._sources_version
                index = self._index_of(hooks, sources, pace)  # built aside: set_hooks never waits for it
                with self._index_lock:
                    self._file_hooks = hooks
                    self._index = index if version == self._sources_version else self._index_of(hooks, self._sources)
            self._files_loaded.set()
            # after the files: a source may wait for a room another thread is still making (the derived hooks
            # read the Global layer while the sidecar's warm-up loads the models); the user's files never wait
            self._poll_sources()
        finally:
            self._files_loaded.set()  # a load that failed: events no longer wait for it
            self._load_lock.release()

    def load_in_background(self) -> threading.Thread | None:
        """Look at the hooks files in a background thread now (the one already at it, if any); None without a
        folder. Events keep matching the last loaded set meanwhile."""
        if self.files is None:
            return None
        with self._loader_lock:
            loader = self._loader
            if loader is None or not loader.is_alive():
                self._next_refresh = self.clock() + self.refresh_s
                loader = self._loader = threading.Thread(target=self._load_logged, name="memtier-hooks-load",
                                                         daemon=True)
                loader.start()
            return loader

    def _load_logged(self) -> None:
        pacer = Pacer()
        try:
            self.refresh(pace=pacer, in_child=True)
        except Exception:  # a bug in loading: the last loaded set stays, the next look tries again
            log.exception("hooks: loading %s failed; the hooks loaded before stay", self.files.dir)
        finally:
            pacer.release()

    def wait_loaded(self, timeout: float | None = None) -> bool:
        """Wait for the background load, if one runs (True once none does; False when ``timeout`` passed)."""
        loader = self._loader
        if loader is not None:
            loader.join(timeout)
            return not loader.is_alive()
        return True

    def add_source(self, name: str, load: Callable[[], list[Hook] | None]) -> None:
        """A non-file source polled with the files (in the background, never in an event): ``load()`` gives its
        hooks when they changed since its last answer, else None (e.g. the hooks derived from memory)."""
        self._loaders[name] = load

    def _poll_sources(self) -> None:
        for name, load in list(self._loaders.items()):
            try:
                hooks = load()
            except Exception:  # a source that cannot be read keeps its last set; the files still load
                log.exception("hooks: reading the %s hooks failed; their last set stays", name)
                continue
            if hooks is not None:
                self.set_hooks(name, hooks)

    def set_hooks(self, name: str, hooks: list[Hook]) -> None:
        """Replace the hooks of one non-file source (e.g. "rules": :func:`rule_hooks` of the current nodes);
        never waits for the files being parsed."""
        with self._index_lock:
            self._sources = {**self._sources, name: list(hooks)}
            self._sources_version += 1
            self._index = self._index_of(self._file_hooks, self._sources)

    @staticmethod
    def _index_of(file_hooks: list[Hook], sources: dict, pace: Callable[[], None] | None = None) -> _Index:
        """The index of the files' hooks, then the other sources' (a key seen before is left out). A person's
        file wins on conflict: a hook of another source bound to an entry (its id or its text) that a file's
        hook binds is left out."""
        bound_ids = {h.entry_id for h in file_hooks if h.entry_id}
        bound_texts = {_norm(h.entry) for h in file_hooks if h.entry}
        hooks = list(file_hooks) + [h for name in sorted(sources) for h in sources[name]
                                    if not ((h.entry_id and h.entry_id in bound_ids) or
                                            (h.entry and _norm(h.entry) in bound_texts))]
        seen, unique = set(), []
        for h in hooks:
            if h.key not in seen:
                seen.add(h.key)
                unique.append(h)
        return _build_index(unique, pace)

    @property
    def hooks(self) -> list[Hook]:
        """Every loaded hook, files first (by file name), then the other sources."""
        return list(self._index.hooks)

    @property
    def problems(self) -> list[str]:
        """One line per hooks file that was skipped."""
        return list(self.files.problems.values()) if self.files is not None else []

    # ---- tasks -------------------------------------------------------------------------------------
    def _task(self, task_key: str, now: float) -> _Task:
        """The task's state (new after expiry); caller holds the lock."""
        tasks = self._tasks
        while tasks:
            oldest_key, oldest = next(iter(tasks.items()))
            if now - oldest.last_seen <= self.task_ttl_s:
                break
            del tasks[oldest_key]
        task = tasks.get(task_key)
        if task is None:
            task = tasks[task_key] = _Task()
            while len(tasks) > self.max_tasks:
                tasks.popitem(last=False)
        tasks.move_to_end(task_key)
        task.last_seen = now
        return task

    def fired(self, task_key: str) -> frozenset:
        """Keys of the hooks delivered so far in this task."""
        with self._lock:
            task = self._tasks.get(task_key)
            if task is None or self.clock() - task.last_seen > self.task_ttl_s:
                return frozenset()
            return frozenset(task.fired)

    def mark_delivered(self, task_key: str, hook_keys: Iterable[str]) -> None:
        """Join these hooks to the task's fired set (for a caller that matched with ``mark=False``)."""
        with self._lock:
            self._task(task_key, self.clock()).fired.update(hook_keys)

    def defer(self, task_key: str, matches: Iterable[Match]) -> None:
        """Keep matches (a post_tool event's) for the task's next decision: :meth:`take_deferred` hands them out."""
        matches = list(matches)
        if matches:
            with self._lock:
                task = self._task(task_key, self.clock())
                task.deferred = (task.deferred + matches)[-self.max_entries:]

    def take_deferred(self, task_key: str) -> list[Match]:
        """The matches :meth:`defer` kept for this task, once (the next prompt or tool call delivers them)."""
        with self._lock:
            task = self._tasks.get(task_key)
            if task is None or not task.deferred:
                return []
            out, task.deferred = task.deferred, []
            return out

    def end_task(self, task_key: str) -> None:
        """Forget a finished task (its hooks may fire again in a new one)."""
        with self._lock:
            self._tasks.pop(task_key, None)

    # ---- matching ----------------------------------------------------------------------------------
    def match(self, event_type: str, state: dict | None = None, *, tool_name: str | None = None,
              params: dict | None = None, query: str | None = None, task_key: str, mark: bool = True,
              resolve: Callable[[str], str | None] | None = None) -> list[Match]:
        """Entries of the hooks that hold at this event and were not yet delivered in this task (eq. 10).
        ``resolve``: the entry lookup for ``entry_id`` hooks at this event (the caller's scope), else the
        scheduler's ``resolve_entry``."""
        return self.deliver(event_type, state, tool_name=tool_name, params=params, query=query,
                            task_key=task_key, mark=mark, resolve=resolve).matches

    def deliver(self, event_type: str, state: dict | None = None, *, tool_name: str | None = None,
                params: dict | None = None, query: str | None = None, task_key: str,
                mark: bool = True, resolve: Callable[[str], str | None] | None = None) -> Delivery:
        """:meth:`match` with what was skipped (step budget, unresolvable entry, delivery cap) and the work done."""
        if event_type not in EVENTS:
            raise ValueError(f"event type {event_type!r}: expected one of {', '.join(EVENTS)}")
        if not isinstance(task_key, str) or not task_key:
            raise ValueError("task_key: expected a non-empty string (the session or task the delivery belongs to)")
        now = self.clock()
        if now >= self._next_refresh and self.files is not None:
            self.load_in_background()  # never parsed here: this event matches the last loaded set
        if not self._files_loaded.is_set():  # a process just started: the user's hooks hold from its first event
            self._files_loaded.wait(FIRST_LOAD_WAIT_S)
        ev = Event(event_type, tool_name=tool_name, params=params, query=query, state=state)
        candidates, total = _candidates(self._index, ev, self.event_candidates)
        with self._lock:
            fired = frozenset(self._task(task_key, now).fired) if candidates else frozenset()
        out = Delivery(unwalked=total - len(candidates))
        held: list[Hook] = []
        for _order, hook in candidates:
            if hook.key in fired:
                continue
            if ev.steps + hook.predicate.max_steps > self.event_steps:
                out.skipped.append((hook.key, f"step budget of the event ({self.event_steps:,}) spent"))
                continue
            out.evaluated += 1
            if hook.predicate.fn(ev):
                held.append(hook)
        out.steps = ev.steps
        if (out.skipped or out.unwalked) and now >= self._next_warning:  # at most once a minute: a hostile file
            self._next_warning = now + 60.0                                # must not flood the log
            if out.skipped:
                log.warning("hooks: %d hook(s) skipped at a %s event: the step budget (%d) was spent (first: %s)",
                            len(out.skipped), event_type, self.event_steps, out.skipped[0][0])
            if out.unwalked:
                log.warning("hooks: %d candidate hook(s) not looked at at a %s event: past the bound of %d an event",
                            out.unwalked, event_type, self.event_candidates)
        if not held:
            return out
        self._pack(held, out, resolve or self.resolve_entry)
        if out.matches:
            with self._lock:
                task = self._task(task_key, self.clock())
                kept = []
                for m in out.matches:  # another thread may have delivered some of them meanwhile
                    fresh = tuple(k for k in m.hooks if k not in task.fired)
                    if fresh:
                        kept.append(Match(m.entry, m.entry_id, fresh, m.source, m.hold))
                        if mark and not m.hold:  # a hold guards every such call; a delivery is once per task
                            task.fired.update(fresh)
                out.matches = kept
        return out

    def _pack(self, held: list[Hook], out: Delivery, resolve) -> None:
        """Merge matched hooks by entry text, then keep entries in load order within the caps."""
        merged: dict[str, list] = {}  # normalised text -> [text, entry_id, [keys], source, hold]
        for hook in held:
            if self.skip is not None and (self.skip(hook.key) or (hook.entry_id and self.skip(hook.entry_id))):
                out.skipped.append((hook.key, "forgotten"))
                continue
            text = hook.entry
            if not text and hook.entry_id:
                text = self._resolve(hook.entry_id, resolve)
                if not text:
                    out.skipped.append((hook.key, f"entry {hook.entry_id} not found or no longer current"))
                    continue
            norm = _norm(text)
            if norm in merged:
                merged[norm][2].append(hook.key)
                merged[norm][4] = merged[norm][4] or hook.hold
            else:
                merged[norm] = [text, hook.entry_id, [hook.key], hook.source, hook.hold]
        chars = 0
        for text, entry_id, keys, source, hold in merged.values():
            if len(out.matches) >= self.max_entries or chars + len(text) > self.max_chars:
                out.skipped.extend((k, "over the delivery budget: may fire at a later event") for k in keys)
                continue
            chars += len(text)
            out.matches.append(Match(text, entry_id, tuple(keys), source, hold))

    @staticmethod
    def _resolve(entry_id: str, resolve) -> str:
        if resolve is None:
            return ""
        try:
            text = resolve(entry_id)
        except Exception:  # the caller's lookup failed: this hook is not delivered, the others are
            log.exception("hooks: resolving %s failed", entry_id)
            return ""
        return text[:MAX_ENTRY] if isinstance(text, str) else ""


def format_matches(matches: list[Match]) -> str:
    """The delivered entries as lines the agent can cite (``- [hook id | entry id] text``); "" when none."""
    lines = []
    for m in matches:
        ref = m.hooks[0].rsplit(":", 1)[-1] + (f" | {m.entry_id}" if m.entry_id else "")
        lines.append(f"- [{ref}] {' '.join(m.entry.split())}")
    return "\n".join(lines)


def event_state(ts: float, project: str, agent_id: str, extra: dict | None = None) -> dict:
    """The state σ_t hook predicates read at an event: weekday and hour (UTC), project, agent, and ``extra``."""
    from datetime import datetime, timezone

    when = datetime.fromtimestamp(ts, tz=timezone.utc)
    return {"weekday": when.strftime("%a"), "hour": when.hour, "project": project, "agent": agent_id,
            **(extra or {})}
