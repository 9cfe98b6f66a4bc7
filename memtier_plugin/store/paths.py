"""Ids and time stamps of records: the one validated gate where an id becomes a file name.

Everything a host sends is untrusted, and an ``agent_id`` becomes a folder
(``memory/episodic/<agent_id>/``, ``memory/traces/<agent_id>/``). Every path
built from an id goes through :func:`checked_id`; an id that is not a plain
name (``/abs``, ``../..``, ``a/b``, ``''``, ``.``, ``..``, a trailing newline,
control bytes, more than 128 characters) is refused with one line, so memory
fails open for that turn and nothing is written outside ``memory/``. Also here, because every
record kind uses them: ISO time stamps (:func:`utc_iso`, :func:`parse_iso`), new ids
(:func:`new_id`, :func:`derived_id`) and the bounded, redacted form of an id a host sent (:func:`clean_id`).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from datetime import datetime, timezone
from pathlib import Path

from . import jsonl
from ..errors import InvalidIdError
from ..redact import redact, redact_head

#: A plain name: starts with a letter or digit, then letters, digits, '.', '_' or '-' (max 128).
ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def is_valid_id(value: object) -> bool:
    return isinstance(value, str) and ID_RE.fullmatch(value) is not None


def checked_id(value: object, what: str = "agent id") -> str:
    """``value`` when it is a plain name, else :class:`InvalidIdError` naming it."""
    if not is_valid_id(value):
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise InvalidIdError(f"{what} {shown}: expected letters, digits, '.', '_' or '-' "
                             "(starting with a letter or digit, max 128)")
    return value  # type: ignore[return-value]


def day_of(ts: float) -> str:
    """The UTC day of ``ts`` as ``YYYY-MM-DD`` (the ledgers' file names)."""
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d")


def agent_day_file(memory_root: Path | str, tier: str, agent_id: str, day: str) -> Path:
    """``<memory_root>/<tier>/<agent_id>/<day>.jsonl`` with ``agent_id`` checked."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", day):
        raise InvalidIdError(f"day {day!r}: expected YYYY-MM-DD")
    return Path(memory_root) / tier / checked_id(agent_id) / f"{day}.jsonl"


#: Longest id-like string kept (session_id, project, run_id, tool_call_id).
MAX_ID_CHARS = 256


def utc_iso(ts: float | None = None) -> str:
    """Seconds since the epoch as an ISO-8601 UTC string with milliseconds."""
    ts = time.time() if ts is None else ts
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_iso(value: str) -> float:
    """ISO-8601 (``Z`` or offset; naive means UTC) to seconds since the epoch."""
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def new_id(prefix: str, ts: float) -> str:
    return f"{prefix}-{datetime.fromtimestamp(ts, tz=timezone.utc):%Y%m%d}-{os.urandom(6).hex()}"


def derived_id(prefix: str, ts: float, *source) -> str:
    """An id of :func:`new_id`'s shape whose last part is derived from ``source`` (what the record was made
    from: its entries, the node it retires, the run it learned from), as fact ids are: the same record made
    twice, by two processes or two hosts of a fleet, gets one id, so a second write of it is a no-op at the
    key (docs/shared.md)."""
    digest = hashlib.sha1("\x1f".join(str(p) for p in source).encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{prefix}-{datetime.fromtimestamp(ts, tz=timezone.utc):%Y%m%d}-{digest}"


def clip_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a visible marker.

    For text already redacted, or that holds no secrets. Text that may
    hold a secret goes through :func:`clip_redacted`, which redacts before it cuts.
    """
    if len(text) <= limit:
        return text
    cut = marker_safe_cut(text, limit - 30)
    return text[:cut] + f" …[cut {len(text) - cut} chars]"


def marker_safe_cut(text: str, i: int) -> int:
    """``i``, or the start of the ``[REDACTED:...]`` marker that position ``i`` would cut in half."""
    i = max(0, i)
    at = text.rfind("[", max(0, i - 48), i)
    return at if at >= 0 and text.startswith("[REDACTED:", at) and text.find("]", at, i) < 0 else i


def clip_redacted(text: str, limit: int) -> tuple[str, list[str]]:
    """``text`` redacted, then cut to ``limit`` characters with a visible marker, like :func:`clip_text`.

    Redaction sees the text past the cut (``redact.CLIP_MARGIN`` characters), so a
    secret the cut splits is replaced whole, never kept in part; the work stays
    linear in ``limit``, whatever the text's size. Returns the text and the kinds removed.
    """
    if len(text) <= limit:
        return redact(text)
    head, kinds, used = redact_head(text, max(0, limit - 30))
    return head + f" …[cut {len(text) - used} chars]", kinds


def clean_id(value, limit: int = MAX_ID_CHARS) -> str:
    """An id-like string a host sent (session, project, run, tool call): text, bounded, redacted."""
    text = jsonl.clean_text(value if isinstance(value, str) else ("" if value is None else str(value)))
    return clip_redacted(text, limit)[0]
