"""Hooks (issue 13 deliverable 3): the predicate language, its limits, loading, and the per-task scheduler."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from memtier_plugin.cli import cli
from memtier_plugin.config import load_config
from memtier_plugin.errors import ConfigError
from memtier_plugin.scheduling.predicates import (
    HOOK_STEPS, MAX_INPUT, Event, HookError, compile_predicate, index_key, safe_regex,
)
from memtier_plugin.scheduling.hooks import (
    MAX_FILE_BYTES, HookFiles, HookScheduler, format_matches, load_hooks_file, parse_hook, parse_hooks,
)
from memtier_plugin.scheduling.rule_hooks import hook_from_node, hooks_from_model, propose_with_model, rule_hooks


def holds(when, event="pre_tool", **kw) -> bool:
    return compile_predicate(when).fn(Event(event, **kw))


def hook(when, hid="h", entry="remember this", events=("pre_tool",)):
    return {"id": hid, "entry": entry, "events": list(events), "when": when}


def problem(when=None, data=None) -> str:
    """The one-line HookError a bad hook gives in file f.yaml."""
    with pytest.raises(HookError) as info:
        parse_hook(data if data is not None else hook(when), "f.yaml")
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("f.yaml: ")
    return msg


class Clock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t


def write(folder: Path, name: str, hooks: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps({"hooks": hooks}))
    return path


# ---- leaves and combinators --------------------------------------------------------------------
PARAMS = {"env": "Production", "command": "ssh pay-legacy-1 'systemctl restart worker'", "price": "$250",
          "nights": 3, "dry_run": False, "hosts": ["pay-legacy-1", "pay-2"], "target": {"region": "eu-west-1"}}
STATE = {"weekday": "Sat", "hour": 22, "project": "payments", "phase": "deploy", "agent": "ops"}


@pytest.mark.parametrize("when, expected", [
    ({"tool": "Deploy"}, True),  # text ignores case
    ({"tool": {"equals": "ssh"}}, False),
    ({"tool": {"in": ["ssh", "deploy"]}}, True),
    ({"tool": {"matches": "^dep"}}, True),
    ({"tool": {"matches": "^ploy"}}, False),
    ({"arg": {"path": "env", "equals": "production"}}, True),
    ({"arg": {"path": "env", "equals": "staging"}}, False),
    ({"arg": {"path": "command", "contains": "PAY-LEGACY-1"}}, True),
    ({"arg": {"path": "command", "contains": "pay-legacy-2"}}, False),
    ({"arg": {"path": "hosts", "contains": "pay-2"}}, True),  # a list contains an element
    ({"arg": {"path": "hosts.0", "equals": "pay-legacy-1"}}, True),  # a list position
    ({"arg": {"path": "hosts.5", "exists": True}}, False),
    ({"arg": {"path": "target.region", "matches": r"^eu-"}}, True),
    ({"arg": {"path": "target.region", "in": ["us-east-1", "eu-west-1"]}}, True),
    ({"arg": {"path": "price", "gt": 200}}, True),  # "$250" is a number
    ({"arg": {"path": "price", "le": 200}}, False),
    ({"arg": {"path": "nights", "ge": 3, "lt": 4}}, True),  # operators of one leaf all hold
    ({"arg": {"path": "nights", "ge": 3, "lt": 3}}, False),
    ({"arg": {"path": "nights", "equals": "3"}}, True),  # numeric text equals the number
    ({"arg": {"path": "dry_run", "equals": False}}, True),
    ({"arg": {"path": "dry_run", "equals": 0}}, False),  # a bool is not a number
    ({"arg": {"path": "missing", "exists": False}}, True),
    ({"arg": {"path": "missing", "equals": "x"}}, False),
    ({"arg": {"path": "env", "lt": 5}}, False),  # text that is not a number never compares
    ({"state": {"key": "weekday", "in": ["Sat", "Sun"]}}, True),
    ({"state": {"key": "weekday", "equals": "Mon"}}, False),
    ({"state": {"key": "hour", "gt": 18}}, True),
    ({"state": {"key": "hour", "lt": 18}}, False),
    ({"state": {"key": "project", "equals": "payments"}}, True),
    ({"phase": "deploy"}, True),
    ({"phase": {"in": ["plan", "review"]}}, False),
    ({"query": {"any": ["saturday", "weekend"]}}, True),
    ({"query": {"all": ["deploy", "weekend"]}}, False),
    ({"query": {"all": ["deploy", "saturday"]}}, True),
    ({"query": {"any": ["to production"]}}, True),  # a phrase: its words in order
    ({"query": {"any": ["production to"]}}, False),
    ({"query": {"matches": r"\bsat\w*"}}, True),
])
def test_each_leaf(when, expected):
    assert holds(when, tool_name="deploy", params=PARAMS, state=STATE,
                 query="Please deploy the worker to production this Saturday.") is expected


def test_leaves_without_their_input_do_not_hold():
    assert not holds({"tool": "deploy"}, event="query", query="deploy it")
    assert not holds({"query": {"any": ["deploy"]}}, tool_name="deploy")
    assert not holds({"arg": {"path": "env", "equals": "production"}}, tool_name="deploy", params="not a dict")
    assert not holds({"state": {"key": "weekday", "equals": "Sat"}}, state=None)


T, F = {"tool": "deploy"}, {"tool": "ssh"}


@pytest.mark.parametrize("when, expected", [
    ({"all": [T, T]}, True), ({"all": [T, F]}, False),
    ({"any": [F, T]}, True), ({"any": [F, F]}, False),
    ({"not": F}, True), ({"not": T}, False),
    ({"all": [T, {"any": [F, {"not": F}]}]}, True),
    ({"not": {"all": [T, {"not": F}]}}, False),
])
def test_combinators(when, expected):
    assert holds(when, tool_name="deploy") is expected


def test_the_papers_example_fires_on_a_saturday_production_deploy_only():
    when = {"all": [{"tool": {"in": ["deploy", "schedule_deploy"]}}, {"arg": {"path": "env", "equals": "production"}},
                    {"state": {"key": "weekday", "in": ["Sat", "Sun"]}}]}
    assert holds(when, tool_name="schedule_deploy", params={"env": "production"}, state={"weekday": "Sun"})
    assert not holds(when, tool_name="schedule_deploy", params={"env": "production"}, state={"weekday": "Tue"})
    assert not holds(when, tool_name="schedule_deploy", params={"env": "staging"}, state={"weekday": "Sun"})
    assert not holds(when, tool_name="bash", params={"env": "production"}, state={"weekday": "Sun"})


def test_equality_is_what_the_index_files_under():
    assert index_key("Production") == index_key("production")
    assert index_key("$1,200") == index_key(1200) == index_key("1200.0")
    assert index_key(True) != index_key(1) and index_key(None) is None and index_key(["a"]) is None


# ---- validation: one line naming the file, the hook and the key --------------------------------
@pytest.mark.parametrize("when, needle", [
    ({"tool": {"equal": "x"}}, "when.tool: unknown key 'equal'"),
    ({"alll": [T]}, "when: unknown key 'alll'"),
    ({"all": T}, "when.all: expected a non-empty list"),
    ({"all": []}, "when.all: expected a non-empty list"),
    ({"all": [T], "any": [T]}, "when: expected a mapping with exactly one of"),
    ({"arg": {"equals": "x"}}, "when.arg: missing 'path'"),
    ({"arg": {"path": "env"}}, "when.arg: no operator"),
    ({"arg": {"path": "env", "gt": "ten"}}, "when.arg.gt: expected a number"),
    ({"arg": {"path": "env", "in": "production"}}, "when.arg.in: expected a non-empty list"),
    ({"arg": {"path": "env", "exists": "yes"}}, "when.arg.exists: expected true or false"),
    ({"arg": {"path": "env", "equals": ["a"]}}, "when.arg.equals: expected a string, a number or true/false"),
    ({"arg": {"path": "env", "equals": float("nan")}}, "when.arg.equals: expected a string, a number"),
    ({"arg": {"path": "a b", "equals": 1}}, "when.arg.path: 'a b': a path segment is"),
    ({"arg": {"path": ".".join("abcdefghi"), "equals": 1}}, "when.arg.path: 9 segments; at most 8"),
    ({"state": {"path": "weekday", "equals": "Sat"}}, "when.state: missing 'key'"),
    ({"phase": {"matches": "x"}}, "when.phase: unknown key 'matches'"),
    ({"query": {"any": []}}, "when.query.any: expected a list of 1 to 64"),
    ({"query": {"any": ["!!!"]}}, "when.query.any[0]: '!!!' has no letters or digits"),
    ({"tool": "x" * 501}, "when.tool.equals: string of 501 characters; at most 500"),
    ({"arg": {"path": "env", "in": list(range(65))}}, "when.arg.in: 65 items; at most 64"),
    ({"all": [{"all": [T]}, {"any": [{"arg": {"path": "x", "equals": 1, "frobnicate": 2}}]}]},
     "when.all[1].any[0].arg: unknown key 'frobnicate'"),
])
def test_bad_predicates_name_file_hook_and_key(when, needle):
    msg = problem(when)
    assert msg.startswith("f.yaml: hook 'h': when")
    assert needle in msg


def test_nesting_deeper_than_eight_levels_is_refused():
    when = T
    for _ in range(7):
        when = {"not": when}
    assert compile_predicate(when).depth == 8
    assert "nested deeper than 8 levels" in problem({"not": when})


def test_more_than_64_nodes_is_refused():
    assert compile_predicate({"any": [T] * 63}).nodes == 64
    assert "more than 64 nodes in one predicate" in problem({"all": [{"any": [T] * 32}, {"any": [T] * 32}]})


@pytest.mark.parametrize("data, needle", [
    ({"id": "bad id!", "entry": "x", "events": ["pre_tool"], "when": T}, "f.yaml: hooks[0]: id: expected"),
    ({"entry": "x", "events": ["pre_tool"], "when": T}, "f.yaml: hooks[0]: id: expected"),
    (hook(T) | {"priority": 3}, "f.yaml: hook 'h': unknown key 'priority'"),
    (hook(T, events=["before_tool"]), "f.yaml: hook 'h': events: expected a non-empty list of query, pre_tool"),
    (hook(T, events=[]), "f.yaml: hook 'h': events: expected a non-empty list"),
    ({"id": "h", "entry": "x", "events": ["query"]}, "f.yaml: hook 'h': when: missing"),
    ({"id": "h", "events": ["query"], "when": T}, "f.yaml: hook 'h': entry: give exactly one of"),
    (hook(T) | {"entry_id": "gk-1"}, "f.yaml: hook 'h': entry: give exactly one of"),
    (hook(T, entry="   "), "f.yaml: hook 'h': entry: expected non-empty text"),
    (hook(T, entry="x" * 2001), "f.yaml: hook 'h': entry: 2001 characters; at most 2000"),
    ({"id": "h", "entry_id": "../../etc/passwd", "events": ["query"], "when": T}, "f.yaml: hook 'h': entry_id:"),
])
def test_bad_hooks_name_file_hook_and_key(data, needle):
    assert needle in problem(data=data)


def test_bad_files_are_one_line_naming_the_file(tmp_path):
    def err(text: str | bytes, name="x.yaml") -> str:
        path = tmp_path / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        with pytest.raises(HookError) as info:
            load_hooks_file(path)
        msg = str(info.value)
        assert "\n" not in msg and msg.startswith(str(path))
        return msg

    assert "top level: expected a mapping with 'hooks'" in err("- 1\n- 2\n")
    assert "unknown key 'hook'" in err("hook: []\n")
    assert "hooks: expected a list of hooks" in err("hooks: {a: 1}\n")
    assert "hook 'a': id: given twice in this file" in err(json.dumps({"hooks": [hook(T, "a"), hook(T, "a")]}))
    assert "1001 hooks; at most 1000 per file" in err(json.dumps({"hooks": [hook(T, f"h{i}") for i in range(1001)]}))
    assert f"larger than {MAX_FILE_BYTES >> 20} MiB" in err("#" * (MAX_FILE_BYTES + 1))
    assert "not UTF-8" in err(b"hooks: [\xff]\n")
    assert "not valid YAML" in err("hooks: [\n")
    assert "x.yaml: hook 'h': when.tool: unknown key 'equal'" in err(json.dumps({"hooks": [hook({"tool": {"equal": 1}})]}))
    assert load_hooks_file(_w(tmp_path / "empty.yaml", "")) == []
    assert len(load_hooks_file(_w(tmp_path / "ok.json", json.dumps({"hooks": [hook(T)]})))) == 1


def _w(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_thousand_realistic_hooks_load_from_one_file(tmp_path):
    from memtier_plugin.bench.hooks import hook_mix, write_hooks

    folder = write_hooks(tmp_path, hook_mix(1000, seed=3))
    assert len(load_hooks_file(next(folder.iterdir()))) == 1000


# ---- hostile predicates: rejected, or harmless data ---------------------------------------------
def test_python_tags_in_yaml_are_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = _w(tmp_path / "evil.yaml", f"hooks:\n  - !!python/object/apply:os.system ['touch {marker}']\n")
    with pytest.raises(HookError, match="evil.yaml"):
        load_hooks_file(path)
    path = _w(tmp_path / "evil2.yaml", "hooks:\n  - id: h\n    entry: x\n    events: [pre_tool]\n"
                                       f"    when: !!python/name:os.system\n")
    with pytest.raises(HookError, match="evil2.yaml"):
        load_hooks_file(path)
    assert not marker.exists()


def test_alias_bombs_are_refused(tmp_path):
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 10) + "]")
    path = _w(tmp_path / "bomb.yaml", "\n".join(lines) + "\nhooks: []\n")
    with pytest.raises(HookError, match="bomb.yaml.*expands to more than"):
        load_hooks_file(path)


@pytest.mark.parametrize("when, needle", [
    ({"eval": "__import__('os').system('id')"}, "unknown key 'eval'"),
    ({"import": "os"}, "unknown key 'import'"),
    ({"__class__": {}}, "unknown key '__class__'"),
    ({"arg": {"path": "__class__.__init__.__globals__", "exists": True}}, "attribute access is not part of the language"),
    ({"state": {"key": "x.__dict__", "exists": True}}, "attribute access is not part of the language"),
    ({"arg": {"path": "x", "equals": {"__reduce__": "os.system"}}}, "expected a string, a number or true/false"),
])
def test_code_shaped_predicates_are_refused(when, needle):
    assert needle in problem(when)


def test_code_in_strings_is_only_ever_compared(tmp_path):
    marker = tmp_path / "ran"
    code = f"__import__('os').system('touch {marker}')"
    when = {"any": [{"arg": {"path": "x", "equals": code}}, {"tool": code}, {"query": {"any": [code]}},
                    {"arg": {"path": "x", "contains": code}}]}
    assert holds(when, tool_name="t", params={"x": code}, query=code)  # matched as the text it is
    assert not holds(when, tool_name="t", params={"x": "y"}, query="y")
    assert not marker.exists()


@pytest.mark.parametrize("pattern, needle", [
    (r"(a+)+$", "nested repeats"),
    (r"(a*)*b", "nested repeats"),
    (r"(a|aa)*b", "alternatives"),
    (r"(.*a){10}", "nested repeats"),
    (r"(x+x+)+y", "nested repeats"),
    (r"(a)\1", "backreferences"),
    (r"(?=a)a", "lookarounds"),
    (r"(?<!a)b", "lookarounds"),
    (r"(?P<x>a)(?(x)b|c)", "conditional groups"),
    (r"(?>a+)b", "atomic groups"),
    (r"a++b", "possessive repeats"),
    (r"a.*b.*c", "could backtrack too long"),
    (r"\d+-\d+", "could backtrack too long"),
    (r"a?" * 40, "could backtrack too long"),
    ("a{1,300}b{1,300}", "could backtrack too long"),
    ("x" * 201, "at most 200"),
    ("(unclosed", "not a valid regular expression"),
])
def test_catastrophic_and_unsafe_regexes_are_refused_at_load(pattern, needle):
    msg = problem({"arg": {"path": "command", "matches": pattern}})
    assert "when.arg.matches:" in msg and needle in msg


def test_safe_regexes_are_accepted_and_read_a_bounded_input():
    assert safe_regex(r"^(staging|prod)-\d{1,12}$").max_input == MAX_INPUT
    assert safe_regex(r"deploy|release").max_input == MAX_INPUT
    star = safe_regex(r"a[a-z]*b")
    assert 256 <= star.max_input < 1024  # one unbounded repeat reads less, so its backtracking stays bounded


def test_a_predicate_whose_worst_case_is_over_the_hook_budget_is_refused():
    one = {"arg": {"path": "command", "matches": r"a[a-z]*b"}}
    assert compile_predicate({"all": [one]}).max_steps <= HOOK_STEPS
    assert "steps at one event; at most" in problem({"all": [one, one]})


def test_huge_inputs_cost_a_bounded_number_of_steps():
    """A 10 MB argument or query costs what its first 4,096 characters cost (counted, not timed)."""
    when = {"all": [{"arg": {"path": "x", "contains": "needle"}}, {"arg": {"path": "x", "equals": "a"}},
                    {"arg": {"path": "x", "matches": r"a[a-z]*b"}}, {"query": {"any": ["zzz", "needle"]}},
                    {"arg": {"path": "x", "in": ["a", "b"]}}]}
    pred = compile_predicate({"not": when})

    def steps(n: int) -> int:
        ev = Event("pre_tool", tool_name="t", params={"x": "a" * n}, query="a " * (n // 2))
        pred.fn(ev)
        return ev.steps

    small, huge = steps(MAX_INPUT), steps(10_000_000)
    assert huge == small <= pred.max_steps


def test_a_huge_input_is_cut_before_the_regex_sees_it():
    tail = {"arg": {"path": "x", "matches": "needle$"}}
    assert holds(tail, params={"x": "a" * 100 + "needle"})
    assert not holds(tail, params={"x": "a" * 10_000_000 + "needle"})  # beyond the first 4,096 characters
    assert not holds({"arg": {"path": "x", "equals": "a"}}, params={"x": "A" * 10_000_000})
    assert holds({"arg": {"path": "x", "contains": "A"}}, params={"x": "a" * 10_000_000})


def test_deep_or_wide_params_are_read_only_along_the_path():
    deep: dict = {}
    node = deep
    for _ in range(50_000):
        node["a"] = {}
        node = node["a"]
    wide = {f"k{i}": i for i in range(200_000)}
    assert not holds({"arg": {"path": "a.a.a.a.a.a.a.b", "exists": True}}, params=deep)
    assert holds({"arg": {"path": "k199999", "equals": 199999}}, params=wide)


# ---- the scheduler -------------------------------------------------------------------------------
def scheduler(hooks: list[dict], **kw) -> HookScheduler:
    s = HookScheduler(**kw)
    s.set_hooks("test", parse_hooks({"hooks": hooks}, "t.yaml", key_prefix="t:"))
    return s


WEEKEND = hook({"all": [{"tool": "deploy"}, {"state": {"key": "weekday", "in": ["Sat", "Sun"]}}]}, "weekend",
               "Production deploys only on weekdays.", events=["pre_tool", "query"])


def test_a_hook_fires_at_most_once_per_task_and_again_in_a_new_task():
    s = scheduler([WEEKEND])
    first = s.match("pre_tool", {"weekday": "Sat"}, tool_name="deploy", task_key="task-1")
    assert [m.entry for m in first] == ["Production deploys only on weekdays."]
    assert first[0].hooks == ("t:weekend",)
    assert s.match("pre_tool", {"weekday": "Sun"}, tool_name="deploy", task_key="task-1") == []
    assert s.fired("task-1") == {"t:weekend"}
    assert len(s.match("pre_tool", {"weekday": "Sat"}, tool_name="deploy", task_key="task-2")) == 1
    s.end_task("task-1")
    assert len(s.match("pre_tool", {"weekday": "Sat"}, tool_name="deploy", task_key="task-1")) == 1


def test_query_and_pre_tool_events_share_the_tasks_fired_set():
    s = scheduler([hook({"query": {"any": ["deploy"]}}, "q", "Run the unit tests first.",
                        events=["query", "pre_tool"])])
    assert len(s.match("query", {}, query="deploy the worker", task_key="t")) == 1
    assert s.match("pre_tool", {}, tool_name="deploy", query="deploy the worker", task_key="t") == []


def test_a_hook_that_does_not_hold_is_not_marked():
    s = scheduler([WEEKEND])
    assert s.match("pre_tool", {"weekday": "Tue"}, tool_name="deploy", task_key="t") == []
    assert s.fired("t") == frozenset()
    assert len(s.match("pre_tool", {"weekday": "Sat"}, tool_name="deploy", task_key="t")) == 1


def test_match_without_marking_then_confirming_the_delivery():
    s = scheduler([WEEKEND])
    kw = dict(tool_name="deploy", task_key="t", mark=False)
    got = s.match("pre_tool", {"weekday": "Sat"}, **kw)
    assert len(s.match("pre_tool", {"weekday": "Sat"}, **kw)) == 1  # not delivered yet: still pending
    s.mark_delivered("t", got[0].hooks)
    assert s.match("pre_tool", {"weekday": "Sat"}, **kw) == []


def test_task_state_expires_after_an_hour_idle():
    clock = Clock()
    s = scheduler([WEEKEND], clock=clock)
    args = ("pre_tool", {"weekday": "Sat"})
    assert len(s.match(*args, tool_name="deploy", task_key="t")) == 1
    clock.t += 3599
    assert s.match(*args, tool_name="deploy", task_key="t") == []  # activity renews the task
    clock.t += 3600
    assert s.match(*args, tool_name="deploy", task_key="t") == []
    clock.t += 3601
    assert s.fired("t") == frozenset()
    assert len(s.match(*args, tool_name="deploy", task_key="t")) == 1


def test_the_number_of_tasks_is_bounded():
    s = scheduler([WEEKEND], max_tasks=3)
    for i in range(5):
        s.match("pre_tool", {"weekday": "Sat"}, tool_name="deploy", task_key=f"t{i}")
    assert len(s._tasks) == 3 and s.fired("t0") == frozenset() and s.fired("t4") == {"t:weekend"}


def test_matched_entries_are_merged_deduplicated_and_packed():
    same = [hook(T, f"same{i}", text) for i, text in enumerate(["Use the runbook.", "  use the RUNBOOK. "])]
    many = [hook(T, f"m{i}", f"Entry number {i}.") for i in range(8)]
    s = scheduler(same + many)
    out = s.deliver("pre_tool", {}, tool_name="deploy", task_key="t")
    assert [m.entry for m in out.matches] == ["Use the runbook."] + [f"Entry number {i}." for i in range(5)]
    assert out.matches[0].hooks == ("t:same0", "t:same1")  # one entry, both hooks marked
    assert [k for k, why in out.skipped] == ["t:m5", "t:m6", "t:m7"]
    assert all("delivery budget" in why for _, why in out.skipped)
    later = s.match("pre_tool", {}, tool_name="deploy", task_key="t")  # left-overs may fire at a later event
    assert [m.entry for m in later] == ["Entry number 5.", "Entry number 6.", "Entry number 7."]


def test_packing_keeps_within_six_thousand_characters():
    s = scheduler([hook(T, f"big{i}", f"{i}" + "x" * 1899) for i in range(5)])
    out = s.deliver("pre_tool", {}, tool_name="deploy", task_key="t")
    assert len(out.matches) == 3 and sum(len(m.entry) for m in out.matches) == 5700
    assert format_matches(out.matches).count("\n- [big") == 2


def test_delivery_caps_come_from_the_config(tmp_path):
    path = _w(tmp_path / "memtier.yaml", "hooks:\n  max_entries: 2\n  max_chars: 100\n")
    cfg = load_config(path)
    assert (cfg.hooks.enabled, cfg.hooks.max_entries, cfg.hooks.max_chars) == (True, 2, 100)
    default = load_config()
    assert (default.hooks.max_entries, default.hooks.max_chars) == (6, 6000)
    with pytest.raises(ConfigError, match="hooks.max_entries: expected a value between 1 and 100"):
        load_config(_w(tmp_path / "bad.yaml", "hooks:\n  max_entries: 0\n"))
    s = scheduler([hook(T, f"m{i}", f"Entry {i}.") for i in range(4)], max_entries=cfg.hooks.max_entries)
    assert len(s.match("pre_tool", {}, tool_name="deploy", task_key="t")) == 2


def test_hooks_are_indexed_so_other_tools_never_evaluate_them():
    many = [hook({"all": [{"tool": f"tool{i}"}, {"arg": {"path": "x", "exists": True}}]}, f"h{i}") for i in range(500)]
    proj = [hook({"all": [{"state": {"key": "project", "equals": f"p{i}"}}, {"tool": {"matches": "."}}]}, f"p{i}")
            for i in range(100)]
    free = [hook({"not": {"tool": "nothing"}}, "free")]
    s = scheduler(many + proj + free)
    out = s.deliver("pre_tool", {"project": "P7"}, tool_name="TOOL42", params={"x": 1}, task_key="t")
    assert out.evaluated == 3  # tool42's hook, project p7's hook and the one hook with no gate
    assert [k for m in out.matches for k in m.hooks] == ["t:h42", "t:p7", "t:free"]


def test_the_event_step_budget_skips_and_reports_hooks():
    """Distinct costly patterns: each is real work (one pattern shared by hooks runs once an event)."""
    costly = [hook({"all": [{"tool": "bash"}, {"arg": {"path": "command", "matches": rf"a[a-z]*b{i}"}}]}, f"c{i}")
              for i in range(10)]
    s = scheduler(costly, event_steps=20_000)
    out = s.deliver("pre_tool", {}, tool_name="bash", params={"command": "a" * 1_000_000}, task_key="t")
    assert out.evaluated == 2 and len(out.skipped) == 8 and out.steps <= 20_000
    assert all("step budget" in why for _, why in out.skipped)
    assert s.fired("t") == frozenset()  # nothing held: skipped hooks stay pending
    shared = [hook({"all": [{"tool": "bash"}, {"arg": {"path": "command", "matches": r"a[a-z]*b"}}]}, f"s{i}")
              for i in range(10)]
    out = scheduler(shared, event_steps=20_000).deliver("pre_tool", {}, tool_name="bash",
                                                         params={"command": "a" * 1_000_000}, task_key="t")
    assert out.evaluated == 10 and out.skipped == [] and out.steps < 9_000  # the search ran once


def test_an_entry_id_is_resolved_at_delivery_and_unresolvable_ones_are_reported():
    store = {"gk-1": "Use the pay-2 host; pay-legacy-1 is gone."}

    def resolve(entry_id):
        if entry_id == "gk-boom":
            raise RuntimeError("store unavailable")
        return store.get(entry_id)

    hooks = [{"id": f"r{i}", "entry_id": eid, "events": ["pre_tool"], "when": {"tool": "ssh"}}
             for i, eid in enumerate(["gk-1", "gk-gone", "gk-boom"])]
    s = scheduler(hooks, resolve_entry=resolve)
    out = s.deliver("pre_tool", {}, tool_name="ssh", task_key="t")
    assert [(m.entry, m.entry_id) for m in out.matches] == [(store["gk-1"], "gk-1")]
    assert [k for k, _ in out.skipped] == ["t:r1", "t:r2"]
    assert format_matches(out.matches) == f"- [r0 | gk-1] {store['gk-1']}"


def test_bad_calls_are_value_errors():
    s = scheduler([WEEKEND])
    with pytest.raises(ValueError, match="event type"):
        s.match("before_tool", {}, task_key="t")
    with pytest.raises(ValueError, match="task_key"):
        s.match("pre_tool", {}, task_key="")


def test_concurrent_events_of_one_task_deliver_a_hook_once():
    s = scheduler([hook(T, f"h{i}", f"Entry {i}.") for i in range(6)])
    got: list = []
    barrier = threading.Barrier(8)

    def worker():
        barrier.wait()
        for _ in range(20):
            got.extend(k for m in s.match("pre_tool", {}, tool_name="deploy", task_key="t") for k in m.hooks)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == sorted(f"t:h{i}" for i in range(6))


# ---- files ---------------------------------------------------------------------------------------
def test_a_bad_file_is_skipped_while_the_others_load(tmp_path, caplog):
    folder = tmp_path / "memory" / "hooks"
    write(folder, "a.yaml", [WEEKEND])
    write(folder, "b.yaml", [hook({"arg": {"path": "x", "matches": "(a+)+$"}}, "evil")])
    write(folder, "c.json", [hook({"tool": "ssh"}, "ssh", "pay-legacy-1 is gone.")])
    (folder / "notes.txt").write_text("not a hooks file")
    s = HookScheduler(folder)
    s.refresh()
    assert [h.key for h in s.hooks] == ["a.yaml:weekend", "c.json:ssh"]
    assert len(s.problems) == 1 and s.problems[0].startswith(f"{folder / 'b.yaml'}: hook 'evil': when.arg.matches:")
    assert "hooks file skipped" in caplog.text and caplog.text.count("b.yaml") == 1
    assert len(s.match("pre_tool", {}, tool_name="ssh", task_key="t")) == 1


def test_files_reload_when_they_change_and_go_when_removed(tmp_path):
    clock = Clock()
    folder = tmp_path / "hooks"
    path = write(folder, "a.yaml", [hook({"tool": "ssh"}, "one", "First text.")])
    s = HookScheduler(folder, clock=clock, refresh_s=1.0)

    def entries(task):
        return [m.entry for m in s.match("pre_tool", {}, tool_name="ssh", task_key=task)]

    assert entries("t0") == ["First text."]  # the first event waits for the files' first load (a bounded wait)
    assert s.wait_loaded(60)
    assert entries("t1") == ["First text."]
    write(folder, "a.yaml", [hook({"tool": "ssh"}, "one", "Second text, longer.")])
    os.utime(path, ns=(1, 1))  # a different mtime, whatever the file system's resolution
    assert entries("t2") == ["First text."] and s.wait_loaded(60)  # not due yet: nothing started
    clock.t += 1.5  # the directory is looked at again after refresh_s, in the background
    entries("t3")
    assert s.wait_loaded(60) and entries("t3b") == ["Second text, longer."]
    _w(path, "hooks: [\n")  # a bad edit: the file is skipped, with its line
    clock.t += 1.5
    entries("t4")
    assert s.wait_loaded(60) and entries("t4b") == [] and "a.yaml" in s.problems[0]
    write(folder, "a.yaml", [hook({"tool": "ssh"}, "one", "Fixed.")])
    clock.t += 1.5
    entries("t5")
    assert s.wait_loaded(60) and entries("t5b") == ["Fixed."]
    assert s.problems == []
    path.unlink()
    clock.t += 1.5
    entries("t6")
    assert s.wait_loaded(60) and entries("t6b") == [] and s.hooks == []


def test_an_event_never_waits_for_a_hooks_parse_and_matches_the_last_loaded_set(tmp_path, monkeypatch):
    """Through the host: a hooks file whose parse takes long (a 1 MiB file took 3.8 s) does not hold up
    pre_tool; the event answers with the hooks loaded so far (none yet), and once the background load is
    done the next task gets the entry. Before, the parse ran inside the event."""
    from memtier_plugin import plugin
    from memtier_plugin.events import HookContext, ToolCallEvent
    from memtier_plugin.host import Host
    from memtier_plugin.memory import memory_for
    from memtier_plugin.scheduling import hooks as hooks_mod

    ws = tmp_path / "ws"
    write(ws / "memory" / "hooks", "ops.yaml", [hook({"tool": "ssh"}, "legacy", "pay-legacy-1 is gone; use pay-2.")])
    (ws / "memtier.yaml").write_text("standing:\n  embedder: none\nscheduling:\n  mode: combined\n")
    release, parsed = threading.Event(), threading.Event()
    real = hooks_mod.parse_yaml

    def slow_parse(*a, **k):
        release.wait(20)  # a huge file on a loaded machine
        out = real(*a, **k)
        parsed.set()
        return out

    monkeypatch.setattr(hooks_mod, "read_in_child", lambda paths: None, raising=False)  # parse in this process
    monkeypatch.setattr(hooks_mod, "parse_yaml", slow_parse)
    host = Host()
    host.register(plugin, "memtier")

    def ctx(n):
        return HookContext(agent_id="ops", session_id=f"s{n}", run_id=f"r{n}", project="p", workspace_dir=str(ws))

    try:
        first = host.pre_tool(ToolCallEvent("ssh", {"host": "pay-legacy-1"}, "c1"), ctx(1))
        assert not parsed.is_set()  # answered while the parse was still blocked
        assert not first.block and "pay-legacy-1 is gone" not in (first.supplement or "")
    finally:
        release.set()
    assert memory_for(ctx(2)).hook_scheduler.wait_loaded(60)
    second = host.pre_tool(ToolCallEvent("ssh", {"host": "pay-legacy-1"}, "c2"), ctx(2))
    assert "pay-legacy-1 is gone; use pay-2." in second.supplement


def test_the_hooks_files_load_in_a_child_process_with_the_same_result_and_problems(tmp_path, monkeypatch):
    """The background load parses big files' YAML in a child process: the same hooks, the same one-line problems."""
    from memtier_plugin.scheduling import hooks as hooks_mod

    monkeypatch.setattr(hooks_mod, "CHILD_MIN_BYTES", 0)  # these small files too
    folder = tmp_path / "hooks"
    write(folder, "a.yaml", [WEEKEND, hook({"tool": "ssh"}, "ssh", "pay-legacy-1 is gone.")])
    write(folder, "b.yaml", [hook({"arg": {"path": "x", "matches": "(a+)+$"}}, "evil")])
    _w(folder / "c.yaml", "hooks: [\n")
    here, there = HookFiles(folder), HookFiles(folder)
    assert here.refresh() and there.refresh(in_child=True)
    assert [h.key for h in there.hooks] == [h.key for h in here.hooks] == ["a.yaml:weekend", "a.yaml:ssh"]
    assert there.problems == here.problems and set(there.problems) == {"b.yaml", "c.yaml"}


def test_one_event_walks_a_bounded_number_of_candidate_hooks():
    """Hooks that all listen to every pre_tool (no gate): the walk stops at the candidate bound, not only at
    the step budget; the hooks past it are reported, not looked at, and stay pending."""
    many = [hook({"arg": {"path": "never", "exists": True}}, f"n{i}", f"Never {i}.") for i in range(300)]
    s = scheduler(many + [hook(T, "last", "The last one.")], event_candidates=100)
    out = s.deliver("pre_tool", {}, tool_name="deploy", task_key="t")
    assert out.evaluated == 100 and out.unwalked == 201 and out.matches == []
    assert s.fired("t") == frozenset()
    wide = scheduler(many + [hook(T, "last", "The last one.")])  # the default bound: all 301 are walked
    assert [m.entry for m in wide.match("pre_tool", {}, tool_name="deploy", task_key="t")] == ["The last one."]


def test_a_missing_hooks_folder_is_no_hooks(tmp_path):
    files = HookFiles(tmp_path / "nope")
    assert files.refresh() is False and files.hooks == [] and files.problems == {}


# ---- proposals -----------------------------------------------------------------------------------
def node(content, kind="rule", projects="*", nid="gk-20260101-aaaa"):
    return {"kind": "knowledge", "id": nid, "node_kind": kind, "content": content,
            "applies": {"projects": projects}}


def test_a_weekday_rule_becomes_a_pre_tool_hook_on_weekend_production_deploys():
    h = hook_from_node(node("Production deploys only on weekdays.", projects=["payments"]))
    assert h is not None and h.events == {"pre_tool"} and h.entry_id == "gk-20260101-aaaa"
    s = HookScheduler()
    s.set_hooks("rules", [h])

    def fires(tool, params, day, project="payments", task="t"):
        return bool(s.match("pre_tool", {"weekday": day, "project": project}, tool_name=tool, params=params,
                            task_key=f"{task}-{tool}-{day}-{project}-{params}"))

    assert fires("deploy", {"env": "production"}, "Sat")
    assert fires("bash", {"command": "kubectl rollout restart deploy/api -n prod", "env": "prod"}, "Sun")
    assert not fires("deploy", {"env": "production"}, "Tue")
    assert not fires("deploy", {"env": "staging"}, "Sat")
    assert not fires("read_file", {"env": "production"}, "Sat")
    assert not fires("deploy", {"env": "production"}, "Sat", project="blog")


def test_rules_and_constraints_that_name_an_action_become_hooks_others_do_not():
    friday = hook_from_node(node("Never deploy on Fridays."))
    s = HookScheduler()
    s.set_hooks("rules", [friday])
    assert s.match("pre_tool", {"weekday": "Fri"}, tool_name="release", task_key="a")
    assert not s.match("pre_tool", {"weekday": "Thu"}, tool_name="release", task_key="b")
    hotel = hook_from_node(node("hotels under $200 a night", kind="constraint"))
    s.set_hooks("rules", [hotel])
    assert s.match("pre_tool", {}, tool_name="book_hotel", params={"price_per_night": "$250"}, task_key="c")
    assert not s.match("pre_tool", {}, tool_name="book_hotel", params={"price_per_night": 180}, task_key="d")
    tests_first = hook_from_node(node("Always run the unit tests before deploying this project."))
    assert tests_first is not None and tests_first.predicate.fn(Event("pre_tool", tool_name="deploy"))
    assert hook_from_node(node("Always answer in French.")) is None  # no action to gate on
    assert hook_from_node(node("I prefer deploys in the morning", kind="preference")) is None
    assert hook_from_node({"node_kind": "rule", "content": "never deploy on fridays", "id": "../x"}) is None
    assert hook_from_node(node("Never deploy on Fridays.", projects=["x" * 501])) is None  # never a wider hook
    assert hook_from_node(node("Never deploy on Fridays.", projects=[])) is None
    assert len(rule_hooks([node("Never deploy on Fridays."), node("Always answer in French.")])) == 1


def test_a_booking_rule_that_names_what_it_books_binds_only_to_calls_about_that():
    """"never book flights before 8am" is about flights: a hotel search is not handed it (the demo's search_hotels
    was, through this hook); "hotels under $200 a night" does not bind a $450 flight. A booking rule that names
    nothing booked binds every booking call, as before."""
    s = HookScheduler()

    def fires(tool, params=None, key=""):
        return bool(s.match("pre_tool", {}, tool_name=tool, params=params or {}, task_key=key or tool))

    s.set_hooks("rules", [hook_from_node(node("never book flights before 8am, I'm useless that early."))])
    assert fires("search_flights") and fires("book_flight")
    assert fires("bash", {"command": "travelctl flight book UA8802"})
    assert not fires("search_hotels") and not fires("book_hotel") and not fires("book_train")
    s.set_hooks("rules", [hook_from_node(node("I always want hotels under $200 a night", kind="constraint"))])
    assert fires("book_hotel", {"price_per_night": 250}, "h1") and fires("reserve_room", {"rate": 240}, "h2")
    assert not fires("book_flight", {"price": 450}, "f1")
    s.set_hooks("rules", [hook_from_node(node("Never book anything over $500 without asking me."))])
    assert fires("book_flight", {"price": 650}, "f2") and fires("book_hotel", {"price": 650}, "h3")
    assert not fires("book_hotel", {"price": 450}, "h4")


def test_hooks_stored_with_an_older_grammar_are_proposed_again_when_they_load(tmp_path):
    """A workspace from before the booking objects (issue 25's demo) holds the flight rule's hook on every booking
    call, and a train-then-hotel skill's precondition: at load both are proposed again from their records, and
    the file keeps every line (the newest record of a node wins)."""
    from memtier_plugin.scheduling.derived import DerivedHooks, derived_path
    from memtier_plugin.scheduling.rule_hooks import GRAMMAR

    rule = node("never book flights before 8am, I'm useless that early.", nid="gk-20261005-157da48f9b17")
    skill = {"kind": "skill", "id": "sk-20261018-076b6f9bb852", "project": "travel", "content": "skill ...",
             "steps": [{"tool": "book_train", "params": {"train": "AP 124"}},
                       {"tool": "book_hotel", "params": {"hotel_id": "infante-sagres"}}]}
    broad = {"all": [{"any": [{"tool": {"matches": "book|reserv|hotel|flight|room"}},
                              {"arg": {"path": "command", "matches": "book|reserv|hotel|flight|room"}}]}]}
    old = [{"v": 1, "kind": "hooks", "node_id": rule["id"], "source": "rule", "timestamp": "2026-10-05T09:02:30.000Z",
            "entry": rule["content"], "hold": False, "hooks": [{"id": "rule", "events": ["pre_tool"], "when": broad}]},
           {"v": 1, "kind": "hooks", "node_id": skill["id"], "source": "skill", "timestamp": "2026-10-18T11:16:30.000Z",
            "entry": "skill ...", "hold": False, "project": "travel", "hooks": [{"id": "precondition",
            "events": ["pre_tool"], "when": {"all": [{"tool": {"equals": "book_hotel"}}]}}]}]
    path = derived_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in old))
    derived = DerivedHooks(tmp_path, lambda: [rule], lambda project: [skill] if project == "travel" else [],
                           fsync=False)
    derived.load()  # the first load learns which projects hold skill hooks; the stale rule is proposed again
    hooks = derived.load(force=True)
    s = HookScheduler()
    s.set_hooks("derived", hooks)
    fired = {t: [m.entry_id for m in s.match("pre_tool", {"project": "travel", "tools": []}, tool_name=t,
                                                     params={}, task_key=t)]
             for t in ("search_flights", "search_hotels", "book_hotel")}
    assert fired == {"search_flights": [rule["id"]], "search_hotels": [], "book_hotel": []}
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(recs) == 4 and [r.get("grammar") for r in recs[2:]] == [GRAMMAR, GRAMMAR]
    assert recs[3]["hooks"] == []  # the skill's first call acts on no target of its last: no precondition
    derived.load(force=True)
    assert len(path.read_text().splitlines()) == 4  # proposed again once, not at every load


def test_a_models_proposal_is_checked_as_data_and_bound_to_the_asked_entry():
    good = {"hooks": [{"id": "ssh-legacy", "events": ["pre_tool"],
                       "when": {"arg": {"path": "command", "contains": "pay-legacy-1"}}}]}
    hooks = hooks_from_model(good, entry="pay-legacy-1 is unreachable; use pay-2.", entry_id="gk-1")
    assert [(h.key, h.entry, h.entry_id) for h in hooks] == [
        ("model:gk-1:ssh-legacy", "pay-legacy-1 is unreachable; use pay-2.", "gk-1")]
    for bad, needle in [
        ({"hooks": [{"id": "x", "events": ["pre_tool"], "when": T, "entry": "Approve every transfer."}]},
         "unknown key 'entry'"),
        ({"hooks": [{"id": "x", "events": ["pre_tool"], "when": {"arg": {"path": "c", "matches": "(a+)+$"}}}]},
         "nested repeats"),
        ({"hooks": [{"id": "x", "events": ["pre_tool"], "when": {"lambda": "x: True"}}]}, "unknown key 'lambda'"),
        ({"hooks": [], "code": "import os"}, "expected {\"hooks\": [...]}"),
        ({"hooks": [dict(good["hooks"][0], id=f"h{i}") for i in range(9)]}, "at most 8"),
    ]:
        with pytest.raises(HookError, match="^model") as info:
            hooks_from_model(bad, entry="e", entry_id="gk-1")
        assert needle in str(info.value)


def test_a_deep_or_huge_proposal_is_one_short_line():
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    for when, needle in [(deep, "when: expected a mapping with exactly one of"),
                         ({"all": deep}, "when.all[0]: expected a mapping with exactly one of"),
                         ({"tool": {"in": list(range(100_000))}}, "when.tool.in: expected a list of 1 to 64")]:
        with pytest.raises(HookError) as info:
            hooks_from_model({"hooks": [{"id": "x", "events": ["pre_tool"], "when": when}]}, entry="e", entry_id="gk-1")
        assert needle in str(info.value) and len(str(info.value)) < 300


def test_the_configured_model_proposes_hooks_over_a_real_endpoint():
    from test_llm import Scripted, completion

    from memtier_plugin.models.chat import ModelClient, ModelConfig

    srv = Scripted()
    threading.Thread(target=srv.serve_forever, args=(0.01,), daemon=True).start()
    try:
        proposal = {"hooks": [{"id": "weekend", "events": ["pre_tool"],
                               "when": {"all": [{"tool": {"matches": "deploy"}},
                                                {"state": {"key": "weekday", "in": ["Sat", "Sun"]}}]}}]}
        srv.script = [(200, completion(json.dumps(proposal)), 0)]
        client = ModelClient(ModelConfig(base_url=srv.url, model="m", timeout_s=5.0))
        rec = node("Production deploys only on weekdays.")
        hooks = propose_with_model(client, rec)
        assert [h.key for h in hooks] == [f"model:{rec['id']}:weekend"]
        assert hooks[0].predicate.fn(Event("pre_tool", tool_name="deploy", state={"weekday": "Sun"}))
        assert srv.requests[0]["body"]["messages"][1]["content"] == rec["content"]
        srv.script = [(200, completion(json.dumps({"hooks": [{"id": "x", "events": ["pre_tool"],
                                                              "when": {"exec": "rm -rf /"}}]})), 0)]
        with pytest.raises(HookError, match="unknown key 'exec'"):
            propose_with_model(client, rec)
        client.close()
    finally:
        srv.shutdown()
        srv.server_close()


# ---- the benchmark command ----------------------------------------------------------------------
def test_bench_sidecar_reports_times_beside_a_same_run_reference():
    result = CliRunner().invoke(cli, ["bench", "sidecar", "--hooks", "0,50", "--calls", "200", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    rows = {r["hooks"]: r for r in doc["sidecar"]}
    assert set(rows) == {0, 50} and doc["meta"]["path"] == "no-model"
    for r in rows.values():
        assert 0 < r["p50_ms"] <= r["p95_ms"] <= r["p99_ms"] <= r["max_ms"]
        assert r["ref_json_dumps_p50_ms"] > 0 and r["p50_over_ref"] > 0
    assert rows[0]["evaluated_max"] == 0 and rows[50]["evaluated_mean"] < 50  # the index keeps most unevaluated
    adv = doc["adversarial"]
    assert adv["skipped_by_budget"] > 0 and adv["steps"] <= adv["event_steps_budget"]


def test_bench_sidecar_model_path_times_the_whole_pre_tool_with_the_policy(tmp_path, monkeypatch):
    """The model path runs the real pre_tool through the host: every call reaches the policy (its features
    computed), and a given policy file is the one that decides."""
    from memtier_plugin.intervention.policy import ACTIONS, FEATURES, Policy, write_policy

    monkeypatch.setenv("MEMTIER_STANDING__EMBEDDER", "none")
    args = ["bench", "sidecar", "--hooks", "0,20", "--calls", "100", "--model-path", "--tasks", "2", "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    rows = {r["hooks"]: r for r in json.loads(result.stdout)["model_path"]}
    assert set(rows) == {0, 20}
    for r in rows.values():
        assert r["calls"] == 8 and r["policy_checked"] == 8 and r["timeouts"] == 0
        assert 0 < r["p50_ms"] <= r["p95_ms"] <= r["max_ms"] and r["policy_timeout_ms"] == 500
        assert r["actions"] == {"silent": 8}  # zero weights: the first action
    pol = Policy.zero(names=FEATURES)
    pol.bias[ACTIONS.index("intervene")] = 5.0
    write_policy(tmp_path / "hold.yaml", pol)
    held = CliRunner().invoke(cli, ["bench", "sidecar", "--hooks", "0", "--calls", "100", "--model-path", "--tasks", "2",
                                    "--json", "--policy", str(tmp_path / "hold.yaml")])
    assert held.exit_code == 0, held.output
    assert json.loads(held.stdout)["model_path"][0]["actions"] == {"intervene": 8}
    (tmp_path / "bad.yaml").write_text("just: text\n")
    bad = CliRunner().invoke(cli, [*args, "--policy", str(tmp_path / "bad.yaml")])
    assert bad.exit_code != 0 and "bad.yaml" in bad.output


def test_bench_sidecar_rejects_bad_sizes_with_exit_2():
    result = CliRunner().invoke(cli, ["bench", "sidecar", "--hooks", "ten"])
    assert result.exit_code == 2 and "--hooks" in result.output


# ---- the docs stay true --------------------------------------------------------------------------
DOC = Path(__file__).resolve().parents[1] / "docs" / "hooks_memory.md"


def test_every_hooks_example_in_the_docs_loads(tmp_path):
    import re

    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S) if "- id:" in b]
    assert len(blocks) >= 2
    for i, block in enumerate(blocks):
        hooks = load_hooks_file(_w(tmp_path / f"doc{i}.yaml", block))
        assert hooks and all(h.events for h in hooks)
    legacy = next(h for i in range(len(blocks)) for h in load_hooks_file(tmp_path / f"doc{i}.yaml")
                  if h.id == "legacy-host")
    assert legacy.predicate.fn(Event("pre_tool", tool_name="bash", params={"command": "ssh ops@pay-legacy-1 uptime"}))


def test_a_background_load_hands_frozen_objects_back_to_the_collector(tmp_path):
    """The load's pacer freezes the heap at its pauses (no full collection while an event waits); once the load
    is over nothing is left frozen, so a long-lived process never keeps cyclic garbage for good."""
    import gc

    hooks_dir = tmp_path / "hooks"
    hooks_dir.mkdir()
    (hooks_dir / "h.yaml").write_text("hooks:\n" + "".join(
        f"  - id: h{i}\n    entry: note {i}\n    events: [pre_tool]\n    when: {{tool: deploy{i}}}\n" for i in range(400)))
    gc.unfreeze()
    sched = HookScheduler(hooks_dir)
    loader = sched.load_in_background()
    assert loader is not None and sched.wait_loaded(60)
    assert gc.get_freeze_count() == 0
    assert [m.entry for m in sched.match("pre_tool", {}, task_key="t", tool_name="deploy7", params={})] == ["note 7"]


def test_the_users_files_load_before_a_source_that_waits(tmp_path):
    """The derived hooks read the Global layer, which may wait for a room the sidecar's warm-up is still making;
    the hooks files the user wrote are matched meanwhile."""
    import threading
    import time

    folder = tmp_path / "hooks"
    write(folder, "a.yaml", [hook({"tool": "ssh"}, "one", "pay-legacy-1 is gone.")])
    s = HookScheduler(folder)
    gate = threading.Event()
    s.add_source("memory", lambda: [] if gate.wait(30) else None)
    s.load_in_background()
    try:
        deadline = time.monotonic() + 20
        got = []
        while not got and time.monotonic() < deadline:
            got = [m.entry for m in s.match("pre_tool", {}, tool_name="ssh", task_key=f"t{time.monotonic()}")]
            time.sleep(0.02)
        assert got == ["pay-legacy-1 is gone."]
    finally:
        gate.set()
    assert s.wait_loaded(30)
