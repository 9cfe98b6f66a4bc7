"""`memtier add` and `memtier inspect`: write to and read the episodic ledgers.

Input is checked before anything is written: bytes that are not UTF-8, a
field of the wrong type, a timestamp that is not a time are one line on
stderr (exit 2) naming the input line; a refused write (disk full, read-only
workspace) is one line naming the file (exit 1). Stored text is printed through
:mod:`.terminal`, so no escape sequence in it reaches the terminal.
"""

from __future__ import annotations

import math
import shutil
import sys
from datetime import datetime, timezone

import click
import orjson

from ..vocabulary import ROLES
from ..errors import MemtierError
from ..store.episodic import Ledger, parse_iso
from .terminal import json_line, printable

STDIN_FIELDS = ("agent_id", "session_id", "project", "role", "timestamp")


def _ledger(state) -> Ledger:
    return Ledger(state.config.memory_root)


def _utf8(value: str) -> str:
    """``value`` when it is valid text; argv bytes that are not UTF-8 arrive as lone surrogates."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MemtierError(f"not UTF-8 text (byte 0x{ord(value[exc.start]) & 0xFF:02x} "
                           f"at character {exc.start + 1})") from None
    return value


def _timestamp(value) -> float | None:
    """An ISO-8601 string or epoch seconds within the calendar; None means now."""
    if value is None:
        return None
    try:
        if isinstance(value, str):
            ts = parse_iso(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            ts = float(value)
        else:
            raise ValueError(value)
        datetime.fromtimestamp(ts, tz=timezone.utc)  # years 1..9999, as the ledger writes them
    except (ValueError, OverflowError, OSError):
        raise MemtierError(f"timestamp: expected an ISO-8601 time such as 2026-10-05T14:00:00Z, "
                           f"got {printable(repr(value))[:60]}") from None
    return ts


def _fields(obj: dict) -> dict:
    """The optional fields of one stdin record, each of the right type."""
    out = {k: obj[k] for k in STDIN_FIELDS if k in obj}
    for key in ("agent_id", "session_id", "project"):
        if key in out and not isinstance(out[key], str):
            raise MemtierError(f"{key}: expected a string, got {printable(repr(out[key]))[:60]}")
    if "role" in out and out["role"] not in ROLES:
        raise MemtierError(f"role: expected one of {', '.join(ROLES)}, got {printable(repr(out['role']))[:60]}")
    return out


def _stdin_record(line: str) -> dict:
    """One stdin line as the fields of an entry: a JSON object, or plain text as its content."""
    if not line.startswith("{"):
        return {"content": line}
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise MemtierError(f"not valid JSON: {exc}") from None
    if not isinstance(obj.get("content"), str) or not obj["content"].strip():
        raise MemtierError("missing 'content' (a non-empty string)")
    return {"content": obj["content"], **_fields(obj)}


@click.command()
@click.argument("text", required=False)
@click.option("--agent", "-a", default="main", show_default=True, help="Agent id (ledger owner).")
@click.option("--session", "-s", default="manual", show_default=True, help="Session id.")
@click.option("--project", "-p", default="", help="Project the entry belongs to.")
@click.option("--role", default="user", show_default=True, type=click.Choice(ROLES))
@click.option("--stdin", "from_stdin", is_flag=True,
              help="Read entries from standard input (UTF-8): one JSON object (content, and optionally "
                   "agent_id, session_id, project, role, timestamp) or one plain-text line each. A bad line "
                   "stops the input there; the entries before it stay written.")
@click.option("--json", "as_json", is_flag=True, help="Print each written record as JSON.")
@click.pass_obj
def add(state, text, agent, session, project, role, from_stdin, as_json):
    """Append entries to an agent's episodic ledger; prints each id once it is on disk."""
    if not text and not from_stdin:
        raise click.UsageError("give TEXT or --stdin")
    for where, value in (("TEXT", text or ""), ("--agent", agent), ("--session", session), ("--project", project)):
        try:
            _utf8(value)
        except MemtierError as exc:
            raise MemtierError(f"{where}: {exc}") from None
    ledger = _ledger(state)
    written = 0

    def write(where: str, get_fields) -> None:
        """Append one entry; a mistake in it is one line naming ``where`` and what was already written."""
        nonlocal written
        done = (f" (the {written} {'entry' if written == 1 else 'entries'} before it "
                f"{'was' if written == 1 else 'were'} written)" if written else "")
        try:
            f = {"agent_id": agent, "session_id": session, "project": project, "role": role, **get_fields()}
            content = f["content"]
            if f["role"] == "system" and not content.startswith("[system]"):
                content = "[system] " + content
            rec = ledger.add(agent_id=f["agent_id"], session_id=f["session_id"], project=f["project"],
                             role=f["role"], content=content, timestamp=_timestamp(f.get("timestamp")))
        except MemtierError as exc:
            raise MemtierError(f"{where}: {exc}{done}") from None
        except OSError as exc:  # the ledger's file or folder could not be written: exit 1, one line
            raise OSError(exc.errno, f"{exc.strerror or exc}{done}", exc.filename or str(ledger.episodic)) from exc
        written += 1
        click.echo(json_line(rec) if as_json else rec["id"])

    if text:
        write("TEXT", lambda: {"content": text})
    if from_stdin:
        for lineno, raw in enumerate(sys.stdin.buffer, 1):
            line = raw.strip()
            if line:
                write(f"stdin:{lineno}", lambda: _stdin_record(_utf8_bytes(line)))


def _utf8_bytes(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MemtierError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at byte {exc.start + 1})") from None


def _short(text, width: int) -> str:
    """One line of at most ``width`` characters, control characters shown as escapes."""
    text = printable(" ".join(str(text).split()))
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


@click.command()
@click.argument("layer", required=False, type=click.Choice(["topics", "workspace", "hooks"]))
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
def inspect(state, layer, agent, session, project, dates, entry_id, history, role, limit, show_facts, costs, as_json):
    """Show the folded current state of the episodic ledgers (or of a standing layer).

    LAYER: ``topics`` shows the Global layer, the topic tree with the user's
    preferences, constraints and rules under each topic (--history: retired
    ones too); ``workspace`` shows each project's current skills (one per kind
    of task, with its count of successes; --history: the revisions they
    superseded too) and working state (--project filters); ``hooks`` lists every hook: the hand-written files'
    and those derived from memory when it was written (with their node, whether it stands, whether the hook
    holds a call; --history: those of retired nodes too). Unreadable lines (corrupt or torn) are skipped and
    named on stderr by file and line; everything else is shown.
    """
    if layer:
        from .layers_cmd import inspect_hooks, inspect_topics, inspect_workspace

        if layer == "hooks":
            return inspect_hooks(state, as_json, history)
        return inspect_topics(state, as_json, history) if layer == "topics" else \
            inspect_workspace(state, project, as_json, history)
    if show_facts:
        return _inspect_facts(state, agent, project, entry_id, history, as_json)
    if costs:
        return _inspect_costs(state, session, as_json)
    result = _ledger(state).read(agent or None)
    for problem in result.problems:
        click.echo(f"memtier: warning: skipped {printable(problem)}", err=True)
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
            out.write(json_line(obj) + "\n")
        return
    if history and entries:
        _print_history(entries[0])
        return
    width = shutil.get_terminal_size((120, 24)).columns
    head = f"{'id':<24} {'time (UTC)':<16} {'agent':<10} {'session':<18} {'project':<9} {'role':<9} {'cw':>6} {'prom':<4} content"
    click.echo(head)
    fixed = len(head) - len("content")
    for e in entries:
        click.echo(f"{_short(e.id, 24):<24} {_short(e.timestamp[:16].replace('T', ' '), 16):<16} {_short(e.agent_id, 10):<10} "
                   f"{_short(e.session_id, 18):<18} {_short(e.project, 9):<9} {_short(e.role, 9):<9} "
                   f"{e.cognitive_weight:>+6.2f} {'yes' if e.promoted else '':<4} {_short(e.content, max(20, width - fixed))}")
    click.echo(f"{len(entries)} entries" + (f", {len(result.problems)} unreadable lines skipped" if result.problems else ""),
               err=True)


def _print_history(e) -> None:
    p = printable
    click.echo(f"{p(e.id)}  {p(e.timestamp)}  agent={p(e.agent_id)} session={p(e.session_id)} "
               f"project={p(e.project)} role={p(e.role)}")
    click.echo(f"  content: {p(e.content)}")
    click.echo(f"  written: {p(e.path)}:{e.line}")
    from ..store.records import fold_cw

    cw = 0.0
    for rec in e.history:
        kind = rec.get("kind")
        if kind == "cw_update":
            cw = fold_cw(cw, rec)  # history holds only records that passed records.update_problem
            click.echo(p(f"  {rec.get('timestamp', '')}  cw {float(rec['delta']):+.3f} -> {cw:+.3f}  "
                         f"run={rec.get('run_id')} call={rec.get('tool_call_id')} overlap={rec.get('overlap')} "
                         f"({rec.get('reason', '')})"))
        elif kind == "promoted":
            click.echo(p(f"  {rec.get('timestamp', '')}  promoted -> facts {', '.join(map(str, rec.get('fact_ids') or []))}"))
        else:
            click.echo(p(f"  {rec.get('timestamp', '')}  {kind}"))
    click.echo(f"  now: cw={e.cognitive_weight:+.3f} promoted={'yes' if e.promoted else 'no'}")


def _inspect_facts(state, agents, projects, fact_id, history, as_json) -> None:
    from ..store.semantic import SemanticStore

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
            sys.stdout.write(json_line(obj) + "\n")
        return
    for chain in chains:
        for depth, f in enumerate(chain):
            mark = "  " * depth + ("-> " if depth else "")
            state_note = "current" if depth == len(chain) - 1 else "superseded"
            click.echo(f"{mark}{printable(f['id'])}  {_short(str(f.get('effective_time') or f.get('timestamp', ''))[:10], 10)}  "
                       f"[{_short(f.get('project') or '-', 40)}/{_short(f.get('origin_agent', ''), 40)}] "
                       f"{_short(f.get('attribute', ''), 40)}="
                       f"{_short(str(f.get('value', '')), 40)}  {_short(f.get('content', ''), 80)}"
                       f"{'' if len(chain) == 1 else f'  ({state_note})'}")
    click.echo(f"{len(chains)} facts", err=True)


def _inspect_costs(state, sessions, as_json) -> None:
    from ..store.costs import cost_summary

    rows = [r for r in cost_summary(state.config.memory_root) if not sessions or r["session_id"] in sessions]
    if as_json:
        for r in rows:
            sys.stdout.write(json_line(r) + "\n")
        return
    click.echo(f"{'session':<24} {'agents':<16} {'store tok':>9} {'calls':>5} {'retrieve tok':>12} {'recalls':>7} {'facts':>5}")
    for r in rows:
        click.echo(f"{_short(r['session_id'] or '-', 24):<24} {_short(','.join(r['agents']), 16):<16} "
                   f"{r['store_tokens']:>9} {r['model_calls']:>5} {r['retrieve_tokens']:>12} {r['recalls']:>7} {r['facts']:>5}")
    click.echo(f"total: store {sum(r['store_tokens'] for r in rows)} tokens, "
               f"retrieve {sum(r['retrieve_tokens'] for r in rows)} tokens", err=True)
