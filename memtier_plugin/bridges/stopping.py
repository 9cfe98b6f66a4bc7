"""Waiting for the stop of a long-running server (``memtier serve``, ``memtier ui``) on the main thread.

SIGTERM and SIGINT only set a flag: a signal handler runs on the main thread, between its bytecodes, and the main
thread waits inside ``threading.Event.wait``, which holds the Event's lock while it sets up; a handler that calls
``Event.set()`` there waits for a lock its own thread holds, and the process never exits (a sidecar stopped right
after its ready line hung so). The wait polls the flag and the Event in short slices instead.
"""

from __future__ import annotations

import signal
import threading

POLL_S = 0.2


class StopOnSignals:
    """``with StopOnSignals(stop) as s: s.wait()``: block until ``stop`` is set (by another thread) or SIGTERM/SIGINT
    arrives (then ``stop`` is set too, from the main thread); the previous handlers are put back on exit. Off the
    main thread no handler is installed (Python allows none there): ``wait`` ends when ``stop`` is set."""

    def __init__(self, stop: threading.Event):
        self.stop = stop
        self.signalled = False
        self._previous: dict = {}

    def _handler(self, *_args) -> None:
        self.signalled = True  # nothing else: no lock may be taken here

    def __enter__(self) -> "StopOnSignals":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._previous[sig] = signal.signal(sig, self._handler)
        return self

    def wait(self) -> None:
        while not self.signalled and not self.stop.wait(POLL_S):
            pass
        self.stop.set()

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
