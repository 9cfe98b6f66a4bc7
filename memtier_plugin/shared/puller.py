"""The read path: a gap-free change feed from the engine into this host's ledgers (its replica).

Identity values are handed out at insert, not at commit: a reader of ``seq > cursor`` alone can pass a
row whose transaction commits later and never read it (SCALE-OUT.md §5.3). The feed therefore reads
only rows whose transaction is older than every transaction still running
(``txid < pg_snapshot_xmin(pg_current_snapshot())``): it waits for a slow writer, it never skips one.
Rows are appended in ``seq`` order to the same ledgers and shapes the local writers use, so every reader
and the search index take them as they take a local write. A row is validated by its tier's reader
first (another host's rows are untrusted), and a row whose id this host's ledgers already hold (its own
writes, or a row pulled before a crash) is not appended again. The cursor is saved after the append: a
crash in between pulls the rows again, and the id check drops them.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from pathlib import Path

from ..store import jsonl
from ..store.files import TailReader, append_lines
from .outbox import SUB, load_json, save_json
from .rows import from_engine, local_path, scope_hint, tier_files, to_row

log = logging.getLogger(__name__)
PULL_LIMIT = 1000


class KnownIds:
    """The ids this host's shared-tier ledgers hold, kept current by reading what each file gained."""

    def __init__(self, memory_root: Path, tiers):
        self.root, self.tiers = Path(memory_root), tuple(tiers)
        self.ids: set[str] = set()
        self._tails: dict[Path, TailReader] = {}

    def refresh(self) -> set[str]:
        for tier, path in tier_files(self.root, self.tiers):
            tail = self._tails.setdefault(path, TailReader(path))
            hint = scope_hint(path)
            for _at, _end, rec in tail.read():
                row = to_row(tier, rec, hint) if rec is not None else None
                if row is not None:
                    self.ids.add(row.id)
        return self.ids


class Puller:
    """Pulls one tenant's rows past the saved cursor into this host's ledgers."""

    def __init__(self, engine, memory_root: Path, tiers, *, fsync: bool = True):
        self.engine, self.root, self.tiers, self.fsync = engine, Path(memory_root), list(tiers), fsync
        self.path = self.root / SUB / "pulled.json"
        saved = load_json(self.path).get("cursor", 0)
        self.cursor = saved if isinstance(saved, int) and saved >= 0 else 0
        self.known = KnownIds(self.root, self.tiers)
        self.appended: set[str] = set()  # ids this puller wrote (the shipper need not push them back)
        self.rejected = 0  # rows that failed their tier's check (counted, never appended)
        self._lock = threading.Lock()  # one pull at a time (the feed thread, a command's own call)

    def pull_once(self, limit: int = PULL_LIMIT) -> int:
        """Append every committed row past the cursor; returns how many lines were appended."""
        with self._lock:
            return self._pull(limit)

    def _pull(self, limit: int) -> int:
        total = 0
        while True:
            with self.engine.tx() as cur:
                cur.execute("SELECT seq, tier, scope, id, body::text FROM memtier_records WHERE tenant = %s AND seq > %s "
                            "AND txid < pg_snapshot_xmin(pg_current_snapshot()) AND tier = ANY(%s) ORDER BY seq LIMIT %s",
                            (self.engine.tenant, self.cursor, self.tiers, limit))
                rows = cur.fetchall()
            if not rows:
                return total
            known = self.known.refresh()  # after the read: a local line pushed meanwhile is in its file by now
            by_path: dict[Path, list[bytes]] = defaultdict(list)
            for _seq, tier, scope, rid, body in rows:
                if rid in known or rid in self.appended:
                    continue
                rec = from_engine(tier, scope, body)
                if rec is None:
                    self.rejected += 1
                    log.warning("memtier shared: row %r of tier %r skipped: not a valid %s record", rid[:40], tier, tier)
                    continue
                by_path[local_path(self.root, tier, scope)].append(jsonl.dumps(rec))
                self.appended.add(rid)
            for path, lines in by_path.items():
                append_lines(path, b"".join(lines), fsync=self.fsync)
                total += len(lines)
            self.cursor = rows[-1][0]
            save_json(self.path, {"cursor": self.cursor})
            if len(rows) < limit:
                return total
