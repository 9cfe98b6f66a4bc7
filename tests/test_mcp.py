"""`memtier mcp`: the memory tools over MCP stdio, driven by the official SDK's own client."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from memtier_plugin.events import HookContext, PromptEvent, ToolResultEvent
from memtier_plugin.memory import reset_services
from memtier_plugin.bridges.sidecar import build_host


def mcp_session(workspace: Path, *args: str, env: dict | None = None):
    """An MCP ClientSession over stdio to `python -m memtier_plugin ... mcp ARGS` (async context manager)."""
    pytest.importorskip("mcp", reason="the MCP SDK is an optional extra: pip install -e '.[mcp]'")
    from contextlib import asynccontextmanager

    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    cmd = [sys.executable, "-m", "memtier_plugin", *(["-w", str(workspace)] if workspace else []), "mcp", *args]
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env={**os.environ, **(env or {})})

    @asynccontextmanager
    async def session():
        async with stdio_client(params) as streams:
            async with ClientSession(*streams) as s:
                await s.initialize()
                yield s

    return session()


def run(coro):
    import anyio

    return anyio.run(lambda: coro)


def hooks(workspace: Path, project: str = "shop"):
    """The pluggy path (reference host) for agent main in ``workspace``."""
    reset_services()
    return build_host(), HookContext(agent_id="main", session_id="hooked", run_id="r1", project=project,
                                     workspace_dir=str(workspace))


def test_tools_are_listed_with_their_arguments(tmp_path):
    async def go():
        async with mcp_session(tmp_path / "ws") as s:
            return {t.name: t.input_schema for t in (await s.list_tools()).tools}

    tools = run(go())
    assert sorted(tools) == ["memory_add", "memory_correct", "memory_forget", "memory_get", "memory_search"]
    assert tools["memory_search"]["required"] == ["query"] and "limit" in tools["memory_search"]["properties"]
    assert tools["memory_get"]["required"] == ["id"]
    assert tools["memory_add"]["required"] == ["content"]
    assert tools["memory_forget"]["required"] == ["ids"] and tools["memory_forget"]["properties"]["ids"]["type"] == "array"
    assert tools["memory_correct"]["required"] == ["id", "text"]


def test_memory_added_through_mcp_is_recalled_by_the_hooks(tmp_path, monkeypatch):
    ws = tmp_path / "ws"

    async def go():
        async with mcp_session(ws, "--agent", "main", "--project", "shop") as s:
            return await s.call_tool("memory_add", {"content": "the payments worker restarts with systemctl restart payq"})

    added = run(go())
    assert not added.is_error
    entry = added.structured_content
    assert entry["agent_id"] == "main" and entry["project"] == "shop" and entry["session_id"] == "mcp"
    monkeypatch.setenv("MEMTIER_WORKSPACE", str(ws))
    host, ctx = hooks(ws)
    memory = host.before_prompt_build(PromptEvent(prompt="how do I restart the payments worker?"), ctx)
    assert memory.prepend_context and entry["id"] in memory.prepend_context
    assert "systemctl restart payq" in memory.prepend_context


def test_memory_written_by_the_hooks_is_found_through_mcp(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    monkeypatch.setenv("MEMTIER_WORKSPACE", str(ws))
    host, ctx = hooks(ws)
    host.before_prompt_build(PromptEvent(prompt="the staging database moved to db-7 port 5433"), ctx)
    host.post_tool(ToolResultEvent("psql", {"host": "db-7"}, "c1", result="connected to db-7"), ctx)

    async def go():
        async with mcp_session(ws, "--agent", "main", "--project", "shop") as s:
            found = await s.call_tool("memory_search", {"query": "staging database db-7"})
            hits = found.structured_content["hits"]
            got = await s.call_tool("memory_get", {"id": hits[0]["id"]})
            missing = await s.call_tool("memory_get", {"id": "ep-20200101-000000000000"})
            return found, got, missing

    found, got, missing = run(go())
    contents = [h["content"] for h in found.structured_content["hits"]]
    assert "the staging database moved to db-7 port 5433" in contents
    assert any("connected to db-7" in c for c in contents)
    assert got.structured_content["found"] is True and got.structured_content["content"] in contents
    assert missing.structured_content == {"found": False, "id": "ep-20200101-000000000000"}


def test_agent_project_and_workspace_come_from_the_environment(tmp_path):
    ws = tmp_path / "envws"

    async def go():
        async with mcp_session(None, env={"MEMTIER_WORKSPACE": str(ws), "MEMTIER_AGENT": "coder",
                                          "MEMTIER_PROJECT": "api", "MEMTIER_SESSION": "cursor-1"}) as s:
            return await s.call_tool("memory_add", {"content": "api tests need REDIS_URL set", "role": "assistant"})

    added = run(go()).structured_content
    assert (added["agent_id"], added["project"], added["session_id"], added["role"]) == \
        ("coder", "api", "cursor-1", "assistant")
    assert list((ws / "memory" / "episodic" / "coder").glob("*.jsonl"))
    # another agent of the workspace does not see coder's private ledger
    async def other():
        async with mcp_session(ws, "--agent", "reviewer", "--project", "api") as s:
            return await s.call_tool("memory_search", {"query": "REDIS_URL api tests"})

    assert run(other()).structured_content["hits"] == []


def test_bad_arguments_are_tool_errors_in_one_line(tmp_path):
    async def go():
        async with mcp_session(tmp_path / "ws") as s:
            return [await s.call_tool(name, args) for name, args in (
                ("memory_search", {"query": "  "}), ("memory_add", {"content": "x", "role": "root"}),
                ("memory_search", {"query": "x", "limit": 0}))]

    for result in run(go()):
        assert result.is_error
        text = result.content[0].text
        assert "\n" not in text and ("must be" in text)


def test_a_path_like_agent_stops_the_server_with_one_line(tmp_path):
    pytest.importorskip("mcp", reason="the MCP SDK is an optional extra: pip install -e '.[mcp]'")
    proc = run_cli("-w", str(tmp_path / "ws"), "mcp", "--agent", "../../etc", check=False)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "agent id" in proc.stderr
    assert not (tmp_path / "etc").exists()


def test_without_the_sdk_mcp_says_how_to_install_it(tmp_path):
    code = ("import sys; sys.modules['mcp'] = None; sys.modules['mcp.server'] = None; "
            "sys.modules['mcp.server.mcpserver'] = None; from memtier_plugin.cli import cli; "
            f"cli(['-w', {str(tmp_path / 'ws')!r}, 'mcp'], prog_name='memtier')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "memtier: error: memtier mcp needs the MCP SDK: pip install 'memtier-plugin[mcp]'"
