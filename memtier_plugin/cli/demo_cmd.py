"""`memtier demo`: replay the bundled scenario through the reference host."""

from __future__ import annotations

import os
import tempfile
import textwrap
from pathlib import Path

import click

from ..errors import MemtierError


def find_scenario(explicit: str | None) -> Path:
    """The bundled scenario: --scenario, $MEMTIER_SCENARIO, ./workspace-fixtures, or beside the package."""
    candidates = [explicit, os.environ.get("MEMTIER_SCENARIO"), "workspace-fixtures/scenario",
                  str(Path(__file__).resolve().parents[2] / "workspace-fixtures" / "scenario")]
    for c in candidates:
        if c and Path(c).is_dir() and any(Path(c).glob("*.jsonl")):
            return Path(c)
    raise MemtierError("scenario not found: run from the repository root or pass --scenario DIR")


def _indent(text: str, prefix: str = "      ") -> str:
    return textwrap.indent(text, prefix)


@click.command()
@click.option("--scenario", type=click.Path(file_okay=False), help="Folder of recorded sessions (*.jsonl).")
@click.option("--into", type=click.Path(file_okay=False), help="Workspace to write (default: a new temporary one).")
@click.option("--plugin-dir", type=click.Path(file_okay=False), help="Load hooks from this plugin directory.")
@click.option("--quiet", "-q", is_flag=True, help="Only the summary.")
@click.pass_obj
def demo(state, scenario, into, plugin_dir, quiet):
    """Replay the bundled multi-session scenario and show, turn by turn, what memory did."""
    from ..host import Host, replay_session
    from ..ledger import Ledger
    from ..memory import memory_for, reset_services
    from ..redact import redact

    scen = find_scenario(scenario)
    workspace = Path(into) if into else Path(tempfile.mkdtemp(prefix="memtier-demo-"))
    workspace.mkdir(parents=True, exist_ok=True)
    os.environ["MEMTIER_WORKSPACE"] = str(workspace)
    if state.config_path:
        os.environ["MEMTIER_CONFIG"] = str(Path(state.config_path).resolve())
    reset_services()
    host = Host()
    if plugin_dir:
        host.load_plugin_dir(plugin_dir)
    else:
        from .. import plugin as builtin

        host.register(builtin)
    ledger = Ledger(workspace / "memory")
    echo = (lambda *a, **k: None) if quiet else click.echo
    echo(f"memtier demo: replaying {scen} into {workspace}")

    def on_turn(report, turn):
        ctx = report.ctx
        echo(click.style(f"\n[{ctx.session_id} · {turn.run_id}] user:", bold=True) + f" {redact(turn.prompt)[0]}")
        block = turn.memory.prepend_context
        if block:
            rec = memory_for(ctx).retriever.last_result
            echo(f"  memory delivered ({len(rec.hits) if rec else '?'} entries):")
            if rec is not None:
                for hit in rec.hits:
                    echo("    " + hit.explain_line())
                for why in rec.left_out[:3]:
                    echo(f"    (left out {why})")
        else:
            echo("  memory delivered: nothing relevant yet")
        for call, decision, outcome in turn.tools:
            verdict = "blocked" if decision.block else ("supplemented" if decision.supplement else "allowed")
            echo(f"  tool {call.tool_name} [{verdict}] -> {'FAILED: ' + outcome if outcome else 'ok'}")
        written = [e for e in ledger.read([ctx.agent_id]).entries.values()
                   if e.provenance.get("run_id") == turn.run_id]
        echo(f"  written: {len(written)} entries ({', '.join(sorted({e.role for e in written}))}); "
             f"run {'succeeded' if turn.success else 'failed'}")
        for e in written:
            if e.history:
                echo(f"    {e.id}: cw {e.cognitive_weight:+.2f}")
        for e in _cw_changes(ledger, ctx.agent_id, turn.run_id):
            echo(f"    cw {e['delta']:+.3f} on {e['entry_id']} (overlap {e.get('overlap')}, {e.get('reason')})")

    sessions = sorted(scen.glob("*.jsonl"))
    for path in sessions:
        replay_session(host, path, workspace, on_turn=on_turn)
        _after_session(state, workspace, echo)
    result = ledger.read()
    click.echo(f"\nmemtier demo: {len(sessions)} sessions, {len(result.entries)} entries in "
               f"{len(ledger.agents())} agent ledgers under {workspace / 'memory'}")
    click.echo(f"inspect them with: memtier -w {workspace} inspect")


def _cw_changes(ledger, agent_id: str, run_id: str) -> list[dict]:
    from ..ledger import iter_records

    out = []
    for path in ledger.files([agent_id]):
        for rec, _, problem in iter_records(path):
            if not problem and rec.get("kind") == "cw_update" and rec.get("run_id") == run_id:
                out.append(rec)
    return out


def _after_session(state, workspace: Path, echo) -> None:
    """Between sessions, consolidation promotes facts (when the daemon module is present)."""
    try:
        from ..consolidation import consolidate_once
    except ImportError:
        return
    from ..memory import memory_for
    from ..events import HookContext

    mem = memory_for(HookContext(agent_id="main", workspace_dir=str(workspace)))
    report = consolidate_once(mem.config)
    for fact in report.new_facts:
        note = f" (supersedes {fact['supersedes']})" if fact.get("supersedes") else ""
        echo(f"  consolidation: fact {fact['id']}: {fact['content']}{note}")
