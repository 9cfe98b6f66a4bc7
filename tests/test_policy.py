"""The learned intervention policy: features, GRPO training, its file, and its use at pre_tool."""

import json
import logging

import numpy as np
import pytest
import yaml

import synthetic_prefeval as synth
from conftest import run_cli
from memtier_plugin.config import load_config
from memtier_plugin.errors import ConfigError
from memtier_plugin.intervention.policy import (
    ACTIONS, FEATURES, Policy, call_text, explicit_choice, features, polarity, read_policy, write_policy,
)
from memtier_plugin.learning.grpo import GRPOConfig, reward, train
from memtier_plugin.layers.standing import Item

LEXICAL = {"MEMTIER_STANDING__EMBEDDER": "none"}


def test_polarity_splits_what_a_preference_avoids_from_what_it_asks_for():
    assert polarity("I dislike oversized clothing; I prefer well-fitted and structured pieces.") == \
        ("oversized clothing", "I prefer well-fitted and structured pieces")
    assert polarity("I don't like using high-tech fitness gadgets.")[0] == "like using high-tech fitness gadgets"
    assert polarity("I can't stand loud music.") == ("loud music", "")  # an aversion, not a negator
    assert polarity("I love jazz and old vinyl records.") == ("", "I love jazz and old vinyl records")


def test_call_text_is_what_the_task_does_not_already_say_and_a_restated_task_is_no_explicit_choice():
    task = "Can you suggest a jacket for the winter?"
    params = {"request": task, "option": "A classic wool pea coat."}
    assert call_text(params, task) == "A classic wool pea coat."
    assert not explicit_choice(params, task)  # the request argument only repeats the task
    assert explicit_choice({"app": "notion", "text": "meeting notes"}, "Save my meeting notes to Notion today")


def _item(text):
    return Item("g-1", text, "preference", "global", "2025-01-01T00:00:00Z")


def test_lexical_features_see_the_avoided_word_in_the_option():
    scored = [(_item("I avoid shows with graphic violence."), 0.8), (_item("I like jazz."), 0.3)]
    bad = features("Narcos, a series full of graphic violence", "What series should I watch?", scored)
    good = features("The Umbrella Academy, minimal violence", "What series should I watch?", scored)
    assert bad["lex_avoid"] == 2 and bad["has_avoid"] == 1 and bad["embedded"] == 0 and bad["margin"] == 0.5
    assert good["softeners"] >= 1
    assert features("", "x", scored) is None and features("an option", "x", []) is None


def test_reward_is_pulse():
    assert reward("intervene", "violate") == reward("supplement", "follow") == 1.0
    assert reward("intervene", "follow") == -1.0
    assert reward("silent", "violate") == reward("supplement", "violate") == reward("silent", "follow") == 0.0


def _rows(n=80, seed=3):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        label = "violate" if i % 4 else "follow"
        f = {k: float(rng.normal()) for k in FEATURES}
        f["lex_avoid"] = float(label == "violate") + 0.1 * float(rng.normal())
        rows.append({"label": label, "features": f})
    return rows


def test_grpo_is_deterministic_under_its_seed_and_learns_a_separable_rule():
    rows = _rows()
    a, sa = train(rows, GRPOConfig(seed=7, epochs=40))
    b, _ = train(rows, GRPOConfig(seed=7, epochs=40))
    c, _ = train(rows, GRPOConfig(seed=8, epochs=40))
    assert np.array_equal(a.weights, b.weights) and np.array_equal(a.bias, b.bias)
    assert not np.array_equal(a.weights, c.weights)
    assert sa["greedy_train_reward"] > 0.9 and sa["mean_sampled_reward_last_epoch"] > sa["mean_sampled_reward_first_epoch"]
    acts = [a.act(r["features"])[0] for r in rows]
    assert all(act == ("intervene" if r["label"] == "violate" else "supplement") for act, r in zip(acts, rows))


def test_policy_file_round_trips_and_is_never_written_over_a_config_or_another_file(tmp_path):
    pol, _ = train(_rows(), GRPOConfig(seed=1, epochs=5))
    path = write_policy(tmp_path / "p.yaml", pol)
    back = read_policy(path)
    assert np.allclose(back.weights, pol.weights) and np.allclose(back.mean, pol.mean)
    cfg = tmp_path / "memtier.yaml"
    cfg.write_text("preset: paper\n")
    with pytest.raises(ConfigError, match="config"):
        write_policy(cfg, pol, str(cfg))
    other = tmp_path / "notes.yaml"
    other.write_text("a: 1\n")
    with pytest.raises(ConfigError, match="refusing to overwrite"):
        write_policy(other, pol)
    assert cfg.read_text() == "preset: paper\n" and other.read_text() == "a: 1\n"



def _refused(tmp_path, doc: dict, words: str):
    """Write ``doc`` as a policy file; read_policy refuses it in one line naming the file and ``words``."""
    path = tmp_path / "bad-policy.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as err:
        read_policy(path)
    msg = str(err.value)
    assert str(path) in msg and words in msg and "\n" not in msg
    return path


@pytest.mark.parametrize("change, words", [
    (lambda d: d.pop("memtier_intervention_policy"), "not an intervention policy"),
    (lambda d: d.update(features=["x"]), "other features"),
    (lambda d: d["weights"].update(intervene=[1.0]), "weights"),
    (lambda d: d.update(std=[0.0] * len(FEATURES)), "std"),
    (lambda d: d["bias"].update(silent="high"), "bias"),
])
def test_a_bad_policy_file_is_one_line_naming_the_file(tmp_path, change, words):
    doc = Policy.zero().to_doc()
    change(doc)
    path = _refused(tmp_path, doc, words)
    proc = run_cli("eval", "intervention", str(synth.write(tmp_path / "d")), "--turns", "3", "--policy", str(path),
                   check=False, env=LEXICAL)
    assert proc.returncode != 0 and str(path) in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_config_key_is_validated():
    assert load_config(flags={"scheduling.policy": "memtier-policy.yaml"}).scheduling.policy == "memtier-policy.yaml"
    with pytest.raises(ConfigError):
        load_config(flags={"scheduling.polcy": "x"})


def test_train_policy_is_deterministic_writes_its_own_file_and_changes_the_decision(tmp_path):
    root = synth.write(tmp_path / "prefeval_dev")
    ws = tmp_path / "ws"
    ws.mkdir()
    config = ws / "memtier.yaml"
    config.write_text("scheduling:\n  mode: combined\n")
    env = {**LEXICAL, "MEMTIER_WORKSPACE": str(ws)}
    rows = tmp_path / "rows.jsonl"
    out = run_cli("train", "policy", str(root), "--turns", "3", "--seed", "5", "--epochs", "60", "--json", "-q",
                  "--train-topics", "food_dishes,music_shows", "--rows-out", str(rows), env=env)
    doc = json.loads(out.stdout)
    assert doc["out"] == str((ws / "memtier-policy.yaml").resolve())  # the default: in the workspace
    first = (ws / "memtier-policy.yaml").read_text()
    assert config.read_text() == "scheduling:\n  mode: combined\n"  # the config is never written
    assert doc["held_topics"] == ["home_decor", "travel_trips"] and doc["training"]["rows"] == 24
    held = doc["held_back"]
    assert held["fixed_rule"]["recall"] == 0.0  # the fixed rule cannot see these conflicts
    assert held["policy"]["recall"] == 1.0 and held["policy"]["false_interrupt_rate"] == 0.0
    run_cli("train", "policy", str(root), "--turns", "3", "--seed", "5", "--epochs", "60", "--json", "-q",
            "--train-topics", "food_dishes,music_shows", env=env)
    assert (ws / "memtier-policy.yaml").read_text() == first  # same data, same seed: the same file
    again = run_cli("train", "policy", str(root), "--from-rows", str(rows), "--seed", "5", "--epochs", "60", "--json",
                    "--train-topics", "food_dishes,music_shows", "--out", str(tmp_path / "again.yaml"), env=env)
    assert (tmp_path / "again.yaml").read_text() == first  # the traced calls, trained again: the same policy
    assert json.loads(again.stdout)["held_back"] == held
    refused = run_cli("train", "policy", str(root), "--turns", "3", "--out", str(config), check=False, env=env)
    assert refused.returncode != 0 and "config file" in refused.stderr
    # used at pre_tool: through the host, the held options are now blocked and option 0 is not
    ev = json.loads(run_cli("eval", "intervention", str(root), "--turns", "3", "--topics", "home_decor,travel_trips",
                            "--policy", str(ws / "memtier-policy.yaml"), "--json", "-q", env=env).stdout)
    assert ev["meta"]["decision"].startswith("policy ")
    assert (ev["memtier"]["recall"], ev["memtier"]["false_interrupt_rate"], ev["memtier"]["precision"]) == (1.0, 0.0, 1.0)
    assert ev["memtier"]["supplement_rate"] == 0.25  # option 0: the preference applies, a supplement


def _memory_asked(ws, write):
    """A workspace's Memory whose config names ``memtier-policy.yaml`` (``write(path)`` makes it), after one prompt."""
    from memtier_plugin.events import HookContext, PromptEvent
    from memtier_plugin.memory import Memory

    ws.mkdir()
    write(ws / "memtier-policy.yaml")
    mem = Memory(load_config(flags={"paths.workspace": str(ws), "scheduling.policy": "memtier-policy.yaml",
                                    "standing.embedder": "none"}))
    ctx = HookContext(agent_id="main", session_key="s", session_id="s1", run_id="r1", project="p",
                      workspace_dir=str(ws))
    mem.on_prompt(PromptEvent("Can you recommend a pasta dish?"), ctx)
    return mem, ctx


def test_a_broken_policy_file_at_pre_tool_leaves_the_fixed_rule_and_logs_once(tmp_path, caplog):
    from memtier_plugin.events import ToolCallEvent

    bad = tmp_path / "ws" / "memtier-policy.yaml"
    mem, ctx = _memory_asked(tmp_path / "ws", lambda path: path.write_text("just: text\n"))
    with caplog.at_level(logging.ERROR, logger="memtier_plugin.memory"):
        for _ in range(3):
            assert mem.on_pre_tool(ToolCallEvent("select_option", {"option": "mushroom pasta"}), ctx) is None
    errors = [r for r in caplog.records if "scheduling.policy" in r.getMessage()]
    assert len(errors) == 1 and str(bad) in errors[0].getMessage()


def test_actions_are_the_three_of_the_contract():
    assert ACTIONS == ("silent", "supplement", "intervene")


def _always(action: str) -> Policy:
    pol = Policy.zero()
    pol.bias[ACTIONS.index(action)] = 5.0
    return pol


def test_through_the_host_a_policy_holds_a_call_against_a_preference_but_an_explicit_choice_stays_silent(tmp_path):
    """The fixed rule lets a call against a preference in words through; a policy that holds such calls holds
    it, with the preference as evidence; the Notion/Obsidian case (Pulse §4.4.3) stays silent all the same."""
    from memtier_plugin import plugin
    from memtier_plugin.events import AgentEndEvent, HookContext, PromptEvent, SessionEndEvent, ToolCallEvent
    from memtier_plugin.host import Host

    ws = tmp_path / "ws"
    ws.mkdir()
    write_policy(ws / "memtier-policy.yaml", _always("intervene"))
    (ws / "memtier.yaml").write_text("standing:\n  embedder: none\nscheduling:\n  mode: combined\n")
    host = Host()
    host.register(plugin, "memtier")

    def ctx(n):
        return HookContext(agent_id="main", session_id=f"s{n}", run_id=f"r{n}", project="notes", workspace_dir=str(ws))

    host.before_prompt_build(PromptEvent("I always keep my meeting notes in Notion, never in plain files."), ctx(1))
    host.agent_end(AgentEndEvent(success=True), ctx(1))
    host.session_end(SessionEndEvent(reason="completed"), ctx(1))
    habit_call = ToolCallEvent("save_note", {"app": "plain text file", "title": "sync-2026-03-12"}, "c1")
    explicit_call = ToolCallEvent("save_note", {"app": "Obsidian", "title": "meeting notes"}, "c2")

    host.before_prompt_build(PromptEvent("Save my meeting notes from the weekly sync."), ctx(2))
    assert not host.pre_tool(habit_call, ctx(2)).block  # the fixed rule: no computable conflict
    (ws / "memtier.yaml").write_text("standing:\n  embedder: none\nscheduling:\n  mode: combined\n"
                                     "  policy: memtier-policy.yaml\n")
    from memtier_plugin.memory import reset_services

    reset_services()  # the host reads the workspace's config again
    host.before_prompt_build(PromptEvent("Save my meeting notes from the weekly sync."), ctx(3))
    held = host.pre_tool(habit_call, ctx(3))
    assert held.block and "Notion" in held.block_reason
    host.before_prompt_build(PromptEvent("Save these meeting notes to Obsidian this time."), ctx(4))
    quiet = host.pre_tool(explicit_call, ctx(4))
    assert not quiet.block and not quiet.supplement


def test_a_failure_in_the_policy_path_is_a_supplement_never_a_silent_allow(tmp_path, monkeypatch):
    from memtier_plugin.intervention import features as policy_mod
    from memtier_plugin.events import ToolCallEvent

    mem, ctx = _memory_asked(tmp_path / "ws", lambda path: write_policy(path, _always("silent")))

    def boom(*a, **k):
        raise RuntimeError("feature bug")

    monkeypatch.setattr(policy_mod, "call_text", boom)
    answer = mem.on_pre_tool(ToolCallEvent("select_option", {"option": "mushroom pasta"}), ctx)
    assert answer is not None and not answer.block and "check failed" in answer.supplement


@pytest.mark.embed
def test_with_bge_the_option_that_names_what_the_preference_avoids_is_closer_to_the_avoided_clause():
    """Why the avoided clause and not the whole preference: the violating option is close to both, the
    following one is not close to what is avoided (docs/learning.md)."""
    from memtier_plugin.models import embedders as E

    bge = E.OnnxBGE()
    if not bge.available():
        pytest.skip(f"bge-small not fetched into {bge.folder} (memtier model setup --embedder)")
    scored = [(_item("I dislike any content that involves zombies or apocalyptic scenarios."), 0.8)]
    request = "What are some thrilling TV series you'd suggest I start watching?"
    follow = features("Sherlock - A modern take on the classic detective stories.", request, scored, bge)
    violate = features("The Walking Dead - A gripping zombie apocalypse drama.", request, scored, bge)
    assert follow["embedded"] == violate["embedded"] == 1.0
    assert violate["sem_avoid"] > follow["sem_avoid"] + 0.05
    assert violate["avoid_minus_request"] > follow["avoid_minus_request"]


def test_a_policy_check_past_its_timeout_is_a_supplement_and_the_hook_does_not_wait_for_it(tmp_path, monkeypatch):
    """The policy's evidence and features run under scheduling.policy_timeout_ms: a check that has not
    answered by then gives the call a supplement saying so (never a silent allow, never a wait for it)."""
    import threading

    from memtier_plugin.intervention import features as policy_mod
    from memtier_plugin.events import ToolCallEvent

    mem, ctx = _memory_asked(tmp_path / "ws", lambda path: write_policy(path, _always("silent")))
    mem.config.scheduling.policy_timeout_ms = 50.0
    release = threading.Event()
    real = policy_mod.call_text

    def slow(params, task):
        release.wait(30)  # an embedder stuck on a loaded machine
        return real(params, task)

    monkeypatch.setattr(policy_mod, "call_text", slow)
    try:
        answer = mem.on_pre_tool(ToolCallEvent("select_option", {"option": "mushroom pasta"}), ctx)
        assert release.is_set() is False  # answered while the check was still blocked
        assert answer is not None and not answer.block and "did not finish within 50 ms" in answer.supplement
        assert mem.last_decision.features.get("policy_timeout") is True
    finally:
        release.set()
    monkeypatch.setattr(policy_mod, "call_text", real)
    again = mem.on_pre_tool(ToolCallEvent("select_option", {"option": "tomato pasta"}), ctx)
    assert again is None or "did not finish" not in (again.supplement or "")


# ---------------------------------------------------------------- format 2: evidence selection, a hidden layer


def test_evidence_features_select_the_item_the_call_conflicts_with_when_another_applies_best():
    """The best-applying item is another of the user's preferences; the one the option goes against is
    second: the evidence features pick it, and a format-1 computation (evidence=False) does not look."""
    scored = [(_item("I prefer quick weekday recipes; I dislike long prep."), 0.7),
              (_item("I avoid anything with peanuts or peanut sauce."), 0.6),
              (_item("I like spicy food."), 0.2)]
    call = "Satay noodles tossed in a rich peanut sauce"
    f = features(call, "Suggest a dinner recipe", scored)
    assert f["lex_avoid"] == 0  # the best item says nothing about peanuts
    assert f["sel_is_top"] == 0 and f["sel_applicability"] == 0.6 and f["max_lex_avoid"] == 2
    assert f["top2_lex_avoid"] == 2 and f["top1_lex_avoid"] == 0 and f["top3_app"] == 0.2
    assert "ce_avoid" not in f  # no cross-encoder given: its features are absent, not zeros
    base = features(call, "Suggest a dinner recipe", scored, evidence=False)
    assert set(base) == set(FEATURES) and all(base[k] == f[k] for k in FEATURES)
    alone = features(call, "Suggest a dinner recipe", scored[:1])
    assert alone["sel_is_top"] == 1 and alone["top2_app"] == 0.0


class _Pairs:
    """A stand-in cross-encoder that records what it is asked (the real one is tested under `embed`)."""

    def __init__(self):
        self.asked = []

    def score(self, query, texts):
        self.asked.append((query, list(texts)))
        return np.array([4.0 if "peanut" in t else -3.0 for t in texts])


def test_cross_encoder_features_score_the_call_against_the_selected_items_clauses():
    scored = [(_item("I prefer quick weekday recipes; I dislike long prep."), 0.7),
              (_item("I avoid anything with peanuts or peanut sauce, but I love rice noodles."), 0.6)]
    ce = _Pairs()
    f = features("Satay noodles in peanut sauce", "Suggest a dinner", scored, cross_encoder=ce)
    assert ce.asked == [("Satay noodles in peanut sauce", ["anything with peanuts or peanut sauce", "I love rice noodles"])]
    assert (f["ce_avoid"], f["ce_want"], f["ce_conflict"], f["ce_used"]) == (4.0, -3.0, 7.0, 1.0)


def test_a_hidden_layer_policy_is_deterministic_and_round_trips_through_its_file(tmp_path):
    from memtier_plugin.intervention.policy import EVIDENCE_FEATURES, MARKER_KEY

    names = FEATURES + EVIDENCE_FEATURES
    rows = [{**r, "features": {**r["features"], **{k: 0.5 for k in EVIDENCE_FEATURES}}} for r in _rows()]
    a, _ = train(rows, GRPOConfig(seed=4, epochs=30, hidden=6, features=names))
    b, _ = train(rows, GRPOConfig(seed=4, epochs=30, hidden=6, features=names))
    c, _ = train(rows, GRPOConfig(seed=5, epochs=30, hidden=6, features=names))
    assert a.hidden_w.shape == (6, len(names)) and a.weights.shape == (3, 6)
    assert np.array_equal(a.hidden_w, b.hidden_w) and np.array_equal(a.weights, b.weights)
    assert not np.array_equal(a.hidden_w, c.hidden_w)
    path = write_policy(tmp_path / "h.yaml", a)
    doc = yaml.safe_load(path.read_text())
    assert doc[MARKER_KEY] == 2 and doc["features"] == list(names)
    back = read_policy(path)
    x = np.array([[r["features"][k] for k in names] for r in rows])
    assert np.allclose(back.probabilities(x), a.probabilities(x))
    assert [back.act(r["features"])[0] for r in rows] == [a.act(r["features"])[0] for r in rows]
    assert back.uses_evidence and not back.uses_pairs
    # a linear policy over FEATURES stays format 1: a file older memtier reads as before
    lin, _ = train(_rows(), GRPOConfig(seed=1, epochs=3))
    assert yaml.safe_load(write_policy(tmp_path / "l.yaml", lin).read_text())[MARKER_KEY] == 1


def _hidden_doc():
    from memtier_plugin.intervention.policy import EVIDENCE_FEATURES

    rows = [{**r, "features": {**r["features"], **{k: 0.5 for k in EVIDENCE_FEATURES}}} for r in _rows(n=20)]
    pol, _ = train(rows, GRPOConfig(seed=2, epochs=2, hidden=3, features=FEATURES + EVIDENCE_FEATURES))
    return pol.to_doc()


@pytest.mark.parametrize("change, words", [
    (lambda d: d["hidden"]["weights"][1].pop(), "hidden.weights[1]"),
    (lambda d: d["hidden"]["weights"][0].__setitem__(2, float("nan")), "hidden.weights[0]"),
    (lambda d: d["hidden"].update(bias=[0.0]), "hidden.bias"),
    (lambda d: d["hidden"].pop("bias"), "'hidden'"),
    (lambda d: d["weights"].update(intervene=[0.0] * len(d["features"])), "weights.intervene"),
    (lambda d: d.update(features=d["features"][:-1] + ["no_such_feature"]), "other features"),
    (lambda d: d.update(features=d["features"][:-1] + [d["features"][0]]), "other features"),
    (lambda d: d.update(memtier_intervention_policy=1), "other features"),  # format 1 is FEATURES only
    (lambda d: d.update(memtier_intervention_policy=3), "format 3"),
    (lambda d: d.update(memtier_intervention_policy=True), "format True"),
])
def test_a_corrupted_format_2_policy_is_one_line_naming_the_file(tmp_path, change, words):
    doc = _hidden_doc()
    change(doc)
    _refused(tmp_path, doc, words)


def test_at_pre_tool_an_evidence_policy_reads_the_features_a_real_pre_tool_computes(tmp_path):
    """Through Memory.on_pre_tool: a format-2 policy gets the evidence features (traced with the decision);
    a format-1 policy's features are FEATURES only (no other item is looked at for it)."""
    from memtier_plugin.events import HookContext, PromptEvent, ToolCallEvent
    from memtier_plugin.intervention.policy import EVIDENCE_FEATURES

    def run(ws, pol):
        from memtier_plugin.memory import memory_for

        host, ctx = _policy_workspace(ws, pol, "I avoid anything with peanuts or peanut sauce.")
        host.before_prompt_build(PromptEvent("Suggest a dinner recipe with noodles."), ctx(2))
        answer = host.pre_tool(ToolCallEvent("select_option", {"option": "Satay noodles in peanut sauce"}), ctx(2))
        return answer, memory_for(ctx(2)).last_decision.features

    wide = Policy.zero(names=FEATURES + EVIDENCE_FEATURES)
    wide.bias[ACTIONS.index("intervene")] = 5.0
    answer, feats = run(tmp_path / "a", wide)
    assert answer.block and "peanut" in answer.block_reason
    got = feats["policy_features"]
    assert set(EVIDENCE_FEATURES) <= set(got) and got["max_lex_avoid"] >= 1
    assert "ce_avoid" not in got  # this policy reads no cross-encoder feature: none is computed
    _, feats = run(tmp_path / "b", _always("intervene"))
    assert set(feats["policy_features"]) == set(FEATURES)


def test_train_policy_features_and_hidden_options(tmp_path):
    """--features picks what the policy reads (a bad name is one line), --hidden a tanh layer; --from-rows
    trains the same file again from the traced calls."""
    root = synth.write(tmp_path / "prefeval_dev")
    rows, out = tmp_path / "rows.jsonl", tmp_path / "h.yaml"
    bad = run_cli("train", "policy", str(root), "--turns", "3", "--features", "applicability,nope", "-q",
                  "--out", str(out), check=False, env=LEXICAL)
    assert bad.returncode != 0 and "nope" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    assert not out.exists()
    run_cli("train", "policy", str(root), "--turns", "3", "--hidden", "4", "--epochs", "20", "-q", "--json",
            "--train-topics", "food_dishes,music_shows", "--out", str(out), "--rows-out", str(rows), env=LEXICAL)
    pol = read_policy(out)
    assert pol.hidden_w.shape[0] == 4 and "max_conflict" in pol.names  # the default: evidence features
    again = tmp_path / "again.yaml"
    run_cli("train", "policy", str(root), "--from-rows", str(rows), "--hidden", "4", "--epochs", "20", "-q",
            "--train-topics", "food_dishes,music_shows", "--out", str(again), env=LEXICAL)
    assert again.read_text() == out.read_text()
    base = tmp_path / "base.yaml"
    run_cli("train", "policy", str(root), "--from-rows", str(rows), "--features", "base", "--epochs", "20", "-q",
            "--train-topics", "food_dishes,music_shows", "--out", str(base), env=LEXICAL)
    assert read_policy(base).names == FEATURES and yaml.safe_load(base.read_text())["memtier_intervention_policy"] == 1
    pairs = run_cli("train", "policy", str(root), "--from-rows", str(rows), "--features", "pairs", "-q",
                    "--out", str(tmp_path / "p.yaml"), check=False, env=LEXICAL)
    assert pairs.returncode != 0 and "ce_avoid" in pairs.stderr  # traced without the cross-encoder


def test_a_pairs_policy_without_the_cross_encoder_is_refused_once_and_the_fixed_rule_decides(tmp_path, caplog):
    from memtier_plugin.events import HookContext, PromptEvent, ToolCallEvent
    from memtier_plugin.memory import Memory
    from memtier_plugin.intervention.policy import CROSS_FEATURES, EVIDENCE_FEATURES

    ws = tmp_path / "ws"
    ws.mkdir()
    pol = Policy.zero(names=FEATURES + EVIDENCE_FEATURES + CROSS_FEATURES)
    pol.bias[ACTIONS.index("intervene")] = 5.0
    write_policy(ws / "memtier-policy.yaml", pol)
    assert read_policy(ws / "memtier-policy.yaml").uses_pairs
    mem = Memory(load_config(flags={"paths.workspace": str(ws), "scheduling.policy": "memtier-policy.yaml",
                                    "standing.embedder": "none", "rerank.model_dir": str(tmp_path / "no-models")}))
    ctx = HookContext(agent_id="main", session_key="s", session_id="s1", run_id="r1", project="p",
                      workspace_dir=str(ws))
    mem.on_prompt(PromptEvent("Can you recommend a pasta dish?"), ctx)
    with caplog.at_level(logging.ERROR, logger="memtier_plugin.memory"):
        for _ in range(3):
            assert mem.on_pre_tool(ToolCallEvent("select_option", {"option": "mushroom pasta"}), ctx) is None
    errors = [r.getMessage() for r in caplog.records if "scheduling.policy" in r.getMessage()]
    assert len(errors) == 1 and "cross-encoder" in errors[0]


@pytest.mark.embed
def test_with_the_real_models_evidence_selection_and_the_cross_encoder_read_the_conflicting_item():
    from memtier_plugin.models import embedders as E
    from memtier_plugin.models.cross_encoder import CrossEncoder

    bge, ce = E.OnnxBGE(), CrossEncoder()
    if not bge.available() or not ce.available():
        pytest.skip("bge-small or the cross-encoder not fetched (memtier model setup --embedder --reranker)")
    scored = [(_item("I prefer series with short seasons that I can finish in a weekend."), 0.8),
              (_item("I dislike any content that involves zombies or apocalyptic scenarios."), 0.7)]
    request = "What are some thrilling TV series you'd suggest I start watching?"
    violate = features("The Walking Dead - A gripping zombie apocalypse drama.", request, scored, bge, ce)
    follow = features("Sherlock - A modern take on the classic detective stories.", request, scored, bge, ce)
    assert violate["sel_is_top"] == 0 and violate["ce_used"] == 1.0
    assert violate["max_sem_avoid"] > follow["max_sem_avoid"] + 0.05
    assert violate["ce_avoid"] > follow["ce_avoid"]
    assert violate["max_conflict"] > follow["max_conflict"]


def _policy_workspace(ws, policy: Policy, preference: str, scheduling: dict | None = None):
    """(host, ctx) of a new workspace whose config names ``policy`` (lexical features) and the other
    ``scheduling`` keys, after a session in which the user stated ``preference``; ``ctx(n)`` is run n's context
    (session s<n>)."""
    from memtier_plugin import plugin
    from memtier_plugin.events import AgentEndEvent, HookContext, PromptEvent, SessionEndEvent
    from memtier_plugin.host import Host
    from memtier_plugin.memory import reset_services

    ws.mkdir()
    write_policy(ws / "memtier-policy.yaml", policy)
    (ws / "memtier.yaml").write_text("standing:\n  embedder: none\nscheduling:\n  mode: combined\n"
                                     "  policy: memtier-policy.yaml\n"
                                     + "".join(f"  {k}: {v}\n" for k, v in (scheduling or {}).items()))
    reset_services()
    host = Host()
    host.register(plugin, "memtier")

    def ctx(n):
        return HookContext(agent_id="main", session_id=f"s{n}", run_id=f"r{n}", project="food", workspace_dir=str(ws))

    host.before_prompt_build(PromptEvent(preference), ctx(0))
    host.agent_end(AgentEndEvent(success=True), ctx(0))
    host.session_end(SessionEndEvent(reason="completed"), ctx(0))
    return host, ctx


def _real_runs(ws, policy: Policy):
    """A workspace with real runs through the host under ``policy``: a preference, then four runs of one call
    each — let through and failed in a failed run; let through and fine in a good run; held in a good run;
    and one with no outcome logged."""
    from memtier_plugin.events import AgentEndEvent, PromptEvent, ToolCallEvent, ToolResultEvent
    from memtier_plugin.memory import reset_services

    host, ctx = _policy_workspace(ws, policy, "I avoid seafood, so never suggest shrimp or fish dishes to me.")
    decisions = []
    for n, option, error, success in ((1, "grilled shrimp skewers", "restaurant out of stock", False),
                                      (2, "mushroom risotto", None, True), (3, "salmon sashimi", None, True),
                                      (4, "fish tacos", None, None)):
        host.before_prompt_build(PromptEvent("Recommend a dish for tonight's dinner."), ctx(n))
        call = ToolCallEvent("select_option", {"request": "a dish for dinner", "option": option}, f"c{n}")
        decision = host.pre_tool(call, ctx(n))
        decisions.append(decision)
        if not decision.block:
            host.post_tool(ToolResultEvent("select_option", call.params, f"c{n}", result=None if error else "ok",
                                           error=error), ctx(n))
        if success is not None:
            host.agent_end(AgentEndEvent(success=success), ctx(n))
    reset_services()
    return decisions


def test_real_runs_become_labelled_calls_by_what_happened_to_the_call_and_the_run(tmp_path):
    from memtier_plugin.learning.grpo import rows_from_traces

    hold_salmon = _always("supplement")  # everything through but what the fixed rule holds ...
    decisions = _real_runs(tmp_path / "ws", hold_salmon)
    assert not any(d.block for d in decisions) and all(d.supplement for d in decisions)
    rows, skipped = rows_from_traces(tmp_path / "ws" / "memory")
    by_run = {r["run_id"]: r["label"] for r in rows}
    # r1: let through, failed, the run failed -> violate; r2, r3: let through, fine, the run fine -> follow
    assert by_run == {"r1": "violate", "r2": "follow", "r3": "follow"}
    assert set(rows[0]["features"]) == set(FEATURES) and skipped == {"no run_end (outcome) logged": 1}
    held = _real_runs(tmp_path / "ws2", _always("intervene"))
    assert all(d.block for d in held)
    rows, skipped = rows_from_traces(tmp_path / "ws2" / "memory")
    by_run = {r["run_id"]: r["label"] for r in rows}
    # held in a good run -> violate (the agent replanned); held in the failed run r1 says too little
    assert by_run == {"r2": "violate", "r3": "violate"} and sum(skipped.values()) == 2


def test_train_policy_with_traces_adds_the_real_runs_to_the_training_calls(tmp_path):
    root = synth.write(tmp_path / "prefeval_dev")
    _real_runs(tmp_path / "ws", _always("supplement"))
    env = {**LEXICAL, "MEMTIER_WORKSPACE": str(tmp_path / "ws")}
    args = ("train", "policy", str(root), "--turns", "3", "--seed", "5", "--epochs", "20", "--json", "-q",
            "--features", "base", "--train-topics", "food_dishes,music_shows", "--out", str(tmp_path / "p.yaml"))
    plain = json.loads(run_cli(*args, env=env).stdout)
    doc = json.loads(run_cli(*args, "--with-traces", env=env).stdout)
    assert doc["training"]["rows"] == plain["training"]["rows"] + 3
    assert doc["traces"]["labels"] == {"follow": 2, "violate": 1} and doc["traces"]["used"] == 3
    assert doc["traces"]["skipped"] == {"no run_end (outcome) logged": 1}
    assert read_policy(tmp_path / "p.yaml").meta["real_run_calls"] == 3
    empty = tmp_path / "empty"
    empty.mkdir()
    bad = run_cli(*args, "--with-traces", env={**LEXICAL, "MEMTIER_WORKSPACE": str(empty)}, check=False)
    assert bad.returncode != 0 and "--with-traces: no labelled calls" in bad.stderr and "Traceback" not in bad.stderr


def test_a_hold_quotes_first_the_preference_the_call_goes_against_not_the_one_that_applies_best(tmp_path):
    """Two standing preferences; the one that applies best to the request says nothing about the call, the
    other forbids what it does. An evidence policy's hold quotes first the one it selected as conflicting
    (its id and words), then the best-applying one; a format-1 policy never looks past the best item, so it
    quotes that one; a supplement quotes both, the best-applying first."""
    from memtier_plugin.events import AgentEndEvent, PromptEvent, SessionEndEvent, ToolCallEvent
    from memtier_plugin.memory import memory_for
    from memtier_plugin.intervention.policy import EVIDENCE_FEATURES

    def run(ws, pol):
        host, ctx = _policy_workspace(ws, pol, "I prefer quick weekday dinner recipes.")
        host.before_prompt_build(PromptEvent("I avoid anything with peanuts or peanut sauce."), ctx(1))
        host.agent_end(AgentEndEvent(success=True), ctx(1))
        host.session_end(SessionEndEvent(reason="completed"), ctx(1))
        host.before_prompt_build(PromptEvent("Suggest a quick weekday dinner recipe."), ctx(2))
        answer = host.pre_tool(ToolCallEvent("select_option", {"option": "Satay noodles in peanut sauce"}), ctx(2))
        mem = memory_for(ctx(2))
        scored = mem.run(ctx(2)).standing_task[1]
        return answer, mem.last_decision, [it for it, _ in scored]

    wide = Policy.zero(names=FEATURES + EVIDENCE_FEATURES)
    wide.bias[ACTIONS.index("intervene")] = 5.0
    answer, decision, items = run(tmp_path / "a", wide)
    assert "weekday" in items[0].content and "peanut" in items[1].content  # another item applies best
    assert decision.features["policy_features"]["sel_is_top"] == 0
    assert answer.block and "peanut" in answer.block_reason
    assert [e.id for e in decision.evidence] == [items[1].id, items[0].id]  # the conflicting one first
    assert answer.block_reason.index(items[1].id) < answer.block_reason.index(items[0].id)
    _, decision, items = run(tmp_path / "b", _always("intervene"))
    assert [e.id for e in decision.evidence] == [items[0].id]
    wide.bias[:] = 0
    wide.bias[ACTIONS.index("supplement")] = 5.0
    answer, decision, items = run(tmp_path / "c", wide)
    assert not answer.block and [e.id for e in decision.evidence] == [items[0].id, items[1].id]
    assert "peanut" in answer.supplement and "weekday" in answer.supplement


# ---------------------------------------------------------------- issue 30 item 3: no policy file lifts a hold
SAT = 1_793_437_200.0  # 2026-10-31, a Saturday (UTC)
HUGE = 10 ** 400  # a 400-digit integer: float() of it raises OverflowError


def _crafted(kind: str):
    """A policy file's text that no memtier should use to decide: (kind) -> writer of the file."""
    def doc_with(change):
        doc = Policy.zero().to_doc()
        change(doc)
        return yaml.safe_dump(doc)

    return {
        "400-digit weight": lambda: doc_with(lambda d: d["weights"]["silent"].__setitem__(0, HUGE)),
        "400-digit bias": lambda: doc_with(lambda d: d["bias"].update(silent=HUGE)),
        "weights 1e308": lambda: doc_with(lambda d: d["weights"].update(
            {a: [1e308] * len(FEATURES) for a in ACTIONS})),
        "nan mean": lambda: doc_with(lambda d: d["mean"].__setitem__(0, float("nan"))),
        "tiny std": lambda: doc_with(lambda d: d.update(std=[1e-300] * len(FEATURES))),
        "over 1 MiB": lambda: doc_with(lambda d: d.update(meta={"pad": ["x" * 1000] * 1100})),
        "a valid always-silent policy": lambda: yaml.safe_dump(_always("silent").to_doc()),
    }[kind]


@pytest.mark.parametrize("kind", ["400-digit weight", "400-digit bias", "weights 1e308", "nan mean", "tiny std",
                                  "over 1 MiB", "a valid always-silent policy"])
def test_no_crafted_policy_file_lifts_the_fixed_rules_hold_of_a_saturday_production_deploy(tmp_path, kind):
    """Through the reference host: the standing rule holds a Saturday production deploy whatever
    scheduling.policy names (before, a 400-digit number escaped as OverflowError and pre_tool answered
    "memory check could not run; proceed")."""
    from memtier_plugin import plugin
    from memtier_plugin.events import AgentEndEvent, HookContext, PromptEvent, SessionEndEvent, ToolCallEvent
    from memtier_plugin.host import Host

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "memtier-policy.yaml").write_text(_crafted(kind)())
    (ws / "memtier.yaml").write_text("standing:\n  embedder: none\nscheduling:\n  mode: combined\n"
                                     "  policy: memtier-policy.yaml\n")
    host = Host()
    host.register(plugin, "memtier")

    def ctx(n):
        return HookContext(agent_id="ops", session_id=f"s{n}", run_id=f"r{n}", project="atlas", workspace_dir=str(ws))

    host.before_prompt_build(PromptEvent("A rule going forward: production deploys only on weekdays."), ctx(1))
    host.agent_end(AgentEndEvent(success=True), ctx(1))
    host.session_end(SessionEndEvent(reason="completed"), ctx(1))
    host.before_prompt_build(PromptEvent("ship the atlas release to production"), ctx(2))
    for _ in range(2):
        held = host.pre_tool(ToolCallEvent("deploy", {"app": "atlas", "env": "production"}, timestamp=SAT), ctx(2))
        assert held.block and "weekdays" in held.block_reason
        assert "could not run" not in (held.supplement or "")


@pytest.mark.parametrize("change, words", [
    (lambda d: d["weights"]["silent"].__setitem__(0, HUGE), "'weights.silent[0]' must be a finite number"),
    (lambda d: d["bias"].update(intervene=HUGE), "'bias.intervene' must be a finite number"),
    (lambda d: d["mean"].__setitem__(3, -HUGE), "'mean[3]'"),
    (lambda d: d["std"].__setitem__(1, HUGE), "'std[1]'"),
    (lambda d: d["weights"].update(intervene=[1e308] * len(FEATURES)), "'weights.intervene[0]'"),
    (lambda d: d["bias"].update(silent=float("inf")), "'bias.silent'"),
    (lambda d: d["bias"].update(silent=True), "'bias.silent' must be a number"),
    (lambda d: d.update(std=[1e-300] * len(FEATURES)), "'std' values must be positive, at least"),
])
def test_every_number_of_a_policy_file_is_finite_and_in_range_or_one_line_naming_the_key(tmp_path, change, words):
    doc = Policy.zero().to_doc()
    change(doc)
    _refused(tmp_path, doc, words)


def test_a_policy_file_over_1_mib_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    import memtier_plugin.safe_yaml as config_mod

    path = tmp_path / "big.yaml"
    path.write_text(_crafted("over 1 MiB")())
    parsed = []
    real = config_mod.parse_yaml
    monkeypatch.setattr(config_mod, "parse_yaml", lambda *a, **k: parsed.append(1) or real(*a, **k))
    with pytest.raises(ConfigError) as err:
        read_policy(path)
    assert str(err.value) == f"{path}: larger than 1 MiB; not read as an intervention policy file"
    assert parsed == []


def test_a_refused_policy_file_is_not_read_again_until_it_changes(tmp_path, monkeypatch, caplog):
    """A refused file stays refused from the cache (path, mtime, size): pre_tool does not parse it at every
    call (a 10 MB file took ~3 s a call before); once it changes, it is read again and used."""
    import os

    from memtier_plugin.events import ToolCallEvent
    from memtier_plugin.intervention import policy as policy_mod

    from memtier_plugin.events import PromptEvent

    ws = tmp_path / "ws"
    host, ctx = _policy_workspace(ws, _always("silent"), "I avoid anything with peanuts or peanut sauce.")
    path = ws / "memtier-policy.yaml"
    path.write_text(_crafted("400-digit weight")())
    reads = []
    real = policy_mod.read_policy
    monkeypatch.setattr(policy_mod, "read_policy", lambda p: reads.append(p) or real(p))
    host.before_prompt_build(PromptEvent("Suggest a dinner recipe with noodles."), ctx(2))
    call = ToolCallEvent("select_option", {"option": "Satay noodles in peanut sauce"})
    with caplog.at_level(logging.ERROR, logger="memtier_plugin"):
        for _ in range(4):
            assert not host.pre_tool(call, ctx(2)).block  # the fixed rule decides: no computable conflict
    assert len(reads) == 1
    errors = [r.getMessage() for r in caplog.records if "scheduling.policy" in r.getMessage()]
    assert len(errors) == 1 and "weights.silent[0]" in errors[0]
    write_policy(path, _always("intervene"))
    os.utime(path, ns=(1, 1))  # a change the cache sees whatever the file system's time resolution
    held = host.pre_tool(call, ctx(2))
    assert len(reads) == 2 and held.block and "peanut" in held.block_reason


def test_nan_probabilities_are_a_failed_check_a_supplement_never_a_silent_allow(tmp_path, monkeypatch):
    """Features that overflow (an embedder gone wrong) make the probabilities NaN: before, argmax picked the
    first action, silent; now the check failed, and the call gets the failure's supplement."""
    from memtier_plugin.events import ToolCallEvent
    from memtier_plugin.intervention import features as policy_mod

    from memtier_plugin.events import PromptEvent
    from memtier_plugin.memory import memory_for

    host, ctx = _policy_workspace(tmp_path / "ws", _always("silent"), "I avoid anything with peanuts or peanut sauce.")
    real = policy_mod.features

    def overflowing(*a, **k):
        f = real(*a, **k)
        return None if f is None else {k: float("inf") for k in f}

    host.before_prompt_build(PromptEvent("Suggest a dinner recipe with noodles."), ctx(2))
    call = ToolCallEvent("select_option", {"option": "Satay noodles in peanut sauce"})
    assert not host.pre_tool(call, ctx(2)).supplement  # the policy decides: silent
    monkeypatch.setattr(policy_mod, "features", overflowing)
    answer = host.pre_tool(call, ctx(2))
    assert not answer.block and "check failed" in answer.supplement
    assert memory_for(ctx(2)).last_decision.features.get("policy_error") is True
    pol = _always("silent")
    with pytest.raises(ValueError, match="not finite"):
        pol.act({k: float("nan") for k in FEATURES})


def test_the_widest_policy_train_may_write_is_one_read_policy_reads(tmp_path):
    """MAX_HIDDEN units over every known feature: written and read back (before, more YAML values than the
    reader's bound: `train policy --hidden 256` wrote a file read_policy refused); a policy that would not
    read back (a NaN weight) is not written at all."""
    from memtier_plugin.intervention.policy import KNOWN_FEATURES, MAX_HIDDEN

    rng = np.random.default_rng(0)
    n = len(KNOWN_FEATURES)
    wide = Policy(rng.normal(size=n), np.abs(rng.normal(size=n)) + 0.1, rng.normal(size=(3, MAX_HIDDEN)),
                  rng.normal(size=3), names=KNOWN_FEATURES, hidden_w=rng.normal(size=(MAX_HIDDEN, n)),
                  hidden_b=rng.normal(size=MAX_HIDDEN), meta={"training": {"epochs": 80}})
    back = read_policy(write_policy(tmp_path / "wide.yaml", wide))
    assert back.hidden_w.shape == (MAX_HIDDEN, n)
    broken = _always("silent")
    broken.weights[0, 0] = float("nan")
    with pytest.raises(ConfigError, match="not written") as err:
        write_policy(tmp_path / "nan.yaml", broken)
    assert "weights.silent[0]" in str(err.value) and not (tmp_path / "nan.yaml").exists()


def test_train_policy_hidden_is_bounded_by_what_a_policy_file_holds(tmp_path):
    """`--hidden` past MAX_HIDDEN is one line at the CLI (exit 2, nothing written); at MAX_HIDDEN over every
    feature, the file it writes is one read_policy reads."""
    from memtier_plugin.intervention.policy import CROSS_FEATURES, JUDGE_FEATURES, KNOWN_FEATURES, MAX_HIDDEN

    root = synth.write(tmp_path / "prefeval_dev")
    out = tmp_path / "wide.yaml"
    over = run_cli("train", "policy", str(root), "--hidden", str(MAX_HIDDEN + 1), "--out", str(out), check=False,
                   env=LEXICAL)
    assert over.returncode == 2 and "--hidden" in over.stderr and f"0 to {MAX_HIDDEN}" in over.stderr
    assert not out.exists()
    rows = tmp_path / "rows.jsonl"
    run_cli("train", "policy", str(root), "--turns", "3", "--epochs", "1", "-q", "--json", "--out",
            str(tmp_path / "first.yaml"), "--rows-out", str(rows), env=LEXICAL)
    lines = [json.loads(line) for line in rows.read_text().splitlines()]
    for r in lines:  # as if traced with the cross-encoder and the judge: every known feature present
        if r.get("features"):
            r["features"].update({k: 0.5 for k in CROSS_FEATURES + JUDGE_FEATURES})
    rows.write_text("".join(json.dumps(r) + "\n" for r in lines))
    run_cli("train", "policy", str(root), "--from-rows", str(rows), "--hidden", str(MAX_HIDDEN), "--epochs", "2",
            "--features", ",".join(KNOWN_FEATURES), "-q", "--json", "--out", str(out), env=LEXICAL)
    pol = read_policy(out)
    assert pol.hidden_w.shape == (MAX_HIDDEN, len(KNOWN_FEATURES))


# ---- the policy memtier ships (issue 26): the default when scheduling.policy is unset ----------------------
def test_the_shipped_default_policy_reads_through_the_users_reader_and_is_package_data():
    import glob
    import tomllib
    from pathlib import Path

    from memtier_plugin.intervention.policy import DEFAULT_POLICY, load_policy

    pol = read_policy(DEFAULT_POLICY)  # the hardened reader: size, node count, every number bounded
    assert pol.embedder == "bge-small-en-int8" and pol.uses_evidence and not pol.uses_pairs
    assert pol.meta["seed"] == 0 and len(pol.meta["train_topics"]) == 10 and pol.meta["held_topics"] == []
    assert load_policy(DEFAULT_POLICY).source == str(DEFAULT_POLICY)
    # setuptools expands package-data globs from the package folder: one of them takes the file into the wheel
    pkg = Path(__import__("memtier_plugin").__file__).parent
    globs = tomllib.loads((pkg.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    found = {Path(p) for g in globs["memtier_plugin"] for p in glob.glob(str(pkg / g), recursive=True)}
    assert DEFAULT_POLICY in found


def test_default_names_the_shipped_policy_unset_or_none_is_the_fixed_rule_and_a_users_file_replaces_it(tmp_path):
    from memtier_plugin.intervention.policy import DEFAULT_POLICY, is_default, policy_path

    def path(value):
        return policy_path(load_config(flags={"paths.workspace": str(tmp_path), "scheduling.policy": value}))

    assert policy_path(load_config(flags={"paths.workspace": str(tmp_path)})) is None  # opt-in (docs/learning.md)
    assert path("default") == DEFAULT_POLICY and is_default(path(" Default "))
    assert path("") is None and path("none") is None and path(" None ") is None
    assert path("mine.yaml") == tmp_path / "mine.yaml" and not is_default(path("mine.yaml"))


def test_without_bge_small_the_default_policy_is_left_aside_with_one_info_line_never_an_error(tmp_path, caplog):
    """A workspace without the embedder (standing.embedder: none, or nothing fetched) is not misconfigured: the
    fixed rule decides, as before issue 26, and no call gets the failed-check supplement."""
    from memtier_plugin.events import HookContext, PromptEvent, ToolCallEvent
    from memtier_plugin.memory import Memory

    ws = tmp_path / "ws"
    ws.mkdir()
    mem = Memory(load_config(flags={"paths.workspace": str(ws), "standing.embedder": "none",
                                    "scheduling.policy": "default"}))
    ctx = HookContext(agent_id="main", session_key="s", session_id="s1", run_id="r1", project="p",
                      workspace_dir=str(ws))
    mem.on_prompt(PromptEvent("I avoid graphic violence. What series should I watch?"), ctx)
    with caplog.at_level(logging.INFO, logger="memtier_plugin"):
        for option in ("Narcos, a series full of graphic violence", "The Great British Bake Off"):
            answer = mem.on_pre_tool(ToolCallEvent("select_option", {"option": option}), ctx)
            assert answer is None or (not answer.block and "check" not in (answer.supplement or ""))
    lines = [r for r in caplog.records if "scheduling.policy" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO and "default intervention policy" in lines[0].getMessage()


def _default_host(ws, policy_line: str = ""):
    """(host, ctx) of a workspace with the default config (plus ``policy_line`` under scheduling), after a session
    stating a preference and a weekday-only deploy rule; ``ctx(n)`` is run n's context."""
    from memtier_plugin import plugin
    from memtier_plugin.events import AgentEndEvent, HookContext, PromptEvent, SessionEndEvent
    from memtier_plugin.host import Host
    from memtier_plugin.memory import reset_services

    ws.mkdir()
    if policy_line:
        (ws / "memtier.yaml").write_text(f"scheduling:\n  {policy_line}\n")
    reset_services()
    host = Host()
    host.register(plugin, "memtier")

    def ctx(n):
        return HookContext(agent_id="main", session_id=f"s{n}", run_id=f"r{n}", project="home", workspace_dir=str(ws))

    for n, said in enumerate(("I avoid shows with graphic violence.",
                              "I always keep my meeting notes in Notion, never in plain files.",
                              "Production deploys only on weekdays, never on Saturday or Sunday.")):
        host.before_prompt_build(PromptEvent(said), ctx(100 + n))
        host.agent_end(AgentEndEvent(success=True), ctx(100 + n))
        host.session_end(SessionEndEvent(reason="completed"), ctx(100 + n))
    return host, ctx


def _bge_or_skip():
    from memtier_plugin.models import embedders as E

    if not E.OnnxBGE().available():
        pytest.skip("bge-small not fetched (memtier model setup --embedder): the default policy reads it")


@pytest.mark.embed
def test_the_default_policy_acts_on_a_call_against_a_preference_through_the_host(tmp_path):
    """The issue's probe with the README's setup (bge-small, no scheduling.policy): "I avoid graphic violence"
    and a call selecting a violent show got neither a hold nor a supplement; the default policy now acts on it
    with the preference as evidence. The Notion/Obsidian case (Pulse §4.4.3) stays silent; `policy: none` is
    the fixed rule alone again."""
    from memtier_plugin.events import PromptEvent, ToolCallEvent

    _bge_or_skip()
    for policy_line, acts in (("policy: default", True), ("", False)):
        host, ctx = _default_host(tmp_path / f"ws{int(acts)}", policy_line)
        task = "What series should I watch tonight?"
        host.before_prompt_build(PromptEvent(task), ctx(1))
        violent = ToolCallEvent("select_option", {"request": task,
                                                  "option": "Hannibal, a horror series full of graphic violence"})
        answer = host.pre_tool(violent, ctx(1))
        if acts:
            said = (answer.block_reason if answer.block else answer.supplement) or ""
            assert "graphic violence" in said, said
        else:
            assert answer is None or not (answer.block or answer.supplement), answer
        host.before_prompt_build(PromptEvent("Save these meeting notes to Obsidian this time."), ctx(2))
        quiet = host.pre_tool(ToolCallEvent("save_note", {"app": "Obsidian", "title": "meeting notes"}), ctx(2))
        assert quiet is None or not (quiet.block or quiet.supplement), quiet


@pytest.mark.embed
def test_under_the_default_policy_the_fixed_rules_hold_stands_and_the_policy_is_not_read(tmp_path):
    import datetime as dt

    from memtier_plugin.events import PromptEvent, ToolCallEvent
    from memtier_plugin.memory import memory_for

    _bge_or_skip()
    host, ctx = _default_host(tmp_path / "ws", "policy: default")
    host.before_prompt_build(PromptEvent("Ship the release to production."), ctx(1))
    saturday = dt.datetime(2026, 12, 5, 11, 0, tzinfo=dt.timezone.utc)
    held = host.pre_tool(ToolCallEvent("deploy", {"env": "production", "when": saturday.isoformat()}), ctx(1))
    assert held.block and "Saturday" in held.block_reason and "Production deploys" in held.block_reason
    decision = memory_for(ctx(1)).last_decision
    assert decision.action == "intervene" and "policy" not in decision.features  # the rule's hold, the file unread


def test_a_policy_hold_whose_reason_is_a_rule_with_computable_bounds_is_a_supplement(tmp_path):
    """The fixed rule computes days, times and amounts; a call it let through is within them (or they do not
    bear on it). A learned hold quoting such a rule first ("never book flights before 8am" for a $165 hotel,
    the README demo's false hold under the default policy) is a supplement; a hold on what a preference
    avoids stays a hold."""
    from memtier_plugin.events import PromptEvent, ToolCallEvent
    from memtier_plugin.memory import memory_for

    host, ctx = _policy_workspace(tmp_path / "ws", _always("intervene"),
                                  "Never book flights before 8am, I'm useless that early.")
    host.before_prompt_build(PromptEvent("Book my trip to Berlin: the flights and a hotel."), ctx(1))
    answer = host.pre_tool(ToolCallEvent("book_hotel", {"hotel": "Adlon", "price_per_night_usd": 165}), ctx(1))
    assert answer is not None and not answer.block and "before 8am" in answer.supplement
    decision = memory_for(ctx(1)).last_decision
    assert decision.action == "supplement" and decision.features["no_hold"] == "bounds the fixed rule checks"
    held = host.pre_tool(ToolCallEvent("book_flight", {"depart": "2026-12-01T06:15"}), ctx(1))
    assert held.block and "before 8am" in held.block_reason  # the fixed rule's own hold, as ever
    host2, ctx2 = _policy_workspace(tmp_path / "ws2", _always("intervene"), "I dislike seafood and fish dishes.")
    host2.before_prompt_build(PromptEvent("Suggest a dinner for tonight."), ctx2(1))
    assert host2.pre_tool(ToolCallEvent("select_option", {"option": "grilled fish tacos"}), ctx2(1)).block


def test_a_policy_hold_on_a_preference_that_states_nothing_it_avoids_is_a_supplement(tmp_path):
    """"I always want an aisle seat" says what is wanted, not what a call could go against: under the default
    policy the README demo's deploy and calendar calls were held quoting it. A learned hold needs an avoided
    clause to quote; without one it is a supplement."""
    from memtier_plugin.events import PromptEvent, ToolCallEvent
    from memtier_plugin.memory import memory_for

    host, ctx = _policy_workspace(tmp_path / "ws", _always("intervene"), "I always want an aisle seat on flights.")
    host.before_prompt_build(PromptEvent("Book the flight with an aisle seat, please."), ctx(1))
    answer = host.pre_tool(ToolCallEvent("book_flight", {"flight": "UA 924", "seat": "14C"}), ctx(1))
    assert answer is not None and not answer.block and "aisle seat" in answer.supplement
    assert memory_for(ctx(1)).last_decision.features["no_hold"] == "states nothing it avoids"
