"""The consolidation daemon's durable state under ``memory/.daemon/`` (MemTier §3.3).

- ``checkpoints.json``: per episodic file, the byte offset up to which every
  entry is consolidated (:func:`load_checkpoints`, :func:`save_checkpoints`).
- ``batch.json``: the journal of the batch being committed — every fact and
  marker it is about to append, every ``promoted`` record it is about to write
  (:func:`write_journal`, :func:`read_journal`, :func:`drop_journal`). It is
  written before the first fact and removed after the last ``promoted`` record,
  before the checkpoint moves, so while it exists the entries it names lie
  beyond their checkpoint. A batch killed anywhere in between is finished from
  it by the next batch, record for record, instead of being redone.
- ``lock``: the batch lock (:class:`BatchLock`), an exclusive ``flock``.

Every file is replaced atomically (tmp, fsync, ``os.replace``, fsync of the folder).
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from pathlib import Path

import orjson

from ..store import jsonl
from ..store.episodic import utc_iso
from ..store.files import atomic_write, fsync_dir

log = logging.getLogger(__name__)

CHECKPOINTS = "checkpoints.json"
JOURNAL = "batch.json"


def daemon_dir(root: Path) -> Path:
    return Path(root) / ".daemon"


def _replace(path: Path, data: bytes) -> None:
    """Atomically replace ``path`` with ``data`` (the caller holds the batch lock)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for pattern in (f"{path.name}.*.tmp", f".{path.name}.*.tmp"):  # left by a killed run
        for stale in path.parent.glob(pattern):
            stale.unlink(missing_ok=True)
    atomic_write(path, data)


def _read_json(path: Path) -> dict | None:
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError) as exc:
        log.warning("%s: unreadable (%s); ignored", path, exc)
        return None
    return data if isinstance(data, dict) else None


# ---------------------------------------------------------------- checkpoints
def load_checkpoints(root: Path) -> dict[str, int]:
    """Byte offset per episodic file (path relative to the memory root) up to which work is done.

    A missing or unreadable file means "from the beginning" (re-processing is idempotent).
    """
    data = _read_json(daemon_dir(root) / CHECKPOINTS) or {}
    files = data.get("files")
    return {k: int(v) for k, v in (files or {}).items() if isinstance(v, int) and v >= 0}


def save_checkpoints(root: Path, files: dict[str, int], clock=time.time) -> None:
    """Atomically replace the checkpoint file."""
    data = {"v": jsonl.SCHEMA_VERSION, "updated": utc_iso(clock()), "files": dict(sorted(files.items()))}
    _replace(daemon_dir(root) / CHECKPOINTS, orjson.dumps(data, option=orjson.OPT_INDENT_2))


# ---------------------------------------------------------------- the batch journal
def write_journal(root: Path, facts: dict[str, list[dict]], promoted: list[tuple[str, dict]], clock=time.time) -> None:
    """Record what a batch is about to commit: fact/marker records per project, (agent, promoted record)s."""
    _replace(daemon_dir(root) / JOURNAL, orjson.dumps({
        "v": jsonl.SCHEMA_VERSION, "written": utc_iso(clock()), "facts": facts,
        "promoted": [{"agent_id": a, "record": r} for a, r in promoted]}))


def read_journal(root: Path) -> tuple[dict[str, list[dict]], list[tuple[str, dict]]] | None:
    """The journal of a batch that did not finish, or None."""
    data = _read_json(daemon_dir(root) / JOURNAL)
    if data is None:
        return None
    facts = {p: [r for r in recs if isinstance(r, dict)] for p, recs in (data.get("facts") or {}).items()
             if isinstance(p, str) and isinstance(recs, list)}
    promoted = [(i["agent_id"], i["record"]) for i in data.get("promoted") or []
                if isinstance(i, dict) and isinstance(i.get("agent_id"), str) and isinstance(i.get("record"), dict)
                and isinstance(i["record"].get("entry_id"), str)]
    return facts, promoted


def drop_journal(root: Path) -> None:
    """Remove the journal (durably) once everything it names is on disk."""
    path = daemon_dir(root) / JOURNAL
    if path.exists():
        path.unlink()
        fsync_dir(path.parent)


# ---------------------------------------------------------------- the batch lock
class BatchLock:
    """Exclusive flock on memory/.daemon/lock for the duration of one batch."""

    def __init__(self, root: Path):
        self.path = daemon_dir(root) / "lock"

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
