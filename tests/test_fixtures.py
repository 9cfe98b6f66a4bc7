"""The replay fixtures are well formed, and redaction removes every pasted secret."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from memtier_plugin.redact import redact, redact_obj

FIXTURES = Path(__file__).resolve().parent.parent / "workspace-fixtures"
SCENARIO = sorted((FIXTURES / "scenario").glob("*.jsonl"))
SECRETS = [s for s in (FIXTURES / "SECRETS.txt").read_text().splitlines() if s.strip()]
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z")


def _records(path: Path) -> list[dict]:
    out = []
    for lineno, line in enumerate(path.read_bytes().splitlines(), 1):
        obj = orjson.loads(line)
        assert isinstance(obj, dict), f"{path.name}:{lineno}: not an object"
        out.append(obj)
    return out


def _all_records() -> list[dict]:
    return [rec for path in SCENARIO for rec in _records(path)]


def test_scenario_files_exist_in_play_order():
    names = [p.name for p in SCENARIO]
    assert len(names) >= 6
    assert all(re.match(r"\d\d-", n) for n in names)
    starts = [_records(p)[0]["started"] for p in SCENARIO]
    assert starts == sorted(starts), "lexical file order must be play order"


@pytest.mark.parametrize("path", SCENARIO, ids=lambda p: p.name[:2])
def test_scenario_file_is_valid(path):
    assert path.read_bytes().endswith(b"\n")
    recs = _records(path)
    assert 8 <= len(recs) <= 20
    head, end = recs[0], recs[-1]
    assert head["type"] == "session"
    for key in ("agent_id", "session_id", "session_key", "project", "started"):
        assert isinstance(head[key], str) and head[key], key
    assert end["type"] == "end" and isinstance(end["success"], bool)
    assert [r["type"] for r in recs].count("session") == 1
    assert [r["type"] for r in recs].count("end") == 1
    assert recs[1]["type"] == "user"
    times = [head["started"]] + [r["at"] for r in recs[1:]]
    assert all(ISO.fullmatch(t) for t in times)
    assert times == sorted(times), "timestamps must not go backwards"
    for rec in recs[1:-1]:
        assert rec["type"] in {"user", "assistant", "tool_call"}
        if rec["type"] == "tool_call":
            assert rec["tool"] and isinstance(rec["params"], dict)
            assert isinstance(rec["tool_call_id"], str) and rec["tool_call_id"]
            assert rec["error"] is None or isinstance(rec["error"], str)
            assert isinstance(rec["duration_ms"], int)
            assert (rec["result"] is None) != (rec["error"] is None), "a result or an error"
        else:
            assert isinstance(rec["content"], str) and rec["content"]


def test_tool_call_ids_are_unique():
    ids = [r["tool_call_id"] for r in _all_records() if r["type"] == "tool_call"]
    assert len(ids) == len(set(ids))


def test_story_has_a_failure_a_changed_preference_and_three_agents():
    recs = _all_records()
    failed = [r for r in recs if r["type"] == "tool_call" and r["error"]]
    assert failed and failed[0]["tool"] == "deploy"
    assert any(r["type"] == "end" and r["success"] is False for r in recs)
    users = " ".join(r["content"] for r in recs if r["type"] == "user")
    assert "under $200 a night" in users and "$300 a night" in users
    assert users.index("under $200 a night") < users.index("$300 a night")
    assert "never book flights before 8am" in users
    heads = [_records(p)[0] for p in SCENARIO]
    assert {h["agent_id"] for h in heads} == {"assistant", "deployer", "planner"}
    assert {h["project"] for h in heads} == {"travel", "atlas", "conference"}  # the Global layer crosses projects


def test_every_secret_is_in_the_scenario_and_caught_by_redaction():
    raw = b"".join(p.read_bytes() for p in SCENARIO).decode()
    assert len(SECRETS) >= 3
    for secret in SECRETS:
        assert secret in raw, f"{secret!r} does not occur in the scenario"
    for rec in _all_records():
        clean, _ = redact_obj(rec)
        text = orjson.dumps(clean).decode()
        for secret in SECRETS:
            assert secret not in text
    for rec in _all_records():  # the text channel alone also catches them
        if rec["type"] == "user":
            out, _ = redact(rec["content"])
            assert not any(secret in out for secret in SECRETS)


def test_token_shaped_secrets_are_caught_on_their_own():
    for secret in SECRETS:
        if secret.startswith(("AKIA", "sk-")):
            assert redact(secret)[0].startswith("[REDACTED:")


def test_malformed_ledger_has_the_documented_lines():
    data = (FIXTURES / "malformed" / "torn-and-corrupt.jsonl").read_bytes()
    assert not data.endswith(b"\n")
    lines = data.split(b"\n")
    assert len(lines) == 14
    good, bad = [], []
    for lineno, line in enumerate(lines[:-1], 1):
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            bad.append(lineno)
            continue
        if isinstance(obj, dict) and all(isinstance(obj.get(k), str) for k in ("id", "content")):
            good.append(obj["id"])
        else:
            bad.append(lineno)
    assert bad == [6, 7, 8]
    assert good == [f"ep-20261005-3f2a9c{i:02x}" for i in range(1, 11)]
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(lines[-1])


def test_bad_configs_are_present():
    names = {p.name for p in (FIXTURES / "configs").glob("*.yaml")}
    assert names == {"misspelled-key.yaml", "wrong-type.yaml", "out-of-range.yaml", "not-yaml.yaml",
                     "preset-list.yaml", "huge-number.yaml", "deep-nesting.yaml", "not-utf8.yaml", "nan-weight.yaml",
                     "nan-decay.yaml", "inf-tier.yaml", "unknown-tier.yaml", "alias-bomb.yaml", "renamed-key.yaml",
                     "removed-key.yaml"}
