"""Stage 1 on its own: the best visible facts name the sessions, in order, up to the cap; hard scope adds the current session."""

from __future__ import annotations

import numpy as np

from memtier_plugin.store import jsonl
from memtier_plugin.config import load_config
from memtier_plugin.store.episodic import Ledger, append_lines, utc_iso
from memtier_plugin.recall.retriever import Retriever
from memtier_plugin.recall.scoping import session_scope, stage1
from memtier_plugin.tokenize import tokenize

NOW = 1_780_000_000.0


def _fact(root, project, text, sessions, fid):
    rec = {"kind": "fact", "id": fid, "timestamp": utc_iso(NOW), "project": project, "origin_agent": "a",
           "content": text, "session_ids": sessions, "source_entry_ids": [], "supersedes": None}
    append_lines(root / "semantic" / f"{project}.jsonl", jsonl.dumps(rec))


def test_stage1_orders_caps_and_respects_visibility(workspace):
    root = workspace / "memory"
    ledger = Ledger(root)
    for s in ("s1", "s2", "s3", "s4", "cur"):
        ledger.add(agent_id="a", session_id=s, project="p", content=f"note in {s}", role="user", timestamp=NOW)
    _fact(root, "p", "User flies aisle seat", ["s2"], "sf-1")  # one match: weaker
    _fact(root, "p", "User flies aisle seat aisle seat always", ["s3", "s1"], "sf-2")  # best match
    _fact(root, "p", "User flies aisle", ["s4", "never-written"], "sf-3")  # weakest; one session has no entry
    _fact(root, "other", "User flies aisle seat aisle seat aisle seat", ["s4"], "sf-4")  # not visible
    r = Retriever(load_config())
    sem, ep = r.semantic, r.episodic
    project = sem.projects.code["p"]

    def visible(docs):
        return sem.col("project")[docs] == project

    found = stage1(sem, ep, tokenize("aisle seat flights"), visible, max_sessions=10)
    names = [ep.sessions.names[c] for c in found.sessions]
    assert names == ["s3", "s1", "s2", "s4"]  # best fact first, its sessions in provenance order
    assert [sem.ids[d] for d in found.fact_docs] == ["sf-2", "sf-1", "sf-3"]
    assert np.all(np.diff(found.fact_raw) <= 0) and np.all(found.fact_raw > 0)
    capped = stage1(sem, ep, tokenize("aisle seat flights"), visible, max_sessions=2)
    assert [ep.sessions.names[c] for c in capped.sessions] == ["s3", "s1"]
    assert stage1(sem, ep, tokenize("zeppelin"), visible, 5).sessions == []
    assert stage1(sem, ep, [], visible, 5).sessions == []

    scope = session_scope(ep, capped.sessions, "cur")
    assert sorted({ep.sessions.names[int(ep.col("session")[d])] for d in scope}) == ["cur", "s1", "s3"]
    assert np.all(np.diff(scope) > 0)
