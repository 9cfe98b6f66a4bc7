"""Issue 11, defect 10: one bad record must cost that record, not every consolidation batch.

Through the real CLI (``python -m memtier_plugin daemon --once``) in a subprocess: the bad
entry is reported once as file:line and left out, the good ones around it are promoted, and
the report counts exactly what reached the semantic ledger.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import orjson
import pytest

from conftest import run_cli
from memtier_plugin.store.episodic import Ledger, iter_records

GOOD = ["I prefer aisle seats on flights", "We decided to use Postgres for the database",
        "My frequent flyer number is DL123456", "The hotel budget is now $300 a night"]

# (field, bad value): each a valid JSON line that the old code choked on or would write from
BAD = [
    ("project", ["a", "b"]),
    ("session_id", ["s1", "s2"]),
    ("timestamp", 12345),
    ("timestamp", "not-a-date"),
    ("tokens", "lots"),
    ("agent_id", "../../escape"),
    ("content", {"text": "I prefer window seats"}),
]


def write_ledger(ws: Path, field: str, value) -> tuple[Path, list[str], str]:
    """Two good entries, the bad one (line 3), two good ones, all in one agent file."""
    ledger = Ledger(ws / "memory")
    recs = [ledger.make_entry(agent_id="travel", session_id="s1", project="trips", content=c) for c in GOOD]
    bad = ledger.make_entry(agent_id="travel", session_id="s1", project="trips", content="I prefer window seats")
    bad[field] = value
    recs.insert(2, bad)
    path, _ = ledger.append("travel", recs)
    return path, [r["id"] for r in recs if r is not bad], bad["id"]


def semantic_facts(ws: Path) -> list[dict]:
    out = []
    for path in sorted((ws / "memory" / "semantic").glob("*.jsonl")):
        out += [r for r, _, problem in iter_records(path) if not problem and r.get("kind") == "fact"]
    return out


def promoted_ids(ws: Path) -> list[str]:
    out = []
    for path in sorted((ws / "memory" / "episodic").rglob("*.jsonl")):
        out += [r["entry_id"] for r, _, problem in iter_records(path) if not problem and r.get("kind") == "promoted"]
    return out


def daemon_once(ws: Path, *extra: str):
    return run_cli("-w", str(ws), "daemon", "--once", *extra, check=False)


@pytest.mark.parametrize("field,value", BAD, ids=[f"{f}={v!r}" for f, v in BAD])
def test_a_bad_entry_is_quarantined_once_and_the_good_ones_around_it_are_promoted(workspace, field, value):
    path, good_ids, bad_id = write_ledger(workspace, field, value)
    proc = daemon_once(workspace, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)

    assert sorted(report["promoted"]) == sorted(good_ids) == sorted(promoted_ids(workspace))
    (q,) = report["quarantined"]
    assert (q["file"], q["line"], q["entry_id"]) == (str(path), 3, bad_id)
    assert repr(field) in q["reason"]
    warned = [line for line in proc.stderr.splitlines() if f"{path}:3" in line]
    assert len(warned) == 1 and field in warned[0], proc.stderr
    assert "Traceback" not in proc.stderr and report["errors"] == [] and report["failed"] == 0

    written = semantic_facts(workspace)
    assert written and sorted(f["id"] for f in report["new_facts"]) == sorted(f["id"] for f in written)
    assert all(f["source_entry_ids"] != [bad_id] for f in written)

    again = daemon_once(workspace, "--json")  # reported once: the checkpoint is past it
    assert again.returncode == 0 and f"{path}:3" not in again.stderr
    assert json.loads(again.stdout)["quarantined"] == [] and json.loads(again.stdout)["new_facts"] == []
    assert len(semantic_facts(workspace)) == len(written)


def test_the_human_summary_says_what_was_written_and_what_was_quarantined(workspace):
    write_ledger(workspace, "project", ["a", "b"])
    proc = daemon_once(workspace)
    assert proc.returncode == 0, proc.stderr
    n = len(semantic_facts(workspace))
    assert proc.stdout.splitlines()[0] == (f"memtier daemon: 4 entries promoted, {n} new facts, "
                                           "1 quarantined (bad entries, left out; see the warnings)")


def test_a_failed_batch_reports_nothing_it_did_not_write_and_exits_1(workspace):
    write_ledger(workspace, "tokens", 7)  # all valid
    (workspace / "memory" / "semantic").write_text("not a folder")  # the fact append cannot succeed
    proc = daemon_once(workspace, "--json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["new_facts"] == [] and report["promoted"] == [] and report["failed"] == 1
    assert "failed batch" in proc.stderr.splitlines()[-1]
    (workspace / "memory" / "semantic").unlink()
    proc = daemon_once(workspace, "--json")  # redone, nothing lost
    assert proc.returncode == 0 and len(json.loads(proc.stdout)["promoted"]) == 5


def test_a_bad_fact_record_in_the_semantic_ledger_is_skipped_not_fatal(workspace):
    ledger = Ledger(workspace / "memory")
    ledger.add(agent_id="travel", session_id="s1", project="trips", content="The hotel budget is now $300 a night")
    assert daemon_once(workspace).returncode == 0
    store = workspace / "memory" / "semantic" / "trips.jsonl"
    (fact,) = [r for r, _, _ in iter_records(store)]
    bad = {**fact, "id": "sf-handedited", "value": ["$250"], "source_entry_ids": ["ep-x"]}
    with open(store, "ab") as fh:  # a hand edit: same key, a list for its value
        fh.write(orjson.dumps(bad) + b"\n")
    new = ledger.add(agent_id="travel", session_id="s2", project="trips",
                     content="The hotel budget is now $350 a night")
    proc = daemon_once(workspace, "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["promoted"] == [new["id"]] and report["superseded"] == 1
    (rev,) = report["new_facts"]
    assert rev["supersedes"] == fact["id"] and rev["value"] == "$350 a night"
    assert f"{store}:2" in proc.stderr and "'value' must be a string" in proc.stderr


def test_the_fuzzed_ledger_never_stops_consolidation(workspace):
    """Bad values of every kind among good entries: every good one promoted, every bad one quarantined."""
    import random

    rng = random.Random(11)
    ledger = Ledger(workspace / "memory")
    junk = [["x"], {"a": 1}, 12345, 1.5, True, None, "", "not-a-date", "../x", "\u202e"]
    good, recs = [], []
    for i in range(120):
        rec = ledger.make_entry(agent_id="travel", session_id=f"s{i % 7}", project="trips",
                                content=f"My locker number for the gym {i} is L{i:04d}")
        if rng.random() < 0.3:
            key = rng.choice(["id", "timestamp", "agent_id", "session_id", "project", "content", "tokens", "role"])
            rec[key] = rng.choice([j for j in junk if key != "id" or not isinstance(j, str)])  # ids stay unique
        recs.append(rec)
    path, _ = ledger.append("travel", recs)
    from memtier_plugin.consolidation.batch import entry_problem

    good = [rec["id"] for rec in recs if entry_problem(rec) is None]
    bad = len(recs) - len(good)
    proc = daemon_once(workspace, "--json")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    report = json.loads(proc.stdout)
    assert bad > 10 and len(report["quarantined"]) == bad
    assert sorted(report["promoted"]) == sorted(good) == sorted(promoted_ids(workspace))
    assert len(report["new_facts"]) == len(semantic_facts(workspace)) > 0


def test_the_running_daemon_reports_a_bad_entry_and_keeps_consolidating(workspace):
    """The foreground daemon (a real process): a bad entry arriving while it watches is
    reported once and the good entries after it are promoted, batch after batch."""
    import queue
    import subprocess
    import threading
    import time

    proc = subprocess.Popen([sys.executable, "-m", "memtier_plugin", "-w", str(workspace), "daemon", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    try:
        ledger = Ledger(workspace / "memory")
        ledger.add(agent_id="travel", session_id="s0", project="trips", content="I prefer aisle seats on flights")
        reports = [json.loads(lines.get(timeout=20))]  # the backlog batch, or the first watched one
        path, good_ids, bad_id = write_ledger(workspace, "project", ["a", "b"])
        later = ledger.add(agent_id="travel", session_id="s2", project="trips", content="My seat for flight 7 is 7C")
        deadline = time.monotonic() + 20
        while later["id"] not in {e for r in reports for e in r["promoted"]} and time.monotonic() < deadline:
            try:
                reports.append(json.loads(lines.get(timeout=1)))
            except queue.Empty:
                pass
        promoted = {e for r in reports for e in r["promoted"]}
        assert set(good_ids) | {later["id"]} <= promoted and bad_id not in promoted
        (q,) = [q for r in reports for q in r["quarantined"]]
        assert q["entry_id"] == bad_id and q["file"] == str(path)
        assert orjson.loads(path.read_bytes().split(b"\n")[q["line"] - 1])["id"] == bad_id  # the line named
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0
    assert proc.stderr.read().count(f"{path}:{q['line']}:") == 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
