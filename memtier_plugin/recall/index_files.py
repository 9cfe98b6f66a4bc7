"""The index on disk: saved generations behind a ``CURRENT`` pointer, and opening (load, then catch up).

``memory/.index/<kind>/`` holds generations ``g-<hex>/``; :func:`save_index`
writes a new one (one saver at a time, under ``lock``) and then moves
``CURRENT`` to it, so a reader never sees a half-written index; older
generations are removed. :func:`open_index` loads the current generation and
reads what the ledgers gained since, or rebuilds from the ledgers when a saved
index no longer matches them (a file shrunk, replaced or removed by hand).
Everything here is derived: deleting ``.index/`` loses nothing.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
from pathlib import Path
from typing import Callable

from ..store.files import atomic_write
from .index import _GEN_RE, DocIndex, StaleLedger

log = logging.getLogger(__name__)


def current_generation(directory: Path) -> Path | None:
    """The saved generation ``directory/CURRENT`` names, if any."""
    try:
        name = (directory / "CURRENT").read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return directory / name if _GEN_RE.fullmatch(name) else None


def save_index(index: DocIndex, directory: Path) -> bool:
    """Publish ``index`` as ``directory``'s current generation; False when not saved.

    Each save writes a new folder ``g-<random>`` and then atomically replaces the
    ``CURRENT`` pointer, so a reader never sees a half-written index and two
    processes never share a temporary name. One process saves at a time (a
    non-blocking ``flock``: a busy lock means someone else is saving what the
    ledgers hold, so this process keeps its index in memory). Older generations
    are removed, so text removed from a ledger by hand does not outlive the
    next save. A read-only workspace raises OSError (the caller keeps the index in memory).
    """
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        gen = directory / f"g-{os.urandom(8).hex()}"
        try:
            index.write(gen)
            atomic_write(directory / "CURRENT", gen.name.encode("ascii"), fsync=False)
        except BaseException:
            shutil.rmtree(gen, ignore_errors=True)
            raise
        for child in directory.iterdir():
            if child != gen and (_GEN_RE.fullmatch(child.name) or child.name in ("bm25", "meta.json", "columns.npz")):
                shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)  # releases the lock


def load_saved(directory: Path, *, k1: float, b: float, idf: str) -> DocIndex | None:
    """The current saved generation of ``directory``, or None (none saved, or removed under us twice)."""
    for _attempt in range(2):
        gen = current_generation(directory)
        if gen is None:
            return None
        try:
            return DocIndex.load(gen, k1=k1, b=b, idf=idf)
        except FileNotFoundError:
            continue  # a newer save removed it while we read: follow CURRENT again
    return None


def ledger_files(root: Path, sub: str) -> list[Path]:
    base = root / sub
    if not base.is_dir():
        return []
    return sorted(base.rglob("*.jsonl"))


def open_index(root: Path, kind: str, sub: str, *, k1: float, b: float, idf: str,
               reply_context: bool = False, fresh: bool = False,
               progress: Callable[[int, int], None] | None = None) -> tuple[DocIndex, bool]:
    """Load the saved index of ``kind`` (or build it) and read what the ledgers gained since.

    Returns (index, changed) — changed is True when anything was read from the
    ledgers (or the saved index was dropped). A saved index that no longer matches
    the ledgers (a file shrunk, replaced, rewritten or removed by hand) is
    rebuilt from them; ``fresh=True`` always rebuilds.
    """
    directory = root / ".index" / kind
    index = None
    if not fresh:
        try:
            index = load_saved(directory, k1=k1, b=b, idf=idf)
            if index is not None and index.reply_context != reply_context:
                raise ValueError("index was built with another retrieval.reply_context")
        except Exception as exc:  # derived data: rebuild whatever is wrong with it
            log.warning("%s: index unusable (%s); rebuilding from the ledgers", directory, exc)
            index = None
    files = ledger_files(root, sub)
    if index is not None:
        present = {str(p) for p in files}
        gone = [f for f in index.checkpoint if f not in present]
        if gone:
            log.warning("%s: removed since it was indexed; rebuilding the %s index", gone[0], kind)
            index = None
    for _attempt in range(2):
        rebuilt = index is None
        if index is None:
            index = DocIndex(kind, k1=k1, b=b, idf=idf, reply_context=reply_context)
        read = 0
        index.begin_bulk()
        try:
            for i, path in enumerate(files):
                read += index.tail_file(path)
                if progress:
                    progress(i + 1, len(files))
            index.end_bulk()
            return index, read > 0 or rebuilt
        except StaleLedger as exc:
            log.warning("%s; rebuilding the %s index from the ledgers", exc, kind)
            index = None
    raise StaleLedger(str(root / sub), "kept changing while the index was rebuilt")
