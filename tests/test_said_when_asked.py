"""What a user says while choosing among offered options is said about what was being chosen (``applies.asked``).

"Number 2. Boats are a no-go for me, I get horribly seasick." answering "What's a good way to get from Athens to
Santorini?" bears on a later trip between islands, which "I get horribly seasick" alone is far from: the extractor
keeps the question with the item, the Global layer stores it, and the scorer reads the item by whichever of the two
is nearer the prompt.
"""

from __future__ import annotations

import json

import numpy as np

import test_gate as TG
from memtier_plugin.layers import gate as G
from memtier_plugin.layers.extract import Candidate
from memtier_plugin.layers.global_layer import GlobalStore, node_problem
from memtier_plugin.layers.picks import answered, asked_in
from memtier_plugin.layers.session import from_session

QUESTION = "What's a good way to get from Athens to Santorini?"
OFFER = "Here are a few options: 1. The overnight ferry. 2. A short flight. 3. A high-speed catamaran."
REPLY = "Number 2. Boats are a no-go for me, I get horribly seasick."  # a pick, and a reason the rules take
T0 = 1_790_000_000.0


def exchange(question=QUESTION, offer=OFFER, reply=REPLY):
    return [("q", "user", question), ("o", "assistant", offer), ("s", "user", reply)]


def test_a_reply_that_chooses_among_offered_options_keeps_the_question_it_answered():
    cands = [c for c in from_session(exchange()) if c.node_kind not in ("pick", "choice")]
    assert cands and all(c.asked == QUESTION and c.entry_ids == ["s"] for c in cands)
    assert answered(exchange()) == {"s": QUESTION}


def test_a_choice_node_holds_the_question_and_what_it_was_said_with_keeps_none():
    """"I'll go with the parka. I'd rather avoid anything made from animals." is a choice node, written with the
    question ("Asked ..., the user chose: ..."); the preference said in it keeps no question of its own, or every
    prompt the question is near would be handed both (PrefEval dev's choice form: 0.955 -> 0.945 own preferences,
    0.168 -> 0.194 wrong items a question when it did)."""
    coats = "Here are a few options: 1. A wool peacoat. 2. A leather jacket. 3. A shearling coat. 4. A parka."
    cands = from_session(exchange(question="What kind of winter coat should I buy this year?", offer=coats,
                                  reply="I'll go with the parka. I'd rather avoid anything made from animals."))
    assert sorted(c.node_kind for c in cands) == ["choice", "preference"]
    assert all(c.asked == "" for c in cands)
    # the same reason after a bare pick (a pick node, dropped beside the reason: picks.said_more) keeps it
    cands = from_session(exchange())
    assert sorted(c.node_kind for c in cands) == ["pick", "preference"]
    assert [c.asked for c in cands if c.node_kind == "preference"] == [QUESTION]


def test_no_question_is_kept_where_nothing_was_asked_or_offered():
    said = "I avoid boats of any kind because I get horribly seasick."
    # said on its own, or after an assistant message that offers nothing
    assert all(c.asked == "" for c in from_session([("s", "user", said)]))
    assert all(c.asked == "" for c in from_session(exchange(offer="Sure, noted.", reply=said)))
    # the user's message before the offer asked for no choice: a story, not a question about what to pick
    story = "We just got back from Greece last week."
    assert asked_in((story, "q"), OFFER, said) == ""
    assert all(c.asked == "" for c in from_session(exchange(question=story, reply=said)))
    # a follow-up in a coding task is no choice among offered options
    code = "Which of these should I use here? def total(xs): return sum(xs)"
    assert asked_in((code, "q"), OFFER, said) == ""
    assert answered([("s", "user", said)]) == {}


def test_the_question_is_kept_on_one_line_and_bounded():
    long_q = "Which hotel should I book?\n\n" + "It has to be quiet, near the old town. " * 8
    got = asked_in((long_q, "q"), OFFER, "Number 2.")
    assert got.startswith("Which hotel should I book?") and len(got) <= 200 and "  " not in got


def test_the_gate_keeps_the_question_a_pick_s_reason_answered():
    """A reason the rules pass over and the learned gate takes (here a bag-of-words gate: the path, not quality)."""
    g = TG._bag_gate()
    msgs = exchange(question="How should I fly to Lisbon next month?",
                    offer="Options: 1. The 6 a.m. flight. 2. The noon flight. 3. The evening flight.",
                    reply="The noon flight. Early flights are my kryptonite.")
    got = G.candidates(msgs, g, TG.BAG)
    assert [(c.content, c.asked) for c in got] == [("Early flights are my kryptonite.",
                                                     "How should I fly to Lisbon next month?")]
    # the same sentence said on its own keeps no question
    assert [c.asked for c in G.candidates([("s", "user", "Early flights are my kryptonite.")], g, TG.BAG)] == [""]


def test_the_global_layer_stores_the_question_redacted_and_validates_it(tmp_path):
    store = GlobalStore(tmp_path)
    secret = "sk-" + "a1B2" * 12
    cand = Candidate("preference", "I get horribly seasick", entry_ids=["s"],
                     asked=f"Which ferry should I take? my key is {secret}")
    store.upsert([cand], agent_id="a", session_id="s1", project="p", ts=T0)
    (rec,) = [n.rec for n in store.current("p", T0)]
    assert rec["applies"]["asked"].startswith("Which ferry should I take?") and secret not in rec["applies"]["asked"]
    ledgers = [f.read_text() for f in tmp_path.rglob("*.jsonl")]
    assert ledgers and not any(secret in text for text in ledgers)
    assert node_problem(rec) is None
    assert node_problem({**rec, "applies": {**rec["applies"], "asked": ["x"]}}) == \
        "knowledge 'applies.asked' is not a text of at most 200 characters"
    # an item said on its own has no such key
    store.upsert([Candidate("preference", "I always want an aisle seat", entry_ids=["t"])], agent_id="a",
                 session_id="s2", project="p", ts=T0 + 1)
    aisle = next(n.rec for n in store.current("p", T0 + 1) if "aisle" in n.rec["content"])
    assert "asked" not in aisle["applies"]


class Table:
    """An embedder that gives each known text a fixed unit vector (the path, not quality)."""

    name = "table-test"

    def __init__(self, vectors: dict[str, np.ndarray]):
        self.vectors = vectors

    def embed(self, texts):
        out = []
        for t in texts:
            v = next((v for k, v in self.vectors.items() if k in t), np.array([0.0, 0.0, 0.0, 1.0]))
            out.append(np.asarray(v, dtype=np.float32) / np.linalg.norm(v))
        return np.vstack(out)


def test_the_scorer_reads_an_item_by_the_question_it_answered_when_that_is_nearer():
    from memtier_plugin.config import load_config
    from memtier_plugin.layers.standing import Item, StandingScorer
    from memtier_plugin.layers.topics import topic_tree

    prompt = "How do I get from Naples to Capri?"
    emb = Table({"seasick": np.array([1.0, 0.0, 0.0, 0.2]), "Santorini": np.array([0.0, 1.0, 0.0, 0.2]),
                 "Capri": np.array([0.0, 1.0, 0.1, 0.2])})
    scorer = StandingScorer(load_config(None), topic_tree(), emb)
    said = dict(content="I get horribly seasick", label="preference", tier="global", timestamp="")
    plain = Item(id="plain", **said)
    asked = Item(id="asked", asked=QUESTION, **said)
    sig = {it.id: s for it, _, s in scorer.score(prompt, [plain, asked])}
    assert sig["asked"]["cos"] > 0.9 > 0.2 > sig["plain"]["cos"]
    # a prompt nearer the item's own words than the question keeps the item's own vector
    sig = {it.id: s for it, _, s in scorer.score("I feel seasick on boats", [plain, asked])}
    assert np.isclose(sig["asked"]["cos"], sig["plain"]["cos"])


def test_through_the_hooks_the_node_keeps_the_question_and_inspect_shows_it(mode_host, workspace):
    """The exchange lived as an agent lives it (a prompt, the assistant's offer at agent_end, the reply as the next
    prompt): the node in the ledger holds the question, and `memtier inspect topics` says when it was said."""
    from conftest import run_cli
    from memtier_plugin.events import AgentEndEvent, HookContext, PromptEvent, SessionEndEvent

    ctx = HookContext(agent_id="assistant", session_id="s1", run_id="r1", project="p", workspace_dir=str(workspace))
    mode_host.before_prompt_build(PromptEvent(QUESTION, timestamp=T0), ctx)
    mode_host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": OFFER}], success=True,
                                 timestamp=T0 + 5), ctx)
    ctx2 = HookContext(agent_id="assistant", session_id="s1", run_id="r2", project="p", workspace_dir=str(workspace))
    mode_host.before_prompt_build(PromptEvent(REPLY, timestamp=T0 + 30), ctx2)
    mode_host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": "Booked the flight."}], success=True,
                                 timestamp=T0 + 35), ctx2)
    mode_host.session_end(SessionEndEvent("done", timestamp=T0 + 40), ctx2)
    ledger = workspace / "memory" / "global" / "knowledge.jsonl"
    nodes = [json.loads(line) for line in ledger.read_text().splitlines()]
    said = [n for n in nodes if n.get("kind") == "knowledge" and "seasick" in n["content"]]
    # the preference keeps the question beside its words (the bare pick is not kept beside a reason)
    assert [(n["node_kind"], n["applies"].get("asked")) for n in said] == [("preference", QUESTION)]
    out = run_cli("inspect", "topics", env={"MEMTIER_WORKSPACE": str(workspace)}).stdout
    assert f"said when asked: {QUESTION[:60]}" in out


def test_a_semicolon_between_two_clauses_is_prose_and_one_ending_a_line_is_code():
    """A reply that chooses with its reason after a semicolon is a choice among options, not a coding follow-up: it
    was read as code (no choice node, no question kept) while any semicolon counted."""
    from memtier_plugin.layers.picks import among_options

    prose = "The short flight. I never take boats; I get horribly seasick."
    assert among_options((QUESTION, "q"), prose)
    (chose,) = [c for c in from_session(exchange(reply=prose)) if c.node_kind == "choice"]
    assert QUESTION in chose.content and "seasick" in chose.content and chose.entry_ids == ["q", "o", "s"]
    for code in ("Use this: int total = 0;\nfor (x of xs) total += x;", "x = 1;", "if (ok) { go(); }",
                 "def f(x):\n    return x"):
        assert not among_options((QUESTION, "q"), code), code


def test_asked_in_keeps_no_question_for_a_reply_that_is_a_choice_node():
    """The rule is asked_in's own, so the rules' items and the learned gate's (picks.answered) follow it alike."""
    coats = "Here are a few options: 1. A wool peacoat. 2. A leather jacket. 3. A shearling coat. 4. A parka."
    query = ("What kind of winter coat should I buy this year?", "q")
    assert asked_in(query, coats, "I'll go with the parka. I'd rather avoid anything made from animals.") == ""
    assert asked_in(query, coats, "Number 4.") == query[0]
    msgs = [("q", "user", query[0]), ("o", "assistant", coats),
            ("s", "user", "I'll go with the parka. I'd rather avoid anything made from animals.")]
    assert answered(msgs) == {}
