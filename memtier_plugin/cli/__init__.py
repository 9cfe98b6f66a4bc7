"""The `memtier` command: one click group, one module per command family."""

from __future__ import annotations

import importlib
import logging
import sys

import click

from ..config import Config, load_config
from ..errors import MemtierError

# (module, attribute) of every subcommand, registered on first use of the group.
COMMANDS = [
    ("ledger_cmds", "add"),
    ("ledger_cmds", "inspect"),
    ("config_cmds", "config"),
    ("config_cmds", "plugins"),
    ("demo_cmd", "demo"),
    ("search_cmd", "search"),
    ("bench_cmd", "bench"),
    ("eval_cmd", "eval_"),
    ("train_cmd", "train"),
    ("daemon_cmd", "daemon"),
    ("model_cmd", "model"),
    ("serve_cmd", "serve"),
    ("mcp_cmd", "mcp"),
]


class State:
    """Global options, and the config loaded once from them."""

    def __init__(self, workspace: str | None, config_path: str | None, preset: str | None):
        self.workspace = workspace
        self.config_path = config_path
        self.preset = preset
        self._config: Config | None = None

    def flags(self) -> dict:
        return {"paths.workspace": self.workspace, "preset": self.preset}

    @property
    def config(self) -> Config:
        if self._config is None:
            self._config = load_config(self.config_path, flags=self.flags())
        return self._config


class MemtierGroup(click.Group):
    """Turns domain errors into one line and a non-zero exit, never a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except MemtierError as exc:
            click.echo(f"memtier: error: {exc}", err=True)
            ctx.exit(2)
        except BrokenPipeError:
            sys.stderr.close()
            ctx.exit(0)


@click.group(cls=MemtierGroup)
@click.version_option(package_name="memtier-plugin")
@click.option("--workspace", "-w", envvar="MEMTIER_WORKSPACE", type=click.Path(file_okay=False),
              help="Agent workspace (default ~/.openclaw/workspace; env MEMTIER_WORKSPACE).")
@click.option("--config", "config_path", envvar="MEMTIER_CONFIG", type=click.Path(dir_okay=False),
              help="YAML config file (default <workspace>/memtier.yaml; env MEMTIER_CONFIG).")
@click.option("--preset", type=click.Choice(["paper", "recommended", "hybrid"]), default=None,
              help="Named preset: paper (k 4, 300 tokens), recommended (k 2, 600 tokens), "
                   "hybrid (MiniLM φsem 0.6 + soft scoping; needs the embed extra).")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
@click.pass_context
def cli(ctx, workspace, config_path, preset, verbose):
    """memtier: tiered memory for long-running agents."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="memtier: %(levelname)s: %(message)s", stream=sys.stderr)
    ctx.obj = State(workspace, config_path, preset)


def _register() -> None:
    for module, attr in COMMANDS:
        try:
            mod = importlib.import_module(f"{__name__}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.startswith(__name__):
                continue  # command family not present in this build
            raise
        cli.add_command(getattr(mod, attr))


_register()
