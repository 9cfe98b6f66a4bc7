"""The push: idempotent appends, and each supersession decided in one transaction under a lock.

Plain records (skills, working state, facts and nodes with no revision key) go in with
``ON CONFLICT (tenant, id) DO NOTHING``: pushed twice, from one host or two, they are there once.
A record with a revision key is decided against the engine's *current* head of that key, never a
replica's, under ``pg_advisory_xact_lock`` of the key (the locks of a batch taken in sorted order, so
two hosts never deadlock): stated at or after the head, it becomes the head and a retirement of the old
head is written; stated before (a host that was offline, or whose clock is behind), it goes in as
history, retired by the head. A retirement a host decided on its own replica (a ``retired`` or
``superseded`` line) goes in only when its target is not retired already, so no record is retired
twice and every key's chain stays linear, whatever the hosts saw when they wrote. The engine's own
retirements travel back to every host through the feed. The transaction ends with a NOTIFY.
"""

from __future__ import annotations

import hashlib
import time

import orjson

from ..layers.global_layer import retirement as node_retirement
from ..store import jsonl
from ..store.paths import derived_id, utc_iso
from .rows import MARKERS, Row, to_row

CHANNEL = "memtier"
_INSERT = ("INSERT INTO memtier_records (tenant, tier, scope, id, kind, rev_key, target, stated_at, body, origin_host) "
           "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s) ON CONFLICT (tenant, id) DO NOTHING RETURNING seq")


def notify_payload(tenant: str) -> str:
    """The NOTIFY payload: a digest of the tenant (a channel is seen by every session, the name is not)."""
    return hashlib.sha1(tenant.encode()).hexdigest()[:16]


def _lock_key(tenant: str, tier: str, scope: str, key: str) -> str:
    return f"{tenant}\x1f{tier}\x1f{scope}\x1f{key}"


def engine_retirement(row: Row, old_id: str, by_id: str, ts: float) -> Row:
    """The retirement the engine decides: ``old_id`` is retired by ``by_id`` (in ``row``'s tier and scope)."""
    if row.tier == "global":
        rec = node_retirement(old_id, by_id, ts, f"{row.body.get('attribute') or 'revised'} revised (decided by the "
                              "shared tier)" if old_id != row.id else "stated before the current version")
    else:
        rec = {"v": jsonl.SCHEMA_VERSION, "kind": "superseded", "id": derived_id("sx", ts, old_id, by_id),
               "fact_id": old_id, "by": by_id, "project": row.scope, "timestamp": utc_iso(ts)}
    out = to_row(row.tier, rec, row.scope)
    assert out is not None  # built here from validated parts
    return out


class Pusher:
    """Pushes rows of one tenant from one host (``cur`` is a cursor in a transaction with the tenant set)."""

    def __init__(self, tenant: str, host: str):
        self.tenant, self.host = tenant, host
        self._for_update = " FOR UPDATE"

    def _params(self, row: Row) -> tuple:
        return (self.tenant, row.tier, row.scope, row.id, row.kind, row.rev_key, row.target, row.stated_at,
                orjson.dumps(row.body).decode(), self.host)

    def _insert(self, cur, row: Row) -> bool:
        cur.execute(_INSERT, self._params(row))
        return cur.fetchone() is not None

    def _retired(self, cur, target: str) -> bool:
        cur.execute("SELECT 1 FROM memtier_records WHERE tenant = %s AND target = %s LIMIT 1", (self.tenant, target))
        return cur.fetchone() is not None

    def push(self, cur, rows: list[Row], *, lock: bool = True) -> int:
        """Push ``rows`` (in order) in the caller's transaction; returns how many were new. ``lock=False``
        is the naive read-then-write, kept only as the control the tests show forking."""
        if not rows:
            return 0
        keys: dict[str, tuple[str, str, str]] = {r.id: (r.tier, r.scope, r.rev_key) for r in rows if r.rev_key}
        targets = sorted({r.target for r in rows if r.target} - set(keys))
        if targets:
            cur.execute("SELECT id, tier, scope, rev_key FROM memtier_records WHERE tenant = %s AND id = ANY(%s) "
                        "AND rev_key IS NOT NULL", (self.tenant, targets))
            keys.update({i: (t, s, k) for i, t, s, k in cur.fetchall()})
        if lock:
            locks = {_lock_key(self.tenant, *k) for k in keys.values() if k[2]}
            locks |= {_lock_key(self.tenant, r.tier, r.scope, "target:" + r.target) for r in rows if r.target}
            for k in sorted(locks):
                cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (k,))
        self._for_update = " FOR UPDATE" if lock else ""
        plain = [r for r in rows if r.kind not in MARKERS and not r.rev_key]
        new = 0
        if plain:  # no decision to make: one pipelined statement for all of them
            cur.executemany(_INSERT.removesuffix(" RETURNING seq"), [self._params(r) for r in plain])
            new += max(0, cur.rowcount)
        for row in rows:
            if row.kind in MARKERS:
                new += self._marker(cur, row, keys)
            elif row.rev_key:
                new += self._revision(cur, row)
        if new:
            cur.execute("SELECT pg_notify(%s, %s)", (CHANNEL, notify_payload(self.tenant)))
        return new

    def _marker(self, cur, row: Row, keys: dict) -> bool:
        if self._retired(cur, row.target):
            return False  # retired already (by another host's decision): a second retirement would fork it
        if not self._insert(cur, row):
            return False
        key = keys.get(row.target)
        if key and key[2]:
            by = row.body.get("by")
            cur.execute("SELECT head_id FROM memtier_heads WHERE tenant = %s AND tier = %s AND scope = %s AND rev_key = %s"
                        + self._for_update, (self.tenant, *key))
            head = cur.fetchone()
            if head and head[0] == row.target:  # the head itself was retired (a correction): its successor leads
                if keys.get(by) == key:
                    cur.execute("UPDATE memtier_heads SET head_id = %s, version = version + 1 WHERE tenant = %s AND "
                                "tier = %s AND scope = %s AND rev_key = %s", (by, self.tenant, *key))
                else:
                    cur.execute("DELETE FROM memtier_heads WHERE tenant = %s AND tier = %s AND scope = %s AND rev_key = %s",
                                (self.tenant, *key))
        return True

    def _revision(self, cur, row: Row) -> bool:
        if not self._insert(cur, row):
            return False  # pushed before: decided then
        where = (self.tenant, row.tier, row.scope, row.rev_key)
        cur.execute("SELECT head_id, stated_at FROM memtier_heads WHERE tenant = %s AND tier = %s AND scope = %s "
                    "AND rev_key = %s" + self._for_update, where)
        head = cur.fetchone()
        now = time.time()
        if head is None:
            cur.execute("INSERT INTO memtier_heads (tenant, tier, scope, rev_key, head_id, stated_at) "
                        "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (tenant, tier, scope, rev_key) DO UPDATE "
                        "SET head_id = EXCLUDED.head_id, stated_at = EXCLUDED.stated_at, version = memtier_heads.version + 1",
                        (*where, row.id, row.stated_at))
        elif row.stated_at >= head[1]:
            if head[0] != row.target and not self._retired(cur, head[0]):
                self._insert(cur, engine_retirement(row, head[0], row.id, now))
            cur.execute("UPDATE memtier_heads SET head_id = %s, stated_at = %s, version = version + 1 WHERE tenant = %s "
                        "AND tier = %s AND scope = %s AND rev_key = %s", (row.id, row.stated_at, *where))
        elif not self._retired(cur, row.id):
            self._insert(cur, engine_retirement(row, row.id, head[0], now))
        return True

    def push_naive(self, cur, rows: list[Row]) -> int:
        """The control: decide against what a plain read shows, with no lock (forks under concurrency)."""
        return self.push(cur, rows, lock=False)
