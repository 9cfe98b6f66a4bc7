"""Official LongMemEval / LoCoMo metrics and protocols on tiny hand-made fixtures.

Expected values are computed by hand in the comments. The ``data`` test loads
the real dev split from $MEMTIER_DATA or ../shared/data and is skipped when absent.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

from memtier_plugin.errors import EvalDataError
from memtier_plugin.evaluation import locomo as lc
from memtier_plugin.evaluation import longmemeval as lme
from memtier_plugin.evaluation import metrics as m

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "workspace-fixtures" / "eval"


@pytest.fixture(scope="module")
def questions():
    return {q.question_id: q for q in lme.load(FIX / "longmemeval_tiny.json")}


@pytest.fixture(scope="module")
def conv():
    (c,) = lc.load(FIX / "locomo_tiny.json")
    return c


# ---------------------------------------------------------------- metrics


def test_dcg_matches_upstream_formula():
    # rel[0] + rel[1]/log2(2) + rel[2]/log2(3) + rel[3]/log2(4)
    assert m.dcg([1, 0, 1, 1], 4) == pytest.approx(1 + 1 / math.log2(3) + 0.5)
    assert m.dcg([1, 1, 1], 2) == pytest.approx(2.0)
    assert m.dcg([], 5) == 0.0


def test_recall_and_ndcg_hand_computed():
    ranked = ["x", "g1", "y", "g2"]
    gold = {"g1", "g2"}
    assert m.evaluate_retrieval(ranked, gold, 1) == (0.0, 0.0, 0.0)
    r_any, r_all, nd = m.evaluate_retrieval(ranked, gold, 3)
    assert (r_any, r_all) == (1.0, 0.0)
    assert nd == pytest.approx(1.0 / 2.0)  # dcg [0,1,0] = 1; ideal [1,1] = 2
    r_any, r_all, nd = m.evaluate_retrieval(ranked, gold, 5)
    assert (r_any, r_all) == (1.0, 1.0)
    assert nd == pytest.approx((1 + 1 / math.log2(4)) / 2)  # 0.75


def test_empty_gold_follows_upstream():
    # all([]) is True upstream, any([]) False, nDCG 0 when the ideal is 0
    assert m.recall_all(["a"], set(), 5) == 1.0
    assert m.recall_any(["a"], set(), 5) == 0.0
    assert m.ndcg_any(["a"], set(), 5) == 0.0


def test_ndcg_ideal_counts_corpus_gold_not_ranking():
    # a partial ranking: the ideal still has two relevant docs in the corpus
    assert m.ndcg_any(["g1"], {"g1", "g2"}, 5, corpus_ids=["g1", "g2", "x"]) == pytest.approx(1 / 2)


def test_turn_to_session_walk():
    assert m.strip_turn_id("answer_x_1_3") == "answer_x_1"
    ranked = ["a_1", "a_2", "b_1", "c_1"]
    assert m.turn2session_k(ranked, 2) == 3
    assert m.sessions_from_turn_ranking(ranked, 2) == ["a", "b"]
    assert m.turn2session_k(ranked, 1) == 1
    # fewer sessions than k: upstream stops at len + 1 (or at k when k > len)
    assert m.turn2session_k(["a_1", "a_2", "b_1"], 3) == 4
    assert m.turn2session_k(["a_1", "b_1"], 5) == 5
    assert m.sessions_from_turn_ranking(["a_1", "b_1"], 5) == ["a", "b"]


def test_recall_acc():
    assert m.recall_acc(["D1:1", "D1:2"], ["D1:2", "D2:1"]) == 0.5
    assert m.recall_acc([], ["D1:1"]) == 0.0
    assert m.recall_acc(["D1:1"], []) == 1.0  # upstream convention


# ---------------------------------------------------------------- LongMemEval


def test_load_longmemeval(questions):
    q = questions["q1"]
    assert q.question_type == "multi-session"
    assert [s.session_id for s in q.sessions] == ["s_a", "answer_x_1", "answer_x_2", "answer_x_3"]
    sid, date, turns = q.sessions[1]
    assert (sid, date, turns[0]["content"]) == ("answer_x_1", "2023/05/02 (Tue) 09:00", "My dog is named Rex.")
    assert q.answer_session_ids == ["answer_x_1", "answer_x_2", "answer_x_3"]


def test_load_errors(tmp_path):
    with pytest.raises(EvalDataError):
        lme.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text('[{"question_id": "x"}]')
    with pytest.raises(EvalDataError):
        lme.load(tmp_path / "bad.json")


def test_load_gz(tmp_path):
    import gzip

    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress((FIX / "longmemeval_tiny.json").read_bytes()))
    assert [q.question_id for q in lme.load(p)] == ["q1", "q2_abs", "q3"]


def test_session_corpus_and_noans(questions):
    docs = lme.corpus(questions["q1"], "session")
    assert [d.id for d in docs] == ["s_a", "answer_x_1", "answer_x_2", "noans_x_3"]
    # session document = user turns only, joined by a space
    assert docs[0].text == "I like hiking in the mountains. Any trail tips for beginners?"
    assert docs[2].text == "I adopted a cat named Tom."
    assert lme.gold_ids(questions["q1"], "session") == {"answer_x_1", "answer_x_2"}


def test_turn_ids_numbered_over_all_turns(questions):
    docs = lme.corpus(questions["q1"], "turn")
    assert [d.raw_id for d in docs] == [
        "s_a_1", "s_a_3", "answer_x_1_1", "answer_x_1_3", "answer_x_2_2", "answer_x_3_1",
    ]
    assert [d.id for d in docs] == [
        "s_a_1", "s_a_3", "answer_x_1_1", "noans_x_1_3", "answer_x_2_2", "noans_x_3_1",
    ]
    assert lme.gold_ids(questions["q1"], "turn") == {"answer_x_1_1", "answer_x_2_2"}


def test_abstention_and_averaging_sets(questions):
    qs = list(questions.values())
    assert [lme.is_abstention(q) for q in qs] == [False, True, False]
    assert not lme.has_gold(questions["q3"])  # evidence only in an assistant turn
    assert lme.gold_ids(questions["q3"], "session") == set()
    assert [q.question_id for q in qs if lme.included(q, "strict")] == ["q1"]
    assert [q.question_id for q in qs if lme.included(q, "noabs")] == ["q1", "q3"]


def test_score_question_hand_computed(questions):
    q = questions["q1"]
    sessions = ["s_a", "answer_x_2", "answer_x_3", "answer_x_1"]  # raw ids
    turns = ["answer_x_1_3", "answer_x_1_1", "s_a_1", "answer_x_3_1", "s_a_3", "answer_x_2_2"]
    r = lme.score_question(sessions, turns, q)
    s, t, ts = r["session"], r["turn"], r["turn_as_session"]
    # session: official ids [s_a, answer_x_2, noans_x_3, answer_x_1]
    assert (s["recall_any@1"], s["recall_all@1"], s["ndcg_any@1"]) == (0.0, 0.0, 0.0)
    assert (s["recall_any@3"], s["recall_all@3"]) == (1.0, 0.0)
    assert s["ndcg_any@3"] == pytest.approx(0.5)
    assert s["recall_all@5"] == 1.0
    assert s["ndcg_any@5"] == pytest.approx(0.75)
    # turn: official [noans_x_1_3, answer_x_1_1, s_a_1, noans_x_3_1, s_a_3, answer_x_2_2]
    assert (t["recall_any@5"], t["recall_all@5"]) == (1.0, 0.0)
    assert t["ndcg_any@5"] == pytest.approx(0.5)
    assert t["recall_all@10"] == 1.0
    assert t["ndcg_any@10"] == pytest.approx((1 + 1 / math.log2(6)) / 2)
    # turn->session: stripped [noans_x_1, answer_x_1, s_a, noans_x_3, s_a, answer_x_2]
    assert (ts["recall_any@1"], ts["recall_all@1"]) == (0.0, 0.0)
    assert (ts["recall_any@3"], ts["recall_all@3"]) == (1.0, 0.0)
    assert ts["ndcg_any@3"] == pytest.approx(0.5)
    # k=5 needs 6 turns to see 5 distinct "sessions" (noans_x_1 counts as one)
    assert ts["recall_all@5"] == 1.0
    assert ts["ndcg_any@5"] == pytest.approx((1 + 1 / math.log2(6)) / 2)
    assert set(s) == {f"{mt}@{k}" for mt in lme.METRICS for k in m.KS}


def test_aggregate_strict_and_noabs(questions):
    qs = list(questions.values())

    def rank(q):
        return [s.session_id for s in q.sessions], [d.raw_id for d in lme.corpus(q, "turn")]

    res = lme.evaluate_longmemeval(qs, rank)
    assert res["strict"]["n"] == 1 and res["noabs"]["n"] == 2
    # q3 has no gold: recall_all 1.0 (upstream all([])), recall_any 0.0
    q1 = res["per_question"][0]["session"]
    assert res["noabs"]["session"]["recall_all@1"] == pytest.approx((q1["recall_all@1"] + 1.0) / 2)
    assert res["noabs"]["session"]["recall_any@50"] == pytest.approx(0.5)
    assert res["strict"]["session"]["recall_all@50"] == 1.0
    assert set(res["noabs"]["by_type"]) == {"multi-session", "single-session-assistant"}
    assert res["strict"]["by_type"]["multi-session"]["n"] == 1
    with pytest.raises(ValueError):
        lme.aggregate(res["per_question"], "bogus")


def test_bm25_baseline_runs_on_fixture(questions):
    q = questions["q1"]
    ranked_sessions, ranked_turns = lme.bm25_rank_longmemeval(q)
    assert sorted(ranked_sessions) == sorted(s.session_id for s in q.sessions)
    assert len(ranked_turns) == 6
    res = lme.bm25_baseline_longmemeval(list(questions.values()))
    assert res["strict"]["n"] == 1


# ---------------------------------------------------------------- LoCoMo


def test_locomo_categories_official():
    assert lc.CATEGORIES == {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


def test_load_locomo(conv):
    assert (conv.sample_id, conv.speaker_a, conv.speaker_b) == ("conv-tiny", "Alice", "Bob")
    assert [s.index for s in conv.sessions] == [1, 2]
    assert conv.sessions[1].date == "10:00 am on 20 May, 2023"
    bike = conv.turns[3]
    assert (bike.dia_id, bike.blip_caption, bike.session) == ("D1:4", "a photo of a red bicycle", 1)
    assert len(conv.qa) == 6
    assert conv.qa[2].answer == "2023"  # ints become strings
    assert conv.qa[3].answer is None and conv.qa[3].adversarial_answer == "red"
    assert [q.category_name for q in conv.qa] == [
        "single-hop", "multi-hop", "temporal", "adversarial", "open-domain", "multi-hop",
    ]


def test_malformed_evidence_skipped(conv):
    assert lc.valid_evidence(conv, conv.qa[4]) == ["D2:3"]  # "D:1:3" matches no turn
    assert lc.valid_evidence(conv, conv.qa[5]) == []  # only "D:11:26": excluded


def test_locomo_scores_hand_computed(conv):
    ranking = ["D1:2", "D2:1", "D1:3", "D1:1", "D2:3", "D1:4", "D2:2"]
    res = lc.evaluate_locomo([conv], lambda c, qa: ranking)
    assert res["excluded"] == 1
    o = res["overall"]
    assert o["n"] == 5
    # recall@5 per question: 1, 0.5, 1, 0, 1
    assert o["recall@5"] == pytest.approx(0.7)
    assert o["recall@10"] == pytest.approx(1.0)
    assert o["all@5"] == pytest.approx(0.6)
    # top turn D1:2 is in session D1: q1 yes, q2 yes, q3 no, q4 yes, q5 no
    assert o["session@1"] == pytest.approx(0.6)
    assert res["multi-hop"]["recall@5"] == 0.5 and res["multi-hop"]["n"] == 1
    assert res["adversarial"]["recall@5"] == 0.0
    assert set(res) >= {"overall", "multi-hop", "temporal", "open-domain", "single-hop", "adversarial"}


def test_locomo_bm25_baseline_on_fixture(conv):
    assert lc.turn_document(conv.turns[3]) == "Bob: Look at my new bike! [image: a photo of a red bicycle]"
    ranked = lc.BM25LoCoMo()(conv, conv.qa[0])
    assert ranked[0] == "D1:2" and len(ranked) == 7
    assert lc.bm25_baseline_locomo([conv])["overall"]["n"] == 5


# ---------------------------------------------------------------- real data


def _data_dir() -> Path:
    return Path(os.environ.get("MEMTIER_DATA") or ROOT.parent / "shared" / "data")


@pytest.mark.data
def test_real_dev_counts():
    data = _data_dir()
    lme_path, loc_path = data / "longmemeval_s_dev.json.gz", data / "locomo_dev.json"
    if not (lme_path.exists() and loc_path.exists()):
        pytest.skip(f"benchmark data not found in {data}: set MEMTIER_DATA to the folder "
                    "holding longmemeval_s_dev.json.gz and locomo_dev.json")
    qs = lme.load(lme_path)
    assert len(qs) == 100
    assert sum(lme.included(q, "strict") for q in qs) == 84
    assert sum(lme.included(q, "noabs") for q in qs) == 95
    convs = lc.load(loc_path)
    assert len(convs) == 7
    assert all(q.category in lc.CATEGORIES for c in convs for q in c.qa)
