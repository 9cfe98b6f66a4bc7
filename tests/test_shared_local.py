"""Issue 29, the parts that need no engine: the folds a fleet's mirror relies on, and the embedded default
importing nothing of the shared tiers (this file runs without psycopg; tests/test_shared.py needs it)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap

from memtier_plugin.layers.extract import Candidate
from memtier_plugin.layers.global_layer import GlobalStore


def test_folding_a_mirror_in_any_order_gives_the_same_current_set(tmp_path):
    ws = tmp_path / "w"
    store = GlobalStore(ws)
    t = 1_790_000_000.0
    for i, (attr, text) in enumerate([("seat", "I want an aisle seat"), ("seat", "I want a window seat"),
                                      ("meal", "I eat vegetarian meals"), ("seat", "I want an exit row seat"),
                                      ("meal", "I eat vegan meals now"), ("", "I like quiet hotels")]):
        store.upsert([Candidate("preference", text, attr, [f"e{i}"])], agent_id="a", session_id="s", project="p",
                     ts=t + i)
    want = sorted(n.id for n in store.current())
    lines = (ws / "global" / "knowledge.jsonl").read_text().splitlines()
    rnd = random.Random(7)
    for k in range(5):
        rnd.shuffle(lines)
        other = tmp_path / f"shuffled{k}"
        (other / "global").mkdir(parents=True)
        (other / "global" / "knowledge.jsonl").write_text("\n".join(lines) + "\n")
        assert sorted(n.id for n in GlobalStore(other).current()) == want


def test_a_version_stated_earlier_arrives_as_history(tmp_path):
    store = GlobalStore(tmp_path / "w")
    t = 1_790_000_000.0
    store.upsert([Candidate("preference", "I want a window seat", "seat", ["e2"])], agent_id="a", session_id="s",
                 project="p", ts=t + 100)
    store.upsert([Candidate("preference", "I want an aisle seat", "seat", ["e1"])], agent_id="a", session_id="s",
                 project="p", ts=t)  # a host whose clock is behind, or a replayed older statement
    assert [n.rec["content"] for n in store.current()] == ["I want a window seat"]


def test_without_the_backend_nothing_shared_is_imported(tmp_path):
    code = textwrap.dedent(f'''
        import sys
        sys.modules["psycopg"] = None  # as if the shared extra were not installed
        from memtier_plugin import plugin
        from memtier_plugin.host import Host
        from memtier_plugin.events import HookContext, PromptEvent, AgentEndEvent
        h = Host(); h.register(plugin, "memtier")
        ctx = HookContext(agent_id="a", session_id="s", run_id="r", project="p", workspace_dir={str(tmp_path)!r})
        h.before_prompt_build(PromptEvent("I always want an aisle seat."), ctx)
        h.agent_end(AgentEndEvent(messages=[], success=True), ctx)
        assert not [m for m in sys.modules if m.startswith("memtier_plugin.shared")], "shared imported"
        print("ok")
    ''')
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTIER_SHARED")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_postgres_without_psycopg_logs_one_error_and_hooks_still_work(tmp_path):
    code = textwrap.dedent(f'''
        import logging, sys, time
        sys.modules["psycopg"] = None
        logging.basicConfig(level=logging.ERROR, format="%(message)s")
        from memtier_plugin import plugin
        from memtier_plugin.host import Host
        from memtier_plugin.events import HookContext, PromptEvent, AgentEndEvent
        h = Host(); h.register(plugin, "memtier")
        ctx = HookContext(agent_id="a", session_id="s", run_id="r", project="p", workspace_dir={str(tmp_path)!r})
        h.before_prompt_build(PromptEvent("I always want an aisle seat."), ctx)
        h.agent_end(AgentEndEvent(messages=[], success=True), ctx)
        time.sleep(0.5)
        print("ok")
    ''')
    env = {**os.environ, "MEMTIER_SHARED__BACKEND": "postgres", "MEMTIER_PG_DSN": "postgresql://nobody@127.0.0.1:1/x"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
    assert "pip install 'memtier-plugin[shared]'" in r.stderr and "memory stays on this host" in r.stderr
    assert (tmp_path / "memory" / "global" / "knowledge.jsonl").exists(), "memory still works on this host"


def test_the_sidecar_without_psycopg_stops_at_startup_naming_the_extra(tmp_path):
    code = ("import sys; sys.modules['psycopg'] = None; sys.argv = ['memtier', '-w', %r, 'serve'];"
            "from memtier_plugin.cli import cli; cli()") % str(tmp_path / "ws")
    env = {**os.environ, "MEMTIER_SHARED__BACKEND": "postgres", "MEMTIER_PG_DSN": "postgresql://x@127.0.0.1:1/x"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode != 0 and "shared.backend" in r.stderr and "memtier-plugin[shared]" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
