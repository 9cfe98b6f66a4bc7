"""Attribution: the credit rule by hand, the flip through real hooks, logprobs against a real HTTP server."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli
from memtier_plugin import plugin
from memtier_plugin.learning.attribution import call_text, credit
from memtier_plugin.config import load_config
from memtier_plugin.events import AgentEndEvent, HookContext, PromptEvent, ToolResultEvent
from memtier_plugin.host import Host, replay_session
from memtier_plugin.store.episodic import Ledger, iter_records, parse_iso
from memtier_plugin.memory import Memory, memory_for
from memtier_plugin.recall.retriever import Retriever

FLIP = sorted((FIXTURES / "attribution").glob("*.jsonl"))
GOOD = "Runbook: if the payments worker is stuck, systemctl restart payworker on host pay-app-2 fixes it."
BAD = "Old wiki: restart the payments worker with payctl bounce on host pay-legacy-1."
QUERY = "restart the payments worker"
NOW = parse_iso("2026-11-08T09:00:00Z")
W0 = [0.0, 0.35, 0.25, 0.25, 0.15]

ENTRIES = [{"id": "e1", "content": "deploy staging"},          # tokens {deploy, stag}
           {"id": "e2", "content": "staging timeout kafka"},   # tokens {stag, timeout, kafka}
           {"id": "e3", "content": "kafka zookeeper"}]         # no shared token
CALL = {"tool_call_id": "c1", "name": "deploy", "params": {"env": "staging"}}  # {deploy, env, stag, timeout} with the error


# ---- the rule, by hand -------------------------------------------------------------------
def test_credit_failure_hand_computed():
    # J(e1) = |{deploy, stag}| / |{deploy, env, stag, timeout}| = 2/4; J(e2) = |{stag, timeout}| / 5 = 0.4
    changes = credit(ENTRIES, [{**CALL, "error": "timeout"}], threshold=0.1, rate=0.2)
    assert [(c["entry_id"], c["overlap"], c["delta"]) for c in changes] == [
        ("e1", 0.5, round(-0.2 * 0.5 / 0.9, 6)),  # -0.111111
        ("e2", 0.4, round(-0.2 * 0.4 / 0.9, 6)),  # -0.088889
    ]
    assert changes[0]["delta"] == -0.111111 and changes[1]["delta"] == -0.088889
    assert {c["reason"] for c in changes} == {"deploy failed"}
    assert abs(sum(c["delta"] for c in changes) + 0.2) < 1e-6  # one call moves its entries by exactly rate


def test_credit_success_positive_and_threshold():
    ok = {**CALL, "error": None, "result": "timeout"}  # same tokens as the failure: J(e1) 0.5, J(e2) 0.4
    text = call_text(ok)
    assert text.startswith('deploy {"env":"staging"} ')
    changes = credit(ENTRIES, [ok], threshold=0.45, rate=0.3)
    # only e1 clears 0.45, so it takes the whole +rate
    assert [(c["entry_id"], c["delta"]) for c in changes] == [("e1", 0.3)]
    assert credit(ENTRIES, [ok], threshold=0.9, rate=0.3) == []


def test_credit_several_calls_signs_per_call():
    calls = [{**CALL, "tool_call_id": "bad", "error": "timeout"},
             {"tool_call_id": "good", "name": "restart", "params": {"svc": "kafka"}, "result": "zookeeper up"}]
    changes = credit(ENTRIES, calls, threshold=0.1, rate=0.2)
    by = {(c["entry_id"], c["tool_call_id"]): c["delta"] for c in changes}
    assert by[("e1", "bad")] < 0 and by[("e2", "bad")] < 0
    # the second call {restart, svc, kafka, zookeeper} ("up" is a stop word): e3 shares 2 of 4 -> 0.5,
    # e2 shares {kafka} of 6 -> 1/6; shares of +0.2: 0.2 * 0.5 / (2/3) = 0.15 and 0.2 * (1/6) / (2/3) = 0.05
    assert by[("e3", "good")] == 0.15
    assert by[("e2", "good")] == 0.05
    assert ("e1", "good") not in by


def test_cw_folds_and_clips(tmp_path):
    ledger = Ledger(tmp_path / "memory", fsync=False)
    rec = ledger.add(agent_id="a", session_id="s", project="", content="x")
    for d in (0.7, 0.7, -0.3):
        ledger.add_update("a", {"kind": "cw_update", "entry_id": rec["id"], "delta": d})
    assert ledger.read().entries[rec["id"]].cognitive_weight == pytest.approx(0.7)  # 1.0 (clipped) - 0.3


# ---- the flip: real host, real hooks, real ledgers ----------------------------------------------
def _ids(ws: Path) -> dict[str, str]:
    entries = Ledger(ws / "memory").read().entries.values()
    return {e.content: e.id for e in entries}


def _order(ws: Path, weights=None) -> list[str]:
    cfg = load_config(flags={"paths.workspace": str(ws)})
    r = Retriever(cfg)
    ranked = r.rank(QUERY, agents=["ops"], project="payments", now=NOW, weights=weights)
    return [r.record(idx, d)["content"] for idx, d in ranked.docs]


@pytest.fixture
def flipped(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.setenv("MEMTIER_WORKSPACE", str(ws))
    monkeypatch.setenv("MEMTIER_SCHEDULING__MODE", "retrieval")  # attribution alone: every recorded call runs
    host = Host()
    host.register(plugin)
    reports, before = [], None
    for i, path in enumerate(FLIP):
        reports.append(replay_session(host, path, ws))
        if i == 1:  # both runbook entries written, nothing attributed yet
            before = _order(ws)
    return ws, reports, before


def test_flip_scenario(flipped):
    ws, reports, before = flipped
    assert len(FLIP) == 6
    ids = _ids(ws)
    good, bad = ids[GOOD], ids[BAD]
    # before: the old-wiki entry outranks the runbook
    assert before.index(BAD) < before.index(GOOD)
    # the four restart runs each had a failing payctl call and a succeeding systemctl call
    assert [t.success for r in reports[2:] for t in r.turns] == [False] * 4
    entries = Ledger(ws / "memory").read().entries
    cw_bad, cw_good = entries[bad].cognitive_weight, entries[good].cognitive_weight
    assert cw_bad < -0.2 and cw_good > 0.2
    # every update on the bad entry is negative and comes from a failed payctl call; the good one's net is positive
    bad_updates = [h for h in entries[bad].history if h["kind"] == "cw_update"]
    assert bad_updates and all(h["reason"] == "shell failed" for h in bad_updates if h["delta"] < 0)
    assert sum(h["delta"] for h in bad_updates if h["reason"] == "shell failed") < -0.3
    good_updates = [h for h in entries[good].history if h["kind"] == "cw_update"]
    assert sum(h["delta"] for h in good_updates if h["reason"] == "shell succeeded") > 0.3
    assert {h["run_id"] for h in bad_updates} <= {f"s-2026-11-0{d}-ops-r1" for d in range(4, 8)}
    # after: the order has flipped, and it is the cognitive weight that flipped it
    after = _order(ws)
    assert after.index(GOOD) < after.index(BAD)
    no_cw = _order(ws, weights=[0.0, 0.35, 0.25, 0.0, 0.15])
    assert no_cw.index(BAD) < no_cw.index(GOOD)


def test_flip_run_end_records(flipped):
    ws, _, _ = flipped
    recs = [r for p in sorted((ws / "memory" / "traces").rglob("*.jsonl")) for r, _, _ in iter_records(p)]
    ends = {r["run_id"]: r for r in recs if r.get("kind") == "run_end"}
    assert set(ends) == {f"s-2026-11-0{d}-ops-r1" for d in range(2, 8)}
    assert ends["s-2026-11-02-ops-r1"]["success"] is True
    assert ends["s-2026-11-05-ops-r1"]["success"] is False and ends["s-2026-11-05-ops-r1"]["failed_calls"] == 1


def test_index_counts_each_update_once(flipped):
    """The live index (which saw every update as it was written) agrees with a fold of the ledger."""
    ws, _, _ = flipped
    from memtier_plugin.memory import memory_for

    mem = memory_for(HookContext(agent_id="ops", workspace_dir=str(ws)))
    ep = mem.retriever.episodic
    ep_cw = {ep.ids[d]: float(ep.col("cw")[d]) for d in range(ep.n)}
    for e in Ledger(ws / "memory").read().entries.values():
        assert ep_cw[e.id] == pytest.approx(e.cognitive_weight, abs=1e-6), e.content  # float32 column


def test_flip_cli_search_and_history(flipped):
    ws, _, _ = flipped
    ids = _ids(ws)
    out = run_cli("-w", str(ws), "search", QUERY, "--agent", "ops", "--project", "payments", "--k", "12",
                  "--budget", "5000", "--json").stdout
    hits = [h["id"] for h in json.loads(out)["hits"]]
    assert ids[GOOD] in hits and (ids[BAD] not in hits or hits.index(ids[GOOD]) < hits.index(ids[BAD]))
    story = run_cli("-w", str(ws), "inspect", "--id", ids[BAD], "--history").stdout
    assert "Old wiki" in story and "run=s-2026-11-04-ops-r1" in story and "(shell failed)" in story
    last = story.strip().splitlines()[-1]
    entry = Ledger(ws / "memory").read().entries[ids[BAD]]
    assert last.startswith(f"  now: cw={entry.cognitive_weight:+.3f}") and entry.cognitive_weight < 0


# ---- logprob attribution against a real loopback server ---------------------------------------
class LogprobServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.favour = ""  # memory text whose presence makes the model produce the call exactly
        self.with_logprobs = True
        self.continuation = ""
        self.requests: list[dict] = []
        self.answer_first: int | None = None  # answer only this many requests; the later ones hang
        self.release = threading.Event()  # ends the hung requests (teardown)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        srv = self.server
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        srv.requests.append(body)
        if srv.answer_first is not None and len(srv.requests) > srv.answer_first:
            srv.release.wait(30)
            return
        prompt = " ".join(m["content"] for m in body["messages"])
        words = srv.continuation.split(" ")
        if srv.favour and srv.favour in prompt:  # the model would write the call: cheap tokens
            toks = [(w if i == 0 else " " + w, -0.01) for i, w in enumerate(words)]
        else:  # the model writes something else; the call's first word is not among the alternatives
            toks = [("Sorry", -0.2), (",", -0.3)]
        content = "".join(t for t, _ in toks)
        choice = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        if srv.with_logprobs:
            choice["logprobs"] = {"content": [{"token": t, "logprob": lp,
                                               "top_logprobs": [{"token": t, "logprob": lp},
                                                                {"token": "Hmm", "logprob": -3.0}]}
                                              for t, lp in toks]}
        data = json.dumps({"id": "x", "object": "chat.completion", "choices": [choice],
                           "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *a):
        pass


@pytest.fixture
def server():
    srv = LogprobServer()
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()


LEXICAL = "deploy staging with the blue pool"  # Jaccard favours this one
HELPFUL = "remember the migration flag"  # shares no token with the call


def _one_run(ws: Path, flags: dict) -> tuple[Memory, dict]:
    cfg = load_config(flags={"paths.workspace": str(ws), **flags})
    mem = Memory(cfg)
    lex = mem.ledger.add(agent_id="dev", session_id="s0", project="p", content=LEXICAL)
    helpful = mem.ledger.add(agent_id="dev", session_id="s0", project="p", content=HELPFUL)
    ctx = HookContext(agent_id="dev", session_id="s1", project="p", workspace_dir=str(ws), run_id="r1")
    # deliver both entries in this run (as before_prompt_build would) and run one failing-free call
    mem.on_prompt(PromptEvent(prompt="deploy staging remember the migration flag blue pool"), ctx)
    delivered = {row["id"] for row in mem.run(ctx).delivered}
    assert {lex["id"], helpful["id"]} <= delivered
    mem.on_post_tool(ToolResultEvent("deploy", {"env": "staging", "pool": "blue"}, "call-1", "ok", None), ctx)
    call = mem.run(ctx).tool_calls[0]
    return mem, {"lex": lex["id"], "helpful": helpful["id"], "text": call_text(call), "ctx": ctx}


def _updates(mem: Memory) -> list[dict]:
    return [r for p in mem.ledger.files() for r, _, _ in iter_records(p) if r.get("kind") == "cw_update"]


def test_logprob_attribution_credits_the_entry_that_raises_likelihood(tmp_path, server):
    ws = tmp_path / "ws"
    mem, ids = _one_run(ws, {"model.enabled": True, "model.base_url": server.url, "model.max_retries": 0,
                             "attribution.strategy": "logprob"})
    server.continuation, server.favour = ids["text"], HELPFUL
    mem.on_agent_end(AgentEndEvent(messages=[], success=True), ids["ctx"])
    ups = _updates(mem)
    assert [(u["entry_id"], u["strategy"], u["delta"]) for u in ups] == [(ids["helpful"], "logprob", 0.2)]
    assert server.requests and all(r["logprobs"] is True for r in server.requests)
    assert mem.model_client is not None


def test_logprob_without_logprobs_falls_back_to_jaccard(tmp_path, server):
    ws = tmp_path / "ws"
    mem, ids = _one_run(ws, {"model.enabled": True, "model.base_url": server.url, "model.max_retries": 0,
                             "attribution.strategy": "logprob"})
    server.continuation, server.favour, server.with_logprobs = ids["text"], HELPFUL, False
    mem.on_agent_end(AgentEndEvent(messages=[], success=True), ids["ctx"])
    ups = _updates(mem)
    assert [u["entry_id"] for u in ups] == [ids["lex"]] and ups[0]["delta"] > 0
    assert ups[0]["strategy"] == "jaccard"  # what produced it, not what was configured


def test_logprob_endpoint_down_falls_back_to_jaccard(tmp_path):
    ws = tmp_path / "ws"
    mem, ids = _one_run(ws, {"model.enabled": True, "model.base_url": "http://127.0.0.1:9/v1",
                             "model.max_retries": 0, "model.timeout_s": 1.0, "attribution.strategy": "logprob"})
    mem.on_agent_end(AgentEndEvent(messages=[], success=True), ids["ctx"])
    assert [(u["entry_id"], u["strategy"]) for u in _updates(mem)] == [(ids["lex"], "jaccard")]


# ---- liveness: a hung endpoint costs one hook deadline, not timeout x retries x calls -----------
class HungEndpoint:
    """A loopback socket that accepts every connection and never answers (a wedged model server)."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def close(self):
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def hung():
    endpoint = HungEndpoint()
    yield endpoint
    endpoint.close()


DEADLINE_S = 1.0


def _host_run(host: Host, ws: Path, run_id: str, calls: int) -> None:
    ctx = HookContext(agent_id="dev", session_id="s1", project="p", workspace_dir=str(ws), run_id=run_id)
    host.before_prompt_build(PromptEvent(prompt="deploy staging remember the migration flag blue pool"), ctx)
    for i in range(calls):
        host.post_tool(ToolResultEvent("deploy", {"env": "staging", "pool": "blue"}, f"{run_id}-c{i}", "ok", None),
                       ctx)
    host.agent_end(AgentEndEvent(messages=[], success=True), ctx)


def test_hung_endpoint_costs_agent_end_one_deadline_and_labels_jaccard(tmp_path, hung):
    """Defect 13: per call, timeout_s (30) x 3 attempts + backoff, ~92 s, before any update was written."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "memtier.yaml").write_text(
        f"model: {{enabled: true, base_url: '{hung.url}', hook_deadline_s: {DEADLINE_S}}}\n"
        "attribution: {strategy: logprob}\n")
    mem = memory_for(HookContext(agent_id="dev", workspace_dir=str(ws)))
    assert mem.config.model.timeout_s == 30 and mem.config.model.max_retries == 2  # the shipped defaults
    for text in (LEXICAL, HELPFUL):
        mem.ledger.add(agent_id="dev", session_id="s0", project="p", content=text)
    host = Host()
    host.register(plugin)
    started = time.monotonic()
    _host_run(host, ws, "r1", calls=3)
    took = time.monotonic() - started
    assert took < 3 * DEADLINE_S, f"agent_end took {took:.1f}s with a {DEADLINE_S}s hook deadline"
    ups = _updates(mem)
    assert {u["tool_call_id"] for u in ups} == {"r1-c0", "r1-c1", "r1-c2"}
    assert {u["strategy"] for u in ups} == {"jaccard"}
    assert len(hung.held) == 1  # one request; the breaker kept the other calls off the endpoint
    # the next run, within the cool-down, does not call the endpoint at all
    _host_run(host, ws, "r2", calls=2)
    assert {u["strategy"] for u in _updates(mem) if u["run_id"] == "r2"} == {"jaccard"}
    assert len(hung.held) == 1 and mem.model_client.breaker.state == "open"


def test_each_update_names_the_strategy_that_produced_it(tmp_path, server):
    """A working endpoint that wedges mid-run: the first call is scored by logprobs, the rest by Jaccard."""
    ws = tmp_path / "ws"
    mem, ids = _one_run(ws, {"model.enabled": True, "model.base_url": server.url,
                             "attribution.strategy": "logprob", "model.hook_deadline_s": 2.0})
    ctx = ids["ctx"]
    for i in (2, 3):
        mem.on_post_tool(ToolResultEvent("deploy", {"env": "staging", "pool": "blue"}, f"call-{i}", "ok", None),
                         ctx)
    server.continuation, server.favour = ids["text"], HELPFUL
    server.answer_first = 3  # the first call's three requests (base + one per entry), then silence
    started = time.monotonic()
    mem.on_agent_end(AgentEndEvent(messages=[], success=True), ctx)
    took = time.monotonic() - started
    assert took < 3 * 2.0, f"agent_end took {took:.1f}s with a 2s hook deadline"
    by_call = {}
    for u in _updates(mem):
        by_call.setdefault(u["tool_call_id"], set()).add(u["strategy"])
    assert by_call == {"call-1": {"logprob"}, "call-2": {"jaccard"}, "call-3": {"jaccard"}}
    assert len(server.requests) == 4  # the fourth hung until the deadline; the third call made none
    # it answered a moment ago, so running out of the hook's budget is not taken for an outage
    assert mem.model_client.breaker.state == "closed"


def test_model_client_only_when_enabled(tmp_path):
    off = Memory(load_config(flags={"paths.workspace": str(tmp_path)}))
    assert off.model_client is None
    on = Memory(load_config(flags={"paths.workspace": str(tmp_path), "model.enabled": True}))
    assert on.model_client is on.model_client is not None


def test_fixture_is_self_consistent():
    """The flip fixture's tool calls use exactly the commands its two competing entries give."""
    recs = [json.loads(line) for p in FLIP for line in p.read_text().splitlines()]
    users = [r["content"] for r in recs if r["type"] == "user"]
    assert users[0] == GOOD and users[1] == BAD
    calls = [r for r in recs if r["type"] == "tool_call"]
    assert all(("payctl" in c["params"]["cmd"]) == bool(c["error"]) for c in calls)


def test_demo_shows_weights_moving_and_the_order_flipping(tmp_path):
    proc = run_cli("demo", "--into", str(tmp_path / "demo"), "-q")
    out = proc.stdout
    assert "Act 2: learning from tool outcomes" in out
    assert "recall before any outcome" in out and "recall after the failed and the successful calls" in out
    assert "flipped: the cognitive weights moved it" in out
