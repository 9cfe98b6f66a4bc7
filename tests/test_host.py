import ast
import json
import logging
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, run_cli
from memtier_plugin import hookspecs
from memtier_plugin.events import HookContext, PromptAddition, PromptEvent, ToolCallEvent, ToolDecision
from memtier_plugin.host import Host, replay_session
from memtier_plugin.hookspecs import hookimpl
from memtier_plugin.store.episodic import Ledger

SCENARIO = sorted((FIXTURES / "scenario").glob("*.jsonl"))
SPECS = [name for name in dir(hookspecs) if hasattr(getattr(hookspecs, name), "memtier_spec")]


def test_every_hookspec_documented_and_implemented():
    assert sorted(SPECS) == sorted(["before_prompt_build", "pre_tool", "post_tool", "agent_end",
                                    "before_compaction", "session_end"])
    readme = (ROOT / "README.md").read_text() + (ROOT / "docs" / "hooks.md").read_text()
    from memtier_plugin import plugin

    for name in SPECS:
        doc = getattr(hookspecs, name).__doc__
        assert ":param event:" in doc and ":param ctx:" in doc and ":return:" in doc, name
        assert f"`{name}`" in readme, f"{name} missing from the docs"
        assert hasattr(getattr(plugin, name), "memtier_impl"), name


@pytest.fixture
def plugin_dir(tmp_path):
    d = tmp_path / "plugins"
    d.mkdir()
    for f in (ROOT / "hooks").glob("*.py"):
        shutil.copy(f, d / f.name)
    return d


def test_dropin_hooks_replay_writes_ledger(plugin_dir, workspace):
    host = Host()
    assert host.load_plugin_dir(plugin_dir) == ["memtier"]
    assert dict(host.plugins())["memtier"] == sorted(SPECS)
    report = replay_session(host, SCENARIO[0], workspace)
    assert report.turns, "the fixture session has user turns"
    entries = Ledger(workspace / "memory").read().entries.values()
    mine = [e for e in entries if e.session_id == report.ctx.session_id]
    assert {e.role for e in mine} >= {"user"}
    assert len([e for e in mine if e.role == "user"]) == len(report.turns)
    tool_calls = sum(len(t.tools) for t in report.turns)
    assert len([e for e in mine if e.role == "tool"]) == tool_calls
    assert all(e.provenance.get("run_id", "").startswith(report.ctx.session_id) for e in mine)


class Exploding:
    PLUGIN_NAME = "exploding"

    @hookimpl
    def before_prompt_build(self, event, ctx):
        raise RuntimeError("boom in a third-party plugin")


def test_failing_memory_never_breaks_the_turn(workspace, caplog, monkeypatch):
    from memtier_plugin import memory, plugin

    def broken(*a, **k):
        raise OSError("disk on fire")

    monkeypatch.setattr(memory.Memory, "recall", broken)
    host = Host()
    host.register(plugin)
    ctx = HookContext(agent_id="a", session_id="s", run_id="r1", workspace_dir=str(workspace))
    with caplog.at_level(logging.ERROR):
        answer = host.before_prompt_build(PromptEvent("hello"), ctx)
    assert answer == PromptAddition(None, None)
    assert "disk on fire" in caplog.text
    host.register(Exploding())
    assert host.before_prompt_build(PromptEvent("hello"), ctx) == PromptAddition(None, None)
    # pre_tool says it could not check rather than silently allowing
    monkeypatch.setattr(memory.Memory, "on_pre_tool", broken)
    decision = host.pre_tool(ToolCallEvent("deploy", {"env": "prod"}), ctx)
    assert not decision.block and "could not run" in decision.supplement


def test_answers_combine_first_block_wins():
    from memtier_plugin.events import combine_prompt_additions, combine_tool_decisions

    add = combine_prompt_additions([PromptAddition("a", None), None, PromptAddition("b", "sys")])
    assert add == PromptAddition("a\n\nb", "sys")
    dec = combine_tool_decisions([ToolDecision(supplement="s1"), ToolDecision(block=True, block_reason="first"),
                                  ToolDecision(block=True, block_reason="second")])
    assert dec.block and dec.block_reason == "first"
    assert combine_tool_decisions([ToolDecision(supplement="x"), ToolDecision(params={"a": 1})]) == \
        ToolDecision(supplement="x", params={"a": 1})


def test_core_modules_do_not_import_pluggy():
    # package-relative paths: a module of the same name in a sub-package is core and is checked
    allowed = {"hookspecs.py", "host.py", "plugin.py"}
    pkg = ROOT / "memtier_plugin"
    for path in pkg.rglob("*.py"):
        if path.relative_to(pkg).as_posix() in allowed:
            continue
        tree = ast.parse(path.read_text())
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not any(n.split(".")[0] == "pluggy" for n in names), path


def test_plugins_command_lists_hooks(plugin_dir):
    out = json.loads(run_cli("plugins", "--plugin-dir", str(plugin_dir), "--json").stdout)
    names = {p["name"]: p["hooks"] for p in out}
    assert "memtier" in names and "pre_tool" in names["memtier"]


def test_demo_runs_and_leaks_no_secret(tmp_path):
    into = tmp_path / "demo"
    proc = run_cli("demo", "--into", str(into))
    assert "memory delivered" in proc.stdout and "written:" in proc.stdout
    secrets = [s.strip() for s in (FIXTURES / "SECRETS.txt").read_text().splitlines() if s.strip()]
    assert secrets
    for path in into.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for s in secrets:
                assert s.encode() not in data, f"{s[:6]}… leaked into {path}"
    assert list((into / "memory" / "episodic").iterdir())


def test_a_command_gives_its_config_to_the_hooks_without_the_environment(tmp_path, monkeypatch):
    """Memory.from_config: the hooks of the workspace get the command's config (here a preset no file or
    variable names), and nothing is written to os.environ."""
    import os

    from memtier_plugin.config import load_config
    from memtier_plugin.memory import Memory, memory_for, reset_services

    for var in ("MEMTIER_WORKSPACE", "MEMTIER_CONFIG", "MEMTIER_PRESET"):
        monkeypatch.delenv(var, raising=False)
    before = dict(os.environ)
    reset_services()
    try:
        cfg = load_config(flags={"paths.workspace": str(tmp_path / "ws"), "preset": "hybrid-fast"})
        mem = Memory.from_config(cfg)
        got = memory_for(HookContext(agent_id="a", workspace_dir=str(tmp_path / "ws")))
        assert got is mem and got.config.preset == "hybrid-fast"
        assert memory_for(HookContext(agent_id="a", workspace_dir=str(tmp_path / "other"))).config.preset != "hybrid-fast"
        assert dict(os.environ) == before
    finally:
        reset_services()
