"""The learned standing gate (layers/gate.py): what the rules pass over, read by a model over the embedding.

The labelled set's ``colloquial_heldout`` split (300 hand-written sentences, half of them said for good in
people's own words, half chit-chat, anecdotes, requests and other people's likings) is never fitted on: the
shipped gate was fitted without it (``memtier train gate --exclude-split colloquial_heldout``), so it measures
what the gate adds to the rules. Files, fitting, eligibility and the maintenance path are tested with the
hashing embedder (no model); the measured figures with the real bge-small, skipped with the reason when it is
not fetched.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memtier_plugin.errors import ConfigError
from memtier_plugin.layers import gate as G
from memtier_plugin.layers import picks
from memtier_plugin.layers.session import from_session

LABELS = Path(__file__).parent / "data" / "standing_labels.jsonl"


def _bge():
    from memtier_plugin.models.embedders import OnnxBGE

    e = OnnxBGE()
    return e if e.available() else None


class Bag:
    """A bag-of-words embedder for tests of the path (not of quality): one dimension per known word."""

    name = "bag-test"

    def __init__(self, words):
        self.words = {w: i for i, w in enumerate(words)}

    def embed(self, texts):
        out = []
        for t in texts:
            v = np.zeros(len(self.words))
            for w in t.lower().replace(".", " ").replace(",", " ").split():
                if w in self.words:
                    v[self.words[w]] = 1.0
            out.append(v / (np.linalg.norm(v) or 1.0))
        return out


BAG = Bag(["kryptonite", "nightmare", "scene", "vibe", "jam", "ruined", "yesterday", "lovely", "trip", "party"])


def _bag_gate(threshold=0.5):
    pos = ["Middle seats are my nightmare.", "Early flights are my kryptonite.", "Loud bars are not my scene.",
           "Techno is my jam.", "Crowds are not my vibe."]
    neg = ["The party was lovely.", "Yesterday ruined the trip.", "What a lovely party.", "The trip was lovely.",
           "Rain ruined the party yesterday."]
    X = np.vstack([BAG.embed([t])[0] for t in pos + neg])
    w, b = G.fit(X, [True] * len(pos) + [False] * len(neg), l2=0.1)
    return G.Gate(w, b, threshold, BAG.name)


def test_fit_learns_a_separable_set_and_the_file_round_trips(tmp_path):
    g = _bag_gate()
    p = g.probabilities(np.vstack([BAG.embed(["Red-eyes are my kryptonite."])[0],
                                   BAG.embed(["The trip was lovely."])[0]]))
    assert p[0] > 0.8 > 0.2 > p[1]
    from memtier_plugin.store.artifacts import write_artifact

    path = write_artifact(tmp_path / "gate.yaml", G.MARKER, g.to_doc(), header="test gate", kind="a standing gate file")
    back = G.load(path)
    assert back.embedder == "bag-test" and back.threshold == 0.5
    assert np.allclose(back.weights, g.weights, atol=1e-5) and abs(back.bias - g.bias) < 1e-5


@pytest.mark.parametrize("doc, key", [
    ({"memtier_standing_gate": 2}, "not a standing gate file"),
    ({"memtier_standing_gate": 1, "embedder": "", "threshold": 0.5, "bias": 0, "weights": [1]}, "embedder"),
    ({"memtier_standing_gate": 1, "embedder": "x", "threshold": 1.5, "bias": 0, "weights": [1]}, "threshold"),
    ({"memtier_standing_gate": 1, "embedder": "x", "threshold": 0.5, "bias": 0, "weights": []}, "weights"),
    ({"memtier_standing_gate": 1, "embedder": "x", "threshold": 0.5, "bias": 0, "weights": [1, "a"]}, "weights[1]"),
    ({"memtier_standing_gate": 1, "embedder": "x", "threshold": 0.5, "bias": float("nan"), "weights": [1]}, "bias"),
    ({"memtier_standing_gate": 1, "embedder": "x", "threshold": 0.5, "bias": 0, "weights": [1], "extra": 1}, "extra"),
])
def test_a_bad_gate_file_is_refused_naming_the_key(doc, key):
    with pytest.raises(ConfigError) as err:
        G.from_doc(doc, "g.yaml")
    assert key in str(err.value) and "\n" not in str(err.value)


def test_a_bad_gate_file_in_the_config_stops_startup_naming_the_key(tmp_path):
    from memtier_plugin.config import load_config
    from memtier_plugin.memory import Memory

    (tmp_path / "gate.yaml").write_text("memtier_standing_gate: 1\nembedder: x\nthreshold: 2\nbias: 0\nweights: [1]\n")
    cfg = load_config(None, flags={"paths.workspace": str(tmp_path), "standing.gate_file": "gate.yaml"})
    with pytest.raises(ConfigError) as err:
        Memory(cfg)
    assert str(err.value).startswith("standing.gate_file:") and "threshold" in str(err.value)


def test_the_shipped_gate_is_valid_and_names_its_embedder():
    g = G.load()
    assert g.embedder.startswith("bge-small") and len(g.weights) == 384 and 0 < g.threshold < 1
    assert "colloquial_heldout" in g.meta["excluded_splits"]


LODGING = ("A few lodging ideas near Lake Tahoe: 1. A pet-friendly cabin with a fenced yard. 2. A boutique inn with "
           "a 25-pound pet limit. 3. A lakeside resort with no pets. 4. A downtown hostel.")


@pytest.mark.parametrize("reply, reason", [
    # the place alone opens the reply
    ("Definitely the first. My big girl comes everywhere with me, and she's well over any 25-pound limit.",
     "My big girl comes everywhere with me, and she's well over any 25-pound limit."),
    ("The second. Small inns feel homely to me.", "Small inns feel homely to me."),
    # "the first time" is no place in the offer
    ("The first time I went there, it rained.", ""),
])
def test_a_pick_said_as_its_place_alone_gives_its_reason(reply, reason):
    """An eleventh author's picks (probe_g's read half): "Definitely the first." names the first option."""
    assert picks.reason_given(reply, LODGING) == reason


@pytest.mark.parametrize("sent", [
    "I bleed Boston, and I'd go bareheaded before I'd wear anything from the Bronx.",  # "bleed" is no past tense
    "I'm working overnights at the hospital while everyone else is asleep.",  # night work is no plan
])
def test_a_picks_reason_in_the_present_is_read(sent):
    assert G.eligible(sent, own=True)


@pytest.mark.parametrize("sent", ["I'm working on the slides tonight.", "I needed a break, so I left early."])
def test_a_picks_reason_of_a_plan_or_a_past_tense_is_not_read(sent):
    assert not G.eligible(sent, own=True)


def test_only_the_speakers_own_lasting_words_are_asked():
    """A question, a past occasion, a request, someone else's liking and a sentence the rules already take are
    never read by the gate; the rest of a message is."""
    msgs = [("e1", "user", "Middle seats are my nightmare. Is the flight full? Yesterday I missed the bus. "
                           "Can you book me a table? My husband hates flying. I avoid dairy."),
            ("e2", "assistant", "Loud bars are not my scene.")]
    assert [(s, floor) for _, s, floor in G.unread(msgs)] == [("Middle seats are my nightmare.", None)]


@pytest.mark.parametrize("sent, asked", [
    ("I had knee surgery two years ago, so I can't do high-impact exercise.", True),
    ("I lived in a tiny studio for years and realized I hate clutter, so I now keep my home minimalist.", True),
    ("I retired last year and now prefer slow-paced travel.", True),
    ("I missed the bus, so I can't make it to the meeting.", True),  # read, and the gate leaves it
    ("I booked the flight yesterday, so now I need a hotel.", False),  # an errand after the occasion
    ("I lost my job last month, so money is tight right now.", False),  # of the moment
    ("I went to Paris last year and loved the food.", False),  # nothing said after the occasion
    ("I finished the book, and I'm still thinking about the ending, I finished it late.", False),
    ("I got a new palette from Sephora last week, so if you have any ideas that use those shades, that'd be "
     "great!", False)])  # asks something of the assistant
def test_a_past_occasion_is_read_when_what_holds_since_is_said_after_it(sent, asked):
    """A past occasion told as the cause of what holds since ("..., so I can't do high-impact exercise") is the
    gate's to read whole; an occasion with nothing lasting after it, an errand, a moment, or a request is not."""
    assert G.eligible(sent) is asked


def test_candidates_take_what_the_gate_says_and_nothing_for_another_embedder():
    g = _bag_gate()
    msgs = [("e1", "user", "Early flights are my kryptonite. The trip was lovely for me.")]
    got = G.candidates(msgs, g, BAG)
    assert [(c.node_kind, c.content, c.entry_ids) for c in got] == [
        ("preference", "Early flights are my kryptonite.", ["e1"])]

    class Other(Bag):
        name = "another-model"
    assert G.candidates(msgs, g, Other(BAG.words)) == []  # fitted on other vectors: not used
    assert G.candidates(msgs, None, BAG) == []


NIGHTMARE = "Middle seats are my nightmare."
KRYPTO = "Early flights are my kryptonite."


def _two_word_gate():
    """A gate one of its words does not pass and two do: (nightmare + kryptonite)/sqrt 2 crosses 0.5, either alone
    does not (p 0.45)."""
    w = np.zeros(len(BAG.words))
    w[BAG.words["nightmare"]] = w[BAG.words["kryptonite"]] = 1.0
    return G.Gate(w, -1.2, 0.5, BAG.name)


def test_a_message_no_sentence_of_which_passes_alone_is_read_whole():
    """A preference said over two short sentences ("mushrooms are the devil. remove them from my life") has no
    sentence that says it alone: the message is read once more, whole, and taken as one preference when it passes."""
    g = _two_word_gate()
    msgs = [("e1", "user", f"{NIGHTMARE}  {KRYPTO}")]
    assert all(p < 0.5 for p in g.probabilities(np.vstack([BAG.embed([s])[0] for s in (NIGHTMARE, KRYPTO)])))
    got = G.candidates(msgs, g, BAG)
    assert [(c.node_kind, c.content, c.entry_ids) for c in got] == [("preference", f"{NIGHTMARE} {KRYPTO}", ["e1"])]
    # a sentence that passes alone is taken alone, and its message is not read again
    assert [c.content for c in G.candidates([("e1", "user", f"{KRYPTO} {KRYPTO.replace('Early', 'Red-eye')}")],
                                            _bag_gate(), BAG)] == [KRYPTO, KRYPTO.replace("Early", "Red-eye")]


@pytest.mark.parametrize("text, whole", [
    (f"{NIGHTMARE} {KRYPTO}", True),
    ("mushrooms are the devil. remove them from my life", True),
    (f"Yeah, {NIGHTMARE.lower()} {KRYPTO}", False),  # a reaction to the other side
    (f"{NIGHTMARE} {KRYPTO[:-1]}!", False),  # an exclamation: conversation
    (f"{NIGHTMARE} Are yours?", False),  # a question
    (f"{NIGHTMARE} Yesterday I missed the bus.", False),  # a past occasion
    (f"{NIGHTMARE} I avoid dairy.", False),  # the rules take a sentence of it: read already
    (f"{NIGHTMARE} You know that.", False),  # addressed to the assistant
    ("My husband hates middle seats. He never sits there.", False),  # someone else's liking
    (KRYPTO, False),  # one sentence: read already
    (" ".join([NIGHTMARE] * 13), False),  # longer than a statement (MAX_WORDS)
])
def test_only_a_statements_shape_is_read_whole(text, whole):
    got = G.whole_messages([("e1", "user", text), ("e2", "assistant", text)], {"e1", "e2"})
    assert [e for e, _ in got] == (["e1"] if whole else [])
    assert G.whole_messages([("e1", "user", text)], set()) == []  # only the messages the gate read and left


def test_maintain_writes_what_the_gate_takes_beside_the_rules(tmp_path):
    """The one maintenance path (hooks and daemon): the gate's candidate becomes a Global node with its source,
    the rules' candidate too; a failing embedder costs the gate's candidates only."""
    from memtier_plugin.config import load_config
    from memtier_plugin.layers.global_layer import GlobalStore
    from memtier_plugin.layers.maintain import maintain

    cfg = load_config(None, flags={"paths.workspace": str(tmp_path)})
    store = GlobalStore(tmp_path / "memory")
    msgs = [("e1", "user", "Early flights are my kryptonite. I avoid dairy.")]
    recs = maintain(store, msgs, config=cfg, agent_id="a", session_id="s", project="", ts=1.7e9,
                    gate=(_bag_gate(), BAG))
    got = {r["content"]: r["provenance"]["entry_ids"] for r in recs if r["kind"] == "knowledge"}
    assert got == {"Early flights are my kryptonite.": ["e1"], "I avoid dairy.": ["e1"]}

    class Broken(Bag):
        def embed(self, texts):
            raise RuntimeError("model crashed")
    store2 = GlobalStore(tmp_path / "memory2")
    recs = maintain(store2, msgs, config=cfg, agent_id="a", session_id="s", project="", ts=1.7e9,
                    gate=(_bag_gate(), Broken(BAG.words)))
    assert [r["content"] for r in recs if r["kind"] == "knowledge"] == ["I avoid dairy."]


def _labelled(split):
    return [r for r in map(json.loads, LABELS.read_text(encoding="utf-8").splitlines()) if r["split"] == split]


def _score(recs, gate, emb):
    tp = fp = fn = 0
    for r in recs:
        msgs = [(f"b{i}", m["role"], m["text"]) for i, m in enumerate(r.get("before", []))] + [("t", "user", r["text"])]
        # a bare pick is kept as a pick, not a standing item (layers/picks.py bare_pick): the labelled set's bare
        # picks are negatives of standing knowledge, and stay so
        got = any("t" in c.entry_ids for c in from_session(msgs) if c.node_kind != "pick")
        if not got and gate is not None:
            got = any("t" in c.entry_ids for c in G.candidates(msgs, gate, emb))
        tp += got and r["label"]
        fp += got and not r["label"]
        fn += (not got) and r["label"]
    return tp / max(1, tp + fp), tp / max(1, tp + fn)


def _rules_then_gate(split, capsys):
    """(rules precision, recall, rules + shipped gate precision, recall) on a labelled split, printed."""
    recs = _labelled(split)
    rp, rr = _score(recs, None, None)
    gp, gr = _score(recs, G.load(), _bge())
    with capsys.disabled():
        print(f"\n{split}: rules precision {rp:.3f} recall {rr:.3f}; with the gate {gp:.3f} / {gr:.3f}")
    return rp, rr, gp, gr


@pytest.mark.skipif(_bge() is None, reason="bge-small unavailable: memtier model setup --embedder")
def test_the_gate_reads_what_people_say_for_good_that_the_rules_pass_over(capsys):
    """On the held-out colloquial sentences the rules alone take about two thirds of what is said for good (0.613
    when the gate came; 0.680 with the phrase forms of layers/fragments.py); with the shipped gate over 4 in 5
    (refitted with the colloquial_extra split: 0.767 before), at no loss of precision; on the dev and heldout
    splits the bar still holds."""
    _, rr, gp, gr = _rules_then_gate("colloquial_heldout", capsys)
    assert gr >= rr + 0.15 and gr >= 0.80 and gp >= 0.97
    for split in ("dev", "heldout"):
        p, r = _score(_labelled(split), G.load(), _bge())
        assert p >= 0.90 and r >= 0.90, (split, p, r)


def test_train_gate_writes_a_gate_the_config_can_name_and_refuses_a_bad_row(tmp_path):
    """`memtier train gate` end to end (the hashing embedder stands in for bge-small: no model): the file it
    writes is a valid gate naming its embedder, a held-out split is left out, and a bad row is named by line."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import run_cli

    rows = [{"text": t, "label": True, "split": "dev"} for t in
            ("Middle seats are my nightmare.", "Early flights are my kryptonite.", "Loud bars are not my scene.")]
    rows += [{"text": t, "label": False, "split": "dev"} for t in
             ("The party was lovely.", "Yesterday ruined the trip.", "What a lovely party.")]
    rows += [{"text": "Techno is my jam.", "label": True, "split": "colloquial_heldout"}]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    env = {"MEMTIER_STANDING__EMBEDDER": "hashing", "MEMTIER_WORKSPACE": str(tmp_path)}
    res = run_cli("train", "gate", str(labels), "--out", str(tmp_path / "g.yaml"), "--json", env=env)
    report = json.loads(res.stdout)
    assert report["sentences"] == 6 and report["positives"] == 3 and report["embedder"].startswith("hashing")
    g = G.load(tmp_path / "g.yaml")
    assert g.embedder == report["embedder"] and g.threshold == 0.8 and g.meta["excluded_splits"] == ["colloquial_heldout"]
    labels.write_text(labels.read_text() + '{"text": "I avoid dairy.", "label": "yes"}\n')
    bad = run_cli("train", "gate", str(labels), "--out", str(tmp_path / "g2.yaml"), env=env, check=False)
    assert bad.returncode != 0 and "labels.jsonl:8: label: expected true or false" in bad.stderr
    assert not (tmp_path / "g2.yaml").exists()


OFFER = "Here are a few ways: 1. The night bus. 2. The morning coach. 3. A short flight."
ASKED = ("q", "user", "How should I get to Portland?")


def test_a_pick_among_offered_options_is_read_only_for_the_reason_it_gives():
    """"Morning coach. Overnight trips leave me a wreck for days." picks an option the assistant offered: the gate reads
    the reason, marked as a pick's (the probability it needs); a bare pick, a pick the choice rule already read and a reply that
    opens with a clause of its own ("That's really helpful to know. ...": a reply to advice, not a pick) are not
    read; the same reason with no offer before it is read as a sentence of its own."""
    pick = "Morning coach. Overnight trips leave me a wreck for days."
    got = G.unread([ASKED, ("o", "assistant", OFFER), ("s", "user", pick)])
    assert got == [("s", "Overnight trips leave me a wreck for days.", G.PICK_THRESHOLD)]
    for reply in ("The morning coach, please.", "Option 2.",
                  "I'll take the morning coach. The others don't appeal to me at all.",  # the choice rule's
                  "That's really helpful to know. I get carsick on buses, so I'm a flight person."):
        assert G.unread([ASKED, ("o", "assistant", OFFER), ("s", "user", reply)]) == [], reply
    assert [(e, p) for e, _, p in G.unread([("s", "user", "Overnight trips leave me a wreck for days.")])] == [("s", None)]


def test_a_picks_reason_is_the_speakers_view_without_a_first_person():
    """"The morning coach. Overnight buses are a disaster." is the user's view though it says no "I": read beside a
    pick, not alone; a reason addressed to the assistant ("you can ...") is not read."""
    pick = "The morning coach. Overnight buses are a disaster."
    got = G.unread([ASKED, ("o", "assistant", OFFER), ("s", "user", pick)])
    assert [(e, s) for e, s, _ in got] == [("s", "Overnight buses are a disaster.")]
    assert G.unread([("s", "user", "Overnight buses are a disaster.")]) == []
    told = "The morning coach. Then you can plan the rest around the arrival."
    assert G.unread([ASKED, ("o", "assistant", OFFER), ("s", "user", told)]) == []


def test_a_picks_reason_the_gate_takes_is_a_preference_of_its_own():
    """The gate takes a pick's reason as it takes any sentence: a preference in the user's words, with the reply's
    id (worded as a choice, "Asked ..., the user chose: ...", the question's words made it reach every question of
    its kind); a reason it does not take gives nothing."""
    g = _bag_gate()
    pick = "The morning coach. Night buses are my nightmare. Crowds are not my vibe."
    got = G.candidates([ASKED, ("o", "assistant", OFFER), ("s", "user", pick)], g, BAG)
    assert [(c.node_kind, c.content, c.entry_ids) for c in got] == [
        ("preference", "Night buses are my nightmare.", ["s"]), ("preference", "Crowds are not my vibe.", ["s"])]
    assert G.candidates([ASKED, ("o", "assistant", OFFER), ("s", "user", "The morning coach. What a lovely trip.")],
                        g, BAG) == []


def test_a_picks_reason_is_taken_at_a_low_probability_when_it_could_last():
    """A pick's reason is taken at probability 0.1 (G.PICK_THRESHOLD), a sentence anywhere else at the gate's own
    threshold (0.8 shipped): the same sentence, at 0.15, is taken beside the pick and not alone."""
    w = np.zeros(len(BAG.words))
    w[BAG.words["nightmare"]] = 5.0 + np.log(0.15 / 0.85)
    g = G.Gate(w, -5.0, 0.8, BAG.name)
    reason = "Night buses are my nightmare."
    assert abs(float(g.probabilities(np.vstack(BAG.embed([reason])))[0]) - 0.15) < 1e-9
    got = G.candidates([ASKED, ("o", "assistant", OFFER), ("s", "user", f"The morning coach. {reason}")], g, BAG)
    assert [(c.node_kind, c.content) for c in got] == [("preference", reason)]
    assert G.candidates([("s", "user", reason)], g, BAG) == []
    low = G.Gate(w, -5.0, 0.1, BAG.name)  # a gate whose own threshold is lower keeps it
    assert len(G.candidates([("s", "user", reason)], low, BAG)) == 1


@pytest.mark.parametrize("reason, kept", [
    ("Night buses are my nightmare.", True),
    ("Night buses are my nightmare tonight.", False),  # of the moment
    ("The night bus is a nightmare for now.", False),
    ("Next week the night bus is a nightmare.", False),
    ("It has no night bus nightmare.", False),  # a fact about the option
    ("Since it's the one without the nightmare.", False),
    ("It's the one without the night bus, and night buses are my nightmare.", True),  # what it is to the speaker
    ("Do not provide the nightmare ending.", False),  # an instruction for the task at hand
    ("Night buses are my nightmare, please show a few more.", False),  # asked of the assistant
    ("Night buses are my nightmare, could you list a few more.", False),
    ("Makes the least nightmare for me.", False),  # the pick's praise, no subject (probe_a: "... makes the most
    ("Coach, sounds like no nightmare for me.", False),  # sense for me"; probe_b: "Option 1, Chamberi, sounds ...")
    ("That works with no nightmare for me.", False),  # the pick's praise, its subject the option (probe_a: "That
    ("Skipping the nightmare sounds perfect.", False),  # works nicely for me"; probe_b: "... the scenery sounds perfect")
    ("Thanks for saving me the nightmare!", False),  # thanks (what extract.clean leaves: "for saving me ...")
    ("Night buses have been my nightmare lately.", False),  # of late, like "recently"
])
def test_a_picks_reason_of_the_moment_or_about_the_option_is_not_taken(reason, kept):
    """A pick's reason holds beyond the pick only when it is not said of the moment ("craving it tonight") or of the
    option itself ("it has the most reviews"): at the gate's probability 0.9 such a reason is still one pick's."""
    w = np.zeros(len(BAG.words))
    w[BAG.words["nightmare"]] = 5.0 + np.log(0.9 / 0.1)
    g = G.Gate(w, -5.0, 0.8, BAG.name)
    got = G.candidates([ASKED, ("o", "assistant", OFFER), ("s", "user", f"The morning coach. {reason}")], g, BAG)
    assert [c.content for c in got] == ([reason] if kept else [])
    assert G.lasting_reason(reason) is kept


@pytest.mark.parametrize("reply, floor", [
    ("Morning coach. Overnight trips leave me a wreck for days.", G.PICK_THRESHOLD),
    ("Morning coach. Option 2 is what I'm after.", G.RESTATED_THRESHOLD),  # the pick by its number
    ("Option 2, the morning coach is what works for me.", G.RESTATED_THRESHOLD),  # in the offer's words
    ("Morning coach. " + "Overnight trips leave me a wreck for days and " * 5 + "that is that.",
     G.RESTATED_THRESHOLD),  # a reply longer than a pick's (G.PICK_WORDS)
])
def test_a_reason_that_says_the_pick_again_needs_the_gates_half(reply, floor):
    """What a reply says besides its pick is read at 0.1 only when it is not the pick said again ("Option 2, the
    split schedule with a break at 3, would work best for us": probe_b's choice questions were handed 22 more
    wrong items at 0.1, most of them such restated picks), nor in a reply longer than a pick's (a follow-up that
    names an option by a word of a long answer); such a reason needs 0.5, as before."""
    got = G.unread([ASKED, ("o", "assistant", OFFER), ("s", "user", reply)])
    assert [f for _, _, f in got] == [floor]


@pytest.mark.parametrize("reply, reason", [
    ("I'll go with the morning coach. Overnight trips leave me a wreck for days.",
     "Overnight trips leave me a wreck for days."),
    ("I'll book the short flight, the quickest. A whole day on a bus is more than my back can take.",
     "A whole day on a bus is more than my back can take."),
    ("The morning coach from the central station works best. I can only travel once my kids are at school.",
     "I can only travel once my kids are at school."),
    ("The short flight is what I need. Long rides and my back don't mix.", "Long rides and my back don't mix."),
    ("I'll go with the morning coach. Quick and simple.", ""),  # no clause: it describes the option
])
def test_a_pick_said_as_an_intention_or_a_verdict_gives_its_reason_when_a_choice_was_asked(reply, reason):
    """PrefEval's users pick as an intention ("I'll go with walking dogs at the shelter. Being around cats leaves me
    sneezing with itchy eyes for days.") or a verdict ("The 10 a.m. coffee group works best. I can only do things
    while my kids are at school"): to a question that asked for a choice, the first sentence is the pick and the rest
    its reason, read at a pick's probability; without such a question ("How do I sleep better?" and a list of tips)
    "I'll try to keep a routine." takes up advice and nothing is read as a pick's reason (15 of 40 exchanges of a
    PrefEval-register probe gave nothing before)."""
    assert picks.reason_given(reply, OFFER, asked=True) == reason
    assert picks.reason_given(reply, OFFER) == ""
    got = G.unread([ASKED, ("o", "assistant", OFFER), ("s", "user", reply)])
    assert [(s, f) for _, s, f in got] == ([(reason, G.PICK_THRESHOLD)] if reason else [])
    advice = ("q", "user", "Tell me about the buses to Portland.")
    assert [f for _, _, f in G.unread([advice, ("o", "assistant", OFFER), ("s", "user", reply)])
            if f is not None] == []


def test_a_pick_said_as_an_intention_is_read_as_one_only_in_a_reply_of_a_picks_length():
    """A long reply that opens "I'll go with ..." and goes on about the user's week is a follow-up, not a pick and
    its reason (LongMemEval's haystacks: "I'll check out the harbor tour. By the way, I've been ...")."""
    long = ("I'll go with the morning coach. Overnight trips leave me a wreck for days, and by the way I have been "
            "meaning to tell you about the trip I took last month with my sister to the coast, which was lovely.")
    assert len(long.split()) > G.PICK_WORDS
    assert [f for _, _, f in G.unread([ASKED, ("o", "assistant", OFFER), ("s", "user", long)])
            if f == G.PICK_THRESHOLD] == []


BUSES = "Sure! A few ideas:\n1. Drive\n2. Bus 42\n3. Bike-lane route"


@pytest.mark.parametrize("reply, offer, reason", [
    # an option by its number alone, or by a word of three letters
    ("2, overnight trips leave me a wreck", OFFER, "overnight trips leave me a wreck"),
    ("The bus. Epileptic, no license.", BUSES, "Epileptic, no license."),
    # no pick: a list of its own
    ("1. Already done: the coach. 2. That method doesn't work on a bus", OFFER, ""),
])
def test_a_pick_names_its_option_by_number_or_a_short_word(reply, offer, reason):
    """reason_given finds what a reply says besides its pick when the pick is an option's number alone ("2,
    sensitive teeth forever") or a short word of it ("The bus. Epileptic, no license."); a reply numbered as a list
    of its own picks nothing (choice_e: rules + gate 0.744 -> 0.781 of the lasting picks)."""
    assert picks.reason_given(reply, offer) == reason
    if reply.startswith("1. Already"):
        assert not picks.picks_an_option(reply, offer)


GAME = ("Here are some ways to enjoy the big game: 1. Go to a packed sports bar downtown. 2. Watch it at home with a "
        "couple of friends. 3. Attend the big public watch party in the city square. 4. Get tickets to the game "
        "itself.")
SEOUL = ("Seoul is a food lover's city. A few options: 1. Samgyeopsal, grilled pork belly. 2. Korean fried chicken with "
         "beer. 3. A set of temple-style vegetable dishes at a Buddhist restaurant. 4. Galbi, marinated beef short "
         "ribs.")


@pytest.mark.parametrize("reply, offer, reason", [
    # a pick said as a phrase longer than six words, or ending "for me", and a reason in the user's own words
    ("At home with a couple of friends. Crowds and noise just wear me out.", GAME,
     "Crowds and noise just wear me out."),
    ("Temple food for me. I haven't eaten meat in years and I'm not starting on holiday.", SEOUL,
     "I haven't eaten meat in years and I'm not starting on holiday."),
    # what follows says nothing of the user: a description of the option, not a reason
    ("At home with a couple of friends. Snacks and a big screen.", GAME, ""),
    # a clause, not a pick ("aren't"), however few its words
    ("A packed sports bar downtown isn't happening. Crowds wear me out.", GAME, ""),
])
def test_a_pick_said_as_a_longer_phrase_gives_the_reason_the_user_says_of_themselves(reply, offer, reason):
    """A tenth author's picks (probe_f's read half): "At home with a couple of friends." names an option in seven
    words and no clause; the gate reads what follows when it is said of the user ("wear me out")."""
    assert picks.reason_given(reply, offer) == reason


@pytest.mark.skipif(_bge() is None, reason="bge-small unavailable: memtier model setup --embedder")
def test_a_fifth_authors_phrases_are_taken_by_the_phrase_forms_and_the_gate(capsys):
    """colloquial_d (labels and fragments: "Renting, so nothing that needs drilling into walls"): measured once
    before anything was fitted on it (rules + gate 0.945 / 0.687, rules alone 0.380); the phrase forms
    (layers/fragments.py) were written against it. Not in the gate's fit."""
    _, rr, gp, gr = _rules_then_gate("colloquial_d", capsys)
    assert rr >= 0.60 and gr >= 0.90 and gp >= 0.93


@pytest.mark.skipif(_bge() is None, reason="bge-small unavailable: memtier model setup --embedder")
def test_the_gate_reads_the_lasting_reason_of_a_pick(capsys):
    """choice_d (a fifth author's picks, none in the gate's fit): the rules take about half of the picks that give
    a lasting reason; the gate reading the reason at 0.5 took 0.812 of them, at 0.1 (a reason of the moment or about
    the option left out) 0.894, an option named by its number or a short word 0.906, and no bare pick or reason of
    the moment."""
    _, rr, gp, gr = _rules_then_gate("choice_d", capsys)
    assert gr >= rr + 0.3 and gr >= 0.90 and gp >= 0.97


@pytest.mark.skipif(_bge() is None, reason="bge-small unavailable: memtier model setup --embedder")
def test_a_sixth_authors_picks_and_phrases_are_measured(capsys):
    """choice_e and colloquial_e (a sixth author, none in the gate's fit), first read at 0.972 / 0.662 and
    0.978 / 0.587: the pick's reason read at 0.1, the pick named by number or a short word too, takes 0.787 of
    choice_e's lasting picks at precision 0.977 (the reasons of the moment it showed since left out); colloquial_e
    0.773 at 0.983 since a short sentence, a "so" with no comma, a condition or a faith, a label as an aside, what a
    lasting state means for anything suggested and a state typed without "I'm" are read (test_fragments.py); 0.807
    with a message read whole and a household, a car or a time zone read as identity (test_standing.py)."""
    _, _, gp, gr = _rules_then_gate("choice_e", capsys)
    assert gr >= 0.76 and gp >= 0.95
    _, _, gp, gr = _rules_then_gate("colloquial_e", capsys)
    assert gr >= 0.80 and gp >= 0.95  # 0.773 before a message was read whole (whole_messages) and a household read


@pytest.mark.skipif(_bge() is None, reason="bge-small unavailable: memtier model setup --embedder")
def test_a_seventh_authors_formal_statements_are_measured(capsys):
    """explicit_f (none in the gate's fit): rules + gate 0.936 / 0.880 when first measured; 0.990 / 0.990 since its
    forms were written and a wish of the moment is not the gate's to read ("I have a headache at the moment, so I'd
    rather not look at a screen for long")."""
    _, _, gp, gr = _rules_then_gate("explicit_f", capsys)
    assert gr >= 0.95 and gp >= 0.97


@pytest.mark.skipif(_bge() is None, reason="bge-small unavailable: memtier model setup --embedder")
def test_the_shipped_gate_takes_a_lasting_consequence_of_a_past_occasion_and_leaves_an_occasion():
    g, emb = G.load(), _bge()
    taken = ["I had knee surgery two years ago, so I can't do high-impact exercise.",
             "I lived in a tiny studio for years and realized I hate clutter, so I now keep my home minimalist."]
    left = ["I missed the bus, so I can't make it to the meeting.", "I went hiking on Saturday and I'm still sore.",
            "I painted the living room last weekend and now I'm exhausted.",
            "I realized I forgot my charger at home."]
    took = {t for t in taken + left if G.candidates([("t", "user", t)], g, emb)}
    assert took == set(taken)


KRYPTONITE = "Anything departing before 7 a.m. is my kryptonite."
MUSHROOMS = "mushrooms are the devil. remove them from my life"


@pytest.mark.skipif(_bge() is None, reason="bge-small unavailable: memtier model setup --embedder")
@pytest.mark.parametrize("gate", ["auto", "none"])
def test_through_the_host_a_sentence_only_the_gate_reads_becomes_standing(gate, tmp_path, monkeypatch):
    """The hook path (agent_end → Memory.maintain with the rooms' gate): a preference the rules pass over is a
    Global node with the default config; with ``standing.gate: none`` it is not. Said beside a chit-chat sentence
    that the gate does not take."""
    from memtier_plugin import plugin
    from memtier_plugin.events import AgentEndEvent, HookContext, PromptEvent, SessionEndEvent
    from memtier_plugin.host import Host
    from memtier_plugin.layers.global_layer import GlobalStore

    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.setenv("MEMTIER_WORKSPACE", str(ws))
    if gate == "none":
        monkeypatch.setenv("MEMTIER_STANDING__GATE", "none")
    host = Host()
    host.register(plugin, "memtier")
    t0 = 1_790_000_000.0
    ctx = HookContext(agent_id="a", session_id="s1", run_id="r1", project="travel", workspace_dir=str(ws))
    host.before_prompt_build(PromptEvent(f"The weather was lovely today. {KRYPTONITE}", timestamp=t0), ctx)
    host.agent_end(AgentEndEvent(messages=[], success=True, timestamp=t0 + 5), ctx)
    host.session_end(SessionEndEvent("done", timestamp=t0 + 9), ctx)
    nodes = [n.rec["content"] for n in GlobalStore(ws / "memory").current()]
    assert nodes == ([KRYPTONITE] if gate == "auto" else [])
    # a preference said over two sentences, neither of which the gate takes alone, is one node, read whole
    ctx = HookContext(agent_id="a", session_id="s2", run_id="r2", project="travel", workspace_dir=str(ws))
    host.before_prompt_build(PromptEvent(MUSHROOMS, timestamp=t0 + 60), ctx)
    host.agent_end(AgentEndEvent(messages=[], success=True, timestamp=t0 + 65), ctx)
    nodes = [n.rec["content"] for n in GlobalStore(ws / "memory").current()]
    assert nodes == ([KRYPTONITE, MUSHROOMS] if gate == "auto" else [])


@pytest.mark.skipif(_bge() is None, reason="bge-small unavailable: memtier model setup --embedder")
def test_the_consolidation_daemon_reads_with_the_gate_too(tmp_path):
    """The daemon's batch (consolidation/batch.py) takes the same path: an entry written to the ledger (`memtier
    add`, no hook ran) becomes a Global node by the gate."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import run_cli
    from memtier_plugin.config import load_config
    from memtier_plugin.consolidation.batch import Consolidator
    from memtier_plugin.layers.global_layer import GlobalStore

    ws = tmp_path / "ws"
    run_cli("-w", str(ws), "add", KRYPTONITE, "--agent", "a", "--session", "s1", "--project", "travel")
    report = Consolidator(load_config(flags={"paths.workspace": str(ws)})).run_batch()
    assert [k["content"] for k in report.knowledge] == [KRYPTONITE]
    assert [n.rec["content"] for n in GlobalStore(ws / "memory").current()] == [KRYPTONITE]


def test_a_huge_message_costs_a_bounded_number_of_embeddings():
    """Every sentence read is one model call (~6 ms with bge-small): a host's long message is read up to MAX_READ
    sentences, so agent_end stays bounded whatever the host sends."""
    calls = []

    class Counting(Bag):
        def embed(self, texts):
            calls.append(len(texts))
            return super().embed(texts)

    text = " ".join(f"Early flights number {i} are my kryptonite." for i in range(200))
    got = G.candidates([("e1", "user", text)], _bag_gate(), Counting(BAG.words))
    assert sum(calls) == G.MAX_READ and len(got) == G.MAX_READ


def test_resolve_asks_for_the_embedder_only_when_the_gate_is_on_and_falls_back_to_the_rules(tmp_path):
    """The one place the hooks (rooms.gate) and the daemon (batch._standing_gate) get their gate from."""
    from memtier_plugin.config import load_config

    asked = []

    def embedder():
        asked.append(1)
        return BAG

    off = load_config(None, flags={"paths.workspace": str(tmp_path), "standing.gate": "none"})
    assert G.resolve(off, embedder) == (None, None) and asked == []
    on = load_config(None, flags={"paths.workspace": str(tmp_path)})
    assert G.resolve(on, embedder) == (None, None) and asked == [1]  # bag-test is not the shipped gate's embedder

    def broken():
        raise RuntimeError("model crashed")
    assert G.resolve(on, broken) == (None, None)
    if _bge() is not None:
        g, emb = G.resolve(on, _bge)
        assert g is G.load() and emb.name == g.embedder
