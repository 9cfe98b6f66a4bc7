import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, run_cli
from memtier_plugin.store.episodic import Ledger, append_lines, utc_iso

WRITER = r"""
import sys
from memtier_plugin.store.episodic import Ledger
root, agent, n, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
ledger = Ledger(root)
for i in range(n):
    rec = ledger.add(agent_id=agent, session_id="s-" + tag, project="p", content=f"{tag} entry {i} " + "x" * (i % 50))
    print(rec["id"], flush=True)
"""


def test_record_has_memtier_fields(tmp_path):
    ledger = Ledger(tmp_path / "memory", clock=lambda: 1_764_000_000.0)
    rec = ledger.add(agent_id="a1", session_id="s1", project="p", content="hello world",
                     provenance={"run_id": "r1", "turn": 2})
    path = tmp_path / "memory" / "episodic" / "a1" / f"{utc_iso(1_764_000_000.0)[:10]}.jsonl"
    line = json.loads(path.read_text().splitlines()[0])
    for key in ("v", "id", "timestamp", "session_id", "project", "content", "tokens", "promoted",
                "cognitive_weight", "agent_id", "provenance"):
        assert key in line, key
    assert line == rec and line["cognitive_weight"] == 0.0 and line["promoted"] is False
    assert line["provenance"] == {"run_id": "r1", "turn": 2}


def test_updates_are_appended_and_folded(tmp_path):
    ledger = Ledger(tmp_path)
    rec = ledger.add(agent_id="a", session_id="s", project="p", content="entry")
    path = next((tmp_path / "episodic" / "a").glob("*.jsonl"))
    first_line = path.read_bytes().splitlines()[0]
    for delta in (0.7, 0.7, -0.2):
        ledger.add_update("a", {"kind": "cw_update", "entry_id": rec["id"], "delta": delta})
    ledger.add_update("a", {"kind": "promoted", "entry_id": rec["id"], "fact_ids": ["sf-1"]})
    assert path.read_bytes().splitlines()[0] == first_line  # never rewritten
    entry = ledger.read().entries[rec["id"]]
    assert entry.cognitive_weight == pytest.approx(0.8)  # 0.7 + 0.7 clipped to 1.0, then -0.2
    assert entry.promoted and entry.fact_ids == ["sf-1"] and len(entry.history) == 4


def test_bad_agent_id_is_refused(tmp_path):
    from memtier_plugin.errors import LedgerError

    with pytest.raises(LedgerError, match="agent id"):
        Ledger(tmp_path).add(agent_id="../etc", session_id="s", project="p", content="x")


def test_torn_and_corrupt_lines_are_reported_and_skipped(tmp_path, workspace):
    src = FIXTURES / "malformed" / "torn-and-corrupt.jsonl"
    dest = workspace / "memory" / "episodic" / "fixture" / "2026-10-05.jsonl"
    dest.parent.mkdir(parents=True)
    dest.write_bytes(src.read_bytes())
    good = []
    for raw in src.read_bytes().splitlines():
        try:
            obj = json.loads(raw)
            if isinstance(obj, dict) and {"id", "content", "session_id", "timestamp", "agent_id"} <= set(obj):
                good.append(obj["id"])
        except ValueError:
            pass
    proc = run_cli("inspect", "--json")
    shown = [json.loads(line)["id"] for line in proc.stdout.splitlines()]
    assert sorted(shown) == sorted(good)
    warnings = [line for line in proc.stderr.splitlines() if "skipped" in line]
    assert len(warnings) == 4  # three corrupt lines and the torn last one
    assert all(str(dest) + ":" in w for w in warnings)
    assert any("torn" in w for w in warnings)
    # the next append starts on a clean line and everything stays readable
    Ledger(workspace / "memory").append("fixture", [{"kind": "entry", "id": "ep-new", "timestamp": "2026-10-05T10:00:00Z",
                                                     "agent_id": "fixture", "session_id": "s", "content": "after"}],
                                        timestamp=1759658400.0)
    result = Ledger(workspace / "memory").read()
    assert "ep-new" in result.entries and len(result.entries) == len(good) + 1
    assert len(result.problems) == 4  # the torn line is now a whole bad line, still reported once


def test_concurrent_appends_never_interleave(tmp_path):
    root = tmp_path / "memory"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(root), "shared", "500", f"w{i}"],
                              stdout=subprocess.PIPE, text=True) for i in range(8)]
    acked = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0
        acked.extend(out.split())
    lines = b"".join(f.read_bytes() for f in (root / "episodic" / "shared").glob("*.jsonl")).splitlines()
    assert len(lines) == 4000
    records = [json.loads(line) for line in lines]  # every line is whole JSON
    assert sorted(r["id"] for r in records) == sorted(acked)
    for tag in range(8):  # each writer's lines stay in its own order
        mine = [int(r["content"].split()[2]) for r in records if r["session_id"] == f"s-w{tag}"]
        assert mine == list(range(500))


def test_sigkill_loses_nothing_acknowledged(tmp_path):
    root = tmp_path / "memory"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root), "victim", "100000", "k"],
                            stdout=subprocess.PIPE, text=True)
    acked = []
    deadline = time.time() + 60
    while len(acked) < 300 and time.time() < deadline:
        acked.append(proc.stdout.readline().strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    acked = [a for a in acked if a]
    result = Ledger(root).read()
    assert set(acked) <= set(result.entries)
    assert len(result.problems) <= 1  # at most one torn last line
    Ledger(root).add(agent_id="victim", session_id="s", project="p", content="after crash")
    assert any(e.content == "after crash" for e in Ledger(root).read().entries.values())


def test_append_lines_after_torn_tail(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"a":1}\n{"b":')
    start = append_lines(path, b'{"c":3}\n')
    assert path.read_bytes() == b'{"a":1}\n{"b":\x1e\n{"c":3}\n'
    assert path.read_bytes()[start:] == b'{"c":3}\n'


def test_a_line_torn_just_before_its_newline_is_not_completed_into_a_record(tmp_path):
    """A write killed after the last JSON byte: the next append must not turn it into a whole record."""
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"a":1}\n{"b":2}')
    append_lines(path, b'{"c":3}\n')
    records = []
    for raw in path.read_bytes().splitlines():
        try:
            records.append(json.loads(raw))
        except ValueError:
            records.append(None)
    assert records == [{"a": 1}, None, {"c": 3}]


def test_add_stdin_and_inspect_filters(workspace):
    stdin = '{"content": "book the aisle seat", "session_id": "s9"}\nplain text line\n'
    ids = run_cli("add", "--agent", "a", "--project", "trips", "--stdin", input=stdin).stdout.split()
    assert len(ids) == 2
    run_cli("add", "other project", "--agent", "a", "--project", "work")
    rows = [json.loads(x) for x in run_cli("inspect", "--project", "trips", "--json").stdout.splitlines()]
    assert [r["id"] for r in rows] == ids
    assert {r["session_id"] for r in rows} == {"s9", "manual"}
    table = run_cli("inspect", "--session", "s9").stdout
    assert "book the aisle seat" in table and "plain text" not in table
    bad = run_cli("add", "--stdin", input='{"nocontent": 1}\n', check=False)
    assert bad.returncode == 2 and "stdin:1" in bad.stderr and "content" in bad.stderr


def test_secrets_never_reach_the_ledger(tmp_path):
    ledger = Ledger(tmp_path)
    secret = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
    ledger.add(agent_id="a", session_id="s", project="p", content=f"my key is {secret}",
               provenance={"params": {"password": "hunter2-very-secret"}})
    text = b"".join(p.read_bytes() for p in tmp_path.rglob("*.jsonl")).decode()
    assert secret not in text and "hunter2-very-secret" not in text and "[REDACTED:" in text


def test_tail_records_gives_offsets_and_skips_bad_lines(tmp_path):
    from memtier_plugin.store.episodic import tail_records

    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"a":1}\n\nnot json\n{"b":2}\n{"c":')
    rows = list(tail_records(path))
    assert [(s, e) for s, e, _ in rows] == [(0, 8), (8, 9), (9, 18), (18, 26)]
    assert [r for _, _, r in rows] == [{"a": 1}, None, None, {"b": 2}]  # the unfinished line waits
    assert [r for _, _, r in tail_records(path, 18)] == [{"b": 2}]


def test_the_tail_reader_reads_what_a_file_gains_and_notices_a_replaced_or_shrunk_file(tmp_path):
    from memtier_plugin.store.files import TailReader, append_lines

    path = tmp_path / "x.jsonl"
    tail = TailReader(path)
    assert list(tail.read()) == [] and not tail.restarted
    append_lines(path, b'{"n":1}\n{"n":2}\n', fsync=False)
    assert [r["n"] for _, _, r in tail.read()] == [1, 2] and tail.lines == 2 and not tail.restarted
    with open(path, "ab") as fh:
        fh.write(b'{"n":3}\n{"n":')  # an unfinished last line waits
    assert [r["n"] for _, _, r in tail.read()] == [3] and not tail.restarted
    path.write_bytes(b'{"n":9}\n')  # shrank (rewritten in place)
    assert [r["n"] for _, _, r in tail.read()] == [9] and tail.restarted and tail.lines == 1
    other = tmp_path / "y.jsonl"
    other.write_bytes(b'{"n":7}\n{"n":8}\n{"n":10}\n')
    other.replace(path)  # replaced (another inode), longer than what was read
    assert [r["n"] for _, _, r in tail.read()] == [7, 8, 10] and tail.restarted
    path.unlink()
    assert list(tail.read()) == [] and tail.restarted and tail.offset == 0
