"""Issue 28: `memtier forget` and `memtier correct`, and the same verbs over the sidecar and MCP.

A forget runs in its own process (the CLI) while the reference host, a `memtier serve` sidecar
and the daemon's consolidator that started before it keep running: none of them delivers the
forgotten item or what was derived only from it at their next call.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli
from memtier_plugin import plugin
from memtier_plugin.config import load_config
from memtier_plugin.consolidation.batch import Consolidator, consolidate_once
from memtier_plugin.events import AgentEndEvent, HookContext, PromptEvent, SessionEndEvent
from memtier_plugin.host import Host
from memtier_plugin.layers.global_layer import GlobalStore
from memtier_plugin.store import tombstones
from memtier_plugin.store.semantic import SemanticStore
from test_sidecar import Sidecar

T0 = 1_790_000_000.0
DAY = 86400.0
AISLE = "I always want an aisle seat on flights."
VEG = "I always want vegetarian meals on flights."
ASK = "Book me a flight: which seat and which meal do I want?"


@pytest.fixture
def ws(workspace, monkeypatch):
    monkeypatch.setenv("MEMTIER_STANDING__EMBEDDER", "none")  # the lexical standing path: fast, deterministic
    return workspace


def host() -> Host:
    h = Host()
    h.register(plugin, "memtier")
    return h


def ctx(ws: Path, session: str, agent: str = "a") -> HookContext:
    return HookContext(agent_id=agent, session_id=session, run_id=f"{session}-r", project="travel",
                       workspace_dir=str(ws))


def say(h: Host, ws: Path, text: str, session: str, day: float) -> None:
    c = ctx(ws, session)
    h.before_prompt_build(PromptEvent(text, timestamp=T0 + day * DAY), c)
    h.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": "Noted."}], success=True,
                              timestamp=T0 + day * DAY + 5), c)
    h.session_end(SessionEndEvent("done", timestamp=T0 + day * DAY + 9), c)


def entries(ws: Path) -> dict[str, str]:
    """Episode content -> id (the user's statements)."""
    out = {}
    for p in (ws / "memory" / "episodic").rglob("*.jsonl"):
        for line in p.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("kind", "entry") == "entry" and rec["role"] == "user":
                out.setdefault(rec["content"], rec["id"])
    return out


def build(ws: Path) -> dict[str, str]:
    """Aisle said once (s1); vegetarian said in s2 and again in s3; consolidated. The ids by name."""
    h = host()
    say(h, ws, AISLE, "s1", 0)
    say(h, ws, VEG, "s2", 1)
    say(h, ws, VEG, "s3", 2)
    consolidate_once(load_config(flags={"paths.workspace": str(ws)}))
    e = entries(ws)
    facts = {r["content"]: r for r in SemanticStore(ws / "memory").current()}
    nodes = {n.rec["content"]: n.id for n in GlobalStore(ws / "memory").current()}
    ids = {"e_aisle": e[AISLE], "f_aisle": facts["User always wants an aisle seat on flights"]["id"],
           "g_aisle": nodes[AISLE], "g_veg": nodes[VEG]}
    f_veg = facts["User always wants vegetarian meals on flights"]
    ids["f_veg"] = f_veg["id"]
    ids["e_veg"] = f_veg["source_entry_ids"][0]  # the s2 statement; s3's restatement was a duplicate of it
    assert ids["e_veg"] == e[VEG]
    return ids


def delivered(block: str | None, ids: dict, names) -> set:
    return {n for n in names if ids[n] in (block or "")}


def test_forget_in_another_process_stops_every_delivery_path(ws):
    ids = build(ws)
    everything = ("e_aisle", "f_aisle", "g_aisle", "g_veg", "f_veg")
    h = host()  # this process's host and its Memory were running before the forget
    before = h.before_prompt_build(PromptEvent(ASK, timestamp=T0 + 30 * DAY), ctx(ws, "q")).prepend_context
    # the facts made from the same statements as the standing items repeat them: the block takes one of each
    assert delivered(before, ids, everything) >= {"g_aisle", "g_veg"}
    from memtier_plugin.memory import memory_for

    def candidates() -> set:
        c = ctx(ws, "q")
        return {x.id for x in memory_for(c).recall(ASK, c, T0 + 30 * DAY, record_trace=False).candidates}

    assert candidates() >= {ids["f_aisle"], ids["f_veg"], ids["g_aisle"]}
    sc = Sidecar(ws)  # a sidecar started before the forget, warmed by a first call
    try:
        status, first = sc.post("before_prompt_build", {"agent_id": "a", "session_id": "q2", "project": "travel"},
                                {"prompt": ASK, "timestamp": T0 + 30 * DAY})
        assert status == 200 and ids["g_aisle"] in first["prepend_context"]

        out = json.loads(run_cli("-w", str(ws), "forget", ids["e_aisle"], ids["e_veg"], "--json").stdout)
        assert out["forgotten"] == [{"id": ids["e_aisle"], "layer": "episode"}, {"id": ids["e_veg"], "layer": "episode"}]
        assert sorted((d["id"], d["layer"], d["because_of"]) for d in out["derived"]) == sorted([
            (ids["f_aisle"], "fact", ids["e_aisle"]), (ids["g_aisle"], "standing", ids["e_aisle"]),
            (ids["g_veg"], "standing", ids["e_veg"])])  # f_veg was restated in s3: it has other provenance
        raw = (ws / "memory" / tombstones.FILE).read_text()
        assert "aisle" not in raw and "vegetarian" not in raw  # ids only, never the text

        gone = ("e_aisle", "e_veg", "f_aisle", "g_aisle", "g_veg")
        block = h.before_prompt_build(PromptEvent(ASK, timestamp=T0 + 31 * DAY), ctx(ws, "q")).prepend_context
        assert not delivered(block, ids, gone) and ids["f_veg"] in block
        assert not candidates() & {ids[n] for n in gone}
        found = h.memory_tool("memory_search", {"query": "aisle seat vegetarian meals flights"}, ctx(ws, "q"))
        assert not {h_["id"] for h_ in found["hits"]} & {ids[n] for n in gone}
        assert h.memory_tool("memory_get", {"id": ids["e_aisle"]}, ctx(ws, "q"))["found"] is False
        assert h.memory_tool("memory_get", {"id": ids["f_aisle"]}, ctx(ws, "q"))["found"] is False

        status, answer = sc.post("before_prompt_build", {"agent_id": "a", "session_id": "q2", "project": "travel"},
                                 {"prompt": ASK, "timestamp": T0 + 31 * DAY})
        assert status == 200 and not delivered(answer["prepend_context"], ids, gone)
        assert ids["f_veg"] in answer["prepend_context"]
        status, found = sc.post("memory_search", {"agent_id": "a", "project": "travel"},
                                params={"query": "aisle seat vegetarian meals flights"})
        assert status == 200 and not {x["id"] for x in found["hits"]} & {ids[n] for n in gone}
        status, got = sc.post("memory_get", {"agent_id": "a"}, params={"id": ids["e_aisle"]})
        assert status == 200 and got["found"] is False
    finally:
        sc.stop()
    searched = json.loads(run_cli("-w", str(ws), "search", "aisle seat vegetarian meals flights", "--agent", "a",
                                  "--json").stdout)
    assert not {x["id"] for x in searched["hits"]} & {ids[n] for n in gone}
    again = json.loads(run_cli("-w", str(ws), "forget", ids["e_aisle"], "--json").stdout)
    assert again["already"] == [ids["e_aisle"]] and again["forgotten"] == [] and again["derived"] == []


def test_a_running_daemon_never_promotes_a_forgotten_entry(ws):
    cfg = load_config(flags={"paths.workspace": str(ws)})
    daemon = Consolidator(cfg)  # the daemon's consolidator, made before the forget
    daemon.run_batch()
    added = json.loads(run_cli("-w", str(ws), "add", AISLE, "--agent", "a", "--session", "s9", "--project", "travel",
                               "--json").stdout)
    run_cli("-w", str(ws), "forget", added["id"])
    report = daemon.run_batch()
    assert report.new_facts == [] and report.knowledge == []
    assert {"entry_id": added["id"], "reason": "forgotten"} in report.skipped
    assert not GlobalStore(ws / "memory").current()
    # the same words from another entry are learned as usual: a forgotten node holds nothing back
    run_cli("-w", str(ws), "add", AISLE, "--agent", "a", "--session", "s10", "--project", "travel")
    assert [k["content"] for k in daemon.run_batch().knowledge] == [AISLE]


def test_correct_delivers_the_new_value_and_never_the_old_as_current(ws):
    ids = build(ws)
    (ws / "memtier.yaml").write_text("retrieval:\n  top_k: 8\n")  # room for every layer's value in one block
    sc = Sidecar(ws)
    try:
        status, _ = sc.post("before_prompt_build", {"agent_id": "a", "session_id": "q", "project": "travel"},
                            {"prompt": ASK, "timestamp": T0 + 30 * DAY})
        assert status == 200
        fact = json.loads(run_cli("-w", str(ws), "correct", ids["f_aisle"], "User wants a window seat on flights",
                                  "--json").stdout)
        assert fact["old"] == ids["f_aisle"] and fact["layer"] == "fact"
        status, node = sc.post("memory_correct", {"agent_id": "a"},
                               params={"id": ids["g_aisle"], "text": "I always want a window seat on flights."})
        assert status == 200 and node["old"] == ids["g_aisle"] and node["layer"] == "standing"
        status, answer = sc.post("before_prompt_build", {"agent_id": "a", "session_id": "q", "project": "travel"},
                                 {"prompt": ASK, "timestamp": T0 + 31 * DAY})
        block = answer["prepend_context"]
        assert fact["new"] in block and node["new"] in block and "window seat" in block
        assert ids["f_aisle"] not in block and ids["g_aisle"] not in block
        status, got = sc.post("memory_get", {"agent_id": "a"}, params={"id": ids["f_aisle"]})
        assert got["found"] and got["current"] is False
    finally:
        sc.stop()
    chain = SemanticStore(ws / "memory").history(fact["new"])
    assert [r["id"] for r in chain] == [ids["f_aisle"], fact["new"]]  # the old value stays, as history
    assert [n.id for n in GlobalStore(ws / "memory").history(node["new"])] == [ids["g_aisle"], node["new"]]
    # a superseded value cannot be corrected again, an episode is not corrected, an unknown id is named
    for target, why in ((ids["f_aisle"], "not current"), (ids["e_aisle"], "no fact"), ("sf-nope", "sf-nope")):
        proc = run_cli("-w", str(ws), "correct", target, "anything", check=False)
        assert proc.returncode == 2 and why in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_unknown_or_bad_ids_are_refused_and_nothing_is_forgotten(ws):
    ids = build(ws)
    proc = run_cli("-w", str(ws), "forget", ids["e_aisle"], "ep-20990101-000000000000", check=False)
    assert proc.returncode == 2 and "ep-20990101-000000000000" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (ws / "memory" / tombstones.FILE).exists()
    sc = Sidecar(ws)
    try:
        status, err = sc.post("memory_forget", {"agent_id": "a"}, params={"ids": [ids["e_aisle"], "nope"]})
        assert status == 400 and "nope" in err["error"]
        status, err = sc.post("memory_forget", {"agent_id": "a"}, params={"ids": ids["e_aisle"]})
        assert status == 400 and "list of ids" in err["error"]
        assert not (ws / "memory" / tombstones.FILE).exists()
        status, out = sc.post("memory_forget", {"agent_id": "a"}, params={"ids": [ids["g_veg"]]})
        assert status == 200 and out["forgotten"] == [{"id": ids["g_veg"], "layer": "standing"}]
        status, err = sc.post("memory_correct", {"agent_id": "a"}, params={"id": ids["g_veg"], "text": "x y z"})
        assert status == 400 and "forgotten" in err["error"]
    finally:
        sc.stop()


def on_a_terminal(ws: Path, answer: str, *args: str) -> bytes:
    """Run `memtier -w WS ARGS` on a pseudo-terminal, answer the question with ``answer``; what it showed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "memtier_plugin", "-w", str(ws), *args], stdin=slave,
                            stdout=slave, stderr=slave, env=os.environ)
    os.close(slave)
    seen, deadline = b"", time.monotonic() + 60
    try:
        while b"[y/N]" not in seen and time.monotonic() < deadline:
            if select.select([master], [], [], 1)[0]:
                seen += os.read(master, 4096)
        os.write(master, answer.encode() + b"\n")
        assert proc.wait(timeout=60) == 0, seen
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return seen


def test_forget_by_filter_shows_the_matches_and_asks(ws):
    ids = build(ws)
    refused = run_cli("-w", str(ws), "forget", "--query", "aisle seat", check=False, input="y\n")
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert not (ws / "memory" / tombstones.FILE).exists()
    # on a terminal: the matches are shown, and "n" forgets nothing, "y" forgets them
    for answer, expect_forgotten in (("n", False), ("y", True)):
        seen = on_a_terminal(ws, answer, "forget", "--query", "aisle seat")
        assert b"Forget these" in seen and ids["e_aisle"].encode() in seen and ids["g_aisle"].encode() in seen
        assert ids["e_veg"].encode() not in seen
        gone = tombstones.Forgotten(ws / "memory").ids()
        assert (ids["e_aisle"] in gone) is expect_forgotten
    out = json.loads(run_cli("-w", str(ws), "forget", "--session", "s2", "--yes", "--json").stdout)
    assert {f["id"] for f in out["forgotten"]} >= {ids["e_veg"]}  # the session's entries
    assert ids["f_veg"] not in {d["id"] for d in out["derived"]}  # s3 restated it
    before = run_cli("-w", str(ws), "forget", "--before", "2001-01-01", "--yes", "--json").stdout
    assert json.loads(before)["forgotten"] == []
    bad = run_cli("-w", str(ws), "forget", "--before", "someday", "--yes", check=False)
    assert bad.returncode == 2 and "someday" in bad.stderr


def test_a_forgotten_hook_is_not_delivered_and_the_others_are(ws):
    hooks = ws / "memory" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "seats.yaml").write_text(
        "hooks:\n"
        "  - id: seat\n    entry: \"Seat: aisle.\"\n    events: [query]\n    when: {query: {any: [seat]}}\n"
        "  - id: meal\n    entry: \"Meal: vegetarian.\"\n    events: [query]\n    when: {query: {any: [meal]}}\n")
    (ws / "memtier.yaml").write_text("scheduling:\n  mode: combined\nhooks:\n  enabled: true\n")
    h = host()
    from memtier_plugin.memory import memory_for

    memory_for(ctx(ws, "hq")).hook_scheduler.refresh()
    first = h.before_prompt_build(PromptEvent(ASK, timestamp=T0), ctx(ws, "hq")).prepend_context
    assert "Seat: aisle." in first and "Meal: vegetarian." in first
    out = json.loads(run_cli("-w", str(ws), "forget", "seats.yaml:seat", "--json").stdout)
    assert out["forgotten"] == [{"id": "seats.yaml:seat", "layer": "hook"}]
    block = h.before_prompt_build(PromptEvent(ASK, timestamp=T0 + 60), ctx(ws, "hq2")).prepend_context or ""
    assert "Seat: aisle." not in block and "Meal: vegetarian." in block


def test_a_prepared_foresight_result_holding_a_forgotten_entry_is_not_served(workspace):
    from memtier_plugin.memory import memory_for
    from test_foresight import INSTRUCTION, T0 as F0, _ctx, _history, _ready

    (workspace / "memtier.yaml").write_text("foresight:\n  enabled: true\n  wait_ms: 10000\nstanding:\n"
                                            "  embedder: none\n")
    _history(workspace)
    h = host()
    c = _ctx(workspace)
    h.before_prompt_build(PromptEvent(INSTRUCTION, timestamp=F0), c)
    _ready(memory_for(c).foresight, "task-1")
    query = {"query": "team dinner dietary restrictions allergies vegan"}
    found = h.memory_tool("memory_search", query, c)
    hit = next(x for x in found["hits"] if "allergic to nuts" in x["content"])
    assert found["served"] == "foresight"
    run_cli("-w", str(workspace), "forget", hit["id"])
    again = h.memory_tool("memory_search", query, c)
    assert again["served"] == "retrieval" and hit["id"] not in {x["id"] for x in again["hits"]}
    memory_for(c).close()


def test_forget_and_correct_over_mcp(ws):
    from test_mcp import mcp_session, run

    ids = build(ws)

    async def go():
        async with mcp_session(ws, "--agent", "a", "--project", "travel") as s:
            names = {t.name for t in (await s.list_tools()).tools}
            before = await s.call_tool("memory_search", {"query": "aisle seat flights"})
            forgot = await s.call_tool("memory_forget", {"ids": [ids["e_aisle"]]})
            unknown = await s.call_tool("memory_forget", {"ids": ["nope"]})
            fixed = await s.call_tool("memory_correct", {"id": ids["f_veg"], "text": "User wants vegan meals"})
            after = await s.call_tool("memory_search", {"query": "aisle seat vegan vegetarian meals flights"})
            return names, before, forgot, unknown, fixed, after

    names, before, forgot, unknown, fixed, after = run(go())
    assert {"memory_forget", "memory_correct"} <= names
    assert ids["g_aisle"] in {x["id"] for x in before.structured_content["hits"]}
    assert {d["id"] for d in forgot.structured_content["derived"]} == {ids["f_aisle"], ids["g_aisle"]}
    assert unknown.is_error and "nope" in unknown.content[0].text
    hits = {x["id"] for x in after.structured_content["hits"]}
    assert fixed.structured_content["new"] in hits
    assert not hits & {ids["e_aisle"], ids["f_aisle"], ids["g_aisle"], ids["f_veg"]}


def test_a_skill_goes_only_with_the_last_of_its_run_s_entries(ws):
    from test_standing import DEPLOY, run, skill_records

    h = host()
    run(h, ws, ["Deploy atlas 2.4 to production"], [DEPLOY], session="d1", run_id="d1-r1", ts=T0,
        reply="atlas 2.4 is live on production.")
    (skill,) = skill_records(ws)
    sources = skill["provenance"]["entry_ids"]
    prompt = next(i for i in sources if i == entries(ws)["Deploy atlas 2.4 to production"])
    out = json.loads(run_cli("-w", str(ws), "forget", prompt, "--json").stdout)
    assert out["derived"] == []  # the run's reply is a source too: the skill stays
    ask = "Deploy atlas 2.5 to production"
    c = HookContext(agent_id="deployer", session_id="d2", run_id="d2-r1", project="atlas", workspace_dir=str(ws))
    assert skill["id"] in h.before_prompt_build(PromptEvent(ask, timestamp=T0 + DAY), c).prepend_context
    rest = [i for i in sources if i != prompt]
    out = json.loads(run_cli("-w", str(ws), "forget", *rest, "--json").stdout)
    assert out["derived"] == [{"id": skill["id"], "layer": "skill", "because_of": rest[0]}]
    c2 = HookContext(agent_id="deployer", session_id="d3", run_id="d3-r1", project="atlas", workspace_dir=str(ws))
    assert skill["id"] not in (h.before_prompt_build(PromptEvent(ask, timestamp=T0 + 2 * DAY), c2).prepend_context
                               or "")


def test_forget_with_purge_leaves_no_byte_of_the_text_under_memory(tmp_path):
    """`memtier forget ID --purge` in its own process: the entry's words are gone from every file under memory/."""
    import subprocess
    import sys

    ws = tmp_path / "ws"
    from memtier_plugin.events import AgentEndEvent, HookContext, PromptEvent
    from memtier_plugin.host import Host
    from memtier_plugin import plugin

    h = Host()
    h.register(plugin, "memtier")
    ctx = HookContext(agent_id="main", session_id="s1", run_id="r1", project="p", workspace_dir=str(ws))
    secret = "my locker combination is 31-07-44 zebrafinch"
    h.before_prompt_build(PromptEvent(f"Note that {secret}.", timestamp=1_790_000_000.0), ctx)
    h.before_prompt_build(PromptEvent("I prefer window seats on long flights.", timestamp=1_790_000_060.0),
                          HookContext(agent_id="main", session_id="s1", run_id="r2", project="p",
                                      workspace_dir=str(ws)))
    h.agent_end(AgentEndEvent(success=True, timestamp=1_790_000_100.0), ctx)
    ledger = next((ws / "memory" / "episodic" / "main").glob("*.jsonl"))
    eid = next(json.loads(line)["id"] for line in ledger.read_text().splitlines() if "zebrafinch" in line)
    out = subprocess.run([sys.executable, "-m", "memtier_plugin", "--workspace", str(ws), "forget", eid,
                          "--purge", "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert {"id": eid, "layer": "episode"} in report["forgotten"] and eid in report["purge"]["purged"]
    for path in (ws / "memory").rglob("*"):
        if path.is_file():
            assert b"zebrafinch" not in path.read_bytes(), path
    assert "window seats" in ledger.read_text()
