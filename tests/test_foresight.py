"""Issue 14: Foresight (predicted queries prepared in the background), the memory tools through the host,
joint delivery, and the fast path's re-ranking budget, logit cache and embedding at write time."""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from conftest import FIXTURES, run_cli
from memtier_plugin import plugin
from memtier_plugin.store import traces
from memtier_plugin.config import ForesightConfig, load_config
from memtier_plugin.errors import ConfigError
from memtier_plugin.events import AgentEndEvent, HookContext, PromptEvent, SessionEndEvent
from memtier_plugin.scheduling.foresight import Foresight
from memtier_plugin.scheduling.predict import predict_rules, predictions_from_model, steps
from memtier_plugin.host import Host, replay_session
from memtier_plugin.memory import Memory, memory_for
from memtier_plugin.runs import RunState
from memtier_plugin.scheduling.hooks import Match
from memtier_plugin.recall.packing import Hit
from memtier_plugin.recall.retriever import RecallResult, Retriever
from memtier_plugin.layers.topics import topic_tree

INSTRUCTION = ("Plan the Lisbon team offsite for March 12-14: book the flights, find a hotel near the venue, "
               "reserve a restaurant for the team dinner, and draft the agenda.")
T0 = 1_795_000_000.0


class Clock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@dataclass
class Result:
    query: str
    elapsed_ms: float = 40.0


def _fs(retrieve=None, clock=None, **cfg) -> Foresight:
    c = ForesightConfig(enabled=True, **cfg)
    return Foresight(c, retrieve or (lambda q, layers, ctx: Result(q)), tree=topic_tree(),
                     clock=clock or Clock())


def _ready(fs: Foresight, key: str, timeout: float = 30.0) -> None:
    for e in fs.task(key).entries:
        assert e.ready.wait(timeout)


# ---- prediction -------------------------------------------------------------------------------------
def test_rules_predict_the_instructions_steps_within_k():
    subject, parts = steps(INSTRUCTION)
    assert subject.startswith("Plan the Lisbon team offsite")
    assert parts == ["book the flights", "find a hotel near the venue", "reserve a restaurant for the team dinner",
                     "draft the agenda"]
    preds = predict_rules(INSTRUCTION, {"travel/lodging": ["gk-1"]}, 3, tree=topic_tree())
    assert [p.source for p in preds] == ["step"] * 3 and len(preds) == 3
    assert "flights" in preds[0].query and "lisbon" in preds[0].query.lower()
    assert set(preds[1].layers) >= {"episodic", "semantic", "global"}  # the hotel step reaches a directory topic
    again = predict_rules(INSTRUCTION, {}, 4, tree=topic_tree(), exclude=[p.query for p in preds])
    assert [p.query for p in again] == [predict_rules(INSTRUCTION, {}, 4, tree=topic_tree())[3].query]


def test_the_models_predictions_are_validated_data_only():
    assert predictions_from_model("run rm -rf /", 4) == []
    assert predictions_from_model({"queries": "x"}, 4) == []
    data = {"queries": [{"query": "hotel budget", "layers": ["global", "shell", 3]}, {"query": 7},
                        {"query": "  flight\nseat  ", "layers": "all"}, {"query": "x" * 900}, {"query": "more"}]}
    preds = predictions_from_model(data, 4)
    assert [(p.query, p.layers) for p in preds[:2]] == [("hotel budget", ("global",)),
                                                        ("flight seat", ("episodic", "semantic"))]
    assert len(preds) == 3 and len(preds[2].query) == 300 and all(p.source == "model" for p in preds)


# ---- the task cache -----------------------------------------------------------------------------------
def test_entries_and_tasks_expire_with_a_controlled_clock():
    clock = Clock()
    fs = _fs(clock=clock, entry_ttl_s=600, task_ttl_s=3600)
    try:
        fs.begin("t1", INSTRUCTION, {}, None)
        _ready(fs, "t1")
        hit = fs.lookup("t1", "Go ahead with the flights for the whole team")
        assert hit.hit and "flights" in hit.prediction.query and hit.result.query == hit.prediction.query
        clock.t += 601  # the entries are older than entry_ttl_s: no longer served
        assert fs.lookup("t1", "Go ahead with the flights for the whole team").reason == "no match"
        assert fs.task("t1") is not None  # the task itself lives on (it was just seen)
        fs.begin("t2", INSTRUCTION, {}, None)
        _ready(fs, "t2")
        clock.t += 500
        assert fs.lookup("t2", "find a hotel near the venue").hit  # t2's entries are 500 s old
        clock.t += 2900  # t1 idle 3,400 s: alive
        assert fs.task("t1") is not None
        clock.t += 300  # t1 idle 3,700 s > task_ttl_s; t2 idle 3,200 s
        assert fs.task("t1") is None and fs.task("t2") is not None
        assert fs.lookup("t1", "find a hotel").reason == "no task"
    finally:
        assert fs.close()


def test_a_miss_is_no_match_and_the_wait_is_bounded_when_the_worker_is_blocked():
    gate, started = threading.Event(), threading.Event()

    def blocked(q, layers, ctx):
        started.set()
        gate.wait(30)
        return Result(q)

    fs = _fs(blocked, wait_ms=20)
    try:
        fs.begin("t", INSTRUCTION, {}, None)
        assert started.wait(10)
        assert fs.lookup("t", "Send the plan to the team").reason == "no match"
        late = fs.lookup("t", "Go ahead with the flights for the whole team")
        assert late.reason == "late" and not late.hit and not gate.is_set()  # returned while the worker is stuck
    finally:
        gate.set()
        assert fs.close()
    assert not fs.running


def test_a_full_queue_drops_preparations_instead_of_blocking():
    gate = threading.Event()
    fs = _fs(lambda q, layers, ctx: gate.wait(30) and Result(q), queue_size=1, k=4)
    try:
        preds = fs.begin("t", INSTRUCTION, {}, None)
        assert len(preds) == 4
        assert fs.stats.dropped >= 2  # one in the worker, one queued, the rest dropped: begin() returned
    finally:
        gate.set()
        assert fs.close()


def test_refill_predicts_with_the_budget_left_only_when_the_directory_changes():
    fs = _fs(k=4)
    try:
        fs.begin("t", "Plan the Lisbon offsite: book the flights, find a hotel", {}, None)
        assert len(fs.task("t").entries) == 2 and fs.task("t").budget == 2
        assert fs.refill("t", {}, None) == []  # unchanged directory
        more = fs.refill("t", {"travel/lodging": ["gk-1"]}, None)
        assert len(more) == 1 and more[0].source == "topic" and fs.task("t").budget == 1
        _ready(fs, "t")
        assert len(fs.task("t").entries) == 3 and all(e.result is not None for e in fs.task("t").entries)
    finally:
        assert fs.close()


# ---- through the Memory and the host ------------------------------------------------------------------------
def _config(ws: Path, **extra):
    flags = {"paths.workspace": str(ws), "standing.embedder": "none", "foresight.enabled": True,
             "foresight.wait_ms": 10_000.0, **extra}
    return load_config(flags=flags, use_env=False)


def _history(ws: Path) -> None:
    host = Host()
    host.register(plugin, "memtier")
    for path in sorted((FIXTURES / "foresight" / "history").glob("*.jsonl")):
        replay_session(host, path, ws)


def _ctx(ws, session="task-1", run="task-1-r1"):
    return HookContext(agent_id="planner", session_id=session, run_id=run, project="offsite", workspace_dir=str(ws))


def test_a_hit_is_served_from_the_cache_and_a_miss_is_retrieved_normally(workspace):
    _history(workspace)
    mem = Memory(_config(workspace))
    ctx = _ctx(workspace)
    try:
        first, access = mem.recall_for(INSTRUCTION, ctx, T0)
        assert access.reason == "task start" and first.hits
        _ready(mem.foresight, "task-1")
        result, access = mem.recall_for("Next, find a hotel near the offsite venue.", ctx, T0 + 60)
        assert access.hit and "hotel" in access.prediction.query
        prepared = next(e.result for e in mem.foresight.task("task-1").entries if e.prediction == access.prediction)
        assert result is prepared and any("180 euros" in h.content for h in result.hits)
        query = "Send the plan to the team."
        result, access = mem.recall_for(query, ctx, T0 + 120)
        assert access.reason == "no match"
        assert [h.id for h in result.hits] == [h.id for h in mem.recall(query, ctx, T0 + 120, record_trace=False).hits]
        rows = [r for r in traces.iter_traces(mem.config.memory_root, ["planner"]) if r.get("kind") == "foresight"]
        assert [r["outcome"] for r in rows] == ["task start", "hit", "no match"]
        assert rows[1]["wait_saved_ms"] >= 0 and rows[1]["tokens"] == prepared.tokens
        served = [r for r in traces.iter_traces(mem.config.memory_root, ["planner"])
                  if r.get("kind") == "trace" and r["mode"].startswith("foresight")]
        assert len(served) == 1 and served[0]["query"] == "Next, find a hotel near the offsite venue."
    finally:
        mem.close()


def test_a_slow_background_retrieval_never_delays_a_hook(workspace):
    _history(workspace)
    mem = Memory(_config(workspace, **{"foresight.wait_ms": 30.0}))
    ctx = _ctx(workspace)
    gate, started = threading.Event(), threading.Event()
    fs = mem.foresight
    normal = fs.retrieve

    def slow(query, layers, job):
        started.set()
        gate.wait(60)
        return normal(query, layers, job)

    fs.retrieve = slow
    try:
        mem.on_prompt(PromptEvent(INSTRUCTION, timestamp=T0), ctx)
        assert started.wait(10)
        prompt = "Go ahead with the flights for the whole team to Lisbon."
        expected = mem.recall(prompt, ctx, T0 + 30, record_trace=False)
        addition = mem.on_prompt(PromptEvent(prompt, timestamp=T0 + 30), ctx)
        assert not gate.is_set()  # the hook answered while the background retrieval was still stuck
        assert all(h.id in addition.prepend_context for h in expected.hits)
        rows = [r for r in traces.iter_traces(mem.config.memory_root, ["planner"]) if r.get("kind") == "foresight"]
        assert rows[-1]["outcome"] == "late"
    finally:
        gate.set()
        mem.close()
    assert not fs.running


def test_the_retriever_reranks_outside_its_lock(workspace):
    """A re-ranking stuck in another thread (Foresight's) never holds the index lock a hook needs."""
    _history(workspace)
    gate, inside = threading.Event(), threading.Event()

    class Reranker:
        def score(self, query, texts):
            if query.startswith("slow"):
                inside.set()
                gate.wait(60)
            return np.arange(len(texts), dtype=np.float32)

    cfg = load_config(flags={"paths.workspace": str(workspace), "rerank.top_n": 10}, use_env=False)
    r = Retriever(cfg)
    r.set_reranker(Reranker())
    done = []
    t = threading.Thread(target=lambda: done.append(r.recall("slow hotel venue gym", agent_id="planner",
                                                             project="offsite", agents=["planner"])))
    t.start()
    try:
        assert inside.wait(10)
        fast = r.recall("hotel walking distance gym", agent_id="planner", project="offsite", agents=["planner"])
        assert fast.hits and not done  # answered while the other recall is inside the model
    finally:
        gate.set()
        t.join(30)
    assert done and not t.is_alive()


def test_session_end_leaves_no_thread_running(workspace):
    (workspace / "memtier.yaml").write_text("foresight:\n  enabled: true\nstanding:\n  embedder: none\n")
    _history(workspace)
    host = Host()
    host.register(plugin, "memtier")
    ctx = _ctx(workspace)
    host.before_prompt_build(PromptEvent(INSTRUCTION, timestamp=T0), ctx)
    mem = memory_for(ctx)
    assert mem.foresight.running
    host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": "On it."}], success=True,
                                 timestamp=T0 + 5), ctx)
    host.session_end(SessionEndEvent("done", timestamp=T0 + 9), ctx)
    assert not mem.foresight.running
    assert not [t for t in threading.enumerate() if t.name == "memtier-foresight" and t.is_alive()]


def test_memory_search_and_memory_get_through_the_host(workspace):
    (workspace / "memtier.yaml").write_text("foresight:\n  enabled: true\n  wait_ms: 10000\nstanding:\n"
                                            "  embedder: none\n")
    _history(workspace)
    host = Host()
    host.register(plugin, "memtier")
    ctx = _ctx(workspace)
    host.before_prompt_build(PromptEvent(INSTRUCTION, timestamp=T0), ctx)
    _ready(memory_for(ctx).foresight, "task-1")
    found = host.memory_tool("memory_search", {"query": "team dinner dietary restrictions allergies vegan"}, ctx)
    assert found["served"] == "foresight" and any("allergic to nuts" in h["content"] for h in found["hits"])
    cold = host.memory_tool("memory_search", {"query": "which corporate card", "limit": 1}, ctx)
    assert cold["served"] == "retrieval" and len(cold["hits"]) <= 1
    hit = next(h for h in found["hits"] if h["tier"] == "episodic")
    got = host.memory_tool("memory_get", {"id": hit["id"]}, ctx)
    assert got["found"] and got["content"] == hit["content"]
    assert host.memory_tool("memory_get", {"path": hit["id"]}, ctx)["found"]
    other = HookContext(agent_id="someone-else", session_id="s", project="offsite", workspace_dir=str(workspace))
    assert host.memory_tool("memory_get", {"id": hit["id"]}, other) == {"found": False, "id": hit["id"]}
    assert "must be a non-empty string" in host.memory_tool("memory_search", {"query": ""}, ctx)["error"]
    assert "unknown memory tool" in host.memory_tool("memory_delete", {}, ctx)["error"]
    memory_for(ctx).close()


# ---- joint delivery ---------------------------------------------------------------------------------------
def _hit(i: int, text: str) -> Hit:
    return Hit(id=f"ep-{i}", content=text, timestamp="2026-11-01T00:00:00Z", session_id="s", agent_id="planner",
               role="user", tier="episodic", score=1.0 - i / 100)


def test_joint_delivery_merges_hooks_and_foresight_deduplicated_within_the_budget(workspace):
    mem = Memory(_config(workspace, **{"foresight.delivery": "joint", "hooks.max_entries": 6}))
    matches = [Match("Use the corporate card ending 4417.", "ep-1", ("file:h1",), "file"),
               Match("Never land after 10pm.", "", ("file:h2",), "file")]
    hits = [_hit(1, "Use the corporate card ending 4417."), _hit(2, "never   land after 10PM."),
            _hit(3, "Hotels under 180 euros."), _hit(4, "Aisle seat."), _hit(5, "Gym required."),
            _hit(6, "Vegan options."), _hit(7, "Retrospective slot.")]
    result = RecallResult("q", hits, [], 50, "m", [], 1.0)
    state = RunState("r")
    block = mem._joint(result, matches, state).prepend_context
    lines = [ln for ln in block.splitlines() if ln.startswith("- [")]
    assert len(lines) == 6  # the shared cap
    assert sum("4417" in ln for ln in lines) == 1 and sum("10pm" in ln.lower() for ln in lines) == 1
    assert lines[0].startswith("- [h1 | ep-1]") and "ep-3" in block and "ep-7" not in block
    assert [r["id"] for r in state.delivered] == ["ep-3", "ep-4", "ep-5", "ep-6"]
    small = Memory(_config(workspace, **{"foresight.delivery": "joint", "hooks.max_chars": 120}))
    block = small._joint(result, matches, RunState("r")).prepend_context
    assert sum(len(ln) for ln in block.splitlines() if ln.startswith("- [")) <= 120


# ---- config ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,key", [
    ("foresight:\n  k: 0\n", "foresight.k"),
    ("foresight:\n  delivery: both\n", "foresight.delivery"),
    ("foresight:\n  entry_ttl_s: -1\n", "foresight.entry_ttl_s"),
    ("foresight:\n  enabled: maybe\n", "foresight.enabled"),
    ("foresight:\n  match_threshold: 2\n", "foresight.match_threshold"),
    ("foresight:\n  predictor: oracle\n", "foresight.predictor"),
    ("foresight:\n  lookahead: 3\n", "foresight.lookahead"),
    ("rerank:\n  budget_ms: -5\n", "rerank.budget_ms"),
    ("rerank:\n  cache_size: 1.5\n", "rerank.cache_size"),
])
def test_config_errors_name_the_key(tmp_path, text, key):
    path = tmp_path / "memtier.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(path, use_env=False)


def test_foresight_is_off_by_default_and_prompts_take_the_normal_path(workspace):
    cfg = load_config(flags={"paths.workspace": str(workspace)}, use_env=False)
    assert not cfg.foresight.enabled and cfg.rerank.budget_ms == 0 and cfg.rerank.cache_size == 0
    mem = Memory(cfg)
    assert mem.foresight is None
    _result, access = mem.recall_for("anything at all", _ctx(workspace))
    assert access is None and not [t for t in threading.enumerate() if t.name == "memtier-foresight"]


# ---- the fast path -----------------------------------------------------------------------------------------
class CountingReranker:
    def __init__(self):
        self.calls = []

    def score(self, query, texts):
        self.calls.append(len(texts))
        return np.array([float(len(t)) for t in texts])


def _retriever(ws: Path, n: int, **flags) -> Retriever:
    from memtier_plugin.store.episodic import Ledger

    led = Ledger(ws / "memory")
    for i in range(n):
        led.write_entry(agent_id="a", session_id=f"s{i // 10}", project="p", content=f"hotel note {i} " + "x" * (i % 7),
                        role="user", timestamp=T0 + i)
    return Retriever(load_config(flags={"paths.workspace": str(ws), **flags}, use_env=False))


def test_a_rerank_budget_scores_a_prefix_of_the_head_and_the_logit_cache_spares_the_model(workspace):
    r = _retriever(workspace, 60, **{"rerank.top_n": 50, "rerank.budget_ms": 1e-9, "rerank.cache_size": 1000})
    model = CountingReranker()
    r.set_reranker(model)
    r.recall("hotel note", agent_id="a", project="p", agents=["a"])
    assert model.calls == [1]  # the first call ever measures the model on one pair; then the budget is spent
    r.recall("hotel note", agent_id="a", project="p", agents=["a"])
    assert model.calls == [1]  # that pair again: from the cache; not one more pair fits
    free = _retriever(workspace, 0, **{"rerank.top_n": 50})
    free.set_reranker(model)
    free.recall("hotel note", agent_id="a", project="p", agents=["a"])
    assert model.calls[-1] == 50  # no budget: the whole head in one call, as before


@pytest.mark.parametrize("background", [0, -1])
def test_background_preparations_rerank_within_their_own_budget(workspace, background):
    """rerank.background_budget_ms: Foresight's thread may re-rank the whole head while a prompt keeps its
    budget (0); -1 gives the thread the prompt's budget."""
    (workspace / "memtier.yaml").write_text(
        "foresight:\n  enabled: true\nstanding:\n  embedder: none\nrerank:\n  top_n: 40\n"
        f"  budget_ms: 0.000001\n  background_budget_ms: {background}\n")
    _history(workspace)
    from memtier_plugin.store.episodic import Ledger

    for i in range(60):  # a head deeper than one batch for every step
        Ledger(workspace / "memory").write_entry(agent_id="planner", session_id=f"old-{i // 10}", project="offsite",
                                                 content=f"note {i}: flights hotel restaurant dinner agenda",
                                                 role="user", timestamp=T0 - 10_000 + i)
    ctx = _ctx(workspace)
    mem = memory_for(ctx)
    calls: list[tuple[str, int]] = []

    class Reranker:
        def score(self, query, texts):
            calls.append((threading.current_thread().name, len(texts)))
            return np.arange(len(texts), dtype=np.float32)

    mem.retriever.set_reranker(Reranker())
    host = Host()
    host.register(plugin, "memtier")
    try:
        host.before_prompt_build(PromptEvent(INSTRUCTION, timestamp=T0), ctx)
        _ready(mem.foresight, "task-1")
        host.before_prompt_build(PromptEvent("Which corporate card did we switch to?", timestamp=T0 + 60), ctx)
    finally:
        mem.close()
    fg = [n for name, n in calls if name != "memtier-foresight"]
    bg = [n for name, n in calls if name == "memtier-foresight"]
    assert fg and max(fg) <= 1  # the prompt: one pair measures the model, then the budget is spent
    if background == 0:
        assert sum(bg) > 4 * 16 and max(bg) <= 8  # every prediction's whole head, in short background calls
    else:
        assert max(bg, default=0) <= 1  # the prompt's budget


def _count_lookups(cache, calls: list) -> None:
    """Record the size of every lookup of entry vectors in ``cache`` (the retriever's only way to them)."""
    original = cache.get_mixed
    cache.get_mixed = lambda items, weight, **kw: calls.append(len(items)) or original(items, weight, **kw)


def test_entries_are_embedded_when_written_not_at_query_time(workspace):
    r = _retriever(workspace, 30, **{"embeddings.backend": "hashing", "weights.sem": 1.0})
    assert r.embedder is not None and r.embed_pending() == 30
    from memtier_plugin.store.episodic import Ledger

    rec, path, off = Ledger(workspace / "memory").write_entry(agent_id="a", session_id="s9", project="p",
                                                             content="a late hotel note", role="user",
                                                             timestamp=T0 + 99)
    r.notify_append(rec, path, off)
    assert r.embed_pending() == 1 and r.embed_pending() == 0
    calls = []
    _count_lookups(r.vector_cache, calls)
    r.recall("late hotel note", agent_id="a", project="p", agents=["a"])
    assert calls == []  # nothing left to embed at query time


def test_the_model_predictor_runs_in_the_thread_and_rules_fill_the_budget():
    asked = []

    class Client:
        def chat(self, messages, schema=None, deadline=None):
            asked.append(threading.current_thread().name)
            return type("R", (), {"data": {"queries": [{"query": "corporate card for bookings",
                                                        "layers": ["episodic", "rm -rf"]}]}})()

    fs = _fs(k=3, predictor="model")
    fs.client = Client()
    try:
        assert fs.begin("t", INSTRUCTION, {}, None) == []  # nothing predicted inside the caller
        for _ in range(200):
            task = fs.task("t")
            if task is not None and len(task.entries) == 3:
                break
            threading.Event().wait(0.05)
        _ready(fs, "t")
        queries = [e.prediction for e in fs.task("t").entries]
        assert asked == ["memtier-foresight"]
        assert (queries[0].query, queries[0].layers, queries[0].source) == \
            ("corporate card for bookings", ("episodic",), "model")
        assert [q.source for q in queries[1:]] == ["step", "step"] and fs.task("t").budget == 0
        assert fs.lookup("t", "which corporate card do we use for bookings").hit
    finally:
        assert fs.close()


def test_a_refill_re_prepares_and_serves_the_earlier_result_meanwhile():
    gate, inside = threading.Event(), threading.Event()
    calls = []

    def retrieve(q, layers, ctx):
        calls.append(q)
        if len(calls) > 2:  # the re-preparations block
            inside.set()
            gate.wait(30)
        return Result(q)

    fs = _fs(retrieve, k=2, wait_ms=5000)
    try:
        fs.begin("t", "Plan the Lisbon offsite: book the flights, find a hotel", {}, None)
        _ready(fs, "t")
        first = fs.lookup("t", "go ahead with the flights").result
        assert fs.refill("t", {"travel/lodging": ["gk-1"]}, None) == []  # budget spent: nothing new predicted
        assert fs.refill("t", {"travel/lodging": ["gk-1"]}, None) == []  # unchanged since: nothing re-prepared
        assert inside.wait(10)  # the thread is re-preparing (and stuck)
        again = fs.lookup("t", "go ahead with the flights")
        assert again.hit and again.result is first and not gate.is_set()  # served without waiting
        assert fs.refill("t", {"travel/lodging": ["gk-1", "gk-2"]}, None) == []  # a new item under a topic
    finally:
        gate.set()
        assert fs.close()
    assert len(calls) >= 3


# ---- memtier bench latency ---------------------------------------------------------------------------------
def test_bench_latency_prints_one_json_row_per_preset_size_foresight_and_phase():
    proc = run_cli("bench", "latency", "--presets", "paper", "--sizes", "100", "--rounds", "1", "--think-ms", "50",
                   "--set", "standing.embedder=none", "--json", "-q")
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [(r["foresight"], r["phase"]) for r in rows] == [(False, "cold"), (False, "warm"), (True, "cold"),
                                                            (True, "warm")]
    for r in rows:
        assert {"preset", "entries", "foresight", "p50_ms", "p95_ms", "hit_rate", "wait_saved_ms"} <= set(r)
        assert r["preset"] == "paper" and r["entries"] == 100 and r["memory_queries"] == 12
    assert rows[0]["hit_rate"] is None and rows[2]["hits"] >= 1 and rows[2]["wrong_hits"] == 0
    # warm: the 8 predictable queries and the card search (served by the card prompt's own retrieval)
    assert rows[3]["hits"] == 9 and rows[3]["wrong_hits"] == 0 and rows[3]["hit_rate"] == 0.75


def test_bench_latency_errors_are_one_line_naming_the_problem():
    bad = run_cli("bench", "latency", "--presets", "fastest", check=False)
    assert bad.returncode == 2 and "fastest" in bad.stderr and "Traceback" not in bad.stderr
    bad = run_cli("bench", "latency", "--set", "foresight.k=0", check=False)
    assert bad.returncode == 2 and "foresight.k" in bad.stderr and "Traceback" not in bad.stderr
    assert "replayed" in run_cli("bench", "latency", "--help").stdout


def test_a_budgeted_recall_reads_only_the_texts_it_can_score(workspace):
    """The head's texts come from the ledger; with a budget only the prefix the time allows is read."""
    r = _retriever(workspace, 120, **{"rerank.top_n": 100, "rerank.budget_ms": 35, "rerank.cache_size": 1000})
    model = CountingReranker()
    r.set_reranker(model)
    r.head.pair_ms = 10.0  # as measured on an earlier call: 35 ms fits three pairs
    reads = []
    content = r.content
    r.content = lambda idx, doc: reads.append(doc) or content(idx, doc)
    r.recall("hotel note", agent_id="a", project="p", agents=["a"])
    assert sum(model.calls) <= 3
    head_reads = len(reads) - r.config.retrieval.top_k * 4  # the delivered hits are read too
    assert head_reads <= 3 + 16, len(reads)  # never the whole 100-entry head


def test_rows_grow_without_copying_and_views_stay_valid():
    from memtier_plugin.recall.dense import Rows

    rows = Rows(np.ones((3, 2), dtype=np.float32))
    v = rows.view()
    rows.append(np.full((1, 2), 2.0, dtype=np.float32))
    buf = rows._buf
    rows.append(np.full((5, 2), 3.0, dtype=np.float32))
    assert rows._buf is buf  # spare capacity: no new buffer
    assert len(rows) == 9 and rows.view()[3].tolist() == [2.0, 2.0] and rows.view()[8].tolist() == [3.0, 3.0]
    assert v.shape == (3, 2) and v.tolist() == [[1.0, 1.0]] * 3  # an earlier view is unchanged
    rows.append(np.zeros((200, 2), dtype=np.float32))
    assert len(rows) == 209 and rows.view()[:3].tolist() == [[1.0, 1.0]] * 3


def test_a_warm_store_leaves_a_few_new_entries_to_embed_pending_not_the_prompt(workspace):
    from memtier_plugin.store.episodic import Ledger
    from memtier_plugin.recall.retriever import DEFER_EMBED

    r = _retriever(workspace, 30, **{"embeddings.backend": "hashing", "weights.sem": 1.0})
    r.recall("hotel note", agent_id="a", project="p", agents=["a"])  # a cold store: embedded now
    led = Ledger(workspace / "memory")
    calls = []
    _count_lookups(r.vector_cache, calls)

    def write(n):
        for i in range(n):
            rec, path, off = led.write_entry(agent_id="a", session_id="s-new", project="p", role="user",
                                             content=f"late gym remark {i}", timestamp=T0 + 500 + i)
            r.notify_append(rec, path, off)

    write(2)
    late = r.recall("late gym remark", agent_id="a", project="p", agents=["a"])
    assert calls == []  # not embedded on the prompt's path
    assert any("late gym remark" in h.content for h in late.hits)  # still found, by its words
    assert r.embed_pending() == 2 and calls == [2]
    write(DEFER_EMBED + 1)  # too many to leave: embedded first, outside the index lock
    r.recall("late gym remark", agent_id="a", project="p", agents=["a"])
    assert calls[0] == 2 and sum(calls[1:]) == DEFER_EMBED + 1 and r.embed_pending() == 0


def _gate_embedding(r: Retriever):
    """The embedding model's calls on entries held at a gate (the model is the stand-in; the vector cache and
    the retriever run as they are): (gate, inside, callers); ``inside`` is set once a call reached the model,
    ``callers`` names the threads that called it."""
    gate, inside, callers = threading.Event(), threading.Event(), []
    model = r.vector_cache.embedder
    original = model.embed

    def slow(texts):
        callers.append(threading.current_thread().name)
        inside.set()
        gate.wait(60)
        return original(texts)

    model.embed = slow
    model.embed_query = lambda q: original([q])[0]  # a prompt's own vector is not held
    return gate, inside, callers


def test_a_recall_never_waits_on_another_threads_embedding(workspace):
    from memtier_plugin.store.episodic import Ledger

    r = _retriever(workspace, 30, **{"embeddings.backend": "hashing", "weights.sem": 1.0})
    r.recall("hotel note", agent_id="a", project="p", agents=["a"])
    gate, inside, _ = _gate_embedding(r)
    from memtier_plugin.recall.retriever import DEFER_EMBED

    for i in range(DEFER_EMBED + 20):  # more than a recall leaves unembedded
        rec, path, off = Ledger(workspace / "memory").write_entry(agent_id="a", session_id="s-new", project="p",
                                                                 role="user", content=f"a slow gym remark {i}",
                                                                 timestamp=T0 + 900 + i)
        r.notify_append(rec, path, off)
    t = threading.Thread(target=r.embed_pending)  # Foresight's idle thread, stuck inside the model
    t.start()
    try:
        assert inside.wait(10)
        got = r.recall("slow gym remark", agent_id="a", project="p", agents=["a"])
        assert any("slow gym remark" in h.content for h in got.hits) and t.is_alive()
    finally:
        gate.set()
        t.join(30)


def test_the_budget_counts_a_pairs_length_so_long_queries_fit_fewer_pairs(workspace):
    r = _retriever(workspace, 0)
    assert r.head.pairs_within(35, "q", ["a"] * 10) == 3  # nothing measured yet: 10 ms a pair assumed
    r.head.char_ms = 0.1  # measured: 0.1 ms per character of query + entry
    short = r.head.pairs_within(50, "hotel", ["x" * 45] * 16)  # 5 ms a pair
    long = r.head.pairs_within(50, "hotel " * 40, ["x" * 45] * 16)  # 29 ms a pair
    assert (short, long) == (10, 1)
    assert r.head.pairs_within(50, "q", ["x" * 1000] + ["y"] * 5) == 0  # the next pair alone overruns


def test_background_preparations_pause_while_a_hooks_recall_runs(workspace):
    r = _retriever(workspace, 60, **{"rerank.top_n": 50})
    model = CountingReranker()
    r.set_reranker(model)
    done = []
    with r.foreground():  # a hook's recall in progress
        t = threading.Thread(target=lambda: done.append(
            r.recall("hotel note", agent_id="a", project="p", agents=["a"], background=True)))
        t.start()
        t.join(0.5)
        assert t.is_alive() and not done and model.calls == []  # waiting at its first checkpoint
    t.join(30)
    assert done and done[0].hits
    assert len(model.calls) > 1 and max(model.calls) <= 8  # the whole head, in short background calls
    t0 = time.perf_counter()
    with r.foreground():
        r.yield_to_foreground(limit_s=0.05)  # a hook stuck elsewhere never stalls the background for good
    assert time.perf_counter() - t0 < 5


def test_the_hybrid_fast_preset_turns_on_foresight_with_both_budgets(workspace):
    (workspace / "memtier.yaml").write_text("preset: hybrid-fast\nrerank:\n  budget_ms: 35\n")
    cfg = load_config(flags={"paths.workspace": str(workspace)}, use_env=False)
    assert cfg.foresight.enabled and cfg.rerank.backend == "cross-encoder" and cfg.embeddings.backend == "bge-small"
    assert (cfg.rerank.budget_ms, cfg.rerank.background_budget_ms, cfg.rerank.cache_size) == (35, 800, 20000)
    (workspace / "other").mkdir()
    plain = load_config(flags={"paths.workspace": str(workspace / "other"), "preset": "hybrid"}, use_env=False)
    assert not plain.foresight.enabled and plain.rerank.budget_ms == 0  # hybrid itself is unchanged


# ---- normally retrieved results in the task cache (MemSidecar §3.2) ----------------------------------------
def test_a_normally_retrieved_result_serves_a_later_query_of_the_same_need():
    clock = Clock()
    fs = _fs(clock=clock, k=4, entry_ttl_s=600)
    try:
        fs.begin("t", INSTRUCTION, {}, None)
        _ready(fs, "t")
        card = "The payment was declined again. Which card did we switch to the last time this happened?"
        assert fs.lookup("t", card).reason == "no match"
        assert fs.remember("t", card, Result("normal", elapsed_ms=90.0))
        assert fs.task("t").budget == 0  # no prediction budget spent
        hit = fs.lookup("t", "payment declined corporate card switched")
        assert hit.hit and hit.result.query == "normal" and hit.prediction.source == "retrieved"
        assert hit.wait_saved_ms > 0
        # a prediction that matches is preferred to a retrieved result that matches as well
        fs.remember("t", "find a hotel near the venue with a rooftop pool", Result("normal hotel"))
        served = fs.lookup("t", "find a hotel near the venue with a rooftop pool")
        assert served.hit and served.prediction.source == "step" and "hotel" in served.result.query
        clock.t += 601  # retrieved results expire like prepared ones
        assert fs.lookup("t", "payment declined corporate card switched").reason == "no match"
        assert not fs.remember("unknown", card, Result("x")) and not fs.remember("t", "the of", Result("x"))
    finally:
        assert fs.close()


def test_retrieved_results_are_bounded_and_dropped_when_writes_change_the_directory():
    fs = _fs(k=1)
    try:
        fs.begin("t", INSTRUCTION, {}, None)
        _ready(fs, "t")
        for i in range(12):
            fs.remember("t", f"question number{i} about topic{i}", Result(f"r{i}"))
        fs.remember("t", "question number11 about topic11", Result("again"))  # the same query replaces its entry
        kept = [e for e in fs.task("t").entries if e.prediction.source == "retrieved"]
        assert len(kept) == 8 and kept[-1].result.query == "again"
        assert [e.result.query for e in kept[:7]] == [f"r{i}" for i in range(4, 11)]
        assert fs.lookup("t", "number11 topic11").result.query == "again"
        fs.refill("t", {"travel/lodging": ["gk-1"]}, None)  # memory writes changed the directory
        assert all(e.prediction.source != "retrieved" for e in fs.task("t").entries)
        assert fs.lookup("t", "number11 topic11").reason == "no match"
    finally:
        assert fs.close()


def test_a_missed_prompt_is_kept_and_serves_the_agents_next_search(workspace):
    _history(workspace)
    mem = Memory(_config(workspace))
    ctx = _ctx(workspace)
    try:
        mem.recall_for(INSTRUCTION, ctx, T0)
        _ready(mem.foresight, "task-1")
        card = "The payment was declined again. Which card did we switch to the last time this happened?"
        result, access = mem.recall_for(card, ctx, T0 + 60)
        assert access.reason == "no match"
        again, access = mem.recall_for("payment declined corporate card switched", ctx, T0 + 65, start_task=False)
        assert access.hit and again is result and access.prediction.query == card
        assert any("4417" in h.content for h in again.hits)
        # the next prompt drops it (it predates what the user just said); its own retrieval serves its turn
        _, access = mem.recall_for("Which card did we switch to when the payment was declined?", ctx, T0 + 90)
        assert access.reason == "no match"
        _, tool = mem.recall_for("payment declined card switched", ctx, T0 + 95, start_task=False)
        assert tool.hit and tool.prediction.query.startswith("Which card did we switch")
    finally:
        mem.close()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_killed_worker_never_makes_a_hook_wait_and_a_new_one_takes_over():
    """The worker dies inside a preparation (SystemExit, as when its thread is torn down): the query that
    matches it, and one matching a preparation still queued, return at once (not after wait_ms), and the
    next queries are prepared by a new worker."""
    killed = threading.Event()

    def retrieve(q, layers, ctx):
        if not killed.is_set():
            killed.set()
            raise SystemExit("killed")
        return Result(q)

    fs = _fs(retrieve, wait_ms=30_000, k=4)
    try:
        fs.begin("t", INSTRUCTION, {}, None)
        assert killed.wait(10)
        first = fs.task("t").entries[0]
        assert first.ready.wait(10) and first.error == "worker stopped: SystemExit"
        deadline = time.monotonic() + 10
        while fs.running and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not fs.running
        t0 = time.monotonic()
        dead = fs.lookup("t", "Go ahead with the flights for the whole team")
        queued = fs.lookup("t", "find a hotel near the venue")  # still queued when the worker died
        assert time.monotonic() - t0 < 10  # far below wait_ms (30 s): neither waited
        assert (dead.reason, queued.reason) == ("failed", "late") and not dead.hit and not queued.hit
        _ready(fs, "t")  # the new worker prepares what was still queued
        assert fs.running and fs.lookup("t", "reserve a restaurant for the team dinner").hit
    finally:
        assert fs.close()


def test_a_hooks_first_recall_of_a_big_cold_store_embeds_it_in_the_background(workspace):
    """Past cold_embed_limit uncached texts (the hooks' Memory sets COLD_EMBED) the first recall does not embed
    the store in place: it answers by words while a background thread embeds it; without a limit
    (evaluation) the store is embedded in place, as before."""
    from memtier_plugin.recall.retriever import COLD_EMBED

    flags = {"embeddings.backend": "hashing", "weights.sem": 1.0}
    r = _retriever(workspace, 40, **flags)
    r.cold_embed_limit = 10
    gate, inside, _ = _gate_embedding(r)
    try:
        got = r.recall("hotel note 7", agent_id="a", project="p", agents=["a"])
        assert any("hotel note 7" in h.content for h in got.hits)  # by its words, while ...
        assert inside.wait(10) and r.embedding_in_background  # ... the thread is inside the model
        assert r._vectors["episodic"].embedded == 0
    finally:
        gate.set()
    r._cold_thread.join(30)
    assert r._vectors["episodic"].embedded == 40 and not r.embedding_in_background
    assert r.close()
    small = _retriever(workspace / "small", 5, **flags)  # under the limit: in place
    small.cold_embed_limit = 10
    small.recall("hotel note", agent_id="a", project="p", agents=["a"])
    assert small._vectors["episodic"].embedded == 5 and small._cold_thread is None
    mem = Memory(load_config(flags={"paths.workspace": str(workspace), **flags}, use_env=False))
    assert mem.retriever.cold_embed_limit == COLD_EMBED and Retriever(mem.config).cold_embed_limit is None


def test_closing_stops_the_background_embedding_at_its_next_batch(workspace):
    r = _retriever(workspace, 150, **{"embeddings.backend": "hashing", "weights.sem": 1.0})
    r.cold_embed_limit = 10
    gate, inside, _ = _gate_embedding(r)
    r.recall("hotel note", agent_id="a", project="p", agents=["a"])
    assert inside.wait(10)
    assert not r.close(timeout=0)  # still inside the model: asked to stop
    gate.set()
    r._cold_thread.join(30)
    assert not r.embedding_in_background and r._vectors["episodic"].embedded == 64  # one batch, then stopped
    assert r.embed_pending() == 150 - 64  # an explicit call embeds the rest (the stop was that thread's)


def test_many_entries_written_by_another_process_are_embedded_in_the_background_not_by_the_hook(workspace):
    from memtier_plugin.store.episodic import Ledger

    r = _retriever(workspace, 30, **{"embeddings.backend": "hashing", "weights.sem": 1.0})
    r.cold_embed_limit = 50
    r.recall("hotel note", agent_id="a", project="p", agents=["a"])  # warm: 30 embedded in place
    led = Ledger(workspace / "memory")
    for i in range(120):  # another process appends 120 entries
        rec, path, off = led.write_entry(agent_id="a", session_id="s-bulk", project="p", role="user",
                                         content=f"bulk import line {i}", timestamp=T0 + 2000 + i)
        r.notify_append(rec, path, off)
    gate, inside, callers = _gate_embedding(r)
    try:
        got = r.recall("bulk import line 7", agent_id="a", project="p", agents=["a"])
        assert any("bulk import line 7" in h.content for h in got.hits)
        assert inside.wait(10) and callers == ["memtier-embed"]  # the hook's thread never ran the model
    finally:
        gate.set()
    r._cold_thread.join(30)
    assert r._vectors["episodic"].embedded == 150


def test_warm_up_loads_vectors_and_models_before_the_first_recall(workspace, caplog):
    """What the sidecar and the MCP server do before serving: the first recall then embeds nothing and the
    models have run once; a failing warm-up is logged, never raised."""
    flags = {"embeddings.backend": "hashing", "weights.sem": 1.0, "standing.embedder": "none"}
    _retriever(workspace, 40, **flags)
    mem = Memory(load_config(flags={"paths.workspace": str(workspace), **flags}, use_env=False))
    model = CountingReranker()
    mem.retriever.set_reranker(model)
    assert "episodic" not in mem.retriever._vectors
    parts = mem.warm_up()
    assert mem.retriever._vectors["episodic"].embedded == 40 and model.calls == [1]
    assert {"vectors_s", "embedder_s", "reranker_s", "total_s"} <= set(parts)
    calls = []
    _count_lookups(mem.retriever.vector_cache, calls)
    mem.recall("hotel note 3", _ctx(workspace), T0 + 100)
    assert calls == []  # nothing left to load at the first prompt

    class Broken:
        def score(self, query, texts):
            raise RuntimeError("model file truncated")

    mem.retriever.set_reranker(Broken())
    with caplog.at_level(logging.WARNING, logger="memtier_plugin.memory"):
        assert set(mem.warm_up()) == {"total_s"}
    assert any("warming up" in r.getMessage() for r in caplog.records)
