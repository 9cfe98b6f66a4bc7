"""The predicate language of Hooks: data, never code (MemSidecar §3.3, χ_j(σ_t, ã_t)).

A predicate is a YAML/JSON value checked against a strict schema and compiled
into plain closures; no string in it is ever evaluated, imported or used as an
attribute name. A node is a mapping with exactly one key:

* combinators: ``all: [node, ...]``, ``any: [node, ...]``, ``not: node``;
* ``tool``: the proposed tool's name — ``{equals: s}``, ``{in: [s, ...]}``, ``{matches: regex}``
  (a bare string means ``equals``);
* ``arg``: a value in the proposed call's params at a dotted ``path`` (``target.env``,
  ``hosts.0``) — ``equals``, ``contains``, ``matches``, ``in``, ``lt``/``le``/``gt``/``ge``, ``exists``;
* ``state``: a value of the caller's visible state at a dotted ``key`` (``weekday``, ``hour``,
  ``project``, ``agent``): the same operators;
* ``phase``: the state's ``phase`` — ``{equals: s}`` or ``{in: [...]}`` (a bare string means ``equals``);
* ``query``: words of the current request — ``{any: [...]}``, ``{all: [...]}``, ``{matches: regex}``.

Several operators in one leaf must all hold. Text compares without case;
numbers written as text ("250", "$1,200") compare as numbers; true/false only
equal true/false (:func:`index_key`).

Bounds, so that no predicate or input can make an event slow: depth ≤ 8,
≤ 64 nodes, strings ≤ 500 characters, lists ≤ 64 items; a regex is at most
200 characters in a safe subset (no backreferences, lookarounds, nested
repeats or alternatives inside a repeat) and sees at most the first 4,096
characters of its input (fewer when it holds an unbounded repeat, so its
backtracking stays within :data:`REGEX_WORK`); text operators see at most the
first 4,096 characters. Evaluation counts steps (one per node, more for long
text and regexes); every compiled predicate knows its worst case
(:attr:`Predicate.max_steps`), so a scheduler can refuse to start a hook that
would exceed what is left of its per-event budget.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable

from ..vocabulary import HOOK_EVENTS
from ..errors import MemtierError
from .safe_regex import MAX_INPUT, REGEX_WORK, SafeRegex, safe_regex  # noqa: F401  (REGEX_WORK: cited above)

EVENTS = HOOK_EVENTS
MAX_DEPTH = 8  # combinator levels, a leaf counting 1
MAX_NODES = 64  # combinators and leaves in one predicate
MAX_STRING = 500  # characters in any string of a predicate
MAX_LIST = 64  # items in an `in`, `any`, `all` list
MAX_PATH = 8  # segments of an arg path or a state key
TEXT_CHARS_PER_STEP = 256
HOOK_STEPS = 10_000  # worst case allowed for one predicate (one worst-case regex and 63 nodes fit)

_SEGMENT = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NUMBER_TEXT = re.compile(r"\s{0,4}[$€£]?\s?([-+]?\d[\d,]{0,18}(?:\.\d{1,12})?)\s{0,4}")
_WORD = re.compile(r"\w+")


class HookError(MemtierError):
    """A hooks file, a hook or a predicate is not valid: the message names the file, the hook and the key."""


def _show(value: Any, width: int = 40) -> str:
    """A bad value as one short line (a container by its type and size: its repr could be huge or too deep)."""
    if isinstance(value, (dict, list, tuple)) and (len(value) > 8 or any(isinstance(v, (dict, list, tuple))
                                                                        for v in list(value)[:8])):
        return f"a {type(value).__name__} of {len(value)} items"
    text = repr(value)
    return text if len(text) <= width else f"{text[:width - 1]}… ({len(text)} characters)"


class _Bad(Exception):
    """A problem at a key path inside one predicate (turned into a HookError naming file and hook)."""

    def __init__(self, key: str, problem: str):
        super().__init__(f"{key}: {problem}")


# ---- the event a predicate reads ---------------------------------------------------------------
class Event:
    """The visible state σ_t and proposed action ã_t of one event, as predicates read them.

    Tool name, params, state and query are the caller's, read but never changed;
    ``steps`` counts the work done on this event so far.
    """

    __slots__ = ("type", "tool", "tool_text", "params", "state", "query", "steps", "_cache", "_words")

    def __init__(self, event_type: str, *, tool_name: str | None = None, params: Any = None,
                 query: str | None = None, state: Any = None):
        self.type = event_type
        self.tool_text = tool_name[:MAX_INPUT] if isinstance(tool_name, str) else None
        self.tool = self.tool_text.casefold() if self.tool_text is not None else None
        self.params = params if isinstance(params, dict) else {}
        self.state = state if isinstance(state, dict) else {}
        self.query = query[:MAX_INPUT] if isinstance(query, str) else None
        self.steps = 0
        self._cache: dict = {}
        self._words: str | None = None

    def lookup(self, where: str, path: tuple) -> tuple[bool, Any]:
        """(found, value) at ``path`` in the params (``where`` "arg") or the state: dict keys and list indexes only."""
        key = (where, path)
        hit = self._cache.get(key)
        if hit is None:
            node: Any = self.params if where == "arg" else self.state
            found = True
            for seg in path:
                if isinstance(node, dict) and seg in node:
                    node = node[seg]
                elif isinstance(node, list) and seg.isdigit() and int(seg) < len(node):
                    node = node[int(seg)]
                else:
                    found, node = False, None
                    break
            hit = self._cache[key] = (found, node)
        return hit

    def key(self, where: str, path: tuple) -> tuple | None:
        """:func:`index_key` of the value at ``path`` (None when absent), computed once per event."""
        ck = ("key", where, path)
        if ck in self._cache:
            return self._cache[ck]
        found, value = self.lookup(where, path)
        k = self._cache[ck] = index_key(value) if found else None
        return k

    def folded(self, where: str, path: tuple, value: str) -> str:
        """The first MAX_INPUT characters of a text value, case-folded (computed once per event)."""
        key = ("folded", where, path)
        text = self._cache.get(key)
        if text is None:
            text = self._cache[key] = value[:MAX_INPUT].casefold()
            self.steps += len(text) // TEXT_CHARS_PER_STEP
        return text

    def words(self) -> str | None:
        """The query's words, case-folded and space-joined with a space at each end (None without a query)."""
        if self.query is None:
            return None
        if self._words is None:
            self._words = " " + " ".join(_WORD.findall(self.query.casefold())) + " "
            self.steps += 1 + len(self.query) // TEXT_CHARS_PER_STEP
        return self._words


# ---- values ---------------------------------------------------------------------------------------
def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _number(v: Any) -> float | None:
    """A number, or text that is one ("250", "$1,200.50"); None otherwise (a bool is not a number)."""
    if _is_number(v):
        return v
    if isinstance(v, str) and len(v) <= 40:
        m = _NUMBER_TEXT.fullmatch(v)
        if m:
            try:
                return float(m.group(1).replace(",", ""))
            except ValueError:
                return None
    return None


def index_key(v: Any) -> tuple | None:
    """What ``equals`` and ``in`` compare, and what the scheduler's index files a value under.

    A number, or text that is one ("250", "$1,200.50"), is ("n", number); other text is
    ("s", case-folded text); a bool is ("b", bool). A list, a mapping, None, or text too long
    to equal any operand has no key (it equals nothing).
    """
    if isinstance(v, bool):
        return ("b", v)
    if isinstance(v, str) and len(v) > 4 * MAX_STRING + 16:  # casefold can triple an operand, never more
        return None
    n = _number(v)
    if n is not None:
        return ("n", n)
    return ("s", v.casefold()) if isinstance(v, str) else None


# ---- compiling ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Predicate:
    """A compiled predicate: call it on an :class:`Event` for True/False."""

    fn: Callable[[Event], bool]
    nodes: int
    depth: int
    max_steps: int  # worst-case steps of one evaluation, whatever the event
    gates: dict  # (source, path) -> keys: it can hold only when the event's value there has one of these keys

    def __call__(self, ev: Event) -> bool:
        return self.fn(ev)


class _Counter:
    def __init__(self):
        self.nodes = 0


def compile_predicate(data: Any, key: str = "when") -> Predicate:
    """Check ``data`` against the language and compile it; HookError-ready ``_Bad`` names the key path."""
    counter = _Counter()
    fn, depth, steps, gates = _node(data, key, 1, counter)
    if steps > HOOK_STEPS:
        raise _Bad(key, f"could take {steps:,} steps at one event; at most {HOOK_STEPS:,} "
                        "(fewer regexes, or regexes without unbounded repeats)")
    return Predicate(fn, counter.nodes, depth, steps, gates)


def _node(data: Any, key: str, depth: int, counter: _Counter):
    """(closure, depth, max steps, gates) of one node.

    Gates are necessary conditions an index can check without evaluating: ("tool", ()) -> case-folded
    names, or ("arg"/"state", path) -> :func:`index_key` values that an ``equals``/``in`` requires.
    """
    if depth > MAX_DEPTH:
        raise _Bad(key, f"nested deeper than {MAX_DEPTH} levels")
    counter.nodes += 1
    if counter.nodes > MAX_NODES:
        raise _Bad(key, f"more than {MAX_NODES} nodes in one predicate")
    if not isinstance(data, dict) or len(data) != 1:
        raise _Bad(key, "expected a mapping with exactly one of: all, any, not, tool, arg, state, phase, query; "
                        f"got {_show(data)}")
    (name, body), = data.items()
    if not isinstance(name, str) or name not in _NODES:
        raise _Bad(key, f"unknown key {_show(name)}; expected one of: {', '.join(_NODES)}")
    return _NODES[name](body, f"{key}.{name}", depth, counter)


def _combinator(kind: str):
    def build(body, key, depth, counter):
        if not isinstance(body, list) or not body:
            raise _Bad(key, f"expected a non-empty list of predicates, got {_show(body)}")
        if len(body) > MAX_LIST:
            raise _Bad(key, f"{len(body)} items; at most {MAX_LIST}")
        parts = [_node(child, f"{key}[{i}]", depth + 1, counter) for i, child in enumerate(body)]
        # cheapest first: predicates have no effects, so the order changes only how soon an answer is known
        fns = tuple(p[0] for p in sorted(parts, key=lambda p: p[2]))
        steps = 1 + sum(p[2] for p in parts)
        gate_sets = [p[3] for p in parts]
        if kind == "all":  # every child's gates hold
            gates: dict = {}
            for g in gate_sets:
                for dim, keys in g.items():
                    gates[dim] = gates[dim] & keys if dim in gates else keys

            def fn(ev):
                ev.steps += 1
                for f in fns:
                    if not f(ev):
                        return False
                return True
        else:
            common = set.intersection(*(set(g) for g in gate_sets))  # one child's gates hold
            gates = {dim: frozenset().union(*(g[dim] for g in gate_sets)) for dim in common}

            def fn(ev):
                ev.steps += 1
                for f in fns:
                    if f(ev):
                        return True
                return False
        return fn, 1 + max(p[1] for p in parts), steps, gates
    return build


def _not(body, key, depth, counter):
    inner, d, steps, _gates = _node(body, key, depth + 1, counter)

    def fn(ev):
        ev.steps += 1
        return not inner(ev)
    return fn, d + 1, steps + 1, {}


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise _Bad(key, f"expected a string, got {_show(value)}")
    if len(value) > MAX_STRING:
        raise _Bad(key, f"string of {len(value)} characters; at most {MAX_STRING}")
    return value


def _scalar(value: Any, key: str) -> Any:
    """A checked operand: text (case-folded), a finite number or a bool."""
    if isinstance(value, bool) or _is_number(value):
        return value
    if isinstance(value, str):
        return _text(value, key).casefold()
    raise _Bad(key, f"expected a string, a number or true/false, got {_show(value)}")


def _scalars(value: Any, key: str) -> tuple:
    if not isinstance(value, list) or not value:
        raise _Bad(key, f"expected a non-empty list, got {_show(value)}")
    if len(value) > MAX_LIST:
        raise _Bad(key, f"{len(value)} items; at most {MAX_LIST}")
    return tuple(_scalar(v, f"{key}[{i}]") for i, v in enumerate(value))


def _regex(value: Any, key: str) -> SafeRegex:
    try:
        return safe_regex(value)
    except ValueError as exc:
        raise _Bad(key, str(exc)) from None


def _path(value: Any, key: str) -> tuple:
    text = _text(value, key)
    parts = tuple(text.split("."))
    if len(parts) > MAX_PATH:
        raise _Bad(key, f"{len(parts)} segments; at most {MAX_PATH}")
    for part in parts:
        if part.startswith("__") or part.endswith("__"):
            raise _Bad(key, f"{part!r}: attribute access is not part of the language (a path names keys "
                            "and list positions of the data)")
        if not _SEGMENT.fullmatch(part):
            raise _Bad(key, f"{_show(part)}: a path segment is letters, digits, '_' or '-' (1-64), "
                            "segments joined by '.'")
    return parts


_TEXT_STEPS = 1 + MAX_INPUT // TEXT_CHARS_PER_STEP


def _value_op(op: str, operand: Any, key: str, where: str, path: tuple):
    """(test(found, value, ev) -> bool, max steps) for one operator of an arg/state leaf."""
    if op == "exists":
        if not isinstance(operand, bool):
            raise _Bad(key, f"expected true or false, got {_show(operand)}")
        return (lambda found, v, ev: found is operand), 1
    if op == "equals":
        expected = index_key(_scalar(operand, key))
        return (lambda found, v, ev: found and ev.key(where, path) == expected), 1
    if op == "in":
        options = frozenset(index_key(o) for o in _scalars(operand, key))
        return (lambda found, v, ev: found and ev.key(where, path) in options), 1
    if op in ("lt", "le", "gt", "ge"):
        if not _is_number(operand):
            raise _Bad(key, f"expected a number, got {_show(operand)}")
        cmp = {"lt": float.__lt__, "le": float.__le__, "gt": float.__gt__, "ge": float.__ge__}[op]
        bound = float(operand)

        def test_cmp(found, v, ev):
            n = _number(v) if found else None
            return n is not None and cmp(float(n), bound)
        return test_cmp, 1
    if op == "contains":
        if not (isinstance(operand, str) or _is_number(operand)):
            raise _Bad(key, f"expected a string or a number, got {_show(operand)}")
        needle = _text(operand, key).casefold() if isinstance(operand, str) else str(operand)
        expected = index_key(_scalar(operand, key))

        def test_contains(found, v, ev):
            if not found:
                return False
            if isinstance(v, str):
                return needle in ev.folded(where, path, v)
            if _is_number(v):
                return needle in str(v)
            if isinstance(v, list):
                items = v[:MAX_LIST]
                ev.steps += len(items) // 8
                return any(index_key(x) == expected for x in items if not isinstance(x, (list, dict)))
            return False
        return test_contains, _TEXT_STEPS + MAX_LIST // 8
    if op == "matches":
        rx = _regex(operand, key)
        place = (where, path)

        def test_matches(found, v, ev):
            if not found:
                return False
            if _is_number(v):
                v = str(v)
            return isinstance(v, str) and rx.search(v, ev, place)
        return test_matches, rx.steps(MAX_INPUT)
    raise AssertionError(op)


_VALUE_OPS = ("equals", "contains", "matches", "in", "lt", "le", "gt", "ge", "exists")


def _value_leaf(where: str, ref_key: str, ops_allowed: tuple):
    def build(body, key, depth, counter):
        if isinstance(body, str) and where == "phase":
            body = {"equals": body}
        if not isinstance(body, dict):
            raise _Bad(key, f"expected a mapping, got {_show(body)}")
        if where == "phase":
            path = ("phase",)
        else:
            if ref_key not in body:
                raise _Bad(key, f"missing {ref_key!r} (which value to test)")
            path = _path(body[ref_key], f"{key}.{ref_key}")
        source = "arg" if where == "arg" else "state"
        tests, steps, keys = [], 1, None
        for op, operand in body.items():
            if op == ref_key and where != "phase":
                continue
            if not isinstance(op, str) or op not in ops_allowed:
                raise _Bad(key, f"unknown key {_show(op)}; expected "
                                f"{(repr(ref_key) + ' and ') if where != 'phase' else ''}one or more of: "
                                f"{', '.join(ops_allowed)}")
            test, s = _value_op(op, operand, f"{key}.{op}", source, path)
            tests.append(test)
            steps += s
            if op in ("equals", "in"):
                values = operand if op == "in" else [operand]
                found = frozenset(index_key(_scalar(v, key)) for v in values)
                keys = found if keys is None else keys & found
        if not tests:
            raise _Bad(key, f"no operator; expected one or more of: {', '.join(ops_allowed)}")
        tests = tuple(tests)
        if len(tests) == 1:
            test = tests[0]

            def fn(ev):
                ev.steps += 1
                found, v = ev.lookup(source, path)
                return test(found, v, ev)
        else:
            def fn(ev):
                ev.steps += 1
                found, v = ev.lookup(source, path)
                for t in tests:
                    if not t(found, v, ev):
                        return False
                return True
        return fn, 1, steps, ({(source, path): keys} if keys is not None else {})
    return build


def _tool(body, key, depth, counter):
    if isinstance(body, str):
        body = {"equals": body}
    if not isinstance(body, dict) or not body:
        raise _Bad(key, f"expected a tool name or a mapping of equals / in / matches, got {_show(body)}")
    tests, steps, tools = [], 1, None
    for op, operand in body.items():
        k = f"{key}.{op}"
        if op == "equals":
            name = _text(operand, k).casefold()
            names = frozenset([name])
            tests.append(lambda ev, names=names: ev.tool in names)
        elif op == "in":
            if not isinstance(operand, list) or not operand or len(operand) > MAX_LIST:
                raise _Bad(k, f"expected a list of 1 to {MAX_LIST} tool names, got {_show(operand)}")
            names = frozenset(_text(v, f"{k}[{i}]").casefold() for i, v in enumerate(operand))
            tests.append(lambda ev, names=names: ev.tool in names)
        elif op == "matches":
            rx = _regex(operand, k)
            tests.append(lambda ev, rx=rx: ev.tool_text is not None and rx.search(ev.tool_text, ev, ("tool",)))
            steps += rx.steps(MAX_INPUT)
            continue
        else:
            raise _Bad(key, f"unknown key {_show(op)}; expected one or more of: equals, in, matches")
        tools = names if tools is None else tools & names
        steps += 1
    return _every(tests), 1, steps, ({("tool", ()): tools} if tools is not None else {})


def _every(tests: list) -> Callable[[Event], bool]:
    """A leaf that holds when each of its operator tests holds."""
    tests = tuple(tests)

    def fn(ev):
        ev.steps += 1
        for t in tests:
            if not t(ev):
                return False
        return True
    return fn


def _phrases(value: Any, key: str) -> tuple:
    if not isinstance(value, list) or not value or len(value) > MAX_LIST:
        raise _Bad(key, f"expected a list of 1 to {MAX_LIST} words or phrases, got {_show(value)}")
    out = []
    for i, v in enumerate(value):
        words = _WORD.findall(_text(v, f"{key}[{i}]").casefold())
        if not words:
            raise _Bad(f"{key}[{i}]", f"{_show(v)} has no letters or digits")
        out.append(" " + " ".join(words) + " ")
    return tuple(out)


def _query(body, key, depth, counter):
    if not isinstance(body, dict) or not body:
        raise _Bad(key, f"expected a mapping of any / all / matches, got {_show(body)}")
    tests, steps = [], 1
    for op, operand in body.items():
        k = f"{key}.{op}"
        if op in ("any", "all"):
            phrases = _phrases(operand, k)
            need_all = op == "all"

            def test(ev, phrases=phrases, need_all=need_all):
                text = ev.words()
                if text is None:
                    return False
                ev.steps += len(phrases) * (1 + len(text) // TEXT_CHARS_PER_STEP)
                hits = (p in text for p in phrases)
                return all(hits) if need_all else any(hits)
            tests.append(test)
            steps += (1 + MAX_INPUT // TEXT_CHARS_PER_STEP) * (1 + len(phrases))
        elif op == "matches":
            rx = _regex(operand, k)
            tests.append(lambda ev, rx=rx: ev.query is not None and rx.search(ev.query, ev, ("query",)))
            steps += rx.steps(MAX_INPUT)
        else:
            raise _Bad(key, f"unknown key {_show(op)}; expected one or more of: any, all, matches")
    return _every(tests), 1, steps, {}


_NODES = {
    "all": _combinator("all"),
    "any": _combinator("any"),
    "not": _not,
    "tool": _tool,
    "arg": _value_leaf("arg", "path", _VALUE_OPS),
    "state": _value_leaf("state", "key", _VALUE_OPS),
    "phase": _value_leaf("phase", "", ("equals", "in")),
    "query": _query,
}
