"""Issue 29: the shared tiers on a real PostgreSQL, started by the test session (docs/shared.md).

Every test here runs against a throwaway server (``memtier_plugin.shared.server``: initdb + pg_ctl in a
temp folder, 127.0.0.1); hosts are real processes with workspaces of their own. Skipped, with the
reason, when psycopg (the ``shared`` extra) or the PostgreSQL binaries are missing; `.ci/run` installs
both and fails on a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from conftest import run_cli
from memtier_plugin.config import load_config
from memtier_plugin.events import AgentEndEvent, HookContext, PromptEvent, SessionEndEvent
from memtier_plugin.layers.extract import Candidate
from memtier_plugin.layers.global_layer import GlobalStore

psycopg = pytest.importorskip("psycopg", reason="the shared extra is not installed (pip install -e '.[shared]')")
pytest.importorskip("psycopg_pool", reason="the shared extra is not installed (pip install -e '.[shared]')")

from memtier_plugin.shared import schema  # noqa: E402
from memtier_plugin.shared.server import Server, find_bindir  # noqa: E402

pytestmark = [pytest.mark.pg, pytest.mark.skipif(find_bindir() is None, reason="no PostgreSQL server binaries "
                                                 "(initdb): apt-get install postgresql")]
APP = "memtier_app"
ATTRS = ("seat", "meal", "hotel", "airline", "budget")


@pytest.fixture(scope="module")
def pg():
    server = Server()
    app_dsn = server.add_role(APP)
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        schema.apply(conn, APP)
    server.app_dsn = app_dsn
    yield server
    server.destroy()


@pytest.fixture
def tenant(pg, monkeypatch) -> str:
    """A tenant of its own for each test, and the environment a host process reads it from."""
    name = "t-" + uuid.uuid4().hex[:10]
    monkeypatch.setenv("MEMTIER_PG_DSN", pg.app_dsn)
    monkeypatch.setenv("MEMTIER_SHARED__BACKEND", "postgres")
    monkeypatch.setenv("MEMTIER_SHARED__TENANT", name)
    monkeypatch.setenv("MEMTIER_STANDING__EMBEDDER", "none")
    return name


def host_config(ws: Path, host: str, **flags):
    return load_config(flags={"paths.workspace": str(ws), "shared.host_id": host, **flags})


def engine_rows(pg, tenant: str) -> list[dict]:
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:  # the owner: sees every tenant, filtered here
        cur = conn.execute("SELECT id, kind, target, body, origin_host FROM memtier_records WHERE tenant = %s ORDER BY seq",
                           (tenant,))
        return [{"id": i, "kind": k, "target": t, "body": b, "origin": o} for i, k, t, b, o in cur.fetchall()]


def wait_for(cond, timeout: float = 10.0, step: float = 0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        time.sleep(step)
    return cond()


def chain_problems(nodes: dict[str, dict], retired: list[tuple[str, str]]) -> list[str]:
    """What is wrong with one key's versions: forks (a version retired twice), not exactly one current
    version, a version whose successors do not lead to the current one."""
    out = []
    succ: dict[str, list[str]] = {}
    for old, by in retired:
        succ.setdefault(old, []).append(by)
    forks = [n for n, s in succ.items() if len(set(s)) > 1]
    if forks:
        out.append(f"{len(forks)} versions retired twice")
    current = [n for n in nodes if n not in succ]
    if len(current) != 1:
        out.append(f"{len(current)} current versions")
    for n in nodes:
        seen, cur = set(), n
        while cur in succ and cur not in seen:
            seen.add(cur)
            cur = succ[cur][0]
        if current and cur != current[0]:
            out.append(f"{n} does not lead to the current version")
            break
    return out


# ---- the schema and the role ---------------------------------------------------------------------------

def test_init_is_idempotent_when_two_hosts_run_it_at_once_and_checks_the_role(pg, tenant, monkeypatch):
    monkeypatch.setenv("MEMTIER_PG_ADMIN_DSN", pg.dsn())
    procs = [subprocess.Popen([sys.executable, "-m", "memtier_plugin", "shared", "init", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    for out, _err in outs:
        assert json.loads(out) == {"schema_version": 1, "role": APP, "problems": []}
    # the owner as the application role: refused, with every reason named
    monkeypatch.setenv("MEMTIER_PG_DSN", pg.dsn())
    bad = run_cli("shared", "doctor", check=False)
    assert bad.returncode == 1
    assert "superuser" in bad.stdout and "BYPASSRLS" in bad.stdout and "owns memtier_records" in bad.stdout
    monkeypatch.setenv("MEMTIER_PG_DSN", pg.app_dsn)
    good = json.loads(run_cli("shared", "doctor", "--json").stdout)
    assert good["problems"] == [] and good["server_version"] >= 150000


def test_a_missing_dsn_stops_the_sidecar_naming_the_variable(tenant, tmp_path, monkeypatch):
    monkeypatch.delenv("MEMTIER_PG_DSN")
    r = run_cli("-w", str(tmp_path / "ws"), "serve", check=False)
    assert r.returncode != 0 and "shared.dsn_env" in r.stderr and "MEMTIER_PG_DSN" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


# ---- isolation -----------------------------------------------------------------------------------------

def test_a_tenant_never_reads_another_tenants_rows_even_through_a_reused_pooled_connection(pg, tenant, tmp_path):
    from memtier_plugin.shared.engine import Engine
    from memtier_plugin.shared.sync import Sync

    cfg = host_config(tmp_path / "a", "a")
    GlobalStore(cfg.memory_root).upsert([Candidate("preference", "I always want an aisle seat", "seat", ["e1"])],
                                        agent_id="a", session_id="s", project="p", ts=time.time())
    sync = Sync(cfg)
    assert sync.ship_all() == 1 and sync.pushed == 1
    sync.engine.close()

    other = Engine(pg.app_dsn, "t-other", max_size=1)  # one connection: every transaction reuses it
    mine = Engine(pg.app_dsn, tenant, max_size=1)
    try:
        for _ in range(3):
            with mine.tx() as cur:
                cur.execute("SELECT count(*) FROM memtier_records")
                assert cur.fetchone()[0] == 1
            with other.tx() as cur:  # the same pooled connection shape, the other tenant: nothing
                cur.execute("SELECT count(*) FROM memtier_records")
                assert cur.fetchone()[0] == 0
                with pytest.raises(psycopg.errors.InsufficientPrivilege):  # nor can it write under another name
                    cur.execute("INSERT INTO memtier_records (tenant, tier, scope, id, kind, body, origin_host) "
                                "VALUES (%s, 'global', '*', 'gk-x', 'knowledge', '{}', 'h')", (tenant,))
        with mine._pool.connection() as conn:  # the tenant setting ended with each transaction
            assert conn.execute("SELECT count(*) FROM memtier_records").fetchone()[0] == 0
        with other.tx() as cur:  # and the other tenant's puller brings nothing into its host
            cur.execute("SELECT count(*) FROM memtier_heads")
            assert cur.fetchone()[0] == 0
    finally:
        other.close()
        mine.close()
    b = host_config(tmp_path / "b", "b", **{"shared.tenant": "t-other"})
    sb = Sync(b)
    assert sb.pull_once() == 0 and not (b.memory_root / "global" / "knowledge.jsonl").exists()
    sb.engine.close()


# ---- the feed ------------------------------------------------------------------------------------------

def test_the_feed_never_skips_a_row_whose_transaction_commits_late(pg, tenant, tmp_path):
    from memtier_plugin.shared.revisions import Pusher
    from memtier_plugin.shared.rows import to_row
    from memtier_plugin.shared.sync import Sync

    def node(i):
        return to_row("global", {"v": 1, "kind": "knowledge", "id": f"gk-20261203-{i:012x}", "timestamp": "2026-12-03T00:00:00Z",
                                 "node_kind": "preference", "content": f"preference number {i}", "attribute": ""})

    pusher = Pusher(tenant, "w")
    t1 = psycopg.connect(pg.app_dsn)
    t1.execute("SELECT set_config('memtier.tenant', %s, true)", (tenant,))
    pusher.push(t1.cursor(), [node(1)])  # takes seq n, stays open
    with psycopg.connect(pg.app_dsn) as t2:
        t2.execute("SELECT set_config('memtier.tenant', %s, true)", (tenant,))
        pusher.push(t2.cursor(), [node(2)])  # takes seq n+1, commits
        t2.commit()
    cfg = host_config(tmp_path / "r", "r")
    reader = Sync(cfg)
    assert reader.pull_once() == 0, "a committed row after an open one waits for it"
    t1.commit()
    t1.close()
    assert reader.pull_once() == 2
    lines = (cfg.memory_root / "global" / "knowledge.jsonl").read_text().splitlines()
    assert [json.loads(x)["content"] for x in lines] == ["preference number 1", "preference number 2"]
    assert reader.pull_once() == 0
    reader.engine.close()


# ---- supersession across hosts -------------------------------------------------------------------------

HOST_SCRIPT = textwrap.dedent('''
    import json, random, sys, time
    from memtier_plugin.config import load_config
    from memtier_plugin.layers.extract import Candidate
    from memtier_plugin.layers.global_layer import GlobalStore
    from memtier_plugin.shared.sync import Sync
    ws, host, n, attrs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].split(",")
    cfg = load_config(flags={"paths.workspace": ws, "shared.host_id": host, "shared.ship_interval_s": 0.02})
    sync = Sync(cfg).start()
    store = GlobalStore(cfg.memory_root, fsync=False)
    rnd = random.Random(host)
    print("ready", flush=True)
    sys.stdin.readline()  # every host starts at once
    for i in range(n):
        attr = attrs[rnd.randrange(len(attrs))]
        store.upsert([Candidate("preference", f"{host} says {attr} option {i} code {rnd.randrange(10**9)}", attr,
                                [f"{host}-e{i}"])], agent_id=f"agent{i % 12}", session_id=f"{host}-{i % 12}",
                     project="p", ts=time.time())  # 12 agents a host, each in its own session
    while sync.outbox.backlog_bytes():
        time.sleep(0.02)
    print("shipped", flush=True)
    sys.stdin.readline()  # every host has shipped: read the fleet's view
    while sync.pull_once():
        pass
    cur = {n.rec["attribute"]: n.id for n in GlobalStore(cfg.memory_root).current()}
    print(json.dumps(cur, sort_keys=True), flush=True)
    sync.close()
''')

NAIVE_SCRIPT = textwrap.dedent('''
    import random, sys, time
    from memtier_plugin.shared.engine import Engine
    from memtier_plugin.shared.revisions import Pusher
    from memtier_plugin.shared.rows import to_row
    from memtier_plugin.store.paths import utc_iso
    dsn, tenant, host, n, attrs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5].split(",")
    engine, pusher, rnd = Engine(dsn, tenant), Pusher(tenant, host), random.Random(host)
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(n):
        attr = attrs[rnd.randrange(len(attrs))]
        row = to_row("global", {"v": 1, "kind": "knowledge", "id": f"gk-20261203-{host}{i:09d}", "timestamp": utc_iso(),
                                "node_kind": "preference", "content": f"{host} {attr} {i}", "attribute": attr})
        with engine.tx() as cur:
            pusher.push(cur, [row], lock=False)
    print("shipped", flush=True)
''')


def _run_fleet(script: Path, argv_of, hosts: int) -> list[subprocess.Popen]:
    procs = [subprocess.Popen([sys.executable, str(script), *argv_of(h)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for h in range(hosts)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        line = p.stdout.readline().strip()
        assert line == "shipped", (line, p.stderr.read() if p.poll() is not None else "")
    return procs


def _engine_chains(pg, tenant) -> dict[str, list[str]]:
    rows = engine_rows(pg, tenant)
    nodes = {r["id"]: r["body"] for r in rows if r["kind"] == "knowledge"}
    problems = {}
    for attr in ATTRS:
        mine = {i: b for i, b in nodes.items() if b["attribute"] == attr}
        retired = [(r["target"], r["body"]["by"]) for r in rows if r["kind"] == "retired" and r["target"] in mine]
        problems[attr] = chain_problems(mine, retired)
    return problems


def test_eight_hosts_revising_five_attributes_at_once_keep_one_linear_chain_each_and_one_view(pg, tenant, tmp_path):
    script = tmp_path / "host.py"
    script.write_text(HOST_SCRIPT)
    procs = _run_fleet(script, lambda h: [str(tmp_path / f"host{h}"), f"h{h}", "100", ",".join(ATTRS)], 8)
    for p in procs:
        p.stdin.write("report\n")
        p.stdin.flush()
    views = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        views.append(json.loads(out.strip().splitlines()[-1]))
    assert all(v == views[0] for v in views), "every host sees the same current version of every attribute"
    assert sorted(views[0]) == sorted(ATTRS)
    rows = engine_rows(pg, tenant)
    assert len([r for r in rows if r["kind"] == "knowledge"]) == 800, "every revision is in the engine, once"
    assert _engine_chains(pg, tenant) == {a: [] for a in ATTRS}
    with psycopg.connect(pg.dsn(), autocommit=True) as conn:
        heads = dict(conn.execute("SELECT rev_key, head_id FROM memtier_heads WHERE tenant = %s", (tenant,)).fetchall())
    assert sorted(heads.values()) == sorted(views[0].values())


def test_the_naive_control_without_the_lock_forks(pg, tenant, tmp_path):
    script = tmp_path / "naive.py"
    script.write_text(NAIVE_SCRIPT)
    procs = _run_fleet(script, lambda h: [pg.app_dsn, tenant, f"n{h}", "100", ",".join(ATTRS)], 8)
    for p in procs:
        p.communicate(timeout=60)
    problems = _engine_chains(pg, tenant)
    assert any(any("retired twice" in x or "current versions" in x for x in v) for v in problems.values()), problems


def test_one_leader_per_tenant_and_the_next_takes_over_when_it_goes(pg, tenant):
    from memtier_plugin.shared.engine import Engine
    from memtier_plugin.shared.leader import Leader

    engine = Engine(pg.app_dsn, tenant)
    conns = [engine.connect() for _ in range(2)]
    leaders = [Leader(tenant, retry_s=0.0) for _ in range(2)]
    try:
        for leader, conn in zip(leaders, conns):
            leader.tick(conn)
        assert [x.is_leader for x in leaders] == [True, False]
        assert leaders[0].forks == 0 and leaders[1].forks is None, "only the leader runs the checks"
        conns[0].close()  # the leader's host dies: its session, and so its lock, ends (once the server sees it)
        assert wait_for(lambda: leaders[1].tick(conns[1]) or leaders[1].is_leader, timeout=10)
        assert leaders[1].forks == 0
    finally:
        for c in conns:
            c.close()
        engine.close()


# ---- two hosts, end to end -----------------------------------------------------------------------------

def test_a_preference_stated_on_host_a_reaches_host_b_within_a_second(pg, tenant, tmp_path):
    from test_sidecar import Sidecar

    a = Sidecar(tmp_path / "a", env={"MEMTIER_SHARED__HOST_ID": "a"})
    b = Sidecar(tmp_path / "b", env={"MEMTIER_SHARED__HOST_ID": "b"})
    try:
        wait_for(lambda: json.loads((tmp_path / "b" / "memory" / ".shared" / "status.json").read_text()).get("online")
                 if (tmp_path / "b" / "memory" / ".shared" / "status.json").exists() else False)
        b_file = tmp_path / "b" / "memory" / "global" / "knowledge.jsonl"
        lags = []
        for i in range(12):
            ctx = {"agent_id": "main", "session_id": f"s{i}", "run_id": f"r{i}", "project": "travel"}
            text = f"I always want {['an aisle seat', 'vegetarian meals', 'a quiet room'][i % 3]} on trip {i}."
            assert a.post("before_prompt_build", ctx, {"prompt": text, "messages": []})[0] == 200
            status, _ = a.post("agent_end", ctx, {"messages": [{"role": "assistant", "content": "Noted."}],
                                                  "success": True})
            t0 = time.monotonic()
            assert status == 200
            assert wait_for(lambda: b_file.exists() and f"trip {i}" in b_file.read_text(), timeout=10, step=0.005)
            lags.append(time.monotonic() - t0)
        lags.sort()
        assert lags[int(0.95 * (len(lags) - 1))] <= 1.0, lags
        ctx = {"agent_id": "main", "session_id": "q", "run_id": "q1", "project": "travel"}
        status, block = b.post("before_prompt_build", ctx, {"prompt": "Book my seat on the trip 11 flight: aisle or "
                                                             "window, you know what I want.", "messages": []})
        assert status == 200 and "aisle seat" in (block["prepend_context"] or ""), block
    finally:
        a.stop()
        b.stop()
    status = json.loads(run_cli("-w", str(tmp_path / "a"), "shared", "status", "--json", "--check").stdout)
    assert status["backlog_bytes"] == 0 and status["engine"]["reachable"]
    assert {h["host"] for h in status["engine"]["hosts"]} == {"a", "b"}, "each host reports its place in the feed"
    assert status["engine"]["rows"] >= 12


def test_a_fact_promoted_by_host_as_daemon_is_recalled_on_host_b(pg, tenant, tmp_path):
    ws_a, ws_b = tmp_path / "a", tmp_path / "b"
    env_a = {"MEMTIER_SHARED__HOST_ID": "a", "MEMTIER_CONSOLIDATION__DEBOUNCE_S": "0.05"}
    daemon = subprocess.Popen([sys.executable, "-m", "memtier_plugin", "-w", str(ws_a), "daemon"],
                              env={**os.environ, **env_a}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run_cli("-w", str(ws_a), "add", "--agent", "ops", "--project", "shop",
                "We decided the staging database is db-7 on port 5433.", env=env_a)
        fact = wait_for(lambda: next((r for r in engine_rows(pg, tenant) if r["kind"] == "fact"), None), timeout=30)
        assert fact and "db-7" in fact["body"]["content"] and fact["origin"] == "a"
    finally:
        daemon.terminate()
        daemon.communicate(timeout=30)
    env_b = {"MEMTIER_SHARED__HOST_ID": "b"}
    pulled = json.loads(run_cli("-w", str(ws_b), "shared", "pull", "--json", env=env_b).stdout)
    assert pulled["lines"] >= 1
    hits = json.loads(run_cli("-w", str(ws_b), "search", "--project", "shop", "--json", "which database does staging use",
                              env=env_b).stdout)
    assert any("db-7" in h["content"] and h["tier"] == "semantic" for h in hits["hits"]), hits
    assert not (ws_b / "memory" / "episodic").exists(), "episodes stay on the host that lived them"


# ---- the hook path and failures ------------------------------------------------------------------------

def _turn(host, ws, i, *, project="travel", ts=None):
    ctx = HookContext(agent_id="main", session_id=f"s{i}", run_id=f"r{i}", project=project, workspace_dir=str(ws))
    t0 = time.perf_counter()
    host.before_prompt_build(PromptEvent(f"I always want option {i} for my meals on trip {i}.",
                                         timestamp=ts), ctx)
    prompt_s = time.perf_counter() - t0
    host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": "Noted."}], success=True, timestamp=ts), ctx)
    host.session_end(SessionEndEvent("done", timestamp=ts), ctx)
    return prompt_s


def test_the_hook_path_makes_no_engine_call(pg, tenant, workspace):
    from memtier_plugin import plugin
    from memtier_plugin.host import Host
    from memtier_plugin.memory import reset_services
    from memtier_plugin.shared import sync as shared_sync

    reset_services()
    host = Host()
    host.register(plugin, "memtier")
    _turn(host, workspace, 0)
    running = wait_for(lambda: shared_sync._started.get(str((workspace / "memory").resolve())))
    assert running is not None
    for i in range(1, 6):
        _turn(host, workspace, i)
    assert wait_for(lambda: running.pushed >= 6), running.status
    assert running.engine.calls and "MainThread" not in running.engine.calls, dict(running.engine.calls)
    reset_services()


@pytest.mark.slow
def test_engine_stopped_for_thirty_seconds_loses_nothing_and_no_hook_fails(tenant, tmp_path, monkeypatch):
    from memtier_plugin import plugin
    from memtier_plugin.host import Host
    from memtier_plugin.memory import reset_services
    from memtier_plugin.shared.sync import read_status

    server = Server()  # a server of its own: it goes down mid-run
    try:
        dsn = server.add_role(APP)
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            schema.apply(conn, APP)
        monkeypatch.setenv("MEMTIER_PG_DSN", dsn)
        ws = tmp_path / "ws"
        ws.mkdir()
        reset_services()
        host = Host()
        host.register(plugin, "memtier")
        up = [_turn(host, ws, i) for i in range(5)]
        server.stop("immediate")
        down, t_end, i = [], time.monotonic() + 30, 5
        while time.monotonic() < t_end:
            down.append(_turn(host, ws, i))
            i += 1
            time.sleep(0.4)
        st = read_status(ws / "memory")
        assert st["online"] is False and st["offline_since"] and st["backlog_bytes"] > 0, st
        shown = run_cli("-w", str(ws), "shared", "status").stdout
        assert "OFFLINE since" in shown and "waiting to be shipped" in shown
        assert max(down) < 2.0, f"a prompt took {max(down):.2f} s with the engine down (budget 2 s)"
        server.start()
        t_back = time.monotonic()
        assert wait_for(lambda: read_status(ws / "memory").get("online") and
                        read_status(ws / "memory").get("backlog_bytes") == 0, timeout=30), read_status(ws / "memory")
        catch_up = time.monotonic() - t_back
        reset_services()
        local = [json.loads(x) for x in (ws / "memory" / "global" / "knowledge.jsonl").read_text().splitlines()]
        local_nodes = {r["id"] for r in local if r["kind"] == "knowledge"}
        assert len(local_nodes) == i, "every turn's preference was written locally"
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM memtier_records WHERE tenant = %s AND kind = 'knowledge'",
                                              (tenant,)).fetchall()]
        assert sorted(ids) == sorted(local_nodes), "every write reached the engine, once"
        assert catch_up < 30 and len(up) == 5
    finally:
        reset_services()
        server.destroy()


# ---- the outbox and the folds (no engine needed beyond the fixture) ------------------------------------

def test_pushing_again_is_a_no_op_and_a_torn_last_line_waits(pg, tenant, tmp_path):
    from memtier_plugin.shared.sync import Sync

    cfg = host_config(tmp_path / "a", "a")
    store = GlobalStore(cfg.memory_root)
    store.upsert([Candidate("preference", "I always want an aisle seat", "seat", ["e1"])],
                 agent_id="a", session_id="s", project="p", ts=time.time())
    path = cfg.memory_root / "global" / "knowledge.jsonl"
    with open(path, "ab") as f:  # a writer killed mid-line
        f.write(b'{"v": 1, "kind": "knowledge", "id": "gk-20261203-aaaaaaaaaaaa", "cont')
    sync = Sync(cfg)
    sync.ship_all()
    assert sync.pushed == 1
    again = Sync(cfg)
    again.outbox.reset()  # `memtier shared push --all`
    again.ship_all()
    assert again.pushed == 0, "what the engine holds is skipped by its id"
    assert len(engine_rows(pg, tenant)) == 1
    for s in (sync, again):
        s.engine.close()


def test_a_hung_engine_is_bounded_by_the_timeouts_and_never_reaches_a_hook(tenant, tmp_path, monkeypatch):
    """A peer that accepts and never answers (not a refusal): connects time out, the status says so, hooks
    never notice."""
    import socket
    import threading

    from memtier_plugin import plugin
    from memtier_plugin.host import Host
    from memtier_plugin.memory import reset_services
    from memtier_plugin.shared.sync import read_status

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held, stop = [], threading.Event()

    def accept():  # hold every connection open, say nothing (bounded by the test)
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    monkeypatch.setenv("MEMTIER_PG_DSN", f"postgresql://{APP}@127.0.0.1:{listener.getsockname()[1]}/postgres")
    monkeypatch.setenv("MEMTIER_SHARED__CONNECT_TIMEOUT_S", "1")
    ws = tmp_path / "ws"
    ws.mkdir()
    try:
        reset_services()
        host = Host()
        host.register(plugin, "memtier")
        times = [_turn(host, ws, i) for i in range(3)]
        assert wait_for(lambda: read_status(ws / "memory").get("online") is False, timeout=15), read_status(ws / "memory")
        times += [_turn(host, ws, i) for i in range(3, 8)]
        assert max(times) < 2.0, times
        st = read_status(ws / "memory")
        assert st["backlog_bytes"] > 0 and st["offline_since"] and held, st
    finally:
        reset_services()
        stop.set()
        t.join(5)
        for c in held:
            c.close()
        listener.close()


def test_a_refused_engine_is_one_line_naming_the_cause(tenant, tmp_path, monkeypatch):
    monkeypatch.setenv("MEMTIER_PG_DSN", "postgresql://nobody@127.0.0.1:1/x")
    for command in ("push", "pull", "doctor"):
        r = run_cli("-w", str(tmp_path / "ws"), "shared", command, check=False)
        assert r.returncode != 0 and "Connection refused" in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_forget_on_one_host_holds_on_every_host(pg, tenant, tmp_path):
    """`memtier forget` on host A: the tombstone (ids only) travels like the rest, and host B stops delivering
    the item; a purge stays on the host that ran it (each host removes the text from its own files)."""
    from memtier_plugin.shared.sync import Sync
    from memtier_plugin.store.tombstones import Forgotten

    a, b = host_config(tmp_path / "a", "a"), host_config(tmp_path / "b", "b")
    GlobalStore(a.memory_root).upsert([Candidate("preference", "I always want an aisle seat", "seat", ["e1"])],
                                      agent_id="main", session_id="s", project="travel", ts=time.time())
    sa, sb = Sync(a), Sync(b)
    try:
        sa.ship_all()
        assert sb.pull_once() == 1
        node = GlobalStore(b.memory_root).current()[0].id
        ask = ("-w", str(tmp_path / "b"), "search", "--project", "travel", "--json", "book me an aisle seat")
        assert node in run_cli(*ask).stdout
        run_cli("-w", str(tmp_path / "a"), "forget", node, "--yes", "--purge")
        sa.ship_all()
        assert sb.pull_once() == 1
        assert node in Forgotten(b.memory_root).ids()
        assert node not in run_cli(*ask).stdout, "host B no longer delivers what the user forgot on host A"
        kinds = [json.loads(x)["kind"] for x in (b.memory_root / "forgotten.jsonl").read_text().splitlines()]
        assert kinds == ["forget"], "the purge record stays on host A"
    finally:
        sa.engine.close()
        sb.engine.close()


def test_one_process_syncs_a_workspace_and_a_pull_beside_it_is_refused(pg, tenant, tmp_path):
    from memtier_plugin.shared.sync import Sync

    cfg = host_config(tmp_path / "a", "a")
    first, second = Sync(cfg).start(), Sync(cfg).start()
    try:
        assert wait_for(lambda: first.status["role"] == "syncing" or second.status["role"] == "syncing")
        time.sleep(0.3)
        assert [first.status["role"], second.status["role"]].count("syncing") == 1, "the other one stands by"
        r = run_cli("-w", str(tmp_path / "a"), "shared", "pull", check=False, env={"MEMTIER_SHARED__HOST_ID": "a"})
        assert r.returncode != 0 and "syncs this workspace" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    finally:
        first.close()
        second.close()
