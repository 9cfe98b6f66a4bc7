"""Ids that become file names: the one validated gate.

Everything a host sends is untrusted, and an ``agent_id`` becomes a folder
(``memory/episodic/<agent_id>/``, ``memory/traces/<agent_id>/``). Every path
built from an id goes through :func:`checked_id`; an id that is not a plain
name (``/abs``, ``../..``, ``a/b``, ``''``, ``.``, ``..``, a trailing newline,
control bytes, more than 128 characters) is refused with one line, so memory
fails open for that turn and nothing is written outside ``memory/``.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

from .errors import InvalidIdError

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
