"""Issue 30 item 5: what a ~4 MiB hooks folder adds to pre_tool events through the reference host.

Writes N hooks of the `memtier bench sidecar` mix (``bench.hooks.hook_mix``) as real YAML files
(``write_hooks``: 1,000 a file) into a new workspace, registers the built-in plugin on a
:class:`memtier_plugin.host.Host` and sends pre_tool events, one every 10 ms, each in a new
session, from the first one after start until 100 events after the hooks are all loaded
(or 120 s). The same run without a hooks folder is the reference. Printed: one JSON line per
run (first event, max and p95 of the others, when the hooks were loaded, the last 100 events).

    PYTHONPATH=. python benchmarks/hooks_folder.py [N=13700] [EVENTS=300]
    PYTHONPATH=. python benchmarks/hooks_folder.py --walk [N=194000]

``--walk``: one pre_tool event's walk over N tool-agnostic hooks whose predicate never holds (scheduler
level, 20 events, each in a new task): the candidate bound, not only the step budget, stops it.
"""

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from memtier_plugin import plugin
from memtier_plugin.bench.hooks import hook_mix, proposed_calls, write_hooks
from memtier_plugin.events import HookContext, ToolCallEvent
from memtier_plugin.host import Host
from memtier_plugin.memory import memory_for, reset_services


def run(n: int, events: int) -> dict:
    base = Path(tempfile.mkdtemp(prefix="memtier-hooks-folder-"))
    size = 0
    if n:
        folder = write_hooks(base, hook_mix(n, 0))
        size = sum(p.stat().st_size for p in folder.iterdir())
    (base / "memtier.yaml").write_text("standing:\n  embedder: none\nscheduling:\n  mode: combined\n")
    reset_services()
    host = Host()
    host.register(plugin, "memtier")
    calls = proposed_calls(events, 1)
    times, loaded_at, i, t_start = [], None, -1, time.perf_counter()
    while True:
        i += 1
        if i >= events and (not n or (loaded_at is not None and i >= loaded_at[0] + 100)
                            or time.perf_counter() - t_start > 120):
            break
        tool, params, _state, _query = calls[i % len(calls)]
        ctx = HookContext(agent_id="m", session_id=f"s{i}", run_id=f"r{i}", project="p", workspace_dir=str(base))
        t0 = time.perf_counter()
        host.pre_tool(ToolCallEvent(tool, params, f"c{i}"), ctx)
        times.append((time.perf_counter() - t0) * 1000)
        if n and loaded_at is None and len(memory_for(ctx).hook_scheduler.hooks) == n:
            loaded_at = (i, round(time.perf_counter() - t_start, 2))
        time.sleep(0.01)  # events arrive over time, as an agent's calls do
    reset_services()
    shutil.rmtree(base, ignore_errors=True)
    rest, last = sorted(times[1:]), sorted(times[-100:])
    return {"hooks": n, "folder_bytes": size, "events": len(times), "first_ms": round(times[0], 1),
            "max_after_first_ms": round(rest[-1], 1), "p95_after_first_ms": round(rest[int(len(rest) * 0.95)], 2),
            "loaded_at_event_and_s": loaded_at, "last_100_max_ms": round(last[-1], 1),
            "last_100_p95_ms": round(last[int(len(last) * 0.95)], 2)}


def walk(n: int) -> dict:
    from memtier_plugin.scheduling.hooks import HookScheduler, parse_hooks

    data = [{"id": f"n{i}", "entry": f"e{i}", "events": ["pre_tool"], "when": {"arg": {"path": "never", "exists": True}}}
            for i in range(n)]
    hooks = []
    for start in range(0, n, 1000):
        hooks += parse_hooks({"hooks": data[start:start + 1000]}, "f", key_prefix=f"f{start}:")
    sched = HookScheduler()
    sched.set_hooks("walk", hooks)
    times = []
    for i in range(20):
        t0 = time.perf_counter()
        out = sched.deliver("pre_tool", {}, tool_name="deploy", task_key=f"t{i}")
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {"hooks": n, "p50_ms": round(times[10], 1), "max_ms": round(times[-1], 1), "evaluated": out.evaluated,
            "skipped": len(out.skipped), "unwalked": getattr(out, "unwalked", None)}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--walk"]:
        print(json.dumps(walk(int(sys.argv[2]) if len(sys.argv) > 2 else 194_000)))
        sys.exit(0)
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 13700
    events = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    for size in (0, n):
        print(json.dumps(run(size, events)), flush=True)
