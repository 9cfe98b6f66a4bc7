"""The common direction of prompts (layers/center.py): the file, its use by the standing scorer, and
`memtier train center`."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from memtier_plugin.errors import ConfigError
from memtier_plugin.layers import center as C

sys.path.insert(0, str(Path(__file__).parent))


class Fixed:
    """An embedder with a fixed vector per text (a stand-in for the model: what the scorer does with vectors)."""

    name = "fixed-test"

    def __init__(self, table):
        self.table = {k: np.asarray(v, dtype=np.float32) / np.linalg.norm(v) for k, v in table.items()}

    def embed(self, texts):
        return [self.table[t] for t in texts]

    def embed_query(self, text):
        return self.table[text]


# e1 is what prompts share as prompts; "I'm a night-shift nurse." sits near it, the cat allergy does not, and the
# question is about a pet (e2) asked as a prompt (mostly e1)
PROMPT = "What pet would suit me?"
NURSE = "I'm a night-shift nurse."
CATS = "I'm allergic to cats."
TABLE = {PROMPT: [1.0, 0.5, 0.0], NURSE: [1.0, 0.0, 0.2], CATS: [0.3, 1.0, 0.0]}


def _scorer(tmp_path, center):
    from memtier_plugin.config import load_config
    from memtier_plugin.layers.standing import Item, StandingScorer
    from memtier_plugin.layers.topics import topic_tree

    cfg = load_config(None, flags={"paths.workspace": str(tmp_path)})
    items = [Item(id=f"i{n}", content=t, label="preference", tier="global", timestamp="")
             for n, t in enumerate((NURSE, CATS))]
    tree = topic_tree()
    topics = {f"{t.replace('/', ' ')}: {', '.join(sorted(w))}": [0.0, 0.0, 1.0] for t, w in tree.words.items()}
    return StandingScorer(cfg, tree, Fixed({**TABLE, **topics}), center=center), items


def test_the_prompts_own_subject_decides_which_item_is_nearest(tmp_path):
    """Raw cosines make the item nearest to prompts in general the nearest one; without the common direction
    the item about what the prompt asks is, and the other one is graded under it."""
    raw, items = _scorer(tmp_path, None)
    by = {it.content: sig for it, _s, sig in raw.score(PROMPT, items)}
    assert by[NURSE]["margin"] == 0.0 and by[CATS]["margin"] < 0  # raw: the nurse is "nearest"
    assert by[CATS]["ccos"] == pytest.approx(by[CATS]["cos"])  # no center: ccos is the raw cosine
    center = C.Center(np.array([0.9, 0.0, 0.0], dtype=np.float32), "fixed-test")
    cen, items = _scorer(tmp_path / "b", center)
    by = {it.content: sig for it, _s, sig in cen.score(PROMPT, items)}
    assert by[CATS]["margin"] == 0.0 and by[NURSE]["margin"] < -0.5
    assert by[CATS]["ccos"] > 0.9 > by[CATS]["cos"] and by[NURSE]["nearest"] == 0.0
    assert by[NURSE]["cos"] == pytest.approx(float(np.dot(raw.embedder.table[PROMPT], raw.embedder.table[NURSE])))


def test_fit_is_the_mean_of_unit_vectors_and_the_file_round_trips(tmp_path):
    from memtier_plugin.store.artifacts import write_artifact

    c = C.fit([np.array([2.0, 0.0]), np.array([0.0, 3.0])], "x", meta={"from": "t"})
    assert np.allclose(c.vector, [0.5, 0.5]) and c.meta == {"prompts": 2, "from": "t"}
    path = write_artifact(tmp_path / "c.yaml", C.MARKER, c.to_doc(), header="test center", kind="a prompt center file")
    back = C.load(path)
    assert back.embedder == "x" and np.allclose(back.vector, c.vector)
    assert back.apply(np.array([1.0, 0.0])) == pytest.approx([1 / np.sqrt(2), -1 / np.sqrt(2)], abs=1e-6)
    assert back.apply(np.array([0.5, 0.5])) is None  # the common direction itself: nothing left
    assert back.apply(np.array([1.0, 0.0, 0.0])) is None  # another embedder's dimension
    with pytest.raises(ConfigError, match="no prompts"):
        C.fit([], "x")


@pytest.mark.parametrize("doc, key", [
    ({"memtier_prompt_center": 2}, "not a prompt center file"),
    ({"memtier_prompt_center": 1, "embedder": "", "vector": [0.1]}, "embedder"),
    ({"memtier_prompt_center": 1, "embedder": "x", "vector": []}, "vector"),
    ({"memtier_prompt_center": 1, "embedder": "x", "vector": [0.1, "a"]}, "vector[1]"),
    ({"memtier_prompt_center": 1, "embedder": "x", "vector": [0.9, 0.9]}, "norm below 1"),
    ({"memtier_prompt_center": 1, "embedder": "x", "vector": [0.1], "extra": 1}, "extra"),
])
def test_a_bad_center_file_is_refused_naming_the_key(doc, key):
    with pytest.raises(ConfigError) as err:
        C.from_doc(doc, "c.yaml")
    assert key in str(err.value) and "\n" not in str(err.value)


def test_a_bad_center_file_in_the_config_stops_startup_naming_the_key(tmp_path):
    from memtier_plugin.config import load_config
    from memtier_plugin.memory import Memory

    (tmp_path / "c.yaml").write_text("memtier_prompt_center: 1\nembedder: x\nvector: [1, 1]\n")
    cfg = load_config(None, flags={"paths.workspace": str(tmp_path), "standing.center_file": "c.yaml"})
    with pytest.raises(ConfigError) as err:
        Memory(cfg)
    assert str(err.value).startswith("standing.center_file:") and "norm" in str(err.value)


def test_the_shipped_center_is_valid_and_used_only_with_its_embedder(tmp_path):
    from memtier_plugin.config import load_config

    c = C.load()
    assert c.embedder.startswith("bge-small") and c.vector.shape == (384,) and 0.3 < np.linalg.norm(c.vector) < 1
    cfg = load_config(None, flags={"paths.workspace": str(tmp_path)})
    bge = type("E", (), {"name": c.embedder})()
    assert C.resolve(cfg, bge) is c
    assert C.resolve(cfg, type("E", (), {"name": "minilm"})()) is None
    assert C.resolve(cfg, None) is None
    off = load_config(None, flags={"paths.workspace": str(tmp_path), "standing.center": "none"})
    assert C.resolve(off, bge) is None


def test_train_center_reads_a_longmemeval_file_and_writes_a_center_the_config_can_name(tmp_path):
    """`memtier train center` end to end (the hashing embedder stands in for bge-small: no model)."""
    from conftest import run_cli

    data = [{"haystack_sessions": [[{"role": "user", "content": "Can you help me plan a trip?"},
                                    {"role": "assistant", "content": "Sure."}],
                                   [{"role": "user", "content": "What is a good laptop for coding?"},
                                    {"role": "user", "content": "Can you help me plan a trip?"}]]}]
    path = tmp_path / "lme.json.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(data, f)
    env = {"MEMTIER_STANDING__EMBEDDER": "hashing", "MEMTIER_WORKSPACE": str(tmp_path)}
    res = run_cli("train", "center", str(path), "--out", str(tmp_path / "c.yaml"), "--json", env=env)
    report = json.loads(res.stdout)
    assert report["prompts"] == 2 and report["embedder"].startswith("hashing")  # distinct user turns only
    c = C.load(tmp_path / "c.yaml")
    assert c.embedder == report["embedder"] and 0 < np.linalg.norm(c.vector) < 1
    from memtier_plugin.config import load_config
    from memtier_plugin.memory import Memory
    from memtier_plugin.models.embedders import get_embedder

    cfg = load_config(None, flags={"paths.workspace": str(tmp_path), "standing.embedder": "hashing",
                                   "standing.center_file": "c.yaml"})
    Memory(cfg)  # a valid file starts
    assert C.resolve(cfg, get_embedder("hashing")).source == str(tmp_path / "c.yaml")
    (tmp_path / "bad.json").write_text(json.dumps([{"question": "?"}]))
    bad = run_cli("train", "center", str(tmp_path / "bad.json"), env=env, check=False)
    assert bad.returncode != 0 and "bad.json: item 0: expected a LongMemEval question" in bad.stderr


def test_spread_takes_prompts_evenly_over_the_file():
    from memtier_plugin.cli.center_cmd import spread

    assert spread([str(i) for i in range(10)], 5) == ["0", "2", "4", "6", "8"]
    assert spread(["a", "b"], 5) == ["a", "b"]


def _bge():
    from memtier_plugin.models.embedders import OnnxBGE

    e = OnnxBGE()
    return e if e.available() else None


@pytest.mark.skipif(_bge() is None, reason="bge-small unavailable: memtier model setup --embedder")
def test_with_bge_small_the_shipped_center_makes_the_cat_allergy_the_pet_questions_nearest(tmp_path):
    """A held-out probe's miss (benchmarks/heldout-probes/probe_a): by raw cosine the pharmaceuticals preference
    is nearest to "What pet would suit me?" and the cat allergy third; without the common direction of prompts
    the cat allergy is nearest and the others are graded under it."""
    from memtier_plugin.config import load_config
    from memtier_plugin.layers.standing import Item, StandingScorer
    from memtier_plugin.layers.topics import topic_tree

    cfg = load_config(None, flags={"paths.workspace": str(tmp_path)})
    texts = ["I'm wary of pharmaceuticals and prefer to manage minor ailments without medication whenever I can.",
             "I only buy secondhand furniture.",
             "I'm severely allergic to cats, and even the so-called hypoallergenic breeds set me off.",
             "I'm committed to working fully remote."]
    items = [Item(id=f"i{n}", content=t, label="preference", tier="global", timestamp="") for n, t in enumerate(texts)]
    prompt = "I live alone in a small apartment and work long hours. What pet would suit me?"
    emb = _bge()

    def nearest(center):
        scored = StandingScorer(cfg, topic_tree(), emb, center=center).score(prompt, items)
        return [it.content for it, _, sig in scored if sig["margin"] == 0.0]

    assert nearest(None) == [texts[0]]
    assert nearest(C.load()) == [texts[2]]


# ---------------------------------------------------------------- the learned map


def _map(dim=3, rank=1, scale=1.0):
    u = np.zeros((dim, rank), dtype=np.float32)
    v = np.zeros((dim, rank), dtype=np.float32)
    u[0, 0], v[1, 0] = scale, 1.0  # the first coordinate also counts toward the second
    return C.Map(u, v, meta={"t": 1})


def test_the_map_is_applied_after_the_center_and_round_trips_through_the_file(tmp_path):
    from memtier_plugin.store.artifacts import write_artifact

    c = C.Center(np.array([0.0, 0.0, 0.5], dtype=np.float32), "x", map=_map())
    q = np.array([0.6, 0.0, 0.8], dtype=np.float32)
    r = (q - c.vector) / np.linalg.norm(q - c.vector)
    want = r + np.array([0.0, r[0], 0.0])
    assert c.apply(q) == pytest.approx(want / np.linalg.norm(want), abs=1e-6)
    assert c.without_map().apply(q) == pytest.approx(r, abs=1e-6) and c.map is not None  # the original keeps it
    path = write_artifact(tmp_path / "c.yaml", C.MARKER, c.to_doc(), header="test", kind="a prompt center file")
    text = path.read_text()
    assert "rank: 1" in text and "float32-le" in text
    back = C.load(path)
    assert np.array_equal(back.map.u, c.map.u) and np.array_equal(back.map.v, c.map.v) and back.map.meta == {"t": 1}
    assert back.apply(q) == pytest.approx(c.apply(q), abs=1e-7)
    assert C.parse(path.read_bytes(), path).map is not None


def _b64(values):
    import base64

    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode("ascii")


_GOOD = {"rank": 1, "dtype": "float32-le", "u": [_b64([1, 0])], "v": [_b64([0, 1])]}


@pytest.mark.parametrize("change, key", [
    ({"rank": 0}, "map.rank"),
    ({"rank": 65}, "map.rank"),
    ({"rank": True}, "map.rank"),
    ({"dtype": "float64"}, "map.dtype"),
    ({"u": _b64([1, 0])}, "map.u: expected a list of 1"),
    ({"v": [_b64([0, 1]), _b64([0, 1])]}, "map.v: expected a list of 1"),
    ({"u": ["not base64!"]}, "map.u[0]"),
    ({"u": [_b64([1, 0, 0])]}, "map.u[0]: expected 2 float32"),
    ({"v": [_b64([np.inf, 0])]}, "map.v[0]: expected finite"),
    ({"v": [_b64([1e6, 0])]}, "map.v[0]: expected finite"),
    ({"extra": 1}, "map.extra: unknown key"),
])
def test_a_bad_map_is_refused_naming_the_key(change, key):
    doc = {"memtier_prompt_center": 1, "embedder": "x", "vector": [0.1, 0.2], "map": {**_GOOD, **change}}
    assert C.from_doc({**doc, "map": _GOOD}, "c.yaml").map is not None  # the good map itself is read
    with pytest.raises(ConfigError) as err:
        C.from_doc(doc, "c.yaml")
    assert f"c.yaml: {key}" in str(err.value) and "\n" not in str(err.value)


def _groups(rng, n, dim=8):
    """Questions whose own item lies along a direction the raw cosine does not see: a question about topic k
    points along e_k, its own item along e_{k+4} (what the world knows links them), and the user's other items
    along the question's own direction a little (words in common)."""
    out = []
    for _ in range(n):
        k = int(rng.integers(0, 4))
        q = np.eye(dim)[k] + 0.2 * rng.normal(size=dim)
        own = np.eye(dim)[k + 4] + 0.3 * np.eye(dim)[k] + 0.1 * rng.normal(size=dim)
        other = [np.eye(dim)[j + 4] + 0.5 * np.eye(dim)[k] + 0.1 * rng.normal(size=dim)
                 for j in range(4) if j != k][:2]
        items = np.vstack([own, *other])
        items /= np.linalg.norm(items, axis=1, keepdims=True)
        out.append((q / np.linalg.norm(q), items.astype(np.float32), 0))
    return out


def test_fit_map_learns_which_item_a_question_is_about_and_holds_on_new_questions():
    rng = np.random.default_rng(0)
    train, held = _groups(rng, 200), _groups(rng, 100)
    before = C.nearest_share(held, None)
    m = C.fit_map(train, rank=4, steps=100)
    assert m.u.shape == (8, 4) and m.v.shape == (8, 4) and m.meta["questions"] == 200
    assert before < 0.2 and C.nearest_share(held, m) > 0.9
    again = C.fit_map(train, rank=4, steps=100)
    assert np.array_equal(again.u, m.u)  # deterministic
    weak = C.fit_map(train, rank=4, steps=100, l2=1e5)  # pulled to no map: (almost) nothing learned
    assert float(np.abs(weak.u @ weak.v.T).max()) < 1e-3 and C.nearest_share(held, weak) == before
    with pytest.raises(ConfigError, match="no questions"):
        C.fit_map([])
    with pytest.raises(ConfigError, match="rank"):
        C.fit_map(train, rank=9)


def test_the_shipped_center_holds_a_map_and_standing_center_map_false_leaves_it_out(tmp_path):
    from memtier_plugin.config import load_config

    c = C.load()
    assert c.map is not None and c.map.u.shape == (384, 32) and c.map.v.shape == (384, 32)
    bge = type("E", (), {"name": c.embedder})()
    on = load_config(None, flags={"paths.workspace": str(tmp_path)})
    off = load_config(None, flags={"paths.workspace": str(tmp_path), "standing.center_map": False})
    assert C.resolve(on, bge).map is c.map
    plain = C.resolve(off, bge)
    assert plain.map is None and np.array_equal(plain.vector, c.vector) and c.map is not None


def _prefeval_folder(root: Path, users: list[list[tuple[str, str]]]):
    """A PrefEval-format folder: topic t's file holds item u = users[u][t] (preference, question)."""
    (root / "explicit_preference").mkdir(parents=True)
    for t in range(len(users[0])):
        items = [{"preference": u[t][0], "question": u[t][1], "explanation": ""} for u in users]
        (root / "explicit_preference" / f"topic{t}.json").write_text(json.dumps(items))


def test_train_center_with_preferences_fits_a_map_the_config_can_name(tmp_path):
    """`memtier train center --preferences` end to end (the hashing embedder stands in for bge-small)."""
    from conftest import run_cli

    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Can you help me plan a trip?\nWhat is a good laptop for coding?\nAny dinner ideas?\n")
    users = [[("I'm vegetarian.", "Where should we eat tonight?"), ("I get seasick.", "How do I get to Capri?")],
             [("I hate crowds.", "Which museum should I visit?"), ("I'm on a budget.", "Which hotel in Rome?")],
             [("Only solo trips.", "Plan my summer"), ("No early flights.", "Book me a flight to Oslo")]]
    _prefeval_folder(tmp_path / "prefs", users)
    env = {"MEMTIER_STANDING__EMBEDDER": "hashing", "MEMTIER_WORKSPACE": str(tmp_path)}
    res = run_cli("train", "center", str(prompts), "--preferences", f"{tmp_path / 'prefs'}:0:2", "--rank", "2",
                  "--steps", "20", "--out", str(tmp_path / "c.yaml"), "--json", env=env)
    report = json.loads(res.stdout)
    assert report["map"]["questions"] == 4 and report["map"]["rank"] == 2  # users 0 and 1, two questions each
    assert 0 <= report["map"]["nearest_before"] <= report["map"]["nearest_after"] <= 1
    c = C.load(tmp_path / "c.yaml")
    assert c.map.u.shape[1] == 2 and c.map.meta["from"] == ["prefs:0:2"]
    from memtier_plugin.config import load_config
    from memtier_plugin.memory import Memory

    Memory(load_config(None, flags={"paths.workspace": str(tmp_path), "standing.embedder": "hashing",
                                    "standing.center_file": "c.yaml"}))  # a valid file starts
    bad = run_cli("train", "center", str(prompts), "--preferences", str(tmp_path), env=env, check=False)
    assert bad.returncode != 0 and "--preferences" in bad.stderr and "explicit_preference" in bad.stderr
    plain = run_cli("train", "center", str(prompts), "--out", str(tmp_path / "p.yaml"), "--json", env=env)
    assert "map" not in json.loads(plain.stdout) and C.load(tmp_path / "p.yaml").map is None


PROBE_A = Path(__file__).resolve().parent.parent / "benchmarks" / "heldout-probes" / "probe_a" / "explicit_preference"


@pytest.mark.skipif(_bge() is None, reason="bge-small unavailable: memtier model setup --embedder")
@pytest.mark.parametrize("user, topic", [(0, 6), (1, 1), (1, 7)])
def test_with_bge_small_the_shipped_map_makes_the_questions_own_preference_the_nearest(tmp_path, user, topic):
    """What the shipped map learned (probe_a is among the sets it was fitted on): a user holds ten preferences, one
    a topic; with the center alone another one is nearest to the question ("I'm heading to New Orleans for a long
    weekend. Which area should I stay in?" is nearer the Red Sox than the light sleeper), with the map its own."""
    from memtier_plugin.config import load_config
    from memtier_plugin.layers.standing import Item, StandingScorer
    from memtier_plugin.layers.topics import topic_tree

    files = sorted(PROBE_A.glob("*.json"))
    mine = [json.loads(f.read_text())[user] for f in files]
    items = [Item(id=f"i{n}", content=m["preference"], label="preference", tier="global", timestamp="")
             for n, m in enumerate(mine)]
    cfg = load_config(None, flags={"paths.workspace": str(tmp_path)})
    emb = _bge()

    def nearest(center):
        scored = StandingScorer(cfg, topic_tree(), emb, center=center).score(mine[topic]["question"], items)
        return [it.content for it, _, sig in scored if sig["margin"] == 0.0]

    assert nearest(C.load().without_map()) != [mine[topic]["preference"]]
    assert nearest(C.load()) == [mine[topic]["preference"]]
