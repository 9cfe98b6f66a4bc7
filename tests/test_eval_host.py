"""`memtier eval locomo|longmemeval` through the reference host (issue 25): the block before_prompt_build
returns, scored, on small hand-written fixtures (workspace-fixtures/eval/locomo_host.json,
longmemeval_host.json) whose evidence one can reason about; --ranking-only keeps the old report.

Runs lexically (no embedder, no re-ranker): the figures come from the real hooks, ledgers and consolidation."""

import copy
import json

import pytest

from conftest import FIXTURES, SHARED_DATA, run_cli
from memtier_plugin.config import load_config
from memtier_plugin.evaluation import host_replay as hr
from memtier_plugin.evaluation import locomo as lc
from memtier_plugin.evaluation import longmemeval as lme
from memtier_plugin.store.episodic import Ledger

LOCOMO = FIXTURES / "eval" / "locomo_host.json"
LME = FIXTURES / "eval" / "longmemeval_host.json"
# the hybrid preset's retrieval (soft scoping, no time decay) without its models: lexical hits one can reason about
LEXICAL = {"embeddings.backend": "none", "standing.embedder": "none", "rerank.backend": "none",
           "retrieval.scoping": "soft", "weights.decay": 0.0}
BLOCK_KEYS = {"n", "delivered_any", "delivered_all", "precision", "items_per_prompt", "items_by_layer", "items_total",
              "tokens"}


def _replay(tmp_path, **flags) -> hr.HostReplay:
    cfg = load_config(flags={"paths.workspace": str(tmp_path / "user"), **LEXICAL, **flags})
    return hr.HostReplay(cfg, tmp_path / "work")


def _locomo(tmp_path, convs, **flags) -> dict:
    rp = _replay(tmp_path, **flags)
    try:
        return hr.locomo(convs, rp)
    finally:
        rp.close()


def _without_evidence(conv: lc.Conversation, dia_id: str) -> lc.Conversation:
    """The same conversation with one evidence turn saying something else."""
    conv = copy.deepcopy(conv)
    for s in conv.sessions:
        for t in s.turns:
            if t.dia_id == dia_id:
                t.text = "I spent the afternoon sorting old receipts."
    return conv


def test_locomo_scores_the_delivered_block_and_move_with_it(tmp_path):
    conv = lc.load(LOCOMO)[0]
    res = _locomo(tmp_path / "a", [conv], **{"retrieval.top_k": 1})
    rows = res["per_question"]
    assert len(rows) == 3 and res["ranking"]["excluded"] == 1  # "D9:1" names no turn: not asked
    violin = rows[0]
    assert violin["delivered_any"] == 1.0 and violin["items"] >= 1 and violin["tokens"] > 0
    # the evidence turn rewritten: the same question is no longer handed it, and precision falls
    gone = _locomo(tmp_path / "b", [_without_evidence(conv, "D1:1")], **{"retrieval.top_k": 1})
    assert gone["per_question"][0]["delivered_any"] == 0.0
    assert gone["per_question"][0]["evidence_items"] == 0 < violin["evidence_items"]
    assert gone["block"]["overall"]["precision"] < res["block"]["overall"]["precision"]
    # two evidence turns in two sessions: k 1 delivers at most one of them, k 4 may hold both
    assert rows[2]["delivered_all"] == 0.0
    wide = _locomo(tmp_path / "c", [conv], **{"retrieval.top_k": 8, "packing.token_budget": 2000})
    assert wide["per_question"][2]["delivered_all"] == 1.0
    assert wide["block"]["overall"]["items_per_prompt"] > res["block"]["overall"]["items_per_prompt"]


def test_questions_are_never_written_back(tmp_path):
    conv = lc.load(LOCOMO)[0]
    rp = _replay(tmp_path)
    try:
        base, keys = rp.lived("conv", hr.locomo_sessions(conv))
        lived = {e.content for e in Ledger(base / "memory").read().entries.values()}
        assert "Ann: I started learning the violin last week." in lived  # the replay went through the hooks
        assert len(keys) == sum(len(s.turns) for s in conv.sessions)  # every turn's entry found
        first = "Which zebra did Ann paint on the violin case?"
        blocks = []
        rp.ask_each(base, [(first, 1.7e9), ("Ann zebra violin case paint", 1.7e9 + 60)], keys,
                    lambda n, d: blocks.append(d.block))
        after = {e.content for e in Ledger(base / "memory").read().entries.values()}
        assert after == lived  # the base never saw a question
        assert "zebra" not in blocks[1]  # nor did the next question's copy
        assert "violin" in blocks[1]
    finally:
        rp.close()


def test_replay_runs_consolidation_and_the_global_layer(tmp_path):
    """Consolidation at each session's close (the daemon's batch, synchronously): facts are in the store
    before the questions, and a fact delivered counts through its source turns."""
    conv = lc.load(LOCOMO)[0]
    rp = _replay(tmp_path)
    try:
        base, keys = rp.lived("conv", hr.locomo_sessions(conv))
        assert list((base / "memory" / "semantic").glob("*.jsonl"))
        off = _replay(tmp_path / "off", **{"consolidation.enabled": False})
        try:
            base_off, _ = off.lived("conv", hr.locomo_sessions(conv))
            assert not list((base_off / "memory" / "semantic").glob("*.jsonl"))
        finally:
            off.close()
    finally:
        rp.close()


def test_longmemeval_session_evidence_delivered(tmp_path):
    questions = lme.load(LME)
    rp = _replay(tmp_path, **{"retrieval.top_k": 1})
    try:
        per_q, block = hr.longmemeval_question(questions[0], rp)
        assert block["delivered_any"] == 1.0 and block["evidence_items"] == 1  # the answer session's turn
        assert per_q["session"]["recall_any@1"] == 1.0
        # two answer sessions, one item: any but not all
        _, two = hr.longmemeval_question(questions[1], rp)
        assert two["delivered_any"] == 1.0 and two["delivered_all"] == 0.0
        q = copy.deepcopy(questions[0])
        for turn, text in zip(q.sessions[1].turns, ("I repotted the fern on the balcony.", "Ferns like shade.",
                                                    "It sits near the door.", "Water it weekly.")):
            turn["content"] = text  # the answer session no longer speaks of the cat
        _, gone = hr.longmemeval_question(q, rp)
        assert gone["delivered_any"] == 0.0 and gone["evidence_items"] == 0
    finally:
        rp.close()


def _cli(*args):
    proc = run_cli("eval", *args, "--no-embed", "--no-rerank", "--json", "-q")
    return json.loads(proc.stdout)


def test_cli_default_is_through_the_host_and_ranking_only_keeps_the_old_keys():
    doc = _cli("locomo", str(LOCOMO))
    assert set(doc) == {"memtier", "bm25", "host", "meta"}
    assert set(doc["memtier"]["overall"]) == {"recall@5", "recall@10", "recall@20"}  # today's keys, kept
    assert set(doc["host"]["overall"]) == BLOCK_KEYS and doc["host"]["overall"]["n"] == 3
    assert doc["meta"]["protocol"] == "host" and doc["meta"]["preset"] == "paper"  # the host's config
    old = _cli("locomo", "--ranking-only", str(LOCOMO))
    assert set(old) == {"memtier", "bm25", "meta"} and "protocol" not in old["meta"]
    assert old["meta"]["flags"] == {"preset": "hybrid"}
    doc = _cli("longmemeval", str(LME))
    assert set(doc) == {"memtier", "bm25", "host", "meta"} and set(doc["memtier"]) == {"strict", "noabs"}
    assert doc["host"]["strict"]["n"] == 2 and doc["host"]["strict"]["delivered_any"] == 1.0
    out = run_cli("eval", "locomo", str(LOCOMO), "--no-embed", "--no-rerank", "-q").stdout
    assert "Through the host" in out and "prec" in out


@pytest.mark.data
def test_real_dev_through_the_host(tmp_path):
    path = SHARED_DATA / "longmemeval_s_dev.json.gz"
    if not path.exists():
        pytest.skip(f"benchmark data not found at {path}: set MEMTIER_DATA to the folder holding it")
    doc = _cli("longmemeval", str(path), "--limit", "2")
    assert doc["meta"]["questions"] == 2 and doc["host"]["noabs"]["n"] == 2
