"""`memtier eval intervention`: the PrefEval pre_tool protocol on a small synthetic folder, and the README's
BM25 rule on the real dev data (data-marked)."""

import json

import pytest

import synthetic_prefeval as synth
from conftest import SHARED_DATA, run_cli
from memtier_plugin.errors import EvalDataError
from memtier_plugin.evaluation import prefeval_intervention as iv
from memtier_plugin.evaluation import prefeval as pe

MEASURES = set(iv.MEASURES)
LEXICAL = {"MEMTIER_STANDING__EMBEDDER": "none"}  # no model needed: standing knowledge scored by words


def test_json_shape_progress_and_the_fixed_rule_on_preferences(tmp_path):
    root = synth.write(tmp_path / "prefeval_dev")
    rows_out = tmp_path / "rows.jsonl"
    proc = run_cli("eval", "intervention", str(tmp_path), "--turns", str(synth.TURNS), "--json",
                   "--rows-out", str(rows_out), "--policy", "default", env=LEXICAL)
    doc = json.loads(proc.stdout)
    rows = [json.loads(line) for line in rows_out.read_text().splitlines()]
    mine = [r for r in rows if r["system"] == "memtier"]
    assert len(mine) == len(rows) // 2 == 48 and [r["option"] for r in mine[:4]] == [0, 1, 2, 3]
    assert [r["label"] for r in mine[:4]] == ["follow", "violate", "violate", "violate"]
    # the policy's features are traced for every call, read from the question's own preference
    assert all(r["features"] and r["evidence_is_own"] for r in mine)
    assert all(r["features"]["lex_avoid"] >= 1 for r in mine if r["label"] == "violate")
    assert set(doc) == {"memtier", "baseline", "meta"}
    for system in ("memtier", "baseline"):
        assert set(doc[system]) == MEASURES and doc[system]["n"] == 12 * 4
    meta = doc["meta"]
    assert meta["path"] == str(root) and meta["questions"] == 12
    # the shipped policy asked for, but no bge-small here: it is left aside, and the report says so
    assert meta["decision"].startswith("fixed rule (the default policy reads bge-small") and meta["policy"] is None
    assert meta["workspaces"] > 0 and set(meta["seconds"]) == {"memtier", "baseline"}
    assert "memtier intervention" in proc.stderr and "12/12" in proc.stderr  # progress counts questions
    # the fixed rule only knows weekday / time / amount conflicts: it holds none of these options
    assert doc["memtier"]["recall"] == doc["memtier"]["false_interrupt_rate"] == 0.0
    assert doc["memtier"]["decision_p50_ms"] > 0
    # every query holds the question and the option: each preference is in BM25's top 4 for all four options,
    # so the rule blocks the following option too (precision 0.75, every false interrupt)
    assert (doc["baseline"]["precision"], doc["baseline"]["recall"], doc["baseline"]["false_interrupt_rate"]) == \
        (0.75, 1.0, 1.0)


def test_topics_and_limit_select_questions_and_memory_keeps_every_preference(tmp_path):
    root = synth.write(tmp_path / "p")
    items = pe.load_items(root, "explicit")
    lays = pe.layouts("multi", items, pe.inter_sessions(pe.load_inter(root, synth.TURNS)))
    picked = iv.select(lays, ["home_decor"], None)
    assert [q.topic for lay in picked for q in lay.questions] == ["home_decor"] * 3
    assert all(sum(s.owner is not None for s in lay.sessions) == 4 for lay in picked)  # all 4 topics' exchanges
    assert sum(len(lay.questions) for lay in iv.select(lays, None, 5)) == 5
    proc = run_cli("eval", "intervention", str(root), "--turns", "3", "--topics", "nope", check=False, env=LEXICAL)
    assert proc.returncode != 0 and "no topic nope" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_options_that_do_not_match_the_explicit_items_are_one_line_errors(tmp_path):
    root = synth.write(tmp_path / "p", break_options=True)
    with pytest.raises(EvalDataError, match="question differs"):
        iv.load_options(root, pe.load_items(root, "explicit"))
    proc = run_cli("eval", "intervention", str(root), "--turns", "3", check=False, env=LEXICAL)
    assert proc.returncode != 0 and "mcq_options" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_metrics_count_blocks_supplements_and_false_interrupts():
    rows = [{"label": "follow", "action": "supplement", "ms": 1.0},  # a supplement on option 0 is no interrupt
            {"label": "violate", "action": "intervene", "ms": 2.0},
            {"label": "violate", "action": "silent", "ms": 3.0},
            {"label": "violate", "action": "intervene", "ms": 4.0},
            {"label": "follow", "action": "intervene", "ms": 5.0}]
    m = iv.metrics(rows)
    assert (m["precision"], m["recall"], m["false_interrupt_rate"], m["supplement_rate"], m["n"]) == \
        (round(2 / 3, 4), round(2 / 3, 4), 0.5, 0.2, 5)
    assert m["decision_p50_ms"] == 3.0


def test_bm25_rule_blocks_only_when_the_preference_is_in_the_top_4():
    inter = [pe.Session(f"inter-{i}", 10.0 + i, (("user", f"we talked about apples and pears number {i}"),))
             for i in range(12)]
    pref = pe.Session("pref-0", 0.0, (("user", "Never any durian for me, the smell is awful"),), owner=0)
    lay = pe.Layout("u", [pref, *inter], [pe.Question("What fruit should I buy?", 0, "t", 0)])
    options = ["Some apples and pears", "A ripe durian", "Fresh apples", "Pears and apples"]
    rows = iv.BM25Intervention({("t", 0): options})(lay)
    assert [r["action"] for r in rows] == ["silent", "intervene", "silent", "silent"]  # only durian reaches it
    assert [r["label"] for r in rows] == ["follow", "violate", "violate", "violate"]


@pytest.mark.data
def test_bm25_rule_reproduces_the_data_readme():
    """The data README: BM25 intervention on the multi explicit layout, 506 questions: 0.785 / 0.301 / 0.247."""
    path = SHARED_DATA / "prefeval_dev"
    if not path.is_dir():
        pytest.skip(f"benchmark data not found at {path}: set MEMTIER_DATA to the folder holding prefeval_dev")
    items = pe.load_items(path, "explicit")
    options = iv.load_options(path, items)
    lays = pe.layouts("multi", items, pe.inter_sessions(pe.load_inter(path, 300)))
    m = iv.metrics(pe.evaluate(lays, iv.BM25Intervention(options)))
    assert m["n"] == 506 * 4
    # measured 0.7856 / 0.3017 / 0.2470: the README's table cuts them to three places
    assert (m["precision"], m["recall"], m["false_interrupt_rate"]) == (0.7856, 0.3017, 0.247)
    assert (int(m["precision"] * 1000), int(m["recall"] * 1000), int(m["false_interrupt_rate"] * 1000)) == \
        (785, 301, 247)


def test_holds_report_whether_they_quote_the_questions_own_preference(tmp_path):
    """A policy that holds every call: each violating option is held with the preference it goes against,
    which is the question's own (the synthetic options name what it avoids); the report counts them."""
    from memtier_plugin.intervention.policy import ACTIONS, EVIDENCE_FEATURES, FEATURES, Policy, write_policy

    root = synth.write(tmp_path / "prefeval_dev")
    pol = Policy.zero(names=FEATURES + EVIDENCE_FEATURES)
    pol.bias[ACTIONS.index("intervene")] = 5.0
    write_policy(tmp_path / "hold-all.yaml", pol)
    rows_out = tmp_path / "rows.jsonl"
    proc = run_cli("eval", "intervention", str(tmp_path), "--turns", str(synth.TURNS), "--json", "--policy",
                   str(tmp_path / "hold-all.yaml"), "--rows-out", str(rows_out), env=LEXICAL)
    doc = json.loads(proc.stdout)
    mine = [json.loads(line) for line in rows_out.read_text().splitlines()]
    mine = [r for r in mine if r["system"] == "memtier"]
    assert doc["memtier"]["recall"] == doc["memtier"]["false_interrupt_rate"] == 1.0
    assert all(r["quotes_own"] for r in mine if r["label"] == "violate")
    held = doc["meta"]["hold_evidence"]
    assert held["holds_quoting_standing"] == 48
    assert held["quoting_own_preference"] == sum(bool(r["quotes_own"]) for r in mine) >= 36
    assert held["own_quoted_first"] == sum(bool(r["first_quoted_is_own"]) for r in mine) >= 36
    assert iv.hold_evidence([{"action": "silent", "quotes_own": True}]) == \
        {"holds_quoting_standing": 0, "quoting_own_preference": 0, "own_share": None, "own_quoted_first": 0}
