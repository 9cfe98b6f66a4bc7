"""`memtier eval prefeval`: the recall protocols on a tiny hand-written fixture, and the README's BM25 on real data.

The fixture (workspace-fixtures/eval/prefeval_tiny, 3 topics, 8 items, 3 inter
conversations = 6 turns) is built so its hits can be reasoned about: seven
preferences share a content word with their question and no inter message has
it; one (travel_trips item 1, motion sickness vs "a good car for a road trip")
shares no word with its question while four inter messages about a car do.
"""

import json
import os

import pytest

from conftest import FIXTURES, SHARED_DATA, run_cli
from memtier_plugin.config import load_config
from memtier_plugin.evaluation import prefeval as pe
from memtier_plugin.recall.packing import Hit

TINY = FIXTURES / "eval" / "prefeval_tiny"
TRAP = ("travel_trips", 1)
SHAPE = {"hit@delivered", "hit@1", "hit@5", "hit@10", "n"}


def _json(*args, env=None):
    proc = run_cli("eval", "prefeval", *args, "--json", env=env)
    return json.loads(proc.stdout), proc.stderr


def test_json_shape_and_progress_on_stderr():
    doc, stderr = _json(str(TINY), "--turns", "6")
    assert set(doc) == {"memtier", "bm25", "host", "meta"}
    for variant in ("single", "multi"):  # the block's own figures (issue 25), beside today's keys
        for h in doc["host"][variant].values():
            assert h["n"] == 8 and 0.0 <= h["precision"] <= 1.0 and h["wrong_standing_per_question"] >= 0
            assert set(h["items_by_layer"]) == {"episodic", "semantic", "global", "workspace", "hooks"}
            u = h["unrelated"]
            assert u["sent"] > 0 and 0.0 <= u["false_delivery_preferences"] <= u["false_delivery"] <= 1.0
    for system in ("memtier", "bm25"):
        assert set(doc[system]) == {"single", "multi"}  # no option: both variants, explicit and choice
        for variant in ("single", "multi"):
            assert set(doc[system][variant]) == {"explicit", "choice"}
            for scores in doc[system][variant].values():
                assert set(scores) == SHAPE and scores["n"] == 8
                assert all(0.0 <= scores[m] <= 1.0 for m in SHAPE - {"n"})
    meta = doc["meta"]
    assert (meta["turns"], meta["preset"], meta["embedder"], meta["top_k"]) == (6, "paper", None, 4)
    assert meta["path"] == str(TINY) and meta["wall_seconds"] >= 0 and meta["failed_recalls"] == 0
    assert set(meta["seconds"]) == {"memtier", "bm25"}
    assert "memtier single/explicit" in stderr and "bm25 multi/choice" in stderr and "8/8" in stderr


def test_hits_on_a_case_one_can_reason_about(tmp_path):
    """Shared words: memtier and BM25 both deliver the preference. The trap shares no term with its
    question: BM25's top 4 are the car messages, while memtier's standing memory routes "a car for a road
    trip" and "lengthy drives in automobiles" to the same topic and delivers the preference (lexically too)."""
    root = pe.find_root(TINY)
    items = pe.load_items(root, "explicit")
    inter = pe.inter_sessions(pe.load_inter(root, 6))
    # a topic route alone, without an embedder, is weak evidence: calibration gives the trap's preference
    # p ≈ 0.18, under the shipped lexical threshold (0.2, fitted so that at most 5% of unrelated prompts get a
    # standing item); a user who wants such matches lowers calibration.threshold, as here
    memtier = pe.MemtierPrefEval(load_config(flags={"paths.workspace": str(tmp_path / "user"),
                                                    "standing.embedder": "none", "calibration.threshold": 0.1}),
                                 tmp_path / "work")
    try:
        for variant in pe.VARIANTS:
            lays = pe.layouts(variant, items, inter)
            questions = [(q.topic, q.index) for lay in lays for q in lay.questions]
            assert len(questions) == 8 and TRAP in questions
            mem = dict(zip(questions, pe.evaluate(lays, memtier)))
            base = dict(zip(questions, pe.evaluate(lays, pe.BM25PrefEval(4))))
            for q in questions:
                if q == TRAP:
                    assert mem[q]["hit@delivered"] == 1.0, (variant, mem[q])
                    assert base[q]["hit@delivered"] == base[q]["hit@1"] == 0.0, (variant, base[q])
                else:
                    assert mem[q]["hit@delivered"] == base[q]["hit@delivered"] == 1.0, (variant, q, mem[q], base[q])
    finally:
        memtier.close()
    assert memtier.failed == 0 and not any((tmp_path / "work").iterdir())  # every workspace deleted


def test_score_question_counts_a_hit_through_its_sources():
    gold = {("pref-0", 0)}
    keys = {"ep-pref": ("pref-0", 0), "ep-inter": ("inter-00", 3)}

    def hit(hid, sources):
        return Hit(id=hid, content="", timestamp="", session_id="", agent_id="main", role="user", tier="semantic",
                   score=1.0, sources=sources)

    fact = hit("sf-1", ["ep-pref"])  # a fact (or a standing node) stands for the entry it came from
    episode = hit("ep-inter", ["ep-inter"])
    question = hit("ep-question", ["ep-question"])  # an entry that is no message of the layout
    assert pe.covered(fact, keys) == gold and pe.covered(question, keys) == set()
    ranking = [pe.covered(h, keys) for h in (episode, question, fact)]
    row = pe.score_question(ranking[:2], ranking, gold)
    assert row == {"hit@delivered": 0.0, "hit@1": 0.0, "hit@5": 1.0, "hit@10": 1.0}
    assert pe.score_question([ranking[2]], ranking[2:], gold)["hit@1"] == 1.0
    assert pe.aggregate([row, {**row, "hit@delivered": 1.0}]) == {"hit@delivered": 0.5, "hit@1": 0.0, "hit@5": 1.0,
                                                                "hit@10": 1.0, "n": 2}


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    cases = [
        ((str(tmp_path / "nowhere"),), "nowhere: no such folder"),
        ((str(TINY), "--turns", "400"), "--turns 400 needs 800 messages, the file holds 12"),
    ]
    broken = tmp_path / "broken"
    for path in TINY.rglob("*.json"):
        dest = broken / path.relative_to(TINY)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(path.read_bytes())
    items = json.loads((broken / "explicit_preference" / "cooking_food.json").read_text())
    del items[1]["question"]
    (broken / "explicit_preference" / "cooking_food.json").write_text(json.dumps(items))
    cases.append(((str(broken), "--turns", "6"), "cooking_food.json: item 1: question: expected non-empty text"))
    for args, needle in cases:
        proc = run_cli("eval", "prefeval", *args, check=False)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("memtier: error:") and needle in lines[0], proc.stderr
        assert proc.stdout == ""


def test_multi_never_writes_a_question_back_and_kept_workspaces_own_their_ledgers(tmp_path):
    work = tmp_path / "work"
    doc, _ = _json(str(TINY), "--turns", "6", "--variant", "multi", "--form", "explicit", "--workdir", str(work), "-q")
    assert doc["meta"]["workdir"] == str(work)
    kept = sorted(p.name for p in (work / "multi-explicit").iterdir())
    # each question's copy, and each user's copy the unrelated prompts were sent to (false delivery)
    assert kept == sorted([f"user-00{u}-q{j}" for u, n in ((0, 3), (1, 3), (2, 2)) for j in range(n)]
                          + [f"user-00{u}-unrelated" for u in range(3)])
    for name in kept:
        files = list((work / "multi-explicit" / name / "memory" / "episodic" / "main").glob("*.jsonl"))
        entries = [json.loads(line) for f in files for line in f.read_text().splitlines()]
        entries = [e for e in entries if e.get("kind") == "entry"]
        sessions = {e["session_id"] for e in entries}
        # its own question only (written after recall; none in the unrelated prompts' copy), the user's
        # exchanges, the 12 inter messages
        own = set() if name.endswith("unrelated") else {f"question-{name[-1]}"}
        assert {s for s in sessions if s.startswith("question")} == own, name
        assert sum(s.startswith("inter") for s in (e["session_id"] for e in entries)) == 12
        assert len({s for s in sessions if s.startswith("pref")}) == (2 if name.startswith("user-002") else 3)
        for f in files:  # a kept ledger is the workspace's own, never a link into another one
            assert f.stat().st_nlink == 1 and os.access(f, os.W_OK), f
    assert not (work / "ws").exists() and not list(work.glob("template-*"))


def test_preset_reaches_the_workspaces_even_with_memtier_config_set(tmp_path):
    """The host reads $MEMTIER_CONFIG before a workspace's memtier.yaml; the run must still evaluate the
    config asked for (here --preset recommended over a file saying top_k 3)."""
    cfg = tmp_path / "mine.yaml"
    cfg.write_text("retrieval:\n  top_k: 3\n")
    work = tmp_path / "work"
    proc = run_cli("--preset", "recommended", "eval", "prefeval", str(TINY), "--turns", "6", "--variant", "single",
                   "--form", "choice", "--json", "-q", "--workdir", str(work), env={"MEMTIER_CONFIG": str(cfg)},
                   check=False)
    assert proc.returncode == 0, proc.stderr
    meta = json.loads(proc.stdout)["meta"]
    assert (meta["preset"], meta["top_k"], meta["token_budget"], meta["config"]) == ("recommended", 2, 600, str(cfg))
    kept = next((work / "single-choice").iterdir())
    assert load_config(flags={"paths.workspace": str(kept)}).retrieval.top_k == 2
    doc, _ = _json(str(TINY), "--turns", "6", "--variant", "single", "--form", "choice", "-q",
                   env={"MEMTIER_CONFIG": str(cfg)})
    assert doc["meta"]["top_k"] == 3


@pytest.mark.data
@pytest.mark.data
def test_bm25_reproduces_the_data_readme_and_memtier_runs_on_the_dev_split():
    path = SHARED_DATA / "prefeval_dev"
    if not path.is_dir():
        pytest.skip(f"benchmark data not found at {path}: set MEMTIER_DATA to the folder holding prefeval_dev")
    inter = pe.inter_sessions(pe.load_inter(path, 300))
    assert sum(len(s.messages) for s in inter) == 600

    def bm25(variant, form):
        rows = pe.evaluate(pe.layouts(variant, pe.load_items(path, form), inter), pe.BM25PrefEval(4))
        agg = pe.aggregate(rows)
        return agg["n"], *(round(agg[m], 3) for m in ("hit@delivered", "hit@5", "hit@10"))  # delivered = top 4

    assert bm25("single", "explicit") == (506, 0.164, 0.184, 0.223)
    assert bm25("multi", "explicit") == (506, 0.164, 0.184, 0.225)
    n, at4, _, at10 = bm25("multi", "choice")
    assert (n, at4, at10) == (506, 0.587, 0.684)
    doc, _ = _json(str(SHARED_DATA), "--limit", "10", "-q")  # the data folder itself is found too
    for system in ("memtier", "bm25"):
        for variant in ("single", "multi"):
            for form in ("explicit", "choice"):
                assert set(doc[system][variant][form]) == SHAPE and doc[system][variant][form]["n"] == 10
    assert doc["meta"]["failed_recalls"] == 0 and doc["meta"]["path"] == str(path)


def test_topic_files_of_your_own_borrow_the_inter_chats_with_inter(tmp_path):
    """A folder of PrefEval-format topic files without the inter chats (benchmarks/heldout-probes/) is evaluated
    with --inter naming them; without it the folder is refused naming the file it lacks."""
    import shutil

    own = tmp_path / "own"
    shutil.copytree(TINY / "explicit_preference", own / "explicit_preference")
    shutil.copytree(TINY / "implicit_preference", own / "implicit_preference")
    bad = run_cli("eval", "prefeval", str(own), "--turns", "6", "--json", check=False)
    assert bad.returncode != 0 and "no filtered_inter_turns.json" in bad.stderr
    doc, _ = _json(str(own), "--inter", str(TINY / "filtered_inter_turns.json"), "--turns", "6", "--variant", "multi",
                   "--form", "explicit")
    assert doc["memtier"]["multi"]["explicit"]["n"] == 8 and doc["meta"]["path"] == str(own)
    with pytest.raises(pe.EvalDataError, match="no explicit_preference/"):
        pe.find_root(tmp_path, inter=TINY / "filtered_inter_turns.json")


def test_items_takes_a_slice_of_every_topic_and_a_bad_one_is_named():
    """`--items 1:2` asks only each topic's item 1 (the held-out half of a probe: benchmarks/heldout-probes)."""
    root = pe.find_root(TINY)
    every = pe.load_items(root, "explicit")
    sliced = pe.load_items(root, "explicit", (1, 2))
    assert [[(q.topic, q.index) for q in t] for t in sliced] == [[(q.topic, q.index) for q in t[1:2]] for t in every]
    doc, _ = _json(str(TINY), "--turns", "6", "--variant", "single", "--form", "explicit", "--items", "1:2", "-q")
    assert doc["memtier"]["single"]["explicit"]["n"] == sum(len(t) for t in sliced) < 8
    assert doc["meta"]["items"] == [1, 2]
    bad = run_cli("eval", "prefeval", str(TINY), "--items", "2:1", check=False)
    assert bad.returncode == 2 and "'--items'" in bad.stderr and "'2:1'" in bad.stderr
