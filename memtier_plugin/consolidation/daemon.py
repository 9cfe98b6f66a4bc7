"""The consolidation daemon's foreground loop (MemTier §3.3).

:class:`Daemon` runs :class:`~memtier_plugin.consolidation.batch.Consolidator` batches
when a watchdog observer reports a change under ``memory/episodic/``
(debounced, with a safety sweep every ``SWEEP_S`` seconds), and stops cleanly
on SIGTERM/SIGINT after the current batch. ``run(once=True)`` is one pass over
everything pending, without an observer.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Callable

from ..config import Config
from .batch import ConsolidationReport, Consolidator

log = logging.getLogger(__name__)

SWEEP_S = 30.0           # safety sweep when no file event arrives (lost inotify events)


QUIET_EVENTS = frozenset({"opened", "closed_no_write"})


def is_change(event) -> bool:
    """A file-system event that may mean new ledger lines; reads (every recall, every batch) are not."""
    path = str(getattr(event, "dest_path", "") or event.src_path)
    return event.event_type not in QUIET_EVENTS and (path.endswith(".jsonl") or event.is_directory)


class Daemon:
    """Foreground consolidation: a watchdog observer on memory/episodic/, debounced batches."""

    def __init__(self, config: Config, *, client=None, clock: Callable[[], float] = time.time,
                 on_report: Callable[[ConsolidationReport], None] | None = None,
                 on_ready: Callable[[], None] | None = None):
        self.config = config
        self.consolidator = Consolidator(config, client=client, clock=clock)
        self.on_report = on_report
        self.on_ready = on_ready  # called once the observer runs and the backlog is done
        self.ready = threading.Event()
        self._dirty = threading.Event()
        self._stop_flag = False
        self._keep_total = True
        self.total = ConsolidationReport()  # merged reports (with ``once``; else only the last batch)

    def stop(self, *_args) -> None:
        """Ask the loop to finish the current batch and exit (safe from a signal handler)."""
        self._stop_flag = True

    def _wait(self, seconds: float) -> bool:
        """Wait for a file event in short slices (so a stop request is seen promptly)."""
        deadline = time.monotonic() + seconds
        while not self._stop_flag:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self._dirty.wait(min(0.1, left)):
                return True
        return False

    def _sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not self._stop_flag and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def _batch(self) -> None:
        while True:
            self._dirty.clear()
            report = self.consolidator.run_batch()
            if self._keep_total:
                self.total.merge(report)
            else:
                self.total = report
            if self.on_report is not None:
                self.on_report(report)
            if not report.more or self._stop_flag:
                return

    def run(self, *, once: bool = False, install_signals: bool = True) -> ConsolidationReport:
        """Run until stopped (or, with ``once``, until nothing is pending). Returns the merged report."""
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        previous = {}
        if install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, self.stop)
        observer = None
        self._keep_total = once
        try:
            if once:
                self._batch()
                return self.total
            dirty = self._dirty

            class Handler(FileSystemEventHandler):
                def on_any_event(self, event):
                    if is_change(event):
                        dirty.set()

            episodic = self.consolidator.root / "episodic"
            episodic.mkdir(parents=True, exist_ok=True)
            observer = Observer()
            observer.schedule(Handler(), str(episodic), recursive=True)
            observer.start()
            self._batch()  # whatever arrived while nobody was watching
            log.info("watching %s", episodic)
            self.ready.set()
            if self.on_ready is not None:
                self.on_ready()
            debounce = self.config.consolidation.debounce_s
            while not self._stop_flag:
                if self._wait(SWEEP_S) and debounce:
                    self._sleep(debounce)
                if self._stop_flag:
                    break
                self._batch()
            return self.total
        finally:
            if observer is not None:
                observer.stop()
                observer.join(timeout=5)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.consolidator.close()
