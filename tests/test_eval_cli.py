"""`memtier eval` on the tiny hand-made fixtures: JSON shape, memtier vs BM25, ablation rows, errors.

Unit tests run with --no-embed (fast, no extra needed). The real dev split is
only touched by the `data`-marked test (--limit 5)."""

import gzip
import json
import os

import pytest
from click.testing import CliRunner

from conftest import FIXTURES, SHARED_DATA, run_cli
from memtier_plugin.cli import cli
from memtier_plugin.evaluation.locomo import CATEGORIES
from memtier_plugin.evaluation.report import flatten

EVAL = FIXTURES / "eval"
LME_TINY = EVAL / "longmemeval_tiny.json"
LME_PARAPHRASE = EVAL / "longmemeval_paraphrase.json"  # needs stemming + stop words; BM25 (space split) cannot
LOCOMO_TINY = EVAL / "locomo_tiny.json"
LME_METRICS = {f"{m}@{k}" for m in ("recall_any", "recall_all", "ndcg_any") for k in (1, 3, 5, 10, 30, 50)}


def _json(*args):
    proc = run_cli("eval", *args, "--json")
    return json.loads(proc.stdout), proc.stderr


def _assert_lme_shape(doc):
    assert set(doc) == {"memtier", "bm25", "meta"}
    for system in ("memtier", "bm25"):
        assert set(doc[system]) == {"strict", "noabs"}
        for averaging in ("strict", "noabs"):
            assert set(doc[system][averaging]) == {"session", "turn"}
            for level in ("session", "turn"):
                scores = doc[system][averaging][level]
                assert set(scores) == LME_METRICS
                assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in scores.values())


def test_longmemeval_json_shape():
    doc, stderr = _json("longmemeval", "--ranking-only", str(LME_TINY), "--no-embed")
    _assert_lme_shape(doc)
    meta = doc["meta"]
    assert (meta["questions"], meta["strict_n"], meta["noabs_n"]) == (3, 1, 2)
    assert meta["embeddings"] is False and meta["flags"] == {"preset": "hybrid"}  # the default preset
    assert set(meta["tokens"]) >= {"mean", "p95"} and set(meta["seconds"]) >= {"mean", "p95"}
    assert "multi-session" in meta["memtier"]["strict"]["by_type"]
    assert "memtier" in stderr and "3/3" in stderr  # progress goes to stderr, never into the JSON


def test_longmemeval_reads_gz_and_limit(tmp_path):
    gz = tmp_path / "tiny.json.gz"
    gz.write_bytes(gzip.compress(LME_TINY.read_bytes()))
    doc, _ = _json("longmemeval", "--ranking-only", str(gz), "--no-embed", "--limit", "2", "-q")
    _assert_lme_shape(doc)
    assert doc["meta"]["questions"] == 2


def test_memtier_beats_bm25_on_paraphrase_fixture():
    """Gold turns share no space-split token with the question ("Guitars" vs "guitars", "Sister" vs
    "sisters") while distractors share "Which/did/I/Where/do": memtier's tokeniser (case, stemming,
    stop words) must rank the gold first; plain BM25 cannot."""
    doc, _ = _json("longmemeval", "--ranking-only", str(LME_PARAPHRASE), "--no-embed", "-q")
    mem, base = flatten(doc["memtier"]), flatten(doc["bm25"])
    assert all(mem[k] >= base[k] for k in base), {k: (mem[k], base[k]) for k in base if mem[k] < base[k]}
    assert mem["strict.session.recall_any@1"] == 1.0 > base["strict.session.recall_any@1"]
    assert mem["strict.turn.recall_all@3"] == 1.0 > base["strict.turn.recall_all@3"]


def test_longmemeval_table_is_readable():
    out = run_cli("eval", "longmemeval", "--ranking-only", str(LME_PARAPHRASE), "--no-embed", "-q").stdout
    for needle in ("session recall_all", "turn ndcg_any", "memtier", "bm25", "noabs", "per question type",
                   "delivered tokens per question", "time per question", "p95", "target"):
        assert needle in out, needle
    assert not out.lstrip().startswith("{")


def test_set_overrides_reach_memtier_and_bad_key_is_one_line():
    doc, _ = _json("longmemeval", "--ranking-only", str(LME_TINY), "--no-embed", "-q", "--set", "retrieval.top_k=1",
                   "--set", "weights.decay=0")
    assert doc["meta"]["flags"] == {"preset": "hybrid", "retrieval.top_k": 1, "weights.decay": 0}
    assert doc["meta"]["top_k"] == 1
    proc = run_cli("eval", "longmemeval", "--ranking-only", str(LME_TINY), "--no-embed", "--set", "retrieval.topk=1", check=False)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "retrieval.topk" in proc.stderr and "Traceback" not in proc.stderr


def test_locomo_json_shape():
    doc, _ = _json("locomo", "--ranking-only", str(LOCOMO_TINY), "--no-embed", "-q")
    assert set(doc) == {"memtier", "bm25", "meta"}
    for system in ("memtier", "bm25"):
        assert set(doc[system]) == {"overall", *CATEGORIES.values()}  # the fixture has one question per category
        for group in doc[system].values():
            assert set(group) == {"recall@5", "recall@10", "recall@20"}
            assert all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in group.values())
    assert doc["meta"]["questions"] == 5 and doc["meta"]["excluded"] == 1  # "D:11:26" matches no turn
    assert doc["memtier"]["overall"]["recall@10"] >= doc["bm25"]["overall"]["recall@10"]


def test_locomo_table():
    out = run_cli("eval", "locomo", "--ranking-only", str(LOCOMO_TINY), "--no-embed", "-q").stdout
    for needle in ("overall", "multi-hop", "adversarial", "@10", "bm25", "target"):
        assert needle in out


def test_ablation_rows_present():
    doc, stderr = _json("ablations", "longmemeval", str(LME_PARAPHRASE), "--no-embed")
    names = [r["name"] for r in doc["rows"]]
    assert names == ["full", "- sem (w=0)", "- bm25 (w=0)", "- decay (w=0)", "- cw (w=0)", "- tier (w=0)",
                     "two-stage off"]
    assert doc["rows"][1]["skipped"]  # no φsem to remove without embeddings
    for row in doc["rows"]:
        if not row.get("skipped"):
            assert set(row["strict"]) == {"session", "turn"} and set(row["strict"]["session"]) == LME_METRICS
    assert doc["rows"][-1]["flags"] == {"preset": "hybrid", "retrieval.two_stage": False}
    packing = {r["name"]: r for r in doc["packing"]}
    assert list(packing) == ["k=1", "k=2", "k=4", "k=8", "budget=150", "budget=300", "budget=600"]
    assert [packing[f"k={k}"]["top_k"] for k in (1, 2, 4, 8)] == [1, 2, 4, 8]
    assert [packing[f"budget={b}"]["token_budget"] for b in (150, 300, 600)] == [150, 300, 600]
    # more room never delivers fewer tokens or less gold, on the same ranking
    for a, b in (("k=1", "k=2"), ("k=2", "k=4"), ("k=4", "k=8"), ("budget=150", "budget=300"),
                 ("budget=300", "budget=600")):
        assert packing[a]["tokens"]["mean"] <= packing[b]["tokens"]["mean"]
        assert packing[a]["gold_session_any"] <= packing[b]["gold_session_any"]
    assert packing["k=8"]["gold_session_all"] == 1.0  # both questions' gold fit in 8 entries
    assert packing["k=1"]["gold_session_all"] < 1.0  # p2 has two gold sessions: one entry cannot hold both
    assert "two-stage off" in stderr


def test_ablation_table():
    out = run_cli("eval", "ablations", "longmemeval", str(LME_PARAPHRASE), "--no-embed", "-q").stdout
    for needle in ("full", "- bm25 (w=0)", "two-stage off", "k=8", "budget=600", "gold session delivered"):
        assert needle in out


@pytest.mark.parametrize("cmd", [("longmemeval",), ("locomo",), ("ablations", "longmemeval")])
def test_bad_path_is_one_line_naming_it(tmp_path, cmd):
    missing = tmp_path / "nope.json.gz"
    proc = run_cli("eval", *cmd, str(missing), "--no-embed", check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    where = os.environ.get("MEMTIER_DATA") or "../shared/data"  # the hint names the data folder in use
    assert str(missing) in proc.stderr and where in proc.stderr and "MEMTIER_DATA" in proc.stderr


def test_directory_path_finds_the_dev_file(tmp_path):
    (tmp_path / "longmemeval_s_dev.json.gz").write_bytes(gzip.compress(LME_TINY.read_bytes()))
    doc, _ = _json("longmemeval", "--ranking-only", str(tmp_path), "--no-embed", "-q")
    assert doc["meta"]["path"].endswith("longmemeval_s_dev.json.gz")


def test_default_without_models_notes_and_runs_lexical(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMTIER_MODELS_DIR", str(tmp_path / "no-models"))
    res = CliRunner().invoke(cli, ["eval", "longmemeval", "--ranking-only", str(LME_TINY), "--json", "-q"])
    assert res.exit_code == 0, res.output
    # one line for the embedder, one for the cross-encoder, each naming its setup command
    assert res.stderr.count("\n") == 2 and "memtier model setup --embedder" in res.stderr
    assert "memtier model setup --reranker" in res.stderr
    doc = json.loads(res.stdout)
    assert doc["meta"]["embeddings"] is False and "weights.sem" not in doc["meta"]["flags"]


def _bge_missing():
    from memtier_plugin.models.embedders import OnnxBGE

    return not OnnxBGE().available()


@pytest.mark.embed
@pytest.mark.skipif(_bge_missing(), reason="bge-small unavailable: memtier model setup --embedder")
def test_embed_default_is_hybrid(tmp_path):
    doc, _ = _json("longmemeval", "--ranking-only", str(LME_PARAPHRASE), "-q", "--cache", str(tmp_path / "vec"))
    assert doc["meta"]["embeddings"] is True and doc["meta"]["flags"] == {"preset": "hybrid"}
    assert any((tmp_path / "vec").iterdir())  # vectors kept where --cache says
    _assert_lme_shape(doc)


@pytest.mark.data
def test_real_dev_limit_5(tmp_path):
    path = SHARED_DATA / "longmemeval_s_dev.json.gz"
    if not path.exists():
        pytest.skip(f"benchmark data not found at {path}: set MEMTIER_DATA to the folder holding it")
    # the shape on real data, lexically: the full hybrid runs are .ci/bench's (re-ranking 200 a question is minutes)
    doc, _ = _json("longmemeval", "--ranking-only", str(path), "--limit", "5", "--no-embed", "--no-rerank", "-q")
    _assert_lme_shape(doc)
    assert doc["meta"]["questions"] == 5
    loc = SHARED_DATA / "locomo_dev.json"
    doc, _ = _json("locomo", "--ranking-only", str(loc), "--limit", "1", "--no-embed", "--no-rerank", "-q")
    assert doc["memtier"]["overall"]["recall@10"] > 0


def test_max_minutes_scores_the_questions_done():
    doc, _ = _json("longmemeval", "--ranking-only", str(LME_TINY), "--no-embed", "-q", "--max-minutes", "0.00001")
    _assert_lme_shape(doc)
    assert (doc["meta"]["questions"], doc["meta"]["planned"]) == (1, 3)  # always at least one question
    out = run_cli("eval", "longmemeval", "--ranking-only", str(LME_TINY), "--no-embed", "-q", "--max-minutes", "0.00001").stdout
    assert "STOPPED at --max-minutes after 1 of 3" in out


def test_preset_reaches_memtier_and_no_embed_keeps_it_lexical():
    """`--preset hybrid` names bge-small; --no-embed must still run without it (the flags are only what was asked:
    the CLI hands its one embedder, re-ranker and cache to every question's retriever)."""
    proc = run_cli("--preset", "hybrid", "eval", "longmemeval", "--ranking-only", str(LME_TINY), "--no-embed", "--json", "-q")
    meta = json.loads(proc.stdout)["meta"]
    assert meta["embeddings"] is False and meta["mode"].startswith("lexical")
    assert meta["flags"] == {"preset": "hybrid"}
