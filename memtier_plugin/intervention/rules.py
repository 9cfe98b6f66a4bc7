"""Pre-commit intervention (Pulse §3.3–3.4): before a tool call commits, stay silent, supplement, or intervene.

At pre_tool, evidence for the pending call is gathered across the layers
(standing rules, constraints and preferences of the Global layer; episodic
outcomes of the same call) and checked against the call's arguments:

* **intervene** (block, with the evidence and its ids as the reason) only when
  evidence applies to *this call's arguments* and conflicts with them:
  - the same call (tool and arguments) already failed and never succeeded since;
  - a standing rule bounds the day ("production deploys only on weekdays") and
    the call, about what the rule names, would run on a forbidden day;
  - a standing rule bounds the time of day ("never book flights before 8am",
    "never send emails after 9pm") and a time argument of the call is earlier
    (later);
  - a standing constraint caps an amount ("hotels up to $300 a night") and a
    price argument of a call about that object is higher;
* **supplement** (non-blocking evidence for the agent's next decision) when
  standing knowledge applies strongly to the call but nothing conflicts;
* **silent** otherwise — and always when the current task's own words
  explicitly ask for what the call does (an explicit instruction overrides a
  general habit: Pulse §4.4.3's Notion/Obsidian case).

Every decision carries its evidence and the features that produced it, so it
can be traced, explained and learned from. Rules only, no model: deterministic
and well under a millisecond on the no-model path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..layers.extract import requirement_attributes
from ..layers.rules import PRICE_KEY, bounds, minutes
from ..tokenize import token_set
from ..vocabulary import WEEKDAYS

_TIME = re.compile(r"(?:T|\b)(\d{1,2}):(\d{2})(?:\s*([ap])\.?m\b)?", re.IGNORECASE)  # "06:15", "6:45 PM"
_TIME_KEY = re.compile(r"depart|departure|start|time|when|at$|leave|pickup|earliest|arriv|land", re.IGNORECASE)
_WHEN_KEY = re.compile(r"^(?:at|when|date|start|scheduled?_?(?:at|for)?|run_at|time)$", re.IGNORECASE)
CHECKED_KINDS = ("rule", "constraint", "preference", "identity")  # skills and choices are not checked for conflicts
SUPPLEMENT_MIN = 0.7  # applicability of standing knowledge (topic + words) above which it is worth a supplement


@dataclass
class Evidence:
    id: str
    content: str
    kind: str  # rule | constraint | preference | identity | choice | skill | failure
    why: str = ""


@dataclass
class Decision:
    action: str  # silent | supplement | intervene
    evidence: list[Evidence] = field(default_factory=list)
    reason: str = ""
    features: dict = field(default_factory=dict)

    def text(self) -> str:
        lines = [f"[memtier] {self.reason}"] + [f"- [{e.id}] {e.content}" + (f" ({e.why})" if e.why else "")
                                               for e in self.evidence[:4]]
        return "\n".join(lines)


def _flat(params, prefix: str = "") -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    if isinstance(params, dict):
        for k, v in list(params.items())[:50]:
            out.extend(_flat(v, f"{prefix}{k}."))
    elif isinstance(params, list):
        for v in params[:50]:
            out.extend(_flat(v, prefix))
    else:
        out.append((prefix.rstrip("."), params))
    return out


def _call_day(params: dict, ts: float) -> str:
    """The weekday the call takes effect: a date/time argument ("at": "2026-10-26T09:00Z"), else now."""
    for key, value in _flat(params):
        if isinstance(value, str) and _WHEN_KEY.match(key.split(".")[-1]):
            try:
                dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
                return WEEKDAYS[dt.weekday()]
            except ValueError:
                continue
    return WEEKDAYS[datetime.fromtimestamp(ts, tz=timezone.utc).weekday()]


def _related(rule_text: str, tool: str, params: dict) -> bool:
    """The rule talks about this call: two of its words in the call (tool name split, argument values)."""
    call = token_set(tool.replace("_", " ") + " " + " ".join(f"{k.replace('_', ' ')} {v}" for k, v in _flat(params)))
    return len(token_set(rule_text) & call) >= 2


def conflicts(item, tool: str, params: dict, ts: float) -> str | None:
    """Why standing ``item`` (its content and kind) conflicts with this call's arguments, or None. What the rule
    bounds is read by :func:`memtier_plugin.layers.rules.bounds`, the grammar Hooks read too."""
    text = item.content
    b = bounds(text)
    if not computable(text) or not _related(text, tool, params):
        return None
    if b.days:
        day = _call_day(params, ts)
        if day in b.days:
            return f"the call would run on a {day}"
    if b.before is not None or b.after is not None:
        for key, value in _flat(params):
            if isinstance(value, str) and _TIME_KEY.search(key.split(".")[-1]):
                t = _TIME.search(value)
                at = minutes(t.group(1), t.group(2), f"{t.group(3)}m" if t.group(3) else None) if t else None
                if at is not None and b.before is not None and at < b.before:
                    return f"{key} {value} is before {b.before_text}"
                if at is not None and b.after is not None and at > b.after:
                    return f"{key} {value} is after {b.after_text}"
    if b.amount is not None:
        for key, value in _flat(params):
            if isinstance(value, (int, float)) and not isinstance(value, bool) and PRICE_KEY.search(key):
                if not b.amount_is_minimum and value > b.amount:
                    return f"{key} {value} is above the {b.amount_text} cap"
                if b.amount_is_minimum and value < b.amount:
                    return f"{key} {value} is below the {b.amount_text} floor"
    return None


def computable(text: str) -> bool:
    """The item's words bound a day, a time or an amount: its conflicts are this rule's to compute (a call
    it lets through is within those bounds, or they do not bear on it), not a learned policy's to guess."""
    b = bounds(text)
    return bool(b.days or b.before is not None or b.after is not None or b.amount is not None)


def explicit_in_task(task_text: str, params: dict) -> bool:
    """The current task's own words name what the call does (an argument value of substance)."""
    words = token_set(task_text)
    values = [str(v) for _, v in _flat(params)
              if (isinstance(v, str) and 2 < len(v) < 80) or (isinstance(v, (int, float)) and not isinstance(v, bool)
                                                             and abs(v) >= 10)]
    return any(token_set(v) and token_set(v) <= words for v in values)


def decide(tool: str, params: dict, *, ts: float, task_text: str, standing: list, failures: list[Evidence]) -> Decision:
    """The decision for one proposed call. ``standing``: (item, applicability) pairs, best first;
    ``failures``: earlier identical calls that failed and never succeeded since."""
    params = params if isinstance(params, dict) else {}
    explicit = explicit_in_task(task_text, params)
    features = {"explicit_in_task": explicit, "failures": len(failures), "standing": len(standing),
                "best_applicability": round(standing[0][1], 4) if standing else 0.0}
    if failures:
        return Decision("intervene", failures, f"this exact call failed before ({len(failures)}x): check the "
                                               "evidence and choose another way", {**features, "conflict": "failure"})
    revised_now = requirement_attributes(task_text)
    for item, score in standing:
        if item.label not in CHECKED_KINDS:
            continue
        why = conflicts(item, tool, params, ts)
        if why is None:
            continue
        if (explicit and item.label in ("preference", "constraint")) or (item.attribute and item.attribute in revised_now):
            features["overridden_by_task"] = item.id  # the current request says otherwise: it wins in its scope
            continue
        ev = Evidence(item.id, item.content, item.label, why)
        return Decision("intervene", [ev], f"held: this call conflicts with a standing {item.label} ({why})",
                        {**features, "conflict": item.label, "applicability": round(score, 4)})
    strong = [(it, s) for it, s in standing if s >= SUPPLEMENT_MIN and it.label != "skill"]
    if strong and not explicit:
        return Decision("supplement", [Evidence(it.id, it.content, it.label) for it, _ in strong[:3]],
                        "standing knowledge that applies to this call", features)
    return Decision("silent", [], "", features)
