"""Memory for the step (issue 27): a prompt with little content of its own is searched with the turns before it,
and a tool result is retrieved on in the background and delivered at the agent's next decision.

Everything runs through the reference host with the bundled plugin on real files: the earlier sessions of
workspace-fixtures/steps/history are replayed first (with a consolidation pass after each, as the daemon would),
then the task or the single events under test.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES

STEPS = FIXTURES / "steps"
RUNBOOK = "sudo ip route add 10.40.0.0/16 dev wg0"
NO_ROUTE = "ssh: connect to host 10.40.2.17 port 22: No route to host"
_NORM = re.compile(r"[^\w]+")


def norm(text: str) -> str:
    return " ".join(_NORM.sub(" ", text.lower()).split())


def holds(delivered: str, text: str) -> bool:
    return norm(text) in norm(delivered)


def _host(ws: Path, settings: dict):
    from memtier_plugin import plugin as builtin
    from memtier_plugin.config import load_config
    from memtier_plugin.consolidation.batch import consolidate_once
    from memtier_plugin.host import Host, replay_session
    from memtier_plugin.memory import Memory

    (ws / "memtier.yaml").write_text(yaml.safe_dump(settings))
    cfg = load_config(flags={"paths.workspace": str(ws)})
    mem = Memory.from_config(cfg)
    host = Host()
    host.register(builtin)
    for path in sorted((STEPS / "history").glob("*.jsonl")):
        replay_session(host, path, ws)
        consolidate_once(cfg)
    return host, mem


def _ctx(ws: Path, session: str = "s-2026-11-19-test"):
    from memtier_plugin.events import HookContext

    return HookContext(agent_id="ops", session_key="agent:ops:main", session_id=session, run_id=f"{session}-r1",
                       project="harbor", workspace_dir=str(ws))


def _ts(iso: str) -> float:
    from memtier_plugin.store.episodic import parse_iso

    return parse_iso(iso)


def _failed_deploy(host, ws: Path, ctx):
    from memtier_plugin.events import PromptEvent, ToolCallEvent, ToolResultEvent

    prompt = "Deploy harbor 2.4 to staging."
    first = host.before_prompt_build(PromptEvent(prompt=prompt, messages=[{"role": "user", "content": prompt}],
                                                 timestamp=_ts("2026-11-19T10:00:05Z")), ctx)
    call = ToolCallEvent("deploy", {"app": "harbor", "env": "staging", "ref": "v2.4.0"}, "call-x-1",
                         _ts("2026-11-19T10:00:20Z"))
    host.pre_tool(call, ctx)
    host.post_tool(ToolResultEvent(call.tool_name, call.params, call.tool_call_id, None, NO_ROUTE, 3000,
                                   _ts("2026-11-19T10:00:24Z")), ctx)
    return first


# ---------------------------------------------------------------- "No route to host" at the next decision
def test_no_route_to_host_brings_the_runbook_to_the_next_pre_tool(tmp_path):
    """The failed deploy's result is retrieved on in the background; the agent's next call gets the runbook that
    worked on 2026-11-05 as a supplement, once."""
    from memtier_plugin.events import ToolCallEvent

    ws = tmp_path / "ws"
    ws.mkdir()
    host, mem = _host(ws, {})
    ctx = _ctx(ws)
    first = _failed_deploy(host, ws, ctx)
    assert not holds(first.prepend_context or "", RUNBOOK)  # the prompt alone did not bring it
    step = getattr(mem, "step_recall", None)  # the model's own time, in which the retrieval runs
    assert step.wait(ctx.session_id, 60.0) if step is not None else time.sleep(5) is None  # (a memtier without it)
    retry = ToolCallEvent("exec", {"cmd": "ping -c1 10.40.2.17"}, "call-x-2", _ts("2026-11-19T10:00:40Z"))
    decision = host.pre_tool(retry, ctx)
    assert decision.supplement and holds(decision.supplement, RUNBOOK), decision.supplement
    assert not decision.block
    assert "certbot" not in decision.supplement
    again = host.pre_tool(ToolCallEvent("exec", {"cmd": "ip route"}, "call-x-3", _ts("2026-11-19T10:00:50Z")), ctx)
    assert not holds(again.supplement or "", RUNBOOK)  # delivered once


def test_no_route_to_host_brings_the_runbook_to_the_next_prompt(tmp_path):
    """With no tool call in between, the next prompt's block carries it (merged into the same block), even with
    the recent-turns query switched off: it comes from the tool result, not from the prompt's words."""
    from memtier_plugin.events import PromptEvent

    ws = tmp_path / "ws"
    ws.mkdir()
    host, _mem = _host(ws, {"step": {"min_terms": 0, "wait_ms": 60000}})
    ctx = _ctx(ws)
    _failed_deploy(host, ws, ctx)
    ctx.run_id = f"{ctx.session_id}-r2"
    nxt = host.before_prompt_build(PromptEvent(prompt="Ugh. Fix it and retry.", messages=[],
                                               timestamp=_ts("2026-11-19T10:01:00Z")), ctx)
    block = nxt.prepend_context or ""
    assert holds(block, RUNBOOK), block
    assert block.count("<memtier-memory>") <= 2  # (one recall block, plus the hooks' block when they fire)
    later = host.before_prompt_build(PromptEvent(prompt="Ugh. Fix it and retry.", messages=[],
                                                 timestamp=_ts("2026-11-19T10:02:00Z")), ctx)
    assert not holds(later.prepend_context or "", RUNBOOK)  # delivered once; the prompt alone does not find it


def test_neither_post_tool_nor_pre_tool_waits_for_the_step_retrieval(tmp_path, monkeypatch):
    """The background retrieval is held (its re-ranking stuck, say): post_tool and the next pre_tool answer at
    once, without it; once it is done, the decision after gets it."""
    import threading

    from memtier_plugin.events import ToolCallEvent, ToolResultEvent

    ws = tmp_path / "ws"
    ws.mkdir()
    host, mem = _host(ws, {})
    ctx = _ctx(ws)
    gate, started = threading.Event(), threading.Event()
    real = mem.retriever.recall

    def held(query, **kw):
        if kw.get("background"):
            started.set()
            gate.wait(60)
        return real(query, **kw)

    monkeypatch.setattr(mem.retriever, "recall", held)
    try:
        t0 = time.perf_counter()
        host.post_tool(ToolResultEvent("deploy", {"app": "harbor", "env": "staging"}, "call-y-1", None, NO_ROUTE, 3000,
                                       _ts("2026-11-19T10:00:24Z")), ctx)
        assert started.wait(30)  # the retrieval is running, and held
        first = host.pre_tool(ToolCallEvent("exec", {"cmd": "ip route"}, "call-y-2", _ts("2026-11-19T10:00:30Z")), ctx)
        assert time.perf_counter() - t0 < 10 and not holds(first.supplement or "", RUNBOOK)
        assert mem.step_recall.pending(ctx.session_id) == 1
    finally:
        gate.set()
    assert mem.step_recall.wait(ctx.session_id, 60.0)
    nxt = host.pre_tool(ToolCallEvent("exec", {"cmd": "ping 10.40.2.17"}, "call-y-3", _ts("2026-11-19T10:00:40Z")), ctx)
    assert holds(nxt.supplement or "", RUNBOOK)


def test_tool_results_off_retrieves_nothing_on_them(tmp_path):
    from memtier_plugin.events import PromptEvent

    ws = tmp_path / "ws"
    ws.mkdir()
    host, mem = _host(ws, {"step": {"min_terms": 0, "tool_results": False}})
    ctx = _ctx(ws)
    _failed_deploy(host, ws, ctx)
    assert mem.step_recall.pending(ctx.session_id) == 0
    nxt = host.before_prompt_build(PromptEvent(prompt="Ugh. Fix it and retry.", messages=[],
                                               timestamp=_ts("2026-11-19T10:01:00Z")), ctx)
    assert not holds(nxt.prepend_context or "", RUNBOOK)


# ---------------------------------------------------------------- the replayed multi-step fixture
def _decisions(ws: Path) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """The task replayed through the host: [(decision name, what was delivered)] in order, and each
    tool call's position in that list."""
    from memtier_plugin.host import replay_session

    records = [yaml.safe_load(line) for line in (STEPS / "task.jsonl").read_text().splitlines() if line.strip()]
    step_of = {r["content"]: r["step"] for r in records if r.get("type") == "user"}
    out: list[tuple[str, str]] = []
    calls: dict[str, int] = {}

    def on_turn(_report, turn):
        out.append((f"prompt {step_of[turn.prompt]}", (turn.memory.prepend_context if turn.memory else "") or ""))
        for call, decision, _error in turn.tools:
            out.append((f"pre_tool {call.tool_call_id}", decision.supplement or ""))
            calls[call.tool_call_id] = len(out) - 1

    replay_session(_HOST[0], STEPS / "task.jsonl", ws, on_turn=on_turn)
    return out, calls


_HOST: list = []


def test_replayed_fixture_delivers_each_due_item_at_its_step_and_no_noise(tmp_path, capsys):
    """workspace-fixtures/steps: every annotated due item at its decision, nothing annotated as not applying.
    The replay has no think time, so the prompt is let wait for a step retrieval as long as it takes
    (step.wait_ms); at the default a retrieval not done by then reaches the decision after."""
    spec = yaml.safe_load((STEPS / "expected.yaml").read_text())
    ws = tmp_path / "ws"
    ws.mkdir()
    host, _mem = _host(ws, {"step": {"wait_ms": 60000}})
    _HOST[:] = [host]
    decisions, calls = _decisions(ws)
    by_name = {name: text for name, text in decisions}
    report, failures = [], []
    for step in spec["steps"]:
        kind, ref = step["decision"].split(" ", 1)
        known = f" (known: {step['known']})" if step.get("known") else ""
        if kind == "after":
            name, text = decisions[calls[ref] + 1]
        else:
            name, text = step["decision"], by_name[step["decision"]]
        due = [t for t in step.get("must", []) if holds(text, t)]
        noise = [t for t in step.get("must_not", []) if holds(text, t)]
        report.append(f"{step['decision']:<22} (at {name}): delivered when due {len(due)}/{len(step.get('must', []))}"
                      f", noise {len(noise)}/{len(step.get('must_not', []))}{known}")
        if (len(due) < len(step.get("must", [])) or noise) and not known:
            failures.append(f"{step['decision']}: missing {sorted(set(step.get('must', [])) - set(due))}, "
                            f"noise {noise}\n{text}")
    with capsys.disabled():
        print("\nworkspace-fixtures/steps, per step:\n  " + "\n  ".join(report))
    if failures:
        from memtier_plugin.store import traces

        failures.append("recalls of the task (mode, query, delivered id:p):\n" + "\n".join(
            f"  {r['mode']}: {r['query'][:120]!r} -> " + ", ".join(f"{d['id']}:{d.get('probability')}"
                                                         for d in r["delivered"])
            for r in traces.iter_traces(ws / "memory") if r.get("kind") == "trace"
            and r.get("session_id") == "s-2026-11-19-ship"))
    assert not failures, "\n\n".join(failures)


def test_fixture_is_well_formed():
    spec = yaml.safe_load((STEPS / "expected.yaml").read_text())
    records = [yaml.safe_load(line) for line in (STEPS / "task.jsonl").read_text().splitlines() if line.strip()]
    steps = {r["step"] for r in records if r.get("type") == "user"}
    call_ids = [r["tool_call_id"] for r in records if r.get("type") == "tool_call"]
    assert len(call_ids) == len(set(call_ids))
    for step in spec["steps"]:
        kind, ref = step["decision"].split(" ", 1)
        assert kind in ("prompt", "after") and ref in (steps if kind == "prompt" else call_ids), step
        assert step.get("must") or step.get("must_not"), step
        assert step.get("why"), step
        assert set(step) <= {"decision", "why", "must", "must_not", "known"}, step


# ---------------------------------------------------------------- the query of a prompt with little of its own
def test_a_prompt_with_little_content_is_searched_with_the_turns_before_it():
    from memtier_plugin.intake import prompt_query

    msgs = [{"role": "user", "content": "Ship harbor 2.4 to staging."},
            {"role": "assistant", "content": [{"type": "text", "text": "Staging is green. Deploy 2.4 to production?"}]},
            {"role": "tool", "content": "deploy -> ok"},
            {"role": "user", "content": "Yes, go."}]
    q = prompt_query("Yes, go.", msgs, min_terms=3, turns=2)
    assert q.endswith("Yes, go.") and "production" in q and "Ship harbor" in q and "deploy -> ok" not in q
    assert prompt_query("Yes, go.", msgs, min_terms=3, turns=1) == "Staging is green. Deploy 2.4 to production? Yes, go."
    assert prompt_query("Yes, go.", msgs, min_terms=0, turns=2) == "Yes, go."  # off
    own = "Deploy harbor 2.4 to production now"
    assert prompt_query(own, msgs + [{"role": "user", "content": own}], min_terms=3, turns=2) == own
    assert prompt_query("Fine, book it.", [{"role": "assistant", "content": "The 9:15 flight to Porto?"}],
                        min_terms=3, turns=2) == "The 9:15 flight to Porto? Fine, book it."
    report = [{"role": "assistant", "content": "Done: Lisbon Marriott, $189 a night, confirmation 88341207."}]
    assert prompt_query("Perfect, thanks.", report, min_terms=3, turns=2) == "Perfect, thanks."  # answers no question
    secret = prompt_query("ok", [{"role": "user", "content": "the password is hunter2hunter2"},
                                 {"role": "assistant", "content": "Shall I log in?"}], min_terms=3, turns=2)
    assert "hunter2hunter2" not in secret and "log in" in secret


def test_a_reply_that_picks_an_offered_option_is_searched_with_the_offer():
    """"Infante Sagres this time" means what the offer says of it (the $300 budget it was offered within)."""
    from memtier_plugin.intake import prompt_query

    offer = ("The 7:09am train is too early for you, so AP 124 at 11:09am. For hotels within $300: Infante Sagres "
             "($284) or the Porto Marriott ($231, Bonvoy).")
    pick = "Infante Sagres this time, I deserve it. And the 11:09 train."
    msgs = [{"role": "user", "content": "Porto for two nights, please."}, {"role": "assistant", "content": offer},
            {"role": "user", "content": pick}]
    assert prompt_query(pick, msgs, min_terms=3, turns=2) == f"{offer} {pick}"
    three = "Three options: UA 924 at 6:40am, TP 238 at 5:55pm, UA 8802 at 1:15pm earns MileagePlus miles."
    assert prompt_query("Take the United one, miles matter.", [{"role": "assistant", "content": three}],
                        min_terms=3, turns=2).startswith("Three options")
    # naming nothing offered, asking back, or no offer at all: the prompt alone
    other = "Unrelated: rename the parser module and rerun the lint job."
    assert prompt_query(other, msgs[:2], min_terms=3, turns=2) == other
    asked = "Is Infante Sagres near the station?"
    assert prompt_query(asked, msgs[:2], min_terms=3, turns=2) == asked
    report = [{"role": "assistant", "content": "Booked Infante Sagres, Nov 14 to 16, confirmation IS-30118."}]
    assert prompt_query(pick, report, min_terms=3, turns=2) == pick
    assert prompt_query(pick, msgs, min_terms=0, turns=2) == pick  # off
    assert prompt_query("ok", "not a list", min_terms=3, turns=2) == "ok"
    long = prompt_query("ok", [{"role": "assistant", "content": "?" + "x" * 50_000}], min_terms=3, turns=2)
    assert len(long) <= 1100


def test_yes_go_retrieves_what_the_question_before_it_was_about(tmp_path):
    """Through the host: "Yes, go." after "Shall I deploy 2.4 to production?" gets the production rule."""
    from memtier_plugin.events import PromptEvent

    ws = tmp_path / "ws"
    ws.mkdir()
    host, _mem = _host(ws, {})
    ctx = _ctx(ws)
    msgs = [{"role": "user", "content": "Staging looks fine."},
            {"role": "assistant", "content": "Shall I deploy harbor 2.4 to production now?"},
            {"role": "user", "content": "Yes, go."}]
    block = host.before_prompt_build(PromptEvent(prompt="Yes, go.", messages=msgs,
                                                 timestamp=_ts("2026-11-19T10:03:00Z")), ctx).prepend_context or ""
    assert holds(block, "production deploys of harbor only on weekdays"), block


# ---------------------------------------------------------------- what a tool result is worth retrieving on
@pytest.mark.parametrize("tool, params, result, error, known, want", [
    ("deploy", {"host": "db-2.harbor.internal"}, None, NO_ROUTE, "", ["no route to host", "db-2.harbor.internal"]),
    ("exec", {"cmd": "make"}, {"exit_code": 2, "stderr": "cc: fatal error: x.h missing"}, None, "", ["fatal error"]),
    ("book", {}, {"ok": False, "error": "card declined"}, None, "", ["card declined"]),
    ("deploy", {}, {"ok": True, "url": "https://canary-3.harbor.example.com"}, None, "", ["canary-3.harbor.example.com"]),
    ("deploy", {}, {"ok": True, "url": "https://canary-3.harbor.example.com"}, None,
     "deploy canary-3.harbor.example.com", None),
    ("deploy", {}, {"ok": True, "health": "passing"}, None, "", None),
    ("memory_search", {"query": "x"}, {"error": "boom"}, "boom", "", None),
])
def test_tool_query(tool, params, result, error, known, want):
    from memtier_plugin.scheduling.step import tool_query

    q, names = tool_query(tool, params, result, error, known)
    if want is None:
        assert (q, names) == ("", ())
    else:
        assert q.startswith(tool) and all(w in q.lower() for w in want), q
        assert names == (() if error or "ok" not in result or result["ok"] is False else tuple(want))


def test_tool_query_redacts():
    from memtier_plugin.scheduling.step import tool_query

    q, _names = tool_query("exec", {}, None, "auth failed: password=hunter2hunter2 rejected", "")
    assert "hunter2hunter2" not in q and "auth failed" in q


# ---------------------------------------------------------------- config and docs
@pytest.mark.parametrize("key, value", [("step.min_terms", -1), ("step.context_turns", 99), ("step.wait_ms", "soon"),
                                        ("step.tool_result", True)])
def test_bad_step_keys_stop_startup(key, value):
    from memtier_plugin.config import load_config
    from memtier_plugin.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape(key.split(".")[1])):
        load_config(flags={key: value}, use_env=False)


def test_step_keys_are_documented():
    from dataclasses import fields

    from conftest import ROOT
    from memtier_plugin.config import StepConfig

    docs = (ROOT / "docs" / "retrieval.md").read_text()
    for f in fields(StepConfig):
        assert f"step.{f.name}" in docs, f"docs/retrieval.md does not document step.{f.name}"


def test_bench_latency_replays_the_steps_scenario_and_times_pre_tool():
    from conftest import run_cli
    import json

    proc = run_cli("bench", "latency", "--scenario", "steps", "--presets", "paper", "--sizes", "100", "--rounds", "1",
                   "--think-ms", "0", "--set", "standing.embedder=none", "--json", "-q")
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["foresight"], r["phase"]) for r in rows] == [(False, "cold"), (False, "warm"), (True, "cold"),
                                                            (True, "warm")]
    for r in rows:
        assert r["prompts"] == 5 and r["memory_queries"] == 5  # task.jsonl: five prompts, no memory_search
        assert r["pre_tool_p95_ms"] is not None and r["pre_tool_p95_ms"] >= r["pre_tool_p50_ms"] > 0


def test_what_the_agent_holds_in_its_context_is_not_handed_back():
    from memtier_plugin.intake import in_context
    from memtier_plugin.recall.packing import Hit

    def hit(i, tier, role, session, text):
        return Hit(i, text, "2026-11-19T10:00:00Z", session, "ops", role, tier, 1.0)

    asked = "The route was back. Shall I deploy 2.4 to production now?"
    messages = [{"role": "user", "content": "Ship harbor 2.4."}, {"role": "assistant", "content": asked},
                {"role": "user", "content": "Yes, go."}]
    skip = in_context(messages, "s-now")
    assert skip(hit("e1", "episodic", "assistant", "s-now", asked))
    assert skip(hit("e2", "episodic", "assistant", "s-now", "  the route was back.  Shall I deploy 2.4 to production now?"))
    assert skip(hit("k1", "procedural", "skill", "s-now", "skill (worked before for: Ship harbor 2.4.): deploy(...)"))
    assert not skip(hit("e3", "episodic", "assistant", "s-before", asked))  # another session: not in context
    assert not skip(hit("e4", "episodic", "user", "s-now", "A message the host compacted away"))
    assert not skip(hit("k2", "procedural", "skill", "s-before", "skill (worked before for: deploy): deploy(...)"))
    assert not skip(hit("g1", "global", "rule", "s-now", "production deploys only on weekdays"))
    assert in_context([], "s-now") is None and in_context(None, "s-now") is None
