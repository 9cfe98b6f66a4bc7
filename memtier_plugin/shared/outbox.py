"""The outbox: the shared tiers' own local ledgers, and how far each one has been shipped.

A shared record is first an fsync'd line of its local ledger (``store.files.append_lines``: whole lines,
a torn tail closed), written at a task boundary or by consolidation, never on the prompt path. That
ledger *is* the durable outbox: nothing is written twice, and what the engine has not acknowledged is
exactly what lies past the shipped offset. :class:`Outbox` keeps, per file, its inode and the offset
up to which every line is in the engine, in ``memory/.shared/shipped.json`` (replaced atomically after
each acknowledged push). A crash between the push and the save ships those lines again, which the
engine's ``(tenant, id)`` key makes a no-op; a replaced file (another inode, or shorter) is shipped
again from its start, for the same reason.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Iterator

import orjson

from ..store.files import TailReader
from .rows import Row, scope_hint, tier_files, to_row

SUB = ".shared"


def save_json(path: Path, data: dict) -> None:
    """Replace ``path`` with ``data`` atomically and durably (temp file, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "wb") as f:
        f.write(orjson.dumps(data))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_json(path: Path) -> dict:
    try:
        data = orjson.loads(path.read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


class Outbox:
    """What of each shared-tier ledger is not yet in the engine."""

    def __init__(self, memory_root: Path, tiers):
        self.root = Path(memory_root)
        self.tiers = tuple(tiers)
        self.path = self.root / SUB / "shipped.json"
        self._readers: dict[str, tuple[str, TailReader]] = {}
        self._lock = threading.Lock()
        saved = load_json(self.path)
        self._saved = {k: v for k, v in saved.items() if isinstance(v, list) and len(v) == 2}

    def _reader(self, tier: str, path: Path) -> TailReader:
        key = str(path.relative_to(self.root))
        if key not in self._readers:
            r = TailReader(path)
            ino, offset = self._saved.get(key, [None, 0])
            if ino is not None:
                r.resume(offset, ino)  # TailReader reads a replaced or shorter file from its start
            self._readers[key] = (tier, r)
        return self._readers[key][1]

    def pending(self, limit: int) -> Iterator[tuple[str, int, Row | None]]:
        """Up to ``limit`` unshipped lines: (file key, offset after the line, its row or None when it is not
        a shared record). Reading advances each file's reader; :meth:`acknowledge` persists the offsets."""
        n = 0
        for tier, path in tier_files(self.root, self.tiers):
            reader = self._reader(tier, path)
            key = str(path.relative_to(self.root))
            hint = scope_hint(path)
            for _at, end, rec in reader.read():
                yield key, end, (to_row(tier, rec, hint) if rec is not None else None)
                n += 1
                if n >= limit:
                    return

    def acknowledge(self) -> None:
        """Every line read so far is in the engine: save each file's offset."""
        with self._lock:
            for key, (_tier, r) in self._readers.items():
                if r.inode is not None:
                    self._saved[key] = [r.inode, r.offset]
            save_json(self.path, self._saved)

    def reset(self) -> None:
        """Ship every line again from the start (``memtier shared push --all``: the engine skips what it holds)."""
        self._saved.clear()
        self._readers.clear()

    def rewind(self) -> None:
        """Forget what was read but not acknowledged (a push failed): it is read again next time."""
        self._readers.clear()

    def backlog_bytes(self) -> int:
        """Bytes of the shared ledgers past the acknowledged offsets (what waits for the engine)."""
        total = 0
        for _tier, path in tier_files(self.root, self.tiers):
            key = str(path.relative_to(self.root))
            try:
                st = os.stat(path)
            except OSError:
                continue
            ino, offset = self._saved.get(key, [None, 0])
            total += st.st_size - (offset if ino == st.st_ino and st.st_size >= offset else 0)
        return total
