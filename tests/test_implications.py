"""Issue 25: a standing item that bears on a request by world knowledge ("I have a tree nut allergy" and "a
dairy-free milk for my coffee") is delivered to it, though the two share no word, topic or nearby embedding
(MemSidecar §3.2: a knowledge node records the conditions under which it applies; layers/implications.py)."""

from __future__ import annotations

import logging

import pytest

from conftest import say
from memtier_plugin.errors import ConfigError
from memtier_plugin.events import HookContext, PromptEvent
from memtier_plugin.layers.implications import _parse, implications
from memtier_plugin.recall import calibration as cal
from memtier_plugin.recall.packing import Hit

T0 = 1_790_000_000.0
DAY = 86400.0
MILK = "I'm looking for a dairy-free milk for my morning coffee. What would you recommend?"


@pytest.mark.parametrize("item, prompt", [
    ("I have a tree nut allergy.", MILK),
    ("Raw fish is a hard no for me.", "What should I eat on my trip to Lima, Peru?"),
    ("I never rent cars abroad.", "What's a good itinerary for a week in Iceland in summer?"),
    ("After my knee reconstruction, I can't play anything with sudden cutting or jumping.",
     "I want to join a recreational sports league to meet people. Which sport should I try?"),
    ("Caffeine and I don't mix.", "I have a big exam tomorrow and need to stay alert tonight. Any tips?"),
    ("I'm celiac.", "Which pizzerias in Naples should I try?"),
    # a tenth author's (probe_f's read half, 2026-12-07)
    ("My apartment lease caps pets at 25 pounds.",
     "We're ready to adopt our first dog. Which breeds are great with kids?"),
    ("I live in a 400-square-foot studio.", "We're hosting family for the holidays. What dining table should I buy?"),
    ("I do all my own maintenance, so I avoid anything that needs dealer tools.",
     "I want something fun to drive on weekends. Which sports cars should I consider?"),
    ("I travel with my two large dogs.", "Can you suggest a place for a long weekend on the coast of Maine?"),
    ("Because I work twelve-hour hospital shifts, nobody is home for most of the day.", "Which breed would suit me?"),
    ("Anything out on the water would have me green within twenty minutes.",
     "I have a week in Croatia and want to see Split, Hvar and Dubrovnik. How should I plan the legs between them?"),
    # an eleventh author's (probe_g's read half, 2026-12-07)
    ("I have chronic kidney disease and keep to a low-potassium diet.",
     "I'm trying to eat healthier snacks. What should I stock up on?"),
    ("I'm Deaf, and I can't hear a standard fire alarm.", "Help me book a place to stay in Chicago for a conference."),
    ("I've been sober for six years.", "I'm feeling a cough coming on. Which over-the-counter remedies would help?"),
    ("I'm a flight attendant, so I'm away from home for days at a time.",
     "I'd like some company at home. What animal should I think about getting?"),
    ("I take my 90-pound Newfoundland with me on every trip.", "We're planning a weekend in Asheville. Where should we stay?"),
    ("I've worked fully remotely for five years.", "I'm looking for a new job. Which companies should I target?"),
    ("Loud, packed crowds overwhelm me very quickly.",
     "My nephew loves American football. What's a fun way for us to enjoy a game together?"),
])
def test_an_item_bears_on_a_prompt_that_names_what_its_concept_bears_on(item, prompt):
    im = implications()
    assert im.concepts(item) & im.named(prompt)


@pytest.mark.parametrize("item, prompt", [
    ("I have a tree nut allergy.", "How do I reverse a linked list in Python?"),  # names nothing it bears on
    ("I love green tea.", MILK),  # holds no concept
    ("Raw fish is a hard no for me.", "Which SUV should I buy for snowy winters?"),
    ("I never rent cars abroad.", "What should I eat on my trip to Lima, Peru?"),  # a trip is not a road trip
    ("I'm celiac.", "Is this offer free of any dairy clauses?"),  # "free ... dairy" is not the phrase "dairy free"
    ("I live in a 400-square-foot studio.", "How do I reverse a linked list in Python?"),
    ("I do all my own maintenance, so I avoid anything that needs dealer tools.", "Where should we eat in Rome?"),
    ("I have chronic kidney disease.", "Which hiking boots should I buy?"),
    ("I'm Deaf.", "What's a good recipe for banana bread?"),
])
def test_an_item_bears_on_no_prompt_that_names_none_of_its_objects(item, prompt):
    im = implications()
    assert not im.concepts(item) & im.named(prompt)


def test_a_users_file_adds_concepts_and_words_and_a_bad_one_is_ignored_with_a_warning(tmp_path, caplog):
    root = tmp_path / "memory"
    (root / "global").mkdir(parents=True)
    user = root / "global" / "implications.yaml"
    user.write_text("tree-nuts:\n  said: [nutella]\n  bears_on: [pie crust]\nbees:\n  said: [bee sting]\n"
                    "  bears_on: [picnic, orchard]\n", encoding="utf-8")
    im = implications(root)
    assert "tree-nuts" in im.concepts("Nutella makes me ill.") & im.named("What pie crust should I make?")
    assert "bees" in im.concepts("A bee sting sends me to hospital.") & im.named("Plan a picnic for Saturday?")
    assert "tree-nuts" in im.concepts("I have a tree nut allergy.") & im.named(MILK)  # the built-in words stay
    user.write_text("bees:\n  said: [bee sting]\n  bear_on: [picnic]\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        im = implications(root)
    assert "bear_on" in caplog.text and "implications.yaml" in caplog.text
    assert "tree-nuts" in im.concepts("I have a tree nut allergy.")  # the built-in concepts still hold


@pytest.mark.parametrize("doc, key", [
    ({"Tree Nuts": {"said": ["x"], "bears_on": ["y"]}}, "'Tree Nuts'"),
    ({"bees": {"said": ["x"]}}, "concept bees: bears_on must be a list"),
    ({"bees": {"said": [], "bears_on": ["y"]}}, "concept bees: said must be a list"),
    ({"bees": {"said": ["a b c d e"], "bears_on": ["y"]}}, "at most 4 words"),
    ({"bees": ["x"]}, "concept bees"),
])
def test_a_bad_implications_document_names_the_concept_and_key(doc, key):
    with pytest.raises(ConfigError) as err:
        _parse(doc, "f.yaml")
    assert key in str(err.value) and str(err.value).startswith("f.yaml: ")


def _hit(id_: str, implied: bool, asks: bool = True, ccos: float = 0.0) -> Hit:
    sig = {"implied": implied, "asks": asks, "embedded": 1.0, "cos": 0.45, "ccos": ccos, "sem": 0.6, "topic": 0.5,
           "route": 0.5, "nearest": 0.0, "margin": -0.15, "prompt_words": 0.4}
    return Hit(id=id_, content="I have a tree nut allergy.", timestamp="", session_id="s", agent_id="a",
               role="constraint", tier="global", score=0.1,
               signals={k: {"value": float(v), "weight": 0.0, "contribution": 0.0} for k, v in sig.items()})


def test_world_knowledge_lifts_an_items_logit_and_frees_it_from_the_share_of_a_nearer_one():
    import math

    c = cal.load(cal.shipped_path("paper"))
    logit = lambda p: math.log(p / (1 - p))  # noqa: E731
    # an allergy a little nearer the prompt than an unrelated item (ccos 0.05), far under the nearest one (margin)
    lifted, plain = c.probability(_hit("g1", True, ccos=0.05)), c.probability(_hit("g1", False, ccos=0.05))
    assert math.isclose(logit(lifted) - logit(plain), cal.IMPLIED_LOGIT, abs_tol=1e-9)
    assert c.probability(_hit("g1", True, asks=False)) == c.probability(_hit("g1", False, asks=False))  # no request
    # beside a far nearer preference ("I avoid dairy"), the share of the best one would leave the allergy out
    near = _hit("g0", False, ccos=0.3)
    near.signals["margin"]["value"], near.signals["nearest"]["value"] = 0.0, 1.0
    best = c.model_probability(near)
    assert plain < c.choice["relative"] * best and plain < c.thresholds["global"] <= lifted
    kept, _ = c.apply([near, _hit("g1", True, ccos=0.05)])
    assert [h.id for h in kept] == ["g0", "g1"]
    kept, left = c.apply([near, _hit("g1", False, ccos=0.05)])
    assert [h.id for h in kept] == ["g0"] and "asks for a choice" in left[0]


def ask(host, ws, text, session):
    ctx = HookContext(agent_id="a", session_id=session, run_id=f"{session}-q", project="p", workspace_dir=str(ws))
    return host.before_prompt_build(PromptEvent(text, timestamp=T0 + 30 * DAY), ctx).prepend_context or ""


def test_a_request_is_handed_the_preference_it_bears_on_by_world_knowledge(mode_host, workspace):
    host = mode_host
    for i, text in enumerate(["I avoid dairy.", "I have a tree nut allergy.", "I always want an aisle seat.",
                              "I'm a huge fan of jazz and go to concerts monthly."]):
        say(host, workspace, text, session=f"s{i}", at=T0 + i * DAY)
    # "I avoid dairy" is far nearer the prompt by every signal, and the allergy stood far under it
    block = ask(host, workspace, MILK, "q1")
    assert "avoid dairy" in block and "tree nut" in block and "jazz" not in block
    # a prompt that asks for nothing, or names nothing the allergy bears on, is not handed it
    assert "tree nut" not in ask(host, workspace, "Restart the payments worker on pay-app-2.", "q2")
    assert "tree nut" not in ask(host, workspace, "Which laptop should I buy for video editing?", "q3")


def test_the_scorer_marks_what_an_item_bears_on_and_the_switch_turns_it_off(tmp_path):
    from memtier_plugin.config import load_config
    from memtier_plugin.layers.standing import Item, StandingScorer
    from memtier_plugin.layers.topics import topic_tree

    nut = Item(id="n", content="I have a tree nut allergy.", label="constraint", tier="global", timestamp="")
    jazz = Item(id="j", content="I love jazz.", label="preference", tier="global", timestamp="")
    pick = Item(id="p", content="Asked 'Which dessert?', the user chose: Number 2. (the option: Almond cake.)",
                label="pick", tier="global", timestamp="")
    cfg = load_config(None, flags={"paths.workspace": str(tmp_path)})
    sig = {it.id: s for it, _, s in StandingScorer(cfg, topic_tree()).score(MILK, [nut, jazz, pick])}
    assert sig["n"]["implied"] == 1.0 and sig["j"]["implied"] == 0.0
    assert sig["p"]["implied"] == 0.0  # the option written beside a pick is not what the user said
    ids = [h.id for h in StandingScorer(cfg, topic_tree()).hits(MILK, [nut, jazz])]
    assert "n" in ids  # a candidate, however low its applicability
    off = load_config(None, flags={"paths.workspace": str(tmp_path), "standing.implications": False})
    assert all(s["implied"] == 0.0 for _, _, s in StandingScorer(off, topic_tree()).score(MILK, [nut, jazz]))
    assert not StandingScorer(off, topic_tree()).hits(MILK, [nut, jazz])  # no word, topic or vector reaches it


def test_a_choice_bears_on_what_its_reply_says_not_on_the_question_it_answered(tmp_path):
    from memtier_plugin.config import load_config
    from memtier_plugin.layers.standing import Item, StandingScorer
    from memtier_plugin.layers.topics import topic_tree

    asked = Item(id="q", content="Asked 'Which coffee should I try in Rome?', the user chose: Number 2, the quiet bar "
                 "by the Pantheon. (the option: Espresso at a standing bar.)", label="choice", tier="global",
                 timestamp="")
    said = Item(id="r", content="Asked 'Which drink should I order?', the user chose: The herbal tea. Caffeine "
                "keeps me up all night.", label="choice", tier="global", timestamp="")
    cfg = load_config(None, flags={"paths.workspace": str(tmp_path)})
    prompt = "I have a big exam tomorrow and need to stay alert tonight. Any tips?"
    sig = {it.id: s for it, _, s in StandingScorer(cfg, topic_tree()).score(prompt, [asked, said])}
    assert sig["q"]["implied"] == 0.0 and sig["r"]["implied"] == 1.0
