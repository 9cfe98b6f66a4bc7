"""The semantic tier store: append, fold supersession on read, history, incremental reads."""

from __future__ import annotations

import orjson

from memtier_plugin.consolidation.facts import Fact
from memtier_plugin.store.semantic import SemanticStore, fact_id, fact_record, project_filename


def _entry(eid, ts="2026-11-29T10:00:00.000Z", session="s1"):
    return {"id": eid, "timestamp": ts, "session_id": session}


def _fact(value, attribute="hotel_budget", content=None, eff="2026-11-29"):
    return Fact("constraint", "user", attribute, value, content or f"hotel budget {value}", 0.8, eff)


def _rec(store_fact, eid, i=0, supersedes=None, project="trips", agent="travel", ts="2026-11-29T10:00:00.000Z"):
    return fact_record(store_fact, fid=fact_id(eid, i), project=project, origin_agent=agent,
                       entry=_entry(eid, ts), supersedes=supersedes, extractor="heuristic",
                       recorded_at="2026-11-29T10:00:01.000Z")


def test_fact_ids_are_deterministic_and_distinct():
    assert fact_id("ep-1", 0) == fact_id("ep-1", 0)
    assert len({fact_id("ep-1", 0), fact_id("ep-1", 1), fact_id("ep-2", 0)}) == 3
    assert fact_id("ep-1", 0).startswith("sf-") and len(fact_id("ep-1", 0)) == 19


def test_project_filenames_are_safe_and_distinct():
    assert project_filename("trips") == "trips.jsonl"
    assert project_filename("") == "_none.jsonl"
    odd = {project_filename(p) for p in ("a/b", "a b", "../x", "a:b")}
    assert len(odd) == 4 and all("/" not in n and not n.startswith(".") for n in odd)


def test_append_fold_supersession_and_history(tmp_path):
    store = SemanticStore(tmp_path)
    old = _rec(_fact("under $200 a night"), "ep-1")
    new = _rec(_fact("$300 a night"), "ep-2", supersedes=old["id"])
    other = _rec(_fact("aisle", attribute="seat", content="User prefers aisle seats"), "ep-3")
    store.append("trips", [old, other])
    store.append("trips", [new])
    assert (tmp_path / "semantic" / "trips.jsonl").is_file()

    fresh = SemanticStore(tmp_path)  # a second reader folds the same state from disk
    for s in (store, fresh):
        current = {r["id"] for r in s.current("trips")}
        assert current == {new["id"], other["id"]}
        assert [r["id"] for r in s.history(old["id"])] == [old["id"], new["id"]]
        assert [r["id"] for r in s.history(new["id"])] == [old["id"], new["id"]]
        assert s.project("trips").by_source["ep-2"] == [new["id"]]
        assert [[r["id"] for r in c] for c in s.chains("trips")] == [[other["id"]], [old["id"], new["id"]]]


def test_superseded_marker_record_is_folded(tmp_path):
    store = SemanticStore(tmp_path)
    newer = _rec(_fact("$300 a night"), "ep-2", ts="2026-11-29T12:00:00.000Z")
    late = _rec(_fact("$200 a night"), "ep-1", ts="2026-11-29T09:00:00.000Z")
    store.append("trips", [newer])
    store.append("trips", [late, {"kind": "superseded", "fact_id": late["id"], "by": newer["id"], "project": "trips"}])
    assert [r["id"] for r in SemanticStore(tmp_path).current("trips")] == [newer["id"]]


def test_folding_is_idempotent_and_incremental(tmp_path):
    store = SemanticStore(tmp_path)
    a = _rec(_fact("$1"), "ep-1")
    store.append("trips", [a])
    reader = SemanticStore(tmp_path)
    assert len(reader.project("trips").records) == 1
    # another process appends the same record again (as a crashed run could): still one fact
    SemanticStore(tmp_path).append("trips", [a, _rec(_fact("x", attribute="seat", content="seat x"), "ep-9")])
    assert len(reader.project("trips").records) == 2


def test_projects_are_separate_and_corrupt_lines_skipped(tmp_path):
    store = SemanticStore(tmp_path)
    store.append("trips", [_rec(_fact("$1"), "ep-1")])
    store.append("atlas", [_rec(_fact("$1"), "ep-2", project="atlas")])
    path = tmp_path / "semantic" / "trips.jsonl"
    with open(path, "ab") as fh:
        fh.write(b"{not json\n")
        fh.write(orjson.dumps(_rec(_fact("$2", attribute="seat", content="seat two"), "ep-3")) + b"\n")
        fh.write(b'{"v":1,"kind":"fact","id":"sf-torn"')  # torn tail: left for later, not an error
    fresh = SemanticStore(tmp_path)
    assert fresh.projects() == ["atlas", "trips"]
    assert len(list(fresh.current("trips"))) == 2
    assert len(list(fresh.current("atlas"))) == 1
    assert fresh.get("sf-torn") is None


def test_the_tier_and_the_index_fold_supersession_by_one_rule(tmp_path):
    """A revision (supersedes) and a late marker (superseded) retire the same facts in the tier's fold and in
    the search index: one rule, store.semantic.retirement."""
    from memtier_plugin.recall.index import DocIndex
    from memtier_plugin.store.semantic import ProjectFacts, retirement

    def fact(fid, content, supersedes=None):
        return {"v": 1, "kind": "fact", "id": fid, "timestamp": "2026-11-01T00:00:00.000Z", "project": "p",
                "origin_agent": "a", "fact_kind": "preference", "subject": "user", "attribute": "seat",
                "value": content, "content": f"User prefers {content}", "source_entry_ids": [], "session_ids": ["s"],
                "effective_time": None, "supersedes": supersedes}

    recs = [fact("sf-1", "aisle"), fact("sf-2", "window", supersedes="sf-1"), fact("sf-3", "middle"),
            {"v": 1, "kind": "superseded", "fact_id": "sf-3", "by": "sf-2"}]
    assert [retirement(r) for r in recs] == [None, ("sf-1", "sf-2"), None, ("sf-3", "sf-2")]
    pf, idx = ProjectFacts("p"), DocIndex("semantic")
    for off, r in enumerate(recs):
        pf.add(r)
        idx.ingest(r, 0, off)
    current_tier = sorted(r["id"] for r in pf.current())
    current_index = sorted(fid for fid, doc in idx.pos.items() if not idx.cols["superseded"][doc])
    assert current_tier == current_index == ["sf-2"]
