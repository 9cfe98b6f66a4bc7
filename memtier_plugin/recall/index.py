"""The derived search index over the ledgers, under ``<memory>/.index/`` (saving and opening it:
:mod:`.index_files`; noticing what the ledgers gained: :mod:`.watch`).

The ledgers are the only source of truth: this index holds BM25 postings and
compact per-document columns (time, cognitive weight, tier, session, agent,
project, role, location of the line in its ledger) and a checkpoint of how far
each ledger file has been read. Opening a workspace loads the saved index and
reads only the bytes appended since; deleting ``.index/`` loses nothing (it is
rebuilt from the ledgers). Content is not held in memory: it is read back from
the ledger line for the few hits that are packed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from bisect import bisect_left
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import numpy as np
import orjson

from ..vocabulary import INDEX_ROLES, TIERS
from ..store import jsonl, records
from .bm25 import BM25Index
from ..dates import annotate
from ..errors import CorruptLineError
from ..store.episodic import SYSTEM_PREFIX, parse_iso, tail_records
from ..store.semantic import retirement
from ..tokenize import tokenize

log = logging.getLogger(__name__)
FORMAT = 4  # 2: file marks (hand-edit detection); saved as generations behind CURRENT; 3: the "reply" column;
#            4: fact sources (a fact ranks no higher than its own visible entry would)
_MARK_BYTES = 1024  # hashed at a file's head and just before its checkpoint
_GEN_RE = re.compile(r"g-[0-9a-f]{16}")


class StaleLedger(Exception):
    """A ledger file read into the index was shrunk, replaced, rewritten or removed (a hand edit)."""

    def __init__(self, path: str, why: str):
        self.path, self.why = path, why
        super().__init__(f"{path}: {why}")


def index_problem(rec: dict) -> str | None:
    """Why a ledger record cannot go into the index (entries and changes: :mod:`records`; facts: their keys)."""
    kind = rec.get("kind", "entry")
    if kind in ("fact", "superseded"):
        from ..store.semantic import fact_problem

        return fact_problem(rec)
    return records.problem(rec)


def _mark(path: str, offset: int, st: os.stat_result) -> list:
    """What a later reader checks to know the first ``offset`` bytes of ``path`` are unchanged."""
    with open(path, "rb") as fh:
        head = fh.read(min(offset, _MARK_BYTES))
        fh.seek(max(0, offset - _MARK_BYTES))
        tail = fh.read(offset - max(0, offset - _MARK_BYTES))
    digest = hashlib.blake2b(head + b"\0" + tail, digest_size=8).hexdigest()
    return [offset, st.st_ino, st.st_mtime_ns, digest]
TIER_CODE = {name: code for code, name in enumerate(TIERS)}
COLUMNS = {"ts": np.float64, "cw": np.float32, "tier": np.int8, "session": np.int32, "agent": np.int32,
           "project": np.int32, "role": np.int8, "system": np.bool_, "superseded": np.bool_,
           "fileno": np.int32, "offset": np.int64,
           "reply": np.int32}  # reply: 1 + the doc an entry answers (its session's previous entry, another role); 0 none
ROLES = list(INDEX_ROLES)
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

    def around(self, session: int, doc: int, reach: int) -> tuple[list[int], list[int]]:
        """(up to ``reach`` of the session's docs just before ``doc``, up to ``reach`` just after it), ascending,
        as ``get`` would give them but without listing the whole session (a recall's hot path may ask this of a
        session of 100k entries)."""
        base = self._order[self._indptr[session]: self._indptr[session + 1]] \
            if 0 <= session < len(self._indptr) - 1 else self._order[:0]
        extra = self._extra.get(session, [])  # docs added later: all after the base ones
        nb = len(base)
        at = int(np.searchsorted(base, doc))
        if at == nb:
            at = nb + bisect_left(extra, doc)
        found = (at < nb and int(base[at]) == doc) or (nb <= at < nb + len(extra) and extra[at - nb] == doc)

        def span(lo: int, hi: int) -> list[int]:  # positions [lo, hi) of base followed by extra
            return base[min(lo, nb): min(hi, nb)].tolist() + extra[max(lo - nb, 0): max(hi - nb, 0)]

        after = at + 1 if found else at
        return span(max(0, at - reach), at), span(after, after + reach)


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
        self._last: dict[str, tuple[str, list[str], int]] = {}  # session -> its last entry's (role, tokens, doc)
        self.n = 0
        self.cols = {name: np.zeros(1024, dtype=dt) for name, dt in COLUMNS.items()}
        self.ids: list[str] = []
        self.pos: dict[str, int] = {}
        self.sessions, self.agents, self.projects = Codes(), Codes(), Codes()
        self.files = Codes()
        self.checkpoint: dict[str, int] = {}
        self.marks: dict[str, list] = {}  # file -> [offset, inode, mtime_ns, head+tail digest] (see _mark)
        self.session_docs = SessionDocs()
        self.fact_sessions: dict[int, list[int]] = {}  # fact doc -> session codes of its sources
        self.fact_sources: dict[int, list[str]] = {}  # fact doc -> the episodic entry ids it was made from
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
        """Add one valid ledger record (entry, fact or change; see :func:`index_problem`). Returns the new doc, if any."""
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
            self.cols["cw"][doc] = records.fold_cw(float(self.cols["cw"][doc]), rec)
        elif kind == "superseded":
            self.cols["superseded"][doc] = True

    def _add_doc(self, rec: dict, kind: str, file_code: int, offset: int) -> int:
        ts, tokens = self._own_tokens(rec, kind)
        content = rec["content"]
        session, role = rec.get("session_id") or "", rec.get("role", "user")
        same_as = role if role in ROLES else ROLES[0]  # as the role column stores it (read back after a load)
        answers = self._answers(session, same_as) if kind == "entry" else None
        if kind == "entry":
            if answers is not None and self.reply_context:
                have = set(tokens)
                extra = [t for t in dict.fromkeys(answers[1]) if t not in have][:REPLY_CONTEXT_MAX]
                key = tokens + extra
            else:
                key = tokens
            self._last[session] = (same_as, tokens, self.n)
            tokens = key
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
        c["session"][doc] = self.sessions.get(session)
        c["agent"][doc] = self.agents.get(rec.get("agent_id") or rec.get("origin_agent") or "")
        c["project"][doc] = self.projects.get(rec.get("project") or "")
        c["reply"][doc] = 0 if answers is None else answers[2] + 1
        role = "fact" if kind == "fact" else role
        c["role"][doc] = ROLES.index(role) if role in ROLES else 0
        c["system"][doc] = content.startswith(SYSTEM_PREFIX)
        c["fileno"][doc], c["offset"][doc] = file_code, offset
        self.ids.append(rec["id"])
        self.pos[rec["id"]] = doc
        self.n = doc + 1
        self.session_docs.add(int(c["session"][doc]), doc)
        if kind == "fact":
            self.fact_sessions[doc] = [self.sessions.get(s) for s in rec.get("session_ids") or []]
            self.fact_sources[doc] = [x for x in rec.get("source_entry_ids") or [] if isinstance(x, str)][:64]
            retired = retirement(rec)
            if retired is not None:
                self.ingest({"kind": "superseded", "fact_id": retired[0]}, file_code, offset)
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

    def _own_tokens(self, rec: dict, kind: str) -> tuple[float, list[str]]:
        """(timestamp, the BM25 tokens of the record's own text: its content, dates annotated)."""
        try:
            ts = parse_iso(rec.get("effective_time") or rec["timestamp"]) if kind == "fact" else parse_iso(rec["timestamp"])
        except (KeyError, ValueError, TypeError):
            ts = 0.0
        content = rec["content"]
        return ts, tokenize(annotate(content, _day(ts)) if self.annotate_dates and ts else content)

    def _answers(self, session: str, role: str) -> tuple[str, list[str], int] | None:
        """The entry a new ``role`` entry of ``session`` answers: the session's previous entry when it came
        from another role, as (role, tokens, doc); None otherwise. After a load the session's last doc is
        read back from its ledger line once (the in-memory memo starts empty)."""
        prev = self._last.get(session)
        if prev is None:
            code = self.sessions.code.get(session)
            docs = self.session_docs.get(code) if code is not None else []
            if not docs:
                return None
            last = docs[-1]
            try:
                rec = self.read_record(last)
                prev = (ROLES[int(self.cols["role"][last])], self._own_tokens(rec, "entry")[1], last)
            except (OSError, ValueError, KeyError, TypeError, CorruptLineError):
                return None
            self._last[session] = prev
        return prev if prev[0] != role else None

    def changed_since_read(self, path: str, st: os.stat_result) -> str | None:
        """Why ``path`` no longer holds what was read of it (shrunk, replaced, rewritten), or None."""
        mark = self.marks.get(path)
        if mark is None:
            return None if self.checkpoint.get(path, 0) <= st.st_size else "shrunk since it was indexed"
        offset, ino, mtime, digest = mark
        if st.st_size < offset:
            return "shrunk since it was indexed"
        if st.st_ino != ino:
            return "replaced since it was indexed"
        if st.st_mtime_ns != mtime and _mark(path, offset, st)[3] != digest:
            return "rewritten since it was indexed"
        return None

    def needs_read(self, path: str, st: os.stat_result) -> bool:
        """Whether ``path`` changed since it was read (raises :class:`StaleLedger` on a rewrite)."""
        why = self.changed_since_read(path, st)
        if why:
            raise StaleLedger(path, why)
        mark = self.marks.get(path)
        return st.st_size > self.checkpoint.get(path, 0) or (mark is not None and st.st_mtime_ns != mark[2])

    def tail_file(self, path: Path) -> int:
        """Read what was appended to ``path`` since the checkpoint; returns records read.

        Raises :class:`StaleLedger` when what was read before is no longer there
        (a hand edit): the caller rebuilds the index from the ledgers. A record that
        cannot be used (see :func:`index_problem`) is skipped and reported once.
        """
        key = str(path)
        start = self.checkpoint.get(key, 0)
        try:
            st = os.stat(key)
        except FileNotFoundError:
            if key in self.checkpoint:
                raise StaleLedger(key, "removed since it was indexed") from None
            return 0
        if not self.needs_read(key, st):
            return 0
        code = self.files.get(key)
        offset, count = start, 0
        for line_at, offset, rec in tail_records(path, start):
            if rec is None:
                continue
            problem = index_problem(rec)
            if problem is None:
                try:
                    self.ingest(rec, code, line_at)
                    count += 1
                    continue
                except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as exc:
                    problem = f"unusable record ({type(exc).__name__}: {exc})"
            report_problem(key, line_at, problem)
        self.checkpoint[key] = offset
        try:
            self.marks[key] = _mark(key, offset, os.stat(key))
        except OSError:
            self.marks.pop(key, None)
        return count

    def read_record(self, doc: int) -> dict:
        """The ledger record of a document, read back from its line."""
        path = self.files.names[int(self.cols["fileno"][doc])]
        with open(path, "rb") as fh:
            fh.seek(int(self.cols["offset"][doc]))
            return jsonl.loads(fh.readline())

    def read_contents(self, docs: np.ndarray) -> list[str]:
        """The contents of many documents, in the order given: each ledger file is opened once and read in
        offset order (a cold store's embedding reads every document; one open per document cost ~30 µs)."""
        docs = np.asarray(docs, dtype=np.int64)
        out = [""] * len(docs)
        files, offsets = self.cols["fileno"][docs], self.cols["offset"][docs]
        order = np.lexsort((offsets, files))
        fh, current = None, -1
        try:
            for i in order.tolist():
                f = int(files[i])
                if f != current:
                    if fh is not None:
                        fh.close()
                    fh, current = open(self.files.names[f], "rb"), f
                fh.seek(int(offsets[i]))
                content = jsonl.loads(fh.readline()).get("content", "")
                out[i] = content if isinstance(content, str) else ""
        finally:
            if fh is not None:
                fh.close()
        return out

    # ---- persistence -----------------------------------------------------
    def session_entries(self, session: str, agent: str) -> list[tuple[str, str, str]]:
        """(entry id, role, text) of ``agent``'s entries in ``session``, in ledger order."""
        code, agent_code = self.sessions.code.get(session), self.agents.code.get(agent)
        if code is None or agent_code is None:
            return []
        out = []
        for doc in self.session_docs.get(code, []):
            if int(self.cols["agent"][doc]) != agent_code:
                continue
            try:
                rec = self.read_record(doc)
            except (OSError, ValueError):
                continue
            out.append((self.ids[doc], ROLES[int(self.cols["role"][doc])], rec.get("content", "")))
        return out

    def tool_history(self, prefix: str, agents: list[str] | None, depth: int = 64) -> list[tuple[float, str, str]]:
        """(time, entry id, text) of the tool entries of ``agents`` (None: all) whose text starts with
        ``prefix``, oldest first; found among the ``depth`` best BM25 matches of the prefix."""
        if self.n == 0:
            return []
        docs, raw = self.bm25.score(tokenize(prefix))
        if not len(docs):
            return []
        tool_role = ROLES.index("tool")
        codes = None if agents is None else {self.agents.code.get(a) for a in agents}
        rows = []
        for d in docs[(-raw).argsort()[:depth]].tolist():
            if int(self.cols["role"][d]) != tool_role or (codes is not None and int(self.cols["agent"][d]) not in codes):
                continue
            try:
                rec = self.read_record(d)
            except (OSError, ValueError):
                continue
            content = rec.get("content", "")
            if content.startswith(prefix):
                rows.append((float(self.cols["ts"][d]), self.ids[d], content))
        rows.sort()
        return rows

    def write(self, directory: Path) -> None:
        """Write this index into a new folder ``directory`` (see :func:`save_index` for publishing it)."""
        directory.mkdir(parents=True)
        self.bm25.save(directory / "bm25")
        np.savez(directory / "columns.npz", **{k: self.col(k) for k in COLUMNS})
        meta = {"format": FORMAT, "kind": self.kind, "n": self.n, "ids": self.ids,
                "sessions": self.sessions.names, "agents": self.agents.names, "projects": self.projects.names,
                "files": self.files.names, "checkpoint": self.checkpoint, "marks": self.marks,
                "fact_sessions": {str(k): v for k, v in self.fact_sessions.items()},
                "fact_sources": {str(k): v for k, v in self.fact_sources.items()},
                "pending": self.pending, "annotate_dates": self.annotate_dates,
                "reply_context": self.reply_context}
        (directory / "meta.json").write_bytes(orjson.dumps(meta))

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
        self.marks = meta["marks"]
        self.fact_sessions = {int(k): v for k, v in meta["fact_sessions"].items()}
        self.fact_sources = {int(k): v for k, v in meta["fact_sources"].items()}
        self.pending = meta["pending"]
        self.session_docs = SessionDocs(self.col("session"))
        return self


_reported: set[tuple[str, int]] = set()


def report_problem(path: str, byte_at: int, problem: str) -> None:
    """Log a skipped record once per process, as ``file:line: problem``."""
    if (path, byte_at) in _reported:
        return
    _reported.add((path, byte_at))
    try:
        with open(path, "rb") as fh:
            lineno = fh.read(byte_at).count(b"\n") + 1
    except OSError:
        lineno = 0
    log.warning("%s", CorruptLineError(path, lineno, f"skipped: {problem}"))


# ---- persistence: generations behind CURRENT ---------------------------------
@lru_cache(maxsize=4096)
def _date_of_day(day: int):
    from datetime import datetime, timezone

    return datetime.fromtimestamp(day * 86400.0, tz=timezone.utc).date()


def _day(ts: float):
    """The UTC calendar date of ``ts``: all the date annotator uses of its reference."""
    return _date_of_day(int(ts // 86400))
