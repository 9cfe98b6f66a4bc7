"""One config, one choice: recall, `memtier eval` and `memtier train` get the same embedder, re-ranker and weights."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from conftest import FIXTURES
from memtier_plugin.recall.backends import choose, fusion_weights, learned_weights_path
from memtier_plugin.config import load_config
from memtier_plugin.errors import ConfigError
from memtier_plugin.store.episodic import Ledger
from memtier_plugin.learning.ppo import MARKER_KEY

NAMES = ("sem", "bm25", "decay", "cw", "tier")
LEARNED = [0.3, 0.5, 0.05, 0.1, 0.2]


def memtier(cwd, *args):
    """The real CLI in a subprocess, started from ``cwd``."""
    proc = subprocess.run([sys.executable, "-m", "memtier_plugin", *args], cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ), timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture
def configured(tmp_path):
    """A workspace whose memtier.yaml names the hashing embedder, a cross-encoder that was never fetched,
    and a learned-weights file by a path relative to the workspace."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "learned.yaml").write_text(yaml.safe_dump({MARKER_KEY: 1, "vector": LEARNED}))
    (ws / "memtier.yaml").write_text(yaml.safe_dump({
        "embeddings": {"backend": "hashing"},
        "rerank": {"backend": "cross-encoder", "model_dir": str(tmp_path / "no-models")},
        "weights": {"learned_file": "learned.yaml"}}))
    Ledger(ws / "memory").add(agent_id="main", session_id="s1", project="p", content="booked an aisle seat on the flight",
                              role="user", timestamp=1_790_000_000.0)
    elsewhere = tmp_path / "elsewhere"  # the current directory is never where the workspace is
    elsewhere.mkdir()
    return ws, elsewhere


def test_recall_eval_and_train_choose_the_same_backends_and_weights(configured, tmp_path):
    ws, cwd = configured
    missing_ce = str(tmp_path / "no-models" / "ms-marco-MiniLM-L-12-v2-int8")

    recall = memtier(cwd, "-w", str(ws), "--preset", "paper", "search", "aisle seat flight", "--json")
    hit = json.loads(recall.stdout)["hits"][0]
    assert [hit["signals"][n]["weight"] for n in NAMES] == LEARNED
    assert hit["signals"]["sem"]["value"] > 0  # φsem came from an embedder: the config's hashing one
    assert "rerank.backend cross-encoder" in recall.stderr and missing_ce in recall.stderr

    ev = memtier(cwd, "-w", str(ws), "--preset", "paper", "eval", "longmemeval", "--ranking-only",
                 str(FIXTURES / "eval" / "longmemeval_tiny.json"), "--json", "-q")
    meta = json.loads(ev.stdout)["meta"]
    assert [meta["weights"][n] for n in NAMES] == LEARNED
    assert meta["weights_file"] == str(ws / "learned.yaml")
    assert (meta["embedder"], meta["reranker"]) == ("hashing-512", None)
    assert "rerank.backend cross-encoder" in ev.stderr and missing_ce in ev.stderr

    tr = memtier(cwd, "-w", str(ws), "--preset", "paper", "train", "--longmemeval",
                 str(FIXTURES / "eval" / "longmemeval_paraphrase.json"), "--epochs", "1",
                 "--out", str(tmp_path / "out.yaml"), "--json")
    rep = json.loads(tr.stdout)
    assert [rep["weights_before"][f"w_{n}"] for n in NAMES] == LEARNED
    assert rep["weights_file"] == str(ws / "learned.yaml")
    assert (rep["embeddings"], rep["reranker"]) == ("hashing-512", None)
    assert any("rerank.backend cross-encoder" in n and missing_ce in n for n in rep["notes"])


def test_learned_file_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ws = tmp_path / "ws"
    cfg = load_config(flags={"paths.workspace": str(ws), "weights.learned_file": "sub/w.yaml"})
    assert learned_weights_path(cfg) == ws / "sub" / "w.yaml"
    assert learned_weights_path(load_config(flags={"weights.learned_file": "~/w.yaml"})) == tmp_path / "home" / "w.yaml"
    assert learned_weights_path(load_config()) is None
    assert fusion_weights(load_config(flags={"weights.sem": 0.5})) == ([0.5, 0.35, 0.25, 0.25, 0.15], None)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "w.yaml").write_text(yaml.safe_dump({MARKER_KEY: 1, "vector": LEARNED}))
    with pytest.raises(ConfigError, match=str(ws / "sub" / "w.yaml")):  # never the cwd's file of that name
        choose(cfg)


def test_asked_for_but_missing_is_an_error_and_off_is_off(tmp_path):
    from memtier_plugin.models.embedders import EmbeddingUnavailable
    from memtier_plugin.models.cross_encoder import RerankerUnavailable

    cfg = load_config(flags={"embeddings.backend": "bge-small", "embeddings.model_dir": str(tmp_path),
                             "rerank.backend": "cross-encoder", "rerank.model_dir": str(tmp_path)})
    quiet = choose(cfg)
    assert quiet.embedder is None and quiet.reranker is None and len(quiet.notes) == 2
    assert all("\n" not in n and str(tmp_path) in n for n in quiet.notes)
    with pytest.raises(EmbeddingUnavailable, match="memtier model setup --embedder"):
        choose(cfg, embed=True)
    with pytest.raises(RerankerUnavailable, match="memtier model setup --reranker"):
        choose(cfg, embed=False, rerank=True)
    off = choose(load_config(flags={"embeddings.backend": "hashing"}), embed=False, rerank=False)
    assert off.embedder is None and off.reranker is None and off.notes == []
    on = choose(load_config(flags={"embeddings.backend": "hashing"}))
    assert on.embedder_name == "hashing-512" and on.notes == []


def test_a_lexical_recall_loads_no_model_module(workspace):
    import subprocess
    import sys

    code = ("import sys\nfrom memtier_plugin.config import load_config\nfrom memtier_plugin.recall.retriever import Retriever\n"
            "Retriever(load_config()).recall('x', agent_id='a', project=None, agents=None, record_trace=False)\n"
            "print(' '.join(m for m in sys.modules if m.startswith('memtier_plugin')))")
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                timeout=60, env=dict(os.environ)).stdout.split())
    assert "memtier_plugin.recall.retriever" in loaded
    assert not {"memtier_plugin.models.embedders", "memtier_plugin.recall.rerank", "memtier_plugin.models.cross_encoder", "memtier_plugin.learning.ppo"} & loaded
