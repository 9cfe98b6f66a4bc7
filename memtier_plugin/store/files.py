"""Whole-file writes: the one atomic replace every derived or private file goes through.

A reader sees the old file or the new one, never a half-written one: the data
goes to a temp file in the same folder (created with its final mode, so a
private file is never readable by others, not even for a moment, and with O_EXCL | O_NOFOLLOW, so
a name planted in the folder, a symlink above all, never redirects the data), is fsynced,
and replaces the target; the folder is then fsynced so the rename survives a
power cut. Appends to the ledgers are ``store.episodic.append_lines``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO, Callable


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
