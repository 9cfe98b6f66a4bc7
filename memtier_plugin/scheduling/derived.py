"""Hooks derived from memory when it is written, stored beside the node and retired with it (issue 27).

MemSidecar §3.3 generates a hook's predicate when memory is written. When the
maintenance path (:mod:`memtier_plugin.layers.maintain`) writes a skill,
:func:`.rule_hooks.skill_proposal` proposes the hook of its precondition
(``source: "skill"``, with its ``project``; retired when a revision supersedes
it). When it writes a standing rule or constraint, :func:`.rule_hooks.rule_proposal` proposes its hook (and, with
``hooks.proposer: model``, :func:`.rule_hooks.model_proposal` more, checked as
data first), and :class:`DerivedHooks` appends them, as data, to
``memory/hooks/.derived/hooks.jsonl``:

``{"v": 1, "kind": "hooks", "node_id": "gk-…", "source": "rule"|"model", "timestamp", "entry": <the node's words>,
"hold": bool, "hooks": [{"id", "events", "when"}]}``

(``hooks: []`` records that the node was looked at and implies none). The
folder starts with a dot, so the hand-written files' loader never reads it.
:meth:`DerivedHooks.load` gives the scheduler the hooks of the nodes that are
current now, each checked like a person's file: a retired node's hooks go with
it, whoever retired it. A node another process wrote (the consolidation daemon)
gets its hooks at the next load (in the scheduler's background refresh, never in
an event). ``memtier inspect hooks`` lists them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable, Iterable

from ..store import jsonl
from ..store.episodic import append_lines, utc_iso
from ..store.files import iter_records
from ..store.paths import is_valid_id
from .hooks import HOOKS_DIR, Hook
from .predicates import HookError
from .rule_hooks import GRAMMAR, bound_hook, rule_proposal, skill_proposal

log = logging.getLogger(__name__)
DERIVED_DIR, DERIVED_FILE = ".derived", "hooks.jsonl"
SOURCES = ("rule", "model", "skill")


def derived_path(memory_root: Path | str) -> Path:
    return Path(memory_root) / HOOKS_DIR / DERIVED_DIR / DERIVED_FILE


def record_problem(rec: dict) -> str | None:
    """Why a derived-hooks record cannot be used, or None."""
    if rec.get("kind") != "hooks":
        return f"unknown record kind {str(rec.get('kind'))[:30]!r}"
    if not is_valid_id(rec.get("node_id")) or rec.get("source") not in SOURCES:
        return f"hooks record lacks a node id or a source ({', '.join(SOURCES)})"
    if rec["source"] == "skill" and not isinstance(rec.get("project"), str):
        return "skill hooks record lacks its project"
    if not isinstance(rec.get("entry"), str) or not isinstance(rec.get("hooks"), list):
        return "hooks record lacks its entry text or its list of hooks"
    return None


class DerivedHooks:
    """``memory/hooks/.derived/hooks.jsonl``: written at maintenance, read into the scheduler's ``memory`` source.

    ``current()``: the records of memory that stand now (Global-layer nodes not retired), each a dict with
    ``id``, ``content`` and ``node_kind``; ``skills(project)``: the project's current skill records (none
    superseded). Both are asked at every load, so retirement needs no record here. A rule's or skill's stored
    proposal made with an older grammar (``rule_hooks.GRAMMAR``) is proposed again at load, from the record.
    """

    def __init__(self, memory_root: Path | str, current: Callable[[], Iterable[dict]],
                 skills: Callable[[str], list[dict]] | None = None, *, fsync: bool = True):
        self.path = derived_path(memory_root)
        self.current = current
        self.skills = skills or (lambda project: [])
        self._skill_projects: set[str] = set()  # projects with skill records, as the last parse found them
        self.fsync = fsync
        self._lock = threading.RLock()  # a load (the background refresh, agent_end) at a time; it may write
        self._sig: tuple | None = None  # (this file's stat, the current node ids) at the last load
        self.problems: list[str] = []

    def records(self) -> dict[tuple[str, str], dict]:
        """(node id, source) → its latest record."""
        out: dict[tuple[str, str], dict] = {}
        self.problems = []
        try:
            for rec, lineno, problem in iter_records(self.path):
                problem = problem or record_problem(rec)
                if problem:
                    self.problems.append(f"{self.path}:{lineno}: {problem}")
                    continue
                out[(rec["node_id"], rec["source"])] = rec
        except FileNotFoundError:  # not written yet, or gone (a purge, a workspace removed) since
            return {}
        return out

    def write(self, written: Iterable[dict], ts: float, propose: Callable[[dict], list[dict]] | None = None) -> int:
        """Propose and store the hooks of newly written records (those already stored are kept): the rules'
        for every one, and ``propose(rec)``'s (the configured model's mappings, already checked as data) for
        a rule or constraint; a proposal that fails is logged and leaves the rules' alone. The number of
        records appended."""
        recs = [r for r in written if isinstance(r, dict) and r.get("kind") in ("knowledge", "skill")
                and is_valid_id(r.get("id"))]
        if not recs:
            return 0
        with self._lock:
            have = self.records()
            out = [self._record(r, ts, "rule" if r["kind"] == "knowledge" else "skill") for r in recs
                   if (r["id"], "rule") not in have and (r["id"], "skill") not in have]
            for r in recs if propose is not None else ():
                if (r["id"], "model") in have or r.get("kind") != "knowledge" \
                        or r.get("node_kind") not in ("rule", "constraint"):
                    continue
                try:
                    out.append(self._record(r, ts, "model", propose(r)))
                except Exception as exc:  # refused as data, timed out, unreachable: the rules' hooks stand
                    log.warning("the model's hooks for %s were not kept: %s", r["id"], str(exc)[:300])
            if out:
                append_lines(self.path, b"".join(jsonl.dumps(r) for r in out), fsync=self.fsync)
            return len(out)

    @staticmethod
    def _record(rec: dict, ts: float, source: str = "rule", hooks: list[dict] | None = None) -> dict:
        hold = False
        if source in ("rule", "skill"):
            proposal = rule_proposal(rec) if source == "rule" else skill_proposal(rec)
            hooks = [proposal["hook"]] if proposal else []
            hold = bool(proposal and proposal["hold"])
        out = {"v": jsonl.SCHEMA_VERSION, "kind": "hooks", "node_id": rec["id"], "source": source,
               "timestamp": utc_iso(ts), "entry": str(rec.get("content", "")), "hold": hold, "hooks": hooks or []}
        if source in ("rule", "skill"):
            out["grammar"] = GRAMMAR
        if source == "skill":
            out["project"] = str(rec.get("project", ""))
        return out

    def load(self, force: bool = False) -> list[Hook] | None:
        """The hooks of the current nodes, when this file or the current nodes changed since the last load
        (else None: :meth:`HookScheduler.add_source`'s contract). Current rules with no record yet (written
        by another process) get one first."""
        with self._lock:
            return self._load(force)

    def _load(self, force: bool) -> list[Hook] | None:
        nodes = [r for r in self.current() if isinstance(r, dict) and is_valid_id(r.get("id"))]
        by_id = self._skills()
        sig = (_stat(self.path), tuple(r["id"] for r in nodes), frozenset(by_id))
        if sig == self._sig and not force:
            return None
        have = self.records()
        missing = [r for r in nodes if (r["id"], "rule") not in have and r.get("node_kind") in ("rule", "constraint")]
        if missing:
            self.write(missing, time.time())
            have = self.records()
        projects = {rec["project"] for (_n, src), rec in have.items() if src == "skill"}
        if projects != self._skill_projects:  # read the skills again only when another project's hooks came
            self._skill_projects = projects
            by_id = self._skills()
        if self._propose_again(have, nodes, by_id):
            have = self.records()
        skills = set(by_id)
        standing = [have.get((r["id"], source)) for r in nodes for source in ("rule", "model")]
        own = [rec for (node_id, src), rec in have.items() if src == "skill" and node_id in skills]
        hooks: list[Hook] = []
        for rec in (r for r in [*standing, *own] if r is not None):
            for data in rec["hooks"]:
                try:
                    hooks.append(bound_hook(data, entry=rec["entry"], entry_id=rec["node_id"], source=rec["source"],
                                            hold=bool(rec.get("hold"))))
                except HookError as exc:  # a record edited by hand: that hook is skipped, named once
                    self.problems.append(str(exc))
                    log.warning("derived hook skipped: %s", exc)
        self._sig = (_stat(self.path), sig[1], frozenset(skills))
        return hooks

    def _skills(self) -> dict[str, dict]:
        """The current skill records of the projects that have skill hooks, by id."""
        return {r["id"]: r for p in sorted(self._skill_projects) for r in self.skills(p)
                if isinstance(r, dict) and is_valid_id(r.get("id"))}

    def _propose_again(self, have: dict, nodes: list[dict], skills: dict[str, dict]) -> int:
        """Propose again, from the record, the current rules' and skills' hooks stored with an older grammar
        (appended: the newest record of a node wins). The number of records appended."""
        stale = [(r, "rule") for r in nodes if r.get("node_kind") in ("rule", "constraint")
                 and (r["id"], "rule") in have and have[(r["id"], "rule")].get("grammar", 1) < GRAMMAR]
        stale += [(skills[n], "skill") for (n, src), rec in have.items()
                  if src == "skill" and n in skills and rec.get("grammar", 1) < GRAMMAR]
        if not stale:
            return 0
        ts = time.time()
        append_lines(self.path, b"".join(jsonl.dumps(self._record(r, ts, src)) for r, src in stale), fsync=self.fsync)
        log.info("memtier hooks: %d hooks proposed again with grammar %d", len(stale), GRAMMAR)
        return len(stale)

    def listing(self) -> list[dict]:
        """Every stored record with ``current``: whether its node (a Global node, a skill) stands now
        (``memtier inspect hooks``)."""
        current = {r["id"] for r in self.current() if isinstance(r, dict) and "id" in r}
        recs = self.records()
        for project in {rec["project"] for (_n, src), rec in recs.items() if src == "skill"}:
            current |= {r.get("id") for r in self.skills(project) if isinstance(r, dict)}
        return [{**rec, "current": node_id in current} for (node_id, _src), rec in recs.items()]


def _stat(path: Path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


