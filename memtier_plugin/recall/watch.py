"""Cheap change detection over the ledger files of one folder, for a refresh on every recall."""

from __future__ import annotations

import os
from pathlib import Path

from .index import DocIndex, StaleLedger

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
        self.removed: list[str] = []  # files seen before and gone now (checked against the index by poll)

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
        self.removed.extend(sorted(old - set(files)))
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
            self.removed.extend(self.files.pop(d, None) or ())

    def _rebuild(self) -> None:
        self._all = sorted(f for files in self.files.values() for f in files)
        hot: list[str] = []
        for files in self.files.values():
            hot.extend(files if len(files) <= self.HOT_ALL else files[-self.HOT:])
        self._hot = hot
        self._cursor %= max(1, len(self._all))

    def poll(self, index: DocIndex, full: bool = False) -> int:
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
        removed, self.removed = self.removed, []
        for path in removed:
            if path in index.checkpoint:
                raise StaleLedger(path, "removed since it was indexed")
        read = 0
        for path in sorted(touched):
            try:
                st = os.stat(path)
            except FileNotFoundError:
                if path in index.checkpoint:
                    raise StaleLedger(path, "removed since it was indexed") from None
                continue
            if index.needs_read(path, st):
                read += index.tail_file(Path(path))
        return read


def _mtime_ns(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1
