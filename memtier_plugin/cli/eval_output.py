"""What every `memtier eval` command (and `memtier train`'s collectors) shares: the progress line on stderr,
the --json / --json-out options and the report's output."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click


class Progress:
    """A progress line on stderr: redrawn in place on a terminal, every ~10% otherwise."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self.started: dict[str, float] = {}
        self.last: tuple[str, int] = ("", -1)

    def __call__(self, label: str, done: int, total: int) -> None:
        if self.quiet:
            return
        if label != self.last[0] and label not in self.started:
            self.started[label] = time.perf_counter()
        elapsed = time.perf_counter() - self.started[label]
        eta = elapsed / done * (total - done) if done else 0.0
        width = 24
        fill = int(width * done / total) if total else width
        line = f"{label:14s} [{'#' * fill}{'.' * (width - fill)}] {done}/{total}  {elapsed:5.0f}s  eta {eta:4.0f}s"
        if self.tty:
            click.echo("\r" + line, err=True, nl=done >= total)
        else:
            step = max(total // 10, 1)
            if done == total or done % step == 0 or label != self.last[0]:
                click.echo(line, err=True)
        self.last = (label, done)

    def bound(self, label: str):
        self.started[label] = time.perf_counter()
        return lambda done, total: self(label, done, total)


def emit(doc: dict, as_json: bool, json_out: str | None, table) -> None:
    text = json.dumps(doc, indent=1)
    if json_out:
        Path(json_out).write_text(text + "\n")
    click.echo(text if as_json else table(doc))


def json_flags(keys: str):
    """--json (one JSON object with ``keys``) and --json-out FILE."""
    def deco(f):
        f = click.option("--json-out", type=click.Path(dir_okay=False), default=None,
                         help="Also write the JSON object to this file.")(f)
        return click.option("--json", "as_json", is_flag=True, help=f"Print one JSON object {keys}.")(f)
    return deco


def topic_list(value: str | None) -> list[str] | None:
    """A comma-separated --topics value as a list (None: every topic)."""
    names = [t.strip() for t in (value or "").split(",") if t.strip()]
    return names or None
