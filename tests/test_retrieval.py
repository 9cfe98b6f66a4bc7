import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import FIXTURES, run_cli
from memtier_plugin.store import jsonl
from memtier_plugin.config import load_config
from memtier_plugin.store.episodic import Ledger, append_lines, utc_iso
from memtier_plugin.recall.packing import Hit, pack
from memtier_plugin.recall.retriever import Retriever
from memtier_plugin.recall.signals import decay_bypass, fuse, phi_bm25, phi_cw, phi_decay, tier_bonus

DAY = 86400.0
NOW = 1_780_000_000.0


def test_signals_are_bounded_and_follow_the_paper():
    raw = np.array([0.5, 1.0, 8.0])
    assert phi_bm25(raw).tolist() == pytest.approx([0.0625, 0.125, 1.0])
    assert phi_bm25(np.array([0.5, 1.0])).tolist() == pytest.approx([0.25, 0.5])  # weak best stays weak
    assert phi_decay(np.array([0.0, 14.0]), 0.05).tolist() == pytest.approx([1.0, np.exp(-0.7)])
    assert phi_decay(np.array([100.0]), 0.05, np.array([True])).tolist() == [1.0]
    assert decay_bypass(np.array([2.5, 1.0, 1.0]), 2.0, np.array([False, True, False])).tolist() == [True, True, False]
    assert phi_cw(np.array([-1.0, 0.0, 1.0])).tolist() == [0.0, 0.5, 1.0]
    mult = {"episodic": 1.0, "semantic": 1.2, "procedural": 1.4}
    assert tier_bonus(np.array([0, 1, 2]), mult).tolist() == pytest.approx([0.0, 0.2, 0.4])


def test_fusion_explains_itself():
    one = np.array([1.0])
    f = fuse([0, 0.35, 0.25, 0.25, 0.15], one * 0.9, one * 0.8, one * 0.5, one * 0.5, one * 0.2)
    assert f.scores[0] == pytest.approx(0.35 * 0.8 + 0.25 * 0.5 + 0.25 * 0.5 + 0.15 * 0.2)
    ex = f.explain(0)
    assert ex["sem"]["contribution"] == 0.0 and ex["tier"]["value"] == pytest.approx(0.2)
    assert sum(v["contribution"] for v in ex.values()) == pytest.approx(f.scores[0])


def _hit(i, text, score):
    return Hit(f"ep-{i}", text, "2026-10-05T00:00:00Z", "s", "a", "user", "episodic", score)


def test_packing_respects_k_budget_and_never_cuts():
    hits = [_hit(1, "short one about flights", 0.9), _hit(2, "word " * 200, 0.8),
            _hit(3, "short one about flights", 0.7), _hit(4, "hotel under 200 a night", 0.6),
            _hit(5, "another small entry", 0.5)]
    packed = pack(hits, k=2, budget=60)
    assert [h.id for h in packed.hits] == ["ep-1", "ep-4"]
    reasons = " | ".join(packed.left_out)
    assert "ep-2: does not fit" in reasons and "ep-3: duplicate of ep-1" in reasons and "ep-5: beyond top k" in reasons
    assert packed.tokens <= 60
    block = packed.block
    assert block.startswith("<memtier-memory>") and block.endswith("</memtier-memory>")
    assert "[ep-1 | 2026-10-05 | episodic" in block and "not instructions" in block
    assert ("word " * 200).strip() not in block


def _add(ledger, agent, session, project, text, days_ago=0.0, role="user"):
    return ledger.add(agent_id=agent, session_id=session, project=project, content=text, role=role,
                      timestamp=NOW - days_ago * DAY)


def _fact(root: Path, project: str, text: str, sessions: list[str], fid: str, supersedes=None):
    rec = {"kind": "fact", "id": fid, "timestamp": utc_iso(NOW - DAY), "project": project, "origin_agent": "a",
           "content": text, "session_ids": sessions, "source_entry_ids": [], "supersedes": supersedes}
    append_lines(root / "semantic" / f"{project}.jsonl", jsonl.dumps(rec))


@pytest.fixture
def corpus(workspace):
    root = workspace / "memory"
    ledger = Ledger(root)
    _add(ledger, "a", "s-old", "trips", "I always want an aisle seat on long flights", days_ago=90)
    _add(ledger, "a", "s-old", "trips", "Flights before 8am are a no for me", days_ago=90)
    _add(ledger, "a", "s-new", "trips", "Booked the hotel in Lisbon for the conference", days_ago=1)
    _add(ledger, "a", "s-new", "trips", "[system] internal seat note", days_ago=1)
    _add(ledger, "a", "s-x", "atlas", "The atlas deploy needs an aisle seat for the database", days_ago=1)
    _add(ledger, "b", "s-b", "trips", "Agent b notes an aisle seat preference too", days_ago=1)
    return root


def _retriever(**flags):
    return Retriever(load_config(flags=flags))


def test_isolation_system_project_agent(corpus):
    r = _retriever()
    res = r.recall("aisle seat", agent_id="a", project="trips", agents=["a"], now=NOW, record_trace=False)
    contents = [h.content for h in res.hits]
    assert any("aisle seat on long flights" in c for c in contents)
    assert not any(c.startswith("[system]") for c in contents)
    assert not any("atlas" in c for c in contents)  # other project
    assert not any("Agent b" in c for c in contents)  # other agent
    res_all = r.recall("aisle seat", agent_id="boss", project="trips", agents=None, now=NOW, record_trace=False)
    assert any("Agent b" in h.content for h in res_all.hits)  # global read sees every agent


def test_two_stage_scopes_to_fact_sessions(corpus):
    _fact(corpus, "trips", "User never flies before 8am", ["s-old"], "sf-1")
    r = _retriever()
    res = r.recall("flights before 8am", agent_id="a", project="trips", agents=["a"], now=NOW, record_trace=False)
    assert res.mode == "two-stage" and res.stage1_sessions == ["s-old"]
    assert {h.session_id for h in res.hits if h.tier == "episodic"} <= {"s-old"}
    ep = next(h for h in res.hits if h.tier == "episodic")
    assert ep.signals["decay"]["value"] == 1.0  # 90 days old, but its session came from stage 1
    fact = next(h for h in res.hits if h.tier == "semantic")
    assert fact.signals["tier"]["value"] == pytest.approx(0.2)
    # with no fact matching, stage 1 falls back and says so
    res2 = r.recall("Lisbon hotel", agent_id="a", project="trips", agents=["a"], now=NOW, record_trace=False)
    assert res2.mode == "fallback: stage 1 found no session"
    assert "Lisbon" in res2.hits[0].content


def test_superseded_fact_is_not_returned(corpus):
    _fact(corpus, "trips", "Hotel budget is under 200 a night", ["s-old"], "sf-old")
    _fact(corpus, "trips", "Hotel budget is now 300 a night", ["s-new"], "sf-new", supersedes="sf-old")
    res = _retriever().recall("hotel budget night", agent_id="a", project="trips", agents=["a"], now=NOW,
                              record_trace=False)
    ids = [h.id for h in res.hits]
    assert "sf-new" in ids and "sf-old" not in ids


def test_append_is_searchable_and_index_rebuilds(corpus):
    r = _retriever()
    assert not r.recall("zebra", agent_id="a", project="trips", agents=["a"], now=NOW, record_trace=False).hits
    rec, path, offset = r.ledger.write_entry(agent_id="a", session_id="s-new", project="trips",
                                             content="the zebra exhibit opens Friday", timestamp=NOW)
    r.notify_append(rec, path, offset)
    assert r.recall("zebra", agent_id="a", project="trips", agents=["a"], now=NOW, record_trace=False).hits[0].id == rec["id"]
    # another process's append is seen on the next recall
    other = Ledger(corpus).add(agent_id="a", session_id="s-new", project="trips", content="zebra stripes", timestamp=NOW)
    ids = [h.id for h in r.recall("zebra", agent_id="a", project="trips", agents=["a"], now=NOW, record_trace=False).hits]
    assert other["id"] in ids
    r.save()
    before = _retriever().rank("aisle seat flights", agents=["a"], project="trips", now=NOW)
    shutil.rmtree(corpus / ".index")
    after = _retriever().rank("aisle seat flights", agents=["a"], project="trips", now=NOW)
    assert [(i.kind, d) for i, d in before.docs] == [(i.kind, d) for i, d in after.docs]
    assert np.allclose(before.scores, after.scores)


def test_trace_records_delivered_signals(corpus):
    r = _retriever()
    r.recall("aisle seat", agent_id="a", project="trips", agents=["a"], now=NOW, run_id="run-7")
    traces = list((corpus / "traces" / "a").glob("*.jsonl"))
    rec = json.loads(traces[0].read_text().splitlines()[-1])
    assert rec["run_id"] == "run-7" and rec["delivered"]
    assert set(rec["delivered"][0]["signals"]) == {"sem", "bm25", "decay", "cw", "tier"}


def test_explain_output_matches_golden(workspace):
    root = workspace / "memory"
    ledger = Ledger(root)
    rows = [("s1", "I prefer aisle seats on every flight", 30), ("s1", "Vegetarian meals on flights please", 30),
            ("s2", "Deploy atlas to staging after the migration", 2), ("s2", "Aisle seat booked on flight LH 1234", 2)]
    for i, (session, text, days) in enumerate(rows):
        rec = ledger.make_entry(agent_id="a", session_id=session, project="trips", content=text,
                                timestamp=NOW - days * DAY)
        rec["id"] = f"ep-golden-{i}"
        ledger.append("a", [rec], timestamp=NOW - days * DAY)
    from memtier_plugin.cli.search_cmd import explain_table

    cal = FIXTURES / "golden" / "calibration.yaml"  # fixed, so refitting the shipped ones leaves the golden as is
    result = _retriever(**{"calibration.file": str(cal)}).recall("aisle seat flight", agent_id="a", project="trips",
                                                                 agents=["a"], now=NOW, record_trace=False)
    golden = FIXTURES / "golden" / "explain_aisle_seat.txt"
    assert explain_table(result) + "\n" == golden.read_text()


def test_soft_scoping_lets_other_sessions_compete(corpus):
    _fact(corpus, "trips", "User never flies before 8am", ["s-old"], "sf-1")
    hard = _retriever().recall("flights before 8am Lisbon hotel", agent_id="a", project="trips", agents=["a"],
                               now=NOW, record_trace=False)
    assert {h.session_id for h in hard.hits if h.tier == "episodic"} == {"s-old"}
    soft = _retriever(**{"retrieval.scoping": "soft"}).recall(
        "flights before 8am Lisbon hotel", agent_id="a", project="trips", agents=["a"], now=NOW, record_trace=False)
    assert soft.mode == "two-stage"
    sessions = {h.session_id for h in soft.hits if h.tier == "episodic"}
    assert sessions == {"s-old", "s-new"}
    old = next(h for h in soft.hits if h.session_id == "s-old")
    assert old.signals["decay"]["value"] == 1.0  # stage-1 session keeps its decay bypass


def test_top_order_matches_a_full_sort():
    from memtier_plugin.recall.retriever import _top_order

    rng = np.random.default_rng(3)
    scores = np.round(rng.random(5000), 2)  # many ties
    full = np.lexsort((np.arange(len(scores)), -scores))[:50]
    assert _top_order(scores, 50).tolist() == full.tolist()


@pytest.mark.parametrize("reply_context, found", [(True, True), (False, False)])
def test_reply_context_keys_an_answer_by_its_question(workspace, reply_context, found):
    ledger = Ledger(workspace / "memory")
    _add(ledger, "a", "s1", "p", "Which car did you end up buying for the road trip?", role="assistant")
    answer = _add(ledger, "a", "s1", "p", "The red one, finally!", role="user")
    _add(ledger, "a", "s1", "p", "Unrelated note about groceries", role="user")
    r = _retriever(**{"retrieval.reply_context": reply_context})
    ids = [h.id for h in r.recall("car road trip", agent_id="a", project="p", agents=["a"], now=NOW,
                                  record_trace=False).hits]
    assert (answer["id"] in ids) is found
    assert r.recall("groceries", agent_id="a", project="p", agents=["a"], now=NOW,
                    record_trace=False).hits[0].content.startswith("Unrelated")  # same role: no context


def test_changing_reply_context_rebuilds_the_index(workspace):
    ledger = Ledger(workspace / "memory")
    _add(ledger, "a", "s1", "p", "Which car did you buy?", role="assistant")
    _add(ledger, "a", "s1", "p", "The red one", role="user")
    _retriever(**{"retrieval.reply_context": False})
    r = _retriever(**{"retrieval.reply_context": True})
    assert r.episodic.reply_context is True
    assert any("red" in h.content for h in r.recall("car", agent_id="a", project="p", agents=["a"], now=NOW,
                                                   record_trace=False).hits)


def test_an_answer_added_after_a_reload_still_answers_its_question(workspace):
    """The reply link (BM25 context, the "reply" column) holds for the first entry written after the index was
    saved and loaded again: the answered message is read back from its ledger line."""
    ledger = Ledger(workspace / "memory")
    question = _add(ledger, "a", "s1", "p", "Which car did you end up buying for the road trip?", role="assistant")
    assert _retriever().save() is True  # a later process loads this index
    answer = _add(ledger, "a", "s1", "p", "The red one, finally!", role="user")
    again = _add(ledger, "a", "s1", "p", "And I named it Rosso.", role="user")  # same role: answers nothing
    r = _retriever()
    ep = r.episodic
    assert ep.col("reply")[ep.pos[answer["id"]]] == ep.pos[question["id"]] + 1
    assert ep.col("reply")[ep.pos[again["id"]]] == 0 and ep.col("reply")[ep.pos[question["id"]]] == 0
    ids = [h.id for h in r.recall("car road trip", agent_id="a", project="p", agents=["a"], now=NOW,
                                  record_trace=False).hits]
    assert answer["id"] in ids and again["id"] not in ids


def _unit(v):
    return v / np.linalg.norm(v)


@pytest.mark.parametrize("w", [0.0, 0.3, 1.0])
def test_an_answers_vector_mixes_in_the_message_it_answers(workspace, w):
    """embeddings.reply_context w: an entry answering another role's message is keyed by
    (1 − w)·v(own text) + w·v(message end + own text), renormalised; other entries by their own text."""
    ledger = Ledger(workspace / "memory")
    q = "Which car did you end up buying for the road trip?"
    _add(ledger, "a", "s1", "p", q, role="assistant")
    _add(ledger, "a", "s1", "p", "The red one, finally!", role="user")
    r = _retriever(**{"embeddings.backend": "hashing", "weights.sem": 1.0, "embeddings.reply_context": w})
    V = r.vectors(r.episodic)
    emb = r.embedder
    own_q, own_a, ctx = emb.embed([q, "The red one, finally!", q + "\n" + "The red one, finally!"])
    assert V[0] == pytest.approx(own_q, abs=1e-6)  # the question answers nothing
    assert V[1] == pytest.approx(_unit((1 - w) * own_a + w * ctx), abs=1e-6)
    # a warm store embeds a new answer the same way (embed_pending, as agent_end does)
    _add(ledger, "a", "s1", "p", "Did it break down on the way?", role="assistant")
    late = _add(ledger, "a", "s1", "p", "Only once, near Porto.", role="user")
    r.recall("car", agent_id="a", project="p", agents=["a"], now=NOW, record_trace=False)  # reads the new lines
    assert r.embed_pending(batch=1) == 2  # one at a time: the answered message is read from outside the batch
    V = r.vectors(r.episodic)
    own, ctx = emb.embed(["Only once, near Porto.", "Did it break down on the way?\nOnly once, near Porto."])
    assert V[r.episodic.pos[late["id"]]] == pytest.approx(_unit((1 - w) * own + w * ctx), abs=1e-6)


def test_contents_are_read_in_the_order_asked_across_ledger_files(workspace):
    ledger = Ledger(workspace / "memory")
    recs = [_add(ledger, agent, f"s{i}", "p", f"note {i} from {agent}") for i in range(6) for agent in ("a", "b")]
    r = _retriever()
    ep = r.episodic
    assert len({int(ep.col("fileno")[ep.pos[x["id"]]]) for x in recs}) >= 2  # more than one ledger file
    docs = np.array([ep.pos[x["id"]] for x in recs])[[5, 0, 11, 3, 3, 8]]
    assert ep.read_contents(docs) == [ep.read_record(int(d))["content"] for d in docs]
    assert ep.read_contents(np.empty(0, np.int64)) == []


def test_the_reply_context_vector_reads_the_end_of_a_long_message(workspace):
    from memtier_plugin.recall.retriever import REPLY_CHARS

    ledger = Ledger(workspace / "memory")
    long_q = "x" * 5000 + " so which car did you buy?"
    _add(ledger, "a", "s1", "p", long_q, role="assistant")
    _add(ledger, "a", "s1", "p", "The red one.", role="user")
    r = _retriever(**{"embeddings.backend": "hashing", "weights.sem": 1.0})
    texts, contexts = r._key_texts(r.episodic, range(2))
    assert texts == [long_q, "The red one."]
    assert contexts == [(1, long_q[-REPLY_CHARS:] + "\nThe red one.")]


def test_a_change_seen_twice_applies_once(workspace):
    ledger = Ledger(workspace / "memory")
    rec = _add(ledger, "a", "s1", "p", "entry with a weight")
    r = _retriever()
    update = ledger.add_update("a", {"kind": "cw_update", "entry_id": rec["id"], "delta": 0.3})
    r.episodic.ingest(update, -1, -1)  # notified in-process ...
    r.refresh()  # ... and read again from the ledger
    r.refresh(full=True)
    assert float(r.episodic.cols["cw"][r.episodic.pos[rec["id"]]]) == pytest.approx(0.3)


def test_pack_never_says_an_entry_twice_but_keeps_skills_made_from_it():
    def hit(i, tier, text, sources):
        return Hit(i, text, "2026-11-01T00:00:00Z", "s1", "a", "user", tier, 1.0, sources=sources)

    ranked = [hit("sf-1", "semantic", "User's staging database is db-7", ["ep-1"]),
              hit("ep-1", "episodic", "Remember: the staging database is db-7 on port 5433", ["ep-1"]),
              hit("sk-1", "procedural", "skill (worked before for: deploy): exec(make deploy)", ["ep-1", "ep-2"]),
              hit("ep-2", "episodic", "exec(make deploy) -> ok", ["ep-2"]),
              hit("sf-2", "semantic", "The deploy target is staging-2", ["ep-2", "ep-3"])]
    packed = pack(ranked, k=5, budget=1000)
    assert [h.id for h in packed.hits] == ["sf-1", "sk-1", "ep-2", "sf-2"]
    assert any(line.startswith("ep-1: repeats sf-1") for line in packed.left_out)


def test_pack_keeps_each_rule_a_message_gave_but_not_one_said_twice():
    """One message, three rules: each standing item made from it is kept; a fact that says one of them again
    (two thirds of its words) is not; the message itself, after them, is not either."""
    def hit(i, tier, text):
        return Hit(i, text, "2026-11-01T00:00:00Z", "s1", "a", "user", tier, 1.0, sources=["ep-1"])

    ranked = [hit("gk-1", "global", "I always want an aisle seat"),
              hit("gk-2", "global", "I always want vegetarian meals"),
              hit("sf-1", "semantic", "User always wants an aisle seat"),
              hit("gk-3", "global", "I always want hotels under $200 a night"),
              hit("ep-1", "episodic", "I always want an aisle seat, vegetarian meals, and hotels under $200 a night")]
    packed = pack(ranked, k=5, budget=1000)
    assert [h.id for h in packed.hits] == ["gk-1", "gk-2", "gk-3"]
    assert any(line.startswith("sf-1: repeats gk-1") for line in packed.left_out)
    # a fact that restates the second item of the message is said already too, not only one of the first
    meals = hit("sf-2", "semantic", "User always wants vegetarian meals")
    assert [h.id for h in pack(ranked[:2] + [meals], k=5, budget=1000).hits] == ["gk-1", "gk-2"]
    assert any(line.startswith("ep-1: repeats gk-1") for line in packed.left_out)
    # the message first: every item made from it is said already
    packed = pack(ranked[-1:] + ranked[:-1], k=5, budget=1000)
    assert [h.id for h in packed.hits] == ["ep-1"]


def test_a_background_recall_never_stands_for_the_hooks_own(corpus):
    r = _retriever()
    mine = r.recall("aisle seat", agent_id="a", project="trips", agents=["a"], now=NOW, record_trace=False)
    assert mine.hits
    r.recall("window seat", agent_id="a", project="trips", agents=["a"], now=NOW, record_trace=False,
             background=True)  # Foresight's or a tool result's preparation, on another thread
    assert r.last_result is mine


def _sourced_fact(root: Path, project: str, text: str, source: dict, fid: str, agent: str = "a"):
    rec = {"kind": "fact", "id": fid, "timestamp": source["timestamp"], "project": project, "origin_agent": agent,
           "content": text, "session_ids": [source["session_id"]], "source_entry_ids": [source["id"]],
           "supersedes": None}
    append_lines(root / "semantic" / f"{project}.jsonl", jsonl.dumps(rec))


def test_a_fact_ranks_no_higher_than_its_own_visible_entry(workspace):
    """A fact is shorter than the turn it was made from and skips decay: on the words it shares with that
    turn it would outrank the turn that answers the question. Where the agent sees the fact's source, the
    fact ranks at its source's place (and stands in for it); another agent, who cannot see the source, gets
    the fact on its own score."""
    root = workspace / "memory"
    ledger = Ledger(root)
    answer = _add(ledger, "a", "s1", "trips", "Oliver keeps his bone under the old oak in the garden", days_ago=40)
    chat = _add(ledger, "a", "s1", "trips", "Ha, Oliver loves his bone so much, what a dog, I remember the time "
                "we all went to the lake together and swam until sunset", days_ago=40)
    _sourced_fact(root, "trips", "Oliver loves his bone", chat, "sf-chat")
    query = "Where is Oliver's bone?"
    top = _retriever(**{"retrieval.top_k": 1, "retrieval.scoping": "soft"})
    res = top.recall(query, agent_id="a", project="trips", agents=["a"], now=NOW, record_trace=False)
    assert [h.id for h in res.hits] == [answer["id"]]
    by_id = {h.id: h for h in res.candidates}
    assert by_id["sf-chat"].score <= np.nextafter(by_id[chat["id"]].score, np.inf)
    assert by_id["sf-chat"].raw_bm25 <= by_id[chat["id"]].raw_bm25
    # with k 2 the fact stands in for its source: the block never says the same turn twice
    two = _retriever(**{"retrieval.top_k": 2, "retrieval.scoping": "soft"})
    res = two.recall(query, agent_id="a", project="trips", agents=["a"], now=NOW, record_trace=False)
    assert [h.id for h in res.hits] == [answer["id"], "sf-chat"]
    from memtier_plugin.cli.search_cmd import explain_table
    table = explain_table(res)  # --explain marks the capped fact: its score is not the sum of its signals
    assert f"{res.hits[1].score:.3f}*" in table and "*: a fact ranked at the score of its own entry" in table
    # agent b cannot see agent a's turns: the shared fact keeps its own (higher) score and comes first
    res = top.recall(query, agent_id="b", project="trips", agents=["b"], now=NOW, record_trace=False)
    assert [h.id for h in res.hits] == ["sf-chat"]
    assert "*" not in explain_table(res)


def test_a_long_hit_does_not_crowd_out_likelier_hits_after_it():
    """Calibrated hits: a hit is left out when the hits after it that fit in its place are likelier together
    (summed probability), so one long episode does not take the budget of several items that apply; a short
    likely hit is never left for less likely ones, and uncalibrated hits pack greedily as before."""
    def at(i, text, p):
        h = _hit(i, text, p)
        h.probability = p
        return h

    long_ep = at(1, "a long reply about smart homes " * 36, 0.32)  # ~290 tokens of the 300
    prefs = [at(2, "I avoid proprietary ecosystems and prefer open standards", 0.12),
             at(3, "I want devices that work offline", 0.12), at(4, "the thermostat we installed last May", 0.23)]
    packed = pack([long_ep, *prefs], k=4, budget=300)
    assert [h.id for h in packed.hits] == ["ep-2", "ep-3", "ep-4"]
    assert any(r.startswith("ep-1: left for likelier hits after it") and "p summed 0.470" in r
               for r in packed.left_out)
    # when the hits after it are less likely together, the long one stays
    weak = [at(2, "I avoid proprietary ecosystems and prefer open standards", 0.05),
            at(3, "I want devices that work offline", 0.05)]
    assert [h.id for h in pack([long_ep, *weak], k=4, budget=300).hits] == ["ep-1"]
    # a short hit first is never left out for the ones after it
    short = at(5, "open standards only", 0.2)
    assert [h.id for h in pack([short, *prefs], k=4, budget=300).hits][0] == "ep-5"
    # one hit is never left for one other: the layer's own order stands (here the last slot of k)
    first, second = at(6, "the card ending 4417 was used", 0.0020), at(7, "a table for two at eight", 0.0021)
    assert [h.id for h in pack([first, second], k=1, budget=300).hits] == ["ep-6"]
    # a hook's entry is due by construction: never left for likelier hits after it
    hook = Hit("hk-1", "when booking: the card ending 4417 " * 33, "2026-10-05T00:00:00Z", "s", "a", "hook-1", "hook",
               1.0)
    hook.probability = 1.0
    strong = [at(8, "I avoid red-eye flights", 0.6), at(9, "I want an aisle seat", 0.6)]
    assert [h.id for h in pack([hook, *strong], k=4, budget=300).hits][0] == "hk-1"
    # uncalibrated: greedy in rank order (the long one first)
    for h in (long_ep, *prefs):
        h.probability = None
    assert [h.id for h in pack([long_ep, *prefs], k=4, budget=300).hits][0] == "ep-1"
