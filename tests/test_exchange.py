"""An episode delivered with the other half of its exchange (packing.exchange, recall/exchange.py)."""

import pytest

from memtier_plugin.config import load_config
from memtier_plugin.evaluation.delivered import covered
from memtier_plugin.recall.exchange import other_half
from memtier_plugin.recall.packing import Hit, pack
from memtier_plugin.recall.retriever import Retriever
from memtier_plugin.store import tombstones
from memtier_plugin.store.episodic import Ledger
from memtier_plugin.tokenize import count_tokens

NOW = 1_780_000_000.0
DAY = 86400.0


def _add(ledger, session, text, role, days_ago, agent="a", project="home"):
    return ledger.add(agent_id=agent, session_id=session, project=project, content=text, role=role,
                      timestamp=NOW - days_ago * DAY)


@pytest.fixture
def talk(workspace):
    root = workspace / "memory"
    ledger = Ledger(root)
    ids = {
        "q": _add(ledger, "s1", "What colour did we paint the guest bedroom walls?", "user", 30)["id"],
        "a": _add(ledger, "s1", "Sage green, two coats, with white trim around the window.", "assistant", 30)["id"],
        "q2": _add(ledger, "s1", "And the hallway carpet, when does it arrive?", "user", 30)["id"],
        "a2": _add(ledger, "s1", "Thursday morning, between nine and noon.", "assistant", 30)["id"],
        "tool": _add(ledger, "s1", "calendar.add(Thursday 9-12 carpet delivery)", "tool", 30)["id"],
        "other": _add(ledger, "s2", "Sage tea helps with a sore throat.", "assistant", 10)["id"],
    }
    return root, ids


def _recall(query, **flags):
    r = Retriever(load_config(flags=flags))
    return r, r.recall(query, agent_id="a", project="home", agents=["a"], now=NOW, record_trace=False)


def test_each_half_finds_the_other_and_only_its_own(talk):
    root, ids = talk
    r, _ = _recall("bedroom walls")
    ep = r.episodic
    doc = {k: ep.pos[v] for k, v in ids.items()}
    assert other_half(ep, doc["q"]) == doc["a"]
    assert other_half(ep, doc["a"]) == doc["q"]
    assert other_half(ep, doc["q2"]) == doc["a2"]
    assert other_half(ep, doc["a2"]) == doc["q2"]
    assert other_half(ep, doc["tool"]) is None  # a tool call is no half of an exchange
    assert other_half(ep, doc["other"]) is None  # a reply that opened its session answers nothing


def test_a_runs_tool_calls_lie_between_a_prompt_and_its_answer(workspace):
    ledger = Ledger(workspace / "memory")
    q = _add(ledger, "s1", "Is the staging database up?", "user", 2)["id"]
    interim = _add(ledger, "s1", "Checking the staging database now.", "assistant", 2)["id"]
    _add(ledger, "s1", "shell(pg_isready -h staging-db) -> accepting connections", "tool", 2)
    _add(ledger, "s1", "Someone else's note in the same session id.", "assistant", 2, agent="b")
    answer = _add(ledger, "s1", "Yes: staging-db is accepting connections on 5432.", "assistant", 2)["id"]
    nxt = _add(ledger, "s1", "Good, run the migration.", "user", 2)["id"]
    r, _ = _recall("staging database")
    ep = r.episodic
    doc = {i: ep.pos[i] for i in (q, answer, nxt)}
    assert other_half(ep, doc[q]) == doc[answer]  # the run's last answer, the tool call and b's note skipped
    assert other_half(ep, doc[answer]) == doc[q]
    assert other_half(ep, doc[nxt]) is None  # no answer yet
    assert other_half(ep, doc[q], reach=2) == ep.pos[interim]  # looked no further than its reach


def test_a_prompt_is_delivered_with_its_reply_within_the_budget(talk):
    root, ids = talk
    _, off = _recall("which colour did we paint the bedroom walls", **{"packing.exchange": 0})
    q = next(h for h in off.hits if h.id == ids["q"])
    assert q.exchange == "" and "Sage green" not in q.line()
    _, on = _recall("which colour did we paint the bedroom walls", **{"packing.exchange": 2})
    q = next(h for h in on.hits if h.id == ids["q"])
    assert q.exchange_id == ids["a"] and "Sage green" in q.exchange
    assert f"(answered in {ids['a']}: Sage green" in on.block
    # the reply is in the block once: as the prompt's context, not again as an item of its own
    assert ids["a"] not in {h.id for h in on.hits}
    assert any(why.startswith(f"{ids['a']}: repeats") for why in on.left_out) or \
        ids["a"] not in {h.id for h in on.candidates}
    # an evaluation scores what the block shows: the prompt's item stands for both turns
    assert covered(q, {ids["q"]: "D1:1", ids["a"]: "D1:2"}) == {"D1:1", "D1:2"}
    # the context is counted in the item's tokens, so the budget bounds the block with it
    assert on.tokens == sum(count_tokens(h.line()) for h in on.hits)
    assert count_tokens(q.line()) > count_tokens(next(h for h in off.hits if h.id == ids["q"]).line())


def test_a_reply_carries_the_prompt_it_answered(talk):
    root, ids = talk
    _, res = _recall("carpet delivery Thursday between nine and noon", **{"packing.exchange": 3})
    a2 = next(h for h in res.hits if h.id == ids["a2"])
    assert a2.exchange_id == ids["q2"] and f"(in reply to {ids['q2']}: And the hallway carpet" in a2.line()
    # the trace names the entry the line showed (its id only: forgetting that entry leaves no words behind)
    row = next(r for r in res.trace_rows() if r["id"] == ids["a2"])
    assert row["exchange_id"] == ids["q2"] and "hallway" not in str(row)


def test_a_forgotten_half_never_comes_back_as_context(talk):
    root, ids = talk
    tombstones.append(root, [tombstones.forget_record(ids["a"], "episode")])
    _, res = _recall("which colour did we paint the bedroom walls", **{"packing.exchange": 2})
    assert "Sage green" not in res.block
    q = next(h for h in res.hits if h.id == ids["q"])
    assert q.exchange == ""


def test_another_agents_reply_is_not_read(workspace):
    root = workspace / "memory"
    ledger = Ledger(root)
    q = _add(ledger, "s1", "What colour did we paint the guest bedroom walls?", "user", 3)
    _add(ledger, "s1", "Sage green, two coats.", "assistant", 3, agent="b")
    _, res = _recall("which colour did we paint the bedroom walls", **{"packing.exchange": 2})
    hit = next(h for h in res.hits if h.id == q["id"])
    assert hit.exchange == "" and "Sage" not in res.block


def test_only_the_first_n_episodes_carry_context(talk):
    root, ids = talk
    _, res = _recall("bedroom walls paint colour carpet hallway", **{"packing.exchange": 1})
    with_context = [h for h in res.hits if h.exchange]
    assert len(with_context) == 1 and with_context[0].tier == "episodic"


def test_packing_refuses_an_item_its_context_already_shows():
    prompt = Hit("ep-1", "What colour are the walls?", "2026-10-05T00:00:00Z", "s", "a", "user", "episodic", 0.9,
                 sources=["ep-1"], exchange="Sage green, two coats.", exchange_id="ep-2")
    reply = Hit("ep-2", "Sage green, two coats.", "2026-10-05T00:00:00Z", "s", "a", "assistant", "episodic", 0.8,
                sources=["ep-2"])
    fact = Hit("sf-1", "The walls are sage green with two coats.", "2026-10-05T00:00:00Z", "s", "a", "fact",
               "semantic", 0.7, sources=["ep-2"])
    other_fact = Hit("sf-2", "The trim around the window is white.", "2026-10-05T00:00:00Z", "s", "a", "fact",
                     "semantic", 0.6, sources=["ep-2"])
    packed = pack([prompt, reply, fact, other_fact], k=4, budget=300)
    assert [h.id for h in packed.hits] == ["ep-1", "sf-2"]
    assert any(w.startswith("ep-2: repeats ep-1") for w in packed.left_out)
    assert any(w.startswith("sf-1: repeats ep-1") for w in packed.left_out)


def test_an_episode_is_weighed_with_the_half_its_exchange_shows():
    """The look-ahead counts what taking an episode delivers: its own entry and the other half of its exchange.
    Left out, it would only hand its place to that very half and a small item beside it (the PrefEval choice
    form's unrelated prompts were handed a standing item this way)."""
    def at(hit, p):
        hit.probability = p
        return hit

    question = "Select the action that best completes the user story about a pet owner and plants " * 4
    answer = "The best choice is: purchase non-toxic plants so that the cat does not get sick."
    prompt = at(Hit("ep-1", question, "2025-02-01T00:00:00Z", "s", "a", "user", "episodic", 0.9, sources=["ep-1"],
                    exchange=answer, exchange_id="ep-2"), 0.994)
    reply = at(Hit("ep-2", answer, "2025-02-01T00:00:00Z", "s", "a", "assistant", "episodic", 0.8,
                   sources=["ep-2"]), 0.993)
    later = at(Hit("ep-3", "Which acceptance criteria fit the plant owner's story? " * 5, "2025-02-01T00:00:00Z",
                   "s", "a", "user", "episodic", 0.7, sources=["ep-3"]), 0.945)
    pref = at(Hit("gk-1", "Asked about weekend plans, the user chose a hike in a scenic area.", "2026-12-05T00:00:00Z",
                  "", "", "choice", "global", 0.5, sources=["ep-9"]), 0.068)
    ranked = [prompt, reply, later, pref]
    packed = pack(ranked, k=4, budget=215)
    assert [h.id for h in packed.hits] == ["ep-1", "ep-3"]  # the reply is said as ep-1's context
    assert any(w.startswith("ep-2: repeats ep-1") for w in packed.left_out)


def test_a_half_longer_than_the_cap_is_not_shown(talk):
    """Shown whole or not at all: a reply cut to the cap may have lost what the question needs (and a long one
    would take other items' room), so the prompt goes without it and the reply may come as an item of its own."""
    root, ids = talk
    _, res = _recall("which colour did we paint the bedroom walls",
                     **{"packing.exchange": 2, "packing.exchange_tokens": 4})
    q = next(h for h in res.hits if h.id == ids["q"])
    assert q.exchange == "" and q.exchange_id == ""
    assert covered(q, {ids["q"]: "D1:1", ids["a"]: "D1:2"}) == {"D1:1"}
    assert ids["a"] in {h.id for h in res.hits}  # the whole reply comes as its own item
    _, fits = _recall("which colour did we paint the bedroom walls",
                      **{"packing.exchange": 2, "packing.exchange_tokens": 15})
    assert next(h for h in fits.hits if h.id == ids["q"]).exchange.startswith("Sage green")  # 15 tokens hold it


def test_session_window_is_the_slice_of_the_whole_session_around_a_doc():
    """``SessionDocs.around`` (the exchange's hot path) gives what slicing ``get`` would, across the compact base
    and the docs added after it, without listing the session."""
    import numpy as np

    from memtier_plugin.recall.index import SessionDocs

    sessions = np.array([0, 1, 0, 2, 0, 1, 0, 0, 2, 0], dtype=np.int32)
    sd = SessionDocs(sessions)
    for doc, s in ((10, 0), (11, 1), (12, 0), (13, 0), (14, 3)):
        sd.add(s, doc)
    for session in range(5):
        docs = sd.get(session, [])
        for doc in docs:
            at = docs.index(doc)
            for reach in (0, 1, 2, 3, 64):
                assert sd.around(session, doc, reach) == (docs[max(0, at - reach): at], docs[at + 1: at + 1 + reach])
    assert sd.around(4, 99, 5) == ([], [])  # a session never seen
