"""One leader per tenant for the fleet-wide jobs: a session advisory lock (Letta's scheduler pattern).

The lock lives on the host's dedicated LISTEN connection: it frees the moment that session ends (a
host that dies is cut off by TCP keepalives), and another host takes it at its next try, every
``shared.leader_retry_s``. The leader's job is idempotent, so a leader whose connection hung while a new
one started does no harm: it checks the tenant's revision chains (a record retired twice is a fork;
the push's locks exist so that there are none) and reports what it found in ``memtier shared status``.
"""

from __future__ import annotations

import time


class Leader:
    def __init__(self, tenant: str, retry_s: float):
        self.tenant, self.retry_s = tenant, retry_s
        self.is_leader = False
        self.forks: int | None = None
        self._next = 0.0

    def tick(self, conn) -> None:
        """Try for the lock, and as leader run the checks, at most every ``retry_s`` (``conn``: autocommit)."""
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.retry_s
        if not self.is_leader:
            row = conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))",
                               ("memtier:leader:" + self.tenant,)).fetchone()
            self.is_leader = bool(row and row[0])
        if self.is_leader:
            with conn.transaction():
                conn.execute("SELECT set_config('memtier.tenant', %s, true)", (self.tenant,))
                self.forks = conn.execute(
                    "SELECT count(*) FROM (SELECT target FROM memtier_records WHERE tenant = %s AND target IS NOT NULL "
                    "AND kind IN ('retired', 'superseded') GROUP BY target HAVING count(*) > 1) f",
                    (self.tenant,)).fetchone()[0]

    def lost(self) -> None:
        """The session ended: so did the lock."""
        self.is_leader = False
        self._next = 0.0
