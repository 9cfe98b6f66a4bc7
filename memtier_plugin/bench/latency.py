"""`memtier bench latency`: before_prompt_build (and pre_tool) wall time on a replayed multi-step task (issues 14, 27).

For each preset and corpus size a workspace is built once (not timed): a
synthetic background of ``entries`` episodic entries of the task's own agent
and project (so every one of them competes in recall), then the earlier
sessions of ``workspace-fixtures/foresight/history`` replayed through the
reference host (their standing knowledge extracted as in production), then
the index saved and — for presets with an embedder — every entry embedded (as
``embed_pending`` and the daemon leave a workspace). Then, for Foresight off
and on, on a fresh copy of that workspace:

* **cold**: a fresh Memory (models loaded on first use) replays
  ``task.jsonl`` once;
* **warm**: the same Memory replays it ``rounds`` more times (a new session
  each time).

Every prompt's ``before_prompt_build`` is timed through the Host; the agent's
``memory_search`` calls are answered live by ``Host.memory_tool``. With
Foresight on, ``think_ms`` passes before each memory query but the first (the
model's own time between them: what background preparation overlaps with);
with Foresight off there is no background work, so no pause is needed. Hits,
waits and savings are read back from the ``foresight`` trace records. One row
per (preset, entries, foresight, phase).

Scenarios (:data:`SCENARIOS`): ``foresight`` (workspace-fixtures/foresight, the default) and ``steps``
(workspace-fixtures/steps: tool results, a failure fixed by an earlier session's runbook, "Yes, go."; issue
27). The background is written for the agent and project of the fixture's task; every pre_tool is timed
too (``pre_tool_p50_ms``, ``pre_tool_p95_ms``).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import orjson

from .retrieval import vocabulary
from .stats import percentile

FIXTURES = Path(__file__).resolve().parents[2] / "workspace-fixtures"
SCENARIOS = {"foresight": FIXTURES / "foresight", "steps": FIXTURES / "steps"}
FIXTURE = SCENARIOS["foresight"]
AGENT, PROJECT = "planner", "offsite"  # the foresight task's (each fixture's own: task_owner)
NEEDS = ("flights", "hotel", "dinner", "agenda")  # the instruction's steps, in order (prediction → need)
#: English words of the background (with the topic tree's words), so lexical and dense matching both find some
#: of it and the cross-encoder reads text of a conversation's length in wordpieces
FILLER = ("team meeting project budget travel hotel flight dinner agenda review plan schedule venue booking "
          "room ticket document report customer launch release deploy office weekly notes email call "
          "restaurant lunch city train conference workshop slides invoice card payment").split()


def task_owner(fixture: Path) -> tuple[str, str]:
    """(agent, project) of the fixture's task (its session record)."""
    head = json.loads((Path(fixture) / "task.jsonl").read_text().split("\n", 1)[0])
    return str(head.get("agent_id") or AGENT), str(head.get("project") or "")


def _record(i: int, ts: float, session: int, text: str, agent: str = AGENT, project: str = PROJECT) -> bytes:
    from ..store.episodic import utc_iso

    iso = utc_iso(ts)
    return orjson.dumps({"v": 1, "kind": "entry", "id": f"ep-{iso[:10].replace('-', '')}-b{i:011x}",
                         "timestamp": iso, "agent_id": agent, "session_id": f"bg-{session:06d}", "project": project,
                         "role": "user" if i % 2 == 0 else "assistant", "content": text,
                         "tokens": max(1, len(text) // 4), "promoted": False, "cognitive_weight": 0.0,
                         "provenance": {"run_id": f"bg-{session:06d}", "turn": i % 20, "tool_call_id": None,
                                        "source": "bench"}}) + b"\n"


def write_background(memory_root: Path, entries: int, seed: int = 0, agent: str = AGENT,
                     project: str = PROJECT) -> None:
    """``entries`` synthetic entries of the task's agent and project, 20 a session, before the history."""
    import yaml

    from ..layers.topics import BUILTIN

    rng = np.random.default_rng(seed)
    topics = yaml.safe_load(BUILTIN.read_text(encoding="utf-8"))
    english = sorted({w for body in topics.values() for w in body["words"]} | set(FILLER))
    words = np.array([english[i] for i in rng.permutation(len(english))], dtype=object)  # Zipf over real words
    filler = np.array(vocabulary(rng, 5_000), dtype=object)  # made-up names and rare words, 15 %
    start = 1_735_689_600.0  # 2025-01-01
    ts = np.sort(start + rng.uniform(0, 240 * 86400.0, entries))
    by_day: dict[str, list[bytes]] = {}
    for i in range(entries):
        n = int(rng.integers(10, 40))
        mix = np.where(rng.random(n) < 0.15, filler[rng.integers(0, len(filler), n)],
                       words[np.minimum(rng.zipf(1.1, n), len(words)) - 1])
        line = _record(i, float(ts[i]), i // 20, " ".join(mix), agent, project)
        by_day.setdefault(time.strftime("%Y-%m-%d", time.gmtime(float(ts[i]))), []).append(line)
    folder = memory_root / "episodic" / agent
    folder.mkdir(parents=True, exist_ok=True)
    for day, lines in by_day.items():
        (folder / f"{day}.jsonl").write_bytes(b"".join(lines))


def _write_config(ws: Path, preset: str, foresight: bool, overrides: dict) -> None:
    import yaml

    doc: dict = {"preset": preset}
    for key, value in {"foresight.enabled": foresight, **overrides}.items():
        node = doc
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    (ws / "memtier.yaml").write_text(yaml.safe_dump(doc, sort_keys=True))


def _close_services() -> None:
    from .. import memory

    for mem in list(memory._services.values()):
        mem.close()
    memory.reset_services()


def build(ws: Path, preset: str, entries: int, fixture: Path, overrides: dict, say) -> float:
    """The workspace every row of (preset, entries) starts from; returns seconds taken."""
    from ..memory import memory_for
    from ..events import HookContext
    from ..host import replay_session
    from ..bridges.sidecar import build_host

    t0 = time.perf_counter()
    ws.mkdir(parents=True)
    _write_config(ws, preset, False, overrides)
    n_bg = max(0, entries - 40)
    say(f"{preset} {entries:,}: writing {n_bg:,} background entries")
    agent, project = task_owner(fixture)
    write_background(ws / "memory", n_bg, agent=agent, project=project)
    host = build_host()
    for path in sorted((fixture / "history").glob("*.jsonl")):
        replay_session(host, path, ws)
    mem = memory_for(HookContext(agent_id=agent, workspace_dir=str(ws)))
    r = mem.retriever
    if r.embedder is not None:
        say(f"{preset} {entries:,}: embedding the workspace (as the daemon would)")
        r.embed_pending(batch=64)
    r.save()
    _close_services()
    return time.perf_counter() - t0


def _prime(ws: Path, agent: str = AGENT) -> None:
    from ..events import HookContext
    from ..memory import memory_for

    _close_services()
    index_log = logging.getLogger("memtier_plugin.recall.index")
    level = index_log.level
    index_log.setLevel(logging.ERROR)  # the copy's index names the original's files: its rebuild is expected
    try:
        memory_for(HookContext(agent_id=agent, workspace_dir=str(ws))).retriever.save()
    finally:
        index_log.setLevel(level)
    _close_services()


def _task_copy(fixture: Path, dest: Path, session_id: str) -> tuple[Path, list[dict]]:
    """task.jsonl with its own session id; and its memory queries in order (kind, text, need)."""
    recs = [json.loads(line) for line in (fixture / "task.jsonl").read_text().splitlines() if line.strip()]
    recs[0]["session_id"] = session_id
    dest.write_text("".join(json.dumps(r) + "\n" for r in recs))
    queries = [("prompt", r["content"], r.get("need", "")) if r["type"] == "user" else
               ("memory_search", r["params"]["query"], r.get("need", "")) for r in recs
               if r["type"] == "user" or (r["type"] == "tool_call" and r.get("tool") == "memory_search")]
    return dest, queries


def replay(ws: Path, fixture: Path, session_id: str, think_ms: float) -> list[dict]:
    """Replay the task once through the Host; one row per memory query: kind, need, ms, outcome, prediction."""
    from ..store import traces
    from ..host import replay_session
    from ..bridges.sidecar import build_host

    host = build_host()
    path, queries = _task_copy(fixture, ws / f"{session_id}.jsonl", session_id)
    timed: list[tuple[str, float]] = []
    first = [True]

    def think(*_):
        if think_ms and not first[0]:
            time.sleep(think_ms / 1000.0)
        first[0] = False

    bpb, tool, pre = host.before_prompt_build, host.memory_tool, host.pre_tool
    pre_ms: list[float] = []

    def timed_pre(event, ctx):
        t0 = time.perf_counter()
        out = pre(event, ctx)
        pre_ms.append((time.perf_counter() - t0) * 1000)
        return out

    def timed_bpb(event, ctx):
        think()
        t0 = time.perf_counter()
        out = bpb(event, ctx)
        timed.append(("prompt", (time.perf_counter() - t0) * 1000))
        return out

    def timed_tool(name, params, ctx):
        think()
        t0 = time.perf_counter()
        out = tool(name, params, ctx)
        if name == "memory_search":
            timed.append(("memory_search", (time.perf_counter() - t0) * 1000))
        return out

    host.before_prompt_build, host.memory_tool, host.pre_tool = timed_bpb, timed_tool, timed_pre
    replay_session(host, path, ws)
    recs = [r for r in traces.iter_traces(ws / "memory", [task_owner(fixture)[0]])
            if r.get("kind") == "foresight" and r.get("session_id") == session_id]
    from ..intake import query_text
    from ..redact import redact

    origin: dict[str, str] = {}  # a normally retrieved result serves later queries: the need of its query
    for _kind, text, need in queries:
        origin.setdefault(" ".join(redact(query_text(text))[0].split())[:300], need)

    def right(pred: str, need: str) -> bool | None:
        if not pred:
            return None
        if pred in origin:
            return origin[pred] == need
        return any(n == need and n in pred for n in NEEDS)

    by_query: dict[str, list[dict]] = {}
    for r in recs:  # the tools' records may sit in another day's file: matched by query, in order
        by_query.setdefault(r.get("query", ""), []).append(r)
    rows = []
    for (kind, text, need), (kind2, ms) in zip(queries, timed):
        assert kind == kind2, (kind, kind2)
        found = by_query.get(redact(query_text(text))[0]) or [{}]
        fr = found.pop(0) if len(found) > 1 else found[0]
        pred = fr.get("prediction", "")
        rows.append({"kind": kind, "need": need, "ms": ms, "outcome": fr.get("outcome", "off"),
                     "wait_ms": fr.get("wait_ms", 0.0), "wait_saved_ms": fr.get("wait_saved_ms", 0.0),
                     "right": right(pred, need)})
    rows += [{"kind": "pre_tool", "need": "", "ms": ms, "outcome": "-", "wait_ms": 0.0, "wait_saved_ms": 0.0,
              "right": None} for ms in pre_ms]
    return rows


def summarise(preset: str, entries: int, foresight: bool, phase: str, rows: list[dict], think_ms: float) -> dict:
    pre = [r["ms"] for r in rows if r["kind"] == "pre_tool"]
    rows = [r for r in rows if r["kind"] != "pre_tool"]  # the memory queries
    prompts = [r["ms"] for r in rows if r["kind"] == "prompt"]
    hits = [r for r in rows if r["outcome"] == "hit"]
    missed_prompts = [r["ms"] for r in rows if r["kind"] == "prompt" and r["outcome"] != "hit"]
    hit_prompts = [r["ms"] for r in rows if r["kind"] == "prompt" and r["outcome"] == "hit"]
    out = {"preset": preset, "entries": entries, "foresight": foresight, "phase": phase,
           "p50_ms": percentile(prompts, 50), "p95_ms": percentile(prompts, 95),
           "hit_rate": (len(hits) / len(rows)) if foresight and rows else None,
           "wait_saved_ms": float(np.mean([r["wait_saved_ms"] for r in hits])) if hits else None,
           "prompts": len(prompts), "memory_queries": len(rows), "hits": len(hits),
           "wrong_hits": sum(1 for r in hits if not r["right"]),
           "hit_wait_ms": float(np.mean([r["wait_ms"] for r in hits])) if hits else None,
           "hit_prompt_p95_ms": percentile(hit_prompts, 95) if hit_prompts else None,
           "miss_prompt_p95_ms": percentile(missed_prompts, 95) if missed_prompts else None,
           "search_p50_ms": percentile([r["ms"] for r in rows if r["kind"] == "memory_search"], 50),
           "pre_tool_p50_ms": percentile(pre, 50) if pre else None,
           "pre_tool_p95_ms": percentile(pre, 95) if pre else None,
           "think_ms": think_ms if foresight else 0.0}
    return out


def bench_latency(*, presets: list[str], sizes: list[int], rounds: int = 2, think_ms: float = 1000.0,
                  overrides: dict | None = None, fixture: Path | None = None, workdir: str | None = None,
                  keep: bool = False, progress: Callable[[str], None] | None = None) -> list[dict]:
    """Rows (see the module docstring); workspaces under a temporary folder, removed unless ``keep``."""
    say = progress or (lambda _m: None)
    fixture = Path(fixture or FIXTURE)
    if not (fixture / "task.jsonl").is_file():
        raise RuntimeError(f"{fixture}: no task.jsonl (pass --fixture workspace-fixtures/foresight)")
    overrides = dict(overrides or {})
    base = Path(tempfile.mkdtemp(prefix="memtier-latency-", dir=workdir))
    out = []
    try:
        for preset in presets:
            for entries in sizes:
                built = base / f"{preset}-{entries}"
                secs = build(built, preset, entries, fixture, overrides, say)
                say(f"{preset} {entries:,}: built in {secs:.0f} s")
                for fs in (False, True):
                    ws = base / f"{preset}-{entries}-{'fs' if fs else 'nofs'}"
                    shutil.copytree(built, ws)
                    _write_config(ws, preset, fs, overrides)
                    _prime(ws, task_owner(fixture)[0])  # the copy's index names the original's files: rebuilt and saved here, untimed
                    pause = think_ms if fs else 0.0
                    rows = replay(ws, fixture, "task-cold", pause)
                    out.append(summarise(preset, entries, fs, "cold", rows, pause))
                    warm = []
                    for i in range(rounds):
                        warm += replay(ws, fixture, f"task-warm-{i}", pause)
                    out.append(summarise(preset, entries, fs, "warm", warm, pause))
                    _close_services()
                    say(f"{preset} {entries:,} foresight {'on' if fs else 'off'}: "
                        f"warm p50 {out[-1]['p50_ms']:.1f} ms, p95 {out[-1]['p95_ms']:.1f} ms")
                    if not keep:
                        shutil.rmtree(ws, ignore_errors=True)
                if not keep:
                    shutil.rmtree(built, ignore_errors=True)
    finally:
        _close_services()
        if keep:
            say(f"workspaces kept under {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    return out
