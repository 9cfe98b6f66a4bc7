"""The tombstone file: ids only, validated, read incrementally by long-running readers."""

import os

import pytest

from memtier_plugin.store import tombstones


def test_forget_record_holds_ids_not_text(tmp_path):
    rec = tombstones.forget_record("ep-1", "episode", ts=1_700_000_000, reason="user")
    assert set(rec) == {"v", "kind", "id", "target", "layer", "at", "reason", "because_of"}
    assert rec["id"].startswith("fg-") and rec["target"] == "ep-1"


@pytest.mark.parametrize("bad", [
    {"kind": "forget", "target": "", "layer": "episode", "at": "2026-01-01T00:00:00Z"},
    {"kind": "forget", "target": "a\nb", "layer": "episode", "at": "2026-01-01T00:00:00Z"},
    {"kind": "forget", "target": "ep-1", "layer": "planet", "at": "2026-01-01T00:00:00Z"},
    {"kind": "forget", "target": "ep-1", "layer": "fact", "at": "yesterday"},
    {"kind": "forget", "target": "ep-1", "layer": "fact", "at": "2026-01-01T00:00:00Z", "because_of": 5},
    {"kind": "erase", "target": "ep-1", "at": "2026-01-01T00:00:00Z"},
])
def test_problem_names_what_is_wrong(bad):
    assert tombstones.problem(bad)
    with pytest.raises(ValueError):
        tombstones.append("/nonexistent-never-written", [bad])


def test_a_reader_sees_what_another_writer_appends(tmp_path):
    seen = tombstones.Forgotten(tmp_path)
    assert "ep-1" not in seen and seen.ids() == frozenset()
    tombstones.append(tmp_path, [tombstones.forget_record("ep-1", "episode")])
    assert "ep-1" in seen
    tombstones.append(tmp_path, [tombstones.forget_record("f-2", "fact", because_of="ep-1")])
    assert seen.ids() == {"ep-1", "f-2"}
    assert seen.record("f-2")["because_of"] == "ep-1"
    assert seen.pending_purge() == ["ep-1", "f-2"]
    tombstones.append(tmp_path, [tombstones.purged_record("ep-1")])
    assert seen.purged() == {"ep-1"} and seen.pending_purge() == ["f-2"]


def test_bad_line_is_skipped_and_reported_rest_is_read(tmp_path):
    tombstones.append(tmp_path, [tombstones.forget_record("ep-1", "episode")])
    with open(tombstones.path(tmp_path), "ab") as fh:
        fh.write(b'{"kind": "forget", "target": 7}\nnot json\n')
    tombstones.append(tmp_path, [tombstones.forget_record("ep-3", "episode")])
    seen = tombstones.Forgotten(tmp_path)
    assert seen.ids() == {"ep-1", "ep-3"}
    assert any(":2:" in p and "target" in p for p in seen.problems)


def test_a_replaced_file_is_read_again(tmp_path):
    tombstones.append(tmp_path, [tombstones.forget_record("ep-1", "episode"),
                                 tombstones.forget_record("ep-2", "episode")])
    seen = tombstones.Forgotten(tmp_path)
    assert seen.ids() == {"ep-1", "ep-2"}
    tmp = tmp_path / "new.jsonl"
    tmp.write_bytes(b"")
    os.replace(tmp, tombstones.path(tmp_path))
    tombstones.append(tmp_path, [tombstones.forget_record("ep-9", "episode")])
    assert seen.ids() == {"ep-9"}
