"""Hooks proposed from memory: a standing rule's own Hook, and a model's proposal checked as data.

MemSidecar §3.3 generates a hook's predicate when memory is written. Here:

* :func:`hook_from_node` proposes a pre_tool Hook from a Global-layer rule or
  constraint ("production deploys only on weekdays" → a hook on deploy-like calls
  to production on Saturday or Sunday), from what :func:`memtier_plugin.layers.rules.bounds`
  reads in its words (the grammar the pre-commit check reads too); the predicate is
  built as language data and checked like a person's file;
* :func:`hooks_from_model` checks a model's JSON proposal through the same schema,
  and :func:`propose_with_model` asks the configured model: nothing model-written
  is ever executed.

:mod:`.derived` calls :func:`rule_proposal` when maintenance writes a node and
stores the proposal beside it, and :func:`model_proposal` too when ``hooks.proposer``
is ``model`` (at write time, never on an event's path).
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from ..layers.rules import ENV_ARGS, PRICE_ARGS, WHEN_ARGS, bounds
from ..store.paths import is_valid_id
from ..vocabulary import WEEKDAYS
from .hooks import MAX_ENTRY, Hook, parse_hook
from .predicates import MAX_STRING, HookError, _show

log = logging.getLogger(__name__)
#: The version of the grammar the rule and skill hooks below are proposed with. A stored proposal of an older one
#: (no ``grammar`` key: 1) is proposed again when the hooks load (scheduling/derived.py): 2 binds a booking rule to
#: what it books, reads every day of a list ("never on Saturday or Sunday"), reads more ways of bounding an amount
#: ("$300 max", "my budget is $250", "300 dollars") and turns its word round under a negation, and proposes a
#: precondition only on a shared target.
GRAMMAR = 2


def _rule_predicate(content: str) -> dict | None:
    """The predicate a standing rule or constraint implies for pre_tool, as language data (None: none); what
    the rule bounds is read by :func:`memtier_plugin.layers.rules.bounds`, the grammar pre-commit reads too."""
    b = bounds(content)
    if not b.families:
        return None
    pattern = "|".join(b.pattern(f) for f in b.families)
    conds: list[dict] = [{"any": [{"tool": {"matches": pattern}}, {"arg": {"path": "command", "matches": pattern}}]}]
    if b.days:  # the event's day, for a call that runs now (one scheduled for later is the pre-commit check's)
        conds.append({"state": {"key": "weekday", "in": [d for d in WEEKDAYS if d in b.days]}})
        conds.append({"not": {"any": [{"arg": {"path": a, "exists": True}} for a in WHEN_ARGS]}})
    if b.production:
        conds.append({"any": [{"arg": {"path": a, "matches": "prod"}} for a in ENV_ARGS]
                      + [{"arg": {"path": "command", "matches": r"\bprod"}}]})
    if b.amount is not None and "book" in b.families:
        op = "lt" if b.amount_is_minimum else "gt"
        conds.append({"any": [{"arg": {"path": a, op: b.amount}} for a in PRICE_ARGS]})
    if len(conds) == 1 and not b.modal:
        return None  # names an action but sets no condition on it: retrieval covers it
    return {"all": conds}


def rule_proposal(rec: dict) -> dict | None:
    """The hook a Global-layer rule or constraint record implies, as data (None when none applies):
    ``{"hook": {"id": "rule", "events": ["pre_tool"], "when": ...}, "hold": bool}``. ``hold``: the predicate
    holds exactly when a call breaks a ``rule``'s day or amount bound, so pre_tool holds it (a constraint or a
    rule without such a bound is delivered, not held: the task's own words may override a constraint). A node
    scoped to projects adds ``state.project in [...]``."""
    if not isinstance(rec, dict) or rec.get("node_kind") not in ("rule", "constraint"):
        return None
    content, node_id = rec.get("content"), rec.get("id")
    if not isinstance(content, str) or not content.strip() or not is_valid_id(node_id):
        return None
    when = _rule_predicate(content[:MAX_STRING])
    if when is None:
        return None
    projects = (rec.get("applies") or {}).get("projects", "*") if isinstance(rec.get("applies"), dict) else "*"
    if projects != "*":  # scoped: the hook holds only there (a scope it cannot state means no hook, not a wider one)
        if not (isinstance(projects, list) and 0 < len(projects) <= 64
                and all(isinstance(p, str) and 0 < len(p) <= MAX_STRING for p in projects)):
            return None
        when["all"].append({"state": {"key": "project", "in": projects}})
    b = bounds(content[:MAX_STRING])
    hold = rec.get("node_kind") == "rule" and bool(b.days or (b.amount is not None and "book" in b.families))
    return {"hook": {"id": "rule", "events": ["pre_tool"], "when": when}, "hold": hold}


#: Arguments that say what a call acts on: a skill's precondition hook binds its last call to the same ones.
TARGET_ARGS = ("app", "service", "env", "environment", "target", "stage", "db", "database", "host", "repo",
               "cluster", "namespace")


def _targets(params: dict) -> list[str]:
    """The values of a call's ``TARGET_ARGS``: what it acts on."""
    return [v for k, v in params.items() if k in TARGET_ARGS and isinstance(v, str) and v]


def skill_proposal(rec: dict) -> dict | None:
    """The hook a skill's precondition implies, as data (None when none applies): the skill's last call (the
    one that achieved its task), on the same target (its ``TARGET_ARGS`` values: a deploy to staging is not a
    deploy to production), proposed in its project while the run has not made its first call yet
    (``state.tools``: the run's tools so far) delivers the skill, what worked before, at pre_tool. A skill of
    one tool has no precondition to miss; nor one whose first call acts on no target of the last (a backup of
    the database a migration runs on is its precondition; a train booked before a hotel, or a file edited before
    a deploy, is only what that run did)."""
    if not isinstance(rec, dict) or rec.get("kind") != "skill" or not is_valid_id(rec.get("id")):
        return None
    steps = rec.get("steps") if isinstance(rec.get("steps"), list) else []
    if not all(isinstance(s, dict) for s in steps):
        return None  # a record edited by hand: no hook rather than a guess
    tools = [s.get("tool") for s in steps]
    if len(tools) < 2 or not all(isinstance(t, str) and 0 < len(t) <= MAX_STRING for t in tools) \
            or tools[0] == tools[-1] or not isinstance(rec.get("project", ""), str):
        return None
    first, last = (s.get("params") if isinstance(s.get("params"), dict) else {} for s in (steps[0], steps[-1]))
    same_target = [{"arg": {"path": k, "equals": v}} for k, v in last.items()
                   if k in TARGET_ARGS and isinstance(v, str) and 0 < len(v) <= MAX_STRING]
    if not {a["arg"]["equals"] for a in same_target} & set(_targets(first)):
        return None  # the first call acts on something else (or names no target): what that run did, no precondition
    when = {"all": [{"tool": {"equals": tools[-1]}}, *same_target[:4],
                    {"state": {"key": "project", "equals": rec.get("project", "")}},
                    {"not": {"state": {"key": "tools", "contains": tools[0]}}}]}
    return {"hook": {"id": "precondition", "events": ["pre_tool"], "when": when}, "hold": False}


def bound_hook(data: dict, *, entry: str, entry_id: str, source: str, hold: bool = False) -> Hook:
    """A proposed hook mapping (a rule's or the model's) bound to its entry and checked like a person's file;
    HookError names what is wrong."""
    return parse_hook(data, f"{source} {entry_id}", entry=entry.strip()[:MAX_ENTRY], entry_id=entry_id,
                      key_prefix=f"{source}:{entry_id}:", source=f"{source} {entry_id}", hold=hold)


def hook_from_node(rec: dict) -> Hook | None:
    """A pre_tool hook proposed from a Global-layer rule or constraint record (None when none applies;
    :func:`rule_proposal`). The predicate is built as language data and goes through the same checks as a
    person's file."""
    proposal = rule_proposal(rec)
    if proposal is None:
        return None
    try:
        return bound_hook(proposal["hook"], entry=rec["content"], entry_id=rec["id"], source="rule",
                          hold=proposal["hold"])
    except HookError as exc:  # a rule whose words make an invalid predicate: no hook, retrieval still has it
        log.debug("no hook from %s: %s", rec.get("id"), exc)
        return None


def rule_hooks(records: Iterable[dict]) -> list[Hook]:
    """Hooks proposed from current Global-layer records (retired nodes are not passed, so their hooks go)."""
    return [h for h in (hook_from_node(r) for r in records) if h is not None]


MODEL_PROMPT = (
    "Write hooks that deliver the memory entry below to an agent at the moment it matters. Answer with JSON: "
    '{"hooks": [{"id": "short-name", "events": ["pre_tool"|"query"|"post_tool"], "when": PREDICATE}]}. '
    "PREDICATE is one of: {\"all\": [PREDICATE, ...]}, {\"any\": [...]}, {\"not\": PREDICATE}, "
    '{"tool": {"equals"|"in"|"matches": ...}}, {"arg": {"path": "dotted.key", "equals"|"contains"|"matches"|"in"|'
    '"lt"|"le"|"gt"|"ge"|"exists": ...}}, {"state": {"key": "weekday"|"hour"|"project"|"agent", ...same operators}}, '
    '{"phase": {"equals"|"in": ...}}, {"query": {"any"|"all": [words]}}. At most 2 hooks; answer {"hooks": []} '
    "when the entry needs none.")


def hooks_from_model(data: Any, *, entry: str, entry_id: str, where: str = "model") -> list[Hook]:
    """Check a model's JSON proposal ``{"hooks": [...]}`` for ``entry`` through the same schema.

    The model chooses events and predicates only; the bound entry is the one it
    was asked about. Anything else (unknown keys, code, a catastrophic regex) is
    a HookError line, and nothing in the proposal is ever executed.
    """
    if not isinstance(data, dict) or set(data) != {"hooks"} or not isinstance(data["hooks"], list):
        raise HookError(f"{where}: expected {{\"hooks\": [...]}}, got {_show(data)}")
    if len(data["hooks"]) > 8:
        raise HookError(f"{where}: hooks: {len(data['hooks'])} hooks; at most 8 for one entry")
    out = []
    for i, item in enumerate(data["hooks"]):
        out.append(parse_hook(item, where, index=i, entry=entry[:MAX_ENTRY], entry_id=entry_id,
                              key_prefix=f"model:{entry_id}:", source=where))
    return out


def model_proposal(client, rec: dict, *, deadline: float | None = None) -> list[dict]:
    """The hook mappings the configured model proposes for one knowledge record, after they passed
    :func:`hooks_from_model` (HookError otherwise): data to store beside the node, never executed."""
    content, node_id = rec.get("content", ""), rec.get("id", "")
    result = client.chat([{"role": "system", "content": MODEL_PROMPT},
                          {"role": "user", "content": str(content)[:MAX_ENTRY]}],
                         schema={"type": "object", "required": ["hooks"]}, deadline=deadline)
    hooks_from_model(result.data, entry=str(content), entry_id=str(node_id), where=f"model {node_id}")
    return list(result.data["hooks"])


def propose_with_model(client, rec: dict, *, deadline: float | None = None) -> list[Hook]:
    """Hooks the configured model proposes for one knowledge record (validated data, never executed)."""
    content, node_id = str(rec.get("content", "")), str(rec.get("id", ""))
    return [bound_hook(d, entry=content, entry_id=node_id, source="model")
            for d in model_proposal(client, rec, deadline=deadline)]
