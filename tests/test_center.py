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
