"""Every test runs in its own temporary workspace; nothing touches a real one."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from memtier_plugin.models.paths import default_models_dir

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "workspace-fixtures"
SHARED_DATA = Path(os.environ.get("MEMTIER_DATA", ROOT.parent / "shared" / "data"))
# The user's models folder (what `memtier model setup` fetched), resolved before HOME is isolated:
# tests keep seeing it, so the embed-marked tests run where the models were fetched.
MODELS_DIR = default_models_dir()
# Set by .ci/run where npm is on PATH: there an openclaw-marked skip is a broken install step, not a
# missing platform, so it fails the run (read here, before the fixture below clears MEMTIER_*).
REQUIRE_OPENCLAW = os.environ.get("MEMTIER_REQUIRE_OPENCLAW") == "1"
# Set by .ci/run after it installed Chromium and the ui-test extra: a browser-marked skip there is a broken
# install step, so it fails the run too.
REQUIRE_BROWSER = os.environ.get("MEMTIER_REQUIRE_BROWSER") == "1"
# Set by .ci/run after it installed PostgreSQL and the shared extra: a pg-marked skip there fails the run.
REQUIRE_PG = os.environ.get("MEMTIER_REQUIRE_PG") == "1"
#: marker -> (required by the environment, outcome per test id)
_REQUIRED = {"openclaw": (REQUIRE_OPENCLAW, "npm is on PATH (MEMTIER_REQUIRE_OPENCLAW=1)", {}),
             "browser": (REQUIRE_BROWSER, "Chromium and Playwright were installed (MEMTIER_REQUIRE_BROWSER=1)", {}),
             "pg": (REQUIRE_PG, "PostgreSQL and the shared extra were installed (MEMTIER_REQUIRE_PG=1)", {})}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    for marker, (required, why, outcomes) in _REQUIRED.items():
        if item.get_closest_marker(marker) is None:
            continue
        if report.skipped and required:
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            report.outcome = "failed"
            report.longrepr = f"{marker} test skipped while {why}: {reason}"
        if report.when == "call" or report.outcome != "passed":
            outcomes.setdefault(item.nodeid, report.outcome)


def pytest_terminal_summary(terminalreporter):
    for marker, (_, _, outcomes) in _REQUIRED.items():
        if outcomes:
            counts = Counter(outcomes.values())
            terminalreporter.write_line(f"{marker} tests: " + ", ".join(f"{counts[k]} {k}"
                                                                      for k in ("passed", "failed", "skipped")))


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("MEMTIER_") and name != "MEMTIER_DATA":
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MEMTIER_MODELS_DIR", str(MODELS_DIR))
    from memtier_plugin.memory import reset_services

    reset_services()
    yield
    reset_services()


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    monkeypatch.setenv("MEMTIER_WORKSPACE", str(ws))
    return ws


@pytest.fixture(params=["lexical", "default"])
def mode_host(request, workspace, monkeypatch):
    """The reference host with memtier; 'lexical' forces the no-embedding path of standing knowledge, 'default'
    uses what is installed."""
    from memtier_plugin import plugin
    from memtier_plugin.host import Host

    if request.param == "lexical":
        monkeypatch.setenv("MEMTIER_STANDING__EMBEDDER", "none")
    h = Host()
    h.register(plugin, "memtier")
    return h


def run_cli(*args, env=None, input=None, check=True):
    """Run the real `memtier` command in a subprocess (python -m memtier_plugin)."""
    import subprocess

    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "memtier_plugin", *args], capture_output=True, text=True,
                          env=full_env, input=input, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"memtier {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def say(host, ws, text, *, session, at, agent="a", project="p"):
    """One whole session through the host: ``text`` as its prompt at ``at``, agent_end, session_end."""
    from memtier_plugin.events import AgentEndEvent, HookContext, PromptEvent, SessionEndEvent

    ctx = HookContext(agent_id=agent, session_id=session, run_id=f"{session}-r", project=project,
                      workspace_dir=str(ws))
    host.before_prompt_build(PromptEvent(text, timestamp=at), ctx)
    host.agent_end(AgentEndEvent(messages=[], success=True, timestamp=at + 5), ctx)
    host.session_end(SessionEndEvent("done", timestamp=at + 9), ctx)
