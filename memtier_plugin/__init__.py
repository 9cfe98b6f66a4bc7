"""memtier: tiered memory for long-running agents.

Nothing happens at import time: no directories, no entry-point scans, and the
public names below are imported only when first used (PEP 562), so
``import memtier_plugin.plugin`` stays free of numpy and the models. Plugins
write ``@memtier_plugin.hookimpl``. Everything else is reached through its room
(``memtier_plugin.recall.retriever.Retriever``), which says it is internal.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "hookimpl": "hookspecs", "hookspec": "hookspecs",
    "HookContext": "events", "PromptEvent": "events", "ToolCallEvent": "events", "ToolResultEvent": "events",
    "AgentEndEvent": "events", "CompactionEvent": "events", "SessionEndEvent": "events",
    "PromptAddition": "events", "ToolDecision": "events",
    "Memory": "memory", "memory_for": "memory",
    "memory_search": "tools", "memory_get": "tools", "memory_add": "tools",
    "Config": "config", "load_config": "config", "PRESETS": "config",
    "MemtierError": "errors", "ConfigError": "errors",
    "Host": "host",
}
__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'memtier_plugin' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
