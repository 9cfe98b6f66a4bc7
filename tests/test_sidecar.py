"""`memtier serve`: the hook contract over loopback HTTP, tested through a real `memtier serve` process."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import run_cli
from memtier_plugin.events import AgentEndEvent, HookContext, PromptEvent, ToolCallEvent, ToolResultEvent
from memtier_plugin.store.episodic import Ledger
from memtier_plugin.memory import reset_services
from memtier_plugin.bridges.sidecar import build_host

T0 = 1_790_000_000.0  # fixed event times: both paths see the same clock


class Sidecar:
    """A `memtier serve` subprocess and a keep-alive client for it."""

    def __init__(self, workspace: Path, *args: str, env: dict | None = None):
        self.workspace = workspace
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memtier_plugin", "-w", str(workspace), "serve", "--json", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"memtier serve did not start: {self.proc.stderr.read()}")
        self.ready = json.loads(line)
        self.url = self.ready["url"]
        self.token = Path(self.ready["token_file"]).read_text().strip()
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        self.address = (host, int(port))
        self._conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: bytes | None = None, token: str | None = "default",
                headers: dict | None = None) -> tuple[int, dict]:
        conn = http.client.HTTPConnection(*self.address, timeout=30)
        hdrs = dict(headers or {})
        if token is not None:
            hdrs["Authorization"] = f"Bearer {self.token if token == 'default' else token}"
        conn.request(method, path, body=body, headers=hdrs)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, json.loads(data)

    def post(self, name: str, ctx: dict, event: dict | None = None, params: dict | None = None) -> tuple[int, dict]:
        body = {"ctx": ctx, **({"event": event} if event is not None else {}),
                **({"params": params} if params is not None else {})}
        return self.request("POST", f"/v1/{name}", json.dumps(body).encode())

    def stop(self, sig=signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=90)
        finally:
            self.proc.stdout.close()
            self.proc.stderr.close()


@pytest.fixture
def sidecar(tmp_path):
    started = []

    def start(workspace: Path | None = None, *args: str, **kw) -> Sidecar:
        sc = Sidecar(workspace or tmp_path / "ws", *args, **kw)
        started.append(sc)
        return sc

    yield start
    for sc in started:
        sc.stop(signal.SIGKILL)


def ids_out(text: str | None) -> str | None:
    return None if text is None else re.sub(r"\b(ep|sf|gk|sk)-\d{8}-[0-9a-f]{12}\b", "ID", text)


# ---- the token ----------------------------------------------------------------
def test_token_file_is_private_and_every_request_needs_it(sidecar, tmp_path):
    sc = sidecar()
    token_file = Path(sc.ready["token_file"])
    assert token_file == tmp_path / "ws" / "memory" / ".sidecar" / "token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
    assert len(sc.token) >= 32
    ctx = {"agent_id": "main", "session_id": "s1"}
    body = json.dumps({"ctx": ctx, "event": {"prompt": "hello"}}).encode()
    for token in (None, "", "x" * len(sc.token), sc.token[:-1]):
        for method, path, data in (("GET", "/health", None), ("POST", "/v1/before_prompt_build", body)):
            status, answer = sc.request(method, path, data, token=token)
            assert status == 401, (token, path)
            assert set(answer) == {"error"} and "\n" not in answer["error"] and "token" in answer["error"]
    assert not (tmp_path / "ws" / "memory" / "episodic").exists(), "a refused request wrote nothing"
    status, health = sc.request("GET", "/health")
    assert status == 200 and health["ok"] is True and health["workspace"] == str(tmp_path / "ws")
    # the token never lands in a ledger, and a restart reuses it (a running plugin keeps working)
    sc.post("before_prompt_build", ctx, {"prompt": "remember the build server is bs-3"})
    assert sc.stop() == 0
    ledgers = [p for p in (tmp_path / "ws" / "memory").rglob("*.jsonl")]
    assert ledgers and all(sc.token not in p.read_text() for p in ledgers)
    again = sidecar()
    assert again.token == sc.token


def test_a_token_file_others_can_read_is_replaced(sidecar, tmp_path):
    d = tmp_path / "ws" / "memory" / ".sidecar"
    d.mkdir(parents=True)
    leaked = "L" * 43
    (d / "token").write_text(leaked + "\n")
    os.chmod(d / "token", 0o644)
    sc = sidecar()
    assert sc.token != leaked and stat.S_IMODE((d / "token").stat().st_mode) == 0o600
    assert sc.request("GET", "/health", token=leaked)[0] == 401


# ---- the contract over HTTP ---------------------------------------------------------
def turns(n_sessions: int = 3):
    """A few runs of (ctx, hook, event) with fixed times, each hook as a host would call it."""
    facts = ["the staging database is db-7 on port 5433", "deploys go out with make ship, never on fridays",
             "the payments worker restarts with systemctl restart payq"]
    out = []
    for i in range(n_sessions):
        ctx = {"agent_id": "main", "session_id": f"s{i}", "session_key": "agent:main:main", "run_id": f"r{i}",
               "project": "shop"}
        t = T0 + 600 * i
        out.append((ctx, "before_prompt_build", {"prompt": facts[i % len(facts)] + " - how do we deploy?",
                                                 "messages": [], "timestamp": t}))
        out.append((ctx, "pre_tool", {"tool_name": "exec", "params": {"command": f"make ship {i}"},
                                      "tool_call_id": f"c{i}", "timestamp": t + 1}))
        out.append((ctx, "post_tool", {"tool_name": "exec", "params": {"command": f"make ship {i}"},
                                       "tool_call_id": f"c{i}", "result": f"shipped build {i}",
                                       "error": None if i % 2 == 0 else "exit 2", "timestamp": t + 2}))
        out.append((ctx, "agent_end", {"messages": [{"role": "user", "content": facts[i % len(facts)]},
                                                    {"role": "assistant", "content": f"done with run {i}"}],
                                       "success": i % 2 == 0, "timestamp": t + 3}))
    out.append((out[-1][0], "session_end", {"reason": "completed", "timestamp": T0 + 9999}))
    return out


EVENT = {"before_prompt_build": PromptEvent, "pre_tool": ToolCallEvent, "post_tool": ToolResultEvent,
         "agent_end": AgentEndEvent}


def in_process(workspace: Path, steps) -> list:
    """The same steps through the reference host in this process."""
    from memtier_plugin.events import SessionEndEvent

    reset_services()
    host = build_host()
    answers = []
    for ctx, hook, event in steps:
        hc = HookContext(**ctx, workspace_dir=str(workspace))
        ev = SessionEndEvent(**event) if hook == "session_end" else EVENT[hook](**event)
        answers.append(getattr(host, hook)(ev, hc))
    return answers


def ledger_view(workspace: Path) -> list[tuple]:
    entries = Ledger(workspace / "memory").read().entries.values()
    return sorted((e.timestamp, e.agent_id, e.session_id, e.project, e.role, e.content) for e in entries)


def test_hooks_over_http_answer_exactly_as_the_in_process_host(sidecar, tmp_path, monkeypatch):
    steps = turns()
    monkeypatch.setenv("MEMTIER_WORKSPACE", str(tmp_path / "direct"))
    direct = in_process(tmp_path / "direct", steps)
    sc = sidecar(tmp_path / "served")
    served = []
    for ctx, hook, event in steps:
        status, answer = sc.post(hook, ctx, event)
        assert status == 200, answer
        served.append(answer)
    for (ctx, hook, _), want, got in zip(steps, direct, served):
        if hook == "before_prompt_build":
            assert ids_out(got["prepend_context"]) == ids_out(want.prepend_context)
            assert got["prepend_system_context"] == want.prepend_system_context
        elif hook == "pre_tool":
            assert got == {"block": want.block, "block_reason": want.block_reason,
                           "supplement": want.supplement, "params": want.params}
        else:
            assert got == {"ok": True}
    recalled = [a["prepend_context"] for (_, h, _), a in zip(steps, served) if h == "before_prompt_build"]
    assert recalled[0] is None and "db-7" in recalled[1], "the second run recalls the first"
    assert ledger_view(tmp_path / "served") == ledger_view(tmp_path / "direct")
    assert len(ledger_view(tmp_path / "served")) == 3 * 3  # prompt, tool outcome, assistant message per run


def test_path_like_agent_ids_are_refused_and_nothing_is_written(sidecar, tmp_path):
    sc = sidecar()
    for bad in ("../evil", "/abs", "a/b", "..", ".", "", "x\n", "a" * 129, 7, None):
        status, answer = sc.post("before_prompt_build", {"agent_id": bad, "session_id": "s"}, {"prompt": "hi"})
        assert status == 400, bad
        assert answer["error"].startswith("ctx.agent_id") and "\n" not in answer["error"]
        for hook, event in (("pre_tool", {"tool_name": "exec"}), ("post_tool", {"tool_name": "exec"})):
            assert sc.post(hook, {"agent_id": bad}, event)[0] == 400
        assert sc.post("memory_search", {"agent_id": bad}, params={"query": "x"})[0] == 400
    assert not (tmp_path / "evil").exists() and not (tmp_path / "ws" / "evil").exists()
    assert not (tmp_path / "ws" / "memory" / "episodic").exists()


def test_workspace_dir_in_a_request_never_chooses_where_memory_goes(sidecar, tmp_path):
    sc = sidecar()
    elsewhere = tmp_path / "elsewhere"
    status, _ = sc.post("before_prompt_build", {"agent_id": "main", "workspace_dir": str(elsewhere)},
                        {"prompt": "where does this go"})
    assert status == 200
    assert not elsewhere.exists()
    assert [v[-1] for v in ledger_view(tmp_path / "ws")] == ["where does this go"]


def test_bad_requests_get_one_line_errors_and_the_server_goes_on(sidecar):
    sc = sidecar(None, "--max-body", "4096")
    ctx = {"agent_id": "main"}
    cases = [
        (sc.request("POST", "/v1/before_prompt_build", b"{not json"), 400, "not valid JSON"),
        (sc.request("POST", "/v1/before_prompt_build", b"[1,2]"), 400, "body: expected a JSON object"),
        (sc.post("before_prompt_build", ctx, {"prompt": 5}), 400, "event.prompt: expected a string, got int"),
        (sc.post("before_prompt_build", ctx, {}), 400, "event.prompt: required"),
        (sc.post("post_tool", ctx, {"tool_name": "exec", "params": [1]}), 400, "event.params: expected an object"),
        (sc.post("agent_end", ctx, {"messages": [], "success": "yes"}), 400, "event.success: expected true or false"),
        (sc.post("pre_tool", {"agent_id": "main", "session_id": 3}, {"tool_name": "x"}), 400, "ctx.session_id"),
        (sc.post("nonsense", ctx, {}), 404, "unknown endpoint /v1/nonsense"),
        (sc.request("GET", "/v1/pre_tool"), 405, "only GET /health"),
        (sc.request("POST", "/v1/pre_tool", b"x" * 5000), 413, "over the limit of 4096 bytes"),
        (sc.post("memory_search", ctx, params={"query": ""}), 400, "'query' must be a non-empty string"),
        (sc.post("memory_add", ctx, params={"content": "x", "role": "boss"}), 400, "'role' must be one of"),
    ]
    for (status, answer), want_status, want_text in cases:
        assert status == want_status, (answer, want_text)
        assert set(answer) == {"error"} and want_text in answer["error"] and "\n" not in answer["error"]
    big = sidecar(sc.workspace.parent / "ws2")  # default limit: 1 MiB
    status, answer = big.request("POST", "/v1/post_tool", b" " * ((1 << 20) + 1))
    assert status == 413 and "1048576" in answer["error"]
    assert big.post("before_prompt_build", ctx, {"prompt": "still serving"})[0] == 200
    assert sc.post("before_prompt_build", ctx, {"prompt": "still serving"})[0] == 200


def test_a_memory_failure_answers_no_memory_and_pre_tool_asks_for_review(sidecar, tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "exploding.py").write_text(textwrap.dedent('''
        from memtier_plugin.hookspecs import hookimpl
        PLUGIN_NAME = "exploding"

        @hookimpl
        def pre_tool(event, ctx):
            raise RuntimeError("policy store down")
    '''))
    sc = sidecar(None, "--plugin-dir", str(plugins))
    ctx = {"agent_id": "main", "session_id": "s1"}
    status, decision = sc.post("pre_tool", ctx, {"tool_name": "exec", "params": {"command": "rm -rf build"}})
    assert status == 200 and decision["block"] is False
    assert "exploding" in decision["supplement"] and "review" in decision["supplement"]
    # memtier's own failure: the episodic folder is a file, so nothing can be written or recalled
    memory = tmp_path / "ws" / "memory"
    (memory / "episodic").write_text("not a folder")
    status, answer = sc.post("before_prompt_build", ctx, {"prompt": "anything about deploys?"})
    assert status == 200 and answer == {"prepend_context": None, "prepend_system_context": None}
    assert sc.post("post_tool", ctx, {"tool_name": "exec", "result": "ok"}) == (200, {"ok": True})


def test_memory_tools_over_http_respect_agent_scoping(sidecar):
    sc = sidecar()
    status, added = sc.post("memory_add", {"agent_id": "alice", "session_id": "s1"},
                            params={"content": "alice's private note: the vpn key rotates monthly"})
    assert status == 200 and added["agent_id"] == "alice"
    status, got = sc.post("memory_get", {"agent_id": "alice"}, params={"id": added["id"]})
    assert got["found"] and "vpn key" in got["content"] and got["tier"] == "episodic"
    status, found = sc.post("memory_search", {"agent_id": "alice"}, params={"query": "vpn key"})
    assert [h["id"] for h in found["hits"]] == [added["id"]]
    # another agent sees neither the entry nor whether it exists
    assert sc.post("memory_get", {"agent_id": "bob"}, params={"id": added["id"]}) == \
        (200, {"found": False, "id": added["id"]})
    assert sc.post("memory_search", {"agent_id": "bob"}, params={"query": "vpn key"})[1]["hits"] == []


# ---- lifecycle ----------------------------------------------------------------------
def test_sigterm_shuts_down_cleanly_and_one_sidecar_per_workspace(sidecar, tmp_path):
    sc = sidecar()
    endpoint = tmp_path / "ws" / "memory" / ".sidecar" / "endpoint.json"
    assert json.loads(endpoint.read_text())["url"] == sc.url
    second = run_cli("-w", str(tmp_path / "ws"), "serve", check=False)
    assert second.returncode == 2
    assert second.stderr.strip().count("\n") == 0 and "already serves" in second.stderr and sc.url in second.stderr
    # a kept-alive idle connection does not hold the shutdown up
    idle = http.client.HTTPConnection(*sc.address, timeout=30)
    idle.request("GET", "/health", headers={"Authorization": f"Bearer {sc.token}"})
    assert idle.getresponse().read()
    t = time.monotonic()
    assert sc.stop(signal.SIGTERM) == 0
    assert time.monotonic() - t < 15
    assert not endpoint.exists(), "endpoint.json is removed on a clean shutdown"
    assert (tmp_path / "ws" / "memory" / ".sidecar" / "token").exists()
    sidecar()  # the workspace is free again


def test_sigint_and_idle_exit(sidecar, tmp_path):
    assert sidecar(tmp_path / "a").stop(signal.SIGINT) == 0
    idle = sidecar(tmp_path / "b", "--idle-exit", "1")
    assert idle.proc.wait(timeout=120) == 0
    assert not (tmp_path / "b" / "memory" / ".sidecar" / "endpoint.json").exists()


def test_serve_refuses_a_non_loopback_host(tmp_path):
    proc = run_cli("-w", str(tmp_path / "ws"), "serve", "--host", "0.0.0.0", check=False)
    assert proc.returncode == 2 and "loopback only" in proc.stderr and "Traceback" not in proc.stderr


# ---- load -----------------------------------------------------------------------------
CLIENT = textwrap.dedent('''
    import http.client, json, sys
    host, port, token, client, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
    conn = http.client.HTTPConnection(host, port, timeout=60)
    errors = 0
    for i in range(n):
        ctx = {"agent_id": f"agent{int(client) % 4}", "session_id": f"c{client}", "run_id": f"c{client}-r{i // 10}"}
        if i % 10 == 0:
            name, event = "before_prompt_build", {"prompt": f"client {client} request {i}: what broke the deploy"}
        elif i % 10 == 5:
            name, event = "pre_tool", {"tool_name": "exec", "params": {"cmd": f"job {i}"}}
        else:
            name, event = "post_tool", {"tool_name": "exec", "params": {"cmd": f"job {i}"},
                                        "result": f"client {client} request {i} ok"}
        body = json.dumps({"ctx": ctx, "event": event})
        try:
            conn.request("POST", "/v1/" + name, body, {"Authorization": "Bearer " + token,
                                                      "Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            if resp.status != 200:
                errors += 1
                print("status", resp.status, data[:200], file=sys.stderr)
        except Exception as exc:
            errors += 1
            print("error", exc, file=sys.stderr)
            conn = http.client.HTTPConnection(host, port, timeout=60)
    print(json.dumps({"client": client, "errors": errors}))
''')


def test_eight_clients_times_a_thousand_requests_lose_nothing(sidecar, tmp_path):
    sc = sidecar()
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    n, clients = 1000, 8
    procs = [subprocess.Popen([sys.executable, str(script), *map(str, sc.address), sc.token, str(c), str(n)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in range(clients)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    assert [r["errors"] for r in results] == [0] * clients
    assert sc.stop() == 0
    entries = Ledger(tmp_path / "ws" / "memory").read()
    assert not entries.problems
    got = sorted(e.content for e in entries.entries.values())
    want = sorted([f"client {c} request {i}: what broke the deploy" for c in range(clients) for i in range(0, n, 10)]
                  + [f'exec({{"cmd":"job {i}"}}) -> client {c} request {i} ok'
                     for c in range(clients) for i in range(n) if i % 10 not in (0, 5)])
    assert len(got) == len(want) == clients * n * 8 // 10 + clients * n // 10
    assert got == want


def test_bench_bridge_measures_each_path_over_the_same_prompts(tmp_path):
    proc = run_cli("bench", "bridge", "--entries", "300", "--calls", "12", "--warmup", "2", "--json",
                   "--workdir", str(tmp_path))
    row = json.loads(proc.stdout)
    assert (row["entries"], row["calls"]) == (300, 12)
    paths = ["in_process", "http"] + (["plugin"] if "plugin_p50_ms" in row else [])
    for p in paths:
        assert 0 < row[f"{p}_p50_ms"] <= row[f"{p}_p95_ms"]
    # every path answered the same prompts over the same corpus: memory was delivered alike
    assert len({row[f"{p}_delivered"] for p in paths}) == 1 and row["in_process_delivered"] > 0
    if "plugin_p50_ms" in row:
        assert row["added_p95_ms"] == pytest.approx(row["plugin_p95_ms"] - row["in_process_p95_ms"], abs=1e-3)
        assert isinstance(row["target_met"], bool)
    else:
        assert row["plugin_skipped"] and row["target_met"] is None
    # (HOME is tmp_path/home in tests: onnxruntime keeps a file there once a sidecar has loaded a model)
    assert [p for p in tmp_path.iterdir() if p.name != "home"] == [], "the temporary workspaces are removed"


def test_the_sidecar_warms_up_its_vectors_before_it_serves(sidecar, tmp_path):
    """`memtier serve` loads (here: embeds) the workspace's vectors beside the server, right after it
    starts and with no request, so the first prompt does not pay for them."""
    from memtier_plugin.store.episodic import Ledger

    ws = tmp_path / "ws"
    led = Ledger(ws / "memory")
    for i in range(40):
        led.write_entry(agent_id="main", session_id=f"s{i // 10}", project="p", content=f"warm note {i}",
                        role="user", timestamp=1_795_000_000.0 + i)
    (ws / "memtier.yaml").write_text("embeddings:\n  backend: hashing\nweights:\n  sem: 1.0\n"
                                     "standing:\n  embedder: none\n")
    vectors = ws / "memory" / ".index" / "vectors"
    assert not vectors.exists() or not list(vectors.glob("*.f32"))
    sidecar(ws)  # returns once it printed its ready line; no request is sent
    deadline = time.monotonic() + 30
    while not (files := [f for f in vectors.glob("*.f32") if f.stat().st_size >= 40 * 4]) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    assert files  # every entry embedded without a request


def test_a_stop_signal_never_waits_for_a_lock_the_main_thread_holds():
    """The signal handler runs on the main thread, which may be inside ``Event.wait`` holding the Event's lock: a
    handler that calls ``stop.set()`` then waits for that lock and the sidecar never exits (it hung so in CI, a
    SIGTERM right after the ready line). The handler only sets a flag; the wait sees it and sets the Event."""
    import threading

    from memtier_plugin.bridges.stopping import StopOnSignals

    stop = threading.Event()
    held, release, timed_out = threading.Event(), threading.Event(), []

    def hold():  # stands for the main thread's own hold of the lock inside wait(): another holder, same lock
        with stop._cond:
            held.set()
            timed_out.append(not release.wait(10))

    with StopOnSignals(stop) as signals:
        holder = threading.Thread(target=hold)
        holder.start()
        held.wait(5)
        signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)  # what the interpreter runs on SIGTERM
        release.set()
        holder.join(15)
        signals.wait()  # returns at once: the flag is set
    assert timed_out == [False] and stop.is_set()
    assert signal.getsignal(signal.SIGTERM) is not signals._handler  # the previous handler is back


def test_a_sidecar_stopped_while_it_warms_up_exits_cleanly(sidecar, tmp_path):
    """SIGTERM right after the ready line lands while the warm-up may still be loading a model (bge-small,
    when set up): shutdown waits for it instead of exiting under it (which aborted the process)."""
    for i in range(3):
        assert sidecar(tmp_path / f"ws{i}").stop() == 0


# ---- issue 30: trust, lone surrogates, many clients -------------------------------------
def test_a_planted_symlink_never_redirects_the_token(tmp_path, monkeypatch):
    """Private files are created with O_EXCL | O_NOFOLLOW: a symlink planted under the temp name the
    writer draws (here made predictable) is skipped, and the file it points to is never written."""
    from memtier_plugin.bridges.sidecar_token import ensure_token
    from memtier_plugin.store import files

    d = tmp_path / "memory" / ".sidecar"
    d.mkdir(parents=True, mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    draws = iter([b"\x01" * 8, b"\x02" * 8, b"\x03" * 8])
    monkeypatch.setattr(files.os, "urandom", lambda n: next(draws)[:n])
    for n in (4, 8):  # the names a 4-byte and an 8-byte draw give: both planted
        (d / f".token.{os.getpid()}.{'01' * n}.tmp").symlink_to(victim)
    token = ensure_token(d / "token")
    assert victim.read_text() == "keep me", "the token went through the planted symlink"
    assert (d / "token").read_text().strip() == token and not (d / "token").is_symlink()
    assert stat.S_IMODE((d / "token").stat().st_mode) == 0o600


def test_the_token_is_rotated_after_an_unclean_exit(sidecar, tmp_path):
    sc = sidecar()
    killed = sc.token
    sc.stop(signal.SIGKILL)
    endpoint = tmp_path / "ws" / "memory" / ".sidecar" / "endpoint.json"
    assert endpoint.exists(), "a killed sidecar leaves its endpoint.json"
    again = sidecar()
    assert again.token != killed, "whatever listened on the dead sidecar's port may hold its token"
    assert again.request("GET", "/health", token=killed)[0] == 401
    assert json.loads(endpoint.read_text())["pid"] == again.proc.pid
    assert again.stop() == 0
    assert sidecar().token == again.token, "a clean exit keeps the token"


def test_the_challenge_proves_the_server_holds_the_token_without_receiving_it(sidecar):
    from memtier_plugin.bridges.sidecar_token import challenge_proof

    sc = sidecar()
    nonce = os.urandom(32).hex()
    status, answer = sc.request("GET", f"/v1/challenge?nonce={nonce}", token=None)
    assert status == 200
    assert (answer["service"], answer["pid"], answer["workspace"], answer["port"]) == \
        ("memtier", sc.proc.pid, str(sc.workspace), sc.address[1])
    assert answer["proof"] == challenge_proof(sc.token, nonce, sc.proc.pid, str(sc.workspace), sc.address[1])
    assert answer["proof"] != challenge_proof(sc.token, os.urandom(32).hex(), sc.proc.pid, str(sc.workspace),
                                              sc.address[1])
    for bad in ("", "abc", "Z" * 64, "a" * 200):
        assert sc.request("GET", f"/v1/challenge?nonce={bad}", token=None)[0] == 400


def test_lone_surrogate_escapes_are_recorded_as_replacement_characters(sidecar, tmp_path):
    """A JavaScript host's cut emoji arrives as a lone surrogate escape: recorded with U+FFFD, not refused."""
    sc = sidecar()
    ctx = {"agent_id": "main", "session_id": "s1", "run_id": "r1"}
    body = ('{"ctx": %s, "event": {"prompt": "the deploy broke \\ud83d", "messages": []}}' % json.dumps(ctx)).encode()
    status, answer = sc.request("POST", "/v1/before_prompt_build", body)
    assert status == 200, answer
    tool = ('{"ctx": %s, "event": {"tool_name": "exec", "params": {"cmd": "cat \\udc00"}, '
            '"result": "half \\ud83d\\ude00 whole \\ude00 low"}}' % json.dumps(ctx)).encode()
    assert sc.request("POST", "/v1/post_tool", tool)[0] == 200
    # still refused: what is not JSON at all
    assert sc.request("POST", "/v1/before_prompt_build", b'{"ctx": {}, "event": {"prompt": NaN}}')[0] == 400
    contents = sorted(v[-1] for v in ledger_view(tmp_path / "ws"))
    assert "the deploy broke \ufffd" in contents
    assert any("half \U0001F600 whole \ufffd low" in c for c in contents), contents


def _raw(sc: Sidecar, data: bytes = b"") -> socket.socket:
    s = socket.create_connection(sc.address, timeout=10)
    if data:
        s.sendall(data)
    return s


def _closed(s, within: float = 5.0) -> bool:
    """True when the server closes ``s`` (EOF or reset) within ``within`` seconds, reading what it sends."""
    s.settimeout(within)
    try:
        while s.recv(65536):
            pass
        return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def test_connections_past_the_cap_are_refused_before_anything_is_read(sidecar):
    sc = sidecar(None, "--max-connections", "8")
    idle = [_raw(sc) for _ in range(8)]  # eight connections that never send the token
    time.sleep(0.3)
    # a client with the token still gets in: the oldest connection without one makes room
    assert sc.request("GET", "/health")[0] == 200
    assert _closed(idle[0], 2), "the oldest idle connection without the token was closed"
    held = []
    for _ in range(8):  # eight authenticated keep-alive connections fill the cap
        conn = http.client.HTTPConnection(*sc.address, timeout=10)
        conn.request("GET", "/health", headers={"Authorization": f"Bearer {sc.token}"})
        assert conn.getresponse().read()
        held.append(conn)
    assert all(_closed(s, 2) for s in idle[1:]), "each made room for one"
    extra = _raw(sc, b"GET /health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + sc.token.encode() + b"\r\n\r\n")
    assert _closed(extra, 5), "the connection past the cap is closed unanswered"
    for conn in held:  # the ones within the cap go on
        conn.request("GET", "/health", headers={"Authorization": f"Bearer {sc.token}"})
        assert conn.getresponse().status == 200
        conn.close()
    time.sleep(0.3)
    assert sc.request("GET", "/health")[0] == 200


def test_a_trickled_request_is_cut_at_the_request_deadline(sidecar):
    sc = sidecar(None, "--request-timeout", "1.5")
    head = (f"POST /v1/before_prompt_build HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {sc.token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: 200\r\n\r\n").encode()
    s = _raw(sc, head)
    t0 = time.monotonic()
    answer = b""
    s.settimeout(0.3)
    while time.monotonic() - t0 < 20:
        try:
            s.sendall(b" ")  # a byte every 0.3 s: each read succeeds, the request never completes
        except OSError:
            break
        try:
            chunk = s.recv(4096)
            answer += chunk
            if not chunk:
                break
        except (TimeoutError, OSError):
            continue
    took = time.monotonic() - t0
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert took < 6, f"the trickle was held for {took:.1f} s"
    # the same for a request line that never ends
    s = _raw(sc, b"GET /hea")
    t0 = time.monotonic()
    assert _closed(s, 8) and time.monotonic() - t0 < 6
    assert sc.request("GET", "/health")[0] == 200


def test_idle_exit_ignores_clients_without_the_token(sidecar, tmp_path):
    sc = sidecar(None, "--idle-exit", "2", "--request-timeout", "30")
    stalled = _raw(sc, b"POST /v1/post_tool HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
    t0 = time.monotonic()
    while sc.proc.poll() is None and time.monotonic() - t0 < 20:
        try:  # unauthenticated requests keep coming; they are not activity
            sc.request("GET", "/health", token="wrong")
        except OSError:
            pass
        time.sleep(0.2)
    assert sc.proc.poll() == 0, "the sidecar went on serving no one"
    assert time.monotonic() - t0 < 15
    stalled.close()


def test_a_connection_without_the_token_is_closed_sooner_than_one_with_it(sidecar):
    from memtier_plugin.bridges.http import IDLE_TIMEOUT_S, UNAUTH_IDLE_S

    sc = sidecar()
    anonymous = _raw(sc)
    known = http.client.HTTPConnection(*sc.address, timeout=30)
    known.request("GET", "/health", headers={"Authorization": f"Bearer {sc.token}"})
    assert known.getresponse().read()
    t0 = time.monotonic()
    assert _closed(anonymous, UNAUTH_IDLE_S + 5)
    assert UNAUTH_IDLE_S - 1 < time.monotonic() - t0 < IDLE_TIMEOUT_S
    known.request("GET", "/health", headers={"Authorization": f"Bearer {sc.token}"})
    assert known.getresponse().status == 200, "a connection that sent the token is kept longer"
    known.close()


def test_clients_that_reset_early_cost_one_log_line_each_never_a_traceback(sidecar, tmp_path):
    import struct

    sc = sidecar()
    body = json.dumps({"ctx": {"agent_id": "main", "session_id": "s"},
                       "event": {"prompt": "what broke the deploy " * 50, "messages": []}}).encode()
    for _ in range(30):
        s = socket.create_connection(sc.address)
        s.sendall(f"POST /v1/before_prompt_build HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {sc.token}\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()  # RST: the answer has nowhere to go
    time.sleep(1.0)
    assert sc.request("GET", "/health")[0] == 200
    sc.proc.send_signal(signal.SIGTERM)
    _, err = sc.proc.communicate(timeout=30)
    assert sc.proc.returncode == 0
    assert "Traceback" not in err, err[:2000]
    lines = [line for line in err.splitlines() if "not delivered" in line]
    assert len(lines) <= 20, f"{len(lines)} lines: failed writes are rate-limited"
