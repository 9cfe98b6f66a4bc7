"""`memtier serve`: the workspace's hook contract over loopback HTTP (the sidecar of docs/integrations.md)."""

from __future__ import annotations

import sys

import click
import orjson


def export_config(state):
    """The command's config, given to every hook of its workspace in this process.

    The hooks find their memory by workspace (``memory.memory_for``); the command
    registers the Memory of the config its flags name (``--workspace``,
    ``--config``, ``--preset``) with ``Memory.from_config``, so the hooks see what
    this command was given. A bad config stops here, with one line.
    """
    from ..memory import Memory

    cfg = state.config
    if cfg.shared.backend == "postgres":  # a missing DSN or driver stops startup naming the key, not a first write
        try:
            from ..shared.engine import dsn_from_env
        except ImportError:
            from ..errors import ConfigError

            raise ConfigError("shared.backend: postgres needs psycopg: pip install 'memtier-plugin[shared]'") from None
        dsn_from_env(cfg.shared.dsn_env)
    Memory.from_config(cfg)
    return cfg


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Loopback address to listen on (127.0.0.1 or ::1).")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port (0: any free port; clients find it in <memory>/.sidecar/endpoint.json).")
@click.option("--token-file", type=click.Path(dir_okay=False),
              help="Where the token lives (default <memory>/.sidecar/token, mode 0600).")
@click.option("--max-body", type=int, default=None, help="Largest request body in bytes (default 1 MiB).")
@click.option("--plugin-dir", type=click.Path(file_okay=False, exists=True),
              help="Also load the hook plugins of this directory (memtier itself is always loaded).")
@click.option("--idle-exit", type=click.FloatRange(min=0), default=0, show_default=True,
              help="Exit after this many seconds without requests (0: never).")
@click.option("--max-connections", type=click.IntRange(min=2), default=None,
              help="Open connections at most (default 128); past it the oldest one without the token is closed.")
@click.option("--request-timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds a request may take to arrive whole, from its first byte (default 10).")
@click.option("--json", "as_json", is_flag=True, help="Print the ready line as one JSON object.")
@click.pass_obj
def serve(state, host, port, token_file, max_body, plugin_dir, idle_exit, max_connections, request_timeout,
          as_json):
    """Serve this workspace's memory to a runtime over loopback HTTP until SIGTERM or Ctrl-C.

    Every request needs the token from the token file. Once listening, one line
    on stdout says where (with --json: url, token_file, pid, workspace).
    """
    from ..bridges.http import MAX_BODY, MAX_CONNECTIONS, REQUEST_TIMEOUT_S
    from ..bridges.serving import serve as run

    cfg = export_config(state)

    def ready(ep) -> None:
        if as_json:
            click.echo(orjson.dumps({"url": ep.url, "token_file": ep.token_file, "pid": ep.pid,
                                     "workspace": ep.workspace, "version": ep.version}).decode())
        else:
            click.echo(f"memtier serve: {ep.url} for {ep.workspace} (token in {ep.token_file}; pid {ep.pid})")
        sys.stdout.flush()

    code = run(cfg.workspace, cfg.memory_root, host=host, port=port, token_file=token_file,
               max_body=MAX_BODY if max_body is None else max_body, plugin_dir=plugin_dir,
               idle_exit_s=idle_exit, on_ready=ready,
               max_connections=MAX_CONNECTIONS if max_connections is None else max_connections,
               request_timeout=REQUEST_TIMEOUT_S if request_timeout is None else request_timeout)
    sys.exit(code)
