"""Issue 12: standing memory (the Global and Workspace layers) through the reference host."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import run_cli
from memtier_plugin import plugin
from memtier_plugin.events import (AgentEndEvent, HookContext, PromptEvent, SessionEndEvent, ToolResultEvent)
from memtier_plugin.layers.global_layer import GlobalStore
from memtier_plugin.host import Host
from memtier_plugin.recall.packing import Hit, has_content, pack
from memtier_plugin.layers.extract import extract
from memtier_plugin.layers.session import from_session

DAY = 86400.0
T0 = 1_790_000_000.0


@pytest.fixture
def host(mode_host):
    """The reference host with memtier, once on the no-embedding path and once with what is installed."""
    return mode_host


def say(host, ws, text, *, project, session, agent="assistant", day=0.0, assistant=None, success=True):
    ctx = HookContext(agent_id=agent, session_id=session, run_id=f"{session}-r", project=project, workspace_dir=str(ws))
    addition = host.before_prompt_build(PromptEvent(text, timestamp=T0 + day * DAY), ctx)
    msgs = [{"role": "assistant", "content": assistant}] if assistant else []
    host.agent_end(AgentEndEvent(messages=msgs, success=success, timestamp=T0 + day * DAY + 5), ctx)
    host.session_end(SessionEndEvent("done", timestamp=T0 + day * DAY + 9), ctx)
    return addition.prepend_context or ""


def ask(host, ws, text, *, project, session, agent="assistant", day=30.0):
    ctx = HookContext(agent_id=agent, session_id=session, run_id=f"{session}-q", project=project,
                      workspace_dir=str(ws))
    return host.before_prompt_build(PromptEvent(text, timestamp=T0 + day * DAY), ctx).prepend_context or ""


def host_mode(host) -> str:
    import os

    return "lexical" if os.environ.get("MEMTIER_STANDING__EMBEDDER") == "none" else "default"


def last_trace(ws, agent) -> dict:
    files = sorted((ws / "memory" / "traces" / agent).glob("*.jsonl"))
    return json.loads(files[-1].read_text().splitlines()[-1])


def test_a_preference_stated_in_one_project_is_delivered_in_another(host, workspace):
    say(host, workspace, "Ground rules for anything you book for me: I always want an aisle seat, vegetarian meals, "
        "and hotels under $200 a night.", project="travel", session="s1")
    for i in range(30):  # unrelated chatter in between, in the other project
        say(host, workspace, f"Refactor module {i} of the parser and run the unit tests.", project="compiler",
            session=f"c{i}", day=1 + i * 0.5)
    block = ask(host, workspace, "Book my flight to Berlin for the compiler conference.", project="compiler",
                session="q1")
    nodes = [json.loads(line) for line in (workspace / "memory" / "global" / "knowledge.jsonl").read_text().splitlines()]
    aisle = next(n["id"] for n in nodes if n.get("content") == "I always want an aisle seat")
    if "I always want an aisle seat" in block:
        assert "standing preference" in block and block.index("aisle seat") < block.index("</memtier-memory>")
        assert aisle in block
    else:  # words alone (no embedder) reach it across projects, and calibration weighs it (docs/retrieval.md)
        assert host_mode(host) == "lexical"
        trace = last_trace(workspace, "assistant")
        assert any(why.startswith(f"{aisle}: p=") and "global_lexical threshold" in why for why in trace["left_out"])


def test_a_revised_attribute_is_never_delivered_as_current_and_the_others_stay(host, workspace):
    say(host, workspace, "I always want an aisle seat, vegetarian meals, and hotels under $200 a night.",
        project="travel", session="s1")
    say(host, workspace, "Change of plans. I've changed my mind on hotels: my budget is now up to $300 a night.",
        project="travel", session="s2", day=5)
    block = ask(host, workspace, "Find me a hotel in Porto for two nights.", project="travel", session="q")
    assert "$300" in block
    for line in block.splitlines():  # the old value only ever appears in an episode labelled as revised
        assert "$200" not in line or ("episodic" in line and "revised since by gk-" in line and "not current" in line)
    nodes = json.loads(run_cli("inspect", "topics", "--json").stdout)["nodes"]
    current = {n["content"] for n in nodes if n["current"]}
    assert "I always want an aisle seat" in current and "I always want vegetarian meals" in current
    assert not any("$200" in c for c in current)
    history = json.loads(run_cli("inspect", "topics", "--history", "--json").stdout)["nodes"]
    old = [n for n in history if "$200" in n["content"]]
    assert old and old[0]["retired_by"] and not old[0]["current"]


def test_a_current_explicit_requirement_overrides_the_stored_preference(host, workspace):
    say(host, workspace, "I always want hotels under $200 a night.", project="travel", session="s1")
    block = ask(host, workspace, "Book a hotel in Paris under $450 a night this time, it is a special trip.",
                project="travel", session="q")
    assert not [line for line in block.splitlines() if "standing" in line and "$200" in line]
    plain = ask(host, workspace, "Book a hotel in Paris for the trade fair.", project="travel", session="q2")
    assert [line for line in plain.splitlines() if "standing constraint" in line and "$200" in line]


def test_a_skill_is_learned_from_a_successful_run_and_recalled_in_the_procedural_tier(host, workspace):
    ctx = HookContext(agent_id="deployer", session_id="d1", run_id="d1-r1", project="atlas", workspace_dir=str(workspace))
    host.before_prompt_build(PromptEvent("Fix the failing migration and get staging green.", timestamp=T0), ctx)
    host.post_tool(ToolResultEvent("deploy", {"env": "staging"}, tool_call_id="c0", error="migration 42 failed"), ctx)
    host.post_tool(ToolResultEvent("edit_file", {"path": "migrations/0042.sql"}, tool_call_id="c1",
                                   result={"ok": True}), ctx)
    host.post_tool(ToolResultEvent("deploy", {"env": "staging", "ref": "v1.4.1"}, tool_call_id="c2",
                                   result={"ok": True}), ctx)
    host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": "Staging is green."}], success=True,
                                 timestamp=T0 + 60), ctx)
    failed = HookContext(agent_id="deployer", session_id="d2", run_id="d2-r1", project="atlas",
                         workspace_dir=str(workspace))
    host.before_prompt_build(PromptEvent("Rotate the database password on production.", timestamp=T0 + 100), failed)
    host.post_tool(ToolResultEvent("rotate_secret", {"env": "production"}, error="permission denied"), failed)
    host.agent_end(AgentEndEvent(success=False, timestamp=T0 + 120), failed)
    skills = [json.loads(line) for line in (workspace / "memory" / "procedural" / "atlas.jsonl").read_text().splitlines()]
    assert len(skills) == 1 and [s["tool"] for s in skills[0]["steps"]] == ["edit_file", "deploy"]  # after the failure
    proc = run_cli("search", "the staging migration fails again, fix it", "--agent", "deployer", "--project", "atlas",
                   "--json")
    hits = json.loads(proc.stdout)["hits"]
    skill = next(h for h in hits if h["id"] == skills[0]["id"])
    assert skill["layer"] == "workspace" and skill["tier"] == "procedural"
    assert 0.0 < skill["probability"] <= 1.0  # on the one calibrated scale (recall/calibration.py)
    explain = run_cli("search", "the staging migration fails again, fix it", "--agent", "deployer", "--project",
                      "atlas", "--explain").stdout
    assert "[workspace skill" in explain and "route" in explain


def run(host, ws, prompts, calls=(), *, project="atlas", session, run_id, ts, reply="", success=True):
    """One run through the host: its prompts, its tool calls ((name, params, error)) and agent_end."""
    ctx = HookContext(agent_id="deployer", session_id=session, run_id=run_id, project=project, workspace_dir=str(ws))
    for p in prompts:
        host.before_prompt_build(PromptEvent(p, timestamp=ts), ctx)
    for i, (name, params, error) in enumerate(calls):
        host.post_tool(ToolResultEvent(name, params, tool_call_id=f"{run_id}-{i}", error=error,
                                       result=None if error else {"ok": True}, timestamp=ts + 1 + i), ctx)
    host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": reply}] if reply else [],
                                 success=success, timestamp=ts + 30), ctx)


def skill_records(ws, project="atlas") -> list[dict]:
    path = ws / "memory" / "procedural" / f"{project}.jsonl"
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["kind"] == "skill"] if path.exists() else []


DEPLOY = ("deploy", {"app": "atlas", "env": "production", "ref": "v2.4"}, None)


def test_a_skill_goal_is_the_prompt_that_stated_the_task_not_the_acknowledgement(host, workspace):
    run(host, workspace, ["Deploy atlas 2.4 to production"], session="d1", run_id="d1-r1", ts=T0,
        reply="atlas 2.4 passed CI and the production window is open.")
    run(host, workspace, ["Yes, go."], [DEPLOY], session="d1", run_id="d1-r2", ts=T0 + 60,
        reply="atlas 2.4 is live on production.")
    (skill,) = skill_records(workspace)
    assert skill["goal"] == "Deploy atlas 2.4 to production" and skill["count"] == 1
    assert skill["content"].startswith('skill (worked before for: Deploy atlas 2.4 to production): deploy({"app"')


def test_no_skill_is_learned_without_a_task(host, workspace):
    # a session that opens with an acknowledgement: nothing states what was achieved
    run(host, workspace, ["Yes, go."], [DEPLOY], session="d1", run_id="d1-r1", ts=T0)
    run(host, workspace, ["Thanks!"], [DEPLOY], session="d2", run_id="d2-r1", ts=T0 + 60)
    assert skill_records(workspace) == []
    # an acknowledgement after an earlier acknowledgement does not reach past it to an old proposal
    run(host, workspace, ["Sure."], [DEPLOY], session="d1", run_id="d1-r2", ts=T0 + 120)
    assert skill_records(workspace) == []


def test_a_recurring_kind_of_task_revises_one_skill_and_counts_its_successes(host, workspace):
    run(host, workspace, ["Deploy atlas 2.4 to production"], [DEPLOY], session="d1", run_id="d1-r1", ts=T0)
    run(host, workspace, ["Rotate the database password on production."],
        [("rotate_secret", {"env": "production", "name": "db"}, None)], session="d2", run_id="d2-r1", ts=T0 + DAY)
    run(host, workspace, ["Deploy atlas 2.5 to production please"],
        [("deploy", {"app": "atlas", "env": "production", "ref": "v2.5"}, None)], session="d3", run_id="d3-r1",
        ts=T0 + 2 * DAY)
    first, rotate, second = skill_records(workspace)  # append-only: the first one stays, superseded
    assert second["supersedes"] == first["id"] and second["count"] == 2 and "supersedes" not in rotate
    assert second["goals"] == ["Deploy atlas 2.5 to production please", "Deploy atlas 2.4 to production"]
    assert second["steps"][0]["params"]["ref"] == "v2.5"  # what worked most recently
    shown = json.loads(run_cli("inspect", "workspace", "--project", "atlas", "--json").stdout)
    assert sorted(s["id"] for s in shown["projects"]["atlas"]["skills"]) == sorted([rotate["id"], second["id"]])
    history = json.loads(run_cli("inspect", "workspace", "--project", "atlas", "--history", "--json").stdout)
    assert len(history["projects"]["atlas"]["skills"]) == 3


def test_a_skill_is_delivered_to_its_kind_of_task_only_and_reads_as_history(host, workspace):
    run(host, workspace, ["Deploy atlas 2.4 to production"], [DEPLOY], session="d1", run_id="d1-r1", ts=T0)
    run(host, workspace, ["Deploy atlas 2.5 to production please"],
        [("deploy", {"app": "atlas", "env": "production", "ref": "v2.5"}, None)], session="d2", run_id="d2-r1",
        ts=T0 + DAY)
    current = skill_records(workspace)[-1]
    block = ask(host, workspace, "deploy the billing service", project="atlas", session="q1", agent="deployer")
    line = next(line for line in block.splitlines() if current["id"] in line)
    assert line.startswith(f"- [{current['id']} | last worked 2026-")
    assert "] skill (worked before, 2 times for: Deploy atlas 2.5 to production please): deploy(" in line
    assert "not steps to follow" in block  # the header says skills are history, not orders
    for prompt in ("Thanks.", "Yes, go.", "Note it in the release log.", "Book a hotel in Paris for the trade fair."):
        other = ask(host, workspace, prompt, project="atlas", session=f"q-{prompt}", agent="deployer")
        assert "sk-" not in other and "worked before" not in other, prompt


def test_a_skill_goal_takes_the_action_an_acknowledgement_approved():
    from memtier_plugin.layers.workspace_layer import skill_goal

    deploy = [{"name": "deploy", "params": {"app": "atlas", "env": "production", "ref": "v1.4.1"}}]
    earlier = [("e1", "user", "Great. Production also needs the summarizer key. And a rule going forward: production "
                              "deploys only on weekdays, never on Saturday or Sunday."),
               ("e2", "tool", "set_secrets(...) -> ok"),
               ("e3", "assistant", "Stored the key. Today is Tuesday, so shall I ship v1.4.1 to production now?")]
    assert skill_goal([("e4", "user", "Yes, go.")], earlier, deploy) == "ship v1.4.1 to production now"
    # no proposal: the session's last prompt that named a task, its sentences about the calls ("Great." is not,
    # nor the rule it states for good: the Global layer's, no task)
    assert skill_goal([("e4", "user", "Yes, go.")], earlier[:2], deploy) == "Production also needs the summarizer key."
    secrets = [{"name": "set_secrets", "params": {"app": "atlas", "env": "production", "values": {"SUMMARIZER_KEY": "x"}}}]
    assert skill_goal(earlier[:1], [], secrets) == "Production also needs the summarizer key."
    # the run's own words when they name a task, its acknowledgement dropped; read lazily
    log = [{"name": "append_release_log", "params": {"app": "atlas", "entry": "v1.4.3 on staging"}}]
    assert skill_goal([("x", "user", "Thanks. Note it in the release log.")], lambda: 1 / 0, log) == \
        "Note it in the release log."


def test_a_run_that_only_records_what_the_user_stated_learns_no_skill_of_an_older_request():
    """The demo's "Yes: never book flights before 8am, I'm useless that early. My United MileagePlus number is
    UA-MP 88213457 ...", after which the agent saved the profile, was learned as a skill "worked before for: My
    United MileagePlus number is ...", and handed with its stale $200 budget to "Infante Sagres this time" weeks
    later. Stated things are the Global layer's; the run learns a skill only for an action the assistant offered
    and the user approved."""
    from memtier_plugin.layers.workspace_layer import skill_goal

    save = [{"name": "update_traveler_profile", "params": {"seat": "aisle", "earliest_departure": "08:00"}}]
    stated = [("r2", "user", "Yes: never book flights before 8am, I'm useless that early. My United MileagePlus "
                             "number is UA-MP 88213457.")]
    earlier = [("e1", "user", "Hi! I'm planning a work trip to Lisbon for the web summit. I always want an aisle seat."),
               ("e2", "assistant", "Got it: aisle seat. Anything else I should know?")]
    assert skill_goal(stated, earlier, save) == ""
    offered = earlier[:1] + [("e2", "assistant", "Got it. Shall I save these to your traveler profile?")]
    assert skill_goal(stated, offered, save) == "save these to your traveler profile"
    # a task beside what is stated is the goal, without the stated sentence
    mixed = [("r2", "user", "I always want an aisle seat. Update my traveler profile with it.")]
    assert skill_goal(mixed, earlier, save) == "Update my traveler profile with it."


def test_a_skill_goal_reads_a_bounded_number_of_sentences_whatever_the_session_holds(monkeypatch):
    """Whether a sentence only states something is asked of the extractor, at agent_end, on the agent's path: a
    session of 60 huge messages that each state a rule in every sentence (and name a task in none) is read a
    bounded number of sentences deep, not 60 x 160 (513 ms before the bound, on this machine)."""
    from memtier_plugin.layers import workspace_layer as W

    asked = []
    real = W.extract
    monkeypatch.setattr(W, "extract", lambda text, **kw: asked.append(text) or real(text, **kw))
    rule = "I always want the pipeline to run integration tests against staging before anything reaches production. "
    earlier = [m for i in range(60) for m in ((f"u{i}", "user", rule * 160), (f"a{i}", "assistant", "Noted."))]
    assert W.skill_goal([("r", "user", "Yes, go.")], earlier, [{"name": "deploy", "params": {"app": "atlas"}}]) == ""
    assert 0 < len(asked) <= W.GOAL_READS * W.GOAL_SENTENCES + W.GOAL_SENTENCES


def test_choice_reveals_a_preference_with_every_exchange_message_as_provenance():
    cands = from_session([("q", "user", "What kind of winter coat should I buy this year?"),
                          ("o", "assistant", "Here are a few options: 1. A wool peacoat. 2. A leather jacket. "
                                             "3. A shearling coat. 4. A synthetic insulated parka."),
                          ("s", "user", "I'll go with the insulated parka. The other options don't suit me."),
                          ("a", "assistant", "Understood, the parka it is.")])
    (c,) = [c for c in cands if c.form == "choice"]
    assert c.entry_ids == ["q", "o", "s"] and "insulated parka" in c.content and "winter coat" in c.content


COATS = ("Here are a few options: 1. A wool peacoat. 2. A leather jacket. 3. A shearling coat. "
         "4. A synthetic insulated parka.")


@pytest.mark.parametrize("pick, reveals", [
    ("I'll go with the insulated parka. The other options don't seem like a good fit for me.", True),
    ("I think I'll go with the parka. The leather and shearling options don't align with my values.", True),
    ("I'll go with the insulated parka. The wool one seems a bit too formal for my taste.", True),
    ("I'll go with the parka. I'm not really in the mood for wool coats this year.", True),
    ("The parka sounds best. The other options might irritate my skin.", True),
    ("I'll go with the parka. I'd rather avoid anything made from animals.", True),
    ("I'll go with the parka. The leather ones aren't really my style.", True),
    # the pick said as the option's name, its reason after it (a held-out probe's users: issue 25)
    ("The insulated parka, obviously. Anything made from animals is out for me.", True),
    ("The parka. No wool or leather for me.", True),
    ("Number 4. I don't buy leather, ever.", True),
    ("I'll pick the fourth. The others would be far too cold for my commute.", True),
    ("The synthetic parka, please. I have to walk to work in the snow every day.", True),
    # what the user won't have happen, what they want set against the rest, a kind judged alike (probe_c's picks)
    ("The parka, definitely. I don't want to risk frostbite on the trail.", True),
    ("The parka. I want to be warm, not fashionable.", True),
    ("The parka. Wool coats all feel the same to me.", True),
    # ... but a name alone, a plan that takes it up, or a reason of the moment is not
    ("The parka.", False),
    ("wool peacoats in disruptive colours", False),  # a topic typed as the reply (an inter chat's), not a pick
    ("I'll definitely try the parka and maybe the peacoat later.", False),
    ("The parka, please. It's on sale this week.", False),
    # a pick of the moment: a reason of the moment, a plan, other options not yet judged, a retry
    ("I think I'll go with the parka for now, since I'm just starting out with winter hiking.", False),
    ("I think I'll start with the parka and see how it goes, then look at the rest later.", False),
    ("I'll take the parka, and I'm curious if there are other options I haven't thought of yet.", False),
    ("Let's redo it with the parka as the peacoat doesn't sound right.", False),
    ("I think I'll take the parka. I don't want to miss out on the sale.", False),
])
def test_a_pick_is_a_preference_only_when_it_judges_the_others_or_says_a_disposition(pick, reveals):
    """PrefEval's picks turn the others down by a judgement ("don't seem like a good fit", "too formal for my
    taste") or say what the user holds to; an assistant chat's one-off picks give a reason of the moment."""
    cands = from_session([("q", "user", "What kind of winter coat should I buy this year?"),
                          ("o", "assistant", COATS), ("s", "user", pick)])
    assert any(c.form == "choice" for c in cands) is reveals


@pytest.mark.parametrize("pick", [
    "I'll go for the parka.",
    "I'll take the budget parka.",  # "budget" as the option's adjective, no budget of the user's
    "I'll follow option 4, the synthetic parka.",
    "The synthetic parka is the one I'd go for.",
    "Ok, I'll book option 2, the budget hotel room with its own bathroom.",
])
def test_an_occasions_pick_is_no_standing_item(pick):
    """A reply that takes one option for this occasion (probe_a's and probe_b's bare picks: "I'll go for the home
    game ticket package", "I'll take the budget hotel room") was a preference or a budget constraint that every
    later question of its topic was handed; the choice rule reads a pick with the offer, and a bare one is none: at
    most a pick (layers/picks.py bare_pick), delivered only to a prompt that asks for a choice."""
    cands = from_session([("q", "user", "What kind of winter coat should I buy this year?"),
                          ("o", "assistant", COATS), ("s", "user", pick)])
    assert [c.node_kind for c in cands if c.node_kind != "pick"] == []


@pytest.mark.parametrize("text, kind", [
    ("I'd take a window seat over an aisle any day.", "preference"),  # set against the rest: lasting
    ("I'll always book aisle seats.", "preference"),
    ("I only fly budget airlines.", "preference"),
    ("My budget is $200 a night.", "constraint"),
    ("Keep the trip budget under $500.", "constraint"),
    ("I'm on a tight budget.", "constraint"),
])
def test_a_lasting_pick_or_a_budget_of_the_users_is_still_read(text, kind):
    assert [c.node_kind for c in extract(text, role="user", entry_id="e")] == [kind]


@pytest.mark.parametrize("text, kind", [
    ("i have 2 rabbits that free roam the apartment", "identity"),  # who lives with the user
    ("We have three kids.", "identity"),
    ("I own a 2014 Subaru Outback, that's what all my car questions are about", "identity"),  # what they drive
    ("I'm on Central time, in case you're scheduling anything", "identity"),  # their time zone
    ("we have three cats and one of them chews cords, so nothing with dangly cables", "preference"),  # what it means
    ("We have two big dogs so a fenced yard wins every time.", "preference"),
    ("We have two big dogs who shed constantly, so anything I buy for the house needs to survive fur.", "rule"),
    ("I have two tickets to the game tonight.", None),  # one occasion's
    ("I'm on time.", None),
    ("Yesterday we had two dogs over.", None),
])
def test_a_household_a_car_and_a_time_zone_are_identity(text, kind):
    """What the user lives with is standing (colloquial_e: "i have 2 rabbits that free roam the apartment"); said
    with what it means for anything suggested, it is the preference it gives a reason for, as before."""
    assert [c.node_kind for c in extract(text, role="user", entry_id="e")] == ([kind] if kind else [])


@pytest.mark.parametrize("text,role", [
    ("I prefer tabs over spaces and I always want type hints.", "assistant"),  # not the user's own words
    ("Can you find me a hotel near the venue?", "user"),  # a request
    ("Do you prefer window seats?", "user"),  # a question
    ("I want you to act as a Linux terminal.", "user"),  # a prompt, not a preference
    ("Perfect, thanks.", "user"),  # chit-chat
    ("I don't want to come off as too pushy in this email.", "user"),  # a concern of the moment, not a taste
    ("deploy failed: I prefer not to retry automatically", "tool"),  # a tool output
])
def test_chit_chat_requests_and_other_voices_never_become_knowledge(text, role):
    assert extract(text, role=role, entry_id="e") == []


def test_preferences_in_many_wordings_are_extracted():
    for text in ("I have an acute fear of heights, so I avoid anything involving elevation.",
                 "I find flashcards ineffective and prefer storytelling.", "I'm a strict vegetarian.",
                 "I exclusively read non-fiction books.", "I never wear heels.",
                 "I don't want to look like a tourist when I travel.",
                 "Production deploys only on weekdays, never on Saturday or Sunday."):
        assert extract(text, role="user", entry_id="e"), text


@pytest.mark.parametrize("text, standing", [
    # what the user rules out for good, in words PrefEval's dev topics never used (found on a probe of other topics)
    ("I have a stomach ulcer, so NSAIDs like ibuprofen and aspirin are off-limits for me.", True),
    ("I work long hours, so a dog just isn't an option for me.", True),
    ("Spectator events don't interest me.", True),
    ("Low sports cars are out of the question.", True),
    ("That's out of the question, sorry.", False),  # one thing at hand
    ("It doesn't interest me much.", False),
    # "I'd", "I'll" and "I would" state a lasting preference as "I" does
    ("I'll only consider fully electric vehicles.", True),
    ("I'd never keep a pet that needs live food.", True),
    ("I'd much rather play sports than watch them.", True),
    ("I'd rather not say.", False),  # this one occasion
    ("I'd rather do it myself.", False),
    ("I'd love to help with the move.", False),  # an offer
    # what is said of every such thing, or a need with its lasting reason
    ("I don't want to buy anything that burns gasoline.", True),
    ("I don't want to spoil it for you.", False),
    ("I use a wheelchair, so any transport I use has to be fully step-free.", True),
    ("Because of my bad knees, I need a car with a high seat.", True),
    ("My flight got cancelled, so I need a hotel tonight.", False),  # a request of the moment
    ("I need a hotel near the venue for Friday.", False),
    ("I always book a suite, because my kids sleep at 7 and I need a space to stay up.", True),  # the need is a reason
    ("I love Paris, so I need a hotel there for next week.", False),  # an errand with its date
    ("I avoid crowds, so I want you to find quiet places.", False),  # a request to the assistant
    ("I'm on a low-sodium diet because of high blood pressure.", True),
    ("I'm on a tight budget, so I always pick the cheapest way to get around.", True),
    ("The only competitive games I care about are esports.", True),
    ("They are the source of my joy, so I will always take care of them!", False),  # a promise
    # a rule the user keeps for themselves
    ("My vet says my beagle is overweight, so I'm being strict about treats and food portions.", True),
    ("I'm very careful about what my dog eats.", True),
    ("I'm careful with it.", False),  # about the thing at hand
    ("I was careful about the wording yesterday.", False),
    # what the user can do no more, what they must have, a kind said with "only"
    ("Since my knee surgery I can't really do stairs anymore.", True),
    ("I can no longer eat spicy food.", True),
    ("I can't take it anymore!", False),  # an outburst
    ("I can't find my keys anymore.", False),
    ("A bathtub is a must for me.", True),
    ("A shower-only room doesn't cut it for me.", True),
    ("That doesn't cut it for me.", False),  # the thing at hand
    ("The museum is a must.", False),
    ("Firm mattresses only, please.", True),
    ("Two tickets only.", False),  # an amount of the moment
])
def test_standing_terms_in_the_wordings_of_other_topics(text, standing):
    assert bool(extract(text, role="user", entry_id="e")) is standing


@pytest.mark.parametrize("text, identity", [
    ("I'm located in the same city where I commute to work.", True),
    ("I'm 20, and I like cultural activities.", True),
    # an identity fact given as a preference's reason: the sentence says what the user takes
    ("I live in a tiny studio apartment, so I only buy compact, multi-functional furniture.", False),
    ("I am 45 years old.", True),
    ("I'm 20 minutes away from the venue.", False),  # a distance, not an age
    ("I'm 3 hours into this migration.", False),
])
def test_where_the_user_lives_and_their_age_are_identity(text, identity):
    assert any(c.node_kind == "identity" for c in extract(text, role="user", entry_id="e")) is identity


@pytest.mark.parametrize("text, habit", [
    ("I do physical therapy exercises every day.", True),
    ("I've been practicing yoga regularly, about two to three times a week.", True),
    ("I'm usually in a rush in the mornings.", True),
    ("Think I'm going to try to do more outdoor activities like this every week!", False),  # a plan
    ("The bus comes every day at 9.", False),  # not the speaker's habit
    ("I think about nothing every day.", False),  # no habit of doing something
])
def test_a_habit_said_with_how_often_is_a_preference(text, habit):
    assert bool(extract(text, role="user", entry_id="e")) is habit


def test_a_bare_acknowledgement_never_spends_a_slot():
    hits = [Hit(id=f"e{i}", content=c, timestamp="2026-01-01", session_id="s", agent_id="a", role="assistant",
                tier="episodic", score=1.0 - i / 10) for i, c in enumerate(["Noted.", "Yes, go.", "Marriott, for the points."])]
    packed = pack(hits, 4, 300)
    assert [h.id for h in packed.hits] == ["e2"] and "e0: no content of its own" in packed.left_out
    assert not has_content("Perfect, thanks.") and has_content("Noted: Postgres 16 everywhere")


def test_the_demo_scenario_no_longer_delivers_bare_acknowledgements(tmp_path):
    out = run_cli("demo", "--into", str(tmp_path / "d")).stdout
    delivered = [line for line in out.splitlines() if line.startswith("    ") and "score=" in line
                 and not line.strip().startswith("(left out")]
    assert delivered and not any(line.rstrip().endswith(("Noted.", "Noted", "Perfect, thanks.")) for line in delivered)
    # the Global layer reaches another project (the flight search's pre_tool, through the rule's derived hook;
    # the prompt's block: docs/evaluation.md, issue 25), the Workspace layer reuses a skill
    berlin = out[out.index("s-2026-10-28-p-r1"):][:1500]
    assert "aisle seat" in berlin or "before 8am" in berlin
    again = out[out.index("s-2026-11-02-d-r1"):out.index("s-2026-11-02-d-r2")]
    assert "sk-" in again and "skill (worked before for: Back to atlas. Fix that migration" in again
    thanks = out[out.index("s-2026-11-02-d-r2"):out.index("Act 2")]  # an acknowledgement with a follow-up
    assert "sk-" not in thanks.split("tool ")[0]


def test_two_processes_maintaining_the_same_session_write_each_node_once(workspace):
    code = ("import sys; from memtier_plugin.layers.global_layer import GlobalStore; from memtier_plugin.layers.extract import extract;"
            "s = GlobalStore(sys.argv[1]);"
            "c = extract('I always want an aisle seat, vegetarian meals, and hotels under $200 a night.', role='user', entry_id='e1');"
            "[s.upsert(c, agent_id='a', session_id='s1', project='p', ts=1.79e9) for _ in range(20)]")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(workspace / "memory")]) for _ in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    store = GlobalStore(workspace / "memory")
    assert sorted(n.rec["content"] for n in store.current()) == [
        "I always want an aisle seat", "I always want hotels under $200 a night", "I always want vegetarian meals"]


def test_a_failing_maintenance_never_costs_the_run(workspace, monkeypatch, caplog):
    from memtier_plugin.layers import maintain

    monkeypatch.setattr(maintain, "maintain", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom")))
    h = Host()
    h.register(plugin, "memtier")
    ctx = HookContext(agent_id="a", session_id="s", run_id="r", project="p", workspace_dir=str(workspace))
    h.before_prompt_build(PromptEvent("I always want an aisle seat."), ctx)
    h.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": "Saved your seat preference."}]), ctx)
    traces = "".join(p.read_text() for p in (workspace / "memory" / "traces").rglob("*.jsonl"))
    assert '"kind":"run_end"' in traces and "boom" in caplog.text


def test_the_daemon_maintains_the_global_layer_too(workspace):
    from conftest import run_cli as cli

    cli("add", "I always want an aisle seat, vegetarian meals, and hotels under $200 a night.", "--agent", "a",
        "--session", "s1", "--project", "travel")
    cli("add", "Please book the Lisbon hotel for Nov 10.", "--agent", "a", "--session", "s1", "--project", "travel")
    report = json.loads(cli("daemon", "--once", "--json").stdout)
    assert sorted(k["content"] for k in report["knowledge"]) == [
        "I always want an aisle seat", "I always want hotels under $200 a night", "I always want vegetarian meals"]
    again = json.loads(cli("daemon", "--once", "--json").stdout)
    assert again["knowledge"] == []
    assert len(GlobalStore(workspace / "memory").current()) == 3


def test_the_configured_model_adds_validated_knowledge_and_cannot_invent_it(workspace):
    """A real loopback endpoint proposes two items: one in the user's words is kept, one invented is dropped."""
    from test_llm import Scripted, completion
    import threading

    srv = Scripted()
    threading.Thread(target=srv.serve_forever, args=(0.01,), daemon=True).start()
    try:
        proposal = {"items": [
            {"kind": "preference", "content": "quiet rooms away from the elevator", "attribute": "room", "message": 0},
            {"kind": "rule", "content": "always upgrade me to business class", "message": 0},  # never said
            {"kind": "preference", "content": "os.system('rm -rf /')", "message": 0}]}
        srv.script = [(200, completion(json.dumps(proposal)), 0)]
        (workspace / "memtier.yaml").write_text(f"model:\n  enabled: true\n  base_url: {srv.url}\n"
                                               "standing:\n  extractor: model\n")
        h = Host()
        h.register(plugin, "memtier")
        say(h, workspace, "For hotels, quiet rooms away from the elevator suit me best.", project="travel",
            session="s1")
        contents = [n.rec["content"] for n in GlobalStore(workspace / "memory").current()]
        assert "quiet rooms away from the elevator" in contents
        assert not any("business class" in c or "rm -rf" in c for c in contents)
        assert srv.requests and srv.requests[0]["body"]["messages"][1]["content"].startswith("[0] For hotels")
    finally:
        srv.shutdown()
        srv.server_close()


def test_an_embedding_route_reaches_only_the_nearest_topics():
    import numpy as np

    from memtier_plugin.layers.standing import ROUTE_DELTA, nearest_topics

    sims = np.array([0.61, 0.60, 0.50, -0.2])  # the nearest two are within ROUTE_DELTA, the rest are not
    r = nearest_topics(sims)
    assert ROUTE_DELTA < 0.1 and r[2] == r[3] == 0.0 and r[0] > r[1] > 0 and np.isclose(np.linalg.norm(r), 1.0)
    assert not nearest_topics(np.zeros(3)).any()  # nothing near: an empty route, no division by zero


def _bge_missing():
    from memtier_plugin.models import embedders as E

    bge = E.OnnxBGE()
    return None if bge.available() else f"bge-small not fetched into {bge.folder} (memtier model setup --embedder)"


@pytest.mark.embed
def test_a_preference_whose_words_hit_no_topic_is_routed_by_its_embedding(workspace, monkeypatch):
    why = _bge_missing()
    if why:
        pytest.skip(why)
    monkeypatch.setenv("MEMTIER_STANDING__EMBEDDER", "bge-small")
    h = Host()
    h.register(plugin, "memtier")
    say(h, workspace, "I have no interest in superhero movies; they are too predictable for me.", project="p",
        session="s1")
    # no shared topic word or word, an embedding cosine below the near-certain gate: only the route reaches it, and
    # calibration weighs it (p ≈ 0.03 with the shipped calibration); a user who wants more of their preferences
    # delivered lowers calibration.threshold
    block = ask(h, workspace, "Could you recommend some recent blockbuster films for me to check out?", project="p",
                session="q1")
    node = json.loads((workspace / "memory" / "global" / "knowledge.jsonl").read_text().splitlines()[0])["id"]
    assert "superhero" in block or any(why.startswith(f"{node}: p=") for why in last_trace(workspace, "assistant")["left_out"])
    monkeypatch.setenv("MEMTIER_CALIBRATION__THRESHOLD", "0.01")
    from memtier_plugin.memory import reset_services

    reset_services()
    block = ask(h, workspace, "Could you recommend some recent blockbuster films for me to check out?", project="p",
                session="q3")
    assert "superhero" in block and "standing preference" in block
    assert "superhero" not in ask(h, workspace, "Restart the payments worker on pay-app-2.", project="p", session="q2")


def test_an_item_is_embedded_by_what_holds_not_by_the_reason_given_for_it():
    """A reason's words bring a preference to prompts the reason is about ("because my kids go to sleep at 7 pm"
    to a coffee table for the living room): a preference, constraint or rule is embedded by its main clause; a
    pick (its "because" is what it reveals) and a short remainder stay as said."""
    from memtier_plugin.config import load_config
    from memtier_plugin.layers.extract import main_clause
    from memtier_plugin.layers.standing import Item, StandingScorer
    from memtier_plugin.layers.topics import topic_tree

    assert main_clause("I always book a suite or a room with a separate bedroom, because my kids go to sleep at "
                       "7 pm.") == "I always book a suite or a room with a separate bedroom"
    assert main_clause("Because of my bad knees, I need a car with a high seat.") == "I need a car with a high seat."
    assert main_clause("I'm lactose intolerant, so milk, cream and most cheeses are a no-go for me.") == \
        "milk, cream and most cheeses are a no-go for me."
    assert main_clause("I dislike proprietary ecosystems, as I prefer open-source solutions.") == \
        "I dislike proprietary ecosystems"
    for same in ("I love spicy food so much.", "I enjoy it so long as it is quiet.", "I never stay in big hotels;",
                 "No thanks, because I am tired."):
        assert main_clause(same) == same, same

    class Recorder:
        def __init__(self):
            self.texts, self.calls = [], []

        def embed(self, texts):
            import numpy as np
            self.texts += list(texts)
            self.calls.append(len(texts))
            return [np.ones(3, dtype=np.float32) / 3 ** 0.5 for _ in texts]

    rec = Recorder()
    scorer = StandingScorer(load_config(None), topic_tree(), rec)
    pref = Item(id="p", content="I always book a suite, because my kids go to sleep at 7 pm.", label="preference",
                tier="global", timestamp="")
    pick = Item(id="c", content="I'll take the parka because I prefer warm, waterproof coats.", label="choice",
                tier="global", timestamp="")
    scorer.score("What coffee table should I buy?", [pref, pick])
    assert "I always book a suite" in rec.texts and pick.content in rec.texts
    assert pref.content not in rec.texts
    # each item alone (an int8 model quantises a batch on one scale: beside other texts an item's vector shifts, and
    # what a prompt is handed would depend on which items happened to be embedded together); the topics are a batch
    assert rec.calls[-3:] == [1, 1, 1]  # the two items, then the prompt


def test_the_topic_tree_knows_the_words_each_domain_is_talked_about_with():
    """A prompt reaches a preference's topic by the words its domain is talked about with, not only by the topic's
    name ("dining" is food, "acupuncture" health, "coworking" work): held-out prompts shared no topic word with their
    own preference in 18-24 % of cases with the shorter lists, 7 % now."""
    from memtier_plugin.layers.topics import cosine, topic_tree

    tree = topic_tree()
    for prompt, topic in (("What are the must-try dining experiences in Buenos Aires?", "food"),
                          ("What toppings and salsas should I make for taco night?", "food"),
                          ("My lower back is stiff. Would acupuncture help?", "health"),
                          ("I need to stay alert tonight without caffeine.", "health"),
                          ("I'm choosing a coworking space in Berlin.", "work"),
                          ("What career moves would help me grow as an accountant?", "work"),
                          ("What should I feed my labrador as he gets older?", "pets"),
                          ("Which compact SUV handles snowy winters and towing?", "travel/transport"),
                          ("I'm visiting Louisville for the playoffs.", "entertainment/sports")):
        assert topic in tree.route(prompt), (prompt, tree.top(tree.route(prompt)))
    assert cosine(tree.route("Where should I eat in Baltimore?"),
                  tree.route("Mushrooms disgust me: the texture, the smell.")) > 0
    assert not tree.route("Why does this C++ loop overflow?")  # code is no domain of the tree


def test_a_phrase_of_the_topic_tree_routes_text_that_holds_its_words_in_a_row(tmp_path):
    """"get around", "get from" and "get there" are transport, though "get" alone is every topic's word: "How should
    I get around the Highlands?" shares a topic with "I stopped driving altogether"; the words apart route nowhere.
    A user's topics.yaml adds phrases the same way."""
    from memtier_plugin.layers.topics import cosine, topic_tree

    tree = topic_tree()
    for prompt in ("I'm doing a solo week in the Scottish Highlands. How should I get around?",
                   "What's the cheapest way to get from Bangkok to Chiang Mai?",
                   "I'm planning a trip from Athens to Santorini. How should I get there?"):
        assert "travel/transport" in tree.route(prompt), (prompt, tree.route(prompt))
        assert cosine(tree.route(prompt), tree.route("I stopped driving altogether.")) > 0
    assert "travel/transport" not in tree.route("Around noon I get a coffee from there.")
    user = tmp_path / "global"
    user.mkdir()
    (user / "topics.yaml").write_text("software:\n  words: [pull request, merge conflict]\n", encoding="utf-8")
    mine = topic_tree(tmp_path)
    assert "software" in mine.route("Please look at my pull request.")
    assert "software" not in mine.route("Pull the cart and file a request.")
    # a phrase longer than the route reads is refused by name, not dropped in silence
    from memtier_plugin.errors import ConfigError
    from memtier_plugin.layers.topics import _parse

    with pytest.raises(ConfigError, match=r"topic software: 'when the build is red': a phrase has at most 4 words"):
        _parse({"software": {"words": ["ci", "when the build is red"]}}, "topics.yaml")


def _standing_hit(id_, content, p, sources, tier="global", requested=False):
    h = Hit(id=id_, content=content, timestamp="2026-01-01T00:00:00Z", session_id="s", agent_id="a",
            role="preference", tier=tier, score=p, sources=list(sources), probability=p)
    if requested:
        h.signals["requested"] = {"value": 1.0, "weight": 0.0, "contribution": 0.0}
    return h


def test_the_global_items_of_one_message_that_apply_are_one_item():
    """Two sentences of one message each apply: one item, the likelier first, the other's id on its line; an item of
    another message, an item k never cuts (requested) and an episode stay items of their own."""
    from memtier_plugin.recall.same_message import one_per_message

    hits = [_standing_hit("g1", "I avoid dairy", 0.9, ["e1"]),
            _standing_hit("ep", "we talked about milk", 0.5, ["ep"], tier="episodic"),
            _standing_hit("g2", "lactose intolerance makes it miserable for me.", 0.6, ["e1"]),
            _standing_hit("g3", "I'm vegetarian.", 0.7, ["e2"]),
            _standing_hit("g4", "Book me aisle seats.", 0.4, ["e1"], requested=True)]
    out, why = one_per_message(hits)
    assert [h.id for h in out] == ["g1", "ep", "g3", "g4"]
    assert out[0].content == "I avoid dairy. lactose intolerance makes it miserable for me."
    assert out[0].also == ["g2"] and why == ["g2: said in the same message as g1, delivered with it"]
    assert "· with g2]" in out[0].line() and out[0].row()["also"] == ["g2"]
    assert one_per_message(out)[1] == []  # nothing left to merge: the same list back


def test_a_message_of_two_standing_sentences_is_delivered_once(host, workspace):
    """Through the hooks: what one message said for good reaches a prompt it applies to as one line of the block."""
    say(host, workspace, "I'm vegetarian. I'm also allergic to peanuts.", project="home", session="s1")
    nodes = [json.loads(line) for line in (workspace / "memory" / "global" / "knowledge.jsonl").read_text().splitlines()]
    ids = [n["id"] for n in nodes if n.get("node_kind")]
    assert len(ids) == 2, nodes
    block = ask(host, workspace, "Suggest a vegetarian dinner recipe without peanuts for tonight.", project="home",
                session="q1")
    lines = [ln for ln in block.splitlines() if "standing" in ln and ln.startswith("- [")]
    if host_mode(host) == "lexical" and not lines:
        return  # words alone may leave both under the threshold: nothing to merge
    assert len(lines) == 1 and "vegetarian" in lines[0] and "peanuts" in lines[0], block
    assert all(i in lines[0] for i in ids)


DINNER = ("New Orleans has great food. Here are some ideas: 1. A crawfish boil at a seafood shack. "
          "2. Dinner at a classic steakhouse in the French Quarter. 3. Shrimp and grits at a Creole bistro. "
          "4. Char-grilled oysters at an oyster bar.")


@pytest.mark.parametrize("reply, kind", [
    ("Let's do the steakhouse.", "pick"),
    ("Number 2.", "pick"),
    ("I'll go with the Creole bistro.", "pick"),
    ("The steakhouse. I don't eat seafood.", "choice"),  # a pick with its reason: a revealed preference
    ("Sounds great!", None),
    ("The steakhouse or the oyster bar, not sure yet.", None),  # two options named: no pick
    ("Give me more options near the French Quarter.", None),  # a request, not a pick
    # the pick said first, a word of the user's own after it that names no other option
    ("Let's do the steakhouse. That sounds like our kind of evening.", "pick"),
    ("Option 3 sounds good, the shrimp and grits. I'll look at the bistro's menu tonight.", "pick"),
    ("Option 2 sounds like a great night to me: a long steak dinner and then dessert somewhere cozy.", "pick"),
    ("Let's do the steakhouse. Or maybe the oyster bar, we'll see later tonight.", None),  # another named after
    ("I think the steakhouse in the French Quarter is closed on Mondays, so that's out.", None),  # told, no pick
])
def test_a_bare_pick_of_an_option_asked_for_is_kept_as_a_pick(reply, kind):
    """PrefEval's choice form without a reason ("Let's do the steakhouse."): the user went for one option when asked,
    which a later request of the kind can bear in mind; no reason says it holds for good, so it is a pick, not a
    preference (layers/picks.py bare_pick)."""
    cands = from_session([("q", "user", "Where should we go for dinner on our trip to New Orleans?"),
                          ("o", "assistant", DINNER), ("s", "user", reply)])
    assert [c.node_kind for c in cands if c.node_kind in ("pick", "choice")] == ([kind] if kind else [])


@pytest.mark.parametrize("reply, option", [
    ("Number 2.", "Dinner at a classic steakhouse in the French Quarter."),
    ("The last one.", "Char-grilled oysters at an oyster bar."),
    ("Option 3 sounds good, the shrimp and grits. I'll look at the bistro's menu tonight.",
     "Shrimp and grits at a Creole bistro."),
    ("I'll go with the crawfish boil.", "A crawfish boil at a seafood shack."),
])
def test_a_pick_says_which_option_it_took(reply, option):
    """"Number 2." alone tells a reader of the ledger, and recall, nothing: a pick is written with the option it
    took, as the offer worded it."""
    cands = from_session([("q", "user", "Where should we go for dinner on our trip to New Orleans?"),
                          ("o", "assistant", DINNER), ("s", "user", reply)])
    assert [c.content for c in cands if c.node_kind == "pick"] == [
        f"Asked 'Where should we go for dinner on our trip to New Orleans?', the user chose: {reply} (the option: "
        f"{option})"]


def test_a_choice_made_by_number_says_which_option_it_was():
    """PrefEval's own choice form picks by number half the time ("I'll go with option 2. The other options seem to
    focus on mainstream books"): the agent handed it must learn what option 2 was. A choice named in words says it."""
    for reply, took in (("I'll go with option 2. The other options with seafood don't appeal to me.",
                         " (the option: Dinner at a classic steakhouse in the French Quarter.)"),
                        ("The steakhouse. I don't eat seafood.", "")):
        cands = from_session([("q", "user", "Where should we go for dinner on our trip to New Orleans?"),
                              ("o", "assistant", DINNER), ("s", "user", reply)])
        assert [c.content for c in cands if c.node_kind == "choice"] == [
            f"Asked 'Where should we go for dinner on our trip to New Orleans?', the user chose: {reply}{took}"]


def test_the_option_written_is_for_the_reader_what_is_matched_is_what_the_user_said(tmp_path):
    """The option beside a pick or choice is written for the agent and the ledger's reader; the item's words, topic
    route and vector are what the user said (the offer's wording brought picks to other questions)."""
    from memtier_plugin.layers.standing import StandingItems, embedded_text
    from memtier_plugin.layers.topics import topic_tree
    from memtier_plugin.layers.workspace_layer import ProjectLedger
    cands = from_session([("q", "user", "Where should we go for dinner on our trip to New Orleans?"),
                          ("o", "assistant", DINNER), ("s", "user", "Number 2.")])
    store = GlobalStore(tmp_path / "memory", fsync=False)
    store.upsert(cands, agent_id="a", session_id="s", project="p", ts=T0)
    store.refresh()
    skills = ProjectLedger(tmp_path / "memory", "skills", "p", fsync=False)
    [item] = [it for it in StandingItems()(store, skills, topic_tree(), "p", T0 + 60) if it.label == "pick"]
    assert "steakhouse" in item.content and "(the option:" in item.content
    assert "steakhouse" not in embedded_text(item) and not any("steak" in t for t in item.tokens)


def test_the_option_written_is_the_items_own_words_not_what_the_offer_says_after_the_list():
    cands = from_session([("q", "user", "Where should we go for dinner on our trip to New Orleans?"),
                          ("o", "assistant", DINNER + " Let me know which one appeals to you."),
                          ("s", "user", "The last one.")])
    assert [c.content.split("(the option: ")[1] for c in cands if c.node_kind == "pick"] == [
        "Char-grilled oysters at an oyster bar.)"]


def test_no_pick_is_read_in_a_long_answer_or_a_chat_that_asked_for_nothing():
    """An assistant chat's long answers and follow-ups are no offer to pick from (LongMemEval-S dev's first 80
    haystacks give no pick): the offer is a short numbered list, the question asks for a choice."""
    long_offer = DINNER + " " + " ".join(["Each of these is lovely in the evening and worth a visit."] * 12)
    for query, offer in (("Where should we go for dinner on our trip to New Orleans?", long_offer),
                         ("We had dinner in New Orleans last night.", DINNER)):
        cands = from_session([("q", "user", query), ("o", "assistant", offer), ("s", "user", "Let's do the steakhouse.")])
        assert [c for c in cands if c.node_kind == "pick"] == [], query[:40]


def test_a_pick_is_delivered_to_a_prompt_that_asks_for_a_choice_only(host, workspace):
    ctx = HookContext(agent_id="assistant", session_id="s-pick", run_id="r1", project="trips",
                      workspace_dir=str(workspace))
    host.before_prompt_build(PromptEvent("Where should we go for dinner on our trip to New Orleans?", timestamp=T0), ctx)
    host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": DINNER}], success=True, timestamp=T0 + 5),
                   ctx)
    ctx2 = HookContext(agent_id="assistant", session_id="s-pick", run_id="r2", project="trips",
                       workspace_dir=str(workspace))
    host.before_prompt_build(PromptEvent("Let's do the steakhouse.", timestamp=T0 + 60), ctx2)
    host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": "Great, a steakhouse it is."}],
                                 success=True, timestamp=T0 + 65), ctx2)
    host.session_end(SessionEndEvent("done", timestamp=T0 + 70), ctx2)
    store = GlobalStore(workspace / "memory", fsync=False)
    store.refresh()
    picks = [n.rec for n in store.current() if n.rec["node_kind"] == "pick"]
    assert [r["provenance"]["form"] for r in picks] == ["pick"]
    assert picks[0]["content"].endswith("the user chose: Let's do the steakhouse. (the option: Dinner at a classic "
                                        "steakhouse in the French Quarter.)")
    # a later prompt that asks for a choice of the kind is handed it; one that asks for none is not, words shared
    block = ask(host, workspace, "We're in Chicago for the weekend. Where should we go for dinner, a steakhouse or "
                "something else?", project="trips", session="s2")
    assert "a past pick" in block and "the user chose: Let's do the steakhouse." in block
    assert "a past pick" not in ask(host, workspace, "The steakhouse dinner in New Orleans was lovely.",
                                    project="trips", session="s3")


def test_a_pick_needs_a_prompt_about_what_its_question_was_about():
    """A pick's "Asked '...?'" reads as a question, near every question by raw cosine: with an embedder it needs the
    prompt's vector less the common direction of prompts at PICK_CCOS or more; without one, the words decide."""
    from memtier_plugin.layers.standing import PICK_CCOS, picked_for

    assert picked_for({"asks": 1.0, "embedded": 1.0, "ccos": PICK_CCOS + 0.05})
    assert not picked_for({"asks": 1.0, "embedded": 1.0, "ccos": PICK_CCOS - 0.03})
    assert not picked_for({"asks": 0.0, "embedded": 1.0, "ccos": 0.4})  # a prompt that asks for no choice
    assert picked_for({"asks": 1.0, "embedded": 0.0, "ccos": 0.0})  # lexical: routed by topic and words
