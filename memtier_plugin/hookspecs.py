"""The host contract: pluggy markers and hook specifications.

Named after OpenClaw's typed plugin hooks (pre_tool = before_tool_call,
post_tool = after_tool_call). Every hook receives ``event`` (one of the
dataclasses in :mod:`memtier_plugin.events`) and ``ctx``
(:class:`~memtier_plugin.events.HookContext`: agent_id, session_key,
session_id, run_id, project, workspace_dir). An implementation may accept any
subset of the arguments; arguments are only ever added, never renamed.

pluggy calls implementations in priority order (``tryfirst`` first, then the
most recently registered); the host combines the answers as each spec says.
"""

from __future__ import annotations

import pluggy

from .events import (AgentEndEvent, CompactionEvent, HookContext, PromptAddition, PromptEvent,
                     SessionEndEvent, ToolCallEvent, ToolDecision, ToolResultEvent)

PROJECT = "memtier"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def before_prompt_build(event: PromptEvent, ctx: HookContext) -> PromptAddition | None:
    """Before each model call.

    :param event: PromptEvent — ``prompt`` (str), ``messages`` (list of
        ``{"role", "content"}`` dicts so far), ``timestamp`` (float or None).
    :param ctx: HookContext.
    :return: PromptAddition or None. All answers are concatenated in call
        order: ``prepend_context`` texts (memory, as context) and
        ``prepend_system_context`` texts (static guidance) separately.
    """


@hookspec
def pre_tool(event: ToolCallEvent, ctx: HookContext) -> ToolDecision | None:
    """A tool call is proposed and not yet run (OpenClaw before_tool_call).

    :param event: ToolCallEvent — ``tool_name``, ``params`` (dict),
        ``tool_call_id``, ``timestamp``.
    :param ctx: HookContext.
    :return: ToolDecision or None (allow). The first answer with
        ``block=True`` wins and its ``block_reason`` is shown to the agent;
        otherwise supplements are concatenated and the first ``params``
        rewrite applies. A check that cannot run must say so (a supplement)
        rather than silently allow a conflicting call.
    """


@hookspec
def post_tool(event: ToolResultEvent, ctx: HookContext) -> None:
    """The tool call returned (OpenClaw after_tool_call).

    :param event: ToolResultEvent — ``tool_name``, ``params``,
        ``tool_call_id``, ``result``, ``error`` (None on success),
        ``duration_ms``, ``timestamp``.
    :param ctx: HookContext.
    :return: ignored.
    """


@hookspec
def agent_end(event: AgentEndEvent, ctx: HookContext) -> None:
    """The run finished.

    :param event: AgentEndEvent — ``messages`` (the run's messages),
        ``success`` (bool), ``error``, ``duration_ms``, ``timestamp``.
    :param ctx: HookContext.
    :return: ignored.
    """


@hookspec
def before_compaction(event: CompactionEvent, ctx: HookContext) -> None:
    """The host is about to compact the conversation: flush what memory holds.

    :param event: CompactionEvent — ``messages`` about to be compacted.
    :param ctx: HookContext.
    :return: ignored.
    """


@hookspec
def session_end(event: SessionEndEvent, ctx: HookContext) -> None:
    """The host closes the session: flush and record working state.

    :param event: SessionEndEvent — ``reason``.
    :param ctx: HookContext.
    :return: ignored.
    """
