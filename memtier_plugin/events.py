"""Typed objects passed to and returned from the host hooks.

Field names follow OpenClaw's typed plugin hooks so a bridge to the real
runtime is a thin translation. Objects only ever gain fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable


@dataclass
class HookContext:
    """Who and where: passed with every hook."""

    agent_id: str
    session_key: str = ""
    session_id: str = ""
    run_id: str = ""
    project: str = ""
    workspace_dir: str = ""


@dataclass
class PromptEvent:
    """before_prompt_build: the prompt about to be sent and the conversation so far."""

    prompt: str
    messages: list[dict] = field(default_factory=list)
    timestamp: float | None = None  # when it happened, if the host knows (replays do)


@dataclass
class ToolCallEvent:
    """pre_tool (OpenClaw before_tool_call): a proposed call, not yet run."""

    tool_name: str
    params: dict = field(default_factory=dict)
    tool_call_id: str = ""
    timestamp: float | None = None


@dataclass
class ToolResultEvent:
    """post_tool (OpenClaw after_tool_call): the call returned."""

    tool_name: str
    params: dict = field(default_factory=dict)
    tool_call_id: str = ""
    result: Any = None
    error: str | None = None
    duration_ms: float | None = None
    timestamp: float | None = None

    @property
    def success(self) -> bool:
        return self.error is None


@dataclass
class AgentEndEvent:
    """agent_end: the run finished. ``messages`` are the run's messages."""

    messages: list[dict] = field(default_factory=list)
    success: bool = True
    error: str | None = None
    duration_ms: float | None = None
    timestamp: float | None = None


@dataclass
class CompactionEvent:
    """before_compaction: the host is about to compact ``messages``."""

    messages: list[dict] = field(default_factory=list)
    timestamp: float | None = None


@dataclass
class SessionEndEvent:
    """session_end: the host closes the session."""

    reason: str = ""
    timestamp: float | None = None


@dataclass
class PromptAddition:
    """Answer of before_prompt_build: text to prepend (memory as context, guidance as system)."""

    prepend_context: str | None = None
    prepend_system_context: str | None = None


@dataclass
class ToolDecision:
    """Answer of pre_tool: allow (all empty), supplement, rewrite params, or block."""

    block: bool = False
    block_reason: str | None = None
    supplement: str | None = None
    params: dict | None = None


def combine_prompt_additions(answers: Iterable[PromptAddition | None]) -> PromptAddition:
    """Concatenate every plugin's texts in call (priority) order, blank-line separated."""
    answers = list(answers)
    ctx = [a.prepend_context for a in answers if a and a.prepend_context]
    sys_ = [a.prepend_system_context for a in answers if a and a.prepend_system_context]
    return PromptAddition("\n\n".join(ctx) or None, "\n\n".join(sys_) or None)


def combine_tool_decisions(answers: Iterable[ToolDecision | None]) -> ToolDecision:
    """The first block wins; otherwise supplements concatenate and the first params rewrite applies."""
    answers = [a for a in answers if a is not None]
    for a in answers:
        if a.block:
            return ToolDecision(block=True, block_reason=a.block_reason or "blocked by a plugin")
    supplements = [a.supplement for a in answers if a.supplement]
    params = next((a.params for a in answers if a.params is not None), None)
    return ToolDecision(supplement="\n\n".join(supplements) or None, params=params)
