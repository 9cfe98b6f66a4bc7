"""`memtier add` and `memtier inspect`: write to and read the episodic ledgers."""

from __future__ import annotations

import shutil
import sys

import click
import orjson

from ..errors import MemtierError
from ..ledger import Ledger, parse_iso


def _ledger(state) -> Ledger:
    return Ledger(state.config.memory_root)


@click.command()
@click.argument("text", required=False)
@click.option("--agent", "-a", default="main", show_default=True, help="Agent id (ledger owner).")
@click.option("--session", "-s", default="manual", show_default=True, help="Session id.")
@click.option("--project", "-p", default="", help="Project the entry belongs to.")
@click.option("--role", default="user", show_default=True, type=click.Choice(["user", "assistant", "tool", "system"]))
@click.option("--stdin", "from_stdin", is_flag=True,
              help="Read entries from standard input: one JSON object (content, and optionally "
                   "agent_id, session_id, project, role, timestamp) or one plain-text line each.")
@click.option("--json", "as_json", is_flag=True, help="Print each written record as JSON.")
@click.pass_obj
def add(state, text, agent, session, project, role, from_stdin, as_json):
    """Append entries to an agent's episodic ledger; prints each id once it is on disk."""
    if not text and not from_stdin:
        raise click.UsageError("give TEXT or --stdin")
    ledger = _ledger(state)

    def write(content: str, **over):
        ts = over.pop("timestamp", None)
        rec = ledger.add(agent_id=over.get("agent_id", agent), session_id=over.get("session_id", session),
                         project=over.get("project", project), role=over.get("role", role),
                         content=("[system] " + content) if role == "system" and not content.startswith("[system]") else content,
                         timestamp=parse_iso(ts) if isinstance(ts, str) else ts)
        click.echo(orjson.dumps(rec).decode() if as_json else rec["id"])

    if text:
        write(text)
    if from_stdin:
        for lineno, line in enumerate(sys.stdin, 1):
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    obj = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise MemtierError(f"stdin:{lineno}: not valid JSON: {exc}") from None
                if not isinstance(obj.get("content"), str) or not obj["content"].strip():
                    raise MemtierError(f"stdin:{lineno}: missing 'content' (a non-empty string)")
                allowed = {"agent_id", "session_id", "project", "role", "timestamp"}
                write(obj["content"], **{k: v for k, v in obj.items() if k in allowed})
            else:
                write(line)


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


@click.command()
@click.option("--agent", "-a", multiple=True, help="Only these agents (repeatable).")
@click.option("--session", "-s", multiple=True, help="Only these sessions (repeatable).")
@click.option("--project", "-p", multiple=True, help="Only these projects (repeatable).")
@click.option("--date", "dates", multiple=True, help="Only entries of this UTC day, YYYY-MM-DD (repeatable).")
@click.option("--id", "entry_id", help="Only this entry.")
@click.option("--history", is_flag=True, help="With --id: every appended change of the entry.")
@click.option("--role", multiple=True, help="Only these roles.")
@click.option("--limit", type=int, default=0, help="Show only the last N entries (0: all).")
@click.option("--facts", "show_facts", is_flag=True,
              help="Semantic facts instead of entries: the current ones; with --history every revision "
                   "chain; with --id sf-... that fact's chain. --project and --agent (origin) filter.")
@click.option("--costs", is_flag=True, help="Store and Retrieve tokens per session (and run, with --json).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per entry per line.")
@click.pass_obj
def inspect(state, agent, session, project, dates, entry_id, history, role, limit, show_facts, costs, as_json):
    """Show the folded current state of the episodic ledgers.

    Unreadable lines (corrupt or torn) are skipped and named on stderr by file
    and line; everything else is shown.
    """
    if show_facts:
        return _inspect_facts(state, agent, project, entry_id, history, as_json)
    if costs:
        return _inspect_costs(state, session, as_json)
    result = _ledger(state).read(agent or None)
    for problem in result.problems:
        click.echo(f"memtier: warning: skipped {problem}", err=True)
    entries = [e for e in result.entries.values()
               if (not session or e.session_id in session) and (not project or e.project in project)
               and (not dates or e.timestamp[:10] in dates) and (not entry_id or e.id == entry_id)
               and (not role or e.role in role)]
    entries.sort(key=lambda e: (e.ts, e.id))
    if limit:
        entries = entries[-limit:]
    if entry_id and not entries:
        raise MemtierError(f"no entry with id {entry_id!r} in {state.config.memory_root}")
    if as_json:
        out = sys.stdout
        for e in entries:
            obj = e.public()
            if history:
                obj["history"] = e.history
            out.write(orjson.dumps(obj).decode() + "\n")
        return
    if history and entries:
        _print_history(entries[0])
        return
    width = shutil.get_terminal_size((120, 24)).columns
    head = f"{'id':<24} {'time (UTC)':<16} {'agent':<10} {'session':<18} {'project':<9} {'role':<9} {'cw':>6} {'prom':<4} content"
    click.echo(head)
    fixed = len(head) - len("content")
    for e in entries:
        click.echo(f"{e.id:<24} {e.timestamp[:16].replace('T', ' '):<16} {_short(e.agent_id, 10):<10} "
                   f"{_short(e.session_id, 18):<18} {_short(e.project, 9):<9} {e.role:<9} "
                   f"{e.cognitive_weight:>+6.2f} {'yes' if e.promoted else '':<4} {_short(e.content, max(20, width - fixed))}")
    click.echo(f"{len(entries)} entries" + (f", {len(result.problems)} unreadable lines skipped" if result.problems else ""),
               err=True)


def _print_history(e) -> None:
    click.echo(f"{e.id}  {e.timestamp}  agent={e.agent_id} session={e.session_id} project={e.project} role={e.role}")
    click.echo(f"  content: {e.content}")
    click.echo(f"  written: {e.path}:{e.line}")
    cw = 0.0
    for rec in e.history:
        kind = rec.get("kind")
        if kind == "cw_update":
            cw = max(-1.0, min(1.0, cw + float(rec.get("delta", 0))))
            click.echo(f"  {rec.get('timestamp', '')}  cw {float(rec.get('delta', 0)):+.3f} -> {cw:+.3f}  "
                       f"run={rec.get('run_id')} call={rec.get('tool_call_id')} overlap={rec.get('overlap')} "
                       f"({rec.get('reason', '')})")
        elif kind == "promoted":
            click.echo(f"  {rec.get('timestamp', '')}  promoted -> facts {', '.join(rec.get('fact_ids') or [])}")
        else:
            click.echo(f"  {rec.get('timestamp', '')}  {kind}")
    click.echo(f"  now: cw={e.cognitive_weight:+.3f} promoted={'yes' if e.promoted else 'no'}")


def _inspect_facts(state, agents, projects, fact_id, history, as_json) -> None:
    from ..semantic import SemanticStore

    store = SemanticStore(state.config.memory_root)
    if fact_id:
        chains = [store.history(fact_id)]
        if not chains[0]:
            raise MemtierError(f"no fact with id {fact_id!r} in {state.config.memory_root}")
    else:
        names = [p for p in store.projects() if not projects or p in projects]
        chains = [c for p in names for c in store.chains(p)]
        chains = [c for c in chains if not agents or c[-1].get("origin_agent") in agents]
        if not history:
            chains = [c[-1:] for c in chains]
    if as_json:
        for chain in chains:
            obj = dict(chain[-1])
            if history or fact_id:
                obj["history"] = chain[:-1]
            sys.stdout.write(orjson.dumps(obj).decode() + "\n")
        return
    for chain in chains:
        for depth, f in enumerate(chain):
            mark = "  " * depth + ("-> " if depth else "")
            state_note = "current" if depth == len(chain) - 1 else "superseded"
            click.echo(f"{mark}{f['id']}  {str(f.get('effective_time') or f.get('timestamp', ''))[:10]}  "
                       f"[{f.get('project') or '-'}/{f.get('origin_agent', '')}] {f.get('attribute', '')}="
                       f"{_short(str(f.get('value', '')), 40)}  {_short(f.get('content', ''), 80)}"
                       f"{'' if len(chain) == 1 else f'  ({state_note})'}")
    click.echo(f"{len(chains)} facts", err=True)


def _inspect_costs(state, sessions, as_json) -> None:
    from ..costs import cost_summary

    rows = [r for r in cost_summary(state.config.memory_root) if not sessions or r["session_id"] in sessions]
    if as_json:
        for r in rows:
            sys.stdout.write(orjson.dumps(r).decode() + "\n")
        return
    click.echo(f"{'session':<24} {'agents':<16} {'store tok':>9} {'calls':>5} {'retrieve tok':>12} {'recalls':>7} {'facts':>5}")
    for r in rows:
        click.echo(f"{_short(r['session_id'] or '-', 24):<24} {_short(','.join(r['agents']), 16):<16} "
                   f"{r['store_tokens']:>9} {r['model_calls']:>5} {r['retrieve_tokens']:>12} {r['recalls']:>7} {r['facts']:>5}")
    click.echo(f"total: store {sum(r['store_tokens'] for r in rows)} tokens, "
               f"retrieve {sum(r['retrieve_tokens'] for r in rows)} tokens", err=True)
