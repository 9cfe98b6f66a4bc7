"""One test per host hook, through the reference host and the built-in plugin (datasette's meta-test).

``test_every_hook_has_a_test`` fails when a hook is added to ``hookspecs``
without a ``test_hook_<name>`` here.
"""

from __future__ import annotations

import json
import sys

import pytest

from memtier_plugin import hookspecs, plugin
from memtier_plugin.events import (AgentEndEvent, CompactionEvent, HookContext, PromptEvent, SessionEndEvent,
                                   ToolCallEvent, ToolResultEvent)
from memtier_plugin.host import Host

SPECS = sorted(name for name in dir(hookspecs) if hasattr(getattr(hookspecs, name), "memtier_spec"))
T0 = 1_790_000_000.0  # a fixed clock for the events (2026-09-21)


def test_every_hook_has_a_test():
    here = sys.modules[__name__]
    assert SPECS and all(callable(getattr(here, f"test_hook_{name}", None)) for name in SPECS), SPECS


@pytest.fixture
def host(workspace):
    h = Host()
    h.register(plugin)
    return h


def ctx(workspace, run="r1", session="s1") -> HookContext:
    return HookContext(agent_id="coder", session_key="agent:coder:k", session_id=session, run_id=run,
                       project="atlas", workspace_dir=str(workspace))


def records(workspace, sub: str) -> list[dict]:
    out = []
    for path in sorted((workspace / "memory" / sub).rglob("*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines()]
    return out


def entries(workspace) -> list[dict]:
    return [r for r in records(workspace, "episodic") if r.get("kind", "entry") == "entry"]


def test_hook_before_prompt_build(host, workspace):
    first = host.before_prompt_build(PromptEvent("the staging database is db-7 on port 5433", timestamp=T0),
                                     ctx(workspace))
    assert first.prepend_context is None  # nothing to recall yet
    assert [e["content"] for e in entries(workspace)] == ["the staging database is db-7 on port 5433"]
    later = host.before_prompt_build(PromptEvent("which port does the staging database use?", timestamp=T0 + 60),
                                     ctx(workspace, run="r2"))
    assert later.prepend_context and "db-7 on port 5433" in later.prepend_context


def test_hook_pre_tool(host, workspace):
    c = ctx(workspace)
    host.before_prompt_build(PromptEvent("run the tests", timestamp=T0), c)
    decision = host.pre_tool(ToolCallEvent("exec", {"command": "pytest -q"}, "call-1", timestamp=T0 + 1), c)
    assert decision.block is False  # nothing in memory goes against it
    traces = records(workspace, "traces")
    assert any(t.get("kind") == "decision" and t.get("tool") == "exec" for t in traces)


def test_hook_post_tool(host, workspace):
    c = ctx(workspace)
    host.before_prompt_build(PromptEvent("deploy atlas to staging", timestamp=T0), c)
    host.post_tool(ToolResultEvent("deploy", {"env": "staging"}, "call-1", result="ok: v42 live",
                                   timestamp=T0 + 2), c)
    tools = [e for e in entries(workspace) if e["role"] == "tool"]
    assert len(tools) == 1 and "ok: v42 live" in tools[0]["content"]
    assert tools[0]["provenance"]["tool_call_id"] == "call-1"


def test_hook_agent_end(host, workspace):
    c = ctx(workspace)
    host.before_prompt_build(PromptEvent("deploy atlas to staging", timestamp=T0), c)
    host.agent_end(AgentEndEvent(messages=[{"role": "assistant", "content": "Deployed v42 to staging."}],
                                 success=True, timestamp=T0 + 5), c)
    assert [e["content"] for e in entries(workspace) if e["role"] == "assistant"] == ["Deployed v42 to staging."]
    assert any(t.get("kind") == "run_end" and t.get("run_id") == "r1" for t in records(workspace, "traces"))


def knowledge(workspace) -> list[str]:
    return [r["content"] for r in records(workspace, "global") if r.get("kind") == "knowledge"]


def test_hook_before_compaction(host, workspace):
    c = ctx(workspace)
    host.before_prompt_build(PromptEvent("I always want an aisle seat on flights", timestamp=T0), c)
    before = knowledge(workspace)
    assert host.before_compaction(CompactionEvent(timestamp=T0 + 2), c) is None
    after = knowledge(workspace)  # the session's standing knowledge is kept before the host compacts
    assert len(after) == len(before) + 1 and "aisle seat" in after[-1]


def test_hook_session_end(host, workspace):
    c = ctx(workspace)
    host.before_prompt_build(PromptEvent("I always want an aisle seat on flights", timestamp=T0), c)
    before = knowledge(workspace)
    assert host.session_end(SessionEndEvent(reason="closed", timestamp=T0 + 3), c) is None
    after = knowledge(workspace)
    assert len(after) == len(before) + 1 and "aisle seat" in after[-1]
    # the session's runs are forgotten: a later prompt of the session starts a new run
    host.before_prompt_build(PromptEvent("book the flight", timestamp=T0 + 9), c)
    assert [e["content"] for e in entries(workspace)][-1] == "book the flight"
