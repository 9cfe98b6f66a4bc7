"""Untrusted request bodies read into typed values: JSON, the hook context, the hook's event.

A body from a client (``memtier serve``'s ``/v1/<name>``, ``memtier ui``'s
``POST /api/``) is untrusted: :func:`parse_body` reads it as JSON, with lone
surrogate escapes (a JavaScript host's cut emoji) as U+FFFD instead of a failed
request; :func:`parse_ctx` and :func:`parse_event` turn its ``ctx`` and
``event`` into the dataclasses of :mod:`memtier_plugin.events` (snake_case field
names; unknown fields are ignored, so clients may send newer ones). A field of
the wrong JSON type, a missing required field or a path-like agent id is a
:class:`RequestError` (400) naming the field; a ``workspace_dir`` in a request
is ignored (a path from a client never chooses where memory is written).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import orjson

from ..errors import InvalidIdError, MemtierError
from ..events import (
    AgentEndEvent, CompactionEvent, HookContext, PromptEvent, SessionEndEvent, ToolCallEvent, ToolResultEvent,
)
from ..store.jsonl import clean_obj
from ..store.paths import checked_id

#: Each hook's endpoint name and the event dataclass its request carries.
HOOK_EVENTS = {"before_prompt_build": PromptEvent, "pre_tool": ToolCallEvent, "post_tool": ToolResultEvent,
               "agent_end": AgentEndEvent, "before_compaction": CompactionEvent, "session_end": SessionEndEvent}
_CTX_FIELDS = ("agent_id", "session_key", "session_id", "run_id", "project")


class RequestError(MemtierError):
    """A request the sidecar refuses: an HTTP status and one line saying what was wrong."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _surrogate_free(value: Any) -> Any:
    """``value`` with every lone surrogate (a JavaScript host's cut emoji) as U+FFFD; pairs joined."""
    return clean_obj(value)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_body(body: bytes) -> Any:
    """A request body as JSON; lone surrogate escapes (``"\\ud83d"``) decode to U+FFFD, as on every other
    input path, instead of failing the request. Raises ``ValueError`` (one line) for anything not JSON."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        strict = str(exc).splitlines()[0][:120]
    try:  # orjson refuses lone surrogates; the standard parser keeps them, clean_obj replaces them
        obj = json.loads(body.decode("utf-8", "replace"), parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise ValueError(strict) from None
    return _surrogate_free(obj)


def json_kind(value: Any) -> str:
    """The JSON type ``value`` has, for an error line (``null``, ``str``, ``list`` ...)."""
    return "null" if value is None else type(value).__name__


_NUMBER = (int, float)
#: The JSON type of every event field (by name; events only ever gain fields). ``None`` in a tuple: null allowed.
FIELD_TYPES: dict[str, tuple] = {
    "prompt": (str,), "messages": (list,), "timestamp": (*_NUMBER, None), "tool_name": (str,),
    "params": (dict, None), "tool_call_id": (str, None), "result": (object, None), "error": (str, None),
    "duration_ms": (*_NUMBER, None), "success": (bool,), "reason": (str, None),
}
_NAMES = {str: "a string", list: "an array", dict: "an object", bool: "true or false", int: "a number",
          float: "a number", object: "a value"}


def _checked(where: str, value: Any, types: tuple) -> Any:
    """``value`` when it is one of ``types`` (a bool is never a number), else RequestError naming ``where``."""
    if value is None:
        if None in types:
            return None
        raise RequestError(400, f"{where}: expected {_NAMES[types[0]]}, got null")
    concrete = tuple(t for t in types if t is not None)
    if isinstance(value, bool) and bool not in concrete and object not in concrete:
        ok = False
    else:
        ok = isinstance(value, concrete)
    if not ok:
        raise RequestError(400, f"{where}: expected {_NAMES[concrete[0]]}, got {json_kind(value)}")
    return value


def parse_ctx(obj: Any, workspace: Path) -> HookContext:
    """The request's ``ctx`` as a HookContext of this sidecar's workspace; a path-like agent id is refused."""
    if not isinstance(obj, dict):
        raise RequestError(400, f"ctx: expected an object, got {json_kind(obj)}")
    values = {name: _checked(f"ctx.{name}", obj.get(name), (str, None)) or "" for name in _CTX_FIELDS}
    try:
        checked_id(obj.get("agent_id"), "ctx.agent_id")
    except InvalidIdError as exc:
        raise RequestError(400, str(exc)) from None
    return HookContext(**values, workspace_dir=str(workspace))


def parse_event(hook: str, obj: Any):
    """The request's ``event`` as the hook's event dataclass (fields by name; unknown ones ignored)."""
    cls = HOOK_EVENTS[hook]
    obj = {} if obj is None else obj
    if not isinstance(obj, dict):
        raise RequestError(400, f"event: expected an object, got {json_kind(obj)}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING  # type: ignore[misc]
        if obj.get(f.name) is None:
            if required:
                raise RequestError(400, f"event.{f.name}: required")
            continue
        kwargs[f.name] = _checked(f"event.{f.name}", obj[f.name], FIELD_TYPES.get(f.name, (object, None)))
    return cls(**kwargs)

