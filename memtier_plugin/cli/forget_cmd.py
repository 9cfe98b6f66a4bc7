"""`memtier forget` and `memtier correct`: the user's own hands on what the agent remembers (docs/forget.md).

Thin: option parsing and printing over :mod:`memtier_plugin.forgetting`. Stored
text (the previews of what a filter would forget) is printed through
:mod:`.terminal`.
"""

from __future__ import annotations

import sys

import click

from ..errors import MemtierError
from .terminal import json_line, printable

SHOWN = 20  # matches listed before the question; the rest are counted


def _memory(state):
    from ..memory import Memory

    return Memory(state.config)


@click.command()
@click.argument("ids", nargs=-1)
@click.option("--query", "-q", default=None, help="Forget what holds these words (shows the matches and asks).")
@click.option("--session", default=None, help="Forget what session SESSION said and what was learned from it.")
@click.option("--agent", default=None, help="Forget what agent AGENT's runs wrote.")
@click.option("--project", default=None, help="Forget what belongs to project PROJECT.")
@click.option("--before", metavar="DATE", default=None, help="Forget what is older than DATE (YYYY-MM-DD or ISO-8601).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask (scripts); needed when stdin is not a terminal.")
@click.option("--purge", "then_purge", is_flag=True,
              help="Then remove the forgotten text from every file under memory/ (memtier purge; docs/purge.md).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.pass_obj
def forget(state, ids, query, session, agent, project, before, yes, then_purge, as_json):
    """Forget memory items by ID (or by --query/--session/--agent/--project/--before), and what was derived
    only from them; nothing forgotten is delivered again (docs/forget.md)."""
    from ..forgetting import forget as forget_ids, select

    filters = {"query": query, "session": session, "agent": agent, "project": project, "before": before}
    given = [k for k, v in filters.items() if v]
    if ids and given:
        raise MemtierError(f"forget: give ids or --{given[0]}, not both")
    mem = _memory(state)
    if not ids:
        matches = select(mem, **filters, limit=None)
        if not matches:
            click.echo(json_line(_empty()) if as_json else "nothing matches; nothing was forgotten")
            return
        if not yes:
            if not sys.stdin.isatty():
                raise MemtierError(f"forget: {len(matches)} item(s) match; refusing to forget them without --yes "
                                   "(stdin is not a terminal)")
            for m in matches[:SHOWN]:
                click.echo(printable(f"{m['id']}  {m['layer']:<8} {m['when'][:10]}  {m['text']}"))
            if len(matches) > SHOWN:
                click.echo(f"... and {len(matches) - SHOWN} more")
            if not click.confirm(f"Forget these {len(matches)} item(s)?", default=False):
                click.echo("nothing was forgotten")
                return
        ids = [m["id"] for m in matches]
    out = forget_ids(mem, list(ids), reason=given[0] if given else "user")
    if out["unknown"]:
        raise MemtierError(f"forget: no memory item has the id {printable(', '.join(out['unknown'][:5]))}; "
                           "nothing was forgotten")
    purged = None
    if then_purge:
        from ..purging import purge

        mem.close()  # its background threads end before the files are rewritten
        purged = purge(state.config)
    if as_json:
        click.echo(json_line({**out, "purge": purged} if then_purge else out))
        return
    for f in out["forgotten"]:
        click.echo(printable(f"forgot {f['id']} ({f['layer']})"))
    for d in out["derived"]:
        click.echo(printable(f"forgot {d['id']} ({d['layer']}, derived only from {d['because_of']})"))
    for i in out["already"]:
        click.echo(printable(f"{i} was forgotten already"))
    if purged is not None:
        from .purge_cmd import report

        report(purged)


def _empty() -> dict:
    return {"forgotten": [], "derived": [], "unknown": [], "already": []}


@click.command()
@click.argument("item_id", metavar="ID")
@click.argument("text")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.pass_obj
def correct(state, item_id, text, as_json):
    """Replace the value of a fact (sf-…) or standing item (gk-…) with TEXT, as if the user had said it; the
    old value stays as history and is never delivered as current (docs/forget.md)."""
    from ..forgetting import correct as correct_item

    out = correct_item(_memory(state), item_id, text)
    click.echo(json_line(out) if as_json else printable(f"corrected {out['old']} -> {out['new']} ({out['layer']})"))
