"""The sidecar's transport-free core: one request (endpoint name, parsed JSON body) in, its JSON answer out.

:mod:`.http` serves it over loopback HTTP (the protocol is described there) and :mod:`.serving` runs it for
one workspace. Every request becomes one call on a :class:`~memtier_plugin.host.Host` with memtier registered
(:func:`build_host`), so the answers are the in-process ones.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import MemtierError
from ..events import HookContext
from ..host import Host, review_decision
from .request_parsing import HOOK_EVENTS, RequestError, json_kind, parse_ctx, parse_event

log = logging.getLogger(__name__)

TOOLS = ("memory_search", "memory_get", "memory_add", "memory_forget", "memory_correct")


def build_host(plugin_dir: str | Path | None = None) -> Host:
    """A Host with memtier registered (and the plugins of ``plugin_dir``, if given)."""
    from .. import plugin as builtin

    host = Host()
    host.register(builtin)
    if plugin_dir:
        host.load_plugin_dir(plugin_dir)
    return host


class Sidecar:
    """The transport-free core: one request (endpoint name, parsed JSON body) in, its JSON answer out;
    a request it refuses raises :class:`RequestError` (status and one line)."""

    def __init__(self, host: Host, workspace: Path | str):
        self.host = host
        self.workspace = Path(workspace)

    def health(self) -> dict:
        return {"ok": True, "service": "memtier", "version": __version__, "workspace": str(self.workspace),
                "pid": os.getpid()}

    def call(self, name: str, body: Any) -> dict:
        """Answer ``POST /v1/<name>`` with ``body`` (already parsed JSON)."""
        if name not in HOOK_EVENTS and name not in TOOLS:
            raise RequestError(404, f"unknown endpoint /v1/{name[:60]}: expected one of "
                                    f"{', '.join([*HOOK_EVENTS, *TOOLS])}")
        if not isinstance(body, dict):
            raise RequestError(400, f"body: expected a JSON object, got {json_kind(body)}")
        ctx = parse_ctx(body.get("ctx"), self.workspace)
        if name in TOOLS:
            return self._tool(name, ctx, body.get("params"))
        event = parse_event(name, body.get("event"))
        try:
            answer = getattr(self.host, name)(event, ctx)
        except Exception as exc:  # the host guards each plugin; this is the guard around the guard
            log.exception("sidecar: %s failed; answering as the contract says", name)
            if name == "pre_tool":
                answer = review_decision("sidecar", event.tool_name, exc)
            elif name == "before_prompt_build":
                return {"prepend_context": None, "prepend_system_context": None}
            else:
                return {"ok": True}
        if answer is None:
            return {"ok": True}
        return dataclasses.asdict(answer)

    def _tool(self, name: str, ctx: HookContext, params: Any) -> dict:
        from .. import tools
        from ..memory import memory_for

        params = {} if params is None else params
        if not isinstance(params, dict):
            raise RequestError(400, f"params: expected an object, got {json_kind(params)}")
        mem = memory_for(ctx)
        try:
            if name == "memory_search":
                return tools.memory_search(mem, ctx, params.get("query"), limit=params.get("limit"))
            if name == "memory_get":
                return tools.memory_get(mem, ctx, params.get("id"))
            if name == "memory_forget":
                return tools.memory_forget(mem, ctx, params.get("ids"))
            if name == "memory_correct":
                return tools.memory_correct(mem, ctx, params.get("id"), params.get("text"))
            return tools.memory_add(mem, ctx, params.get("content"), role=params.get("role") or "user")
        except MemtierError as exc:  # a bad argument (InvalidIdError included)
            raise RequestError(400, str(exc)) from None
        except Exception as exc:
            log.exception("sidecar: %s failed", name)
            raise RequestError(500, f"{name} failed: {type(exc).__name__}") from None
