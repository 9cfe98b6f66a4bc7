"""Tool entries: how a tool outcome is written to the episodic ledger, ``name(args) -> outcome``.

The pre-commit check finds earlier identical calls by this text's prefix, so
its shape is a format on disk: params and result redacted, then bounded (redaction
sees past the cut, so a secret the cut splits goes whole, and stays linear in the
bound), compact JSON with sorted keys; a failure reads ``FAILED: <error>``.
"""

from __future__ import annotations

from typing import Any

import orjson

from ..redact import CLIP_MARGIN, redact_obj
from .jsonl import clean_obj, clean_text
from .paths import clip_redacted, clip_text, marker_safe_cut

#: Longest text kept of one tool call's params, result or error (characters).
MAX_TOOL_TEXT = 2000
#: Longest tool name kept.
MAX_TOOL_NAME = 200


def _json_line(value: Any, limit: int) -> str:
    """Compact JSON of ``value`` (sorted keys), cut to ``limit`` characters."""
    text = value if isinstance(value, str) else orjson.dumps(
        clean_obj(value), option=orjson.OPT_SORT_KEYS, default=str).decode()
    return clip_text(clean_text(text), limit)


def bounded_value(value: Any, limit: int = MAX_TOOL_TEXT) -> Any:
    """A tool's params or result as memory keeps it: redacted; text, or JSON longer than
    ``limit``, then cut to ``limit`` (redaction reads a bounded margin past the cut, so it
    stays linear in ``limit`` and a secret the cut splits is removed whole)."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return clip_redacted(clean_text(value), limit)[0]
    value = clean_obj(value)
    text = _json_line(value, 1 << 62)
    if len(text) <= limit:
        return redact_obj(value)[0]
    # Redact the strings themselves, not their JSON escapes (a .netrc's line breaks, a call's quotes),
    # and only as many as the cut keeps plus a margin; then dump and cut the redacted JSON.
    budget = [limit + CLIP_MARGIN]
    kept = redact_obj(_first_chars(value, budget), max_chars=limit + CLIP_MARGIN)[0]
    return clip_text(_json_line(kept, 1 << 62), limit)


def _first_chars(obj: Any, budget: list[int]) -> Any:
    """``obj`` pruned to about ``budget[0]`` characters of its JSON, in dump order (sorted keys)."""
    if isinstance(obj, str):
        budget[0] -= len(obj) + 3
        return obj
    if isinstance(obj, dict):
        out = {}
        for k in sorted(obj, key=str):
            if budget[0] <= 0:
                break
            budget[0] -= len(str(k)) + 4
            out[k] = _first_chars(obj[k], budget)
        return out
    if isinstance(obj, (list, tuple)):
        items = []
        for x in obj:
            if budget[0] <= 0:
                break
            items.append(_first_chars(x, budget))
        return items
    budget[0] -= 8
    return obj


def tool_text(name: str, params: Any, result: Any, error: str | None) -> str:
    """One readable line for a tool outcome entry (params and result bounded and redacted first)."""
    params = bounded_value(params)
    args = _json_line(params, MAX_TOOL_TEXT) if params else ""
    if error:
        outcome = f"FAILED: {clip_redacted(clean_text(str(error)), MAX_TOOL_TEXT)[0]}"
    elif result is None:
        outcome = "ok"
    else:
        outcome = _json_line(bounded_value(result), MAX_TOOL_TEXT)
    text = f"{tool_name(name)}({args}) -> {outcome}"
    return text if len(text) <= MAX_TOOL_TEXT else text[: marker_safe_cut(text, MAX_TOOL_TEXT - 1)] + "…"


def tool_name(value: Any) -> str:
    """A tool name as memory keeps it: text, redacted, bounded."""
    return clip_redacted(clean_text(str(value)), MAX_TOOL_NAME)[0]


def call_prefix(name: Any, params: Any) -> str:
    """The text every entry of this exact call (tool and arguments) starts with, whatever its outcome."""
    return tool_text(name, params, None, None).rsplit(" -> ", 1)[0] + " -> "
