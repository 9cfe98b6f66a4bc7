"""memtier's built-in plugin: thin hook implementations over :mod:`memory`.

Each hook body is the isolation boundary: a memory failure is logged with its
traceback and the hook returns nothing, so the agent's turn goes on. The one
exception is pre_tool: a check that cannot run says so in a supplement rather
than silently allowing a call it was meant to check.
"""

from __future__ import annotations

import logging

from .hookspecs import hookimpl
from .memory import memory_for

log = logging.getLogger(__name__)
PLUGIN_NAME = "memtier"


@hookimpl
def before_prompt_build(event, ctx):
    try:
        return memory_for(ctx).on_prompt(event, ctx)
    except Exception:
        log.exception("memtier before_prompt_build failed; the turn goes on without memory")
        return None


@hookimpl
def pre_tool(event, ctx):
    try:
        return memory_for(ctx).on_pre_tool(event, ctx)
    except Exception as exc:
        log.exception("memtier pre_tool check failed")
        from .events import ToolDecision

        return ToolDecision(supplement=f"[memtier] memory check could not run for {event.tool_name}: "
                                       f"{type(exc).__name__}; proceed with care")


@hookimpl
def post_tool(event, ctx):
    try:
        memory_for(ctx).on_post_tool(event, ctx)
    except Exception:
        log.exception("memtier post_tool failed; outcome not recorded")


@hookimpl
def agent_end(event, ctx):
    try:
        memory_for(ctx).on_agent_end(event, ctx)
    except Exception:
        log.exception("memtier agent_end failed")


@hookimpl
def before_compaction(event, ctx):
    try:
        memory_for(ctx).on_compaction(event, ctx)
    except Exception:
        log.exception("memtier before_compaction failed")


@hookimpl
def session_end(event, ctx):
    try:
        memory_for(ctx).on_session_end(ctx)
    except Exception:
        log.exception("memtier session_end failed")
