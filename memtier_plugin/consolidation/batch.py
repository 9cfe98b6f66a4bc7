"""Consolidation batches (MemTier §3.3): episodic entries → project-shared facts.

One *batch* reads what the episodic ledgers gained since the checkpoint,
extracts facts from every eligible entry (heuristics, or the configured model
with a JSON schema, falling back to heuristics on any model failure),
deduplicates them against the project's current facts (and against what the
same entry's other candidates became), links revisions, and commits in this
order, each step durable before the next:

1. store-cost records (``memory/costs.jsonl``, model path only),
2. the journal (``memory/.daemon/batch.json``): every record steps 3 and 4 will write,
3. the facts (``memory/semantic/<project>.jsonl``, one fsync'd append per project),
4. one ``promoted`` record per source entry in its agent's ledger,
5. the journal is removed, then the checkpoint (``memory/.daemon/checkpoints.json``) moves.

A batch killed anywhere in 3-5 is finished by the next one from the journal:
the fact/marker records the store lacks are appended (an append torn at any
byte included), then the ``promoted`` records the ledgers lack. Every
``promoted`` record of a journal's entry lies beyond its file's checkpoint
(the journal goes before the checkpoint moves), so reading each file from its
checkpoint sees all of them and none is written twice. Killed before 2, the
batch is simply redone; fact ids are derived from (entry id, fact index) and an
entry whose facts are in the store (written by an older version, say) reuses
them. Batches take an exclusive ``flock`` on ``memory/.daemon/lock``, so
``memtier daemon --once`` and a running daemon never interleave.

An entry that is not a valid record (:func:`entry_problem`: a list for its
``project``, a timestamp that is no time, ...) or whose text makes the extractor
raise is *quarantined*: reported once as file:line, listed in the report, left
out, and passed by the checkpoint, so it never stops the batches after it. The
report lists only what reached the disk.

The watchdog loop that runs batches is :class:`memtier_plugin.consolidation.daemon.Daemon`;
store-cost records and their summaries are :mod:`memtier_plugin.store.costs`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..store import jsonl
from .checkpoints import (
    BatchLock, drop_journal, load_checkpoints, read_journal, save_checkpoints, write_journal,
)
from ..config import Config
from ..store.costs import append_costs, store_cost
from .facts import (
    Fact, extract_facts, facts_from_model_output, facts_schema, find_superseded, is_call_rendering, is_duplicate,
    revision_key, says_nothing, tool_statement,
)
from .patterns import norm_value
from ..store.episodic import SYSTEM_PREFIX, Ledger, tail_records, utc_iso
from ..store.records import entry_problem
from ..redact import redact
from ..store.semantic import SemanticStore, fact_id, fact_problem, fact_record, to_fact
from ..store.tombstones import Forgotten
from ..tokenize import count_tokens

log = logging.getLogger(__name__)

MAX_BATCH = 256          # eligible entries per batch (bounds the work a SIGTERM waits for)
_DATED = ("event", "plan", "progress")
EXTRACT_PROMPT = (
    "You extract durable facts from one entry of an AI agent's memory. Reply with JSON only: "
    '{"facts": [{"fact_kind": one of preference|constraint|decision|attribute|event|progress|plan, '
    '"subject": "user", "project" or a short entity name, "attribute": a short snake_case key '
    '(e.g. hotel_budget, seat, database), "value": the value, "content": one short standalone '
    'sentence stating the fact, "confidence": 0..1, "effective_time": "YYYY-MM-DD" or null}]}. '
    "Use the same attribute for the same thing, so a changed value replaces the old one. "
    'Reply {"facts": []} when the entry states nothing worth remembering.')


@dataclass
class ConsolidationReport:
    """What batches really did: only records that reached the disk are in ``new_facts``/``promoted``."""

    new_facts: list[dict] = field(default_factory=list)     # fact records written (a failed batch's are not)
    promoted: list[str] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)      # {"entry_id", "reason"}
    quarantined: list[dict] = field(default_factory=list)  # {"file", "line", "entry_id", "reason"}: bad records
    knowledge: list[dict] = field(default_factory=list)    # Global-layer nodes written from the batch's entries
    errors: list[str] = field(default_factory=list)
    store_tokens: int = 0                                   # model output tokens (0 on the heuristic path)
    duplicates: int = 0
    superseded: int = 0
    resumed: int = 0                                        # entries whose facts a crashed batch had written
    fallbacks: int = 0                                      # entries extracted by heuristics after a model failure
    batches: int = 0
    failed: int = 0                                         # batches that failed (redone next time)
    more: bool = False                                      # entries still pending (batch limit reached)
    elapsed_s: float = 0.0

    def merge(self, other: "ConsolidationReport") -> None:
        for name in ("new_facts", "promoted", "skipped", "quarantined", "errors", "knowledge"):
            getattr(self, name).extend(getattr(other, name))
        for name in ("store_tokens", "duplicates", "superseded", "resumed", "fallbacks", "batches", "failed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.more, self.elapsed_s = other.more, self.elapsed_s + other.elapsed_s

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["elapsed_s"] = round(self.elapsed_s, 4)
        return out


# ---------------------------------------------------------------- bad entries
def line_number(path: Path, offset: int) -> int:
    """The 1-based line number of the line starting at byte ``offset`` (for messages only)."""
    n, left = 1, offset
    try:
        with open(path, "rb") as fh:
            while left > 0:
                chunk = fh.read(min(left, 1 << 20))
                if not chunk:
                    break
                n += chunk.count(b"\n")
                left -= len(chunk)
    except OSError:
        return 0
    return n


# ---------------------------------------------------------------- one batch
class Consolidator:
    """Runs batches over one memory root; keeps its read position between batches."""

    def __init__(self, config: Config, *, client=None, clock: Callable[[], float] = time.time):
        self.config = config
        self.root = Path(config.memory_root)
        self.clock = clock
        self._gate: tuple | None = None  # (the learned standing gate, its embedder): _standing_gate
        self.ledger = Ledger(self.root, clock=clock)
        self.store = SemanticStore(self.root)
        self.forgotten = Forgotten(self.root)  # what the user told memory to forget is never promoted
        self._global = None  # the Global layer's store, made at the first batch that needs it
        self.promoted: set[str] = set()
        self._scan_pos: dict[str, int] = {}
        self._scan_ino: dict[str, int] = {}  # the file each read position belongs to
        self._queue: dict[str, list[tuple[int, dict, int]]] = {}  # (line end, record, line start)
        self._reported: set[tuple[str, int]] = set()               # quarantined (file, offset) already logged
        self._own_client = False
        self.client = client
        self.model_name = ""
        cc = config.consolidation
        if cc.extractor == "model":
            if client is None and config.model.enabled:
                from ..models.chat import ModelClient, ModelConfig

                self.client, self._own_client = ModelClient(ModelConfig.from_section(config.model)), True
            elif client is None:
                log.info("consolidation.extractor is model but model.enabled is false: using heuristics")
        else:
            self.client = None
        if self.client is not None:
            self.model_name = getattr(getattr(self.client, "config", None), "model", "") or ""

    def close(self) -> None:
        if self._own_client and self.client is not None:
            self.client.close()

    # -- reading
    def _scan(self, cps: dict[str, int]) -> None:
        """Read every episodic file from where we stopped to its end (whole lines only)."""
        for path in self.ledger.files():
            rel = path.relative_to(self.root).as_posix()
            cp = cps.get(rel, 0)
            pos = self._scan_pos.get(rel)
            queue = self._queue.get(rel, [])
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            size = st.st_size
            if self._scan_ino.get(rel, st.st_ino) != st.st_ino:
                pos = None  # replaced whole (memtier purge): read again from its checkpoint, which the purge kept true
            self._scan_ino[rel] = st.st_ino
            if pos is None or pos < cp:
                pos, queue = cp, []
            else:
                queue = [q for q in queue if q[0] > cp]
            if size < pos:
                log.warning("%s: file shrank below its checkpoint; reading it again", path)
                pos, queue, cps[rel] = 0, [], 0
            for line_at, end, rec in tail_records(path, pos):
                pos = end
                if rec is None:
                    continue
                kind = rec.get("kind", "entry")
                if kind == "promoted" and isinstance(rec.get("entry_id"), str):
                    self.promoted.add(rec["entry_id"])
                elif kind == "entry":
                    queue.append((end, rec, line_at))
            self._scan_pos[rel], self._queue[rel] = pos, queue

    def _ineligible(self, rec: dict) -> str | None:
        """Why a valid entry is not consolidated (already done, system text, too short), or None."""
        if rec.get("promoted") is True or rec["id"] in self.promoted:
            return "already promoted"
        if rec["id"] in self.forgotten:
            return "forgotten"
        if rec.get("role") == "system" or rec["content"].startswith(SYSTEM_PREFIX):
            return "system entry"
        tokens = rec.get("tokens") if isinstance(rec.get("tokens"), int) else count_tokens(rec["content"])
        if tokens < self.config.consolidation.min_tokens:
            return f"fewer than {self.config.consolidation.min_tokens} tokens"
        return None

    def _quarantine(self, rel: str, line_at: int, rec: dict, reason: str, report: ConsolidationReport) -> None:
        """Leave a bad entry out of the batch for good (the checkpoint moves past it), reported once."""
        path = self.root / rel
        line = line_number(path, line_at)
        eid = rec.get("id") if isinstance(rec.get("id"), str) else None
        report.quarantined.append({"file": str(path), "line": line, "entry_id": eid, "reason": reason})
        if (rel, line_at) not in self._reported:
            self._reported.add((rel, line_at))
            log.warning("%s:%d: entry %s quarantined, not consolidated: %s", path, line, eid or "?", reason)

    def _select(self, cps: dict[str, int], report: ConsolidationReport
                ) -> tuple[list[tuple[dict, str, int]], dict[str, int], dict]:
        """Pending entries (a per-file prefix, at most MAX_BATCH eligible; each with its file and
        offset) and the checkpoint covering them. Bad entries are quarantined on the way."""
        work, new_cps, taken = [], dict(cps), {}
        budget = MAX_BATCH
        for rel in sorted(self._queue):
            queue, n = self._queue[rel], 0
            for end, rec, line_at in queue:
                problem = entry_problem(rec)
                reason = None if problem else self._ineligible(rec)
                if problem:
                    self._quarantine(rel, line_at, rec, problem, report)
                elif reason is None:
                    if budget == 0:
                        break
                    budget -= 1
                    work.append((rec, rel, line_at))
                elif reason != "already promoted":
                    report.skipped.append({"entry_id": rec.get("id"), "reason": reason})
                n += 1
                new_cps[rel] = end
            taken[rel] = n
            if n == len(queue):
                new_cps[rel] = self._scan_pos[rel]
        report.more = any(taken[r] < len(q) for r, q in self._queue.items())
        return work, new_cps, taken

    # -- extraction
    def _extract(self, entry: dict, report: ConsolidationReport, state: dict) -> tuple[list[Fact], str, Any]:
        role = entry.get("role", "user")
        text = entry["content"]
        if (role == "tool" and (text := tool_statement(text)) is None) or says_nothing(text, role):
            # a raw call rendering, structured data or a failure; chit-chat, a request, an acknowledgement:
            # promoted with no fact, whichever extractor is configured
            return [], "heuristic", None
        if self.client is not None and not state.get("model_failed"):
            try:
                msgs = [{"role": "system", "content": EXTRACT_PROMPT},
                        {"role": "user", "content": f"Entry ({role}, {entry['timestamp'][:10]}, project "
                                                    f"{entry.get('project') or '-'}):\n{text}"}]
                result = self.client.chat(msgs, schema=facts_schema())
                facts = [self._clean(f, entry) for f in facts_from_model_output(result.data)
                         if not is_call_rendering(f.content)]
                return facts, "model", result
            except Exception as exc:  # any model failure: heuristics for the rest of this batch
                state["model_failed"] = True
                msg = f"model extraction failed ({type(exc).__name__}: {str(exc)[:200]}); heuristics for this batch"
                log.warning("%s", msg)
                report.errors.append(msg)
        if self.client is not None:
            report.fallbacks += 1
        return extract_facts(text, role=role, timestamp=entry["timestamp"]), "heuristic", None

    @staticmethod
    def _clean(f: Fact, entry: dict) -> Fact:
        eff = f.effective_time or (None if f.fact_kind in _DATED else entry["timestamp"][:10])
        return Fact(f.fact_kind, f.subject, f.attribute, redact(f.value)[0], redact(f.content)[0], f.confidence, eff)

    def _place(self, f: Fact, fid: str, entry: dict, extractor: str, now: str,
               pending: list[dict], placed: ConsolidationReport, own: list[dict]) -> str:
        """Dedup / revise / insert one candidate; returns the id it ends up as.

        A record to write goes to ``pending`` (and the in-memory store); ``placed`` counts the
        duplicates and revisions, which the batch reports once they are committed.

        ``own`` holds the facts this entry's earlier candidates became (written or matched),
        current or not: an entry that states one thing under two keys (``parking_budget`` and
        ``budget``, say) must not yield two facts with one content, also when the first was
        written as history (a late entry) and so is no longer among the current facts.
        """
        project = entry.get("project") or ""
        pf = self.store.project(project, refresh=False)
        key = revision_key(f)
        gone = self.forgotten.ids()  # a forgotten fact neither holds back nor is revised by a new statement
        same = [r for r in pf.same_key(f) if r["id"] not in gone]
        supersedes, marker_by = None, None
        if same:
            for r in same:
                if norm_value(r["value"]) == norm_value(f.value):
                    placed.duplicates += 1
                    own.append(r)
                    return r["id"]
            order = lambda r: (r.get("effective_time") or r["timestamp"][:10], r["timestamp"])  # noqa: E731
            newest = max(same, key=order)
            if order({"effective_time": f.effective_time, "timestamp": entry["timestamp"]}) < order(newest):
                marker_by = newest["id"]  # an older statement arriving late: history, not current
                for r in pf.same_key(f, current=False):  # ... unless the history already holds it
                    if r["id"] not in gone and norm_value(r["value"]) == norm_value(f.value):
                        placed.duplicates += 1
                        own.append(r)
                        return r["id"]
            else:
                olds = [to_fact(r) for r in same]
                old = find_superseded(f, olds)
                supersedes = same[olds.index(old)]["id"] if old is not None else newest["id"]
        # Content duplicates: current facts under another key (one under the same key with another
        # value is a revision, however alike the wording) and what this entry already became.
        near = [r for r in pf.near(f) if r["id"] not in gone and (key is None or revision_key(to_fact(r)) != key)]
        seen = {r["id"] for r in near}
        near += [r for r in own if r["id"] not in seen]
        olds = [to_fact(r) for r in near]
        dup = is_duplicate(f, olds, self.config.consolidation.dedup_threshold)
        if dup is not None:
            placed.duplicates += 1
            target = near[next(i for i, o in enumerate(olds) if o is dup)]
            own.append(target)
            if supersedes and pf.is_current(target["id"]):
                # a newer value for ``key`` that another current fact already states: the old
                # version is history all the same, replaced by that fact
                self._mark(pf, supersedes, target["id"], project, now, pending)
                placed.superseded += 1
            return target["id"]
        rec = fact_record(f, fid=fid, project=project, origin_agent=entry["agent_id"], entry=entry,
                          supersedes=supersedes, extractor=extractor, recorded_at=now)
        pf.add(rec)
        pending.append(rec)
        own.append(rec)
        if supersedes:
            placed.superseded += 1
        if marker_by:
            self._mark(pf, fid, marker_by, project, now, pending)
        return fid

    @staticmethod
    def _mark(pf, fid: str, by: str, project: str, now: str, pending: list[dict]) -> None:
        marker = {"v": jsonl.SCHEMA_VERSION, "kind": "superseded", "fact_id": fid, "by": by,
                  "project": project, "timestamp": now}
        pf.add(marker)
        pending.append(marker)

    # -- the batch
    def run_batch(self) -> ConsolidationReport:
        """One batch under the lock; on any error nothing is checkpointed and state is re-read next time."""
        t0 = time.perf_counter()
        report = ConsolidationReport(batches=1)
        if not self.config.consolidation.enabled:
            return report
        with BatchLock(self.root):
            try:
                self._batch(report)
            except Exception as exc:
                log.exception("consolidation batch failed; it will be redone")
                report.errors.append(f"batch failed: {type(exc).__name__}: {exc}")
                report.failed += 1
                report.more = False
                self._scan_pos.clear()
                self._queue.clear()
                self.store = SemanticStore(self.root)
        report.elapsed_s = time.perf_counter() - t0
        return report

    def _batch(self, report: ConsolidationReport) -> None:
        """Select, extract, place, then commit (journal, facts, promoted records, checkpoint).

        ``report`` gets the records as they reach the disk (``_commit``) and the placement
        counts only once the whole batch is committed, so a failed batch reports nothing it
        did not write.
        """
        cps = load_checkpoints(self.root)
        self.store.refresh()
        self._scan(cps)
        self._recover(report)
        work, new_cps, taken = self._select(cps, report)
        now = utc_iso(self.clock())
        pending: dict[str, list[dict]] = {}
        costs: list[dict] = []
        done: list[tuple[dict, list[str], str]] = []
        state: dict = {}
        placed = ConsolidationReport()
        for entry, rel, line_at in sorted(work, key=lambda w: w[0]["timestamp"]):
            project = entry.get("project") or ""
            already = self.store.project(project, refresh=False).by_source.get(entry["id"])
            if already:
                placed.resumed += 1
                done.append((entry, list(already), "resumed"))
                continue
            try:
                facts, extractor, result = self._extract(entry, report, state)
            except Exception as exc:  # a text the extractor cannot handle costs that entry, not the batch
                log.debug("extraction of %s failed", entry["id"], exc_info=True)
                self._quarantine(rel, line_at, entry, f"extraction failed: {type(exc).__name__}: {exc}", report)
                continue
            if result is not None:
                report.store_tokens += result.completion_tokens
                costs.append(store_cost(entry, result, model=self.model_name, now=now))
            ids: list[str] = []
            own: list[dict] = []
            for i, f in enumerate(facts):
                fid = self._place(f, fact_id(entry["id"], i), entry, extractor, now,
                                  pending.setdefault(project, []), placed, own)
                if fid not in ids:
                    ids.append(fid)
            done.append((entry, ids, extractor))
        append_costs(self.root, costs)
        pending = {project: recs for project, recs in pending.items() if recs}
        promoted = [(entry["agent_id"], {
            "kind": "promoted", "entry_id": entry["id"], "fact_ids": ids, "session_id": entry["session_id"],
            "project": entry.get("project") or "", "extractor": extractor}) for entry, ids, extractor in done]
        if promoted:
            write_journal(self.root, pending, promoted, self.clock)
        self._commit(pending, promoted, report)
        self._standing(work, report)
        drop_journal(self.root)  # before the checkpoint: a journal's entries always lie beyond it
        save_checkpoints(self.root, new_cps, self.clock)
        for rel, n in taken.items():
            del self._queue[rel][:n]
        report.duplicates += placed.duplicates
        report.superseded += placed.superseded
        report.resumed += placed.resumed

    def _standing(self, work: list, report: ConsolidationReport) -> None:
        """The Global layer from the batch's entries, session by session, by the one maintenance path the hooks
        use too (layers/maintain.py: ``standing.extractor`` honoured). Idempotent: a redone batch finds its
        nodes already held."""
        if not self.config.standing.enabled or not work:
            return
        from ..layers.global_layer import GlobalStore
        from ..layers.maintain import maintain

        sessions: dict[tuple[str, str, str], list[tuple[str, str, str]]] = {}
        for entry, _rel, _at in sorted(work, key=lambda w: w[0]["timestamp"]):
            key = (entry["agent_id"], entry["session_id"], entry.get("project") or "")
            sessions.setdefault(key, []).append((entry["id"], entry.get("role") or "user", entry["content"]))
        if self._global is None:  # one per consolidator: later batches read only what is new
            self._global = GlobalStore(self.root, fsync=self.store.fsync, forgotten=self.forgotten)
        store = self._global
        try:
            for (agent, session, project), msgs in sessions.items():
                recs = maintain(store, msgs, config=self.config, client=self.client, agent_id=agent,
                                session_id=session, project=project, ts=self.clock(), gate=self._standing_gate())
                report.knowledge.extend(r for r in recs if r["kind"] == "knowledge")
        except Exception as exc:  # the facts are committed; standing knowledge is redone at the next boundary
            log.warning("standing knowledge not maintained in this batch: %s", exc)

    def _standing_gate(self) -> tuple:
        """(the learned standing gate, the embedder it reads), made once per consolidator (layers/gate.py), or
        (None, None) when it is off or cannot be read (extraction keeps its rules)."""
        if self._gate is None:
            from ..layers.gate import resolve
            from ..recall.backends import standing_embedder

            self._gate = resolve(self.config, lambda: standing_embedder(self.config)[0])
        return self._gate

    def _commit(self, facts: dict[str, list[dict]], promoted: list[tuple[str, dict]],
                report: ConsolidationReport) -> None:
        """Append the fact/marker records, then the promoted records of entries that have none yet;
        ``report`` lists each as soon as it is on disk."""
        for project, recs in facts.items():
            if recs:
                self.store.append(project, recs)
                report.new_facts.extend(r for r in recs if r.get("kind") == "fact")
        for agent_id, rec in promoted:
            if rec["entry_id"] in self.promoted:
                continue
            self.ledger.add_update(agent_id, rec)
            self.promoted.add(rec["entry_id"])
            report.promoted.append(rec["entry_id"])

    def _recover(self, report: ConsolidationReport) -> None:
        """Finish the batch a crash cut short, from its journal: the records the store lacks (a kill
        before or inside the append, which may have torn it anywhere), then the promoted records the
        ledgers lack. Runs after ``_scan``, so ``self.promoted`` holds every promoted record beyond
        the checkpoint, which is all of the journal's (it is dropped before the checkpoint moves)."""
        journal = read_journal(self.root)
        if journal is None:
            return
        facts, promoted = journal
        missing: dict[str, list[dict]] = {}
        for project, recs in facts.items():
            pf = self.store.project(project, refresh=False)
            missing[project] = [r for r in recs if fact_problem(r) is None and (
                (r["kind"] == "fact" and r["id"] not in pf.records)
                or (r["kind"] == "superseded" and r["fact_id"] not in pf.superseded_by))]
        n = len(report.promoted)
        self._commit(missing, promoted, report)
        report.resumed += len(report.promoted) - n
        log.info("finished an interrupted batch: %d records appended, %d entries marked promoted",
                 sum(map(len, missing.values())), len(report.promoted) - n)


def consolidate_once(config: Config, *, client=None, clock: Callable[[], float] = time.time) -> ConsolidationReport:
    """Process everything pending (as many batches as it takes) and return one merged report."""
    cons = Consolidator(config, client=client, clock=clock)
    try:
        report = ConsolidationReport()
        while True:
            part = cons.run_batch()
            report.merge(part)
            if not part.more:
                return report
    finally:
        cons.close()
