"""Running the sidecar for one workspace (``memtier serve``): the workspace lock, the token, the endpoint file
clients find it by, the idle exit, a clean shutdown. The HTTP server is :mod:`.http`'s, the answers
:mod:`.sidecar`'s."""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import logging
import os
import threading
import time
from pathlib import Path
from typing import Callable

import orjson

from .. import __version__
from ..errors import MemtierError
from ..events import HookContext
from .http import LOOPBACK, MAX_BODY, MAX_CONNECTIONS, REQUEST_TIMEOUT_S, SidecarServer
from .sidecar import Sidecar, build_host
from .sidecar_token import ensure_token, private_dir, sidecar_dir, write_private
from .stopping import StopOnSignals

log = logging.getLogger(__name__)


@dataclasses.dataclass
class Endpoint:
    """Where a running sidecar listens: written to ``.sidecar/endpoint.json`` for clients to find."""

    url: str
    token_file: str
    pid: int
    workspace: str
    version: str = __version__


def endpoint_path(memory_root: Path | str) -> Path:
    return sidecar_dir(memory_root) / "endpoint.json"


def lock_workspace(memory_root: Path | str) -> int:
    """Hold ``.sidecar/lock`` for this process's life: one sidecar per workspace (released even on SIGKILL)."""
    d = private_dir(sidecar_dir(memory_root))
    fd = os.open(d / "lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0),
                 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            where = ""
            try:
                where = " at " + orjson.loads(endpoint_path(memory_root).read_bytes())["url"]
            except (OSError, ValueError, KeyError, TypeError):
                pass
            raise MemtierError(f"a sidecar already serves {Path(memory_root).parent}{where} "
                               f"(lock {d / 'lock'})") from None
        raise
    return fd


def _idle_watch(server: SidecarServer, stop: threading.Event, idle_s: float) -> None:
    """Set ``stop`` once no request has come for ``idle_s`` seconds and none is in flight."""
    while not stop.wait(min(1.0, idle_s / 4)):
        if time.monotonic() - server.last_request > idle_s and not server.busy():
            log.info("sidecar: idle for %.0f s; exiting", idle_s)
            stop.set()


def serve(workspace: Path | str, memory_root: Path | str, *, host: str = "127.0.0.1", port: int = 0,
          token_file: Path | str | None = None, max_body: int = MAX_BODY, plugin_dir: str | Path | None = None,
          idle_exit_s: float = 0, on_ready: Callable[[Endpoint], None] | None = None,
          stop: threading.Event | None = None, max_connections: int = MAX_CONNECTIONS,
          request_timeout: float = REQUEST_TIMEOUT_S) -> int:
    """Run the sidecar until SIGTERM/SIGINT, ``stop``, or ``idle_exit_s`` without requests (0: never).

    Returns the exit status (0 after a clean shutdown). A runtime that starts
    the sidecar for short-lived processes (``openclaw agent --local``) leaves it
    running for the next one and relies on the idle exit.

    An ``endpoint.json`` found once the lock is held was left by a sidecar that did not exit
    cleanly (SIGKILL, OOM): its token is rotated, since whatever listened on that port since
    may have been sent it.

    Startup order: lock the workspace, token, warm the memory (index opened once,
    not by the first request), listen, publish ``endpoint.json``, then ``on_ready``.
    Shutdown: stop accepting, drain requests in flight, save the index, remove
    ``endpoint.json``.
    """
    if host not in LOOPBACK:
        raise MemtierError(f"--host {host}: the sidecar listens on loopback only (127.0.0.1 or ::1)")
    if max_body < 1024:
        raise MemtierError(f"--max-body {max_body}: expected at least 1024 bytes")
    if max_connections < 2:
        raise MemtierError(f"--max-connections {max_connections}: expected at least 2")
    if not request_timeout > 0:
        raise MemtierError(f"--request-timeout {request_timeout}: expected a positive number of seconds")
    workspace, memory_root = Path(workspace), Path(memory_root)
    lock_fd = lock_workspace(memory_root)
    try:
        token_path = Path(token_file) if token_file else sidecar_dir(memory_root) / "token"
        unclean = endpoint_path(memory_root).exists() or endpoint_path(memory_root).is_symlink()
        if unclean:
            log.warning("sidecar: the last sidecar of %s did not exit cleanly; rotating its token", workspace)
            endpoint_path(memory_root).unlink(missing_ok=True)
        token = ensure_token(token_path, rotate=unclean)
        hooks = build_host(plugin_dir)
        from ..memory import memory_for

        mem = memory_for(HookContext(agent_id="main", workspace_dir=str(workspace)))
        mem.retriever  # noqa: B018 - open the index now, not inside the first request's timeout
        mem.warm_up_in_background()  # vectors and models beside the server (the first request need not wait)
        server = SidecarServer(("::1" if host == "::1" else "127.0.0.1", port), Sidecar(hooks, workspace),
                               token, max_body=max_body, max_connections=max_connections,
                               request_timeout=request_timeout)
        stop = stop or threading.Event()
        with StopOnSignals(stop) as signals:
            loop = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                    name="memtier-sidecar", daemon=True)
            loop.start()
            if idle_exit_s > 0:
                threading.Thread(target=_idle_watch, args=(server, stop, idle_exit_s), name="memtier-sidecar-idle",
                                 daemon=True).start()
            endpoint = Endpoint(server.url, str(token_path.resolve()), os.getpid(), str(workspace))
            ep_file = endpoint_path(memory_root)
            write_private(ep_file, orjson.dumps(dataclasses.asdict(endpoint), option=orjson.OPT_INDENT_2))
            try:
                if on_ready:
                    on_ready(endpoint)
                signals.wait()
            finally:
                log.info("sidecar: shutting down")
                server.shutdown()  # no new connections are served from here on
                server.drain()
                server.server_close()
                try:
                    if orjson.loads(ep_file.read_bytes()).get("pid") == os.getpid():
                        ep_file.unlink()
                except (OSError, ValueError):
                    pass
                try:
                    mem.close()  # warm-up, Foresight and background embedding done: no model runs while we exit
                    mem.retriever.save()
                except Exception:  # the index is derived; the next start rebuilds what is missing
                    log.warning("sidecar: could not save the index on shutdown", exc_info=True)
        return 0
    finally:
        os.close(lock_fd)
