"""The index's fast paths keep behaviour: bulk builds equal incremental ones, and the cheap
per-recall change detection (LedgerWatch) still sees what other processes append."""

import numpy as np

from memtier_plugin.store import jsonl
from memtier_plugin.config import load_config
from memtier_plugin.recall.index import DocIndex
from memtier_plugin.recall.index_files import open_index
from memtier_plugin.recall.watch import LedgerWatch
from memtier_plugin.store.episodic import Ledger, append_lines, utc_iso
from memtier_plugin.recall.retriever import Retriever

DAY = 86400.0
NOW = 1_780_000_000.0


def _fill(root, n_days=40, per_day=3):
    ledger = Ledger(root, fsync=False)
    for d in range(n_days):
        for j in range(per_day):
            ledger.add(agent_id="a" if j % 2 else "b", session_id=f"s{d}", project="p",
                       content=f"day {d} note {j} about topic{d % 7} and item{j} on 2026-01-0{1 + j}",
                       timestamp=NOW - (n_days - d) * DAY + j)
    rec = {"kind": "cw_update", "entry_id": Ledger(root).read().entries and next(iter(Ledger(root).read().entries)),
           "delta": 0.5, "timestamp": utc_iso(NOW)}
    append_lines(root / "episodic" / "a" / "0000-update-first.jsonl", jsonl.dumps(rec), fsync=False)


def test_bulk_build_equals_incremental(tmp_path):
    root = tmp_path / "memory"
    _fill(root)
    bulk, _ = open_index(root, "episodic", "episodic", k1=1.5, b=0.75, idf="lucene")
    inc = DocIndex("episodic")
    for path in sorted((root / "episodic").rglob("*.jsonl")):
        inc.tail_file(path)
    assert bulk.ids == inc.ids and bulk.n == inc.n
    for name in ("ts", "cw", "session", "agent", "offset", "fileno"):
        assert np.array_equal(bulk.col(name), inc.col(name))
    assert bulk.col("cw").max() == 0.5  # the update filed before its entry was applied
    for q in (["topic3"], ["note", "item1", "topic2"], ["d20260102"]):
        a, b = bulk.bm25.score(q), inc.bm25.score(q)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_watch_sees_new_dirs_hot_files_and_old_files(tmp_path):
    root = tmp_path / "memory"
    _fill(root)
    idx, _ = open_index(root, "episodic", "episodic", k1=1.5, b=0.75, idf="lucene")
    watch = LedgerWatch(root / "episodic")
    assert watch.poll(idx, full=True) == 0
    other = Ledger(root, fsync=False)
    other.add(agent_id="a", session_id="s", project="p", content="newest zebra", timestamp=NOW)  # new file
    assert watch.poll(idx) == 1
    other.add(agent_id="a", session_id="s", project="p", content="newest again", timestamp=NOW)  # hot file
    assert watch.poll(idx) == 1
    other.add(agent_id="c", session_id="s", project="p", content="a new agent", timestamp=NOW)  # new dir
    assert watch.poll(idx) == 1
    other.add(agent_id="b", session_id="s", project="p", content="backdated okapi", timestamp=NOW - 30 * DAY)
    watch.SWEEP = 4  # an append to an old day's file: found by the round-robin sweep
    files = sum(len(f) for f in watch.files.values())
    assert sum(watch.poll(idx) for _ in range(files // 4 + 1)) == 1
    assert idx.bm25.score(["okapi"])[0].size == 1
    assert watch.poll(idx) == 0


def test_retriever_refresh_reads_other_process_appends(workspace):
    root = workspace / "memory"
    _fill(root)
    r = Retriever(load_config())
    Ledger(root).add(agent_id="a", session_id="s-live", project="p", content="quokka sighting", timestamp=NOW)
    res = r.recall("quokka", agent_id="a", project="p", agents=["a"], now=NOW, record_trace=False)
    assert res.hits and res.hits[0].content == "quokka sighting"
    append_lines(root / "semantic" / "p.jsonl", jsonl.dumps(
        {"kind": "fact", "id": "sf-q", "timestamp": utc_iso(NOW), "project": "p", "origin_agent": "a",
         "content": "User saw a quokka", "session_ids": ["s-live"], "source_entry_ids": []}))
    res = r.recall("quokka", agent_id="a", project="p", agents=["a"], now=NOW, record_trace=False)
    assert res.mode == "two-stage" and "sf-q" in [h.id for h in res.hits]


def test_session_docs_and_reload_after_append(workspace):
    root = workspace / "memory"
    _fill(root)
    Retriever(load_config())  # builds and saves
    r = Retriever(load_config())  # loads (postings memory-mapped)
    inc = DocIndex("episodic")
    for path in sorted((root / "episodic").rglob("*.jsonl")):
        inc.tail_file(path)
    for s in range(len(inc.sessions.names)):
        assert r.episodic.session_docs.get(s) == inc.session_docs.get(s)
    rec, path, offset = r.ledger.write_entry(agent_id="a", session_id="s3", project="p", content="wombat", timestamp=NOW)
    r.notify_append(rec, path, offset)
    code = r.episodic.sessions.code["s3"]
    assert r.episodic.session_docs.get(code)[-1] == r.episodic.n - 1
    r.save()
    again = Retriever(load_config())
    assert again.episodic.session_docs.get(code) == r.episodic.session_docs.get(code)
    assert again.recall("wombat", agent_id="a", project="p", agents=["a"], now=NOW, record_trace=False).hits[0].id == rec["id"]
