"""Whole-file writes: the one atomic replace every derived or private file goes through.

A reader sees the old file or the new one, never a half-written one: the data
goes to a temp file in the same folder (created with its final mode, so a
private file is never readable by others, not even for a moment), is fsynced,
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


def atomic_write(path: Path | str, data: bytes | Callable[[BinaryIO], None], *, mode: int = 0o644,
                 fsync: bool = True) -> None:
    """Replace ``path`` with ``data`` (bytes, or a function writing to a binary file) atomically.

    ``mode`` is the new file's permission from its creation; ``fsync=False`` skips both fsyncs
    (derived files that are rebuilt when lost).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
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
