"""The request model (layers/asking.py): whether a prompt the request rules do not read as asking asks for a choice,
by a logistic model over its query vector.

The labelled prompts' ``heldout`` split (30 questions and requests written after the rules' new forms, 20 that ask
for knowledge or tell something) is never fitted on: it measures what the model adds to the rules. Files, the
scorer's path and the train command are tested with the hashing embedder (no model); the measured figures with the
real bge-small, skipped with the reason when it is not fetched.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memtier_plugin.errors import ConfigError
from memtier_plugin.layers import asking
from memtier_plugin.layers.gate import Gate
from memtier_plugin.layers.requests import asks_for_choice

LABELS = Path(__file__).parent / "data" / "request_labels.jsonl"
FIXTURES = Path(__file__).parent.parent / "workspace-fixtures" / "eval"
ASKED = "Tonight's dinner needs to be fast. What do you have?"  # in no form the rules list
TOLD = "Why is CI red on the main branch?"


def _bge():
    from memtier_plugin.models.embedders import OnnxBGE

    e = OnnxBGE()
    return e if e.available() else None


def _model_for(embedder, asked: str, told: str) -> Gate:
    """A model that reads ``asked`` as asking and ``told`` as not, in ``embedder``'s space (the path, not quality)."""
    a, t = (np.asarray(embedder.embed([x])[0], dtype=np.float64) for x in (asked, told))  # no query prefix
    w = 8.0 * (a - t)
    return Gate(w, -float(w @ (a + t) / 2), 0.7, getattr(embedder, "name", "x"))


def test_the_shipped_model_is_valid_names_its_embedder_and_was_not_fitted_on_the_heldout_split():
    m = asking.load()
    assert m.embedder.startswith("bge-small") and len(m.weights) == 384 and m.threshold == 0.7
    assert m.meta["excluded_splits"] == ["heldout"]
    rows = [json.loads(line) for line in LABELS.read_text().splitlines()]
    assert sum(r["split"] == "heldout" for r in rows) == 50 and m.meta["prompts"] > len(rows)


def test_the_labelled_prompts_are_labelled_and_the_rules_read_the_written_ones():
    """Every row is {text, label, split}; the rules read the written questions as asking (the forms were written
    from them: 122 of 134, all but "How do I ...?", left to the model, and one slang form; "How do I keep my plants
    alive ...?" was read by "plan" in "plants" until "plan" was read as a verb only) and no written prompt that asks
    for knowledge or tells something, but the one "good" in "Translate 'good morning'" reads as advice."""
    rows = [json.loads(line) for line in LABELS.read_text().splitlines()]
    assert all(set(r) == {"text", "label", "split"} and isinstance(r["label"], bool) for r in rows)
    assert len({r["text"] for r in rows}) == len(rows)
    written = [r for r in rows if r["split"] == "written"]
    missed = [r["text"] for r in written if r["label"] and not asks_for_choice(r["text"])]
    assert len(missed) <= 12 and all(t.startswith("How ") or " How " in t or "move" in t for t in missed), missed
    read = [r["text"] for r in written if not r["label"] and asks_for_choice(r["text"])]
    assert read == ['Translate "good morning" into French.']


@pytest.mark.parametrize("doc, key", [
    ({"memtier_request_model": 2}, "not a request model file"),
    ({"memtier_standing_gate": 1, "embedder": "x", "threshold": 0.5, "bias": 0, "weights": [1]},
     "not a request model file"),  # a gate is no request model
    ({"memtier_request_model": 1, "embedder": "", "threshold": 0.5, "bias": 0, "weights": [1]}, "embedder"),
    ({"memtier_request_model": 1, "embedder": "x", "threshold": -0.5, "bias": 0, "weights": [1]}, "threshold"),
    ({"memtier_request_model": 1, "embedder": "x", "threshold": 0.5, "bias": 0, "weights": [1, "a"]}, "weights[1]"),
    ({"memtier_request_model": 1, "embedder": "x", "threshold": 0.5, "bias": 0, "weights": [1], "x": 1}, "x: unknown"),
])
def test_a_bad_request_model_file_is_refused_naming_the_key(doc, key):
    with pytest.raises(ConfigError) as err:
        asking.from_doc(doc, "m.yaml")
    assert key in str(err.value) and "\n" not in str(err.value)


def test_a_bad_request_model_file_in_the_config_stops_startup_naming_the_key(tmp_path):
    from memtier_plugin.config import load_config
    from memtier_plugin.memory import Memory

    (tmp_path / "m.yaml").write_text("memtier_request_model: 1\nembedder: x\nthreshold: 2\nbias: 0\nweights: [1]\n")
    cfg = load_config(None, flags={"paths.workspace": str(tmp_path), "standing.request_model_file": "m.yaml"})
    with pytest.raises(ConfigError) as err:
        Memory(cfg)
    assert str(err.value).startswith("standing.request_model_file:") and "threshold" in str(err.value)
    with pytest.raises(ConfigError, match="standing.request_model"):
        load_config(None, flags={"standing.request_model": "always"})


def test_asks_reads_the_vector_at_the_models_threshold_and_nothing_else():
    m = Gate(np.array([4.0, 0.0]), 0.0, 0.7, "x")
    assert asking.asks(m, np.array([1.0, 0.0])) and not asking.asks(m, np.array([0.0, 1.0]))
    assert not asking.asks(m, np.array([-1.0, 0.0]))
    assert not asking.asks(m, np.array([1.0, 0.0, 0.0]))  # another embedder's size
    assert not asking.asks(None, np.array([1.0, 0.0])) and not asking.asks(m, None)


def _scorer(tmp_path, model):
    from memtier_plugin.config import load_config
    from memtier_plugin.layers.standing import Item, StandingScorer
    from memtier_plugin.layers.topics import topic_tree
    from memtier_plugin.models.embedders import HashingEmbedder

    cfg = load_config(None, flags={"paths.workspace": str(tmp_path)})
    emb = HashingEmbedder()
    item = Item("g1", "I'm an introvert and big parties drain me.", "preference", "global", 0.0)
    scorer = StandingScorer(cfg, topic_tree(cfg.memory_root), emb,
                            request_model=model(emb) if model else None)
    return scorer, item


def test_the_scorer_asks_the_model_only_for_what_the_rules_do_not_read_as_asking(tmp_path):
    """A request in no form the rules list asks by the model; a question about code does not; the rules' reading of
    a request form holds whatever the model says; without a model the rules alone decide."""
    scorer, item = _scorer(tmp_path, lambda emb: _model_for(emb, ASKED, TOLD))
    asks = {q: scorer.score(q, [item])[0][2]["asks"] for q in (ASKED, TOLD, "Which bar would you recommend?")}
    assert asks == {ASKED: 1.0, TOLD: 0.0, "Which bar would you recommend?": 1.0}
    # a model that reads nothing as asking takes nothing from the rules
    scorer, item = _scorer(tmp_path, lambda emb: Gate(np.zeros(len(emb.embed(["x"])[0])), -10.0, 0.7, emb.name))
    assert scorer.score("Which bar would you recommend?", [item])[0][2]["asks"] == 1.0
    scorer, item = _scorer(tmp_path, None)
    assert scorer.score(ASKED, [item])[0][2]["asks"] == 0.0


def test_resolve_uses_the_model_only_with_its_embedder_and_not_when_switched_off(tmp_path):
    from memtier_plugin.config import load_config
    from memtier_plugin.models.embedders import HashingEmbedder

    class Named:
        name = "bge-small-en-int8"

    cfg = load_config(None, flags={"paths.workspace": str(tmp_path)})
    assert asking.resolve(cfg, Named()) is not None
    assert asking.resolve(cfg, HashingEmbedder()) is None and asking.resolve(cfg, None) is None
    off = load_config(None, flags={"paths.workspace": str(tmp_path), "standing.request_model": "none"})
    assert asking.resolve(off, Named()) is None


def test_train_requests_writes_a_model_the_config_can_name_from_labels_and_data(tmp_path):
    """`memtier train requests` end to end (the hashing embedder stands in for bge-small): the held-out split is
    left out, a PrefEval folder's questions ask and a LoCoMo file's questions do not, the file it writes is a
    valid request model the config can name, and a bad row is named by line."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import run_cli

    rows = [{"text": t, "label": True, "split": "written"} for t in
            ("What can I cook tonight?", "Where should we stay in Rome?", "Any tips for a first camping trip?")]
    rows += [{"text": t, "label": False, "split": "written"} for t in
             ("Why does this loop overflow?", "The build passed, thanks.", "Who wrote Dracula?")]
    rows += [{"text": "How do I meet people?", "label": True, "split": "heldout"}]
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    env = {"MEMTIER_STANDING__EMBEDDER": "hashing", "MEMTIER_WORKSPACE": str(tmp_path)}
    res = run_cli("train", "requests", str(labels), "--out", str(tmp_path / "m.yaml"), "--json", env=env)
    report = json.loads(res.stdout)
    assert report["prompts"] == 6 and report["asking"] == 3 and report["embedder"].startswith("hashing")
    from memtier_plugin.evaluation import locomo, prefeval

    questions = {it.question for items in prefeval.load_items(FIXTURES / "prefeval_tiny", "explicit") for it in items}
    convs = locomo.load(FIXTURES / "locomo_tiny.json")
    facts = {q.question for c in convs for q in c.qa}
    told = {t.text for c in convs for t in c.turns if t.text.strip() and not asks_for_choice(t.text)}
    res = run_cli("train", "requests", str(labels), "--prefeval", str(FIXTURES / "prefeval_tiny"), "--locomo",
                  str(FIXTURES / "locomo_tiny.json"), "--out", str(tmp_path / "m2.yaml"), "--json", env=env)
    report = json.loads(res.stdout)
    assert report["asking"] == 3 + len(questions) and report["prompts"] == 6 + len(questions) + len(facts | told)
    m = asking.load(tmp_path / "m2.yaml")
    assert m.embedder == report["embedder"] and m.threshold == 0.7 and m.meta["excluded_splits"] == ["heldout"]
    (tmp_path / "memtier.yaml").write_text("standing:\n  request_model_file: m2.yaml\n")
    from memtier_plugin.config import load_config

    assert asking.for_config(load_config(tmp_path / "memtier.yaml", flags={"paths.workspace": str(tmp_path)})).source.endswith(
        "m2.yaml")
    labels.write_text(labels.read_text() + '{"text": "Where to?", "label": "yes"}\n')
    bad = run_cli("train", "requests", str(labels), "--out", str(tmp_path / "m3.yaml"), env=env, check=False)
    assert bad.returncode != 0 and "labels.jsonl:8: label: expected true or false" in bad.stderr
    assert not (tmp_path / "m3.yaml").exists()


@pytest.mark.skipif(_bge() is None, reason="bge-small unavailable: memtier model setup --embedder")
def test_the_model_reads_questions_the_rules_pass_over_and_nothing_that_asks_for_knowledge(capsys):
    """On the held-out prompts (written after the rules' new forms, never fitted on) the rules read about half the
    questions as asking; with the shipped model at least four in five, and it reads none of the prompts that ask for
    knowledge or tell something as asking."""
    emb, m = _bge(), asking.load()
    rows = [json.loads(line) for line in LABELS.read_text().splitlines()]
    held = [r for r in rows if r["split"] == "heldout"]
    rules = [bool(asks_for_choice(r["text"])) for r in held]
    both = [a or asking.asks(m, emb.embed_query(r["text"])) for a, r in zip(rules, held)]
    pos = [i for i, r in enumerate(held) if r["label"]]
    neg = [i for i, r in enumerate(held) if not r["label"]]
    rr, br = (sum(x[i] for i in pos) / len(pos) for x in (rules, both))
    with capsys.disabled():
        print(f"\nheld-out prompts: rules read {rr:.3f} of the questions as asking, with the model {br:.3f}")
    assert rr <= 0.6 and br >= 0.8 and not any(both[i] and not rules[i] for i in neg)


@pytest.mark.skipif(_bge() is None, reason="bge-small unavailable: memtier model setup --embedder")
@pytest.mark.parametrize("mode", ["auto", "none"])
def test_through_the_host_a_question_only_the_model_reads_is_handed_the_users_preference(mode, workspace,
                                                                                         monkeypatch):
    """"How do I meet people in a new city?" and "Could you point out a few places to eat near the Louvre?" ask in no
    form the rules list: with the request model the user's standing word reaches them, with
    ``standing.request_model: none`` it does not; a question about code is handed nothing either way."""
    from conftest import say
    from memtier_plugin import plugin
    from memtier_plugin.events import HookContext, PromptEvent
    from memtier_plugin.host import Host

    monkeypatch.setenv("MEMTIER_STANDING__REQUEST_MODEL", mode)
    host = Host()
    host.register(plugin, "memtier")
    for i, text in enumerate(["I'm an introvert and big parties drain me.", "I always want an aisle seat.",
                              "I'm vegetarian."]):
        say(host, workspace, text, session=f"s{i}", at=T0 + i * DAY)

    def ask(text, session):
        ctx = HookContext(agent_id="a", session_id=session, run_id=f"{session}-q", project="p",
                          workspace_dir=str(workspace))
        return host.before_prompt_build(PromptEvent(text, timestamp=T0 + 30 * DAY), ctx).prepend_context or ""

    people, dinner = ask("How do I meet people in a new city?", "q1"), \
        ask("Could you point out a few places to eat near the Louvre?", "q2")
    assert ("introvert" in people, "vegetarian" in dinner) == ((True, True) if mode == "auto" else (False, False))
    assert "introvert" not in ask("How do I fix this failing test in parser.py?", "q3")


T0 = 1_790_000_000.0
DAY = 86400.0
