"""`memtier bench shared`: the shared tiers' measures (SCALE-OUT.md §4) against a real PostgreSQL on loopback.

The bench starts its own throwaway server (``shared.server``), so nothing of a user's engine is touched.

1. **Latency.** before_prompt_build through the reference host on one workspace (episodes and standing
   knowledge), warm, with the shared tier off and then on (the link running, another host writing meanwhile,
   so pulls land during the run): p50 / p95 / p99 each, and the engine calls made by the hook's thread
   (target: p95 on ≤ p95 off + 2 ms, and no engine call on the hook path).
2. **Freshness.** A write on host A until host B's ledger holds it: with NOTIFY, and with the listener off
   (the periodic pull alone, ``shared.pull_interval_s``). Target: p95 ≤ 1 s with NOTIFY.
3. **Append throughput.** H host processes each write N working-state records to its own ledger and push
   them through memtier's own outbox and shipper: rows/s over the wall time, each batch's commit p95.
   Target: ≥ 10× the offered load of 100 agents at one turn a second, i.e. ≥ 1,000 rows/s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from .stats import percentile

ROUND = 3
THROUGHPUT_SCRIPT = textwrap.dedent('''
    import json, sys, time
    from memtier_plugin.config import load_config
    from memtier_plugin.layers.workspace_layer import ProjectLedger, record_state
    from memtier_plugin.shared.sync import Sync
    ws, host, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cfg = load_config(flags={"paths.workspace": ws, "shared.host_id": host, "shared.batch": 100})
    store = ProjectLedger(cfg.memory_root, "state", "fleet", fsync=False)
    for i in range(n):
        record_state(store, session_id=f"{host}-s{i}", progress=f"step {i} of {host} done; next: step {i + 1}",
                     calls=[], ts=1_790_000_000 + i)
    sync = Sync(cfg)
    print("ready", flush=True)
    sys.stdin.readline()
    commits = []
    t0 = time.perf_counter()
    while True:
        t = time.perf_counter()
        if not sync.ship_once():
            break
        commits.append(time.perf_counter() - t)
    print(json.dumps({"seconds": time.perf_counter() - t0, "rows": sync.pushed, "commits": commits}), flush=True)
    sync.engine.close()
''')


# the other host of the latency measure: a process of its own, as it would be on another machine (in the bench's
# process its threads would take the interpreter lock from the hook being timed)
WRITER_SCRIPT = textwrap.dedent('''
    import sys, threading, time
    from memtier_plugin.config import load_config
    from memtier_plugin.layers.extract import Candidate
    from memtier_plugin.layers.global_layer import GlobalStore
    from memtier_plugin.shared.sync import Sync
    ws, rnd = sys.argv[1], sys.argv[2]
    cfg = load_config(flags={"paths.workspace": ws, "shared.host_id": "writer"})
    sync = Sync(cfg).start()
    store = GlobalStore(cfg.memory_root, fsync=False)
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    print("ready", flush=True)
    i = 0
    while not stop.wait(0.2):
        store.upsert([Candidate("preference", f"I prefer the {i}th cache layout for round {rnd} reports", "",
                                [f"w{rnd}-{i}"])], agent_id="w", session_id="w", project="bench", ts=time.time())
        i += 1
    sync.close()
    print(i, flush=True)
''')


def _stats(values_s: list[float]) -> dict:
    ms = [v * 1000 for v in values_s]
    return {"n": len(ms), "p50_ms": percentile(ms, 50), "p95_ms": percentile(ms, 95), "p99_ms": percentile(ms, 99)}


def _seed_workspace(ws: Path, entries: int, prefs: int) -> None:
    from ..layers.extract import Candidate
    from ..layers.global_layer import GlobalStore
    from ..store.episodic import Ledger

    led = Ledger(ws / "memory", fsync=False)
    topics = ["deploy", "database", "hotel", "flight", "invoice", "queue", "cache", "report"]
    recs = [led.make_entry(agent_id="main", session_id=f"s{i // 20}", project="bench", timestamp=1_790_000_000 + i,
                           content=f"note {i}: the {topics[i % 8]} runbook step {i % 13} uses host {topics[i % 8]}-{i % 7} "
                                   f"and port {5000 + i % 50}") for i in range(entries)]
    led.append("main", recs, timestamp=1_790_000_000)
    GlobalStore(ws / "memory").upsert(
        [Candidate("preference", f"I always want {t} work {i} done before noon", f"{t}-{i}", [f"seed-{i}"])
         for i, t in enumerate((topics * 8)[:prefs])], agent_id="main", session_id="seed", project="bench",
        ts=1_790_000_000)


def _prompt_latency(ws: Path, prompts: int) -> list[float]:
    from .. import plugin
    from ..events import AgentEndEvent, HookContext, PromptEvent
    from ..host import Host

    host = Host()
    host.register(plugin, "memtier")
    words = ["deploy", "database", "hotel", "flight", "invoice", "queue", "cache", "report"]
    out = []
    for i in range(prompts + 10):
        ctx = HookContext(agent_id="main", session_id=f"q{i}", run_id=f"q{i}", project="bench", workspace_dir=str(ws))
        t = time.perf_counter()
        host.before_prompt_build(PromptEvent(f"What does the {words[i % 8]} runbook say about port {5000 + i % 50}?"), ctx)
        if i >= 10:  # warm
            out.append(time.perf_counter() - t)
        host.agent_end(AgentEndEvent(messages=[], success=True), ctx)
    return out


def _env(**kw):
    """Set environment variables for the duration (the hooks load their config from it)."""
    class _Env:
        def __enter__(self):
            self.old = {k: os.environ.get(k) for k in kw}
            os.environ.update({k: str(v) for k, v in kw.items()})

        def __exit__(self, *exc):
            for k, v in self.old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return _Env()


def bench_shared(*, prompts: int = 200, entries: int = 1000, writes: int = 30, hosts: int = 8,
                 rows_per_host: int = 1000, progress=None) -> dict:
    import psycopg

    from ..memory import reset_services
    from ..shared import schema
    from ..shared.server import Server

    say = progress or (lambda _m: None)
    t_start = time.perf_counter()
    server = Server()
    tmp = Path(tempfile.mkdtemp(prefix="memtier-bench-shared-"))
    out: dict = {"server": "PostgreSQL (throwaway, 127.0.0.1)", "load_1m": os.getloadavg()[0]}
    try:
        dsn = server.add_role("memtier_app")
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            schema.apply(conn, "memtier_app")
            out["server"] = f"PostgreSQL {conn.info.server_version} (throwaway, 127.0.0.1)"
        base = {"MEMTIER_PG_DSN": dsn, "MEMTIER_SHARED__TENANT": "bench"}

        # 1. latency: the same workspace, shared off and on in turn (another host writing meanwhile)
        ws = tmp / "latency"
        say(f"latency: seeding {entries} entries and 40 standing preferences")
        _seed_workspace(ws, entries, 40)
        with _env(**base, MEMTIER_SHARED__BACKEND="none"):
            reset_services()
            say("latency: a warm-up round (not counted)")
            _prompt_latency(ws, prompts // 2)
            reset_services()
        off, on, hook_calls, pulled = [], [], 0, 0
        for rnd in range(2):  # off and on alternate, so neither side has the warmer machine
            with _env(**base, MEMTIER_SHARED__BACKEND="none"):
                say(f"latency: round {rnd + 1}: {prompts // 2} prompts, shared tier off")
                off += _prompt_latency(ws, prompts // 2)
                reset_services()
            c, p, times = _latency_on(ws, tmp, base, prompts // 2, say, rnd)
            on += times
            hook_calls, pulled = hook_calls + c, pulled + p
        s_off, s_on = _stats(off), _stats(on)
        out["latency"] = {"entries": entries, "off": s_off, "on": s_on,
                          "p95_diff_ms": s_on["p95_ms"] - s_off["p95_ms"], "target_p95_diff_ms": 2.0,
                          "engine_calls_on_hook_thread": hook_calls, "rows_pulled_during_run": pulled}
        _freshness_and_throughput(out, tmp, base, writes, hosts, rows_per_host, say)
    finally:
        server.destroy()
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    out["seconds"] = time.perf_counter() - t_start
    return out


def _latency_on(ws: Path, tmp: Path, base: dict, prompts: int, say, rnd: int) -> tuple[int, int, list[float]]:
    """before_prompt_build with the shared tier on, while another host (a process of its own) writes preferences
    every 0.2 s."""
    from ..memory import reset_services
    from ..shared import sync as shared_sync

    with _env(**base, MEMTIER_SHARED__BACKEND="postgres", MEMTIER_SHARED__HOST_ID="latency"):
        say(f"latency: round {rnd + 1}: {prompts} prompts, shared tier on (another host writing)")
        script = tmp / "writer.py"
        script.write_text(WRITER_SCRIPT)
        writer = subprocess.Popen([sys.executable, str(script), str(tmp / "writer"), str(rnd)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
        if writer.stdout.readline().strip() != "ready":
            writer.kill()
            raise RuntimeError(f"the writing host failed: {writer.stderr.read()[-500:]}")
        _prompt_latency(ws, 5)  # the link starts beside the first hook
        link = None
        for _ in range(200):
            link = shared_sync._started.get(str((ws / "memory").resolve()))
            if link is not None and link.status.get("online"):
                break
            time.sleep(0.05)
        times = _prompt_latency(ws, prompts)
        _, err = writer.communicate("stop\n", timeout=60)
        if writer.returncode != 0:
            raise RuntimeError(f"the writing host failed: {err[-500:]}")
        calls = int(link.engine.calls.get("MainThread", 0)) if link else 0
        pulled = len(link.puller.appended) if link else 0
        reset_services()
    return calls, pulled, times


def _freshness_and_throughput(out: dict, tmp: Path, base: dict, writes: int, hosts: int, rows_per_host: int,
                              say) -> None:
    from ..config import load_config
    from ..layers.extract import Candidate
    from ..layers.global_layer import GlobalStore
    from ..shared.sync import Sync

    # 2. freshness: host A writes, host B's ledger holds it
    for notify in (True, False):
        label = "notify" if notify else "pull_only"
        say(f"freshness: {writes} writes A → B ({label})")
        with _env(**base):
            flags = {"shared.backend": "postgres", "shared.notify": notify, "shared.pull_interval_s": 1.0}
            a = Sync(load_config(flags={**flags, "paths.workspace": str(tmp / f"fa-{label}"),
                                        "shared.host_id": f"a-{label}"})).start()
            b = Sync(load_config(flags={**flags, "paths.workspace": str(tmp / f"fb-{label}"),
                                        "shared.host_id": f"b-{label}"})).start()
            time.sleep(1.5)
            store = GlobalStore(tmp / f"fa-{label}" / "memory", fsync=True)
            target = tmp / f"fb-{label}" / "memory" / "global" / "knowledge.jsonl"
            lags = []
            for i in range(writes):
                store.upsert([Candidate("preference", f"I want {label} freshness probe {i} honoured", "",
                                        [f"{label}-{i}"])], agent_id="a", session_id="a", project="bench",
                             ts=time.time())
                t0 = time.perf_counter()
                needle = f"{label} freshness probe {i} honoured".encode()
                while time.perf_counter() - t0 < 10:
                    if target.exists() and needle in target.read_bytes():
                        break
                    time.sleep(0.002)
                lags.append(time.perf_counter() - t0)
            a.close()
            b.close()
        out[f"freshness_{label}"] = {**_stats(lags), "target_p95_ms": 1000.0 if notify else 2000.0}

    # 3. append throughput: hosts × rows through outbox → shipper → engine
    say(f"throughput: {hosts} host processes × {rows_per_host} records")
    script = tmp / "throughput.py"
    script.write_text(THROUGHPUT_SCRIPT)
    env = {**os.environ, **base, "MEMTIER_SHARED__BACKEND": "postgres"}
    procs = [subprocess.Popen([sys.executable, str(script), str(tmp / f"t{h}"), f"t{h}", str(rows_per_host)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for h in range(hosts)]
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError(f"a throughput host failed: {p.stderr.read()[-500:]}")
    t0 = time.perf_counter()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    import json

    results = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"a throughput host failed: {stderr[-500:]}")
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    wall = time.perf_counter() - t0
    rows = sum(r["rows"] for r in results)
    commits = [c for r in results for c in r["commits"]]
    out["throughput"] = {"hosts": hosts, "rows": rows, "wall_s": wall, "rows_per_s": rows / wall if wall else None,
                         "batch_commit": _stats(commits), "target_rows_per_s": 1000.0}
