"""The engine: a psycopg 3 pool, one tenant per transaction, every wait bounded.

Every transaction sets ``memtier.tenant`` with ``set_config(..., true)`` (``SET LOCAL``): the setting
ends with the transaction, so a pooled connection reused for another tenant never carries the last
one's, and the row-level security policies (``schema.sql``) see only the tenant in hand. Connections
are bounded by ``shared.connect_timeout_s`` (connect, and a free connection from the pool),
``shared.statement_timeout_ms`` (each statement, on the server) and TCP keepalives and
``tcp_user_timeout`` (a hung engine or a dead host). :attr:`Engine.calls` counts engine use per
thread, so a test can show the hook path never makes one.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import threading
from typing import Iterator

import psycopg
from psycopg_pool import ConnectionPool

from ..errors import ConfigError

#: What a caller catches for "the engine is down, hung or refused": nothing else is swallowed.
ENGINE_ERRORS = (psycopg.Error, OSError, TimeoutError)
try:  # psycopg_pool's own timeout
    from psycopg_pool import PoolTimeout
    ENGINE_ERRORS = (*ENGINE_ERRORS, PoolTimeout)
except ImportError:  # pragma: no cover - every psycopg_pool 3.x has it
    pass


# The pool logs a warning for every failed reconnection attempt; while an engine is down that is a line every few
# seconds. The sync reports an outage itself, once, with its start and backlog (memtier shared status).
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)


def dsn_from_env(name: str, what: str = "shared.dsn_env") -> str:
    """The DSN held by environment variable ``name``; a clear error naming the variable when it is unset."""
    dsn = os.environ.get(name, "").strip()
    if not dsn:
        raise ConfigError(f"{what}: environment variable {name} is not set (it holds the PostgreSQL DSN, "
                          "e.g. postgresql://memtier_app@db.example/memtier)")
    return dsn


def connect_kwargs(connect_timeout_s: float, statement_timeout_ms: float) -> dict:
    """Connection options bounding every wait: connect, statements, idle transactions, a silent peer."""
    ms = int(statement_timeout_ms)
    return {"connect_timeout": max(1, int(round(connect_timeout_s))),
            "options": f"-c statement_timeout={ms} -c idle_in_transaction_session_timeout={max(ms * 5, 10000)}",
            "keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3,
            "tcp_user_timeout": max(1000, ms * 2), "application_name": "memtier"}


class Engine:
    """One DSN's pool (opened in the background, never on a hook's path) and its dedicated connections."""

    def __init__(self, dsn: str, tenant: str, *, connect_timeout_s: float = 2.0,
                 statement_timeout_ms: float = 2000.0, max_size: int = 4):
        if not tenant:
            raise ConfigError("shared.tenant: empty; name the user or team whose memory this is")
        self.dsn, self.tenant = dsn, tenant
        self.timeout = connect_timeout_s
        self.kwargs = connect_kwargs(connect_timeout_s, statement_timeout_ms)
        self.calls: collections.Counter = collections.Counter()  # thread name -> engine uses
        self._pool = ConnectionPool(dsn, min_size=1, max_size=max_size, kwargs=self.kwargs, open=False,
                                    timeout=connect_timeout_s, check=ConnectionPool.check_connection,
                                    reconnect_timeout=0, name="memtier-shared")
        self._opened = False
        self._lock = threading.Lock()

    def _count(self) -> None:
        self.calls[threading.current_thread().name] += 1

    @contextlib.contextmanager
    def tx(self) -> Iterator[psycopg.Cursor]:
        """A cursor in one transaction with this engine's tenant set locally (committed on success)."""
        self._count()
        with self._lock:
            if not self._opened:
                self._pool.open(wait=False)
                self._opened = True
        with self._pool.connection(timeout=self.timeout) as conn:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute("SELECT set_config('memtier.tenant', %s, true)", (self.tenant,))
                yield cur

    def connect(self, *, autocommit: bool = True) -> psycopg.Connection:
        """A dedicated session connection (LISTEN, the leader's lock), outside the pool."""
        self._count()
        return psycopg.connect(self.dsn, autocommit=autocommit, **self.kwargs)

    def check(self) -> None:
        """Connect once, outside the pool, so a command's error names the real cause ("Connection refused",
        "password authentication failed") rather than the pool's timeout."""
        self.connect().close()

    def close(self) -> None:
        with self._lock:
            if self._opened:
                self._pool.close(timeout=1.0)
                self._opened = False
