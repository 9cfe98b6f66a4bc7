"""`memtier config validate|show` and `memtier plugins`."""

from __future__ import annotations

import click
import orjson
import yaml

from ..config import as_dict, load_config
from .terminal import printable


@click.group()
def config():
    """Check and show the effective configuration."""


@config.command()
@click.argument("path", required=False, type=click.Path(dir_okay=False))
@click.pass_obj
def validate(state, path):
    """Validate a config file (default: the one memtier would load). Exit 0 when valid."""
    cfg = load_config(path or state.config_path, flags=state.flags())
    click.echo(f"{printable(cfg.source)}: ok")


@config.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.pass_obj
def show(state, as_json):
    """Print the effective configuration after flag > env > file > default."""
    cfg = state.config
    data = as_dict(cfg)
    if as_json:
        click.echo(orjson.dumps({"source": cfg.source, **data}, option=orjson.OPT_INDENT_2).decode())
    else:
        click.echo(f"# source: {printable(cfg.source)}")
        click.echo(yaml.safe_dump(data, sort_keys=False).rstrip())


@click.command()
@click.option("--plugin-dir", type=click.Path(file_okay=False, exists=True), help="Also load this plugin directory.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def plugins(plugin_dir, as_json):
    """List loaded plugins (entry-point group 'memtier' and --plugin-dir) and their hooks."""
    from ..host import Host

    host = Host()
    host.load_entrypoints()
    if plugin_dir:
        host.load_plugin_dir(plugin_dir)
    rows = host.plugins()
    if as_json:
        click.echo(orjson.dumps([{"name": n, "hooks": h} for n, h in rows]).decode())
        return
    for name, hooks in rows:
        click.echo(f"{name}: {', '.join(hooks) or '(no hooks)'}")
