"""Purge: the forgotten items' text removed from every file under ``memory/`` (``memtier purge``, issue 28).

Forgetting (``memory/forgotten.jsonl``, :mod:`store.tombstones`) keeps the
ledgers append-only; a purge rewrites them. :func:`purge` takes every id the
tombstone file names, reads the text its records held (an entry's content, a
fact's content and value, a knowledge node's words, a skill's goals and steps,
a working state's progress) and rewrites, one file at a time and each
atomically (:func:`store.files.atomic_write` under the file's own ``flock``,
the lock every appender takes), every JSONL file under ``memory/`` but the
tombstone file: the forgotten records go, the records about them (cw_update,
promoted, superseded markers, retirements, store costs) go, references to them
are dropped from lists (a trace's delivered rows, a run's delivered ids, a
fact's sources) and a copy of their text inside any other record (a trace's
query, a skill's goal, a working state's progress, a fact quoting it) is
replaced by ``[purged]``. Other episodic entries are never changed: an entry
that quotes a forgotten text is the user's own, reported in ``still_quoted``
(forget it too). The derived index and the vector cache under ``.index/`` are
deleted (and the index rebuilt when a config is at hand): they are rebuilt from
the ledgers, so nothing is lost.

Crash safety: the whole purge runs under the consolidation batch lock
(``memory/.daemon/lock``), so no batch interleaves. It works in two passes.
The first scrubs every file but keeps the forgotten records themselves (the
texts to search for stay readable); the second drops them, the episodic
ledgers first. Each pass is idempotent and each file is replaced whole, so a
SIGKILL anywhere leaves every file either old or new, loses no other record,
and the next purge finishes the job. The daemon's checkpoint of an episodic
file is first lowered to the start of the first line that changes (a line
boundary in the old file and the new one), then the file is replaced, then the
checkpoint moves to where the old one pointed in the new file: a checkpoint on
disk never points past a record it did not cover, nor into a line. The
``purged`` tombstones are appended only after every file is rewritten.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import orjson

from .store import jsonl, tombstones
from .store.files import atomic_write, iter_records, read_lines

log = logging.getLogger(__name__)

MARK = "[purged]"
#: A forgotten text this long (characters) is searched for inside other records' strings; a shorter
#: one only replaces a string that is exactly it ("Noted." is everywhere and names nothing).
MIN_TEXT = 12
#: A sentence of a forgotten text this long is searched for too (a skill's goal keeps the user's sentences).
MIN_SENTENCE = 24
PRIMARY = ("entry", "fact", "knowledge", "skill", "state")
#: The field naming the item a change record is about: the record goes with its item.
SUBJECT = {"cw_update": "entry_id", "promoted": "entry_id", "superseded": "fact_id", "retired": "node_id",
           "store_cost": "entry_id"}
TEXT_FIELDS = ("content", "value", "goal", "goals", "progress", "pending", "artifacts", "steps")
_CUT = re.compile(r" …\[cut \d+ chars\]$")
_SENTENCE = re.compile(r"(?<=[.!?;:])\s+|\n+")
_DROP = object()
JOURNAL = Path(".daemon") / "batch.json"
CHECKPOINTS = Path(".daemon") / "checkpoints.json"
MOVE = Path(".daemon") / "purge.json"  # a checkpoint being moved by a purge (file, new size and digest, offset)


def _crash_point() -> None:
    """Tests only (``MEMTIER_PURGE_KILL_AT=N``): SIGKILL this process at the N-th step of a purge."""
    at = os.environ.get("MEMTIER_PURGE_KILL_AT")
    if at is None:
        return
    global _steps
    _steps += 1
    if _steps == int(at):
        os.kill(os.getpid(), 9)


_steps = 0


# ---------------------------------------------------------------- what to remove
def _norm(text: str) -> str:
    return " ".join(text.split())


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _kind(rec: dict) -> str:
    kind = rec.get("kind", "entry")
    return kind if isinstance(kind, str) else ""


class Plan:
    """The forgotten ids, the texts their records hold, and their places in revision chains."""

    def __init__(self, ids: frozenset[str]):
        self.ids = ids
        self.texts: set[str] = set()      # whole forgotten texts (normalised), searched inside strings
        self.short: set[str] = set()      # too short to search for: replaced only where a string is exactly one
        self.parent: dict[str, str | None] = {}  # forgotten fact/skill id -> what it superseded
        self.child: dict[str, str] = {}  # fact id -> the fact that superseded it
        self._re: re.Pattern | None = None

    def learn(self, rec: dict) -> None:
        """Take the texts of a forgotten item's record."""
        sup = rec.get("supersedes")
        self.parent[rec["id"]] = sup if isinstance(sup, str) and sup else None
        for field in TEXT_FIELDS:
            for text in _strings(rec.get(field)):
                text = _norm(_CUT.sub("", text))
                if len(text) >= MIN_TEXT:
                    self.texts.add(text)
                    self.texts.update(s for s in map(str.strip, _SENTENCE.split(text)) if len(s) >= MIN_SENTENCE)
                elif text:
                    self.short.add(text)
        self._re = None

    def ancestor(self, item_id: str | None) -> str | None:
        """The nearest version of a chain that is not forgotten, from ``item_id`` back."""
        seen = set()
        while item_id in self.ids and item_id not in seen:
            seen.add(item_id)
            item_id = self.parent.get(item_id)
        return item_id

    def _kept_successor(self, item_id: str) -> bool:
        """Whether a newer version of ``item_id`` that is not forgotten exists (it will supersede the older one)."""
        seen = set()
        while item_id in self.child and item_id not in seen:
            seen.add(item_id)
            item_id = self.child[item_id]
            if item_id not in self.ids:
                return True
        return False

    def _pattern(self) -> re.Pattern | None:
        if self._re is None and self.texts:
            self._re = re.compile("|".join(re.escape(t) for t in sorted(self.texts, key=len, reverse=True)))
        return self._re

    def holds(self, text: str) -> bool:
        """Whether ``text`` holds a forgotten text (or is a clipped copy of one)."""
        return self.scrub(text) != text

    def scrub(self, text: str) -> str:
        if _norm(text) in self.short:
            return MARK
        pat = self._pattern()
        if pat is None:
            return text
        out = pat.sub(MARK, text)
        flat = _norm(out)
        if flat != out and pat.search(flat):  # the copy's whitespace differs (a skill's goal is re-spaced)
            out = pat.sub(MARK, flat)
        head = _norm(_CUT.sub("", out))
        if head != _norm(out) and len(head) >= MIN_TEXT and any(t.startswith(head) for t in self.texts):
            return MARK  # a clipped copy ("…[cut N chars]") of a forgotten text
        return out

    def quotes(self, text: str) -> bool:
        """Whether ``text`` holds a forgotten text long enough to search for (not merely a short one)."""
        pat = self._pattern()
        return pat is not None and (pat.search(text) is not None or pat.search(_norm(text)) is not None)

    def _is_ref(self, value: str) -> bool:
        """A string naming a forgotten id: the id itself, or "id: why" (a trace's left_out)."""
        return value in self.ids or value.split(":", 1)[0] in self.ids

    def clean(self, value):
        """``value`` without references to forgotten ids and with their texts scrubbed."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, list):
            return [self.clean(v) for v in value
                    if not (isinstance(v, str) and self._is_ref(v))
                    and not (isinstance(v, dict) and v.get("id") in self.ids)]
        if isinstance(value, dict):
            return {k: self.clean(v) for k, v in value.items()}
        return value

    def record(self, rec: dict, final: bool) -> Any:
        """What ``rec`` becomes: itself, a scrubbed copy, a replacement, or ``_DROP``.

        ``final`` False (the first pass) keeps forgotten records as they are, so their texts stay readable.
        """
        kind = _kind(rec)
        if kind in PRIMARY and rec.get("id") in self.ids:
            if not final:
                return rec
            if kind == "fact":  # the older version it retired stays retired (by its newer version, if kept)
                older = self.ancestor(rec["id"])
                if older and not self._kept_successor(rec["id"]):
                    return {"v": jsonl.SCHEMA_VERSION, "kind": "superseded", "fact_id": older, "by": rec["id"],
                            "project": rec.get("project") or "", "timestamp": rec.get("timestamp")}
            return _DROP
        if rec.get(SUBJECT.get(kind, "")) in self.ids:
            return _DROP
        out = self.clean(rec)
        if kind in ("fact", "skill") and out.get("supersedes") in self.ids:
            older = self.ancestor(out["supersedes"])
            if kind == "fact" or older:
                out["supersedes"] = older
            else:
                del out["supersedes"]
        return out


# ---------------------------------------------------------------- files
def _files(root: Path) -> list[Path]:
    """Every JSONL file under ``root`` but the tombstone file and the derived index; episodic ones first."""
    out = [p for p in root.rglob("*.jsonl")
           if p.is_file() and p.name != tombstones.FILE and ".index" not in p.relative_to(root).parts]
    return sorted(out, key=lambda p: (p.relative_to(root).parts[0] != "episodic", str(p)))


class _Locked:
    """An exclusive ``flock`` on ``path`` as it is now (the lock :func:`store.files.append_lines` takes)."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        while True:
            self.fd = os.open(self.path, os.O_RDONLY)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            try:
                if os.fstat(self.fd).st_ino == os.stat(self.path).st_ino:
                    return self
            except FileNotFoundError:
                pass
            os.close(self.fd)  # replaced while we waited: lock the new one

    def __exit__(self, *exc):
        os.close(self.fd)


def _lines(path: Path, plan: Plan, final: bool, quoted: set[str] | None) -> tuple[list[bytes], list[bytes]]:
    """(old lines, new lines): line i of the file becomes new[i] (b"" when it goes)."""
    old, new = [], []
    for _lineno, _end, raw, _problem in read_lines(path):
        if raw is None:  # a torn last line: it stays unless it holds forgotten text
            with open(path, "rb") as fh:
                fh.seek(sum(map(len, old)))
                raw = fh.read()
            old.append(raw)
            new.append(b"" if plan.holds(raw.decode("utf-8", "replace")) else raw)
            continue
        old.append(raw)
        try:
            rec = jsonl.loads(raw) if raw.strip() else None
        except ValueError:
            rec = None
        if not isinstance(rec, dict):  # not ours to judge, unless it holds forgotten text
            new.append(b"" if plan.holds(raw.decode("utf-8", "replace")) else raw)
            continue
        if quoted is not None and _kind(rec) == "entry" and rec.get("id") not in plan.ids \
                and isinstance(rec.get("content"), str) and plan.holds(rec["content"]):
            if plan.quotes(rec["content"]):
                quoted.add(rec["id"])
            new.append(raw)  # another entry: the user's own words, never changed here
            continue
        out = plan.record(rec, final)
        new.append(b"" if out is _DROP else raw if out == rec else jsonl.dumps(out))
    return old, new


def _offset(old: list[bytes], new: list[bytes], at: int) -> int:
    """Where byte ``at`` of the old file (a line boundary) lies in the new one."""
    pos = out = 0
    for o, n in zip(old, new):
        if pos + len(o) > at:
            break
        pos += len(o)
        out += len(n)
    return out


def _load_checkpoints(root: Path) -> dict:
    try:
        data = orjson.loads((root / CHECKPOINTS).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_checkpoints(root: Path, data: dict) -> None:
    atomic_write(root / CHECKPOINTS, orjson.dumps(data, option=orjson.OPT_INDENT_2))
    _crash_point()


def _rewrite(root: Path, path: Path, plan: Plan, final: bool, quoted: set[str]) -> bool:
    """Rewrite one JSONL file (under its lock); True when it changed. Keeps the daemon's checkpoint of an
    episodic file consistent at every instant (see the module docstring)."""
    with _Locked(path):
        old, new = _lines(path, plan, final, quoted if path.relative_to(root).parts[0] == "episodic" else None)
        if old == new:
            return False
        rel = path.relative_to(root).as_posix()
        cps = _load_checkpoints(root)
        files = cps.get("files") if isinstance(cps.get("files"), dict) else {}
        cp = files.get(rel)
        data = b"".join(new)
        if isinstance(cp, int) and not isinstance(cp, bool) and _offset(old, new, cp) != cp:
            # the checkpoint moves: say where to (for this new file) first, then lower it to a line both
            # files share, replace the file, and move it there
            first = next(i for i, (o, n) in enumerate(zip(old, new)) if o != n)
            common = sum(map(len, old[:first]))
            was = b"".join(old)
            atomic_write(root / MOVE, orjson.dumps({"file": rel, "old": [len(was), _digest(was), cp],
                                                    "new": [len(data), _digest(data), _offset(old, new, cp)]}))
            _crash_point()
            if cp > common:
                _save_checkpoints(root, {**cps, "files": {**files, rel: common}})
            atomic_write(path, data)
            _crash_point()
            _finish_move(root)
        else:
            atomic_write(path, data)
            _crash_point()
    return True


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _finish_move(root: Path) -> None:
    """Put right a checkpoint a killed purge had lowered: where it belongs in the file now on disk, the
    old one (still there) or the new one (lines appended since are fine). A batch that moved it on since
    is left alone."""
    try:
        move = orjson.loads((root / MOVE).read_bytes())
        rel = move["file"]
        with open(root / rel, "rb") as fh:
            data = fh.read()
        cps = _load_checkpoints(root)
        files = cps.get("files") if isinstance(cps.get("files"), dict) else {}
        now = files.get(rel)
        for size, digest, cp in (move["new"], move["old"]):
            if len(data) >= size and _digest(data[:size]) == digest:
                if not isinstance(now, int) or now < cp:
                    _save_checkpoints(root, {**cps, "files": {**files, rel: cp}})
                break
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError, orjson.JSONDecodeError):
        log.warning("%s: unusable; the checkpoint it names stays lowered (safe: entries are read again)", root / MOVE)
    (root / MOVE).unlink(missing_ok=True)
    _crash_point()


def _rewrite_journal(root: Path, plan: Plan, final: bool) -> bool:
    """The daemon's batch journal (an interrupted batch's facts and promoted records): the same rules."""
    path = root / JOURNAL
    try:
        data = orjson.loads(path.read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return False
    if not isinstance(data, dict):
        return False
    facts = {p: [r for r in (plan.record(x, final) for x in recs if isinstance(x, dict)) if r is not _DROP]
             for p, recs in (data.get("facts") or {}).items() if isinstance(recs, list)}
    promoted = [{**i, "record": plan.record(i["record"], final)} for i in data.get("promoted") or []
                if isinstance(i, dict) and isinstance(i.get("record"), dict)]
    out = {**data, "facts": facts, "promoted": [i for i in promoted if i["record"] is not _DROP]}
    if out == data:
        return False
    atomic_write(path, orjson.dumps(out))
    _crash_point()
    return True


def _journal_records(root: Path) -> list[dict]:
    try:
        data = orjson.loads((root / JOURNAL).read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return []
    if not isinstance(data, dict):
        return []
    return [r for recs in (data.get("facts") or {}).values() if isinstance(recs, list) for r in recs
            if isinstance(r, dict)]


def _drop_temps(root: Path) -> None:
    """Temp files a killed purge left beside the files it was replacing (never read: the old file stands)."""
    for tmp in root.rglob(".*.tmp"):
        rel = tmp.relative_to(root)
        if rel.parts[0] != ".index" and re.fullmatch(r"\..+\.jsonl\.\d+\.[0-9a-f]{16}\.tmp", tmp.name) or (
                rel.parent == JOURNAL.parent and re.fullmatch(r"\..+\.json\.\d+\.[0-9a-f]{16}\.tmp", tmp.name)):
            tmp.unlink(missing_ok=True)


def _plan(root: Path, ids: frozenset[str], files: list[Path]) -> Plan:
    plan = Plan(ids)
    records = (rec for path in files for rec, _n, problem in _iter(path) if not problem)
    for rec in [*records, *_journal_records(root)]:
        if _kind(rec) == "fact" and isinstance(rec.get("supersedes"), str) and isinstance(rec.get("id"), str):
            plan.child.setdefault(rec["supersedes"], rec["id"])
        if _kind(rec) in PRIMARY and rec.get("id") in ids:
            plan.learn(rec)
    return plan


def _iter(path: Path):
    try:
        yield from iter_records(path)
    except FileNotFoundError:
        return


# ---------------------------------------------------------------- the derived index
def _drop_index(root: Path) -> None:
    """Delete every saved index generation and the vector cache, each under the lock its writers take."""
    base = root / ".index"
    if not base.is_dir():
        return
    for sub in sorted(p for p in base.iterdir() if p.is_dir()):
        locks = [sub / "lock"] if (sub / "lock").exists() else sorted(sub.glob("*.lock"))
        fds = []
        try:
            for lock in locks:
                fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
                fds.append(fd)
                fcntl.flock(fd, fcntl.LOCK_EX)
            for child in sub.iterdir():
                if child in locks:
                    continue
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink(missing_ok=True)
        finally:
            for fd in fds:
                os.close(fd)
    _crash_point()


def _rebuild_index(config) -> bool:
    from .recall.index_files import open_index, save_index

    root, bm = Path(config.memory_root), config.bm25
    saved = True
    for kind in ("episodic", "semantic"):
        index, _changed = open_index(root, kind, kind, k1=bm.k1, b=bm.b, idf=bm.idf, fresh=True,
                                     reply_context=config.retrieval.reply_context if kind == "episodic" else False)
        saved = save_index(index, root / ".index" / kind) and saved
    return saved


# ---------------------------------------------------------------- the one entry point
def _root_and_config(target) -> tuple[Path, Any]:
    config = getattr(target, "config", None)
    if config is None and hasattr(target, "memory_root") and hasattr(target, "bm25"):
        config = target
    if config is not None:
        return Path(config.memory_root), config
    return Path(target), None


def purge(target, *, progress: Callable[[str], None] | None = None) -> dict:
    """Remove the text of every forgotten item from every file under the memory root.

    ``target``: a Memory, a Config or a memory root. Returns ``{"purged": [ids not purged before],
    "files_rewritten": n, "index_rebuilt": bool, "still_quoted": [ids of other entries quoting a
    forgotten text]}``: ids only, never content. The index is rebuilt when a config is at hand (a
    Memory or a Config), else left deleted for the next reader to rebuild.
    """
    from .consolidation.checkpoints import BatchLock

    root, config = _root_and_config(target)
    forgotten = tombstones.Forgotten(root)
    ids, pending = forgotten.ids(), forgotten.pending_purge()
    out = {"purged": [], "files_rewritten": 0, "index_rebuilt": False, "still_quoted": []}
    if not pending:  # nothing forgotten since the last purge finished
        return out
    rewritten: set[Path] = set()
    quoted: set[str] = set()
    with BatchLock(root):
        _drop_temps(root)
        _finish_move(root)
        files = _files(root)
        plan = _plan(root, ids, files)
        for final in (False, True):  # scrub everything first, keeping the forgotten records; then drop them
            for path in files:
                if progress:
                    progress(str(path.relative_to(root)))
                if _rewrite(root, path, plan, final, quoted):
                    rewritten.add(path)
            if _rewrite_journal(root, plan, final):
                rewritten.add(root / JOURNAL)
        _drop_index(root)
        if config is not None:
            out["index_rebuilt"] = _rebuild_index(config)
        _crash_point()
        tombstones.append(root, [tombstones.purged_record(t) for t in pending])
    log.info("purged %d forgotten items (%d files rewritten)", len(pending), len(rewritten))
    out.update(purged=list(pending), files_rewritten=len(rewritten), still_quoted=sorted(quoted))
    return out
