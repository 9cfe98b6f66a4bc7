"""The consolidation daemon against real components: real ledgers on a temp folder, a real
watchdog observer, real `python -m memtier_plugin daemon` subprocesses (SIGKILL, SIGTERM),
and a real HTTP server on 127.0.0.1 standing in for the model endpoint."""

from __future__ import annotations

import json
import os
import queue
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson
import pytest

from conftest import FIXTURES, run_cli
from memtier_plugin.consolidation import batch as consolidation
from memtier_plugin.config import load_config
from memtier_plugin.consolidation.batch import consolidate_once, load_checkpoints
from memtier_plugin.consolidation.daemon import Daemon
from memtier_plugin.consolidation.facts import is_duplicate, revision_key
from memtier_plugin.store.episodic import Ledger, iter_records
from memtier_plugin.memory import Memory
from memtier_plugin.recall.retriever import Retriever
from memtier_plugin.store.semantic import SemanticStore, to_fact


# ---------------------------------------------------------------- helpers
def config(ws: Path, **flags):
    return load_config(flags={"paths.workspace": str(ws), **flags})


def add(ws: Path, content: str, *, agent="travel", session="s1", project="trips", role="user", ts=None):
    return Ledger(ws / "memory").add(agent_id=agent, session_id=session, project=project, content=content,
                                     role=role, timestamp=ts)


def episodic(ws: Path) -> list[dict]:
    out = []
    for path in sorted((ws / "memory" / "episodic").rglob("*.jsonl")):
        out.extend(rec for rec, _, problem in iter_records(path) if not problem)
    return out


def fact_records(ws: Path) -> list[dict]:
    out = []
    for path in sorted((ws / "memory" / "semantic").glob("*.jsonl")):
        out.extend(rec for rec, _, problem in iter_records(path) if not problem and rec.get("kind") == "fact")
    return out


def eligible(rec: dict, min_tokens: int = 3) -> bool:
    return (rec.get("kind", "entry") == "entry" and rec.get("role") != "system"
            and not rec["content"].startswith("[system]") and rec["tokens"] >= min_tokens)


def assert_consistent(ws: Path, threshold: float = 0.8) -> dict:
    """The Done-when invariants: every eligible entry promoted exactly once, no duplicate fact."""
    recs = episodic(ws)
    entries = {r["id"]: r for r in recs if r.get("kind", "entry") == "entry"}
    promoted = [r for r in recs if r.get("kind") == "promoted"]
    counts = Counter(r["entry_id"] for r in promoted)
    want = {i for i, r in entries.items() if eligible(r)}
    assert {i for i, n in counts.items() if n > 1} == set(), "an entry was promoted twice"
    assert set(counts) == want, (f"missed {sorted(want - set(counts))[:5]}, "
                                 f"wrongly promoted {sorted(set(counts) - want)[:5]}")
    facts = fact_records(ws)
    ids = Counter(f["id"] for f in facts)
    assert [i for i, n in ids.items() if n > 1] == [], "a fact id was written twice"
    by_id = {f["id"]: f for f in facts}
    listed = {fid for r in promoted for fid in r["fact_ids"]}
    assert listed <= set(by_id), "a promoted record names a fact that is not in the store"
    for f in facts:
        src = f["source_entry_ids"][0]
        assert src in entries and entries[src]["agent_id"] == f["origin_agent"]
        assert f["session_ids"] == [entries[src]["session_id"]] and f["project"] == entries[src]["project"]
        assert any(f["id"] in r["fact_ids"] for r in promoted if r["entry_id"] == src)
    store = SemanticStore(ws / "memory")
    for project in store.projects():
        current = list(store.current(project))
        keys = Counter(revision_key(to_fact(f)) for f in current)
        assert [k for k, n in keys.items() if k is not None and n > 1] == [], "two current versions of one fact"
        seen = []
        for f in current:
            dup = is_duplicate(to_fact(f), seen, threshold)
            assert dup is None, f"duplicate facts in {project}: {f['content']!r} ~ {dup.content!r}"
            seen.append(to_fact(f))
    return {"entries": len(entries), "eligible": len(want), "facts": len(facts)}


def wait_for(pred, timeout=10.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class DaemonProc:
    """A real `python -m memtier_plugin daemon` subprocess; stderr read by a thread."""

    def __init__(self, ws: Path, *args: str):
        self.proc = subprocess.Popen([sys.executable, "-m", "memtier_plugin", "-w", str(ws), "daemon", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stderr:
            self.stderr.append(line)
            self.lines.put(line)

    def wait_ready(self, timeout=15.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if "watching" in self.lines.get(timeout=0.1):
                    return
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
        raise AssertionError(f"daemon not ready; stderr: {''.join(self.stderr)}")


# ---------------------------------------------------------------- one batch
def test_once_promotes_eligible_entries_once_and_skips_the_rest(workspace):
    e1 = add(workspace, "I prefer aisle seats on flights")
    e2 = add(workspace, "We decided to use Postgres 16 for the database", agent="deployer", project="atlas",
             session="d1", role="assistant")
    short = add(workspace, "ok")
    system = add(workspace, "[system] session started", role="system")
    cfg = config(workspace)
    report = consolidate_once(cfg)
    assert sorted(report.promoted) == sorted([e1["id"], e2["id"]])
    assert {s["entry_id"]: s["reason"] for s in report.skipped} == {
        short["id"]: "fewer than 3 tokens", system["id"]: "system entry"}
    assert report.store_tokens == 0 and report.errors == []
    by_agent = {f["origin_agent"]: f for f in report.new_facts}
    seat, db = by_agent["travel"], by_agent["deployer"]
    assert seat["project"] == "trips" and seat["source_entry_ids"] == [e1["id"]] and seat["session_ids"] == ["s1"]
    assert seat["effective_time"] == e1["timestamp"][:10] and seat["supersedes"] is None
    assert db["project"] == "atlas" and db["value"] == "Postgres 16"
    assert (workspace / "memory" / "semantic" / "atlas.jsonl").is_file()
    # the promoted records sit in each agent's own ledger and fold into the entries
    entries = Ledger(workspace / "memory").read().entries
    assert entries[e1["id"]].promoted and entries[e1["id"]].fact_ids == [seat["id"]]
    assert not entries[short["id"]].promoted
    # nothing pending: a second run changes nothing
    again = consolidate_once(cfg)
    assert again.promoted == [] and again.new_facts == []
    assert_consistent(workspace)


def test_duplicates_are_merged_across_agents_of_a_project(workspace):
    a = add(workspace, "I prefer aisle seats on flights", agent="travel", session="s1")
    b = add(workspace, "I prefer aisle seats on flights", agent="planner", session="p1")
    c = add(workspace, "I prefer aisle seats on flights", agent="planner", session="p2", project="other")
    report = consolidate_once(config(workspace))
    assert report.duplicates == 1 and len(report.new_facts) == 2
    entries = Ledger(workspace / "memory").read().entries
    assert entries[a["id"]].fact_ids == entries[b["id"]].fact_ids  # b points at a's fact
    assert entries[c["id"]].fact_ids != entries[a["id"]].fact_ids  # another project keeps its own
    assert_consistent(workspace)


def test_revision_supersedes_and_recall_returns_the_current_version(workspace):
    first = add(workspace, "keep hotels under $200 a night", session="s1", ts=time.time() - 3 * 86400)
    cfg = config(workspace)
    consolidate_once(cfg)
    add(workspace, "the hotel budget is now $300 a night", session="s2")
    report = consolidate_once(cfg)
    assert len(report.new_facts) == 1 and report.superseded == 1
    new = report.new_facts[0]
    store = SemanticStore(workspace / "memory")
    old = store.project("trips").by_source[first["id"]][0]
    assert new["supersedes"] == old
    assert [f["id"] for f in store.history(old)] == [old, new["id"]]
    assert old not in {f["id"] for f in store.current("trips")}

    result = Retriever(cfg).recall("what is the hotel budget per night", agent_id="travel", project="trips",
                                   session_id="s3", agents=["travel"], record_trace=False)
    texts = [h.content for h in result.hits]
    assert any("$300" in t for t in texts), texts
    assert not any("$200" in t for t in texts), texts

    # inspect shows the chain
    out = run_cli("-w", str(workspace), "inspect", "--facts", "--history").stdout
    lines = [ln for ln in out.splitlines() if "hotel_budget" in ln]
    assert "$200" in lines[0] and "(superseded)" in lines[0] and "$300" in lines[1] and "(current)" in lines[1]
    cur = run_cli("-w", str(workspace), "inspect", "--facts", "--project", "trips", "--json").stdout
    assert [json.loads(ln)["id"] for ln in cur.splitlines()] == [new["id"]]
    one = json.loads(run_cli("-w", str(workspace), "inspect", "--facts", "--id", old, "--json").stdout)
    assert one["id"] == new["id"] and [h["id"] for h in one["history"]] == [old]


def test_the_bundled_scenario_revises_the_hotel_budget_and_no_booking(workspace):
    """Replay workspace-fixtures/scenario as `memtier demo` does, consolidating after each session:
    session 05's "budget is now up to $300 a night" supersedes session 01's "hotels under $200 a
    night", and that is the only revision; the UA 8802 and AP 124 bookings both stay current."""
    from memtier_plugin import plugin as builtin
    from memtier_plugin.host import Host, replay_session

    host = Host()
    host.register(builtin)
    cfg = config(workspace)
    for path in sorted((FIXTURES / "scenario").glob("*.jsonl")):
        replay_session(host, path, workspace)
        consolidate_once(cfg)
    facts = {f["id"]: f for f in fact_records(workspace)}
    revisions = [((facts[f["supersedes"]]["subject"], facts[f["supersedes"]]["attribute"],
                   facts[f["supersedes"]]["value"]), (f["subject"], f["attribute"], f["value"]))
                 for f in facts.values() if f.get("supersedes")]
    assert revisions == [(("user", "hotel_budget", "under $200 a night"),
                          ("user", "hotel_budget", "up to $300 a night"))]
    current = {f["id"] for f in SemanticStore(workspace / "memory").current("travel")}
    for flight in ("UA 8802", "AP 124"):
        (booking,) = [f for f in facts.values() if f["value"].startswith(flight)]
        assert booking["fact_kind"] == "event" and booking["id"] in current
    assert_consistent(workspace)


def test_an_older_statement_arriving_late_does_not_replace_the_current_one(workspace):
    cfg = config(workspace)
    add(workspace, "the hotel budget is now $300 a night", session="s2")
    consolidate_once(cfg)
    late = add(workspace, "keep hotels under $200 a night", session="s1", ts=time.time() - 5 * 86400)
    report = consolidate_once(cfg)
    assert report.promoted == [late["id"]] and len(report.new_facts) == 1
    current = [f["content"] for f in SemanticStore(workspace / "memory").current("trips")]
    assert current == ["The hotel budget is now $300 a night"]
    result = Retriever(cfg).recall("hotel budget a night", agent_id="travel", project="trips",
                                   agents=["travel"], record_trace=False)
    facts = [h.content for h in result.hits if h.tier == "semantic"]
    assert facts == ["The hotel budget is now $300 a night"]
    assert_consistent(workspace)


def test_a_late_statement_the_history_already_holds_is_not_written_again(workspace):
    cfg = config(workspace)
    add(workspace, "My hotel budget is $200 a night", session="s1", ts=time.time() - 2 * 86400)
    add(workspace, "My hotel budget is $300 a night", session="s2")
    consolidate_once(cfg)
    # four agents' entries reach the daemon out of order: an older repeat of $200, an older $250
    again = add(workspace, "My hotel budget is $200 a night", session="s0", ts=time.time() - 3 * 86400)
    other = add(workspace, "My hotel budget is $250 a night", session="s0", ts=time.time() - 4 * 86400)
    report = consolidate_once(cfg)
    assert sorted(report.promoted) == sorted([again["id"], other["id"]])
    assert [f["value"] for f in report.new_facts] == ["$250 a night"]  # history it lacked, nothing else
    assert Counter(f["value"] for f in fact_records(workspace)) == {"$200 a night": 1, "$300 a night": 1,
                                                                   "$250 a night": 1}
    assert [f["value"] for f in SemanticStore(workspace / "memory").current("trips")] == ["$300 a night"]
    assert_consistent(workspace)


def test_a_crash_after_the_facts_were_written_is_resumed_without_duplicates(workspace, tmp_path):
    """State of a batch killed between step 2 (facts) and step 3 (promoted records)."""
    for i in range(6):
        add(workspace, f"My seat for flight {i} is {i}A", session=f"s{i % 2}")
    before = tmp_path / "before"
    shutil.copytree(workspace / "memory", before)
    first = consolidate_once(config(workspace))
    assert len(first.new_facts) >= 6
    shutil.rmtree(workspace / "memory" / "episodic")
    shutil.rmtree(workspace / "memory" / ".daemon")
    shutil.copytree(before / "episodic", workspace / "memory" / "episodic")  # no promoted records, no checkpoint
    resumed = consolidate_once(config(workspace))
    assert resumed.resumed == 6 and resumed.new_facts == [] and len(resumed.promoted) == 6
    assert_consistent(workspace)


def current_contents(ws: Path, project: str = "trips") -> list[str]:
    return sorted(f["content"] for f in SemanticStore(ws / "memory").current(project))


def test_an_entry_stating_one_fact_under_two_keys_stays_one_fact_also_when_it_arrives_late(workspace):
    """Root cause of the SIGKILL test's "duplicate facts": "The parking budget is now $X a night"
    yields two candidates with one content (parking_budget and a budget constraint). An entry
    older than the current parking_budget (a late arrival: normal with concurrent writers, and
    what a crash-then-redo produces) had its first candidate written as history; the second one
    was checked only against *current* facts, missed its sibling and became a current budget
    fact; every later statement then revised both keys, leaving two current facts saying the same."""
    cfg = config(workspace)
    now = time.time()
    add(workspace, "The parking budget is now $220 a night", ts=now - 60)
    consolidate_once(cfg)
    late = add(workspace, "The parking budget is now $170 a night", agent="planner", session="p1", ts=now - 120)
    report = consolidate_once(cfg)
    assert report.promoted == [late["id"]]
    assert [(f["attribute"], f["value"]) for f in report.new_facts] == [("parking_budget", "$170 a night")]
    assert current_contents(workspace) == ["The parking budget is now $220 a night"]
    add(workspace, "The parking budget is now $80 a night", ts=now)
    consolidate_once(cfg)
    assert current_contents(workspace) == ["The parking budget is now $80 a night"]
    assert_consistent(workspace)


def test_a_revision_another_current_fact_already_states_is_not_written_twice(workspace):
    """Same key, newer value, but the content is a current fact of another key: a duplicate of that
    fact, and the old version of the key is marked superseded by it (the revision is kept)."""
    cfg = config(workspace)
    old = add(workspace, "Our budget is $200 a night", ts=time.time() - 86400)
    consolidate_once(cfg)
    new = add(workspace, "The parking budget is now $80 a night")
    report = consolidate_once(cfg)
    assert [f["attribute"] for f in report.new_facts] == ["parking_budget"]
    assert report.duplicates == 1 and report.superseded == 1
    assert current_contents(workspace) == ["The parking budget is now $80 a night"]
    store = SemanticStore(workspace / "memory")
    (old_fact,) = store.project("trips").by_source[old["id"]]
    assert store.project("trips").superseded_by[old_fact] == report.new_facts[0]["id"]
    entries = Ledger(workspace / "memory").read().entries
    assert entries[new["id"]].fact_ids == [report.new_facts[0]["id"]]
    assert_consistent(workspace)


class Killed(BaseException):
    """SIGKILL stand-in: not an Exception, so no handler of the batch sees it."""


def _commit_state(ws: Path) -> tuple:
    """What a batch commits, without timestamps: fact and marker records, promoted records."""
    facts, markers = set(), set()
    for path in sorted((ws / "memory" / "semantic").glob("*.jsonl")):
        for rec, _, problem in iter_records(path):
            if problem:
                continue
            if rec.get("kind") == "fact":
                facts.add((rec["id"], rec["content"], rec["supersedes"], tuple(rec["source_entry_ids"])))
            elif rec.get("kind") == "superseded":
                markers.add((rec["fact_id"], rec["by"]))
    promoted = sorted((r["entry_id"], tuple(r["fact_ids"])) for r in episodic(ws) if r.get("kind") == "promoted")
    return facts, markers, promoted


def test_a_kill_at_any_point_of_the_commit_is_finished_exactly_once(workspace, tmp_path, monkeypatch):
    """Deterministic kill points of one batch: before the journal, inside each fact append (torn at
    line starts, one byte in, mid-line, one byte short, complete), after each promoted record,
    before the journal is dropped, before the checkpoint. A fresh run then must commit exactly what
    an uninterrupted batch commits: same facts, same markers, every entry promoted once."""
    from memtier_plugin.consolidation import checkpoints
    from memtier_plugin.store import semantic
    from memtier_plugin.store.episodic import append_lines as real_append

    cfg = config(workspace)
    now = time.time()
    add(workspace, "The parking budget is now $220 a night", ts=now - 60)
    add(workspace, "We decided to use Postgres for the database", agent="deployer", project="atlas",
        session="d1", role="assistant", ts=now - 50)
    consolidate_once(cfg)
    for i, (text, ago) in enumerate([("The parking budget is now $170 a night", 120),  # late: fact + marker
                                     ("The museum budget is now $90 a night", 40),
                                     ("I prefer aisle seats on flights", 30),
                                     ("The parking budget is now $80 a night", 0)]):
        add(workspace, text, agent=("travel", "planner")[i % 2], session=f"s{i}", ts=now - ago)
    add(workspace, "We decided to use SQLite for the database", agent="deployer", project="atlas",
        session="d2", role="assistant", ts=now - 10)
    add(workspace, "Thanks, that sounds good to me", agent="planner", session="s9", ts=now - 5)
    base = tmp_path / "base"
    shutil.copytree(workspace / "memory", base)
    already = len(_commit_state(workspace)[2])

    def reset():
        shutil.rmtree(workspace / "memory")
        shutil.copytree(base, workspace / "memory")

    consolidate_once(cfg)
    want = _commit_state(workspace)
    batch = len(want[2]) - already  # promoted records of the batch under test (the "ok" is not eligible)
    assert len(want[0]) >= 6 and want[1] and batch == 6, "the batch writes facts in two projects and a marker"

    # every append of fact records the reference batch makes
    appends: list[bytes] = []
    reset()
    with monkeypatch.context() as m:
        m.setattr(semantic, "append_lines",
                  lambda path, data, **kw: appends.append(data) or real_append(path, data, **kw))
        consolidate_once(cfg)
    assert len(appends) == 2
    kills: list[tuple[str, int, int]] = [("journal", 0, 0), ("drop", 0, 0), ("checkpoint", 0, 0)]
    for call, data in enumerate(appends):
        starts = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A]
        cuts = {len(data)}
        for a, b in zip(starts, starts[1:]):
            cuts |= {a, a + 1, (a + b) // 2, b - 1}
        kills += [("facts", call, k) for k in sorted(cuts)]
    kills += [("promoted", j, 0) for j in range(batch)]

    for what, n, k in kills:
        reset()
        calls = {"facts": 0, "promoted": 0}

        def torn_append(path, data, fsync=True, _n=n, _k=k):
            if calls["facts"] == _n:
                with open(path, "ab") as fh:  # the part of the write the kernel had done
                    fh.write(data[:_k])
                raise Killed
            calls["facts"] += 1
            return real_append(path, data, fsync=fsync)

        real_update = Ledger.add_update

        def killed_update(self, agent_id, rec, _n=n):
            if rec.get("kind") == "promoted":
                if calls["promoted"] == _n:
                    raise Killed
                calls["promoted"] += 1
            return real_update(self, agent_id, rec)

        def kill(*_a, **_kw):
            raise Killed

        with monkeypatch.context() as m:
            if what == "facts":
                m.setattr(semantic, "append_lines", torn_append)
            elif what == "promoted":
                m.setattr(Ledger, "add_update", killed_update)
            else:
                m.setattr(consolidation, {"journal": "write_journal", "drop": "drop_journal",
                                          "checkpoint": "save_checkpoints"}[what], kill)
            try:
                consolidate_once(cfg)
            except Killed:
                pass
            else:
                raise AssertionError(f"{what} #{n} byte {k}: no kill happened")
        consolidate_once(cfg)
        assert _commit_state(workspace) == want, f"killed at {what} #{n} byte {k}"
        assert_consistent(workspace)
        assert not (workspace / "memory" / ".daemon" / checkpoints.JOURNAL).exists()
        again = consolidate_once(cfg)
        assert again.promoted == [] and again.new_facts == [], f"killed at {what} #{n} byte {k}"


def test_lost_checkpoint_means_rereading_not_redoing(workspace):
    for i in range(5):
        add(workspace, f"I prefer window seats on train line {i}")
    cfg = config(workspace)
    consolidate_once(cfg)
    (workspace / "memory" / ".daemon" / "checkpoints.json").unlink()
    report = consolidate_once(cfg)
    assert report.promoted == [] and report.new_facts == []
    assert_consistent(workspace)


def test_a_torn_last_line_waits_until_it_is_complete(workspace):
    old_day = time.time() - 3 * 86400  # a file nobody else appends to while we look
    add(workspace, "I prefer aisle seats on flights", ts=old_day)
    path = next((workspace / "memory" / "episodic" / "travel").glob("*.jsonl"))
    rec = Ledger(workspace / "memory").make_entry(agent_id="travel", session_id="s1", project="trips",
                                                  content="We decided to use Postgres for the database",
                                                  timestamp=old_day + 1)
    line = orjson.dumps(rec) + b"\n"
    with open(path, "ab") as fh:
        fh.write(line[:40])
    cfg = config(workspace)
    assert len(consolidate_once(cfg).promoted) == 1
    rel = path.relative_to(workspace / "memory").as_posix()
    assert load_checkpoints(workspace / "memory")[rel] == path.stat().st_size - 40
    with open(path, "ab") as fh:
        fh.write(line[40:])
    assert consolidate_once(cfg).promoted == [rec["id"]]
    assert load_checkpoints(workspace / "memory")[rel] == path.stat().st_size
    assert_consistent(workspace)


def test_a_torn_line_left_by_a_crashed_writer_is_skipped(workspace):
    add(workspace, "I prefer aisle seats on flights")
    path = next((workspace / "memory" / "episodic" / "travel").glob("*.jsonl"))
    with open(path, "ab") as fh:
        fh.write(b'{"v":1,"kind":"entry","id":"ep-torn","content":"We dec')  # the writer died here
    later = add(workspace, "We decided to use Postgres for the database")  # starts on a new line
    assert sorted(consolidate_once(config(workspace)).promoted) == sorted(
        [r["id"] for r in episodic(workspace) if r.get("kind") == "entry"])
    assert later["id"] in {r.get("entry_id") for r in episodic(workspace)}
    assert_consistent(workspace)


def test_batches_are_bounded_and_consolidate_once_runs_them_all(workspace, monkeypatch):
    monkeypatch.setattr(consolidation, "MAX_BATCH", 4)
    for i in range(11):
        add(workspace, f"My locker number at gym {i} is {100 + i}", agent="a" if i % 2 else "b")
    report = consolidate_once(config(workspace))
    assert report.batches == 3 and len(report.promoted) == 11 and not report.more
    assert_consistent(workspace)


# ---------------------------------------------------------------- multi-agent scoping
def test_episodic_ledgers_are_private_except_to_the_orchestrator(workspace):
    (workspace / "memtier.yaml").write_text("agents:\n  global_read: [orchestrator]\n")
    secret = add(workspace, "The Lisbon hotel confirmation code is QX88341207", agent="travel", project="trips")
    add(workspace, "Refactor the parser module today", agent="coder", project="trips", session="c1")
    cfg = config(workspace)
    mem = Memory(cfg)

    def recall(agent):
        return Retriever(cfg).recall("Lisbon hotel confirmation code", agent_id=agent, project="trips",
                                     agents=mem.visible_agents(agent), record_trace=False)

    assert [h.id for h in recall("coder").hits] == []
    assert secret["id"] in [h.id for h in recall("orchestrator").hits]
    assert secret["id"] in [h.id for h in recall("travel").hits]

    def cli_ids(agent):
        out = run_cli("-w", str(workspace), "search", "Lisbon hotel confirmation code", "--agent", agent,
                      "--json").stdout
        return [(h["id"], h["tier"], h["agent_id"]) for h in json.loads(out)["hits"]]

    assert cli_ids("coder") == []
    assert (secret["id"], "episodic", "travel") in cli_ids("orchestrator")

    # consolidation shares the distilled fact with the project, tagged with its origin; the entry stays private
    consolidate_once(cfg)
    hits = cli_ids("coder")
    assert hits and all(tier == "semantic" and origin == "travel" for _, tier, origin in hits)
    assert secret["id"] not in [i for i, _, _ in hits]


# ---------------------------------------------------------------- the model path
class ModelServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, mode: str):
        super().__init__(("127.0.0.1", 0), ModelHandler)
        self.mode = mode
        self.calls = 0

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class ModelHandler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.server.calls += 1
        entry = body["messages"][-1]["content"].split("\n", 1)[1]
        mode = self.server.mode
        if mode == "http500":
            return self._send(500, b'{"error": "boom"}')
        if mode == "garbage":
            content = "Sure! Here are the facts you asked for: the user likes things."
        elif mode == "schema":
            content = json.dumps({"facts": [{"kind": "preference", "text": entry}]})
        else:
            n = sum(map(ord, entry)) % 1000
            fact = {"fact_kind": "attribute", "subject": "user", "attribute": f"model_note_{n}",
                    "value": entry[:40], "content": f"Model says: {entry}", "confidence": 0.9,
                    "effective_time": "2026-11-29"}
            facts = [fact]
            if mode == "confidence":  # outside the schema's minimum/maximum
                fact["confidence"] = 1.7
            elif mode == "date":  # effective_time must match the schema's ISO-date pattern
                fact["effective_time"] = "next Tuesday"
            elif mode == "rendering":  # a model that copies a tool call's rendering into a fact
                facts.append({**fact, "attribute": "call", "content": f'lookup({{"q":"x"}}) -> {entry[:30]}'})
            content = json.dumps({"facts": facts})
        reply = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                 "usage": {"prompt_tokens": 100, "completion_tokens": 25, "total_tokens": 125}}
        self._send(200, json.dumps(reply).encode())

    def _send(self, status, data):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def model_server(request):
    srv = ModelServer(getattr(request, "param", "ok"))
    thread = threading.Thread(target=srv.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def model_config(ws: Path, url: str):
    return config(ws, **{"consolidation.extractor": "model", "model.enabled": True, "model.base_url": url,
                         "model.max_retries": 0, "model.timeout_s": 2.0})


ENTRIES = ["I prefer aisle seats on flights", "We decided to use Postgres for the database",
           "My gym locker number is 417", "Never book flights before 8am"]


def test_model_extraction_records_facts_and_store_tokens(workspace, model_server):
    ids = [add(workspace, text, session=f"s{i % 2}")["id"] for i, text in enumerate(ENTRIES)]
    report = consolidate_once(model_config(workspace, model_server.url))
    assert model_server.calls == len(ENTRIES) and report.errors == [] and report.fallbacks == 0
    assert sorted(report.promoted) == sorted(ids)
    assert report.store_tokens == 25 * len(ENTRIES)
    assert {f["extractor"] for f in report.new_facts} == {"model"}
    assert all(f["content"].startswith("Model says:") and f["effective_time"] == "2026-11-29"
               for f in report.new_facts)
    costs = [json.loads(ln) for ln in (workspace / "memory" / "costs.jsonl").read_text().splitlines()]
    assert sorted(c["entry_id"] for c in costs) == sorted(ids)
    assert {c["completion_tokens"] for c in costs} == {25}
    out = run_cli("-w", str(workspace), "inspect", "--costs", "--json").stdout
    rows = {r["session_id"]: r for r in map(json.loads, out.splitlines())}
    assert rows["s0"]["store_tokens"] == 50 and rows["s1"]["store_tokens"] == 50
    assert rows["s0"]["model_calls"] == 2 and rows["s0"]["facts"] == 2
    assert_consistent(workspace)


@pytest.mark.parametrize("model_server", ["garbage", "schema", "confidence", "date", "http500"], indirect=True)
def test_model_failure_falls_back_to_heuristics_and_loses_nothing(workspace, model_server):
    ids = [add(workspace, text)["id"] for text in ENTRIES]
    report = consolidate_once(model_config(workspace, model_server.url))
    assert model_server.calls == 1  # the first failure switches the rest of the batch to heuristics
    assert sorted(report.promoted) == sorted(ids) and report.fallbacks == len(ENTRIES)
    assert len(report.errors) == 1 and "model extraction failed" in report.errors[0]
    if model_server.mode in ("schema", "confidence", "date"):  # the full facts_schema() is enforced
        assert "ModelError" in report.errors[0] and "does not match the schema" in report.errors[0]
    assert report.store_tokens == 0 and {f["extractor"] for f in report.new_facts} == {"heuristic"}
    assert not (workspace / "memory" / "costs.jsonl").exists()
    assert_consistent(workspace)


@pytest.mark.parametrize("model_server", ["rendering"], indirect=True)
def test_the_model_is_not_asked_about_chit_chat_or_raw_tool_output_and_writes_no_rendering(workspace, model_server):
    """Issue 25: an entry that can state no fact (a leave-taking, a request, a tool's JSON or failure) is promoted
    with no fact and never sent to the model; a tool's prose outcome is sent without its call; a model fact that
    is a call rendering is dropped."""
    said = add(workspace, "My gym locker number is 417")
    quiet = [add(workspace, "Gotta run, talk later."), add(workspace, "Send the report to Dana by Friday."),
             add(workspace, 'search({"q":"oslo hotels"}) -> {"hotels":[{"id":"h1"}]}', role="tool"),
             add(workspace, 'deploy({"app":"web"}) -> FAILED: connection refused', role="tool")]
    prose = add(workspace, 'book_hotel({"id":"h1"}) -> Booked Hotel Bristol Oslo, 2 nights, confirmation HB-2291',
                role="tool")
    report = consolidate_once(model_config(workspace, model_server.url))
    assert model_server.calls == 2 and report.errors == [] and report.fallbacks == 0
    assert sorted(report.promoted) == sorted(e["id"] for e in [said, prose, *quiet])
    contents = sorted(f["content"] for f in report.new_facts)
    assert contents == ["Model says: Booked Hotel Bristol Oslo, 2 nights, confirmation HB-2291",
                        "Model says: My gym locker number is 417"], contents
    assert_consistent(workspace)


def test_model_endpoint_down_falls_back(workspace):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ids = [add(workspace, text)["id"] for text in ENTRIES]
    cfg = model_config(workspace, f"http://127.0.0.1:{port}/v1")
    report = consolidate_once(cfg)
    assert sorted(report.promoted) == sorted(ids) and report.fallbacks == len(ENTRIES)
    assert report.new_facts and report.errors
    assert consolidate_once(cfg).promoted == []  # and nothing is promoted twice
    assert_consistent(workspace)


# ---------------------------------------------------------------- the daemon
def test_daemon_picks_up_a_new_line_through_the_watchdog(workspace):
    cfg = config(workspace)
    add(workspace, "I prefer aisle seats on flights")  # backlog: processed before `ready`
    d = Daemon(cfg)
    thread = threading.Thread(target=d.run, kwargs={"install_signals": False}, daemon=True)
    thread.start()
    try:
        assert d.ready.wait(10)
        assert len([r for r in episodic(workspace) if r.get("kind") == "promoted"]) == 1
        new = add(workspace, "We decided to use Postgres for the database", agent="deployer", project="atlas")
        wait_for(lambda: any(r.get("kind") == "promoted" and r["entry_id"] == new["id"]
                             for r in episodic(workspace)), timeout=3.0, what="the watchdog-triggered batch")
    finally:
        d.stop()
        thread.join(10)
    assert not thread.is_alive()
    assert_consistent(workspace)


def test_sigterm_finishes_the_batch_saves_the_checkpoint_and_exits_zero(workspace):
    proc = DaemonProc(workspace)
    proc.wait_ready()
    first = add(workspace, "I prefer aisle seats on flights")
    wait_for(lambda: any(r.get("entry_id") == first["id"] for r in episodic(workspace)), what="first batch")
    for i in range(30):  # then stop it while it is (likely) busy with these
        add(workspace, f"My seat for flight {i} is {i}C", session=f"s{i // 10}")
    time.sleep(random.uniform(0.0, 0.3))
    proc.proc.send_signal(signal.SIGTERM)
    assert proc.proc.wait(timeout=20) == 0, "".join(proc.stderr)
    assert "checkpoint saved" in "".join(proc.stderr)
    cps = json.loads((workspace / "memory" / ".daemon" / "checkpoints.json").read_text())
    assert cps["files"] and all(v > 0 for v in cps["files"].values())
    assert not list((workspace / "memory" / ".daemon").glob("*.tmp"))
    run_cli("-w", str(workspace), "daemon", "--once")
    assert_consistent(workspace)


def test_daemon_once_json_prints_the_report(workspace):
    e = add(workspace, "I prefer aisle seats on flights")
    out = run_cli("-w", str(workspace), "daemon", "--once", "--json").stdout
    report = json.loads(out)
    assert report["promoted"] == [e["id"]] and report["new_facts"][0]["origin_agent"] == "travel"
    assert report["store_tokens"] == 0


def batch_lock_held(ws: Path, timeout: float) -> bool:
    """Poll until some process holds the daemon's batch lock (True) or ``timeout`` passes."""
    import fcntl

    path = ws / "memory" / ".daemon" / "lock"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            fd = os.open(path, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fd, fcntl.LOCK_UN)
            except BlockingIOError:
                return True
            finally:
                os.close(fd)
        time.sleep(0.0005)
    return False


AGENT = """
import random, sys, time
from memtier_plugin.store.episodic import Ledger
ws, agent, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(seed)
ledger = Ledger(ws + "/memory")
topics = ["hotel", "train", "dinner", "museum", "parking"]
for i in range(n):
    r, t = rng.random(), rng.choice(topics)
    role = "user"
    if r < 0.1:
        content, role = f"[system] heartbeat {i}", "system"
    elif r < 0.2:
        content = "ok"
    elif r < 0.45:
        content = f"The {t} budget is now ${rng.randint(1, 30) * 10} a night"
    elif r < 0.55:
        content = "I prefer aisle seats on flights"
    elif r < 0.7:
        content, role = f"We decided to use {rng.choice(['Postgres', 'MySQL', 'SQLite'])} for the {t} service", "assistant"
    elif r < 0.8:
        content = "Thanks, that sounds good to me"
    else:
        content = f"My {agent} ticket number for the {t} trip {i} is TK{seed}{i:03d}"
    project = "shared" if rng.random() < 0.6 else agent
    ledger.add(agent_id=agent, session_id=f"{agent}-s{i // 15}", project=project, content=content, role=role)
    time.sleep(rng.uniform(0, 0.12))
"""


def kill_loop(ws: Path, tmp_path: Path, agent_script: str, per_agent: int, kills: int = 20) -> int:
    """Four real agent processes run ``agent_script`` (ws, agent, n, seed) while a real daemon is
    started and SIGKILLed ``kills`` times at random moments; then one ``daemon --once``. Returns
    how many kills landed while the daemon held the batch lock."""
    script = tmp_path / "agent.py"
    script.write_text(agent_script)
    rng = random.Random(int(os.environ.get("MEMTIER_TEST_SEED", "0")) or None)
    agents = [subprocess.Popen([sys.executable, str(script), str(ws), f"agent{k}", str(per_agent),
                                str(rng.randrange(1 << 30))]) for k in range(4)]
    mid_batch = 0
    try:
        for k in range(kills):
            d = DaemonProc(ws)
            time.sleep(rng.uniform(0.05, 0.9))
            if k % 2:  # every other kill waits (briefly) for the daemon to be inside a batch
                mid_batch += batch_lock_held(ws, timeout=0.5)
            assert d.proc.poll() is None, f"daemon died on its own: {''.join(d.stderr)}"
            d.proc.kill()
            d.proc.wait(timeout=10)
        for a in agents:
            assert a.wait(timeout=60) == 0
    finally:
        for a in agents:
            if a.poll() is None:
                a.kill()
    run_cli("-w", str(ws), "daemon", "--once")
    return mid_batch


def test_sigkill_twenty_times_while_four_agents_append(workspace, tmp_path):
    """Done-when: 4 agents appending, the daemon SIGKILLed 20 times at random moments and
    restarted; a final --once leaves every eligible entry promoted exactly once, no duplicate fact."""
    mid_batch = kill_loop(workspace, tmp_path, AGENT, 110)
    stats = assert_consistent(workspace)
    assert mid_batch >= 2, "too few kills landed inside a batch to mean anything"
    assert stats["entries"] == 440 and stats["eligible"] > 250 and stats["facts"] > 50


# ---------------------------------------------------------------- issue 11, defect 16
# Six statements repeated at random behind "User said:", with note and agent numbers that vary.
# The first two are the issue's own ("I the client office ..." was rewritten "User thes client office").
STATEMENTS = ["I prefers window seats", "I the client office is at 27 Main Street",
              "my hotel budget is $200 a night", "I am allergic to peanuts",
              "we decided to use Postgres for the database", "my sister is named Alice"]
SAID = """
import random, sys, time
from memtier_plugin.store.episodic import Ledger
ws, agent, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
statements = {statements!r}
rng = random.Random(seed)
ledger = Ledger(ws + "/memory")
for i in range(n):
    text = f"User said: {{rng.choice(statements)}}. Note {{rng.randint(1, 99)}} for agent {{rng.randint(0, 3)}}."
    ledger.add(agent_id=agent, session_id=f"{{agent}}-s{{i // 10}}", project="trips", content=text)
    time.sleep(rng.uniform(0, {pause}))
"""
REWRITE_WORDS = {"user", "user's", "their", "them", "themselves", "is", "has", "will", "would", "doesn't"}


def garbled(content: str, source: str) -> list[str]:
    """Words of ``content`` that are neither the source's nor a sound first→third person rewrite."""
    from memtier_plugin.consolidation.patterns import VERBS, words

    src = set(words(source))
    def conjugated(w):  # "prefers" from "prefer", "flies" from "fly", "goes" from "go"
        bases = {w[:-1], w[:-2], w[:-3] + "y"} if w.endswith("s") else set()
        return any(b in src and b in VERBS for b in bases)
    return [w for w in words(content) if w not in src and w not in REWRITE_WORDS and not conjugated(w)]


def assert_said_facts(ws: Path) -> list[dict]:
    """Each statement is one fact, written once, keyed only by what it states, words intact."""
    facts = fact_records(ws)
    sources = {e["id"]: e["content"] for e in episodic(ws) if e.get("kind", "entry") == "entry"}
    contents = Counter(" ".join(f["content"].lower().split()) for f in facts)
    assert [c for c, n in contents.items() if n > 1] == [], "a statement was written twice"
    assert len(facts) == len(STATEMENTS), [f["content"] for f in facts]
    for f in facts:
        assert f["attribute"] not in ("said", "told", "mentioned"), f
        assert f["supersedes"] is None, f  # nothing here changes a value
        assert garbled(f["content"], sources[f["source_entry_ids"][0]]) == [], f["content"]
    by_statement = Counter(next(s for s in STATEMENTS if s in sources[f["source_entry_ids"][0]]) for f in facts)
    assert set(by_statement) == set(STATEMENTS) and set(by_statement.values()) == {1}
    return facts


def test_repeated_reported_statements_are_one_fact_each_and_a_real_change_still_revises(workspace):
    """Issue 11 defect 16, through the CLI: 150 "User said: ..." lines."""
    rng = random.Random(16)
    ledger = Ledger(workspace / "memory")
    for i in range(150):
        ledger.add(agent_id=f"agent{i % 4}", session_id=f"s{i // 10}", project="trips",
                   content=f"User said: {rng.choice(STATEMENTS)}. Note {rng.randint(1, 99)} for agent {rng.randint(0, 3)}.")
    report = json.loads(run_cli("-w", str(workspace), "daemon", "--once", "--json").stdout)
    facts = assert_said_facts(workspace)
    assert len(report["new_facts"]) == len(facts) and report["superseded"] == 0
    assert_consistent(workspace)
    (budget,) = [f for f in facts if f["attribute"] == "hotel_budget"]
    assert "User's hotel budget is $200 a night" in budget["content"]

    # a real change of the attribute supersedes the current value; saying it again writes nothing
    for _ in range(2):
        add(workspace, "User said: my hotel budget is $300 a night. Note 3 for agent 1.", agent="agent1")
    report = json.loads(run_cli("-w", str(workspace), "daemon", "--once", "--json").stdout)
    (rev,) = report["new_facts"]
    assert rev["supersedes"] == budget["id"] and rev["value"] == "$300 a night" and report["superseded"] == 1
    current = list(SemanticStore(workspace / "memory").current("trips"))
    assert len(current) == len(STATEMENTS) and budget["id"] not in {f["id"] for f in current}


def test_sigkill_twenty_times_on_reported_statements_writes_each_fact_once(workspace, tmp_path):
    """Issue 11 defect 16 under kills: 4 agents append the 150 lines, the daemon is SIGKILLed 20
    times; every batch a kill cut short is finished from its journal, so each statement is one fact. The agents
    append for about as long as the kills go on (38 lines, 0.4 s apart on average: about 15 s), so that kills keep
    landing inside batches: at 0.05 s apart they were done in 2 s, and a machine that promoted the lines quickly
    left one kill of 20 inside a batch (CI, 2026-12-07)."""
    mid_batch = kill_loop(workspace, tmp_path, SAID.format(statements=STATEMENTS, pause=0.8), 38)
    assert_said_facts(workspace)
    stats = assert_consistent(workspace)
    assert stats["entries"] == 152 and mid_batch >= 2


def test_reads_of_a_ledger_do_not_wake_the_daemon():
    from watchdog.events import (DirCreatedEvent, FileClosedEvent, FileClosedNoWriteEvent, FileCreatedEvent,
                                 FileModifiedEvent, FileOpenedEvent)

    from memtier_plugin.consolidation.daemon import is_change

    ledger = "/ws/memory/episodic/a/2026-10-05.jsonl"
    assert not is_change(FileOpenedEvent(ledger))
    assert not is_change(FileClosedNoWriteEvent(ledger))  # a recall or a batch reading the file
    assert is_change(FileModifiedEvent(ledger)) and is_change(FileClosedEvent(ledger))
    assert is_change(FileCreatedEvent(ledger)) and is_change(DirCreatedEvent("/ws/memory/episodic/b"))
    assert not is_change(FileModifiedEvent("/ws/memory/episodic/a/notes.txt"))
