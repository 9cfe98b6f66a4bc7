"""The reference host: a pluggy PluginManager, plugin loading, and a replay runner.

A real runtime (OpenClaw) plays this part in production; this one lets a user
and the tests drive the hooks exactly as a host would.

* ``MEMTIER_PLUGINS=a,b`` loads only the named entry-point plugins.
* ``MEMTIER_TRACE_HOOKS=1`` traces every hook call to stderr.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pluggy

from .vocabulary import HOOK_NAMES
from . import hookspecs
from .store import jsonl
from .errors import MemtierError
from .events import (AgentEndEvent, CompactionEvent, HookContext, PromptAddition, PromptEvent, SessionEndEvent,
                     ToolCallEvent, ToolDecision, ToolResultEvent, combine_prompt_additions,
                     combine_tool_decisions)
from .store.episodic import parse_iso

log = logging.getLogger(__name__)
ENTRY_POINT_GROUP = "memtier"
MEMORY_TOOLS = ("memory_search", "memory_get")  # the agent's memory tools the host answers (OpenClaw's names)


def review_decision(hook_owner: str, tool_name: str, exc: BaseException) -> ToolDecision:
    """What a pre_tool check that could not run answers: not a silent allow (DESIGN.md, the host contract)."""
    return ToolDecision(supplement=f"[memtier] the {hook_owner} check of {tool_name!r} could not run "
                                   f"({type(exc).__name__}); review this call before relying on it")


def _guarded(impl, plugin_name: str, hook: str):
    """``impl``'s function wrapped so one plugin's exception never aborts the others' answers.

    A raising implementation is logged with its traceback and answers None,
    except pre_tool, which answers :func:`review_decision` (never a silent allow).
    """
    func = impl.function

    def call(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            log.exception("plugin %s failed in %s; the other plugins' answers stand", plugin_name, hook)
            if hook == "pre_tool":
                event = kwargs.get("event") if "event" in kwargs else (args[0] if args else None)
                return review_decision(f"plugin {plugin_name}", getattr(event, "tool_name", "?"), exc)
            return None

    call.__wrapped__ = func  # type: ignore[attr-defined]
    return call


_HOOK_NAMES = HOOK_NAMES


class Host:
    """Holds the PluginManager and calls hooks with the host-side guard."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        if os.environ.get("MEMTIER_TRACE_HOOKS"):
            self.pm.trace.root.setwriter(lambda msg: sys.stderr.write(msg))
            self.pm.enable_tracing()

    # ---- loading -------------------------------------------------------
    def register(self, plugin: Any, name: str | None = None) -> str | None:
        """Register ``plugin`` with every hook implementation guarded (see :func:`_guarded`).

        A plugin already loaded under the same name, or whose hook functions are
        already registered under another name (memtier's drop-in file beside the
        installed package), is refused with a warning: loading it twice would
        write every entry and every cognitive-weight update twice.
        """
        name = name or getattr(plugin, "PLUGIN_NAME", None) or getattr(plugin, "__name__", None)
        if name and self.pm.has_plugin(name):
            log.warning("plugin %s is already loaded; not loading it twice", name)
            return None
        dup = self._already_registered(plugin)
        if dup:
            log.warning("plugin %s implements the same hook functions as the loaded plugin %s; "
                        "not loading it twice", name, dup)
            return None
        registered = self.pm.register(plugin, name=name)
        if registered:
            for caller in self.pm.get_hookcallers(plugin) or []:
                for impl in caller.get_hookimpls():
                    if impl.plugin is plugin and not (impl.hookwrapper or impl.wrapper):
                        impl.function = _guarded(impl, registered, caller.name)
        return registered

    def _already_registered(self, plugin: Any) -> str | None:
        """The name of a loaded plugin sharing a hook function with ``plugin``, if any."""
        funcs = {id(getattr(plugin, spec, None)) for spec in _HOOK_NAMES if callable(getattr(plugin, spec, None))}
        if not funcs:
            return None
        for caller_name in _HOOK_NAMES:
            caller = getattr(self.pm.hook, caller_name, None)
            for impl in caller.get_hookimpls() if caller else []:
                if id(getattr(impl.function, "__wrapped__", impl.function)) in funcs:
                    return self.pm.get_name(impl.plugin)
        return None

    def load_plugin_dir(self, directory: Path | str) -> list[str]:
        """Import every ``*.py`` file of a plugin directory (sorted) and register it."""
        directory = Path(directory)
        if not directory.is_dir():
            raise MemtierError(f"{directory}: plugin directory not found")
        loaded = []
        for path in sorted(directory.glob("*.py")):
            if path.name.startswith("_"):
                continue
            mod_name = f"memtier_plugindir_{abs(hash(str(path.resolve())))}_{path.stem}"
            spec = importlib.util.spec_from_file_location(mod_name, path)
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception as exc:  # a broken third-party file must not stop the host
                log.error("%s: cannot load plugin: %s", path, exc, exc_info=True)
                continue
            name = self.register(module, getattr(module, "PLUGIN_NAME", None) or path.stem)
            if name:
                loaded.append(name)
        return loaded

    def load_entrypoints(self) -> int:
        """Register the plugins of the ``memtier`` entry-point group (``MEMTIER_PLUGINS`` limits them)."""
        from importlib.metadata import entry_points

        allow = os.environ.get("MEMTIER_PLUGINS")
        wanted = None if allow is None else {n.strip() for n in allow.split(",") if n.strip()}
        count = 0
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if (wanted is not None and ep.name not in wanted) or self.pm.has_plugin(ep.name) \
                    or self.pm.is_blocked(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as exc:  # a broken third-party package must not stop the host
                log.error("entry point %s: cannot load plugin: %s", ep.name, exc, exc_info=True)
                continue
            if self.register(plugin, ep.name):
                count += 1
        return count

    def plugins(self) -> list[tuple[str, list[str]]]:
        """(plugin name, hooks it implements) for every registered plugin."""
        out = []
        for name, plugin in self.pm.list_name_plugin():
            callers = self.pm.get_hookcallers(plugin) or []
            out.append((name, sorted(c.name for c in callers)))
        return out

    # ---- calling -------------------------------------------------------
    def _call(self, hook: str, **kwargs) -> list:
        """Every implementation's answer (each guarded at registration, so one failure costs one answer)."""
        try:
            return getattr(self.pm.hook, hook)(**kwargs)
        except Exception as exc:  # a hook wrapper or pluggy itself: the host keeps the turn alive
            log.exception("hook %s failed; continuing without its answers", hook)
            if hook == "pre_tool":
                return [review_decision("host", getattr(kwargs.get("event"), "tool_name", "?"), exc)]
            return []

    def before_prompt_build(self, event: PromptEvent, ctx: HookContext) -> PromptAddition:
        answers = self._call("before_prompt_build", event=event, ctx=ctx)
        return combine_prompt_additions(a for a in answers if isinstance(a, PromptAddition))

    def pre_tool(self, event: ToolCallEvent, ctx: HookContext) -> ToolDecision:
        answers = []
        for a in self._call("pre_tool", event=event, ctx=ctx):
            if isinstance(a, ToolDecision):
                answers.append(a)
            elif a is not None:  # an answer the contract does not know is not an allow
                answers.append(review_decision("plugin", event.tool_name, TypeError(type(a).__name__)))
        return combine_tool_decisions(answers)

    def post_tool(self, event: ToolResultEvent, ctx: HookContext) -> None:
        self._call("post_tool", event=event, ctx=ctx)

    def agent_end(self, event: AgentEndEvent, ctx: HookContext) -> None:
        self._call("agent_end", event=event, ctx=ctx)

    def before_compaction(self, event: CompactionEvent, ctx: HookContext) -> None:
        self._call("before_compaction", event=event, ctx=ctx)

    def session_end(self, event: SessionEndEvent, ctx: HookContext) -> None:
        self._call("session_end", event=event, ctx=ctx)

    # ---- memory tools the host exposes to the agent ----------------------
    def memory_tool(self, name: str, params: Any, ctx: HookContext) -> dict:
        """Run one of the agent's memory tools (OpenClaw's names: ``memory_search`` {query, limit},
        ``memory_get`` {id} or {path}) through memtier's own path (:mod:`.tools`: the Foresight cache
        included). A bad argument or a failure is the tool's error answer, never an exception into the turn."""
        from . import tools
        from .memory import memory_for

        params = params if isinstance(params, dict) else {}
        try:
            mem = memory_for(ctx)
            if name == "memory_search":
                return tools.memory_search(mem, ctx, params.get("query"), limit=params.get("limit"))
            if name == "memory_get":
                return tools.memory_get(mem, ctx, params.get("id") or params.get("path"))
            return {"error": f"unknown memory tool {str(name)[:60]!r}: expected one of {', '.join(MEMORY_TOOLS)}"}
        except MemtierError as exc:
            return {"error": str(exc)}
        except Exception as exc:
            log.exception("memory tool %s failed", name)
            return {"error": f"{name} failed: {type(exc).__name__}"}


# ---- replay ----------------------------------------------------------------
@dataclass
class TurnReport:
    """What happened in one replayed run, for the demo and the tests."""

    run_id: str
    prompt: str
    memory: PromptAddition
    tools: list[tuple[ToolCallEvent, ToolDecision, str | None]] = field(default_factory=list)
    success: bool = True


@dataclass
class SessionReport:
    path: Path
    ctx: HookContext
    turns: list[TurnReport] = field(default_factory=list)


def read_session(path: Path) -> list[dict]:
    """Read a recorded session; errors name the file and line."""
    records = []
    for lineno, line in enumerate(Path(path).read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(jsonl.loads(line))
        except ValueError as exc:
            raise MemtierError(f"{path}:{lineno}: not a JSON object: {exc}") from None
    if not records or records[0].get("type") != "session":
        raise MemtierError(f"{path}:1: expected a first record of type 'session'")
    return records


def _ts(rec: dict) -> float | None:
    return parse_iso(rec["at"]) if rec.get("at") else None


def replay_session(host: Host, path: Path, workspace: Path,
                   on_turn: Callable[[SessionReport, TurnReport], None] | None = None, *,
                   on_memory_tool: Callable[[ToolCallEvent, dict], None] | None = None,
                   before_prompt: Callable[[dict], None] | None = None) -> SessionReport:
    """Drive one recorded session through the hooks, run by run.

    Each user message starts a run: before_prompt_build, then for every
    recorded tool call pre_tool (a blocked call is not run) and post_tool with
    the recorded result (``memory_search`` and ``memory_get`` are answered live by
    :meth:`Host.memory_tool`, each answer passed to ``on_memory_tool``);
    ``before_prompt(record)`` runs before each user message (a bench's think time); the run's agent_end comes before the next user
    message (success = no failed tool call, and the session's own outcome for
    the last run). session_end closes the session.
    """
    records = read_session(path)
    head = records[0]
    ctx = HookContext(agent_id=head["agent_id"], session_key=head.get("session_key", ""),
                      session_id=head["session_id"], project=head.get("project", ""),
                      workspace_dir=str(workspace))
    report = SessionReport(Path(path), ctx)
    end = next((r for r in records if r.get("type") == "end"), {"success": True})
    messages: list[dict] = []
    run: TurnReport | None = None
    run_msgs: list[dict] = []

    def finish(last: bool, at: float | None) -> None:
        if run is None:
            return
        success = run.success and (bool(end.get("success", True)) if last else True)
        run.success = success
        host.agent_end(AgentEndEvent(messages=list(run_msgs), success=success, timestamp=at), ctx)
        if on_turn:
            on_turn(report, run)

    for rec in records[1:]:
        kind = rec.get("type")
        if kind == "user":
            finish(False, _ts(rec))
            ctx.run_id = f"{ctx.session_id}-r{len(report.turns) + 1}"
            messages.append({"role": "user", "content": rec["content"]})
            if before_prompt:
                before_prompt(rec)
            addition = host.before_prompt_build(
                PromptEvent(prompt=rec["content"], messages=list(messages), timestamp=_ts(rec)), ctx)
            run = TurnReport(ctx.run_id, rec["content"], addition)
            report.turns.append(run)
            run_msgs = [{"role": "user", "content": rec["content"]}]
        elif kind == "assistant":
            msg = {"role": "assistant", "content": rec["content"]}
            messages.append(msg)
            run_msgs.append(msg)
        elif kind == "tool_call" and run is not None:
            call = ToolCallEvent(rec["tool"], rec.get("params") or {}, rec.get("tool_call_id", ""), _ts(rec))
            decision = host.pre_tool(call, ctx)
            if decision.block:
                run.tools.append((call, decision, f"blocked: {decision.block_reason}"))
                run_msgs.append({"role": "tool", "name": call.tool_name, "content": f"blocked: {decision.block_reason}"})
                continue
            params = decision.params if decision.params is not None else call.params
            outcome, error = rec.get("result"), rec.get("error")
            if call.tool_name in MEMORY_TOOLS:  # the host answers its memory tools itself, live
                outcome = host.memory_tool(call.tool_name, params, ctx)
                error = outcome.get("error")
                if on_memory_tool:
                    on_memory_tool(call, outcome)
            result = ToolResultEvent(call.tool_name, params, call.tool_call_id, outcome,
                                     error, rec.get("duration_ms"), _ts(rec))
            host.post_tool(result, ctx)
            run.tools.append((call, decision, result.error))
            if result.error:
                run.success = False
            run_msgs.append({"role": "tool", "name": call.tool_name,
                             "content": result.error or str(result.result)})
        elif kind == "end":
            finish(True, _ts(rec))
            run = None
            host.session_end(SessionEndEvent(reason="completed" if rec.get("success", True) else "failed",
                                             timestamp=_ts(rec)), ctx)
    if run is not None:
        finish(True, None)
    return report
