"""Files on disk: durable appends of whole lines, reading lines back, tailing a file, and atomic replaces.

Every JSONL file memtier keeps is appended to by :func:`append_lines` (under an
exclusive lock, fsynced, a failed append truncated back, a torn last line
closed first) and read back by :func:`read_lines` / :func:`iter_records` (whole
files) or a :class:`TailReader` (what a file gained since the last read, with
replaced and shrunk files noticed). Lines are split on ``\\n`` only.

Whole files go through :func:`atomic_write`: a reader sees the old file or the
new one, never a half-written one: the data goes to a temp file in the same
folder (created with its final mode, so a private file is never readable by
others, not even for a moment, and with O_EXCL | O_NOFOLLOW, so a name planted
in the folder, a symlink above all, never redirects the data), is fsynced, and replaces the target; the folder
is then fsynced so the rename survives a power cut.
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from . import jsonl

log = logging.getLogger(__name__)
# Closes a torn last line: RS (0x1E) is invalid anywhere in JSON, inside a string too, so a write cut
# off just before its newline is not turned into a whole record (a ghost, or a duplicate once redone).
TORN_END = b"\x1e\n"


def fsync_dir(directory: Path | str) -> None:
    """fsync a folder, so a file created or renamed in it survives a crash."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: How often a temp name is drawn again when the drawn one exists (planted, or left by a crash).
_TEMP_TRIES = 16


def _create_temp(path: Path, mode: int) -> tuple[int, Path]:
    """A new temp file beside ``path``: created here (O_EXCL), never through a symlink (O_NOFOLLOW).

    A name someone planted (a symlink to another file, a file of theirs) is
    skipped, not opened: the data never goes anywhere but a file this call made.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for attempt in range(_TEMP_TRIES):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(8).hex()}.tmp")
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:
            if attempt == _TEMP_TRIES - 1:
                raise
    raise AssertionError("unreachable")


def atomic_write(path: Path | str, data: bytes | Callable[[BinaryIO], None], *, mode: int = 0o644,
                 fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` (bytes, or a function writing to a binary file) atomically.

    ``mode`` is the new file's permission from its creation; ``fsync=False`` skips both fsyncs
    (derived files that are rebuilt when lost). The temp file is created with O_EXCL | O_NOFOLLOW:
    a symlink or file planted under its name is never written through.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path, mode)
    try:
        with os.fdopen(fd, "wb", closefd=False) as f:
            if callable(data):
                data(f)
            else:
                f.write(data)
            f.flush()
            if fsync:
                os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)
    if fsync:
        fsync_dir(path.parent)


def read_lines(path: Path, start: int = 0, *, final: bool = True) -> Iterator[tuple[int, int, bytes | None, str | None]]:
    """Yield (lineno, end_offset, raw_line, problem) for each line from byte ``start``.

    ``lineno`` counts from the start of the file only when ``start`` is 0. A
    last line without a newline is reported as torn when ``final`` (a whole-file
    read); a tail reader passes ``final=False`` and leaves it for later.
    """
    with open(path, "rb") as fh:
        fh.seek(start)
        data = fh.read()
    offset, lineno = start, 0
    for raw in _split_lf(data):
        lineno += 1
        if not raw.endswith(b"\n"):
            if final:
                yield lineno, offset + len(raw), None, "torn last line (no newline: a write was cut off)"
            return
        offset += len(raw)
        yield lineno, offset, raw, None


def _split_lf(data: bytes) -> Iterator[bytes]:
    """Lines of ``data`` split on ``\\n`` only, each with its newline (the last may lack it).

    ``bytes.splitlines`` also splits on a lone CR, which would make a line holding
    one look torn and hide every later line of the file.
    """
    start, n = 0, len(data)
    while start < n:
        end = data.find(b"\n", start)
        if end < 0:
            yield data[start:]
            return
        yield data[start:end + 1]
        start = end + 1


def tail_records(path: Path, start: int = 0) -> Iterator[tuple[int, int, dict | None]]:
    """Complete lines appended from byte ``start``: (line start, line end, record).

    The record is None for a blank or unreadable line (logged), so a tail
    reader still advances past it; an unfinished last line is left for later.
    """
    line_at = start
    for _lineno, end, raw, _problem in read_lines(path, start, final=False):
        rec = None
        if raw.strip():
            try:
                rec = jsonl.loads(raw)
            except ValueError:
                log.warning("%s: skipped an unreadable line at byte %d", path, line_at)
        yield line_at, end, rec
        line_at = end


def iter_records(path: Path, start: int = 0, *, final: bool = True) -> Iterator[tuple[dict, int, str | None]]:
    """Parsed records of one ledger file: (record, lineno, problem)."""
    for lineno, _end, raw, problem in read_lines(path, start, final=final):
        if problem:
            yield {}, lineno, problem
            continue
        if not raw.strip():
            continue
        try:
            rec = jsonl.loads(raw)
        except ValueError as exc:
            yield {}, lineno, f"not a JSON object ({str(exc).splitlines()[0][:80]})"
            continue
        yield rec, lineno, None


def _locked_append_fd(path: Path) -> int:
    """An O_APPEND descriptor of ``path`` holding its exclusive lock, on the file the name names now.

    A file replaced whole while we waited for its lock (``memtier purge`` rewrites a ledger under the
    same lock) is opened again: an append into the replaced one would be lost.
    """
    while True:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def append_lines(path: Path, data: bytes, *, fsync: bool = True) -> int:
    """Append whole lines under an exclusive lock; after a torn tail, close it (``TORN_END``) first.

    Returns the byte offset at which ``data`` starts in the file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    fd = _locked_append_fd(path)
    try:
        try:
            size = os.fstat(fd).st_size
            start = size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                log.warning("%s: torn last line found; closing it, the next record starts on a new line", path)
                data = TORN_END + data
                start += len(TORN_END)
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                if fsync:
                    os.fsync(fd)
            except OSError:
                # ENOSPC, EIO, ...: leave no partial line behind (we hold the lock; nobody appended)
                try:
                    os.ftruncate(fd, size)
                except OSError:
                    log.error("%s: could not truncate a failed append back to %d bytes", path, size)
                raise
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    if created and fsync:
        fsync_dir(path.parent)
    return start


class TailReader:
    """What one file gained since the last read: the one incremental reader of the stores.

    :meth:`read` yields ``(line start, line end, record)`` for each complete new line
    (record None for a blank or unreadable one) and advances as they are consumed;
    an unfinished last line is left for later. :attr:`restarted` is True after a
    read that began again at byte 0 because the file was replaced (another inode),
    shrank or vanished: the caller then drops what it folded from the old file.
    """

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.offset = 0
        self.lines = 0  # complete lines read since the start of the file
        self.restarted = False
        self._ino: int | None = None

    def resume(self, offset: int, inode: int | None) -> None:
        """Start at ``offset`` of the file with ``inode`` (a saved position); another file there, or a shorter
        one, is read from its start at the next :meth:`read`."""
        self.offset, self._ino = max(0, int(offset)), inode

    @property
    def inode(self) -> int | None:
        return self._ino

    def read(self) -> Iterator[tuple[int, int, dict | None]]:
        self.restarted = False
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self.offset or self._ino is not None:
                self.restarted = True
            self.offset, self.lines, self._ino = 0, 0, None
            return
        if (self._ino is not None and st.st_ino != self._ino) or st.st_size < self.offset:
            log.info("%s: replaced or shrank; reading it again from the start", self.path)
            self.offset, self.lines, self.restarted = 0, 0, True
        self._ino = st.st_ino
        if st.st_size == self.offset:
            return
        for line_at, end, rec in tail_records(self.path, self.offset):
            self.offset = end
            self.lines += 1
            yield line_at, end, rec
