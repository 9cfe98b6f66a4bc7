"""One workspace's link to the shared tiers: the shipper and the puller, in background threads.

A long-lived process (the sidecar, the MCP server, the in-process plugin, the daemon) calls
:func:`start_sync`; only one process per workspace syncs at a time (``memory/.shared/sync.lock``, an
``flock``: a second process stands by and takes over when the first exits). Nothing here runs on a
hook's path: hooks read and write the local ledgers only, and these threads carry the lines across.

* The shipper reads what the shared ledgers gained (:class:`outbox.Outbox`) every
  ``shared.ship_interval_s`` and pushes it in batches of ``shared.batch`` (:class:`revisions.Pusher`).
* The puller pulls on start, on every NOTIFY of the tenant (``shared.notify``) and at least every
  ``shared.pull_interval_s`` (the safety net when a notification is lost or the listener is down).
* Engine down, hung or refusing: both back off (0.5 s doubling to 5 s) and retry; nothing is lost (the
  lines wait in the ledgers), and ``memory/.shared/status.json`` says since when the engine is offline
  and how much waits (``memtier shared status``).
"""

from __future__ import annotations

import fcntl
import getpass
import logging
import os
import re
import socket
import threading
import time
from pathlib import Path

from ..config import Config
from ..errors import ConfigError
from ..store.paths import utc_iso
from .engine import ENGINE_ERRORS, Engine, dsn_from_env
from .leader import Leader
from .outbox import SUB, Outbox, load_json, save_json
from .puller import Puller
from .revisions import CHANNEL, Pusher, notify_payload

log = logging.getLogger(__name__)
BACKOFF_MAX_S = 5.0
_started: dict[str, "Sync"] = {}
_started_lock = threading.Lock()


def tenant_of(config: Config) -> str:
    return config.shared.tenant or getpass.getuser()


def host_of(config: Config) -> str:
    name = config.shared.host_id or socket.gethostname() or "host"
    return re.sub(r"[^A-Za-z0-9._-]", "-", name)[:64]


def engine_for(config: Config) -> Engine:
    s = config.shared
    return Engine(dsn_from_env(s.dsn_env), tenant_of(config), connect_timeout_s=s.connect_timeout_s,
                  statement_timeout_ms=s.statement_timeout_ms)


def status_path(memory_root: Path) -> Path:
    return Path(memory_root) / SUB / "status.json"


def read_status(memory_root: Path) -> dict:
    return load_json(status_path(memory_root))


class Sync:
    """The shipper and puller of one workspace (threads started by :meth:`start`)."""

    def __init__(self, config: Config, engine: Engine | None = None):
        if config.shared.backend != "postgres":
            raise ConfigError("shared.backend: not 'postgres'; the shared tiers are off")
        self.config = config
        self.root = config.memory_root
        s = config.shared
        self.engine = engine or engine_for(config)
        self.host = host_of(config)
        self.outbox = Outbox(self.root, s.tiers)
        self.puller = Puller(self.engine, self.root, s.tiers)
        self.pusher = Pusher(self.engine.tenant, self.host)
        self.leader = Leader(self.engine.tenant, s.leader_retry_s)
        self.pushed = 0
        self._stop = threading.Event()
        self._wake_ship = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock_fd: int | None = None
        self._next_report = 0.0
        self._status_lock = threading.Lock()
        self.status = {"backend": "postgres", "tenant": self.engine.tenant, "host": self.host, "online": None,
                       "offline_since": None, "last_error": None, "role": "starting", "pid": os.getpid()}

    # ---- one-shot work (the CLI; the threads loop over these) -------------------------------------------
    def ship_once(self) -> int:
        """Push what the shared ledgers gained (up to ``shared.batch`` lines); rows new to the engine."""
        batch = list(self.outbox.pending(self.config.shared.batch))
        if not batch:
            return 0
        rows = [r for _k, _end, r in batch if r is not None and r.id not in self.puller.appended]
        try:
            with self.engine.tx() as cur:
                new = self.pusher.push(cur, rows)
        except BaseException:
            self.outbox.rewind()
            raise
        self.outbox.acknowledge()
        self.pushed += new
        return len(batch)

    def ship_all(self) -> int:
        lines = 0
        while (n := self.ship_once()):
            lines += n
        return lines

    def pull_once(self) -> int:
        return self.puller.pull_once()

    # ---- the background threads ------------------------------------------------------------------------
    def _set(self, **kw) -> None:
        with self._status_lock:
            was = self.status.get("online")
            self.status.update(kw, updated=utc_iso(), backlog_bytes=self.outbox.backlog_bytes(),
                               pull_cursor=self.puller.cursor, pushed=self.pushed, pulled=len(self.puller.appended),
                               rejected=self.puller.rejected, leader=self.leader.is_leader, forks=self.leader.forks)
            if kw.get("online") is False and was is not False:
                self.status["offline_since"] = utc_iso()
                log.warning("memtier shared: engine offline (%s); writes wait in the local ledgers", kw.get("last_error"))
            elif kw.get("online") is True:
                if was is False:
                    log.info("memtier shared: engine back online")
                self.status["offline_since"] = None
            try:
                save_json(status_path(self.root), self.status)
            except OSError:
                log.debug("memtier shared: status not saved", exc_info=True)

    def _offline(self, exc: BaseException) -> None:
        self._set(online=False, last_error=f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}")

    def _ship_loop(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                n = self.ship_once()
                backoff = 0.5
                if n:
                    self._set(online=True)
                    continue
                self._wake_ship.wait(self.config.shared.ship_interval_s)
                self._wake_ship.clear()
            except ENGINE_ERRORS as exc:
                self._offline(exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
            except Exception:  # a bug must not end the thread silently: say so, retry later
                log.exception("memtier shared: shipping failed")
                self._stop.wait(BACKOFF_MAX_S)

    def _pull_loop(self) -> None:
        s = self.config.shared
        backoff, mine = 0.5, notify_payload(self.engine.tenant)
        while not self._stop.is_set():
            conn = None
            try:
                conn = self.engine.connect()
                if s.notify:
                    conn.execute(f"LISTEN {CHANNEL}")
                self.puller.pull_once()
                self._set(online=True, last_error=None)
                self._report_host()
                backoff = 0.5
                while not self._stop.is_set():
                    self.leader.tick(conn)
                    due = time.monotonic() + s.pull_interval_s
                    woken = False
                    while not self._stop.is_set() and not woken and time.monotonic() < due:
                        wait = min(1.0, max(0.01, due - time.monotonic()))
                        if s.notify:
                            woken = any(n.payload == mine for n in conn.notifies(timeout=wait, stop_after=1))
                        else:
                            conn.execute("SELECT 1")  # the session (and the leader's lock) is alive
                            self._stop.wait(wait)
                    if self.puller.pull_once() or woken:
                        self._set(online=True)
                    self._report_host()
            except ENGINE_ERRORS as exc:
                self.leader.lost()
                self._offline(exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
            except Exception:
                self.leader.lost()
                log.exception("memtier shared: pulling failed")
                self._stop.wait(BACKOFF_MAX_S)
            finally:
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001 -- closing a broken connection
                        pass

    def _report_host(self) -> None:
        """This host's place in the feed, for `memtier shared status --check` on any host (at most every
        ``shared.pull_interval_s``)."""
        now = time.monotonic()
        if now < self._next_report:
            return
        self._next_report = now + self.config.shared.pull_interval_s
        from .. import __version__

        with self.engine.tx() as cur:
            cur.execute("INSERT INTO memtier_hosts (tenant, host, cursor, seen, version) VALUES (%s, %s, %s, now(), %s) "
                        "ON CONFLICT (tenant, host) DO UPDATE SET cursor = EXCLUDED.cursor, seen = now(), "
                        "version = EXCLUDED.version", (self.engine.tenant, self.host, self.puller.cursor, __version__))

    def take_lock(self) -> bool:
        """This workspace's sync lock, without waiting (False: another process holds it)."""
        path = self.root / SUB / "sync.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._lock_fd = fd
        return True

    def _run(self) -> None:
        while not self.take_lock():  # another process of this workspace syncs: stand by
            if self._stop.wait(2.0):
                return
        self._set(role="syncing")
        for name, target in (("memtier-shared-ship", self._ship_loop), ("memtier-shared-pull", self._pull_loop)):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def start(self) -> "Sync":
        t = threading.Thread(target=self._run, name="memtier-shared", daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def wake(self) -> None:
        """A shared ledger was written: ship now rather than at the next interval."""
        self._wake_ship.set()

    def close(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake_ship.set()
        for t in self._threads:
            t.join(timeout)
        try:
            if self.outbox is not None and not any(t.is_alive() for t in self._threads) and self._lock_fd is not None:
                self.ship_once()  # a last push of what the process wrote on its way out (best effort)
        except Exception:  # noqa: BLE001 -- the engine may be down: the lines wait in the ledgers
            pass
        self.release()

    def release(self) -> None:
        """Close the engine and give the sync lock back (a one-shot command's end; :meth:`close` ends here)."""
        self.engine.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


def start_sync(config: Config) -> Sync | None:
    """The workspace's running :class:`Sync` (started on first call), or None when the shared tiers are off
    or cannot start (logged: memory then works on this host's ledgers alone)."""
    if config.shared.backend != "postgres":
        return None
    key = str(config.memory_root.resolve())
    with _started_lock:
        if key in _started:
            return _started[key]
        try:
            sync = Sync(config).start()
        except ConfigError as exc:
            log.error("memtier shared: %s; memory stays on this host", exc)
            return None
        _started[key] = sync
        return sync


def stop_all() -> None:
    with _started_lock:
        syncs = list(_started.values())
        _started.clear()
    for s in syncs:
        s.close()
