"""Issue 11: the hook path, the derived index and the host under hostile or careless input.

Each test drives the public path (the reference host with memtier's plugin, or
the real `memtier` command) and fails on the code before the fix.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from memtier_plugin import plugin
from memtier_plugin.events import (AgentEndEvent, HookContext, PromptEvent, SessionEndEvent, ToolCallEvent,
                                   ToolDecision, ToolResultEvent)
from memtier_plugin.hookspecs import hookimpl
from memtier_plugin.host import Host
from memtier_plugin.store.episodic import Ledger


def memtier_host() -> Host:
    host = Host()
    host.register(plugin, "memtier")
    return host


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def ledger_text(workspace: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in (workspace / "memory").rglob("*.jsonl"))


# ---- 1. ids never become paths unchecked ------------------------------------------------
BAD_IDS = ["/abs", "../..", "a/b", "", ".", "..", "agent\n", "a\x00b", "x" * 200, "../../../tmp/evil"]


@pytest.mark.parametrize("agent_id", BAD_IDS)
def test_bad_agent_id_writes_nothing_outside_memory_and_fails_open(tmp_path, agent_id):
    ws = tmp_path / "deep" / "ws"
    ws.mkdir(parents=True)
    before = files_under(tmp_path)
    host = memtier_host()
    ctx = HookContext(agent_id=agent_id, session_id="s1", run_id="r1", project="p", workspace_dir=str(ws))
    assert host.before_prompt_build(PromptEvent("restart the payments worker"), ctx).prepend_context is None
    decision = host.pre_tool(ToolCallEvent("ssh", {"host": "pay-1"}), ctx)
    assert not decision.block and "could not run" in decision.supplement  # said, not a silent allow
    host.post_tool(ToolResultEvent("ssh", {"host": "pay-1"}, result="ok"), ctx)
    host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": "done"}]), ctx)
    host.session_end(SessionEndEvent("completed"), ctx)
    written = files_under(tmp_path) - before
    assert all((ws / "memory") in p.parents for p in written), written
    assert not [p for p in written if p.suffix == ".jsonl"], "a refused id writes no record at all"


def test_add_refuses_a_path_like_agent_id(workspace):
    proc = run_cli("add", "hello", "--agent", "../x", "--session", "s", "--project", "p", check=False)
    assert proc.returncode == 2 and "agent id" in proc.stderr and "Traceback" not in proc.stderr
    assert not (workspace.parent / "x").exists() and not (workspace / "memory").exists()


# ---- 2. one bad record never disables recall ----------------------------------------------
GOOD = {"v": 1, "kind": "entry", "timestamp": "2026-11-01T10:00:00.000Z", "agent_id": "ops", "session_id": "s0",
        "project": "pay", "role": "user", "tokens": 9, "promoted": False, "cognitive_weight": 0.0, "provenance": {}}
BAD_RECORDS = [
    {**GOOD, "id": "ep-bad-ts", "content": "bad timestamp zebra", "timestamp": 12345},
    {**GOOD, "id": "ep-bad-project", "content": "bad project zebra", "project": ["a", "b"]},
    {**GOOD, "id": "ep-bad-session", "content": "bad session zebra", "session_id": ["s"]},
    {**GOOD, "id": "ep-bad-cw", "content": "bad cw zebra", "cognitive_weight": "high"},
    {**GOOD, "id": "ep-bad-date", "content": "bad date zebra", "timestamp": "not-a-date"},
    {"v": 1, "kind": "cw_update", "id": "up-bad", "entry_id": "ep-good", "delta": "lots",
     "timestamp": "2026-11-01T10:00:01.000Z"},
]


def write_ledger(ws: Path, agent: str, lines: list[bytes], day: str = "2026-11-01") -> Path:
    path = ws / "memory" / "episodic" / agent / f"{day}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(lines))
    return path


def test_bad_records_are_skipped_reported_and_recall_goes_on(workspace):
    good = {**GOOD, "id": "ep-good", "content": "Runbook: restart payworker zebra with systemctl on pay-2"}
    path = write_ledger(workspace, "ops", [json.dumps(good).encode() + b"\n"]
                        + [json.dumps(r).encode() + b"\n" for r in BAD_RECORDS])
    host = memtier_host()
    for agent in ("ops", "other"):
        ctx = HookContext(agent_id=agent, session_id="s9", run_id=f"r-{agent}", project="pay",
                          workspace_dir=str(workspace))
        block = host.before_prompt_build(PromptEvent(f"zebra restart question from {agent}"), ctx).prepend_context
        if agent == "ops":
            assert block and "ep-good" in block and "bad" not in block
    entries = Ledger(workspace / "memory").read()
    prompts = [e.content for e in entries.entries.values() if e.role == "user" and e.session_id == "s9"]
    assert sorted(prompts) == ["zebra restart question from ops", "zebra restart question from other"]
    assert {p.lineno for p in entries.problems} == set(range(2, 2 + len(BAD_RECORDS)))
    proc = run_cli("inspect", "--agent", "ops")
    assert "ep-good" in proc.stdout and f"{path}:2" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("search", "zebra", "--agent", "ops", "--project", "pay", "--json")
    ids = [h["id"] for h in json.loads(proc.stdout)["hits"]]
    assert "ep-good" in ids and not [i for i in ids if i.startswith("ep-bad")]


def test_prompt_is_recorded_when_recall_fails_and_never_delivered_back(workspace, monkeypatch):
    from memtier_plugin import memory

    host = memtier_host()
    ctx = HookContext(agent_id="a", session_id="s", run_id="r1", workspace_dir=str(workspace))
    first = host.before_prompt_build(PromptEvent("the quokka report is due friday"), ctx)
    assert first.prepend_context is None  # the prompt is not its own memory
    again = host.before_prompt_build(PromptEvent("the quokka report is due friday"), ctx)
    assert again.prepend_context and again.prepend_context.count("quokka") == 1  # only the earlier one
    monkeypatch.setattr(memory.Memory, "recall", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("x")))
    host.before_prompt_build(PromptEvent("recall is broken but this must stay"), ctx)
    contents = [e.content for e in Ledger(workspace / "memory").read().entries.values()]
    assert "recall is broken but this must stay" in contents


# ---- 3. concurrent index saves, read-only index -------------------------------------------
def test_concurrent_searches_on_a_missing_index_never_crash(workspace):
    # big enough that six processes building the missing index save it at overlapping moments
    recs = [json.dumps({**GOOD, "agent_id": "a0", "session_id": f"s{i % 50}", "project": "p", "id": f"ep-{i:06d}",
                        "content": f"entry {i} about the lighthouse keeper and the tide table {i * 7919 % 10007}"})
            for i in range(30_000)]
    write_ledger(workspace, "a0", [("\n".join(recs) + "\n").encode()])
    env = dict(os.environ)
    failures = []
    for _round in range(3):
        shutil.rmtree(workspace / "memory" / ".index", ignore_errors=True)
        procs = [subprocess.Popen([sys.executable, "-m", "memtier_plugin", "search", "lighthouse keeper",
                                   "--agent", "a0", "--project", "p", "--json"], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=env) for _ in range(6)]
        for p in procs:
            out, err = p.communicate(timeout=300)
            if p.returncode != 0 or not json.loads(out)["hits"]:
                failures.append(err.decode()[-400:])
    assert failures == []
    # and the index they left is whole: a fresh process loads it and reads nothing new
    from memtier_plugin.recall.index_files import current_generation, load_saved

    idx = load_saved(workspace / "memory" / ".index" / "episodic", k1=1.5, b=0.75, idf="lucene")
    assert idx is not None and idx.n == 30_000
    assert [p.name for p in (workspace / "memory" / ".index" / "episodic").iterdir() if p.name.startswith("g-")] \
        == [current_generation(workspace / "memory" / ".index" / "episodic").name]


def test_unwritable_index_still_recalls(workspace):
    run_cli("add", "the heron nests by the old mill", "--agent", "a", "--session", "s", "--project", "p")
    shutil.rmtree(workspace / "memory" / ".index", ignore_errors=True)
    (workspace / "memory" / ".index").write_text("not a folder")  # every save fails with an OSError
    proc = run_cli("search", "heron mill", "--agent", "a", "--project", "p", "--json")
    assert json.loads(proc.stdout)["hits"][0]["content"] == "the heron nests by the old mill"
    assert "Traceback" not in proc.stderr


# ---- 4. hand edits ------------------------------------------------------------------------
def test_hand_edited_ledger_is_reindexed_and_removed_text_purged(workspace):
    for text in ("alpha the ocelot sleeps", "bravo the ocelot hunts", "charlie the ocelot roams"):
        run_cli("add", text, "--agent", "a", "--session", "s", "--project", "p")
    hits = json.loads(run_cli("search", "ocelot", "--agent", "a", "--project", "p", "--json").stdout)["hits"]
    assert len(hits) == 3
    (path,) = (workspace / "memory" / "episodic" / "a").glob("*.jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    kept = [ln for ln in lines if b"bravo" not in ln]
    kept = [ln.replace(b"charlie the ocelot roams", b"charlie the ocelot naps") for ln in kept]
    path.write_bytes(b"".join(kept))  # an editor's save: shorter, one line gone, one changed
    hits = json.loads(run_cli("search", "ocelot", "--agent", "a", "--project", "p", "--json").stdout)["hits"]
    assert sorted(h["content"] for h in hits) == ["alpha the ocelot sleeps", "charlie the ocelot naps"]
    index_bytes = b"".join(p.read_bytes() for p in (workspace / "memory" / ".index").rglob("*") if p.is_file())
    assert b"bravo" not in index_bytes and b"roams" not in index_bytes


def test_same_size_rewrite_in_a_long_running_process_is_seen(workspace):
    host = memtier_host()
    ctx = HookContext(agent_id="a", session_id="s", run_id="r1", project="p", workspace_dir=str(workspace))
    host.before_prompt_build(PromptEvent("the wombat ate carrots"), ctx)
    assert "wombat ate carrots" in host.before_prompt_build(PromptEvent("wombat"), ctx).prepend_context
    (path,) = (workspace / "memory" / "episodic" / "a").glob("*.jsonl")
    data = path.read_bytes()
    path.write_bytes(data.replace(b"wombat ate carrots", b"wombat ate lettuce"))  # same length
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 5_000_000))
    block = host.before_prompt_build(PromptEvent("lettuce"), ctx).prepend_context
    assert block and "wombat ate lettuce" in block
    block = host.before_prompt_build(PromptEvent("carrots"), ctx).prepend_context
    assert block is None or "wombat ate" not in block


# ---- 5. a lone CR never hides later lines -------------------------------------------------
def test_lone_cr_in_a_line_hides_nothing_after_it(workspace):
    rec1 = {**GOOD, "id": "ep-one", "content": "first capybara line"}
    rec2 = {**GOOD, "id": "ep-two", "content": "second capybara line"}
    raw2 = json.dumps(rec2).replace(', "role"', ',\r "role"').encode()  # CR as JSON whitespace
    write_ledger(workspace, "ops", [json.dumps(rec1).encode() + b"\n", raw2 + b"\n",
                                    b'{"broken\r line\n'])
    run_cli("add", "third capybara line", "--agent", "ops", "--session", "s0", "--project", "pay")
    ids = {e.id for e in Ledger(workspace / "memory").read().entries.values()}
    assert {"ep-one", "ep-two"} <= ids and len(ids) == 3
    hits = json.loads(run_cli("search", "capybara", "--agent", "ops", "--project", "pay", "--json").stdout)["hits"]
    assert len(hits) == 3


# ---- 6. one plugin's failure never costs another's answer ---------------------------------
class Raising:
    PLUGIN_NAME = "raising"

    @hookimpl
    def before_prompt_build(self, event, ctx):
        raise RuntimeError("third-party boom")

    @hookimpl
    def pre_tool(self, event, ctx):
        raise RuntimeError("third-party boom")

    @hookimpl
    def agent_end(self, event, ctx):
        raise RuntimeError("third-party boom")


class Blocking:
    PLUGIN_NAME = "blocking"

    @hookimpl
    def pre_tool(self, event, ctx):
        return ToolDecision(block=True, block_reason="policy: no deploys")


class Weird:
    PLUGIN_NAME = "weird"

    @hookimpl
    def pre_tool(self, event, ctx):
        return "yes please"


@pytest.mark.parametrize("order", ["raising-first", "raising-last"])
def test_a_raising_plugin_neither_loses_memory_nor_turns_a_block_into_allow(workspace, order):
    host = Host()
    plugins = [(Raising(), "raising"), (plugin, "memtier"), (Blocking(), "blocking")]
    for p, name in (plugins if order == "raising-first" else plugins[::-1]):
        host.register(p, name)
    ctx = HookContext(agent_id="a", session_id="s", run_id="r1", workspace_dir=str(workspace))
    host.before_prompt_build(PromptEvent("deploy the atlas service"), ctx)
    decision = host.pre_tool(ToolCallEvent("deploy", {"env": "prod"}), ctx)
    assert decision.block and decision.block_reason == "policy: no deploys"
    host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": "deploy held"}]), ctx)
    contents = sorted(e.content for e in Ledger(workspace / "memory").read().entries.values())
    assert contents == ["deploy held", "deploy the atlas service"]


def test_a_raising_or_odd_pre_tool_is_review_not_allow(workspace):
    for extra in (Raising(), Weird()):
        host = Host()
        host.register(plugin, "memtier")
        host.register(extra, extra.PLUGIN_NAME)
        ctx = HookContext(agent_id="a", session_id="s", run_id="r1", workspace_dir=str(workspace))
        decision = host.pre_tool(ToolCallEvent("rm", {"path": "/"}), ctx)
        assert not decision.block and decision.supplement and "could not run" in decision.supplement


# ---- 7. memtier is registered once ---------------------------------------------------------
def test_package_and_dropin_register_memtier_once(workspace, tmp_path):
    out = json.loads(run_cli("plugins", "--plugin-dir", str(ROOT / "hooks"), "--json").stdout)
    names = [p["name"] for p in out]
    assert names.count("memtier") == 1 and len(names) == 1, names
    host = Host()
    host.load_entrypoints()
    host.load_plugin_dir(ROOT / "hooks")
    import importlib.util

    spec = importlib.util.spec_from_file_location("dropin_copy", ROOT / "hooks" / "memtier_hooks.py")
    dropin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dropin)
    assert host.register(dropin, "memtier-dropin-copy") is None  # same hook functions, another name
    assert [n for n, _ in host.plugins()] == ["memtier"]
    ctx = HookContext(agent_id="a", session_id="s", run_id="r1", workspace_dir=str(workspace))
    host.before_prompt_build(PromptEvent("one prompt, one entry"), ctx)
    entries = Ledger(workspace / "memory").read().entries.values()
    assert [e.content for e in entries] == ["one prompt, one entry"]


# ---- 8. exact scoping; run state freed ----------------------------------------------------
def test_missing_project_sees_no_project_facts(workspace):
    sem = workspace / "memory" / "semantic"
    sem.mkdir(parents=True)
    for project in ("alpha", "beta"):
        fact = {"v": 1, "kind": "fact", "id": f"sf-{project}", "timestamp": "2026-11-01T10:00:00.000Z",
                "project": project, "origin_agent": "ops", "content": f"The {project} vault code word is kumquat",
                "session_ids": ["s0"], "source_entry_ids": []}
        (sem / f"{project}.jsonl").write_text(json.dumps(fact) + "\n")
    host = memtier_host()
    for project in (None, ""):
        ctx = HookContext(agent_id="a", session_id="s", run_id=f"r{project}", project=project,
                          workspace_dir=str(workspace))
        block = host.before_prompt_build(PromptEvent("what is the vault code word kumquat"), ctx).prepend_context
        assert block is None or "sf-alpha" not in block and "sf-beta" not in block
    ctx = HookContext(agent_id="a", session_id="s", run_id="r2", project="alpha", workspace_dir=str(workspace))
    block = host.before_prompt_build(PromptEvent("what is the vault code word kumquat"), ctx).prepend_context
    assert "sf-alpha" in block and "sf-beta" not in block


def run_end_records(workspace: Path) -> dict[str, dict]:
    out = {}
    for path in (workspace / "memory" / "traces").rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if rec["kind"] == "run_end":
                out[rec["session_id"]] = rec
    return out


@pytest.mark.parametrize("ended", ["s1", ""])
def test_session_end_ends_only_that_session(workspace, ended):
    host = memtier_host()
    host.before_prompt_build(PromptEvent("the otter manual says rinse"),
                             HookContext(agent_id="a", session_id="s0", run_id="r0", workspace_dir=str(workspace)))
    for sid in ("s1", "s10", ""):
        ctx = HookContext(agent_id="a", session_id=sid, run_id="", workspace_dir=str(workspace))
        host.before_prompt_build(PromptEvent("what does the otter manual say"), ctx)
    host.session_end(SessionEndEvent("done"), HookContext(agent_id="a", session_id=ended,
                                                          workspace_dir=str(workspace)))
    for sid in ("s1", "s10", ""):
        host.agent_end(AgentEndEvent(), HookContext(agent_id="a", session_id=sid, run_id="",
                                                    workspace_dir=str(workspace)))
    runs = run_end_records(workspace)
    for sid in ("s1", "s10", ""):
        assert bool(runs[sid]["delivered"]) == (sid != ended), sid  # the ended session's state is gone


def test_runs_that_never_end_are_freed(workspace):
    from memtier_plugin import intake, memory, runs
    from memtier_plugin.config import load_config

    now = [1_000_000.0]
    mem = memory.Memory(load_config(flags={"paths.workspace": str(workspace)}), clock=lambda: now[0])
    big = "x" * 200_000
    for i in range(runs.MAX_RUNS * 3):
        ctx = HookContext(agent_id="a", session_id=f"s{i}", run_id=f"r{i}", workspace_dir=str(workspace))
        mem.on_post_tool(ToolResultEvent("fetch", {"url": "u"}, result=big), ctx)
        now[0] += 1
    assert len(mem.runs) <= runs.MAX_RUNS
    held = [c for st in mem.runs.values() for c in st.tool_calls]
    assert held and all(len(json.dumps(c)) < 3 * intake.MAX_TOOL_TEXT for c in held)
    now[0] += runs.RUN_TTL_S + 1
    mem.run(HookContext(agent_id="a", session_id="new", run_id="new"))
    assert len(mem.runs) == 1


# ---- 11. host input: surrogates, huge payloads, failed appends -----------------------------
def test_lone_surrogate_and_huge_input_are_recorded_not_fatal(workspace):
    host = memtier_host()
    ctx = HookContext(agent_id="a", session_id="s\ud800", run_id="r\udfff", project="p",
                      workspace_dir=str(workspace))
    host.before_prompt_build(PromptEvent("cut emoji \ud83d here about the narwhal"), ctx)
    host.post_tool(ToolResultEvent("read", {"q": "\ud83d"}, result="y" * 3_000_000), ctx)
    host.before_prompt_build(PromptEvent("z" * 5_000_000), ctx)
    block = host.before_prompt_build(PromptEvent("narwhal"), ctx).prepend_context
    assert block and "narwhal" in block
    entries = list(Ledger(workspace / "memory").read().entries.values())
    assert any("cut emoji \ufffd here" in e.content for e in entries)
    assert max(len(e.content) for e in entries) <= 32_000
    assert all(e.session_id == "s\ufffd" for e in entries)


def test_failed_append_leaves_no_partial_line(workspace, monkeypatch):
    from memtier_plugin.store import files as ledger_mod

    run_cli("add", "before the disk filled", "--agent", "a", "--session", "s", "--project", "p")
    real_write = os.write

    def half_then_enospc(fd, data):
        real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ledger_mod.os, "write", half_then_enospc)
    host = memtier_host()
    ctx = HookContext(agent_id="a", session_id="s", run_id="r", project="p", workspace_dir=str(workspace))
    host.before_prompt_build(PromptEvent("this append fails halfway"), ctx)  # fails open
    monkeypatch.setattr(ledger_mod.os, "write", real_write)
    run_cli("add", "after the disk was freed", "--agent", "a", "--session", "s", "--project", "p")
    result = Ledger(workspace / "memory").read()
    assert result.problems == []
    assert sorted(e.content for e in result.entries.values()) == ["after the disk was freed",
                                                                  "before the disk filled"]


# ---- 9 (ids part). ids are redacted too -----------------------------------------------------
def test_ids_carrying_secrets_are_redacted(workspace):
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    host = memtier_host()
    ctx = HookContext(agent_id="a", session_id=f"sess-{token}", run_id=f"run-{token}", project=f"p-{token}",
                      workspace_dir=str(workspace))
    host.before_prompt_build(PromptEvent("hello"), ctx)
    host.post_tool(ToolResultEvent("x", {}, tool_call_id=f"call-{token}", result="ok"), ctx)
    host.agent_end(AgentEndEvent(), ctx)
    assert token not in ledger_text(workspace)


# ---- 15. orchestrator credit lands where the entry lives ---------------------------------------
def test_orchestrator_credit_updates_the_owner_ledger(workspace):
    (workspace / "memtier.yaml").write_text("agents:\n  global_read: [orch]\n")
    host = memtier_host()
    worker = HookContext(agent_id="worker", session_id="w1", run_id="w-r1", project="pay",
                         workspace_dir=str(workspace))
    host.before_prompt_build(PromptEvent("Runbook: systemctl restart payworker on host pay-2"), worker)
    host.agent_end(AgentEndEvent(), worker)
    orch = HookContext(agent_id="orch", session_id="o1", run_id="o-r1", project="pay",
                       workspace_dir=str(workspace))
    block = host.before_prompt_build(PromptEvent("how do I restart payworker on pay-2"), orch).prepend_context
    assert "systemctl restart payworker" in block
    host.post_tool(ToolResultEvent("shell", {"cmd": "systemctl restart payworker", "host": "pay-2"},
                                   tool_call_id="c1", result="restarted payworker on pay-2"), orch)
    host.agent_end(AgentEndEvent(success=True), orch)
    rows = [json.loads(line) for line in run_cli("inspect", "--agent", "worker", "--json").stdout.splitlines()]
    runbook = [e for e in rows if "systemctl" in e["content"]]
    assert runbook and runbook[0]["cognitive_weight"] > 0
    assert not list((workspace / "memory" / "episodic" / "orch").glob("*.jsonl")) or \
        "cw_update" not in "".join(p.read_text() for p in (workspace / "memory" / "episodic" / "orch").glob("*"))


# ---- fuzz: 10,000 mutated records among good ones ---------------------------------------------
def _mutations(rng, good: dict) -> list[bytes]:
    """Lines that are certainly not usable records: wrong types, unknown kinds, odd bytes."""
    wrong = [12345, 1.5, True, None, ["x"], {"a": 1}, float("nan")]
    out = []
    for key in ("id", "timestamp", "agent_id", "session_id", "content", "project", "cognitive_weight",
                "tokens", "promoted", "provenance", "role"):
        for value in wrong:
            if key in ("project", "role", "cognitive_weight", "tokens", "promoted") and value is None:
                continue  # null stands for absent in these optional fields
            if key == "cognitive_weight" and isinstance(value, (int, float)) and not isinstance(value, bool) \
                    and value == value and -1 <= value <= 1:
                continue
            if key == "tokens" and isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                continue
            if key == "promoted" and isinstance(value, bool):
                continue
            if key == "provenance" and (value is None or isinstance(value, dict)):
                continue
            rec = {**good, key: value}
            out.append(json.dumps(rec, allow_nan=True).encode())
    out += [json.dumps({**good, "timestamp": t}).encode() for t in ("not-a-date", "2026-13-45T99:00:00Z", "")]
    out += [json.dumps({**good, "agent_id": a}).encode() for a in ("../x", "a/b", "", " a")]
    out += [json.dumps({**good, "cognitive_weight": w}).encode() for w in (1.5, -7, "high")]
    out += [json.dumps({"v": 1, "kind": k, "id": "x"}).encode() for k in ("mystery", "", "entry2", 7)]
    out += [json.dumps({"v": 1, "kind": "cw_update", "entry_id": e, "delta": d}).encode()
            for e, d in (("ep-x", "lots"), ("ep-x", None), (None, 0.1), (["ep-x"], 0.1), ("ep-x", [1]))]
    out += [json.dumps({"v": 1, "kind": "promoted", "entry_id": "ep-x", "fact_ids": f}).encode()
            for f in ("sf-1", [1, 2], {"a": 1})]
    out += [b"\xff\xfe not utf-8 \x80", b'{"v": 1, "kind": "entry", "content": "cut', b"[1, 2, 3]", b'"a string"',
            b"\x00\x00\x00", b'{"v":1,"content":"raw\x01control"}', b"{" * 50, b"null", b"true"]
    return out


def test_fuzzed_ledgers_lose_no_good_record_and_recall_works_for_every_agent(workspace):
    import random

    rng = random.Random(11)
    agents = [f"agent{i}" for i in range(5)]
    good_ids: dict[str, list[str]] = {a: [] for a in agents}
    n_bad = 0
    for a in agents:
        lines: list[bytes] = []
        for i in range(400):
            rec = {**GOOD, "agent_id": a, "id": f"ep-{a}-{i:05d}", "session_id": f"s{i % 9}", "project": "pay",
                   "content": f"{a} note {i} about the {rng.choice(['heron', 'otter', 'lynx'])} and marker{a}"}
            lines.append(json.dumps(rec).encode())
            good_ids[a].append(rec["id"])
            for _ in range(5):  # 2,000 bad lines per agent, 10,000 in all
                bad = _mutations(rng, {**rec, "id": f"ep-bad-{a}-{i}-{n_bad}"})
                lines.append(rng.choice(bad))
                n_bad += 1
        write_ledger(workspace, a, [b"\n".join(lines) + b"\n"])
    assert n_bad == 10_000
    result = Ledger(workspace / "memory").read()
    assert sorted(result.entries) == sorted(i for ids in good_ids.values() for i in ids)
    assert len(result.problems) == n_bad and all(p.lineno > 0 for p in result.problems)
    host = memtier_host()
    for a in agents:
        ctx = HookContext(agent_id=a, session_id="q", run_id=f"q-{a}", project="pay", workspace_dir=str(workspace))
        block = host.before_prompt_build(PromptEvent(f"what about marker{a}"), ctx).prepend_context
        assert block and f"marker{a}" in block and "ep-bad" not in block
    proc = run_cli("inspect", "--json")
    assert len(proc.stdout.splitlines()) == len(result.entries) + len(agents)  # + each agent's query prompt
    assert "Traceback" not in proc.stderr
    proc = run_cli("search", "heron", "--agent", "agent0", "--project", "pay", "--explain")
    assert "Traceback" not in proc.stderr and "ep-agent0-" in proc.stdout


# ---- 8 hook processes x 500 turns, index deleted at the start, one process SIGKILLed --------------
WORKER = r"""
import logging, sys
from memtier_plugin import plugin
from memtier_plugin.events import AgentEndEvent, HookContext, PromptEvent, ToolResultEvent
from memtier_plugin.host import Host

class Count(logging.Handler):
    n = 0
    def emit(self, record):
        Count.n += 1
        sys.stderr.write(self.format(record) + "\n")

logging.getLogger("memtier_plugin").addHandler(Count(level=logging.ERROR))
ws, worker, turns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
host = Host()
host.register(plugin, "memtier")
for i in range(turns):
    ctx = HookContext(agent_id=f"agent{worker % 4}", session_id=f"w{worker}", run_id=f"w{worker}-r{i}",
                      project="pay", workspace_dir=ws)
    prompt = f"worker {worker} turn {i} asks about the payments runbook and pay-legacy host {i % 17}"
    host.before_prompt_build(PromptEvent(prompt), ctx)
    print(f"ACK {prompt}", flush=True)
    if i % 5 == 0:
        host.post_tool(ToolResultEvent("shell", {"cmd": f"systemctl status payworker-{i % 3}"}, result="active"), ctx)
        host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": f"checked {i}"}]), ctx)
print(f"ERRORS {Count.n}", flush=True)
"""


@pytest.mark.slow
def test_eight_hook_processes_lose_no_acknowledged_prompt(workspace):
    import signal
    import threading
    import time

    for i in range(300):  # some history, so recall has work to do
        write_ledger(workspace, f"agent{i % 4}", [json.dumps({**GOOD, "agent_id": f"agent{i % 4}", "id": f"ep-h{i}",
                     "content": f"history {i}: pay-legacy host {i % 17} runbook step"}).encode() + b"\n"],
                     day=f"2026-10-{1 + i % 28:02d}")
    shutil.rmtree(workspace / "memory" / ".index", ignore_errors=True)
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(workspace), str(w), "500"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(8)]
    outputs: dict[int, list[str]] = {w: [] for w in range(8)}
    errs: dict[int, list[str]] = {w: [] for w in range(8)}

    def read(w, stream, into):
        for line in stream:
            into[w].append(line.rstrip("\n"))

    readers = [threading.Thread(target=read, args=(w, procs[w].stdout, outputs)) for w in range(8)]
    readers += [threading.Thread(target=read, args=(w, procs[w].stderr, errs)) for w in range(8)]
    for t in readers:
        t.start()
    deadline = time.time() + 120
    while len(outputs[3]) < 100 and time.time() < deadline:
        time.sleep(0.05)
    procs[3].send_signal(signal.SIGKILL)
    for p in procs:
        p.wait(timeout=600)
    for t in readers:
        t.join()
    assert procs[3].returncode == -signal.SIGKILL and len(outputs[3]) >= 100
    acked = {line[4:] for w in range(8) for line in outputs[w] if line.startswith("ACK ")}
    for w in range(8):
        if w != 3:
            assert procs[w].returncode == 0, errs[w][-20:]
            assert outputs[w][-1] == "ERRORS 0", errs[w][-20:]  # no recall or hook failed
            assert len([o for o in outputs[w] if o.startswith("ACK ")]) == 500
    result = Ledger(workspace / "memory").read()
    prompts = {e.content for e in result.entries.values() if e.role == "user"}
    assert acked <= prompts, f"{len(acked - prompts)} acknowledged prompts are not in the ledger"
    assert [p for p in result.problems if "torn" not in p.reason] == []  # only the killed writer may tear a line
