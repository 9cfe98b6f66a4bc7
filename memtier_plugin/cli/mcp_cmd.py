"""`memtier mcp`: memory_search, memory_get and memory_add for MCP clients, over stdio."""

from __future__ import annotations

import click


@click.command()
@click.option("--agent", "-a", envvar="MEMTIER_AGENT", default="main", show_default=True,
              help="Agent whose memory this is (env MEMTIER_AGENT).")
@click.option("--project", "-p", envvar="MEMTIER_PROJECT", default="",
              help="Project the entries belong to and recall is scoped to (env MEMTIER_PROJECT).")
@click.option("--session", "-s", envvar="MEMTIER_SESSION", default="mcp", show_default=True,
              help="Session id added entries carry (env MEMTIER_SESSION).")
@click.pass_obj
def mcp(state, agent, project, session):
    """Serve memory to an MCP client (Claude Code, Codex, Cursor, ...) over stdin/stdout.

    Needs the mcp extra: pip install 'memtier-plugin[mcp]'.
    """
    from ..events import HookContext
    from ..bridges.mcp import run_stdio
    from .serve_cmd import export_config

    cfg = export_config(state)
    run_stdio(HookContext(agent_id=agent, session_id=session, project=project, workspace_dir=str(cfg.workspace)))
