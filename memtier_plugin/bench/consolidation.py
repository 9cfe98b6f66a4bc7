"""`memtier bench consolidation`: append → promoted fact visible in recall (issue 6).

Starts the real consolidation daemon (``python -m memtier_plugin -w WS daemon``)
on a fresh temporary workspace, waits for its "watching" line on stderr (printed
once its watchdog observer runs and the backlog is done), then ``appends`` times:
durably appends an entry stating a new fact with a unique word, and polls
``Retriever.recall`` in this process until a ``semantic`` hit containing that word
is delivered. The latency runs from just before the append to that recall.
Before each append the daemon is left idle for ``debounce_s + IDLE_EXTRA_S``, so
the batch its own ``promoted`` records trigger is over and every sample measures
the full debounce (the idle daemon's case, not a lucky overlap).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..consolidation.facts import extract_facts
from .stats import percentile

TARGET_P50_MS = 1000.0   # issue 6: append → promoted fact visible in recall ≤ 1 s at p50
POLL_S = 0.010
DEADLINE_S = 10.0
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
IDLE_EXTRA_S = 0.1
AGENT, PROJECT, SESSION = "bench", "bench", "bench-session"

_CONS, _VOWELS = "bdfgklmnprstvz", "aeiou"


def unique_words(n: int, rng: random.Random) -> list[str]:
    """``n`` distinct made-up words (4 consonant–vowel syllables, e.g. "kavorimu")."""
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < n:
        w = "".join(rng.choice(_CONS) + rng.choice(_VOWELS) for _ in range(4))
        if w not in seen:
            seen.add(w)
            out.append(w)
    return out


def statement(i: int, word: str) -> str:
    return f"My locker code for gym-{i} is {word}."


class DaemonProcess:
    """The real `memtier daemon` in a subprocess; its stderr is collected by a thread."""

    def __init__(self, workspace: Path):
        env = dict(os.environ)
        env.pop("MEMTIER_WORKSPACE", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "memtier_plugin", "-w", str(workspace), "daemon"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        self.lines: list[str] = []
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("memtier daemon: watching"):
                self.ready.set()

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.05):
            if self.proc.poll() is not None:
                raise RuntimeError(f"daemon exited with {self.proc.returncode} before it was ready:\n"
                                   + "\n".join(self.lines[-20:]))
            if time.monotonic() > deadline:
                raise RuntimeError(f"daemon not ready after {timeout:.0f} s:\n" + "\n".join(self.lines[-20:]))

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM, wait; returns the exit status (None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self._reader.join(2)
                return None
        self._reader.join(2)
        return self.proc.returncode


def bench_consolidation(appends: int = 30, *, seed: int | None = None, workdir: str | None = None,
                        progress: bool = False) -> dict:
    """Run the benchmark; returns the result object (see benchmarks/README.md)."""
    rng = random.Random(seed)
    words = unique_words(appends, rng)
    for i, w in enumerate(words):  # the sentence must give a fact naming the word, or nothing is measured
        facts = extract_facts(statement(i, w))
        if not any(w in f.content for f in facts):
            raise RuntimeError(f"extract_facts finds no fact in {statement(i, w)!r}")

    previous = None
    if threading.current_thread() is threading.main_thread():  # `timeout` sends SIGTERM: still clean up
        previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        return _run(words, appends, workdir, progress)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


class Terminated(Exception):
    pass


def _terminated(*_args):
    raise Terminated("SIGTERM")


def _run(words: list[str], appends: int, workdir: str | None, progress: bool) -> dict:
    from ..config import load_config
    from ..store.episodic import Ledger
    from ..recall.retriever import Retriever

    base = Path(tempfile.mkdtemp(prefix="memtier-bench-cons-", dir=workdir))
    ws = base / "ws"
    ws.mkdir()
    daemon = None
    result: dict = {}
    try:
        config = load_config(flags={"paths.workspace": str(ws)})
        debounce = float(config.consolidation.debounce_s)
        t_start = time.monotonic()
        daemon = DaemonProcess(ws)
        daemon.wait_ready(READY_TIMEOUT_S)
        ready_s = time.monotonic() - t_start
        ledger = Ledger(config.memory_root)
        retriever = Retriever(config, ledger)
        latencies: list[float] = []
        polls: list[int] = []
        missed: list[str] = []
        for i, word in enumerate(words):
            time.sleep(debounce + IDLE_EXTRA_S)
            query = f"What is my locker code for gym-{i}? {word}"
            t0 = time.perf_counter()
            ledger.add(agent_id=AGENT, session_id=SESSION, project=PROJECT, content=statement(i, word))
            n = 0
            found = None
            while True:
                n += 1
                res = retriever.recall(query, agent_id=AGENT, project=PROJECT, session_id=SESSION,
                                       agents=[AGENT], record_trace=False)
                if any(h.tier == "semantic" and word in h.content for h in res.hits):
                    found = (time.perf_counter() - t0) * 1000
                    break
                if time.perf_counter() - t0 > DEADLINE_S:
                    break
                time.sleep(POLL_S)
            if found is None:
                missed.append(word)
                if daemon.proc.poll() is not None:
                    raise RuntimeError(f"daemon exited with {daemon.proc.returncode} during the run:\n"
                                       + "\n".join(daemon.lines[-20:]))
            else:
                latencies.append(found)
            polls.append(n)
            if progress:
                shown = "MISS" if found is None else f"{found:.0f} ms"
                print(f"  append {i + 1}/{appends}: {shown} ({n} recalls)", file=sys.stderr, flush=True)
        rc = daemon.stop()
        daemon = None
        p50 = percentile(latencies, 50)
        result = {
            "appends": appends,
            "promote_visible_p50_ms": p50,
            "promote_visible_p95_ms": percentile(latencies, 95),
            "promote_visible_max_ms": max(latencies) if latencies else None,
            "promote_visible_min_ms": min(latencies) if latencies else None,
            "misses": len(missed),
            "debounce_s": debounce,
            "poll_interval_ms": POLL_S * 1000,
            "deadline_s": DEADLINE_S,
            "idle_before_append_s": round(debounce + IDLE_EXTRA_S, 4),
            "recalls_per_append_p50": percentile([float(p) for p in polls], 50),
            "daemon_ready_s": ready_s,
            "daemon_exit_code": rc,
            "daemon_clean_exit": rc == 0,
            "target_p50_ms": TARGET_P50_MS,
            "target_met": p50 is not None and p50 <= TARGET_P50_MS and not missed,
        }
        return result
    finally:
        if daemon is not None:
            daemon.stop()
        shutil.rmtree(base, ignore_errors=True)
