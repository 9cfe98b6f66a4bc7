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
    from ..store.episodic import Ledger
    from ..config import load_config
    from ..memory import Memory, memory_for, reset_services
    from ..redact import redact

    scen = find_scenario(scenario)
    workspace = Path(into) if into else Path(tempfile.mkdtemp(prefix="memtier-demo-"))
    workspace.mkdir(parents=True, exist_ok=True)
    reset_services()
    Memory.from_config(load_config(state.config_path, flags={**state.flags(), "paths.workspace": str(workspace)}))
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
            said = [line.strip() for line in (decision.supplement or "").splitlines() if line.strip().startswith("- [")]
            for line in said[:3]:  # what memory handed the agent with the call (Pulse's supplement)
                echo(f"    with the call: {line[:160]}")
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
    learning = scen.parent / "attribution"
    if learning.is_dir() and any(learning.glob("*.jsonl")):
        sessions += _learning_act(host, learning, workspace, on_turn, quiet)
    result = ledger.read()
    click.echo(f"\nmemtier demo: {len(sessions)} sessions, {len(result.entries)} entries in "
               f"{len(ledger.agents())} agent ledgers under {workspace / 'memory'}")
    click.echo(f"inspect them with: memtier -w {workspace} inspect")


def _cw_changes(ledger, agent_id: str, run_id: str) -> list[dict]:
    from ..store.episodic import iter_records
    from ..store.records import problem as record_problem

    out = []
    for path in ledger.files([agent_id]):
        for rec, _, problem in iter_records(path):
            if not problem and rec.get("kind") == "cw_update" and rec.get("run_id") == run_id \
                    and record_problem(rec) is None:
                out.append(rec)
    return out


def _after_session(state, workspace: Path, echo) -> None:
    """Between sessions, consolidation promotes facts (when the daemon module is present)."""
    try:
        from ..consolidation.batch import consolidate_once
    except ImportError:
        return
    from ..memory import memory_for
    from ..events import HookContext

    mem = memory_for(HookContext(agent_id="main", workspace_dir=str(workspace)))
    report = consolidate_once(mem.config)
    for fact in report.new_facts:
        note = f" (supersedes {fact['supersedes']})" if fact.get("supersedes") else ""
        echo(f"  consolidation: fact {fact['id']}: {fact['content']}{note}")


LEARNING_QUERY = "restart the payments worker"


def _learning_act(host, folder: Path, workspace: Path, on_turn, quiet: bool) -> list[Path]:
    """Act 2: two runbook entries compete; tool outcomes move their cognitive weights and flip their order."""
    from ..host import read_session, replay_session
    from ..store.episodic import parse_iso

    sessions = sorted(folder.glob("*.jsonl"))
    head = read_session(sessions[0])[0]
    competing = {read_session(p)[0]["session_id"] for p in sessions[:2]}  # each states one way to do it
    last = read_session(sessions[-1])
    now = parse_iso(last[-1]["at"]) + 3600 if last[-1].get("at") else None
    click.echo(click.style("\nAct 2: learning from tool outcomes", bold=True)
               + f" ({folder}): two runbook entries disagree on how to restart the payments worker")
    order_before = None
    for i, path in enumerate(sessions):
        replay_session(host, path, workspace, on_turn=None if quiet else on_turn)
        if i == 1:
            order_before = _recall_order(workspace, head, competing, now)
            _show_order("recall before any outcome", order_before)
    order_after = _recall_order(workspace, head, competing, now)
    _show_order("recall after the failed and the successful calls", order_after)
    ids_before = [e["id"] for e in order_before]
    ids_after = [e["id"] for e in order_after]
    flipped = len(ids_before) == len(ids_after) == 2 and ids_before == ids_after[::-1]
    click.echo("  the order of the two runbook entries " + ("flipped: the cognitive weights moved it" if flipped
                                                            else "did not change"))
    return sessions


def _recall_order(workspace: Path, head: dict, competing: set, now) -> list[dict]:
    from ..config import load_config
    from ..recall.retriever import Retriever

    retriever = Retriever(load_config(flags={"paths.workspace": str(workspace)}))
    result = retriever.recall(LEARNING_QUERY, agent_id=head["agent_id"], project=head.get("project"),
                              agents=[head["agent_id"]], now=now, record_trace=False)
    ranked = retriever.rank(LEARNING_QUERY, agents=[head["agent_id"]], project=head.get("project"), now=now)
    entries = retriever.ledger.read([head["agent_id"]]).entries
    keep = {e.id for e in entries.values() if e.session_id in competing and e.role == "user"}
    out = []
    for i, (idx, doc) in enumerate(ranked.docs):
        rid = idx.ids[doc]
        if rid in keep:
            e = entries[rid]
            out.append({"id": rid, "rank": i + 1, "score": float(ranked.scores[i]), "cw": e.cognitive_weight,
                        "content": e.content, "delivered": rid in {h.id for h in result.hits}})
    return out


def _show_order(title: str, rows: list[dict]) -> None:
    click.echo(f"  {title} for {LEARNING_QUERY!r}:")
    for r in rows:
        click.echo(f"    #{r['rank']:<3} score={r['score']:.3f} cw={r['cw']:+.3f} "
                   f"{'[delivered] ' if r['delivered'] else ''}{r['content'][:80]}")
