"""The Workspace layer: skills learned from successful runs, and working state (MemSidecar §3.2, eq. 6).

Per project, append-only JSONL like the other ledgers:

* ``memory/procedural/<project>.jsonl`` — ``{"kind": "skill", "goal": <the task it achieved>,
  "goals": [the goals of every success, newest first], "steps": [{"tool", "params"}], "tools": [...],
  "count": <successes>, "supersedes": <the revision it replaces, on a revision>, "outcome": "success",
  "content": <one readable line>, "provenance": {"run_id", "session_id", "agent_id", "entry_ids"}}``.
  A skill is written only from a run that succeeded and whose tool calls all succeeded after the last
  failure (the sequence that achieved the task); it is scored in the procedural tier (μ 1.4).
* ``memory/state/<project>.jsonl`` — ``{"kind": "state", "session_id", "progress", "pending",
  "artifacts", "decisions", "calls"}`` at task boundaries: what the last run did and what it left open. The latest
  record is the project's working state (:func:`latest_state`; each one supersedes the one before); the
  facade delivers it at the first prompt of the project's next session when it leaves something open
  (:func:`state_open`), as one line (:func:`state_content`).

A skill's goal is the task the run achieved in the user's words (:func:`skill_goal`), never a bare
acknowledgement: a run opened by "Yes, go." takes the action the assistant proposed or the session's
last prompt that stated a task. No goal, no skill. One skill per kind of task (:func:`same_kind`):
a run that achieves it again appends a revision that supersedes the current one and counts the
successes. A skill is offered only to a prompt of its kind of task (:func:`skill_applies`), and its
line says it is what worked before, not what to do.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from pathlib import Path

import orjson

from ..store import jsonl
from ..store.episodic import append_lines, clean_id, clip_text, derived_id, utc_iso
from ..store.files import TailReader
from ..store.paths import clip_redacted
from ..recall.packing import has_content
from ..redact import redact, redact_obj
from ..store.semantic import project_filename
from ..tokenize import jaccard, tokenize
from .extract import extract

log = logging.getLogger(__name__)
GOAL_MIN_WORDS = 2  # task words a goal needs ("Deploy atlas"); fewer: the run answers what came before
GOAL_LOOKBACK = 40  # messages of the session searched for the task an acknowledgement answered
GOAL_SENTENCES = 12  # sentences of a message read for a task (each is asked whether it only states something)
GOAL_READS = 4  # earlier user messages read sentence by sentence before the search gives up (bounded at agent_end)
GOAL_KEEP = 0.5  # a sentence joins the goal when its calls score is at least this share of the closest's
SKILL_KIND_TOOLS = 0.5  # same kind of task: the same last tool and tool sets with at least this Jaccard ...
SKILL_KIND_GOAL = 0.4  # ... and goals sharing at least this share of the shorter one's task words
SKILL_GOALS = 5  # goals a skill keeps (newest first): the words its kind of task is recognised by
APPLY_WORDS = 2  # task words a prompt shares with a skill's goals and tools for the skill to apply
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_PROPOSAL = re.compile(r"\b(?:shall|should|can|may) (?:i|we)\b|\b(?:want|like) me to\b", re.IGNORECASE)
_CLAUSE = r"(?:[^.!?\n]|\.(?=\w))*"  # a sentence's words: a period inside "v1.4.0" or "0042.sql" does not end it
_DECIDED = re.compile(rf"{_CLAUSE}\b(?:decided|decision|chose|chosen|agreed|going with|settled on|we'll use|will use)\b"
                      rf"{_CLAUSE}[.!?]?", re.IGNORECASE)
_PENDING = re.compile(rf"{_CLAUSE}\b(?:next|todo|pending|still need|remaining|will|follow[- ]up|tomorrow|later)\b"
                      rf"{_CLAUSE}[.!?]?", re.IGNORECASE)


def _short_params(params) -> dict:
    """Params as a skill keeps them: redacted, then scalar values cut to 80 characters, at most 8 keys."""
    if not isinstance(params, dict):
        return {}
    out = {}
    for k, v in list(params.items())[:8]:
        if isinstance(v, (str, int, float, bool)) or v is None:
            out[clip_redacted(str(k), 40)[0]] = v if not isinstance(v, str) else clip_redacted(v, 80)[0]
    return redact_obj(out)[0]


def skill_problem(rec: dict) -> str | None:
    kind = rec.get("kind")
    if kind == "skill":
        if not all(isinstance(rec.get(k), str) and rec[k] for k in ("id", "content", "goal", "timestamp")):
            return "skill record lacks a string id, content, goal or timestamp"
        steps = rec.get("steps")
        if not isinstance(steps, list) or not all(isinstance(s, dict) and isinstance(s.get("tool"), str) for s in steps):
            return "skill 'steps' is not a list of {tool, params}"
        count, goals = rec.get("count", 1), rec.get("goals", [])
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            return "skill 'count' is not a positive integer"
        if not isinstance(goals, list) or not all(isinstance(g, str) for g in goals):
            return "skill 'goals' is not a list of strings"
        if not isinstance(rec.get("supersedes", ""), str):
            return "skill 'supersedes' is not a skill id"
        return None
    if kind == "state":
        if not isinstance(rec.get("id"), str) or not isinstance(rec.get("progress", ""), str):
            return "state record lacks a string id or progress"
        return None
    return f"unknown record kind {str(kind)[:30]!r}"


class ProjectLedger:
    """One project's append-only file under ``memory/<sub>/`` folded in memory."""

    def __init__(self, memory_root: Path | str, sub: str, project: str, *, fsync: bool = True):
        self.path = Path(memory_root) / sub / project_filename(project)
        self.project = project
        self.fsync = fsync
        self.records: list[dict] = []
        self._tail = TailReader(self.path)
        self._lock = threading.RLock()

    def refresh(self) -> list[dict]:
        with self._lock:
            new = list(self._tail.read())
            if self._tail.restarted:
                self.records = []
            self.records.extend(rec for _at, _end, rec in new if rec is not None and skill_problem(rec) is None)
            return self.records

    def append(self, rec: dict) -> None:
        append_lines(self.path, jsonl.dumps(rec), fsync=self.fsync)
        self.refresh()


@functools.lru_cache(maxsize=512)  # a prompt is tested against every skill of the project; tool names recur
def task_words(text: str) -> frozenset[str]:
    """The words that say what a task is: stemmed, without stop words, acknowledgements ("yes", "go",
    "thanks") or bare numbers."""
    return _content(frozenset(tokenize(text)))


@functools.lru_cache(maxsize=4096)
def _content(tokens: frozenset[str]) -> frozenset[str]:
    return frozenset(t for t in tokens if has_content(t))


def _flat(value, depth: int = 0):
    """The scalar strings of a params value (keys included), two levels deep at most."""
    if isinstance(value, dict) and depth < 2:
        for k, v in list(value.items())[:16]:
            yield str(k)
            yield from _flat(v, depth + 1)
    elif isinstance(value, (list, tuple)) and depth < 2:
        for v in list(value)[:16]:
            yield from _flat(v, depth + 1)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        yield str(value)[:200]


def call_words(calls: list[dict]) -> frozenset[str]:
    """The task words of the calls: tool names, param names and values."""
    return task_words(" ".join(f"{c.get('name', '')} {' '.join(_flat(c.get('params')))}" for c in calls))


def _sentences(text: str) -> list[str]:
    """The sentences of ``text`` that say something of their own ("Thanks." and "Great." are dropped)."""
    return [s.strip() for s in _SENTENCE.split(text) if s.strip() and has_content(s)]


def _stated(sentence: str) -> bool:
    """What the user states for good ("never book flights before 8am", "My MileagePlus number is UA-MP 88213457":
    the Global layer's, layers/extract.py): no task, and a run that only records it achieved none."""
    return bool(extract(sentence, role="user"))


def _proposal(text: str) -> str:
    """The action an assistant message offers ("…, so shall I ship v1.4.1 to production now?" →
    "ship v1.4.1 to production now"), or ""."""
    for sentence in reversed(_SENTENCE.split(text)):
        m = _PROPOSAL.search(sentence)
        if m and sentence.rstrip().endswith("?"):
            return sentence[m.end():].strip(" ?,.:;")
    return ""


def skill_goal(run_messages: list[tuple[str, str, str]], earlier, calls: list[dict]) -> str:
    """The task a run achieved, in the user's words; "" when there is none.

    ``run_messages`` and ``earlier`` (the session's messages, or a function that reads them only when
    they are needed; what follows the run's first message is not read) are (entry id, role, text).
    The run's own user sentences with content are the goal when they name a task (at least
    ``GOAL_MIN_WORDS`` task words). Otherwise ("Yes, go.", "Fine, book it.") the run answers what came
    before: the action the assistant's last message proposed ("shall I …?"), or else the session's last
    user message that names a task, of which the sentences about as close to the run's calls as the
    closest are kept. The run's own sentences with content follow. A sentence that states what holds for good
    (:func:`_stated`) names no task: a run whose words only state such things ("Yes: never book flights before
    8am. My MileagePlus number is UA-MP 88213457.", after which the agent saved them to a profile) learns a
    skill only for the action the assistant's last message offered and the user approved ("Shall I save these
    to your profile?"), not for an older request of the session."""
    said = [s for m in run_messages if m[1] == "user" for s in _sentences(m[2])][:GOAL_SENTENCES]
    own = [s for s in said if not _stated(s)]
    stated_only = bool(said) and not own  # the run's words only state what holds for good
    if len(task_words(" ".join(own))) >= GOAL_MIN_WORDS:
        return _closest(own, call_words(calls))
    earlier = list(earlier() if callable(earlier) else earlier)
    ids = {m[0] for m in run_messages}
    earlier = earlier[:next((i for i, m in enumerate(earlier) if m[0] in ids), len(earlier))]
    before, answered, reads = "", False, 0
    for _id, role, text in reversed(earlier[-GOAL_LOOKBACK:]):
        if role == "assistant" and not answered:
            before = _proposal(text)  # the action this run's acknowledgement approved, if it offered one
            if len(task_words(before)) >= GOAL_MIN_WORDS:
                break
            before = ""
            if stated_only:
                break  # nothing offered was approved: the run recorded what the user stated
        elif role == "user":
            if stated_only or reads >= GOAL_READS:
                break
            if len(task_words(text)) >= GOAL_MIN_WORDS:  # words that may name a task: read it sentence by sentence
                reads += 1
                tasks = [t for t in _sentences(text)[:GOAL_SENTENCES] if not _stated(t)]
                if len(task_words(" ".join(tasks))) >= GOAL_MIN_WORDS:
                    before = _closest(tasks, call_words(calls))
                    break
            answered = True  # an earlier acknowledgement: what came before it was answered then
    goal = " ".join([before, *own]).strip()
    return goal if len(task_words(goal)) >= GOAL_MIN_WORDS else ""


def _closest(sentences: list[str], words: frozenset[str]) -> str:
    """The sentences whose task words are about as concentrated on ``words`` as the closest one's (all
    of them when none shares a word or the kept ones name no task, as "Restart it."), in their order."""
    scores = [len(task_words(s) & words) / max(1, len(task_words(s))) ** 0.5 for s in sentences]
    best = max(scores, default=0.0)
    kept = " ".join(s for s, sc in zip(sentences, scores) if sc >= GOAL_KEEP * best)
    return kept if best > 0 and len(task_words(kept)) >= GOAL_MIN_WORDS else " ".join(sentences)


def _goal_words(rec: dict) -> list[frozenset[str]]:
    return [task_words(g) for g in (rec.get("goals") or [rec["goal"]])]


def same_kind(rec: dict, tools: list[str], goal: str) -> bool:
    """Whether a run with ``tools`` (in order) that achieved ``goal`` did the stored skill's kind of task:
    the same last tool (the call that achieved it) and tool sets with Jaccard ≥ ``SKILL_KIND_TOOLS``,
    and the goals share at least ``SKILL_KIND_GOAL`` of the shorter one's task words (against any goal
    the skill has achieved)."""
    old = rec.get("tools") or []
    if not old or not tools or old[-1] != tools[-1] or jaccard(frozenset(old), frozenset(tools)) < SKILL_KIND_TOOLS:
        return False
    new = task_words(goal)
    return any(len(new & w) >= max(1.0, SKILL_KIND_GOAL * min(len(new), len(w))) for w in _goal_words(rec) if w)


def current_skills(store: ProjectLedger) -> list[dict]:
    """The project's skills that no revision superseded, in ledger order."""
    recs = [r for r in store.refresh() if r.get("kind") == "skill"]
    gone = {r.get("supersedes") for r in recs}
    return [r for r in recs if r["id"] not in gone]


def skill_content(goal: str, steps: list[dict], count: int) -> str:
    """The skill as history: what worked before, for which task, how often (never phrased as an order)."""
    calls = " → ".join(f"{s['tool']}({orjson.dumps(s['params']).decode() if s['params'] else ''})" for s in steps)
    times = f", {count} times" if count > 1 else ""
    return clip_text(f"skill (worked before{times} for: {goal}): {calls}", 1200)


def learn_skill(store: ProjectLedger, *, goal: str, calls: list[dict], run_id: str, session_id: str,
                agent_id: str, entry_ids: list[str], ts: float) -> dict | None:
    """The skill a successful run shows (its tool calls after the last failure) for ``goal`` (see
    :func:`skill_goal`; "" learns nothing): a new skill, or a revision of the current skill of the same
    kind of task that counts one more success. The record written, or None."""
    tail = []
    for call in calls:
        if call.get("error"):
            tail = []  # what came before a failure did not achieve the task
        else:
            tail.append(call)
    if not tail or not goal.strip():
        return None
    steps = [{"tool": clip_redacted(str(c.get("name", "")), 80)[0], "params": _short_params(c.get("params"))} for c in tail[:12]]
    tools = list(dict.fromkeys(s["tool"] for s in steps))
    goal = clip_redacted(" ".join(goal.split()), 300)[0]
    old = next((r for r in reversed(current_skills(store)) if same_kind(r, tools, goal)), None)
    count = int(old.get("count") or 1) + 1 if old else 1
    goals = list(dict.fromkeys([goal, *((old.get("goals") or [old["goal"]]) if old else [])]))[:SKILL_GOALS]
    rec = {"v": jsonl.SCHEMA_VERSION, "kind": "skill", "timestamp": utc_iso(ts),
           "project": store.project, "goal": goal, "goals": goals, "steps": steps, "tools": tools,
           "count": count, "outcome": "success", "content": skill_content(goal, steps, count),
           "provenance": {"run_id": clean_id(run_id), "session_id": clean_id(session_id), "agent_id": agent_id,
                          "entry_ids": entry_ids[:16]}}
    rec["id"] = derived_id("sk", ts, store.project, rec["provenance"]["run_id"], rec["provenance"]["session_id"],
                           agent_id, goal, round(ts, 3))
    if old:
        rec["supersedes"] = old["id"]
    store.append(rec)
    return rec


def skill_text(rec: dict) -> str:
    """What a skill is about, for routing and word overlap: its goals and its tools."""
    return f"{' '.join(rec.get('goals') or [rec['goal']])} {' '.join(rec.get('tools') or [])}"


def skill_applies(prompt: str, item) -> bool:
    """Whether ``prompt`` asks for the kind of task the skill ``item`` (a standing Item with ``tokens``
    of :func:`skill_text` and ``tools``) achieved: it names one of the skill's tools in full ("deploy the
    billing service" → ``deploy``; "book a hotel" → ``book_hotel``), or shares at least
    ``APPLY_WORDS`` task words with its goals (a tool's word alone, as "get" of ``get_release``, counts
    only through the tool's full name). An acknowledgement ("Thanks.", "Yes, go.") has
    no task words and is never given a skill."""
    words = task_words(prompt)
    if not words:
        return False
    tools = [task_words(str(t).replace("_", " ")) for t in getattr(item, "tools", ()) or ()]
    if any(tw and tw <= words for tw in tools):
        return True
    return len(words & (_content(item.tokens) - frozenset().union(*tools))) >= APPLY_WORDS


def record_state(store: ProjectLedger, *, session_id: str, progress: str, calls: list[dict], ts: float) -> dict:
    """Working state at a task boundary: what was done, what is pending, what was produced."""
    progress = clip_redacted(progress.strip(), 600)[0]
    pending = [redact(p.strip())[0] for p in _PENDING.findall(progress)][:5]
    artifacts = []
    for c in calls:
        if not c.get("error"):
            for k, v in (c.get("params") or {}).items() if isinstance(c.get("params"), dict) else ():
                if isinstance(v, str) and re.search(r"(?:path|file|url|id|version|branch|ref)$", str(k), re.I):
                    artifacts.append(f"{k}={clip_redacted(v, 80)[0]}")
    decisions = [redact(d.strip())[0] for d in _DECIDED.findall(progress) if d.strip() not in pending][:5]
    rec = {"v": jsonl.SCHEMA_VERSION, "kind": "state", "id": derived_id("ws", ts, store.project, clean_id(session_id),
                                                                       round(ts, 3), progress),
           "timestamp": utc_iso(ts),
           "project": store.project, "session_id": clean_id(session_id), "progress": progress,
           "pending": pending, "artifacts": redact_obj(list(dict.fromkeys(artifacts))[:10])[0],
           "decisions": decisions, "calls": len(calls)}
    store.append(rec)
    return rec


def latest_state(store: ProjectLedger) -> dict | None:
    """The project's current working state: its latest record by time (each one supersedes the one before;
    a fleet's mirror may hold them out of order)."""
    states = [r for r in store.refresh() if r.get("kind") == "state"]
    return max(states, key=lambda r: (str(r.get("timestamp") or ""), r["id"]), default=None)


def state_open(rec: dict, records: list[dict] = ()) -> bool:
    """Whether a working state leaves something for the next task: pending steps or decisions, of a session
    that made tool calls (``records``: the ledger's, read for the session's other runs; an agent's task: a
    conversation's "I'll think about it later" is no working state)."""
    if not (rec.get("pending") or rec.get("decisions")):
        return False
    sid = rec.get("session_id")
    return any(isinstance(r.get("calls"), int) and r["calls"] > 0 for r in (rec, *records)
               if r.get("session_id") == sid)


def state_hits(store: ProjectLedger, session_id: str) -> list:
    """The project's working state as an item of the block, when the latest record leaves something open and
    another session wrote it (the next task's first prompt): one Hit on the fixed probability
    ``recall.calibration.FIXED["state"]`` (no labelled data picks a project's own open state out), else none."""
    from ..recall.calibration import FIXED
    from ..recall.packing import Hit

    rec = latest_state(store)
    if rec is None or rec.get("session_id") == session_id or not state_open(rec, store.records):
        return []
    return [Hit(rec["id"], state_content(rec), rec["timestamp"], rec.get("session_id", ""), "", "state",
                "procedural", FIXED["state"], probability=FIXED["state"])]


def state_content(rec: dict) -> str:
    """A working state as one line: where the project's last task stopped (pending, decisions, artifacts)."""
    parts = [f"working state of project {rec.get('project') or '(none)'} after session {rec.get('session_id', '')}"]
    for key, label in (("pending", "pending"), ("decisions", "decided"), ("artifacts", "artifacts")):
        vals = [str(v) for v in rec.get(key) or [] if isinstance(v, str)]
        if vals:
            parts.append(f"{label}: " + "; ".join(vals))
    if len(parts) == 1 and rec.get("progress"):
        parts.append(f"last progress: {rec['progress']}")
    return clip_text(" — ".join(parts), 1200)
