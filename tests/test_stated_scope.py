"""Issue 25: a standing item the user said is for a kind of request ("Some ground rules for anything you book for
me: ...") applies to every request of that kind, whatever its words or embedding say (MemSidecar §3.2: a knowledge
node records the conditions under which it applies)."""

from __future__ import annotations

import pytest

from conftest import say
from memtier_plugin import plugin
from memtier_plugin.events import HookContext, PromptEvent
from memtier_plugin.host import Host
from memtier_plugin.layers.extract import extract
from memtier_plugin.layers.global_layer import GlobalStore, node_problem
from memtier_plugin.layers.requests import errand_objects, in_scope, scope_kind
from memtier_plugin.layers.standing import same_errand
from memtier_plugin.layers.topics import topic_tree
from memtier_plugin.recall import calibration as cal
from memtier_plugin.recall.packing import Hit

T0 = 1_790_000_000.0
DAY = 86400.0
RULES = ("Hi! I'm planning a work trip to Lisbon. Some ground rules for anything you book for me: I always want an "
         "aisle seat, vegetarian meals, and hotels under $200 a night.")


def test_the_items_of_a_scoped_sentence_carry_the_scope_as_said():
    got = {c.attribute: c.requests for c in extract(RULES, role="user")}
    assert got == {"seat": "anything you book for me", "meal": "anything you book for me",
                   "hotel_budget": "anything you book for me"}
    # a scope said on its own holds for the next sentence only
    said = extract("Ground rules for anything you order for me. I'm allergic to peanuts. I love jazz.", role="user")
    assert [(c.content, c.requests) for c in said] == [("I'm allergic to peanuts.", "anything you order for me"),
                                                       ("I love jazz.", "")]
    # a rule that names the errand it governs states its own scope
    rule = extract("Yes: never book flights before 8am, I'm useless that early.", role="user")
    assert [(c.node_kind, c.requests) for c in rule] == [("rule", "book flights")]
    assert [c.requests for c in extract("Never deploy on Fridays.", role="user")] == [""]
    assert scope_kind("book flights") == "book"
    # what the user says of their own habits is not a rule for the agent's errands
    assert [c.requests for c in extract("I love trying new foods when I travel.", role="user")] == [""]
    assert [c.requests for c in extract("I always want an aisle seat.", role="user")] == [""]


@pytest.mark.parametrize("prompt, inside", [
    ("Fly out from SFO on November 9, come back November 14.", True),
    ("Please book my flight from SFO to Berlin on Dec 1.", True),
    ("Last piece: fly me home from Porto, and one night at a hotel near SFO.", True),
    ("Can you reserve a table for two tonight?", True),
    ("Quick one: v1.4.2 has the booking export fix. Can you push it to production?", False),  # "booking": a noun
    ("Why does this C++ loop overflow?", False),
    ("I read a great book about flights of fancy.", False),  # asks for nothing
    ("", False),
])
def test_a_prompt_is_inside_a_booking_scope_when_it_is_an_errand_that_names_a_booking(prompt, inside):
    assert in_scope(prompt, "anything you book for me") is inside


def test_each_scope_names_its_kind_of_request():
    assert scope_kind("anything you book for me") == "book" == scope_kind("whenever you reserve something")
    assert scope_kind("anything you order for me") == "order"
    assert scope_kind("") == "" == scope_kind("whatever")
    assert in_scope("Order me dinner from the Thai place.", "anything you order for me")
    assert not in_scope("Order me dinner from the Thai place.", "")  # no scope, nothing inside it


def test_an_item_about_one_sub_topic_does_not_apply_to_a_request_about_another():
    tree = topic_tree()
    seat, meal, hotel = (tree.route(t) for t in ("I always want an aisle seat", "I always want vegetarian meals",
                                                  "I always want hotels under $200 a night"))
    flight, lodging = tree.route("Please book my flight to Berlin"), tree.route("Can you find me a hotel in Lisbon")
    assert not same_errand(hotel, tree.route(errand_objects("Please book my flight to Berlin")))
    assert same_errand(hotel, tree.route(errand_objects("Please book me a hotel in Porto")))
    both = tree.route("Fly me home from Porto, and one night at a hotel near SFO")
    assert same_errand(seat, flight) and not same_errand(seat, lodging) and same_errand(seat, both)
    assert same_errand(hotel, lodging) and same_errand(hotel, both)
    assert same_errand(meal, flight) and same_errand(meal, lodging)  # under no sub-topic: not told apart


def test_the_scope_is_stored_with_the_node_and_a_revision_keeps_it(tmp_path):
    store = GlobalStore(tmp_path)
    store.upsert(extract(RULES, role="user"), agent_id="a", session_id="s1", project="p", ts=T0)
    store.upsert(extract("Also, I've changed my mind on hotels: my budget is now up to $300 a night.", role="user"),
                 agent_id="a", session_id="s2", project="p", ts=T0 + DAY)
    current = {n.rec["content"]: (n.rec.get("applies") or {}).get("requests") for n in store.current("p", T0 + DAY)}
    assert current == {"I always want an aisle seat": "anything you book for me",
                       "I always want vegetarian meals": "anything you book for me",
                       "I've changed my mind on hotels: my budget is now up to $300 a night.":
                           "anything you book for me"}
    rec = next(n.rec for n in store.current("p", T0 + DAY) if "aisle" in n.rec["content"])
    assert node_problem(rec) is None
    assert node_problem({**rec, "applies": {**rec["applies"], "requests": 7}}) == \
        "knowledge 'applies.requests' is not a text of at most 200 characters"


def _hit(hid, layer="global", **sig):
    base = {"sem": 0.0, "cos": 0.2, "topic": 0.0, "lexical": 0.0, "route": 0.0, "embedded": 1.0,
            "prompt_words": 0.5, "asks": 1.0, "margin": -0.1, "nearest": 0.0, "requested": 0.0}
    base.update(sig)
    tier, role = ("procedural", "skill") if layer == "skill" else ("global", "preference")
    return Hit(id=hid, content="x", timestamp="", session_id="", agent_id="", role=role, tier=tier, score=0.0,
               signals={k: {"value": v, "weight": 0.0, "contribution": 0.0} for k, v in base.items()})


def test_a_requested_item_is_on_the_fixed_probability_and_does_not_raise_the_choice_rules_bar():
    c = cal.load(cal.shipped_path("paper"))
    low = _hit("meal")
    assert c.probability(low) < 0.05
    meal, lexical = _hit("meal", requested=1.0), _hit("lex", requested=1.0, embedded=0.0)
    assert c.probability(meal) == cal.FIXED["requested"] == c.probability(lexical)
    assert c.probability(_hit("sk", layer="skill", requested=1.0)) < 0.5  # a skill is never said for a request
    # the choice rule's bar is half the best probability on the fitted scale: a requested item sets none (were its
    # fixed 0.8 the best, the bar would be 0.4 and this rule, found by the model at 0.25, would be left out)
    rule = _hit("rule", sem=0.6, cos=0.45, topic=0.6, route=0.4, margin=0.0, nearest=1.0)
    p_rule = c.probability(rule)
    assert c.choice["threshold"] < p_rule < cal.FIXED["requested"] * c.choice["relative"]
    kept, left = c.apply([meal, rule])
    assert [h.id for h in kept] == ["meal", "rule"], left


def _ask(host, ws, text, session, project="other"):
    ctx = HookContext(agent_id="b", session_id=session, run_id=f"{session}-q", project=project,
                      workspace_dir=str(ws))
    return host.before_prompt_build(PromptEvent(text, timestamp=T0 + 20 * DAY), ctx).prepend_context or ""


@pytest.mark.parametrize("embedder", ["none", "auto"])
def test_through_the_host_the_rules_said_for_bookings_reach_a_booking_in_another_project(workspace, monkeypatch,
                                                                                         embedder):
    monkeypatch.setenv("MEMTIER_STANDING__EMBEDDER", embedder)
    host = Host()
    host.register(plugin, "memtier")
    say(host, workspace, RULES, session="s1", at=T0)
    flight = _ask(host, workspace, "New project: please book my flight from SFO to Berlin on Dec 1.", "q1")
    assert "vegetarian meals" in flight and "aisle seat" in flight, flight
    # the block says what the user said it for
    meal = next(line for line in flight.splitlines() if "vegetarian meals" in line)
    assert "standing preference" in meal and "said for: anything you book for me]" in meal, meal
    hotel = _ask(host, workspace, "Can you book me a hotel in Lisbon near the venue?", "q2")
    assert "under $200" in hotel and "aisle seat" not in hotel, hotel
    # a rule that names its errand: every flight booking, no hotel
    say(host, workspace, "Never book flights before 8am, I'm useless that early.", session="s2", at=T0 + DAY)
    home = _ask(host, workspace, "Last piece: fly me home from Porto on the 16th.", "q4")
    assert "before 8am" in next(line for line in home.splitlines() if "said for: book flights" in line), home
    porto = _ask(host, workspace, "Can you find me a hotel in Porto for two nights?", "q5")
    assert not [line for line in porto.splitlines() if "standing" in line and "before 8am" in line], porto
    code = _ask(host, workspace, "Why does this C++ loop overflow when the counter passes 2^31?", "q3")
    assert "standing" not in code, code


def test_an_amount_in_the_agents_offer_does_not_override_the_users_budget(workspace, monkeypatch):
    """A pick is searched with the offer ("hotels within $300: Infante Sagres ($284) or ..."); the offer's amounts
    are the agent's words and set no requirement of the user's, so the stored budget is still handed over. The
    user's own "a hotel under $400 this time" does override it."""
    monkeypatch.setenv("MEMTIER_STANDING__EMBEDDER", "none")
    host = Host()
    host.register(plugin, "memtier")
    say(host, workspace, "I've changed my mind on hotels: my budget is now up to $300 a night.", session="s1", at=T0)
    ctx = HookContext(agent_id="a", session_id="s2", run_id="s2-r", project="p", workspace_dir=str(workspace))
    offer = "For hotels within $300 in Porto: Infante Sagres ($284) or the Porto Marriott ($231, Bonvoy)."
    msgs = [{"role": "user", "content": "Porto for two nights, please."}, {"role": "assistant", "content": offer}]

    def block(text):
        event = PromptEvent(text, messages=[*msgs, {"role": "user", "content": text}], timestamp=T0 + DAY)
        return host.before_prompt_build(event, ctx).prepend_context or ""

    def standing(text):
        return [line for line in block(text).splitlines() if "standing" in line and "$300" in line]

    assert standing("Infante Sagres this time, I deserve it.")
    assert not standing("Infante Sagres this time, a hotel under $400 is fine for once.")


def test_the_user_sees_what_an_item_was_said_for_in_inspect_and_the_ui(workspace, monkeypatch):
    from conftest import run_cli
    from memtier_plugin.bridges.ui_views import global_layer
    from memtier_plugin.config import load_config
    from memtier_plugin.memory import Memory

    monkeypatch.setenv("MEMTIER_STANDING__EMBEDDER", "none")
    host = Host()
    host.register(plugin, "memtier")
    say(host, workspace, RULES, session="s1", at=T0)
    say(host, workspace, "I love jazz.", session="s2", at=T0 + DAY)
    text = run_cli("inspect", "topics").stdout
    seat = next(line for line in text.splitlines() if "aisle seat" in line)
    assert "said for: anything you book for me" in seat, text
    assert "said for" not in next(line for line in text.splitlines() if "jazz" in line)
    rows = {r["content"]: r for t in global_layer(Memory(load_config()), frozenset())["topics"] for r in t["items"]}
    assert rows["I always want vegetarian meals"]["said_for"] == "anything you book for me"
    assert rows["I love jazz."]["said_for"] == ""


def test_a_correction_keeps_a_stated_scope_and_rereads_a_rules_own(tmp_path):
    """``memtier correct``: "anything you book for me" was said beside the item and stays; "book flights" was the
    rule's own words, so the corrected words say the scope again ("book hotels") or none."""
    store = GlobalStore(tmp_path)
    store.upsert(extract(RULES, role="user") + extract("Never book flights before 8am.", role="user"),
                 agent_id="a", session_id="s1", project="p", ts=T0)
    by = {n.rec["content"]: n.id for n in store.current("p", T0)}
    seat = store.revise(by["I always want an aisle seat"], "I always want a window seat", ts=T0 + DAY)
    assert seat["applies"]["requests"] == "anything you book for me"
    hotel = store.revise(by["Never book flights before 8am."], "Never book hotels without breakfast.", ts=T0 + DAY)
    assert hotel["applies"]["requests"] == "book hotels"
    plain = store.revise(hotel["id"], "Never schedule anything before 8am.", ts=T0 + 2 * DAY)
    assert "requests" not in plain["applies"] and plain["applies"]["projects"] == "*"
