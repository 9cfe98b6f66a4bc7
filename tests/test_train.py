"""`memtier train`: episodes from traces, the reward's sign, the CLI end to end, LongMemEval on real data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import FIXTURES, SHARED_DATA, run_cli
from memtier_plugin.store import jsonl
from memtier_plugin import plugin
from memtier_plugin.host import Host, replay_session
from memtier_plugin.store.episodic import Ledger, append_lines, utc_iso
from memtier_plugin.learning.ppo import MARKER_KEY, read_learned_weights
from memtier_plugin.learning.rewards import TraceEpisode, choose_iterate, load_trace_episodes, trace_reward

W0 = np.array([0.0, 0.35, 0.25, 0.25, 0.15])
BAD = "Old wiki: restart the payments worker with payctl bounce on host pay-legacy-1."


# ---- the reward, by hand -------------------------------------------------------------------
def _sig(bm25, decay, cw=0.5):
    return [0.0, bm25, decay, cw, 0.0]


def test_trace_reward_signs():
    ok = TraceEpisode("r1", "a", True, ["h", "d"], np.array([_sig(0.5, 1.0), _sig(1.0, 0.5)]), {0})
    failed = TraceEpisode("r2", "a", False, ["bad", "good"], np.array([_sig(1.0, 0.5), _sig(0.5, 1.0)]), {0})
    reward = trace_reward([ok, failed])
    bm25_heavy, decay_heavy = np.array([0, 1.0, 0.1, 0, 0]), np.array([0, 0.1, 1.0, 0, 0])
    # succeeded run: leading with the entry it used is +1, leading with an unused one is -1
    assert reward(decay_heavy, 0) == 1.0 and reward(bm25_heavy, 0) == -1.0
    # failed run: leading with the entry behind the failure is -1, anything else +1
    assert reward(bm25_heavy, 1) == -1.0 and reward(decay_heavy, 1) == 1.0
    # ties go to the logged order
    assert reward(np.zeros(5), 0) == 1.0 and reward(np.zeros(5), 1) == -1.0


def test_choose_iterate_never_below_w0():
    from memtier_plugin.learning.ppo import TrainResult

    hist = [{"epoch": 0, "batch": b, "mu": list(W0 + d)} for b, d in enumerate((0.1, 0.2, 0.3))]
    res = TrainResult(weights_before=W0.copy(), weights_after=W0 + 0.3, sigma_after=np.zeros(5), history=hist)
    # the final iterate is the best: kept
    assert choose_iterate(res, lambda w: float(w[1]))["rule"] == "final iterate"
    # an earlier iterate scores higher: it is kept and named
    pick = choose_iterate(res, lambda w: -abs(float(w[1]) - 0.55))
    assert pick["rule"] == "best evaluated iterate (epoch 1 batch 2)" and pick["weights"][1] == pytest.approx(0.55)
    # every iterate is worse than w0: w0 is kept
    pick = choose_iterate(res, lambda w: -float(w[1]))
    assert pick["rule"].startswith("w0") and np.allclose(pick["weights"], W0)


# ---- episodes from a replayed scenario --------------------------------------------------------
def test_trace_episodes_from_replay(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.setenv("MEMTIER_WORKSPACE", str(ws))
    monkeypatch.setenv("MEMTIER_SCHEDULING__MODE", "retrieval")  # the recorded failing calls all run
    host = Host()
    host.register(plugin)
    for path in sorted((FIXTURES / "attribution").glob("*.jsonl")):
        replay_session(host, path, ws)
    episodes, stats = load_trace_episodes(ws / "memory")
    assert stats.runs == 5 and stats.with_outcome == 5  # the first run recalls nothing
    assert stats.episodes == len(episodes) >= 1 and stats.episodes + sum(stats.skipped.values()) == 5
    entries = Ledger(ws / "memory").read().entries
    bad_id = next(e.id for e in entries.values() if e.content == BAD)
    for ep in episodes:  # every episode is a failed run; it acted on the old-wiki entry (and the failed call it led to)
        assert ep.success is False
        acted = [ep.ids[i] for i in ep.acted_on]
        assert bad_id in acted and all(a == bad_id or "FAILED" in entries[a].content for a in acted)


# ---- a synthetic trace workspace with a learnable signal ---------------------------------------
def write_traces(ws: Path, n: int = 24, seed: int = 1) -> None:
    """Runs whose helpful entry is fresh but lexically weaker than a stale distractor (real record shapes)."""
    rng = np.random.default_rng(seed)
    root = ws / "memory"
    ts = 1_790_000_000.0
    for i in range(n):
        run, success = f"run-{i}", i % 3 != 0
        h = (f"h{i}", _sig(float(rng.uniform(0.55, 0.75)), 1.0))  # the entry the calls drew on
        d = (f"d{i}", _sig(1.0, float(rng.uniform(0.2, 0.6))))  # a stale, lexically strong distractor
        rows = [d, h] if i % 2 else [h, d]
        trace = {"v": 1, "kind": "trace", "timestamp": utc_iso(ts + i), "run_id": run, "agent_id": "main",
                 "session_id": f"s{i}", "query": "q", "mode": "two-stage", "stage1_sessions": [],
                 "delivered": [{"id": k, "score": 0.0, "tier": "episodic",
                                "signals": dict(zip(("sem", "bm25", "decay", "cw", "tier"), v))} for k, v in rows],
                 "left_out": [], "tokens": 10, "elapsed_ms": 1.0}
        # a succeeded run drew on the fresh entry; a failed one on the stale distractor
        blamed, delta = (h[0], 0.2) if success else (d[0], -0.2)
        end = {"v": 1, "kind": "run_end", "timestamp": utc_iso(ts + i), "run_id": run, "agent_id": "main",
               "session_id": f"s{i}", "success": success}
        append_lines(root / "traces" / "main" / "2026-09-21.jsonl", jsonl.dumps(trace) + jsonl.dumps(end), fsync=False)
        Ledger(root, fsync=False).add_update("main", {"kind": "cw_update", "entry_id": blamed, "delta": delta,
                                                      "run_id": run, "tool_call_id": f"c{i}", "overlap": 0.3})


def test_train_cli_from_traces(tmp_path):
    ws = tmp_path / "ws"
    write_traces(ws)
    proc = run_cli("-w", str(ws), "train", "--epochs", "6", "--batch-size", "8", "--seed", "3", "--json")
    rep = json.loads(proc.stdout)
    assert rep["source"] == "traces" and rep["items"] == 24 and rep["traces"]["episodes"] == 24
    assert rep["skipped_batches"] < rep["batches"]
    # leading with the fresh entry is what pays: decay gains on bm25, and the reward rises
    before, after = rep["weights_before"], rep["weights_after"]
    assert after["w_decay"] / max(after["w_bm25"], 1e-9) > before["w_decay"] / before["w_bm25"] + 0.2
    assert rep["mean_reward_after"] > rep["mean_reward_before"]
    assert rep["frozen"] == ["w_sem"] and after["w_sem"] == 0.0  # φsem was never logged
    out = Path(rep["out"])
    assert out == (ws / "memtier-learned-weights.yaml").resolve()
    doc = yaml.safe_load(out.read_text())
    assert doc[MARKER_KEY] == 1 and doc["meta"]["mean_reward_after"] == rep["mean_reward_after"]
    assert np.allclose(read_learned_weights(out), [after[k] for k in ("w_sem", "w_bm25", "w_decay", "w_cw", "w_tier")])
    # deterministic under the seed
    again = json.loads(run_cli("-w", str(ws), "train", "--epochs", "6", "--batch-size", "8", "--seed", "3",
                               "--json", "--out", str(tmp_path / "again.yaml")).stdout)
    assert again["weights_after"] == rep["weights_after"] and again["mean_reward_after"] == rep["mean_reward_after"]
    # a learned file is used by retrieval through weights.learned_file
    env = {"MEMTIER_WEIGHTS__LEARNED_FILE": str(out)}
    shown = run_cli("-w", str(ws), "config", "show", env=env, check=False)
    assert shown.returncode == 0 and str(out) in shown.stdout


def test_train_cli_table_progress_and_freeze(tmp_path):
    ws = tmp_path / "ws"
    write_traces(ws)
    proc = run_cli("-w", str(ws), "train", "--epochs", "2", "--batch-size", "8", "--freeze", "cw,tier")
    assert "training" in proc.stderr  # the progress bar goes to stderr
    out = proc.stdout
    assert "before (w0)" in out and "after (learned)" in out and "mean reward" in out
    assert "learned_file: " in out and "MEMTIER_WEIGHTS__LEARNED_FILE" in out
    vec = read_learned_weights(ws / "memtier-learned-weights.yaml")
    assert vec[3] == 0.25 and vec[4] == 0.15  # frozen weights stay at w0


def test_train_never_overwrites_config(tmp_path):
    ws = tmp_path / "ws"
    write_traces(ws)
    cfg = ws / "memtier.yaml"
    cfg.write_text("retrieval:\n  top_k: 2\n")
    proc = run_cli("-w", str(ws), "train", "--epochs", "1", "--out", str(cfg), check=False)
    assert proc.returncode == 2 and "memtier: error:" in proc.stderr
    assert cfg.read_text() == "retrieval:\n  top_k: 2\n"
    other = tmp_path / "notes.yaml"
    other.write_text("mine: true\n")
    proc = run_cli("-w", str(ws), "train", "--epochs", "1", "--out", str(other), check=False)
    assert proc.returncode == 2 and other.read_text() == "mine: true\n"


def test_train_without_episodes_says_why(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    proc = run_cli("-w", str(ws), "train", check=False)
    assert proc.returncode == 2 and "no training episodes" in proc.stderr


def test_zero_variance_is_reported(tmp_path):
    """Episodes whose ranking no weight vector can change: every batch skipped, weights unchanged, said so."""
    ws = tmp_path / "ws"
    write_traces(ws, n=4)
    # rewrite so the acted-on entry wins under every non-negative w (dominates on every signal)
    path = ws / "memory" / "traces" / "main" / "2026-09-21.jsonl"
    lines = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec["kind"] == "trace":
            for row in rec["delivered"]:
                row["signals"] = dict(zip(("sem", "bm25", "decay", "cw", "tier"),
                                          _sig(1.0, 1.0) if row["id"].startswith("h") else _sig(0.1, 0.1)))
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n")
    rep = json.loads(run_cli("-w", str(ws), "train", "--epochs", "2", "--batch-size", "2", "--json").stdout)
    assert rep["skipped_batches"] == rep["batches"] and rep["distance_from_w0"] == 0.0
    assert any("zero-variance" in n for n in rep["notes"])


# ---- LongMemEval (real data, when present) ---------------------------------------------------
LME = Path(os.environ.get("MEMTIER_DATA", SHARED_DATA)) / "longmemeval_s_dev.json.gz"


@pytest.mark.data
def test_train_longmemeval_limit_10(tmp_path):
    if not LME.exists():
        pytest.skip(f"{LME} not found")
    from memtier_plugin.evaluation.longmemeval import evaluate_longmemeval, included, load
    from memtier_plugin.evaluation.runner import LongMemEvalRanker, Options

    out = tmp_path / "w.yaml"
    rep = json.loads(run_cli("-w", str(tmp_path / "ws"), "train", "--longmemeval", str(LME), "--limit", "10",
                             "--no-embed", "--epochs", "1", "--out", str(out), "--json").stdout)
    assert rep["questions"] == 10 and rep["frozen"] == ["w_sem"]
    row = rep["session_recall_all@5"]["dev"]
    assert row["learned"] >= row["w0"]
    assert rep["mean_reward_before"] == pytest.approx(2 * row["w0"] - 1)
    # the trainer's recall with w0 is the official evaluation's
    qs = [q for q in load(LME) if included(q, "strict")][:10]
    official = evaluate_longmemeval(qs, LongMemEvalRanker(Options(), tmp_path / "eval"))
    assert official["strict"]["session"]["recall_all@5"] == pytest.approx(row["w0"])
