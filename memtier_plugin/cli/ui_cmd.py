"""`memtier ui`: a local web page over this workspace's memory (docs/ui.md)."""

from __future__ import annotations

import sys

import click
import orjson


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Loopback address to listen on (127.0.0.1 or ::1).")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port (0: any free port).")
@click.option("--json", "as_json", is_flag=True, help="Print the ready line as one JSON object: {\"url\"}.")
@click.pass_obj
def ui(state, host, port, as_json):
    """Serve a local web page to browse, search, forget and correct this workspace's memory until Ctrl-C.

    The URL it prints holds a token made for this run: only a page opened with it
    is answered, and only from this machine.
    """
    from ..bridges.ui import serve
    from ..memory import Memory

    mem = Memory.from_config(state.config)

    def ready(url: str) -> None:
        click.echo(orjson.dumps({"url": url}).decode() if as_json else f"memtier ui: open {url}")
        sys.stdout.flush()

    sys.exit(serve(mem, host=host, port=port, on_ready=ready))
