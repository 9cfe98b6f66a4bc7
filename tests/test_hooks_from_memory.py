"""Issue 27, items 1-3: hooks written from memory, hooks at every event, working state delivered — through the
reference host (memtier_plugin/host.py), with real files in a temporary workspace."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from memtier_plugin import plugin
from memtier_plugin.cli import cli
from memtier_plugin.events import (AgentEndEvent, HookContext, PromptEvent, SessionEndEvent, ToolCallEvent,
                                   ToolResultEvent)
from memtier_plugin.host import Host
from memtier_plugin.memory import memory_for

SAT = 1_793_437_200.0  # 2026-10-31, a Saturday (UTC)
MON = SAT + 2 * 86400


@pytest.fixture
def host(workspace):
    h = Host()
    h.register(plugin, "memtier")
    return h


def ctx_of(workspace, session, run="r1", project="atlas") -> HookContext:
    return HookContext(agent_id="ops", session_id=session, run_id=run, project=project, workspace_dir=str(workspace))


def hooks_file(workspace, text: str) -> None:
    folder = workspace / "memory" / "hooks"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mine.yaml").write_text(text)


def loaded(ctx) -> None:
    """The hooks files as they are now (events load them in the background; a test needs them now)."""
    memory_for(ctx).hook_scheduler.refresh()


def state_rule(host, workspace) -> str:
    """The user states the rule once; the run ends (maintenance writes it). The node's id."""
    ctx = ctx_of(workspace, "s-rule")
    host.before_prompt_build(PromptEvent("A rule going forward: production deploys only on weekdays.",
                                         timestamp=MON - 7 * 86400), ctx)
    host.agent_end(AgentEndEvent(success=True, timestamp=MON - 7 * 86400), ctx)
    host.session_end(SessionEndEvent(), ctx)
    ledger = workspace / "memory" / "global" / "knowledge.jsonl"
    nodes = [json.loads(line) for line in ledger.read_text().splitlines()]
    return next(n["id"] for n in nodes if "weekdays" in n.get("content", ""))


@pytest.mark.parametrize("mode", ["combined", "hooks"])
def test_a_weekday_rule_stated_once_holds_a_saturday_production_deploy_and_the_block_says_so(host, workspace,
                                                                                          monkeypatch, mode):
    monkeypatch.setenv("MEMTIER_SCHEDULING__MODE", mode)
    assert not (workspace / "memory" / "hooks").exists() or not list((workspace / "memory" / "hooks").glob("*.y*ml"))
    node_id = state_rule(host, workspace)
    ctx = ctx_of(workspace, "s-sat")
    loaded(ctx)
    host.before_prompt_build(PromptEvent("ship atlas v2 now", timestamp=SAT), ctx)
    sat = host.pre_tool(ToolCallEvent("deploy", {"app": "atlas", "env": "production"}, "c1", SAT), ctx)
    assert sat.block, f"{mode}: the Saturday production deploy went through"
    assert "bound memory for this call" in sat.block_reason and f"[rule | {node_id}]" in sat.block_reason
    assert "weekdays" in sat.block_reason
    again = host.pre_tool(ToolCallEvent("deploy", {"app": "atlas", "env": "production"}, "c2", SAT), ctx)
    assert again.block  # a hold guards every such call, not once per task
    staging = host.pre_tool(ToolCallEvent("deploy", {"app": "atlas", "env": "staging"}, "c3", SAT), ctx)
    assert not staging.block
    mon = ctx_of(workspace, "s-mon")
    host.before_prompt_build(PromptEvent("ship atlas v2 now", timestamp=MON), mon)
    assert not host.pre_tool(ToolCallEvent("deploy", {"app": "atlas", "env": "production"}, "c4", MON), mon).block
    derived = workspace / "memory" / "hooks" / ".derived" / "hooks.jsonl"
    rec = json.loads(derived.read_text().splitlines()[0])
    assert rec["node_id"] == node_id and rec["source"] == "rule" and rec["hold"] is True


def test_inspect_hooks_lists_the_derived_hook_and_it_is_retired_with_its_node(host, workspace, monkeypatch):
    monkeypatch.setenv("MEMTIER_SCHEDULING__MODE", "hooks")
    node_id = state_rule(host, workspace)
    out = CliRunner().invoke(cli, ["-w", str(workspace), "inspect", "hooks", "--json"])
    assert out.exit_code == 0, out.output
    rows = [json.loads(line) for line in out.output.splitlines() if line.strip()]
    mine = [r for r in rows if r["entry_id"] == node_id]
    assert mine and mine[0]["source"] == f"rule {node_id}" and mine[0]["current"] and mine[0]["hold"]
    assert "pre_tool" in mine[0]["events"]
    # another process retires the node (a revision, forget): its hook goes at the scheduler's next load
    with open(workspace / "memory" / "global" / "knowledge.jsonl", "a") as fh:
        fh.write(json.dumps({"v": 1, "kind": "retired", "id": "up-x", "timestamp": "2026-10-30T00:00:00Z",
                             "node_id": node_id, "by": "gk-other", "reason": "test"}) + "\n")
    ctx = ctx_of(workspace, "s-sat")
    mem = memory_for(ctx)
    mem.hook_scheduler.refresh()
    assert not [h for h in mem.hook_scheduler.hooks if h.entry_id == node_id]
    host.before_prompt_build(PromptEvent("ship atlas v2 now", timestamp=SAT), ctx)
    assert not host.pre_tool(ToolCallEvent("deploy", {"env": "production"}, "c1", SAT), ctx).block
    out = CliRunner().invoke(cli, ["-w", str(workspace), "inspect", "hooks", "--history"])
    assert out.exit_code == 0 and "retired" in out.output


def test_a_hand_written_hook_on_the_same_node_wins(host, workspace, monkeypatch):
    monkeypatch.setenv("MEMTIER_SCHEDULING__MODE", "hooks")
    node_id = state_rule(host, workspace)
    hooks_file(workspace, f"hooks:\n  - id: mine\n    entry_id: {node_id}\n    events: [pre_tool]\n"
                          "    when: {tool: deploy}\n")
    ctx = ctx_of(workspace, "s-sat")
    mem = memory_for(ctx)
    mem.hook_scheduler.refresh()
    d = host.pre_tool(ToolCallEvent("deploy", {"env": "production"}, "c1", SAT), ctx)
    assert not d.block and f"[mine | {node_id}]" in d.supplement  # the person's hook, which delivers, not holds


def test_an_entry_id_hook_delivers_that_entry(host, workspace):
    ctx = ctx_of(workspace, "s1")
    host.before_prompt_build(PromptEvent("Runbook for pay-legacy-1: it moved to pay-app-2, use systemctl there.",
                                         timestamp=MON), ctx)
    host.agent_end(AgentEndEvent(success=True, timestamp=MON), ctx)
    entry = next(json.loads(line) for p in (workspace / "memory" / "episodic").rglob("*.jsonl")
                 for line in p.read_text().splitlines() if "Runbook for pay-legacy-1" in line)
    hooks_file(workspace, f"hooks:\n  - id: legacy-host\n    entry_id: {entry['id']}\n    events: [pre_tool]\n"
                          "    when: {arg: {path: host, equals: pay-legacy-1}}\n")
    ctx2 = ctx_of(workspace, "s2")
    loaded(ctx2)
    d = host.pre_tool(ToolCallEvent("ssh", {"host": "pay-legacy-1"}, "c1", MON), ctx2)
    assert f"[legacy-host | {entry['id']}]" in d.supplement and "moved to pay-app-2" in d.supplement


def no_route_runbook(host, workspace) -> HookContext:
    """A person's post_tool hook binding a runbook to "No route to host"; a task started. Its context."""
    hooks_file(workspace, "hooks:\n  - id: no-route\n    entry: \"Runbook: pay-legacy-1 is gone; use pay-app-2.\"\n"
                          "    events: [post_tool]\n    when: {state: {key: error, contains: No route to host}}\n")
    ctx = ctx_of(workspace, "s1")
    loaded(ctx)
    host.before_prompt_build(PromptEvent("restart the payments worker", timestamp=MON), ctx)
    return ctx


def test_a_post_tool_hook_sees_the_error_and_delivers_at_the_next_decision(host, workspace):
    ctx = no_route_runbook(host, workspace)
    call = ToolCallEvent("ssh", {"host": "pay-legacy-1"}, "c1", MON)
    assert "Runbook" not in (host.pre_tool(call, ctx).supplement or "")
    host.post_tool(ToolResultEvent("ssh", call.params, "c1", result="ok", timestamp=MON), ctx)
    assert "Runbook" not in (host.pre_tool(ToolCallEvent("ls", {}, "c2", MON), ctx).supplement or "")
    host.post_tool(ToolResultEvent("ssh", call.params, "c3", error="ssh: connect: No route to host",
                                   timestamp=MON), ctx)
    nxt = host.pre_tool(ToolCallEvent("ssh", {"host": "pay-app-2"}, "c4", MON), ctx)
    assert "Runbook: pay-legacy-1 is gone" in (nxt.supplement or "")
    # delivered once: the next decision does not get it again
    assert "Runbook" not in (host.pre_tool(ToolCallEvent("ls", {}, "c5", MON), ctx).supplement or "")


def test_a_post_tool_delivery_waits_for_the_next_prompt_when_no_call_comes(host, workspace):
    ctx = no_route_runbook(host, workspace)
    host.post_tool(ToolResultEvent("ssh", {"host": "pay-legacy-1"}, "c1", error="No route to host",
                                   timestamp=MON), ctx)
    host.agent_end(AgentEndEvent(success=False, timestamp=MON), ctx)
    block = host.before_prompt_build(PromptEvent("what now?", timestamp=MON), ctx_of(workspace, "s1", "r2"))
    assert "Runbook: pay-legacy-1 is gone" in block.prepend_context and "[no-route]" in block.prepend_context


def test_a_phase_hook_holds_only_in_its_phase(host, workspace):
    hooks_file(workspace, "hooks:\n  - id: after-failure\n"
                          "    entry: \"After a failed step, check the runbook first.\"\n"
                          "    events: [pre_tool]\n    when: {phase: recover}\n")
    ctx = ctx_of(workspace, "s1")
    loaded(ctx)
    host.before_prompt_build(PromptEvent("restart the payments worker", timestamp=MON), ctx)
    first = host.pre_tool(ToolCallEvent("ssh", {"host": "a"}, "c1", MON), ctx)
    assert "check the runbook" not in (first.supplement or "")  # phase plan
    host.post_tool(ToolResultEvent("ssh", {"host": "a"}, "c1", result="done", timestamp=MON), ctx)
    assert "check the runbook" not in (host.pre_tool(ToolCallEvent("ls", {}, "c2", MON), ctx).supplement or "")
    host.post_tool(ToolResultEvent("ls", {}, "c2", error="permission denied", timestamp=MON), ctx)
    assert "check the runbook" in host.pre_tool(ToolCallEvent("cat", {"path": "notes"}, "c3", MON), ctx).supplement


def test_the_next_session_of_a_project_starts_with_its_pending_steps(host, workspace):
    ctx = ctx_of(workspace, "s1")
    host.before_prompt_build(PromptEvent("Migrate the atlas database to schema 0042.", timestamp=MON), ctx)
    host.pre_tool(ToolCallEvent("db_migrate", {"version": "0042"}, "c1", MON), ctx)
    host.post_tool(ToolResultEvent("db_migrate", {"version": "0042"}, "c1", result="ok", timestamp=MON), ctx)
    host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content":
                   "Applied migration 0042. Still pending: apply migration 0043 after the backup finishes."}],
                   success=True, timestamp=MON), ctx)
    host.session_end(SessionEndEvent(), ctx)
    nxt = ctx_of(workspace, "s2")
    first = host.before_prompt_build(PromptEvent("Good morning, let's continue.", timestamp=MON + 3600), nxt)
    assert "apply migration 0043" in first.prepend_context and "working state" in first.prepend_context
    ws_id = first.prepend_context.split("[ws-", 1)[1].split(" ", 1)[0]
    second = host.before_prompt_build(PromptEvent("And then?", timestamp=MON + 3700), ctx_of(workspace, "s2", "r2"))
    assert "apply migration 0043" not in (second.prepend_context or "")  # once per task
    got = host.memory_tool("memory_get", {"id": f"ws-{ws_id}"}, nxt)
    assert got["found"] and "apply migration 0043" in got["content"]
    other = host.before_prompt_build(PromptEvent("Good morning, let's continue.", timestamp=MON + 3600),
                                     ctx_of(workspace, "s3", project="blog"))
    assert "0043" not in (other.prepend_context or "")  # another project's state is not this one's


def test_a_conversation_without_tool_calls_leaves_no_working_state_to_deliver(host, workspace):
    ctx = ctx_of(workspace, "s1")
    host.before_prompt_build(PromptEvent("What do you think of the atlas roadmap?", timestamp=MON), ctx)
    host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": "I will think about it later."}],
                                 success=True, timestamp=MON), ctx)
    first = host.before_prompt_build(PromptEvent("Good morning.", timestamp=MON + 3600), ctx_of(workspace, "s2"))
    assert "working state" not in (first.prepend_context or "")


def test_a_newer_working_state_supersedes_the_older(host, workspace):
    for i, (session, text) in enumerate([("s1", "Done for today. Next: apply migration 0043."),
                                        ("s2", "Applied 0043. Next: rotate the atlas API keys.")]):
        ctx = ctx_of(workspace, session)
        host.before_prompt_build(PromptEvent("Carry on with atlas.", timestamp=MON + i * 3600), ctx)
        host.post_tool(ToolResultEvent("db_status", {}, f"c{i}", result="ok", timestamp=MON + i * 3600), ctx)
        host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": text}], success=True,
                                     timestamp=MON + i * 3600), ctx)
    block = host.before_prompt_build(PromptEvent("Carry on with atlas.", timestamp=MON + 7200),
                                     ctx_of(workspace, "s3")).prepend_context
    state = [line for line in block.splitlines() if "working state ·" in line]
    assert len(state) == 1 and "rotate the atlas API keys" in state[0] and "0043." not in state[0]


def test_with_the_model_as_proposer_its_hooks_are_checked_as_data_and_stored_beside_the_node(workspace, monkeypatch):
    import threading

    from test_llm import Scripted, completion

    srv = Scripted()
    threading.Thread(target=srv.serve_forever, args=(0.01,), daemon=True).start()
    try:
        for key, value in {"MODEL__ENABLED": "true", "MODEL__BASE_URL": srv.url, "MODEL__MODEL": "m",
                           "MODEL__MAX_RETRIES": "0", "HOOKS__PROPOSER": "model"}.items():
            monkeypatch.setenv(f"MEMTIER_{key}", value)
        proposal = {"hooks": [{"id": "deploy-talk", "events": ["query"],
                               "when": {"query": {"any": ["deploy", "release"]}}}]}
        srv.script = [(200, completion(json.dumps(proposal)), 0)]
        host = Host()
        host.register(plugin, "memtier")
        node_id = state_rule(host, workspace)
        assert any(r["body"]["messages"][1]["content"].endswith("production deploys only on weekdays.")
                   for r in srv.requests)
        recs = [json.loads(line) for line in
                (workspace / "memory" / "hooks" / ".derived" / "hooks.jsonl").read_text().splitlines()]
        assert {(r["node_id"], r["source"]) for r in recs} == {(node_id, "rule"), (node_id, "model")}
        ctx = ctx_of(workspace, "s2")
        block = host.before_prompt_build(PromptEvent("plan the release for Tuesday", timestamp=MON), ctx)
        assert f"[deploy-talk | {node_id}]" in block.prepend_context
        # code in a proposal is refused as data: nothing of it is stored, the rules' hook stands
        srv.script = [(200, completion(json.dumps({"hooks": [{"id": "x", "events": ["pre_tool"],
                                                              "when": {"exec": "rm -rf /"}}]})), 0)]
        c3, asked = ctx_of(workspace, "s3"), len(srv.requests)
        host.before_prompt_build(PromptEvent("Going forward, never delete production databases on Fridays.",
                                             timestamp=MON), c3)
        host.agent_end(AgentEndEvent(success=True, timestamp=MON), c3)
        text = (workspace / "memory" / "hooks" / ".derived" / "hooks.jsonl").read_text()
        assert len(srv.requests) == asked + 1  # the new rule was written, and the model asked about it
        assert "rm -rf" not in text and text.count('"source":"model"') == 1 and "never delete" in text
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_task_whose_last_run_only_talks_still_hands_over_its_pending_steps(host, workspace):
    ctx = ctx_of(workspace, "s1")
    host.before_prompt_build(PromptEvent("Deploy atlas v1.4.0 to staging.", timestamp=MON), ctx)
    host.post_tool(ToolResultEvent("deploy", {"app": "atlas", "ref": "v1.4.0"}, "c1", error="index exists",
                                   timestamp=MON), ctx)
    host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": "The deploy failed."}], success=False,
                                 timestamp=MON), ctx)
    ctx2 = ctx_of(workspace, "s1", "r2")
    host.before_prompt_build(PromptEvent("Let's stop here.", timestamp=MON + 60), ctx2)
    host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content":
                   "Okay. Next step: make 0042 use CREATE INDEX IF NOT EXISTS, then redeploy v1.4.0 to staging."}],
                   success=True, timestamp=MON + 60), ctx2)
    block = host.before_prompt_build(PromptEvent("Back to atlas.", timestamp=MON + 86400),
                                     ctx_of(workspace, "s2")).prepend_context
    assert "pending: Next step: make 0042 use CREATE INDEX IF NOT EXISTS, then redeploy v1.4.0 to staging." in block


def run_calls(host, ctx, prompt: str, calls: list[tuple[str, dict]], ts: float) -> None:
    """One run: the prompt, each call through pre_tool and post_tool (succeeding), agent_end."""
    host.before_prompt_build(PromptEvent(prompt, timestamp=ts), ctx)
    for i, (tool, params) in enumerate(calls):
        host.pre_tool(ToolCallEvent(tool, params, f"c{i}", ts), ctx)
        host.post_tool(ToolResultEvent(tool, params, f"c{i}", result="ok", timestamp=ts), ctx)
    host.agent_end(AgentEndEvent(success=True, timestamp=ts), ctx)


def test_a_skills_precondition_becomes_a_hook_retired_when_the_skill_is_revised(host, workspace):
    run_calls(host, ctx_of(workspace, "s1"), "Migrate the atlas database to schema 0042.",
              [("db_backup", {"db": "atlas"}), ("db_migrate", {"db": "atlas", "version": "0042"})], MON)
    skill = json.loads((workspace / "memory" / "procedural" / "atlas.jsonl").read_text().splitlines()[-1])
    ctx = ctx_of(workspace, "s2")
    host.before_prompt_build(PromptEvent("Quick: bump the schema.", timestamp=MON + 86400), ctx)
    skipped = host.pre_tool(ToolCallEvent("db_migrate", {"db": "atlas", "version": "0043"}, "c1", MON + 86400), ctx)
    assert f"[precondition | {skill['id']}]" in skipped.supplement and "db_backup" in skipped.supplement
    ctx3 = ctx_of(workspace, "s3")
    host.before_prompt_build(PromptEvent("Quick: bump the schema.", timestamp=MON + 86400), ctx3)
    host.post_tool(ToolResultEvent("db_backup", {"db": "atlas"}, "c1", result="ok", timestamp=MON + 86400), ctx3)
    done = host.pre_tool(ToolCallEvent("db_migrate", {"db": "atlas", "version": "0043"}, "c2", MON + 86400), ctx3)
    assert "[precondition" not in (done.supplement or "")  # its first step is done: nothing to remind
    blog = ctx_of(workspace, "s4", project="blog")
    host.before_prompt_build(PromptEvent("Quick: bump the schema.", timestamp=MON + 86400), blog)
    other = host.pre_tool(ToolCallEvent("db_migrate", {"db": "blog"}, "c1", MON + 86400), blog)
    assert "[precondition" not in (other.supplement or "")  # another project's skill
    billing = ctx_of(workspace, "s4b")
    host.before_prompt_build(PromptEvent("Quick: bump the schema.", timestamp=MON + 86400), billing)
    elsewhere = host.pre_tool(ToolCallEvent("db_migrate", {"db": "billing"}, "c1", MON + 86400), billing)
    assert "[precondition" not in (elsewhere.supplement or "")  # the same tool on another target
    # the same kind of task done again: a revision supersedes the skill, and its hook goes with it
    run_calls(host, ctx_of(workspace, "s5"), "Migrate the atlas database to schema 0043.",
              [("db_backup", {"db": "atlas"}), ("db_migrate", {"db": "atlas", "version": "0043"})], MON + 2 * 86400)
    revised = json.loads((workspace / "memory" / "procedural" / "atlas.jsonl").read_text().splitlines()[-1])
    assert revised["supersedes"] == skill["id"]
    ctx6 = ctx_of(workspace, "s6")
    host.before_prompt_build(PromptEvent("Quick: bump the schema.", timestamp=MON + 3 * 86400), ctx6)
    again = host.pre_tool(ToolCallEvent("db_migrate", {"db": "atlas"}, "c1", MON + 3 * 86400), ctx6)
    assert f"[precondition | {revised['id']}]" in again.supplement and skill["id"] not in again.supplement


def test_a_skills_first_call_is_a_precondition_only_when_it_acts_on_what_the_last_one_does():
    """A backup of the database the migration runs on is a precondition; a train booked before a hotel, or a
    file edited before a deploy, is just what that run did (the demo handed a hotel booking "book_train(...) →
    book_hotel(...)" as a precondition)."""
    from memtier_plugin.scheduling.rule_hooks import skill_proposal

    def skill(*steps):
        return {"kind": "skill", "id": "sk-20261018-076b6f9bb852", "project": "travel",
                "steps": [{"tool": t, "params": p} for t, p in steps]}

    backup = skill(("db_backup", {"db": "atlas"}), ("db_migrate", {"db": "atlas", "version": "0042"}))
    assert skill_proposal(backup)["hook"]["id"] == "precondition"
    across = skill(("snapshot", {"database": "atlas"}), ("deploy", {"app": "atlas", "env": "staging"}))
    assert skill_proposal(across) is not None  # the same target under another argument's name
    assert skill_proposal(skill(("book_train", {"train": "AP 124", "date": "2026-11-14"}),
                                ("book_hotel", {"hotel_id": "infante-sagres", "room": "deluxe double"}))) is None
    assert skill_proposal(skill(("edit_file", {"path": "migrations/0042.sql"}), ("git_commit", {"message": "m"}),
                                ("deploy", {"app": "atlas", "env": "staging"}))) is None
    assert skill_proposal(skill(("db_backup", {"db": "billing"}), ("db_migrate", {"db": "atlas"}))) is None
    edited = {**backup, "steps": ["db_backup", *backup["steps"]]}  # a step that is no mapping (edited by hand)
    assert skill_proposal(edited) is None


def test_a_skill_id_in_a_hooks_answer_is_not_taken_for_an_api_key():
    from memtier_plugin.redact import redact

    line = "- [precondition | sk-20261102-f6f70df29ccf] skill"
    assert redact(line)[0] == line
    for key in ("sk-proj-AbC123def456GHI789jkl012MNO345", "sk-20261102-f6f70df29ccf9abc", "sk-abc123def456ghi789jkl012"):
        assert redact(f"token {key}")[0] == "token [REDACTED:openai_key]"


def test_a_forgotten_working_state_is_not_delivered_or_handed_out(host, workspace):
    from memtier_plugin import forgetting

    ctx = ctx_of(workspace, "s1")
    host.before_prompt_build(PromptEvent("Migrate the atlas database to schema 0042.", timestamp=MON), ctx)
    host.post_tool(ToolResultEvent("db_migrate", {"version": "0042"}, "c1", result="ok", timestamp=MON), ctx)
    host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content":
                   "Applied migration 0042. Still pending: apply migration 0043 after the backup finishes."}],
                   success=True, timestamp=MON), ctx)
    host.session_end(SessionEndEvent(), ctx)
    mem = memory_for(ctx)
    state = mem.workspace_store("state", "atlas").refresh()
    ws_id = state[-1]["id"]
    assert forgetting.forget(mem, [ws_id])["forgotten"] == [{"id": ws_id, "layer": "state"}]
    nxt = ctx_of(workspace, "s2")
    first = host.before_prompt_build(PromptEvent("Good morning, let's continue.", timestamp=MON + 3600), nxt)
    assert "0043" not in (first.prepend_context or "")
    assert not host.memory_tool("memory_get", {"id": ws_id}, nxt)["found"]


def test_closing_a_memory_waits_for_the_hooks_background_load(workspace):
    """The hooks' background load writes the derived hooks' file: once the Memory is closed, nothing may still
    write into its memory folder (a replay that removes the folder then found it made again)."""
    import threading
    import time

    from memtier_plugin.config import load_config
    from memtier_plugin.memory import Memory

    mem = Memory(load_config(flags={"paths.workspace": str(workspace)}))
    sched = mem.hook_scheduler
    sched.wait_loaded(10)
    started, release = threading.Event(), threading.Event()

    def slow_source():
        started.set()
        release.wait(0.5)  # still loading when close is called
        return None

    sched.add_source("slow", slow_source)
    loader = sched.load_in_background()
    assert started.wait(5)
    t0 = time.monotonic()
    mem.close()
    assert not loader.is_alive()
    assert time.monotonic() - t0 >= 0.3  # close waited for the load to finish, it did not return at once
