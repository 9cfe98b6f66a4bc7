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
from memtier_plugin.policy import (ACTIONS, FEATURES, Policy, call_text, explicit_choice, features, polarity,
                                   read_policy, write_policy)
from memtier_plugin.policy_training import GRPOConfig, reward, train
from memtier_plugin.standing import Item

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
    path = tmp_path / "bad-policy.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError) as err:
        read_policy(path)
    msg = str(err.value)
    assert str(path) in msg and words in msg and "\n" not in msg
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
    from memtier_plugin import policy as policy_mod
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
    from memtier_plugin import embeddings as E

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

    from memtier_plugin import policy as policy_mod
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
