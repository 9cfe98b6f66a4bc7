"""`memtier purge` (issue 28): the forgotten text leaves every file under memory/, nothing else does,
and a SIGKILL at any point of a purge loses nothing and the next purge finishes the job.

The workspace is the demo's (the real hooks through the reference host) with the real consolidation
batch run over it; tombstones are appended as `memtier forget` appends them.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from conftest import ROOT, run_cli
from memtier_plugin import purging
from memtier_plugin.store import tombstones, traces
from memtier_plugin.store.episodic import Ledger
from memtier_plugin.store.semantic import Fact, SemanticStore, fact_id, fact_record

PY = sys.executable


@pytest.fixture(scope="module")
def demo_workspace(tmp_path_factory) -> Path:
    ws = tmp_path_factory.mktemp("demo") / "ws"
    env = {"HOME": str(ws.parent / "home"), "PYTHONPATH": str(ROOT)}
    run_cli("-w", str(ws), "demo", "--into", str(ws), "-q", env=env)
    run_cli("-w", str(ws), "daemon", "--once", env=env)
    return ws


def copy_of(demo: Path, dest: Path) -> Path:
    shutil.copytree(demo, dest, symlinks=True)
    return dest


def forget_entry_and_derived(memory: Path, needle: str) -> tuple[list[str], list[str]]:
    """Tombstone the entry whose content holds ``needle`` and the items derived only from it
    (as the forget helper does). Returns (ids, their texts)."""
    entries = Ledger(memory).read().entries
    (entry,) = [e for e in entries.values() if needle in e.content and e.role == "user"]
    ids, texts, recs = [entry.id], [entry.content], [tombstones.forget_record(entry.id, "episode")]
    for path, layer, sources in (("global/knowledge.jsonl", "standing", lambda r: r["provenance"]["entry_ids"]),):
        for line in (memory / path).read_bytes().splitlines():
            rec = orjson.loads(line)
            if rec.get("kind") == "knowledge" and sources(rec) == [entry.id]:
                ids.append(rec["id"])
                texts.append(rec["content"])
                recs.append(tombstones.forget_record(rec["id"], layer, because_of=entry.id))
    store = SemanticStore(memory)
    for project in store.projects():
        for rec in store.project(project).records.values():
            if rec.get("source_entry_ids") == [entry.id]:
                ids.append(rec["id"])
                texts.append(rec["content"])
                recs.append(tombstones.forget_record(rec["id"], "fact", because_of=entry.id))
    tombstones.append(memory, recs)
    return ids, texts


def files_holding(memory: Path, text: str) -> list[str]:
    """Every file under ``memory`` holding ``text`` (raw, or as JSON writes it)."""
    forms = {text.encode(), json.dumps(text, ensure_ascii=False)[1:-1].encode()}
    return [str(p.relative_to(memory)) for p in memory.rglob("*") if p.is_file()
            and any(f in p.read_bytes() for f in forms)]


def every_file_parses(memory: Path) -> None:
    for path in memory.rglob("*.jsonl"):
        data = path.read_bytes()
        assert not data or data.endswith(b"\n"), f"{path}: torn last line"
        for n, line in enumerate(data.splitlines(), 1):
            assert isinstance(orjson.loads(line), dict), f"{path}:{n}"
    for path in (memory / ".daemon").glob("*.json"):
        orjson.loads(path.read_bytes())
    left = [p for p in memory.rglob("*.tmp") if ".index" not in p.parts]
    assert not left, f"half-written files left: {left}"


def all_entries(memory: Path) -> dict[str, dict]:
    return {i: e.public() for i, e in Ledger(memory).read().entries.items()}


def checkpoints_on_boundaries(memory: Path) -> None:
    cps = orjson.loads((memory / ".daemon" / "checkpoints.json").read_bytes())["files"]
    for rel, off in cps.items():
        data = (memory / rel).read_bytes()
        assert off <= len(data) and (off == 0 or data[off - 1:off] == b"\n"), f"{rel}: checkpoint {off} inside a line"


def test_purge_leaves_no_byte_of_the_forgotten_text_and_every_other_entry(demo_workspace, tmp_path, monkeypatch):
    ws = copy_of(demo_workspace, tmp_path / "ws")
    memory = ws / "memory"
    monkeypatch.setenv("MEMTIER_WORKSPACE", str(ws))
    before = all_entries(memory)
    from memtier_plugin.config import load_config
    from memtier_plugin.events import HookContext
    from memtier_plugin.memory import Memory

    # a long-running process (a sidecar) that had the entry in its index before the purge
    running = Memory(load_config(flags={"paths.workspace": str(ws)}))
    travel = HookContext(agent_id="assistant", session_id="s-new", run_id="r-new", project="travel",
                         workspace_dir=str(ws))
    query = "which seat and meals do I want when you book my flight?"
    first = {h.id for h in running.recall(query, travel, record_trace=False).hits}
    ids, texts = forget_entry_and_derived(memory, "aisle seat, vegetarian meals")
    assert first & set(ids)  # it delivered what is about to be purged
    assert len(ids) >= 3  # the entry, its standing items, its facts
    assert all(files_holding(memory, t) for t in texts)  # they are there before
    vectors = memory / ".index" / "vectors"  # derived from the text: the vector cache goes with it
    vectors.mkdir(parents=True)
    (vectors / "minilm-384.lock").touch()
    (vectors / "minilm-384.keys").write_bytes(texts[0].encode())

    out = json.loads(run_cli("purge", "--json").stdout)
    assert sorted(out["purged"]) == sorted(ids) and out["files_rewritten"] > 0 and out["index_rebuilt"]
    for text in texts:
        assert files_holding(memory, text) == [], text
    assert files_holding(memory, "I always want an aisle seat") == []
    # the assistant's reply repeated a forgotten preference: another entry, kept, and named so it can be forgotten
    quoting = [orjson.loads(line)["id"] for p in files_holding(memory, "hotels under $200 a night")
               for line in (memory / p).read_bytes().splitlines() if b"hotels under $200 a night" in line]
    assert quoting == out["still_quoted"] and len(quoting) == 1
    assert out["left_in"] == files_holding(memory, "hotels under $200 a night")  # the one ledger holding it
    every_file_parses(memory)
    checkpoints_on_boundaries(memory)
    after = all_entries(memory)
    assert set(after) == set(before) - set(ids)
    assert all(after[i] == before[i] for i in after)  # every other entry intact, its folded weight too
    # the tombstone file names ids only, and records the purge
    assert set(tombstones.Forgotten(memory).purged()) == set(ids)
    # the running process reads the replaced files: the purged items are gone from what it delivers
    got = running.recall(query, travel, record_trace=False)
    assert not {h.id for h in got.hits} & set(ids) and not any(t in got.block for t in texts)
    # what else memory held is still delivered
    mem = Memory(load_config(flags={"paths.workspace": str(ws)}))
    ctx = HookContext(agent_id="ops", session_id="s-new", run_id="r-new", project="payments", workspace_dir=str(ws))
    got = mem.recall("the payments worker is stuck again, how do I restart it?", ctx, record_trace=False)
    delivered = {h.id for h in got.hits}
    assert delivered and not delivered & set(ids)
    assert any("payworker" in after[i]["content"] for i in delivered if i in after)
    # a second purge finds nothing left to do
    again = json.loads(run_cli("purge", "--json").stdout)
    assert again == {"purged": [], "files_rewritten": 0, "index_rebuilt": False, "still_quoted": [], "left_in": []}
    assert "nothing to purge" in run_cli("purge").stdout
    assert sorted(p.name for p in vectors.iterdir()) == ["minilm-384.lock"]


def test_a_forgotten_hook_leaves_the_traces_and_its_own_file_is_named(tmp_path):
    memory = tmp_path / "memory"
    (memory / "hooks").mkdir(parents=True)
    text = "The staging database password is hunter2-xyz-789, rotate it monthly."
    (memory / "hooks" / "team.yaml").write_text(
        f'hooks:\n  - id: staging-db\n    entry: "{text}"\n    events: [query]\n    when: {{tool: {{in: [psql]}}}}\n')
    traces.append(memory, "a", {"v": 1, "kind": "trace", "run_id": "r", "agent_id": "a", "session_id": "s",
                                "query": "what is the staging password?", "delivered": [
                                    {"id": "staging-db", "score": 1.0, "signals": {}, "text": text}],
                                "left_out": [f"other: {text}"], "tokens": 9}, 1790000000.0)
    tombstones.append(memory, [tombstones.forget_record("staging-db", "hook")])
    out = purging.purge(memory)
    assert out["purged"] == ["staging-db"] and out["left_in"] == ["hooks/team.yaml"]
    (trace,) = [orjson.loads(line) for p in (memory / "traces").rglob("*.jsonl") for line in p.read_bytes().splitlines()]
    assert trace["delivered"] == [] and trace["left_out"] == ["other: [purged]"]
    assert files_holding(memory, text) == ["hooks/team.yaml"]  # the user's own file: named, not rewritten


def _fact(entry_id: str, value: str, ts: str) -> dict:
    f = Fact("preference", "user", "seat", value, f"User prefers {value} seats")
    entry = {"id": entry_id, "timestamp": ts, "session_id": "s"}
    return fact_record(f, fid=fact_id(entry_id, 0), project="p", origin_agent="a", entry=entry, supersedes=None,
                       extractor="heuristic", recorded_at=ts)


def test_a_revision_chain_through_a_purged_fact_stays_valid(tmp_path):
    memory = tmp_path / "memory"
    a, b, c = (_fact(f"ep-{n}", v, f"2026-10-0{n}T00:00:00.000Z") for n, v in ((1, "window"), (2, "middle row"),
                                                                               (3, "aisle")))
    b["supersedes"], c["supersedes"] = a["id"], b["id"]
    SemanticStore(memory).append("p", [a, b, c])
    tombstones.append(memory, [tombstones.forget_record(b["id"], "fact")])
    assert purging.purge(memory)["purged"] == [b["id"]]
    store = SemanticStore(memory)
    assert [r["id"] for r in store.current("p")] == [c["id"]]
    assert [r["id"] for r in store.history(c["id"])] == [a["id"], c["id"]]
    assert b"middle row" not in (memory / "semantic" / "p.jsonl").read_bytes()
    # forgetting the current value: the older one it replaced stays replaced
    tombstones.append(memory, [tombstones.forget_record(c["id"], "fact")])
    purging.purge(memory)
    store = SemanticStore(memory)
    assert list(store.current("p")) == [] and b"aisle" not in (memory / "semantic" / "p.jsonl").read_bytes()


def _purge_proc(ws: Path, kill_at: int | None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(ws.parent / "home")}
    code = "import sys; from memtier_plugin import purging; purging.purge(sys.argv[1]); print(purging._steps)"
    if kill_at is not None:
        env["MEMTIER_PURGE_KILL_AT"] = str(kill_at)
    return subprocess.run([PY, "-c", code, str(ws / "memory")], env=env, capture_output=True, text=True, timeout=60)


def _ledger_bytes(memory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(memory)): p.read_bytes() for p in sorted(memory.rglob("*.json*"))
            if ".index" not in p.parts and p.name != tombstones.FILE}


def test_purge_killed_at_20_random_points_loses_nothing_and_the_next_purge_finishes(demo_workspace, tmp_path):
    base = copy_of(demo_workspace, tmp_path / "base")
    ids, texts = forget_entry_and_derived(base / "memory", "aisle seat, vegetarian meals")
    more, more_texts = forget_entry_and_derived(base / "memory", "restart the payments worker please")
    ids, texts = ids + more, texts + more_texts
    keep = set(all_entries(base / "memory")) - set(ids)
    ref = copy_of(base, tmp_path / "ref")
    env_steps = _purge_proc(ref, 10**9)  # counts its steps, never killed
    steps = int(env_steps.stdout.strip())
    assert steps >= 10, env_steps.stderr
    reference = _ledger_bytes(ref / "memory")
    rng = random.Random(int(os.environ.get("PURGE_KILL_SEED", "28")))
    points = rng.sample(range(1, steps + 1), min(steps, int(os.environ.get("PURGE_KILL_POINTS", "16"))))
    delays = [rng.uniform(0.0, 0.6) for _ in range(20 - len(points))]
    for n, point in enumerate([*points, *(None for _ in delays)]):
        ws = copy_of(base, tmp_path / f"ws{n}")
        memory = ws / "memory"
        if point is not None:  # killed at a chosen step ...
            proc = _purge_proc(ws, point)
            assert proc.returncode == -signal.SIGKILL, proc.stderr
        else:  # ... or after a random delay, wherever it was
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            proc = subprocess.Popen([PY, "-c", "import sys; from memtier_plugin import purging; "
                                     "purging.purge(sys.argv[1])", str(memory)], env=env)
            time.sleep(delays[n - len(points)])
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        entries = all_entries(memory)
        assert keep <= set(entries), f"kill point {point}: lost {keep - set(entries)}"
        for path in memory.rglob("*.jsonl"):  # every file parses (a killed purge may leave only its temp file)
            for line in path.read_bytes().splitlines():
                orjson.loads(line)
        checkpoints_on_boundaries(memory)
        out = purging.purge(memory)
        assert set(out["purged"]) <= set(ids)
        assert tombstones.Forgotten(memory).pending_purge() == []
        every_file_parses(memory)
        assert set(all_entries(memory)) == keep
        for text in texts:
            assert files_holding(memory, text) == [], (point, text)
        got = _ledger_bytes(memory)
        cps, ref_cps = (orjson.loads(d.pop(".daemon/checkpoints.json"))["files"] for d in (got, dict(reference)))
        assert cps == ref_cps, (point, {k: (v, ref_cps.get(k)) for k, v in cps.items() if v != ref_cps.get(k)})
        assert got == {k: v for k, v in reference.items() if k != ".daemon/checkpoints.json"}, point
        shutil.rmtree(ws)


WRITER = """
import sys, time
from memtier_plugin.store.episodic import Ledger
from memtier_plugin.store import traces
ledger = Ledger(sys.argv[1])
ts = float(sys.argv[2])
for n in range(int(sys.argv[3])):
    rec, _path, _off = ledger.write_entry(agent_id="assistant", session_id="s-w", project="travel",
                                          content=f"writer note {n} about the ferry timetable", timestamp=ts + n / 1000)
    traces.append(sys.argv[1], "assistant", {"v": 1, "kind": "run_end", "run_id": f"w{n}", "agent_id": "assistant",
                  "session_id": "s-w", "project": "travel", "success": True, "tool_calls": 0, "failed_calls": 0,
                  "delivered": [rec["id"]]}, ts)
    print(rec["id"], flush=True)
"""


def test_a_concurrent_writer_loses_no_record_while_purges_replace_its_file(demo_workspace, tmp_path):
    ws = copy_of(demo_workspace, tmp_path / "ws")
    memory = ws / "memory"
    entries = Ledger(memory).read().entries
    victim = next(e for e in entries.values() if "aisle seat" in e.content and e.role == "user")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = subprocess.Popen([PY, "-c", WRITER, str(memory), str(victim.ts), "400"], env=env,
                              stdout=subprocess.PIPE, text=True)
    forgotten, rounds = [victim.id], 0
    tombstones.append(memory, [tombstones.forget_record(victim.id, "episode")])
    while writer.poll() is None or rounds < 3:
        purging.purge(memory)
        rounds += 1
        written = [e for e in Ledger(memory).read().entries.values() if e.session_id == "s-w"]
        if written and rounds % 2:
            pick = written[-1].id  # forget one of the writer's entries: its file is rewritten again
            forgotten.append(pick)
            tombstones.append(memory, [tombstones.forget_record(pick, "episode")])
    acknowledged = writer.stdout.read().split()
    assert writer.wait() == 0 and len(acknowledged) == 400 and rounds >= 3
    purging.purge(memory)
    held = set(Ledger(memory).read().entries)
    assert set(acknowledged) - set(forgotten) <= held, "an acknowledged append was lost"
    assert not set(forgotten) & held
    delivered = {i for p in (memory / "traces" / "assistant").glob("*.jsonl")
                 for line in p.read_bytes().splitlines() for i in orjson.loads(line).get("delivered", [])
                 if isinstance(i, str)}
    assert set(acknowledged) - set(forgotten) <= delivered  # the trace appends survived too
    every_file_parses(memory)


def test_a_running_daemon_reads_a_purged_ledger_again_from_its_checkpoint(tmp_path):
    from memtier_plugin.config import load_config
    from memtier_plugin.consolidation.batch import Consolidator

    cfg = load_config(flags={"paths.workspace": str(tmp_path / "ws")})
    memory, ledger, ts = cfg.memory_root, Ledger(cfg.memory_root), 1790000000.0

    def add(n: int) -> dict:
        return ledger.add(agent_id="a", session_id="s", project="p", timestamp=ts + n,
                          content=f"We decided to deploy the atlas service {n} with a blue green rollout every "
                                  f"Friday morning, and the database for service {n} is postgres.")

    first = [add(n) for n in range(6)]
    cons = Consolidator(cfg)  # one daemon, kept across the purge as a running one is
    assert set(cons.run_batch().promoted) == {e["id"] for e in first}
    tombstones.append(memory, [tombstones.forget_record(first[0]["id"], "episode")])
    assert purging.purge(cfg)["purged"] == [first[0]["id"]]
    later = [add(n) for n in range(10, 16)]  # appended to the ledger the purge replaced
    report = cons.run_batch()
    assert set(report.promoted) == {e["id"] for e in later} and not report.errors
    checkpoints_on_boundaries(memory)
