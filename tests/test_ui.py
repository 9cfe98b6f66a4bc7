"""`memtier ui` over real loopback HTTP: the token, the Host and Origin guards, id checks, and the views
of a workspace the demo filled (every layer) plus hostile lines. The page in a real browser is
tests/test_ui_browser.py."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import signal
import subprocess
import sys
import threading
from urllib.parse import urlsplit

import pytest

from conftest import run_cli

HOSTILE_SCRIPT = "<script>alert(1)</script> the Zanzibar ferry leaves at noon"
HOSTILE_IMG = '"><img src=x onerror=alert(1)> the Zanzibar ferry costs 40 dollars'
QUERY = "Zanzibar%20ferry"


def fill(workspace) -> None:
    """The demo's workspace (episodes, facts, the Global layer, skills, state, traces) and two hostile lines."""
    env = {"HOME": str(workspace.parent / "home")}
    run_cli("demo", "--quiet", "--into", str(workspace), env=env)
    for text in (HOSTILE_SCRIPT, HOSTILE_IMG):
        run_cli("-w", str(workspace), "add", "-a", "assistant", "-s", "hostile", "-p", "travel", text, env=env)


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """One filled workspace per module (the demo takes seconds); each test gets its own copy."""
    ws = tmp_path_factory.mktemp("ui-template") / "workspace"
    fill(ws)
    return ws


@pytest.fixture
def filled_workspace(filled, workspace):
    shutil.copytree(filled, workspace, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".index"))
    return workspace


class Page:
    """A running `memtier ui` (in this process, on a real socket) and a raw HTTP client for it."""

    def __init__(self, workspace):
        from memtier_plugin.bridges.ui import serve
        from memtier_plugin.config import load_config
        from memtier_plugin.memory import Memory

        self.mem = Memory(load_config(None, flags={"paths.workspace": str(workspace)}))
        self.stop = threading.Event()
        ready = threading.Event()
        self.url = ""

        def on_ready(url):
            self.url = url
            ready.set()

        self.thread = threading.Thread(target=serve, args=(self.mem,), kwargs={"on_ready": on_ready, "stop": self.stop},
                                       daemon=True)
        self.thread.start()
        assert ready.wait(20), "memtier ui did not start"
        parts = urlsplit(self.url)
        self.port = parts.port
        self.token = parts.query.split("token=", 1)[1]
        self.host = f"127.0.0.1:{self.port}"
        self.origin = f"http://{self.host}"

    def request(self, method, path, *, headers=None, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        h = {"Host": self.host, **(headers or {})}
        h = {k: v for k, v in h.items() if v is not None}
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        conn.request(method, path, body=data, headers=h)
        resp = conn.getresponse()
        raw = resp.read()
        conn.close()
        return resp.status, dict(resp.getheaders()), raw

    def api(self, path, *, body=None, headers=None):
        h = {"X-Memtier-Token": self.token, **(headers or {})}
        if body is not None:
            h = {"Origin": self.origin, "Content-Type": "application/json", **h}
        status, _, raw = self.request("POST" if body is not None else "GET", "/api/" + path, headers=h, body=body)
        return status, json.loads(raw)

    def close(self):
        self.stop.set()
        self.thread.join(10)
        self.mem.close()


@pytest.fixture
def page(filled_workspace):
    p = Page(filled_workspace)
    yield p
    p.close()


def test_the_page_needs_the_token_of_this_run(page):
    assert page.request("GET", "/")[0] == 401
    assert page.request("GET", "/?token=" + "x" * 43)[0] == 401
    status, headers, raw = page.request("GET", "/?token=" + page.token)
    assert status == 200
    nonce = re.search(r"script-src 'nonce-([^']+)'", headers["Content-Security-Policy"]).group(1)
    assert f'<script nonce="{nonce}">' in raw.decode() and "default-src 'none'" in headers["Content-Security-Policy"]
    assert "http://" not in raw.decode() and "https://" not in raw.decode()  # no external asset
    # a second load gets a new nonce (a nonce seen once is worth nothing later)
    assert page.request("GET", "/?token=" + page.token)[1]["Content-Security-Policy"] != headers["Content-Security-Policy"]


def test_the_api_needs_the_token_header(page):
    assert page.request("GET", "/api/episodes")[0] == 401
    assert page.request("GET", f"/api/episodes?token={page.token}")[0] == 401  # the header, not the URL
    assert page.request("GET", "/api/episodes", headers={"X-Memtier-Token": page.token[:-1] + ("B" if page.token.endswith("A") else "A")})[0] == 401
    status, body = page.api("episodes")
    assert status == 200 and body["agents"]
    status, _, raw = page.request("POST", "/api/forget", headers={"Origin": page.origin, "Content-Type": "application/json"},
                                  body={"ids": ["ep-x"]})
    assert status == 401 and "token" in json.loads(raw)["error"]


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1:1", "127.0.0.2:{port}",
                                  "localhost.evil.example:{port}", ""])
def test_a_host_that_is_not_this_loopback_server_is_refused(page, host):
    """DNS rebinding: a page on evil.example whose name now points at 127.0.0.1 sends Host: evil.example."""
    host = host.format(port=page.port)
    for path, headers in (("/?token=" + page.token, {}), ("/api/episodes", {"X-Memtier-Token": page.token})):
        status, _, raw = page.request("GET", path, headers={**headers, "Host": host})
        assert status == 403, (host, path)
        assert "Host" in json.loads(raw)["error"]
    for good in (f"localhost:{page.port}", f"[::1]:{page.port}", f"127.0.0.1:{page.port}"):
        assert page.request("GET", "/api/facts", headers={"X-Memtier-Token": page.token, "Host": good})[0] == 200


@pytest.mark.parametrize("origin", ["http://evil.example", "http://127.0.0.1:1", "https://127.0.0.1:{port}", "null"])
def test_an_origin_that_is_not_this_page_is_refused(page, origin):
    origin = origin.format(port=page.port)
    status, body = page.api("episodes", headers={"Origin": origin})
    assert status == 403 and "Origin" in body["error"]
    status, body = page.api("forget", body={"ids": ["ep-x"]}, headers={"Origin": origin})
    assert status == 403 and "Origin" in body["error"]
    assert page.api("episodes", headers={"Sec-Fetch-Site": "cross-site"})[0] == 403


def test_a_post_must_come_from_this_page_as_json(page):
    status, body = page.api("forget", body={"ids": ["ep-x"]}, headers={"Origin": None})
    assert status == 403 and "Origin" in body["error"]
    status, body = page.api("forget", body={"ids": ["ep-x"]}, headers={"Content-Type": "text/plain"})
    assert status == 415  # a form post (no preflight) is never accepted
    status, body = page.api("forget", body=b"{not json", headers={})
    assert status == 400 and "JSON" in body["error"]


@pytest.mark.parametrize("payload, where", [
    ({"ids": ["../../etc/passwd"]}, "ids[]"), ({"ids": ["<script>"]}, "ids[]"), ({"ids": "ep-1"}, "ids"),
    ({"ids": []}, "ids"), ({"ids": [7]}, "ids[]"), ({"ids": ["a" * 300]}, "ids[]"),
])
def test_ids_sent_to_forget_are_checked(page, payload, where):
    status, body = page.api("forget", body=payload)
    assert status == 400 and body["error"].startswith(where + ":")
    status, body = page.api("correct", body={"id": "a/b", "text": "x"})
    assert status == 400 and body["error"].startswith("id:")


def test_agents_and_queries_in_urls_are_checked(page):
    status, body = page.api("traces?agent=../../x")
    assert status == 400 and "agent" in body["error"]
    assert page.api("search?q=x&agent=a%2Fb")[0] == 400
    assert page.api("search?q=")[0] == 400
    assert page.api("nothing")[0] == 404


def test_the_views_show_every_layer_with_stored_text_as_data(page):
    status, eps = page.api("episodes")
    assert status == 200
    agents = {a["agent_id"]: a for a in eps["agents"]}
    assert {"assistant", "deployer", "ops", "planner"} <= set(agents)
    contents = [e["content"] for s in agents["assistant"]["sessions"] for e in s["entries"]]
    assert HOSTILE_SCRIPT in contents and HOSTILE_IMG in contents  # as stored: escaping is the page's job

    facts = page.api("facts")[1]["projects"]
    assert facts and all(chain for p in facts for chain in p["chains"])
    assert any(len(chain) >= 1 and chain[-1]["id"].startswith("sf-") for p in facts for chain in p["chains"])
    topics = page.api("global")[1]["topics"]
    assert any(t["items"] for t in topics)
    for t in topics:  # every parent of a topic is listed too, so the tree has no hole
        assert set(t["parents"]) <= {x["topic"] for x in topics}
    ws = page.api("workspace")[1]["projects"]
    assert any(p["skills"] for p in ws) and any(p["state"] for p in ws)

    traces = page.api("traces")[1]["traces"]
    assert traces and any(t["delivered"] for t in traces)
    row = next(d for t in traces for d in t["delivered"])
    assert set(row["signals"]) and row["content"]  # delivered and why: signals, and the text it stood for
    assert all(isinstance(t["left_out"], list) for t in traces)
    only_ops = page.api("traces?agent=ops")[1]["traces"]
    assert only_ops and {t["agent_id"] for t in only_ops} == {"ops"}


def test_search_explains_every_signal_as_memtier_search_does(page, workspace):
    status, body = page.api("search?q=" + QUERY + "&agent=assistant")
    assert status == 200 and body["hits"]
    hit = next(h for h in body["hits"] if h["content"] == HOSTILE_SCRIPT)
    assert {"sem", "bm25", "decay", "cw", "tier"} <= set(hit["signals"])
    for s in hit["signals"].values():
        assert s["contribution"] == pytest.approx(s["value"] * s["weight"])
    assert hit["score"] == pytest.approx(sum(s["contribution"] for s in hit["signals"].values()))
    cli = json.loads(run_cli("-w", str(workspace), "search", "--json", "-a", "assistant", "Zanzibar ferry").stdout)
    assert [h["id"] for h in cli["hits"]] == [h["id"] for h in body["hits"]]
    assert [h["signals"] for h in cli["hits"]] == [h["signals"] for h in body["hits"]]


def test_forgotten_items_leave_every_view(page):
    """A tombstone written by another process (memtier forget, the sidecar) applies at the page's next call."""
    from memtier_plugin.store import tombstones

    hit = next(h for h in page.api("search?q=" + QUERY + "&agent=assistant")[1]["hits"]
               if h["content"] == HOSTILE_SCRIPT)
    trace_row = next(d for t in page.api("traces")[1]["traces"] for d in t["delivered"])
    tombstones.append(page.mem.config.memory_root, [tombstones.forget_record(hit["id"], "episode"),
                                                    tombstones.forget_record(trace_row["id"], "episode")])
    hits = page.api("search?q=" + QUERY + "&agent=assistant")[1]["hits"]
    assert hit["id"] not in {h["id"] for h in hits}
    eps = page.api("episodes")[1]
    assert hit["id"] not in {e["id"] for a in eps["agents"] for s in a["sessions"] for e in s["entries"]}
    rows = [d for t in page.api("traces")[1]["traces"] for d in t["delivered"] if d["id"] == trace_row["id"]]
    assert rows and all(r["forgotten"] and r["content"] is None for r in rows)


def test_forget_and_correct_through_the_api(page):
    status, body = page.api("forget", body={"ids": ["ep-20000101-000000000000"]})
    assert status == 200 and body["unknown"] == ["ep-20000101-000000000000"] and not body["forgotten"]
    hit = next(h for h in page.api("search?q=" + QUERY + "&agent=assistant")[1]["hits"] if h["content"] == HOSTILE_IMG)
    status, body = page.api("forget", body={"ids": [hit["id"]]})
    assert status == 200 and body["forgotten"] == [{"id": hit["id"], "layer": "episode"}]
    assert hit["id"] not in {h["id"] for h in page.api("search?q=" + QUERY + "&agent=assistant")[1]["hits"]}
    fact = page.api("facts")[1]["projects"][0]["chains"][0][-1]
    status, body = page.api("correct", body={"id": fact["id"], "text": "The user now prefers window seats"})
    assert status == 200 and body["old"] == fact["id"]
    chains = [c for p in page.api("facts")[1]["projects"] for c in p["chains"] if fact["id"] in {f["id"] for f in c}]
    assert chains and chains[0][-1]["content"] == "The user now prefers window seats"
    status, body = page.api("correct", body={"id": hit["id"], "text": "x"})
    assert status == 400 and hit["id"] in body["error"]  # forgotten: one line saying so


def test_memtier_ui_prints_its_url_and_exits_on_sigterm(workspace):
    proc = subprocess.Popen([sys.executable, "-m", "memtier_plugin", "-w", str(workspace), "ui", "--json", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = json.loads(proc.stdout.readline())["url"]
        parts = urlsplit(url)
        assert parts.hostname == "127.0.0.1" and parts.port and re.fullmatch(r"token=[\w-]{40,}", parts.query)
        conn = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=10)
        conn.request("GET", parts.path + "?" + parts.query)
        assert conn.getresponse().status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0
    bad = run_cli("-w", str(workspace), "ui", "--host", "0.0.0.0", check=False)
    assert bad.returncode == 2 and "loopback only" in bad.stderr
