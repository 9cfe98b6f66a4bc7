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
the ledgers, so nothing is lost. What each record becomes is
:mod:`store.scrub`'s; this module reads and replaces the files.

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
from .store.scrub import DROP, PRIMARY, Plan, kind_of

log = logging.getLogger(__name__)

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
        if quoted is not None and kind_of(rec) == "entry" and rec.get("id") not in plan.ids \
                and isinstance(rec.get("content"), str) and plan.holds(rec["content"]):
            if plan.quotes(rec["content"]):
                quoted.add(rec["id"])
            new.append(raw)  # another entry: the user's own words, never changed here
            continue
        out = plan.record(rec, final)
        new.append(b"" if out is DROP else raw if out == rec else jsonl.dumps(out))
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
    facts = {p: [r for r in (plan.record(x, final) for x in recs if isinstance(x, dict)) if r is not DROP]
             for p, recs in (data.get("facts") or {}).items() if isinstance(recs, list)}
    promoted = [{**i, "record": plan.record(i["record"], final)} for i in data.get("promoted") or []
                if isinstance(i, dict) and isinstance(i.get("record"), dict)]
    out = {**data, "facts": facts, "promoted": [i for i in promoted if i["record"] is not DROP]}
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
        if kind_of(rec) == "fact" and isinstance(rec.get("supersedes"), str) and isinstance(rec.get("id"), str):
            plan.child.setdefault(rec["supersedes"], rec["id"])
        if kind_of(rec) in PRIMARY and rec.get("id") in ids:
            plan.learn(rec)
    for hook in _hooks(root):  # a forgotten hook's text: searched for, though its file is the user's own
        if hook.id in ids or hook.key in ids:
            plan.learn({"id": hook.key, "content": hook.entry})
    return plan


def _hooks(root: Path) -> list:
    from .scheduling.hooks import HOOKS_DIR, SUFFIXES, load_hooks_file

    out = []
    for path in sorted((root / HOOKS_DIR).glob("*")) if (root / HOOKS_DIR).is_dir() else []:
        if path.suffix in SUFFIXES:
            try:
                out.extend(load_hooks_file(path))
            except Exception as exc:  # a bad hooks file is the hooks loader's to report
                log.debug("%s: not read for the purge: %s", path, exc)
    return out


def _left_in(root: Path, plan: Plan) -> list[str]:
    """Files under ``root`` (but the derived index) that still hold a forgotten text, raw or as JSON writes it:
    the user's own files (hooks), and ledgers with another entry quoting one."""
    if not plan.texts:
        return []
    forms = {t.encode() for t in plan.texts} | {orjson.dumps(t)[1:-1] for t in plan.texts}
    pat = re.compile(b"|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)))
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.is_symlink()
                  and p.relative_to(root).parts[0] != ".index" and pat.search(p.read_bytes()))


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
    forgotten text], "left_in": [files under the root still holding one: those, and hook files]}``: ids only, never content. The index is rebuilt when a config is at hand (a
    Memory or a Config), else left deleted for the next reader to rebuild.
    """
    from .consolidation.checkpoints import BatchLock

    root, config = _root_and_config(target)
    forgotten = tombstones.Forgotten(root)
    ids, pending = forgotten.ids(), forgotten.pending_purge()
    out = {"purged": [], "files_rewritten": 0, "index_rebuilt": False, "still_quoted": [], "left_in": []}
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
    out.update(purged=list(pending), files_rewritten=len(rewritten), still_quoted=sorted(quoted),
               left_in=_left_in(root, plan))
    return out
