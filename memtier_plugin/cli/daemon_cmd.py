"""`memtier daemon`: the consolidation daemon in the foreground (see docs/consolidation.md)."""

from __future__ import annotations

import os
import sys

import click
import orjson


def _summary(report) -> str:
    parts = [f"{len(report.promoted)} entries promoted", f"{len(report.new_facts)} new facts"]
    if report.superseded:
        parts.append(f"{report.superseded} revisions")
    if report.duplicates:
        parts.append(f"{report.duplicates} duplicates")
    if report.resumed:
        parts.append(f"{report.resumed} resumed")
    if report.quarantined:
        parts.append(f"{len(report.quarantined)} quarantined (bad entries, left out; see the warnings)")
    if report.failed:
        parts.append(f"{report.failed} failed batch(es), redone next time")
    if report.fallbacks:
        parts.append(f"{report.fallbacks} by heuristics after a model failure")
    if report.store_tokens:
        parts.append(f"{report.store_tokens} store tokens")
    return ", ".join(parts)


def _print_facts(report) -> None:
    for fact in report.new_facts:
        note = f" (supersedes {fact['supersedes']})" if fact.get("supersedes") else ""
        click.echo(f"  {fact['id']} [{fact['project'] or '-'}/{fact['origin_agent']}] {fact['content']}{note}")


@click.command()
@click.option("--once", is_flag=True, help="Process what is pending, then exit.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the report as JSON (one object with --once; one line per batch otherwise).")
@click.pass_obj
def daemon(state, once, as_json):
    """Promote new episodic entries to project-shared semantic facts.

    Watches <memory>/episodic/ (watchdog), reads new lines from per-file
    checkpoints in <memory>/.daemon/, extracts facts (heuristics, or the model
    when consolidation.extractor is model and model.enabled), deduplicates,
    links revisions, and appends them to <memory>/semantic/. SIGTERM or
    SIGINT finishes the current batch, saves the checkpoint and exits 0.
    An entry that is not a valid record (a list for its project, say) is
    quarantined: reported once on stderr as file:line, left out, and counted.
    With --once the exit status is 1 when a batch failed.
    """
    from ..consolidation.daemon import Daemon

    cfg = state.config
    if not cfg.consolidation.enabled:
        click.echo("memtier daemon: consolidation.enabled is false; nothing to do", err=True)
        return

    def on_report(report):
        if once or not (report.promoted or report.errors or report.quarantined):
            return
        if as_json:
            click.echo(orjson.dumps(report.to_dict()).decode())
        else:
            click.echo(f"memtier daemon: {_summary(report)}")
            _print_facts(report)
        sys.stdout.flush()

    def on_ready():
        click.echo(f"memtier daemon: watching {cfg.memory_root / 'episodic'} (pid {os.getpid()})", err=True)
        sys.stderr.flush()

    d = Daemon(cfg, on_report=on_report, on_ready=on_ready)
    sync = None
    if cfg.shared.backend == "postgres" and not once:  # the facts it promotes reach the fleet (docs/shared.md)
        from ..shared.sync import start_sync

        sync = start_sync(cfg)
    try:
        report = d.run(once=once)
    finally:
        if sync is not None:
            sync.close()
    if once:
        if as_json:
            click.echo(orjson.dumps(report.to_dict()).decode())
        else:
            click.echo(f"memtier daemon: {_summary(report)}")
            _print_facts(report)
        if report.failed:
            last = next(e for e in reversed(report.errors) if e.startswith("batch failed"))
            click.echo(f"memtier daemon: {report.failed} failed batch(es), the last: {last}", err=True)
            sys.exit(1)
    else:
        click.echo("memtier daemon: stopped; checkpoint saved", err=True)
