"""The derived search index over the ledgers, under ``<memory>/.index/``.

The ledgers are the only source of truth: this index holds BM25 postings and
compact per-document columns (time, cognitive weight, tier, session, agent,
project, role, location of the line in its ledger) and a checkpoint of how far
each ledger file has been read. Opening a workspace loads the saved index and
reads only the bytes appended since; deleting ``.index/`` loses nothing (it is
rebuilt from the ledgers). Content is not held in memory: it is read back from
the ledger line for the few hits that are packed.
"""

from __future__ import annotations

import logging
import os
import shutil
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import orjson

from . import jsonl
from .bm25 import BM25Index
from .dates import annotate
from .ledger import SYSTEM_PREFIX, clip_cw, parse_iso, tail_records
from .tokenize import tokenize

log = logging.getLogger(__name__)
FORMAT = 1
TIER_CODE = {"episodic": 0, "semantic": 1, "procedural": 2}
COLUMNS = {"ts": np.float64, "cw": np.float32, "tier": np.int8, "session": np.int32, "agent": np.int32,
           "project": np.int32, "role": np.int8, "system": np.bool_, "superseded": np.bool_,
           "fileno": np.int32, "offset": np.int64}
ROLES = ["user", "assistant", "tool", "system", "fact"]
REPLY_CONTEXT_MAX = 12  # distinct new tokens taken from the message an entry answers
_BULK_TOKENS = 1 << 22  # bulk builds hand bm25 ~4M tokens at a time


class Codes:
    """String ↔ small-integer codes for a categorical column."""

    def __init__(self, names: Iterable[str] = ()):
        self.names: list[str] = list(names)
        self.code = {n: i for i, n in enumerate(self.names)}

    def get(self, name: str) -> int:
        c = self.code.get(name)
        if c is None:
            c = self.code[name] = len(self.names)
            self.names.append(name)
        return c


class SessionDocs:
    """Session code -> its doc ids, ascending: a compact CSR base plus per-session lists of later docs.

    A dict of Python lists costs ~45 bytes a doc (~45 MB at a million entries);
    the base here costs 4 bytes a doc. ``get`` returns a list, like the dict did.
    """

    def __init__(self, sessions: np.ndarray | None = None):
        sessions = np.empty(0, np.int32) if sessions is None else np.asarray(sessions)
        self._order = np.argsort(sessions, kind="stable").astype(np.int32)
        self._indptr = np.zeros(1, np.int64)
        if len(sessions):
            np.cumsum(np.bincount(sessions), out=(ptr := np.zeros(int(sessions.max()) + 2, np.int64))[1:])
            self._indptr = ptr
        self._extra: dict[int, list[int]] = {}

    def get(self, session: int, default=None):
        base = self._order[self._indptr[session]: self._indptr[session + 1]].tolist() \
            if 0 <= session < len(self._indptr) - 1 else []
        extra = self._extra.get(session)
        if extra:
            base.extend(extra)
        return base if base else ([] if default is None else default)

    def add(self, session: int, doc: int) -> None:
        self._extra.setdefault(session, []).append(doc)


class DocIndex:
    """BM25 + columns for one kind of document: episodic entries or semantic facts."""

    def __init__(self, kind: str, *, k1: float = 1.5, b: float = 0.75, idf: str = "lucene",
                 annotate_dates: bool = True, reply_context: bool = False):
        self.kind = kind
        self.bm25 = BM25Index(k1=k1, b=b, idf=idf)
        self.annotate_dates = annotate_dates
        # reply context: an entry's key also holds the tokens of the message it answers
        # (the previous entry of its session, when that one has another role)
        self.reply_context = reply_context
        self._last: dict[str, tuple[str, list[str]]] = {}
        self.n = 0
        self.cols = {name: np.zeros(1024, dtype=dt) for name, dt in COLUMNS.items()}
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.sessions, self.agents, self.projects = Codes(), Codes(), Codes()
        self.files = Codes()
        self.checkpoint: dict[str, int] = {}
        self.session_docs = SessionDocs()
        self.fact_sessions: dict[int, list[int]] = {}  # fact doc -> session codes of its sources
        self.pending: dict[str, list[dict]] = {}  # updates seen before their entry
        self.applied: set[str] = set()  # ids of change records already folded in this process
        self._deferred: list[list[str]] | None = None  # token lists not yet in bm25 (bulk mode only)
        self._deferred_tokens = 0

    # ---- columns ---------------------------------------------------------
    def col(self, name: str) -> np.ndarray:
        return self.cols[name][: self.n]

    def _grow(self) -> None:
        if self.n < len(self.cols["ts"]):
            return
        size = max(1024, 2 * len(self.cols["ts"]))
        for name, arr in self.cols.items():
            new = np.zeros(size, dtype=arr.dtype)
            new[: len(arr)] = arr
            self.cols[name] = new

    # ---- ingest ----------------------------------------------------------
    def ingest(self, rec: dict, file_code: int, offset: int) -> int | None:
        """Add one ledger record (entry, fact or change). Returns the new doc, if any."""
        kind = rec.get("kind", "entry")
        if kind in ("entry", "fact"):
            rid = rec.get("id")
            if not isinstance(rid, str) or rid in self.pos or not isinstance(rec.get("content"), str):
                return None
            return self._add_doc(rec, kind, file_code, offset)
        target = rec.get("entry_id") or rec.get("fact_id")
        if isinstance(target, str):
            uid = rec.get("id")
            if isinstance(uid, str):  # a change seen twice (notified, then tailed) applies once
                if uid in self.applied:
                    return None
                self.applied.add(uid)
            doc = self.pos.get(target)
            if doc is None:
                self.pending.setdefault(target, []).append(rec)
            else:
                self._apply(doc, rec)
        return None

    def _apply(self, doc: int, rec: dict) -> None:
        kind = rec.get("kind")
        if kind == "cw_update":
            self.cols["cw"][doc] = clip_cw(float(self.cols["cw"][doc]) + float(rec.get("delta", 0.0)))
        elif kind == "superseded":
            self.cols["superseded"][doc] = True

    def _add_doc(self, rec: dict, kind: str, file_code: int, offset: int) -> int:
        try:
            ts = parse_iso(rec.get("effective_time") or rec["timestamp"]) if kind == "fact" else parse_iso(rec["timestamp"])
        except (KeyError, ValueError, TypeError):
            ts = 0.0
        content = rec["content"]
        text = annotate(content, _day(ts)) if self.annotate_dates and ts else content
        tokens = tokenize(text)
        if self.reply_context and kind == "entry":
            tokens = self._with_context(rec, tokens)
        if self._deferred is None:
            doc = self.bm25.add(tokens)
        else:  # bulk: doc ids are sequential, the postings are added by _flush in one vectorised step
            doc = self.n
            self._deferred.append(tokens)
            self._deferred_tokens += len(tokens)
        self._grow()
        c = self.cols
        c["ts"][doc] = ts
        c["cw"][doc] = float(rec.get("cognitive_weight") or 0.0)
        c["tier"][doc] = TIER_CODE["semantic" if kind == "fact" else rec.get("tier", "episodic")] \
            if (kind == "fact" or rec.get("tier", "episodic") in TIER_CODE) else 0
        session = rec.get("session_id") or ""
        c["session"][doc] = self.sessions.get(session)
        c["agent"][doc] = self.agents.get(rec.get("agent_id") or rec.get("origin_agent") or "")
        c["project"][doc] = self.projects.get(rec.get("project") or "")
        role = "fact" if kind == "fact" else rec.get("role", "user")
        c["role"][doc] = ROLES.index(role) if role in ROLES else 0
        c["system"][doc] = content.startswith(SYSTEM_PREFIX)
        c["fileno"][doc], c["offset"][doc] = file_code, offset
        self.ids.append(rec["id"])
        self.pos[rec["id"]] = doc
        self.n = doc + 1
        self.session_docs.add(int(c["session"][doc]), doc)
        if kind == "fact":
            self.fact_sessions[doc] = [self.sessions.get(s) for s in rec.get("session_ids") or []]
            if rec.get("supersedes"):
                self.ingest({"kind": "superseded", "fact_id": rec["supersedes"]}, file_code, offset)
        for pending in self.pending.pop(rec["id"], []):
            self._apply(doc, pending)
        if self._deferred is not None and self._deferred_tokens >= _BULK_TOKENS:
            self._flush()
        return doc

    # ---- bulk ingestion --------------------------------------------------
    def begin_bulk(self) -> None:
        """Defer BM25 postings of new docs to vectorised ``add_many`` batches (for full builds).

        Columns, ids and updates are applied at once as usual; only ``bm25`` lags
        until :meth:`end_bulk` (or every ``_BULK_TOKENS`` tokens, bounding memory).
        Do not score between the two calls.
        """
        if self._deferred is None:
            self._deferred, self._deferred_tokens = [], 0

    def end_bulk(self) -> None:
        if self._deferred is not None:
            self.session_docs = SessionDocs(self.col("session"))  # compact before the last (largest) merge
            self._flush()
            self._deferred = None

    def _flush(self) -> None:
        docs, self._deferred, self._deferred_tokens = self._deferred, [], 0
        if docs:
            self.bm25.add_many(docs)
        if len(self.bm25) != self.n:
            raise AssertionError(f"bm25 holds {len(self.bm25)} docs, the index {self.n}")

    def _with_context(self, rec: dict, tokens: list[str]) -> list[str]:
        """Append the tokens of the session's previous entry when it came from another role."""
        session, role = rec.get("session_id") or "", rec.get("role", "user")
        prev = self._last.get(session)
        self._last[session] = (role, tokens)
        if prev is not None and prev[0] != role:
            have = set(tokens)
            extra = [t for t in dict.fromkeys(prev[1]) if t not in have][:REPLY_CONTEXT_MAX]
            return tokens + extra
        return tokens

    def tail_file(self, path: Path) -> int:
        """Read what was appended to ``path`` since the checkpoint; returns records read."""
        key = str(path)
        start = self.checkpoint.get(key, 0)
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return 0
        if size <= start:
            return 0
        code = self.files.get(key)
        offset, count = start, 0
        for line_at, offset, rec in tail_records(path, start):
            if rec is not None:
                self.ingest(rec, code, line_at)
                count += 1
        self.checkpoint[key] = offset
        return count

    def read_record(self, doc: int) -> dict:
        """The ledger record of a document, read back from its line."""
        path = self.files.names[int(self.cols["fileno"][doc])]
        with open(path, "rb") as fh:
            fh.seek(int(self.cols["offset"][doc]))
            return jsonl.loads(fh.readline())

    # ---- persistence -----------------------------------------------------
    def save(self, directory: Path) -> None:
        tmp = directory.with_name(directory.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        self.bm25.save(tmp / "bm25")
        np.savez(tmp / "columns.npz", **{k: self.col(k) for k in COLUMNS})
        meta = {"format": FORMAT, "kind": self.kind, "n": self.n, "ids": self.ids,
                "sessions": self.sessions.names, "agents": self.agents.names, "projects": self.projects.names,
                "files": self.files.names, "checkpoint": self.checkpoint,
                "fact_sessions": {str(k): v for k, v in self.fact_sessions.items()},
                "pending": self.pending, "annotate_dates": self.annotate_dates,
                "reply_context": self.reply_context}
        (tmp / "meta.json").write_bytes(orjson.dumps(meta))
        shutil.rmtree(directory, ignore_errors=True)
        os.replace(tmp, directory)

    @classmethod
    def load(cls, directory: Path, *, k1: float, b: float, idf: str) -> "DocIndex":
        meta = orjson.loads((directory / "meta.json").read_bytes())
        if meta.get("format") != FORMAT:
            raise ValueError(f"index format {meta.get('format')} is not {FORMAT}")
        self = cls(meta["kind"], k1=k1, b=b, idf=idf, annotate_dates=meta.get("annotate_dates", True),
                   reply_context=meta.get("reply_context", False))
        self.bm25 = BM25Index.load(directory / "bm25", mmap=True)  # postings paged in on use, never written
        if (self.bm25.k1, self.bm25.b, self.bm25.idf) != (k1, b, idf):
            raise ValueError("index was built with other BM25 parameters")
        self.n = meta["n"]
        with np.load(directory / "columns.npz") as cols:
            for k, dt in COLUMNS.items():
                arr = np.zeros(max(1024, self.n + self.n // 8), dtype=dt)  # _grow doubles when full
                arr[: self.n] = cols[k]
                self.cols[k] = arr
        self.ids = meta["ids"]
        self.pos = dict(zip(self.ids, range(len(self.ids))))
        self.sessions, self.agents = Codes(meta["sessions"]), Codes(meta["agents"])
        self.projects, self.files = Codes(meta["projects"]), Codes(meta["files"])
        self.checkpoint = meta["checkpoint"]
        self.fact_sessions = {int(k): v for k, v in meta["fact_sessions"].items()}
        self.pending = meta["pending"]
        self.session_docs = SessionDocs(self.col("session"))
        return self


@lru_cache(maxsize=4096)
def _date_of_day(day: int):
    from datetime import datetime, timezone

    return datetime.fromtimestamp(day * 86400.0, tz=timezone.utc).date()


def _day(ts: float):
    """The UTC calendar date of ``ts``: all the date annotator uses of its reference."""
    return _date_of_day(int(ts // 86400))


class LedgerWatch:
    """Cheap change detection over the ledger files under one directory, for refresh on every recall.

    Walking and stat-ing every ledger file on every recall costs milliseconds at a
    year of daily files. Instead each ``poll``:

    * stats every watched directory (the base and its subdirectories, e.g. one per
      agent); a changed mtime means files were created or removed: that directory
      is listed again and its new files are read;
    * reads the tail of the "hot" files of every directory: the ``HOT`` newest by
      name (ledgers are named by day, live appends go to today's file), or all of a
      directory's files when it holds at most ``HOT_ALL`` (e.g. semantic/<project>);
    * sweeps ``SWEEP`` of the other files round-robin, so an append by another
      process to an old day's file is still picked up, within
      ceil(files / SWEEP) recalls rather than at once.

    Files are tailed in path order, like a full scan. ``poll(full=True)`` reads
    every file, as ``open_index`` does.
    """

    HOT, HOT_ALL, SWEEP = 2, 32, 128

    def __init__(self, base: Path):
        self.base = base
        self.dirs: dict[str, int] = {}  # directory -> st_mtime_ns when listed
        self.files: dict[str, list[str]] = {}  # directory -> its *.jsonl files, sorted
        self._all: list[str] = []
        self._hot: list[str] = []
        self._cursor = 0

    def _list(self, directory: str) -> list[str]:
        """(Re)list ``directory`` and, recursively, its new or changed subdirectories; returns new files."""
        try:
            mtime = os.stat(directory).st_mtime_ns
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            self._forget(directory)
            return []
        self.dirs[directory] = mtime
        old = set(self.files.get(directory, ()))
        files = sorted(e.path for e in entries if e.name.endswith(".jsonl") and e.is_file())
        self.files[directory] = files
        new = [f for f in files if f not in old]
        subdirs = {e.path for e in entries if e.is_dir()}
        for gone in [d for d in self.dirs if os.path.dirname(d) == directory and d not in subdirs]:
            self._forget(gone)
        for sub in sorted(subdirs):
            if sub not in self.dirs:
                new.extend(self._list(sub))
        return new

    def _forget(self, directory: str) -> None:
        prefix = directory + os.sep
        for d in [d for d in self.dirs if d == directory or d.startswith(prefix)]:
            self.dirs.pop(d, None)
            self.files.pop(d, None)

    def _rebuild(self) -> None:
        self._all = sorted(f for files in self.files.values() for f in files)
        hot: list[str] = []
        for files in self.files.values():
            hot.extend(files if len(files) <= self.HOT_ALL else files[-self.HOT:])
        self._hot = hot
        self._cursor %= max(1, len(self._all))

    def poll(self, index: "DocIndex", full: bool = False) -> int:
        """Read what the watched ledgers gained since the last poll; returns records read."""
        base = str(self.base)
        if not self.dirs:
            if not os.path.isdir(base):
                return 0
            full = True
        changed = [d for d, m in list(self.dirs.items()) if _mtime_ns(d) != m]
        touched: set[str] = set()
        if not self.dirs or changed:
            for d in (changed or [base]):
                if d in self.dirs or d == base:
                    touched.update(self._list(d))
            self._rebuild()
        if full:
            touched.update(self._all)
        else:
            touched.update(self._hot)
            n = len(self._all)
            if n:
                k = min(self.SWEEP, n)
                start = self._cursor
                touched.update(self._all[start:start + k])
                if start + k > n:
                    touched.update(self._all[: start + k - n])
                self._cursor = (start + k) % n
        read = 0
        for path in sorted(touched):
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:
                continue
            if size > index.checkpoint.get(path, 0):
                read += index.tail_file(Path(path))
        return read


def _mtime_ns(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def ledger_files(root: Path, sub: str) -> list[Path]:
    base = root / sub
    if not base.is_dir():
        return []
    return sorted(base.rglob("*.jsonl"))


def open_index(root: Path, kind: str, sub: str, *, k1: float, b: float, idf: str,
               reply_context: bool = False,
               progress: Callable[[int, int], None] | None = None) -> tuple[DocIndex, bool]:
    """Load the saved index of ``kind`` (or build it) and read what the ledgers gained since.

    Returns (index, changed) — changed is True when anything was read from the ledgers.
    """
    directory = root / ".index" / kind
    index = None
    if (directory / "meta.json").is_file():
        try:
            index = DocIndex.load(directory, k1=k1, b=b, idf=idf)
            if index.reply_context != reply_context:
                raise ValueError("index was built with another retrieval.reply_context")
        except Exception as exc:  # derived data: rebuild whatever is wrong with it
            log.warning("%s: index unusable (%s); rebuilding from the ledgers", directory, exc)
            index = None
    if index is None:
        index = DocIndex(kind, k1=k1, b=b, idf=idf, reply_context=reply_context)
    files = ledger_files(root, sub)
    read = 0
    index.begin_bulk()
    try:
        for i, path in enumerate(files):
            read += index.tail_file(path)
            if progress:
                progress(i + 1, len(files))
    finally:
        index.end_bulk()
    return index, read > 0
