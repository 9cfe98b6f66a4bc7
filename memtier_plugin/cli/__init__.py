"""The `memtier` command: one click group, one module per command family.

Command modules are imported when their command runs, not to list them:
``memtier --help`` reads each command's help from its module's source, so it
imports no numpy, no model code and no index.

Exit status: 0 success; 2 a user mistake (a bad argument, config or input):
one line on stderr naming what and where; 1 the environment refused (disk
full, read-only or unwritable workspace: an OSError), also one line. Never a
traceback.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import logging
import sys
from pathlib import Path

import click

from ..config import Config, load_config
from ..errors import MemtierError
from ..vocabulary import PRESET_NAMES
from .terminal import printable

# Every subcommand: name -> (module in this package, attribute), imported on first use.
COMMANDS = {
    "add": ("ledger_cmds", "add"),
    "inspect": ("ledger_cmds", "inspect"),
    "config": ("config_cmds", "config"),
    "plugins": ("config_cmds", "plugins"),
    "demo": ("demo_cmd", "demo"),
    "search": ("search_cmd", "search"),
    "bench": ("bench_cmd", "bench"),
    "eval": ("eval_cmd", "eval_"),
    "train": ("train_cmd", "train"),
    "daemon": ("daemon_cmd", "daemon"),
    "model": ("model_cmd", "model"),
    "serve": ("serve_cmd", "serve"),
    "mcp": ("mcp_cmd", "mcp"),
    "ui": ("ui_cmd", "ui"),
    "forget": ("forget_cmd", "forget"),
    "correct": ("forget_cmd", "correct"),
    "purge": ("purge_cmd", "purge"),
    "shared": ("shared_cmd", "shared"),
}


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


def os_error_line(exc: OSError) -> str:
    """One line for an OSError: the file (when known) and the system's reason."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{exc.filename}: {reason}" if exc.filename else reason


def _docstring(module: str, attr: str) -> str | None:
    """The docstring of command function ``attr`` read from its module's source (None: not found)."""
    spec = importlib.util.find_spec(f"{__name__}.{module}")
    if spec is None or not spec.origin:
        return None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    return next((ast.get_docstring(node) for node in tree.body
                 if isinstance(node, ast.FunctionDef) and node.name == attr), None)


class MemtierGroup(click.Group):
    """Loads commands lazily; turns domain and OS errors into one line and an exit status, never a traceback."""

    _listing = False

    def list_commands(self, ctx):
        return sorted(set(self.commands) | set(COMMANDS))

    def get_command(self, ctx, cmd_name):
        if cmd_name in self.commands or cmd_name not in COMMANDS:
            return self.commands.get(cmd_name)
        module, attr = COMMANDS[cmd_name]
        if self._listing:  # `memtier --help`: the help text only, without importing the module
            doc = _docstring(module, attr)
            if doc is not None:
                return click.Command(cmd_name, help=doc)
        mod = importlib.import_module(f"{__name__}.{module}")
        self.add_command(getattr(mod, attr), cmd_name)
        return self.commands[cmd_name]

    def format_commands(self, ctx, formatter):
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except MemtierError as exc:
            click.echo(f"memtier: error: {printable(exc)}", err=True)
            ctx.exit(2)
        except BrokenPipeError:
            sys.stderr.close()
            ctx.exit(0)
        except OSError as exc:  # disk full, read-only or unwritable workspace: the environment, not the user
            click.echo(f"memtier: error: {printable(os_error_line(exc))}", err=True)
            ctx.exit(1)


@click.group(cls=MemtierGroup)
@click.version_option(package_name="memtier-plugin")
@click.option("--workspace", "-w", envvar="MEMTIER_WORKSPACE", type=click.Path(file_okay=False),
              help="Agent workspace (default ~/.openclaw/workspace; env MEMTIER_WORKSPACE).")
@click.option("--config", "config_path", envvar="MEMTIER_CONFIG", type=click.Path(dir_okay=False),
              help="YAML config file (default <workspace>/memtier.yaml; env MEMTIER_CONFIG).")
@click.option("--preset", type=click.Choice(PRESET_NAMES), default=None,
              help="Named preset: paper (k 4, 300 tokens), recommended (k 2, 600 tokens), "
                   "hybrid (bge-small φsem 1.5, soft scoping, cross-encoder re-ranking; needs the embed extra "
                   "and memtier model setup --embedder --reranker), hybrid-fast (hybrid with Foresight on and "
                   "re-ranking within 20 ms a prompt, 800 ms a background preparation; k 5, each episode with "
                   "its exchange's other half, 460 tokens).")
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
@click.pass_context
def cli(ctx, workspace, config_path, preset, verbose):
    """memtier: tiered memory for long-running agents."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="memtier: %(levelname)s: %(message)s", stream=sys.stderr)
    ctx.obj = State(workspace, config_path, preset)
