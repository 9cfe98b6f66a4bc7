"""`memtier purge`: remove the text of every forgotten item from every file under memory/ (docs/purge.md)."""

from __future__ import annotations

import click
import orjson


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.pass_obj
def purge(state, as_json):
    """Rewrite every file under <memory>/ without the text of the forgotten items.

    Takes every id in <memory>/forgotten.jsonl (written by memtier forget) not
    purged yet: ledgers, facts, the Global layer, skills, working state,
    traces, costs and the daemon's journal are rewritten without it, each file
    atomically; the index and the vector cache are deleted and the index
    rebuilt. Crash-safe: a kill at any point loses no other record, and the
    next purge finishes the job. Reports ids only, never content.
    """
    from ..purging import purge as run

    out = run(state.config)
    if as_json:
        click.echo(orjson.dumps(out).decode())
        return
    report(out)


def report(out: dict) -> None:
    """The plain-text report of one purge (ids only; ``memtier forget --purge`` prints it too)."""
    if not out["purged"]:
        click.echo("memtier purge: nothing to purge (no item forgotten since the last purge)")
        return
    click.echo(f"memtier purge: {len(out['purged'])} forgotten items purged, {out['files_rewritten']} files "
               f"rewritten, index {'rebuilt' if out['index_rebuilt'] else 'deleted (rebuilt when next opened)'}")
    for item in out["purged"]:
        click.echo(f"  {item}")
    if out["left_in"]:
        click.echo(f"still holding a forgotten text (your own files, or entries that quote it): "
                   f"{', '.join(out['left_in'])}")
    if out["still_quoted"]:
        click.echo(f"other entries still quote a forgotten text (forget them too): {', '.join(out['still_quoted'])}")
