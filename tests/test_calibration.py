"""Issue 25: every layer on one calibrated scale (recall/calibration.py, learning/calibrate.py)."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import orjson
import pytest
import yaml

from conftest import run_cli, say
from memtier_plugin import plugin
from memtier_plugin.config import load_config
from memtier_plugin.errors import ConfigError
from memtier_plugin.events import HookContext, PromptEvent
from memtier_plugin.host import Host
from memtier_plugin.learning.calibrate import MAX_FALSE_DELIVERY, MAX_WRONG_STANDING, fit_all, replay
from memtier_plugin.recall import calibration as cal
from memtier_plugin.recall.packing import Hit

T0 = 1_790_000_000.0
DAY = 86400.0


def _doc(**over):
    doc = yaml.safe_load(cal.shipped_path("paper").read_text())
    doc.update(over)
    return doc


def test_every_shipped_calibration_loads_and_names_every_layer():
    for preset in ("paper", "recommended", "hybrid", "hybrid-fast"):
        c = cal.load(cal.shipped_path(preset))
        assert set(c.models) == set(cal.LAYERS)
        assert all(0.0 <= t <= 1.0 for t in c.thresholds.values())
        # a standing item needs more evidence than an episode: it says "this holds now"
        assert c.thresholds["global"] >= c.thresholds["episode"]


@pytest.mark.parametrize("mutate, key", [
    (lambda d: d["layers"]["global"]["weights"].update(cos=float("nan")), "layers.global.weights.cos"),
    (lambda d: d["layers"]["episode"]["weights"].update(bogus=1.0), "layers.episode.weights.bogus"),
    (lambda d: d["layers"].update(tools={"bias": 0, "weights": {}}), "layers.tools"),
    (lambda d: d["layers"].pop("skill"), "missing skill"),
    (lambda d: d.update(threshold={"episode": 1.5}), "threshold.episode"),
    (lambda d: d["layers"]["episode"].update(bias="high"), "layers.episode.bias"),
    (lambda d: d.pop(cal.MARKER), cal.MARKER),
])
def test_a_bad_calibration_file_is_refused_naming_the_key(tmp_path, mutate, key):
    doc = _doc()
    mutate(doc)
    with pytest.raises(ConfigError) as err:
        cal.from_doc(doc, "cal.yaml")
    assert key in str(err.value) and "\n" not in str(err.value)


def test_a_bad_calibration_file_in_the_config_stops_startup_naming_calibration_file(tmp_path):
    bad = tmp_path / "cal.yaml"
    bad.write_text("memtier_calibration: 1\nthreshold: 0.2\nlayers: {}\n")
    cfg = load_config(None, flags={"paths.workspace": str(tmp_path), "calibration.file": str(bad)})
    with pytest.raises(ConfigError, match=r"^calibration\.file: .*cal\.yaml: layers: missing"):
        cal.for_config(cfg)


def test_fitting_recovers_a_known_logistic_relation():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 2))
    p = 1 / (1 + np.exp(-(-1.0 + 2.0 * X[:, 0] - 1.0 * X[:, 1])))
    y = (rng.random(4000) < p).astype(float)
    m = cal.fit_layer(X, y, ["a", "b"], l2=0.1)
    assert m.bias == pytest.approx(-1.0, abs=0.2)
    assert m.weights["a"] == pytest.approx(2.0, abs=0.25) and m.weights["b"] == pytest.approx(-1.0, abs=0.2)


def _standing_hit(hid, **sig):
    base = {"sem": 0.0, "cos": 0.0, "topic": 0.0, "lexical": 0.0, "route": 0.0,
            "embedded": 1.0, "prompt_words": 0.5}
    base.update(sig)
    return Hit(id=hid, content="x", timestamp="", session_id="", agent_id="", role="preference", tier="global",
               score=0.0, signals={k: {"value": v, "weight": 0.0, "contribution": 0.0} for k, v in base.items()})


def test_apply_orders_by_probability_and_leaves_out_what_falls_below_its_layer_threshold():
    c = cal.load(cal.shipped_path("paper"))
    # a prompt that asks for a choice (layers/requests.py): the item near it, the other far under it
    near = _standing_hit("near", sem=1.0, cos=0.8, topic=0.9, lexical=0.5, route=0.9, asks=1.0)
    far = _standing_hit("far", sem=0.0, cos=0.2, topic=0.0, lexical=0.0, route=0.0, asks=1.0, margin=-0.6)
    kept, left = c.apply([far, near])
    assert [h.id for h in kept] == ["near"]
    assert far.probability < c.thresholds["global"] <= near.probability
    assert left and left[0].startswith("far: p=") and "global threshold" in left[0]
    kept, _ = c.apply([far, near], threshold=0.0)  # calibration.threshold overrides the standing layers'
    assert [h.id for h in kept] == ["near", "far"]


def test_layers_are_merged_by_probability_and_each_keeps_its_own_order():
    def episode(hid, score, raw):
        return Hit(id=hid, content="x", timestamp="", session_id="", agent_id="", role="user", tier="episodic",
                   score=score, raw_bm25=raw)

    c = cal.load(cal.shipped_path("paper"))
    # the ranking's order (a re-ranked head, say): b after a although b alone would score higher
    a, b = episode("a", 0.5, 1.0), episode("b", 0.4, 30.0)
    strong = _standing_hit("s", sem=1.0, cos=0.8, topic=0.9, lexical=0.5, route=0.9)
    kept, _ = c.apply([a, b, strong], threshold=0.0)
    assert [h.id for h in kept if h.tier == "episodic"] == ["a", "b"]
    assert b.probability > a.probability  # calibration alone would have swapped them
    first = max(a.probability, strong.probability)
    assert kept[0].probability == first


def test_without_an_embedder_a_standing_item_is_scored_by_the_lexical_model():
    h = _standing_hit("w", embedded=0.0, topic=0.9, lexical=0.6)
    assert cal.layer_of(h) == "global_lexical"
    assert set(cal.features(h)) == set(cal.FEATURES["global_lexical"])


def _rows(seed=0):
    """Synthetic collected queries: episodes whose score separates evidence, standing items whose cosine does,
    and unrelated prompts whose items sit between."""
    rng = random.Random(seed)
    queries = []
    for _ in range(300):
        hits = []
        for j in range(6):
            label = int(j == 0)
            hits.append(("episode", {"score": rng.gauss(1.0 if label else 0.4, 0.2), "log_raw_bm25": 1.0,
                                     "fact": 0.0, "rerank": 0.0, "reranked": 0.0}, label, f"e{j}"))
        for j in range(3):
            label = int(j == 0)
            cos = rng.gauss(0.7 if label else 0.45, 0.06)
            hits.append(("global", cal.derive("global", {"sem": 0, "cos": cos, "topic": 0, "lexical": 0,
                                                         "route": 0, "embedded": 1, "prompt_words": 1}),
                         label, f"g{j}"))
        queries.append({"source": "bench", "hits": hits})
        inter = [("global", cal.derive("global", {"sem": 0, "cos": rng.gauss(0.5, 0.08), "topic": 0,
                                                  "lexical": 0, "route": 0, "embedded": 1, "prompt_words": 1}),
                  0, f"i{j}") for j in range(3)]
        queries.append({"source": "bench-inter", "hits": inter})

    class R:
        pass

    r = R()
    r.queries = queries
    return r


def test_the_standing_threshold_keeps_unrelated_prompts_within_the_false_delivery_bound():
    rows = _rows()
    c, report = fit_all(rows, top_k=4)
    assert report["chosen"]["false_delivery"] <= MAX_FALSE_DELIVERY
    assert report["layers"]["global"]["auc_heldout"] > 0.9
    assert report["layers"]["global"]["weights"]["cos"] > 0
    # a lower threshold would have handed more unrelated prompts a standing item
    lower = {**c.thresholds, "global": max(0.0, c.thresholds["global"] - 0.1)}
    assert replay(rows.queries, c.models, lower, 4)["false_delivery"] > report["chosen"]["false_delivery"]
    assert report["chosen"]["bench_any"] > 0.9
    # no skill data: the skill model is fitted on the Global items' rows, with the skill's own features
    assert set(c.models["skill"].weights) == set(cal.FEATURES["skill"]) and c.models["skill"].weights["cos"] > 0


def test_train_calibration_from_rows_writes_a_file_the_hooks_read(tmp_path, workspace):
    rows = _rows(1)
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"".join(orjson.dumps(q) + b"\n" for q in rows.queries))
    out = tmp_path / "mine.yaml"
    r = run_cli("train", "calibration", str(tmp_path), "--from-rows", str(path), "--out", str(out), "--json")
    report = json.loads(r.stdout)
    assert report["out"] == str(out) and report["queries"] == len(rows.queries)
    c = cal.load(out)
    assert c.thresholds["global"] == report["chosen"]["threshold"]["global"]
    cfg = load_config(None, flags={"paths.workspace": str(workspace), "calibration.file": str(out)})
    assert cal.for_config(cfg).source == str(out)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "x", "hits": [["episode", {}, 1]]}\n')
    r = run_cli("train", "calibration", str(tmp_path), "--from-rows", str(bad), "--out", str(out), check=False)
    assert r.returncode != 0 and f"{bad}:1: not a calibration row" in r.stderr


def _say(host, ws, text, *, session, day=0.0):
    say(host, ws, text, session=session, at=T0 + day * DAY)


def _ask(host, ws, text, session):
    ctx = HookContext(agent_id="a", session_id=session, run_id=f"{session}-q", project="p", workspace_dir=str(ws))
    return host.before_prompt_build(PromptEvent(text, timestamp=T0 + 20 * DAY), ctx).prepend_context or ""


@pytest.mark.parametrize("embedder", ["none", "auto"])
def test_through_the_host_a_preference_reaches_the_prompt_it_applies_to_and_no_other(workspace, monkeypatch,
                                                                                     embedder):
    monkeypatch.setenv("MEMTIER_STANDING__EMBEDDER", embedder)
    host = Host()
    host.register(plugin, "memtier")
    _say(host, workspace, "I'm vegetarian, so I never eat meat or fish.", session="s1")
    _say(host, workspace, "I always want an aisle seat when I fly.", session="s2", day=1)
    for i in range(12):
        _say(host, workspace, f"Rename the variable count{i} in parser.py and rerun the lint job.", session=f"c{i}",
             day=2 + i * 0.1)
    dinner = _ask(host, workspace, "Plan my meals for the week: what should I cook for dinner?", "q1")
    assert "vegetarian" in dinner and "standing" in dinner
    assert "aisle seat" not in dinner
    code = _ask(host, workspace, "Write a Python function that parses ISO dates and add unit tests for it.", "q2")
    assert "standing" not in code, code


def test_search_explain_shows_each_items_probability(workspace, monkeypatch):
    monkeypatch.setenv("MEMTIER_STANDING__EMBEDDER", "none")
    host = Host()
    host.register(plugin, "memtier")
    _say(host, workspace, "The harbour gate code changed to 4417 after the storm.", session="s1")
    out = run_cli("search", "harbour gate code", "--agent", "a", "--project", "p", "--explain").stdout
    row = next(line for line in out.splitlines() if line.startswith("1 "))  # rank 1: the entry
    p = float(row.split()[2])
    assert 0.0 < p < 1.0 and "calibrated probability" in out
    data = json.loads(run_cli("search", "harbour gate code", "--agent", "a", "--project", "p", "--json").stdout)
    assert all(0.0 < h["probability"] < 1.0 for h in data["hits"])
    assert not math.isnan(data["hits"][0]["probability"])


def test_the_standing_threshold_also_bounds_the_wrong_standing_items_a_prompt_with_its_own_is_handed():
    # unrelated prompts are far from every item, so false delivery alone would allow a low threshold; but each
    # question's own preference has two near neighbours that do not apply
    rng = random.Random(3)
    queries = []
    for _ in range(300):
        hits = []
        for j in range(3):
            cos = rng.gauss(0.75 if j == 0 else 0.6, 0.08)
            hits.append(("global", cal.derive("global", {"sem": 0, "cos": cos, "topic": 0, "lexical": 0, "route": 0,
                                                         "embedded": 1, "prompt_words": 1}), int(j == 0), f"g{j}"))
        queries.append({"source": "bench", "hits": hits})
        queries.append({"source": "bench-inter", "hits": [
            ("global", cal.derive("global", {"sem": 0, "cos": rng.gauss(0.2, 0.05), "topic": 0, "lexical": 0,
                                             "route": 0, "embedded": 1, "prompt_words": 1}), 0, "i0")]})

    class R:
        pass

    rows = R()
    rows.queries = queries
    c, report = fit_all(rows, top_k=4)
    assert report["chosen"]["wrong_standing"] <= MAX_WRONG_STANDING
    assert report["chosen"]["false_delivery"] <= MAX_FALSE_DELIVERY
    lower = {**c.thresholds, "global": max(0.0, c.thresholds["global"] - 0.1)}
    at_lower = replay(rows.queries, c.models, lower, 4)
    assert at_lower["false_delivery"] <= MAX_FALSE_DELIVERY < 1  # false delivery alone would have allowed it
    assert at_lower["wrong_standing"] > MAX_WRONG_STANDING


def test_a_prompt_that_asks_for_a_choice_is_handed_its_best_preference_and_none_far_under_it():
    """The ``choice`` rule: a prompt asking for a choice gets its best Global item from ``choice.threshold`` up,
    and no Global item under ``choice.relative`` of the best one's probability; other prompts keep the layer's
    threshold, and ``calibration.threshold`` sets every standing threshold, the rule aside."""
    c = cal.load(cal.shipped_path("paper"))
    assert c.choice == {"threshold": 0.1, "relative": 0.7}
    t = c.thresholds["global"]

    def at(hid, p, asks):  # a Global hit the shipped model scores at probability ``p`` (bias-only logit)
        h = _standing_hit(hid, asks=asks)
        m = c.models["global"]
        logit = m.bias + sum(m.weights.get(k, 0.0) * v["value"] for k, v in h.signals.items())
        h.signals["route"]["value"] += (math.log(p / (1 - p)) - logit) / m.weights["route"]
        assert c.probability(h) == pytest.approx(p, abs=1e-6)
        return h

    # asks: the best (0.15, under the layer threshold) is delivered; 0.11 is within 0.7 of it, 0.10 is not
    best, close, low = at("best", 0.15, 1.0), at("close", 0.11, 1.0), at("low", 0.10, 1.0)
    assert 0.15 < t
    kept, left = c.apply([low, close, best])
    assert [h.id for h in kept] == ["best", "close"]
    assert left == ["low: p=0.100 below the global threshold 0.105 of a prompt that asks for a choice"]
    # asks: a best item under choice.threshold is not delivered
    kept, left = c.apply([at("faint", 0.09, 1.0)])
    assert kept == [] and left == ["faint: p=0.090 below the global threshold 0.100 of a prompt that asks for a choice"]
    # asks: an item above the layer threshold but far under the best one is another preference's
    top, other = at("top", 0.80, 1.0), at("other", 0.50, 1.0)
    assert 0.50 > t
    kept, left = c.apply([top, other])
    assert [h.id for h in kept] == ["top"] and left[0].startswith("other: p=0.500 below the global threshold 0.560")
    # a prompt that asks for no choice: the layer's threshold, no relative cut
    kept, _ = c.apply([at("a", 0.10, 0.0), at("b", 0.80, 0.0), at("c", 0.30, 0.0)])
    assert [h.id for h in kept] == ["b", "c"]
    # calibration.threshold: one threshold for every standing item, the choice rule set aside
    kept, _ = c.apply([at("d", 0.80, 1.0), at("e", 0.30, 1.0), at("f", 0.10, 1.0)], threshold=0.2)
    assert [h.id for h in kept] == ["d", "e"]
    # a file without the section: the layer's threshold for every prompt
    plain = cal.from_doc({k: v for k, v in _doc().items() if k != "choice"}, "plain.yaml")
    assert plain.choice == {}
    kept, _ = plain.apply([at("g", 0.80, 1.0), at("h", 0.30, 1.0), at("i", 0.10, 1.0)])
    assert [h.id for h in kept] == ["g", "h"]


@pytest.mark.parametrize("choice, key", [
    ({"threshold": 1.5, "relative": 0.5}, "choice.threshold"),
    ({"threshold": 0.05, "relative": "half"}, "choice.relative"),
    ({"threshold": 0.05}, "choice.relative"),
    ({"threshold": 0.05, "relative": 0.5, "lead": 1}, "choice.lead"),
    ("0.05", "choice"),
])
def test_a_bad_choice_section_is_refused_naming_the_key(choice, key):
    with pytest.raises(ConfigError) as err:
        cal.from_doc(_doc(choice=choice), "cal.yaml")
    assert f"cal.yaml: {key}" in str(err.value) and "\n" not in str(err.value)


def test_the_choice_rule_survives_a_write_and_a_read(tmp_path):
    c = cal.load(cal.shipped_path("paper"))
    doc = c.to_doc()
    assert doc["choice"] == {"threshold": 0.1, "relative": 0.7}
    assert cal.from_doc(doc, "again.yaml").choice == c.choice
