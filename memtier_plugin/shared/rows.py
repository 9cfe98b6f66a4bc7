"""A ledger line as an engine row, and an engine row back as a line of a local ledger.

The engine stores each line whole (``body``) under typed columns: the tier, the scope (the project, or
``*`` for the Global layer), the record's own id, what supersession is keyed on (``rev_key``: a fact's
subject and attribute, a node's scope and attribute), what the record retires (``target``) and when it
was stated. Every line is validated by its tier's own reader (:func:`problem`) both ways: what a host
pushes and what it pulls (another host's rows are untrusted), so a record means the same thing in a
file and in the engine. A scope becomes a file name only through ``project_filename``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import orjson

from ..layers.global_layer import FILE as GLOBAL_FILE, SUB as GLOBAL_SUB, node_problem
from ..layers.workspace_layer import skill_problem
from ..store import tombstones
from ..store.paths import is_valid_id, parse_iso
from ..store.semantic import fact_problem, project_filename, revision_key, to_fact

#: "forgotten": what the user told memory to forget (``forget`` records, ids only), so a forget on one host holds
#: on every host. A ``purged`` record is not shared: each host removes the text from its own files.
TIERS = ("semantic", "global", "procedural", "state", "forgotten")
MAX_BODY_BYTES = 64 * 1024  # a ledger line is a few KB; a bigger row is not ours
MARKERS = ("superseded", "retired")


@dataclass(frozen=True)
class Row:
    tier: str
    scope: str
    id: str
    kind: str
    rev_key: str | None
    target: str | None
    stated_at: float
    body: dict


def tier_files(memory_root: Path, tiers) -> Iterator[tuple[str, Path]]:
    """The local ledgers of the shared tiers: (tier, path), the Global layer's one file and each project's."""
    root = Path(memory_root)
    for tier in tiers:
        if tier == "global":
            yield tier, root / GLOBAL_SUB / GLOBAL_FILE
        elif tier == "forgotten":
            yield tier, tombstones.path(root)
        else:
            d = root / tier
            if d.is_dir():
                yield from ((tier, p) for p in sorted(d.glob("*.jsonl")))


def scope_hint(path: Path) -> str:
    """The project a ledger file is named after, for an older line that does not say it ("" when the name is a
    slug and hash: ``project_filename`` cannot be read back)."""
    return "" if path.stem.startswith("_") else path.stem


def local_path(memory_root: Path, tier: str, scope: str) -> Path:
    root = Path(memory_root)
    if tier == "global":
        return root / GLOBAL_SUB / GLOBAL_FILE
    if tier == "forgotten":
        return tombstones.path(root)
    return root / tier / project_filename(scope)


def problem(tier: str, rec: dict) -> str | None:
    """Why ``rec`` cannot be a line of ``tier``'s ledger (its reader's own check), or None."""
    if tier == "semantic":
        return fact_problem(rec)
    if tier == "global":
        return node_problem(rec)
    if tier == "forgotten":
        p = tombstones.problem(rec)
        return p or (None if rec.get("kind") == "forget" else "a purge is not shared (each host purges its own files)")
    if tier in ("procedural", "state"):
        p = skill_problem(rec)
        if p is None and rec.get("kind") != ("skill" if tier == "procedural" else "state"):
            return f"a {rec.get('kind')} record in the {tier} tier"
        return p
    return f"unknown tier {tier!r}"


def _stated(*values) -> float:
    for v in values:
        if isinstance(v, str) and v:
            try:
                return parse_iso(v)
            except ValueError:
                continue
    return 0.0


def marker_id(rec: dict) -> str:
    """An id for a line that has none (an older ``superseded`` marker): derived from its content."""
    return "sx-" + hashlib.sha1(orjson.dumps(rec, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def to_row(tier: str, rec: dict, hint: str = "") -> Row | None:
    """``rec`` of ``tier``'s ledger as a row, or None when it is not a record of that tier."""
    if not isinstance(rec, dict) or problem(tier, rec) is not None:
        return None
    kind = rec["kind"]
    rid = rec.get("id") if isinstance(rec.get("id"), str) else marker_id(rec)
    if not is_valid_id(rid):
        return None
    if tier == "semantic":
        scope = rec["project"]
        if kind == "superseded":
            return Row(tier, scope, rid, kind, None, rec["fact_id"], 0.0, rec)
        key = revision_key(to_fact(rec))
        return Row(tier, scope, rid, kind, f"{key[0]}\x1f{key[1]}" if key else None, rec.get("supersedes") or None,
                   _stated(rec.get("effective_time"), rec.get("timestamp")), rec)
    if tier == "forgotten":
        return Row(tier, "*", rid, kind, None, None, _stated(rec.get("at")), rec)
    if tier == "global":
        if kind == "retired":
            return Row(tier, "*", rid, kind, None, rec["node_id"], 0.0, rec)
        attribute = rec.get("attribute") or ""
        projects = (rec.get("applies") or {}).get("projects", "*")
        key = (f"{orjson.dumps(projects).decode()}\x1f{attribute}"
               if attribute and rec["node_kind"] != "choice" else None)
        return Row(tier, "*", rid, kind, key, None, _stated(rec.get("timestamp")), rec)
    scope = rec.get("project") if isinstance(rec.get("project"), str) else hint
    if not scope and not hint:
        return None
    return Row(tier, scope, rid, kind, None, rec.get("supersedes") or None, _stated(rec.get("timestamp")), rec)


def from_engine(tier: str, scope: str, body: bytes | str | dict) -> dict | None:
    """An engine row's body as a local line, or None when it is not one (too big, not JSON, not valid)."""
    if isinstance(body, (bytes, str)):
        if len(body) > MAX_BODY_BYTES:
            return None
        try:
            body = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
    if tier not in TIERS or not isinstance(body, dict) or not isinstance(scope, str):
        return None
    row = to_row(tier, body, scope)
    return body if row is not None and row.scope == scope else None
