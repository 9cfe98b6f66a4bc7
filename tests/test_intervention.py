"""Issue 13 (first part): pre-commit intervention by rules, through the reference host and the demo scenario."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, run_cli
from memtier_plugin import plugin
from memtier_plugin.events import AgentEndEvent, HookContext, PromptEvent, SessionEndEvent, ToolCallEvent
from memtier_plugin.host import Host, replay_session
from memtier_plugin.intervention.rules import conflicts, decide, explicit_in_task
from memtier_plugin.layers.standing import Item

SAT = 1_793_437_200.0  # 2026-10-31, a Saturday (UTC)
MON = SAT + 2 * 86400


def item(content, label="rule", attribute=""):
    return Item(id="gk-x", content=content, label=label, tier="global", timestamp="2026-10-13", attribute=attribute)


@pytest.mark.parametrize("content,tool,params,ts,held", [
    ("production deploys only on weekdays, never on Saturday or Sunday.", "deploy", {"env": "production"}, SAT, True),
    ("production deploys only on weekdays, never on Saturday or Sunday.", "deploy", {"env": "production"}, MON, False),
    ("production deploys only on weekdays, never on Saturday or Sunday.", "schedule_deploy",
     {"env": "production", "at": "2026-11-02T09:00:00Z"}, SAT, False),  # runs on a Monday
    ("production deploys only on weekdays, never on Saturday or Sunday.", "read_logs", {"app": "atlas"}, SAT, False),
    ("never book flights before 8am, I'm useless that early.", "book_flight", {"depart": "2026-12-01T06:15"}, MON, True),
    ("never book flights before 8am, I'm useless that early.", "book_flight", {"depart": "2026-12-01T10:20"}, MON, False),
    ("I've changed my mind on hotels: my budget is now up to $300 a night.", "book_hotel",
     {"hotel_id": "x", "price_per_night_usd": 420}, MON, True),
    ("I've changed my mind on hotels: my budget is now up to $300 a night.", "book_hotel",
     {"hotel_id": "x", "price_per_night_usd": 165}, MON, False),
    # a call's time said with am/pm is read so: 6:45 PM is not before 8am
    ("never book flights before 8am, I'm useless that early.", "book_flight", {"depart": "6:45 PM"}, MON, False),
    ("never book flights before 8am, I'm useless that early.", "book_flight", {"depart": "6:45 am"}, MON, True),
    # a time a call may not start after
    ("Never send emails after 9pm, people are asleep.", "send_email", {"to": "x", "send_at": "2026-12-01T22:30"},
     MON, True),
    ("Never send emails after 9pm, people are asleep.", "send_email", {"to": "x", "send_at": "2026-12-01T20:00"},
     MON, False),
    ("Never book flights that arrive after 11:30pm.", "book_flight", {"flight": "UA 1", "arrival": "23:50"}, MON,
     True),
    ("Never book flights that arrive after 11:30pm.", "book_flight", {"flight": "UA 1", "arrival": "22:10"}, MON,
     False),
    # "after 9" without am or pm says no clock: nothing is held on a guess
    ("Never send emails after 9, people are asleep.", "send_email", {"to": "x", "send_at": "2026-12-01T10:00"},
     MON, False),
    # a cap or floor said in other common ways: after the amount, as a budget, in words of the currency
    ("My hotel budget is $250 a night.", "book_hotel", {"hotel_id": "x", "price_per_night": 280}, MON, True),
    ("My hotel budget is $250 a night.", "book_hotel", {"hotel_id": "x", "price_per_night": 240}, MON, False),
    ("Hotels: $300 max a night.", "book_hotel", {"hotel_id": "x", "price_per_night": 320}, MON, True),
    ("Budget for hotels: $150/night max.", "book_hotel", {"hotel_id": "x", "price_per_night": 160}, MON, True),
    ("No more than 300 dollars a night for hotels.", "book_hotel", {"hotel_id": "x", "price_per_night": 320}, MON,
     True),
    ("No more than 300 dollars a night for hotels.", "book_hotel", {"hotel_id": "x", "price_per_night": 280}, MON,
     False),
    ("Hotels below 250 euros per night.", "book_hotel", {"hotel_id": "x", "price_per_night": 260}, MON, True),
    ("Hotels at 120 euros a night or more, the cheap ones are grim.", "book_hotel",
     {"hotel_id": "x", "price_per_night": 100}, MON, True),
    ("I don't mind hotels up to $300 a night.", "book_hotel", {"hotel_id": "x", "price_per_night": 280}, MON, False),
    # "over" under a "never" is a cap, not a floor: a $250 room is within it
    ("Never book a hotel over $300 a night.", "book_hotel", {"hotel_id": "x", "price_per_night": 420}, MON, True),
    ("Never book a hotel over $300 a night.", "book_hotel", {"hotel_id": "x", "price_per_night": 250}, MON, False),
    ("Only book hotels at least $80 a night, cheaper ones are grim.", "book_hotel",
     {"hotel_id": "x", "price_per_night": 60}, MON, True),
])
def test_a_call_is_held_only_when_its_arguments_conflict(content, tool, params, ts, held):
    assert (conflicts(item(content), tool, params, ts) is not None) == held


def test_an_explicit_instruction_in_the_task_overrides_a_habit():
    """Pulse §4.4.3: the user usually writes in Notion, but this task says Obsidian: silent."""
    habit = item("I always keep my meeting notes in Notion, never in plain files.", label="preference")
    task = "Save these meeting notes to Obsidian this time."
    assert explicit_in_task(task, {"app": "Obsidian", "title": "notes"})
    d = decide("save_note", {"app": "Obsidian", "title": "meeting notes"}, ts=MON, task_text=task,
               standing=[(habit, 0.9)], failures=[])
    assert d.action == "silent"


def test_a_repeated_failing_call_is_held_with_its_evidence_through_the_host(workspace):
    host = Host()
    host.register(plugin, "memtier")
    ctx = HookContext(agent_id="ops", session_id="s1", run_id="r1", project="payments", workspace_dir=str(workspace))
    call = ToolCallEvent("shell", {"host": "pay-legacy-1", "cmd": "payctl bounce"}, "c1")
    host.before_prompt_build(PromptEvent("restart the payments worker"), ctx)
    assert not host.pre_tool(call, ctx).block  # first time: nothing known
    from memtier_plugin.events import ToolResultEvent

    host.post_tool(ToolResultEvent("shell", call.params, "c1", error="ssh: No route to host"), ctx)
    host.agent_end(AgentEndEvent(success=False), ctx)
    ctx2 = HookContext(agent_id="ops", session_id="s2", run_id="r2", project="payments", workspace_dir=str(workspace))
    host.before_prompt_build(PromptEvent("restart the payments worker again"), ctx2)
    decision = host.pre_tool(ToolCallEvent("shell", {"cmd": "payctl bounce", "host": "pay-legacy-1"}, "c2"), ctx2)
    assert decision.block and "No route to host" in decision.block_reason and "[ep-" in decision.block_reason
    other = host.pre_tool(ToolCallEvent("shell", {"host": "pay-app-2", "cmd": "systemctl restart payworker"}, "c3"), ctx2)
    assert not other.block
    traces = [json.loads(line) for p in (workspace / "memory" / "traces").rglob("*.jsonl")
              for line in p.read_text().splitlines()]
    decisions = [t for t in traces if t["kind"] == "decision"]
    assert [d["action"] for d in decisions] == ["silent", "intervene", "silent"]
    assert decisions[1]["evidence"] and decisions[1]["features"]["failures"] == 1


def test_retrieval_mode_never_holds(workspace, monkeypatch):
    monkeypatch.setenv("MEMTIER_SCHEDULING__MODE", "retrieval")
    host = Host()
    host.register(plugin, "memtier")
    ctx = HookContext(agent_id="d", session_id="s", run_id="r", project="atlas", workspace_dir=str(workspace))
    host.before_prompt_build(PromptEvent("A rule going forward: production deploys only on weekdays."), ctx)
    host.agent_end(AgentEndEvent(), ctx)
    host.session_end(SessionEndEvent(), ctx)
    assert not host.pre_tool(ToolCallEvent("deploy", {"env": "production"}, timestamp=SAT), ctx).block


def test_the_demo_holds_the_saturday_deploy_the_hotel_over_budget_and_the_dead_host(tmp_path):
    out = run_cli("demo", "--into", str(tmp_path / "d")).stdout
    saturday = out[out.index("s-2026-10-24-d-r1"):out.index("s-2026-10-26-a-r1")]  # that whole session
    assert "tool deploy [blocked]" in saturday and "standing rule" in saturday
    assert "tool schedule_deploy [allowed]" in saturday or "tool schedule_deploy [supplemented]" in saturday
    berlin = out[out.index("s-2026-10-28-p-r3"):out.index("s-2026-11-02-d-r1")]
    assert "tool book_hotel [blocked]" in berlin and "420" in berlin
    assert berlin.count("tool book_hotel [blocked]") == 1  # the $165 one goes through
    assert out.count("this exact call failed before") >= 2  # pay-legacy-1 after its first failure
    # what pre_tool hands a call bears on it: the flight rule goes to flight calls only, and no run's other steps
    # are handed as a precondition (hotel searches and bookings were handed both)
    lines = out.splitlines()
    handed = [(line.split()[1], lines[i + 1]) for i, line in enumerate(lines[:-1]) if "[supplemented]" in line]
    assert any("before 8am" in with_ for _, with_ in handed)
    assert all("flight" in tool for tool, with_ in handed if "before 8am" in with_)
    assert not any("[precondition" in with_ for _, with_ in handed)


def test_hooks_in_memory_hooks_yaml_deliver_once_per_task_through_the_host(workspace):
    hooks = workspace / "memory" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "deploys.yaml").write_text(
        "hooks:\n"
        "  - id: tests-before-deploy\n"
        "    entry: \"Run the unit tests before deploying atlas.\"\n"
        "    events: [pre_tool]\n"
        "    when:\n"
        "      all:\n"
        "        - tool: {in: [deploy]}\n"
        "        - arg: {path: app, equals: atlas}\n"
        "  - id: runbook-on-restart\n"
        "    entry: \"Runbook: restart payworker with systemctl on pay-app-2.\"\n"
        "    events: [query]\n"
        "    when:\n"
        "      query: {any: [restart, restarting]}\n")
    host = Host()
    host.register(plugin, "memtier")
    ctx = HookContext(agent_id="d", session_id="s1", run_id="r1", project="atlas", workspace_dir=str(workspace))
    from memtier_plugin.memory import memory_for

    # the files load in the background from the start (no event waits for them): as a sidecar does, wait here
    assert memory_for(ctx).hook_scheduler.wait_loaded(60)
    block = host.before_prompt_build(PromptEvent("please restart the worker", timestamp=MON), ctx).prepend_context
    assert "Runbook: restart payworker" in block and "runbook-on-restart" in block
    again = host.before_prompt_build(PromptEvent("restart it again", timestamp=MON), ctx).prepend_context or ""
    assert "Runbook: restart payworker" not in again  # at most once per task
    first = host.pre_tool(ToolCallEvent("deploy", {"app": "atlas", "env": "staging"}, timestamp=MON), ctx)
    assert not first.block and "Run the unit tests before deploying atlas." in first.supplement
    second = host.pre_tool(ToolCallEvent("deploy", {"app": "atlas", "env": "staging"}, timestamp=MON), ctx)
    assert not second.supplement or "unit tests" not in second.supplement
    other_task = HookContext(agent_id="d", session_id="s2", run_id="r2", project="atlas", workspace_dir=str(workspace))
    third = host.pre_tool(ToolCallEvent("deploy", {"app": "atlas"}, timestamp=MON), other_task)
    assert "Run the unit tests" in third.supplement  # a new task: the hook fires again


FRI = SAT - 86400


@pytest.mark.parametrize("content,call,day,other_day", [
    ("Never deploy to production on Fridays.", ("deploy", {"env": "production"}), FRI, MON),
    ("No production deploys during weekends.", ("deploy", {"env": "production"}), SAT, FRI),
    ("Deploys to prod only on weekdays.", ("deploy", {"env": "prod"}), SAT, MON),
    ("Never deploy the billing api on a Saturday.", ("deploy", {"service": "billing api"}), SAT, MON),
    # a list of days is every day of it: the second day was dropped ("or Sunday" let a Sunday deploy through)
    ("Never deploy to production on Saturday or Sunday.", ("deploy", {"env": "production"}), SAT + 86400, FRI),
    ("No production deploys on Fridays or weekends.", ("deploy", {"env": "production"}), SAT + 86400, MON),
    ("Never deploy to production on Friday, Saturday or Sunday.", ("deploy", {"env": "production"}), SAT, MON),
    ("Production deploys only on Tuesdays and Thursdays.", ("deploy", {"env": "production"}), MON, MON + 3 * 86400),
    ("Only deploy to production on Tuesdays and Thursdays.", ("deploy", {"env": "production"}), MON, MON + 86400),
    # the days said with another preposition, none, "only" after them, or as what is off limits
    ("No production deploys over the weekend.", ("deploy", {"env": "production"}), SAT, FRI),
    ("No production deploys at weekends.", ("deploy", {"env": "production"}), SAT + 86400, MON),
    ("Never deploy to production Fridays.", ("deploy", {"env": "production"}), FRI, MON),
    ("Production deploys: weekdays only.", ("deploy", {"env": "production"}), SAT, MON),
    ("Weekends are off limits for production deploys.", ("deploy", {"env": "production"}), SAT + 86400, FRI),
])
def test_hooks_and_pre_commit_read_a_rule_to_the_same_days(content, call, day, other_day):
    """One grammar (layers/rules.py): the days a rule's Hook fires on are the days pre-commit holds the call
    (before it, pre-commit knew only weekend rules, and neither read "on a Saturday" the same way)."""
    from memtier_plugin.scheduling.rule_hooks import hook_from_node
    from memtier_plugin.scheduling.predicates import Event

    hook = hook_from_node({"id": "gk-1", "node_kind": "rule", "content": content})
    assert hook is not None

    def fires(ts):
        from datetime import datetime, timezone

        weekday = datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%a")
        return hook.predicate(Event("pre_tool", tool_name=call[0], params=call[1], state={"weekday": weekday}))

    held = [conflicts(item(content), *call, ts) is not None for ts in (day, other_day)]
    assert [fires(day), fires(other_day)] == held == [True, False]
