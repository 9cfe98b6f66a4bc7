"""The sidecar: one workspace's hook contract over loopback HTTP, for runtimes that are not Python.

``memtier serve`` runs it. A TypeScript OpenClaw plugin (``openclaw-plugin/``)
or any other runtime calls the same pluggy path as the reference host: every
request becomes one call on a :class:`~memtier_plugin.host.Host` with memtier
registered, so the answers (and the isolation rules of docs/hooks.md) are
identical to the in-process ones.

Protocol (JSON in, JSON out, UTF-8)::

    POST /v1/<hook>   {"ctx": {...}, "event": {...}}   hook = before_prompt_build | pre_tool |
                                                              post_tool | agent_end |
                                                              before_compaction | session_end
    POST /v1/<tool>   {"ctx": {...}, "params": {...}}  tool = memory_search | memory_get | memory_add
    GET  /health

``ctx`` and ``event`` carry the field names of :mod:`memtier_plugin.events`
(snake_case); unknown fields are ignored, so clients may send newer ones.
Every request needs ``Authorization: Bearer <token>``; the token lives in
``<memory root>/.sidecar/token`` (mode 0600, its folder 0700, never inside a
ledger) and is compared in constant time. The server listens on loopback only.

Answers: before_prompt_build ``{"prepend_context", "prepend_system_context"}``;
pre_tool ``{"block", "block_reason", "supplement", "params"}``; the other hooks
``{"ok": true}``; the tools their :mod:`memtier_plugin.tools` dict. A memory
failure inside a hook answers "no memory" (the host guard), except pre_tool,
which answers a supplement asking for review. Errors are one line,
``{"error": "..."}``, with status 400 (bad JSON, a field of the wrong type, a
path-like agent id), 401 (token), 404, 405, 411, 413 (body over ``max_body``)
or 500 (a tool failed).

The sidecar serves exactly one workspace: a ``workspace_dir`` in a request is
ignored (a path from a client never chooses where memory is written).
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import hmac
import logging
import os
import secrets
import signal
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable

import orjson

from .. import __version__
from ..errors import InvalidIdError, MemtierError
from ..events import (
    AgentEndEvent, CompactionEvent, HookContext, PromptEvent, SessionEndEvent, ToolCallEvent, ToolResultEvent,
)
from ..host import Host, review_decision
from ..store.files import atomic_write
from ..store.paths import checked_id

log = logging.getLogger(__name__)

#: The largest request body accepted (a 10 MB paste is bounded by the hooks anyway; this bounds reading it).
MAX_BODY = 1 << 20
#: An oversized body up to this size is read and dropped before the 413 (beyond it the connection is cut).
MAX_DRAIN = 64 << 20
#: Seconds a keep-alive connection may sit idle before the server closes it.
IDLE_TIMEOUT_S = 60.0
#: Seconds a clean shutdown waits for requests in flight.
DRAIN_S = 10.0
HOOK_EVENTS = {"before_prompt_build": PromptEvent, "pre_tool": ToolCallEvent, "post_tool": ToolResultEvent,
               "agent_end": AgentEndEvent, "before_compaction": CompactionEvent, "session_end": SessionEndEvent}
TOOLS = ("memory_search", "memory_get", "memory_add")
_CTX_FIELDS = ("agent_id", "session_key", "session_id", "run_id", "project")
_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


class RequestError(MemtierError):
    """A request the sidecar refuses: an HTTP status and one line saying what was wrong."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


# ---- files beside the workspace ------------------------------------------------
def sidecar_dir(memory_root: Path | str) -> Path:
    """``<memory root>/.sidecar``: token, endpoint and lock (mode 0700; never read as a ledger)."""
    return Path(memory_root) / ".sidecar"


def _private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, readable by the owner only (0600 from creation)."""
    atomic_write(path, data, mode=0o600)


def ensure_token(path: Path | str) -> str:
    """The sidecar token in ``path``: reused when it is a private (0600) file of ours, else a new one.

    A token file others could read is replaced, not trusted: it may have leaked.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # an existing folder keeps its mode
    try:
        st = path.lstat()
        text = path.read_text(encoding="ascii").strip() if path.is_file() and not path.is_symlink() else ""
        if (st.st_mode & 0o077) == 0 and st.st_uid == os.getuid() and len(text) >= 32 and text.isprintable():
            return text
        if text:
            log.warning("%s: token file readable by others or not ours; writing a new token", path)
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    token = secrets.token_urlsafe(32)
    _write_private(path, (token + "\n").encode())
    return token


def read_token(path: Path | str) -> str:
    """The token a client sends (first line of the file)."""
    return Path(path).read_text(encoding="ascii").strip()


# ---- requests → hook calls ----------------------------------------------------
def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


_NUMBER = (int, float)
#: The JSON type of every event field (by name; events only ever gain fields). ``None`` in a tuple: null allowed.
FIELD_TYPES: dict[str, tuple] = {
    "prompt": (str,), "messages": (list,), "timestamp": (*_NUMBER, None), "tool_name": (str,),
    "params": (dict, None), "tool_call_id": (str, None), "result": (object, None), "error": (str, None),
    "duration_ms": (*_NUMBER, None), "success": (bool,), "reason": (str, None),
}
_NAMES = {str: "a string", list: "an array", dict: "an object", bool: "true or false", int: "a number",
          float: "a number", object: "a value"}


def _checked(where: str, value: Any, types: tuple) -> Any:
    """``value`` when it is one of ``types`` (a bool is never a number), else RequestError naming ``where``."""
    if value is None:
        if None in types:
            return None
        raise RequestError(400, f"{where}: expected {_NAMES[types[0]]}, got null")
    concrete = tuple(t for t in types if t is not None)
    if isinstance(value, bool) and bool not in concrete and object not in concrete:
        ok = False
    else:
        ok = isinstance(value, concrete)
    if not ok:
        raise RequestError(400, f"{where}: expected {_NAMES[concrete[0]]}, got {_kind(value)}")
    return value


def parse_ctx(obj: Any, workspace: Path) -> HookContext:
    """The request's ``ctx`` as a HookContext of this sidecar's workspace; a path-like agent id is refused."""
    if not isinstance(obj, dict):
        raise RequestError(400, f"ctx: expected an object, got {_kind(obj)}")
    values = {name: _checked(f"ctx.{name}", obj.get(name), (str, None)) or "" for name in _CTX_FIELDS}
    try:
        checked_id(obj.get("agent_id"), "ctx.agent_id")
    except InvalidIdError as exc:
        raise RequestError(400, str(exc)) from None
    return HookContext(**values, workspace_dir=str(workspace))


def parse_event(hook: str, obj: Any):
    """The request's ``event`` as the hook's event dataclass (fields by name; unknown ones ignored)."""
    cls = HOOK_EVENTS[hook]
    obj = {} if obj is None else obj
    if not isinstance(obj, dict):
        raise RequestError(400, f"event: expected an object, got {_kind(obj)}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING  # type: ignore[misc]
        if obj.get(f.name) is None:
            if required:
                raise RequestError(400, f"event.{f.name}: required")
            continue
        kwargs[f.name] = _checked(f"event.{f.name}", obj[f.name], FIELD_TYPES.get(f.name, (object, None)))
    return cls(**kwargs)


class Sidecar:
    """The transport-free core: one request (endpoint name, parsed JSON body) in, its JSON answer out;
    a request it refuses raises :class:`RequestError` (status and one line)."""

    def __init__(self, host: Host, workspace: Path | str):
        self.host = host
        self.workspace = Path(workspace)

    def health(self) -> dict:
        return {"ok": True, "service": "memtier", "version": __version__, "workspace": str(self.workspace),
                "pid": os.getpid()}

    def call(self, name: str, body: Any) -> dict:
        """Answer ``POST /v1/<name>`` with ``body`` (already parsed JSON)."""
        if name not in HOOK_EVENTS and name not in TOOLS:
            raise RequestError(404, f"unknown endpoint /v1/{name[:60]}: expected one of "
                                    f"{', '.join([*HOOK_EVENTS, *TOOLS])}")
        if not isinstance(body, dict):
            raise RequestError(400, f"body: expected a JSON object, got {_kind(body)}")
        ctx = parse_ctx(body.get("ctx"), self.workspace)
        if name in TOOLS:
            return self._tool(name, ctx, body.get("params"))
        event = parse_event(name, body.get("event"))
        try:
            answer = getattr(self.host, name)(event, ctx)
        except Exception as exc:  # the host guards each plugin; this is the guard around the guard
            log.exception("sidecar: %s failed; answering as the contract says", name)
            if name == "pre_tool":
                answer = review_decision("sidecar", event.tool_name, exc)
            elif name == "before_prompt_build":
                return {"prepend_context": None, "prepend_system_context": None}
            else:
                return {"ok": True}
        if answer is None:
            return {"ok": True}
        return dataclasses.asdict(answer)

    def _tool(self, name: str, ctx: HookContext, params: Any) -> dict:
        from .. import tools
        from ..memory import memory_for

        params = {} if params is None else params
        if not isinstance(params, dict):
            raise RequestError(400, f"params: expected an object, got {_kind(params)}")
        mem = memory_for(ctx)
        try:
            if name == "memory_search":
                return tools.memory_search(mem, ctx, params.get("query"), limit=params.get("limit"))
            if name == "memory_get":
                return tools.memory_get(mem, ctx, params.get("id"))
            return tools.memory_add(mem, ctx, params.get("content"), role=params.get("role") or "user")
        except MemtierError as exc:  # a bad argument (InvalidIdError included)
            raise RequestError(400, str(exc)) from None
        except Exception as exc:
            log.exception("sidecar: %s failed", name)
            raise RequestError(500, f"{name} failed: {type(exc).__name__}") from None


# ---- HTTP -----------------------------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = f"memtier/{__version__}"
    timeout = IDLE_TIMEOUT_S
    server: "SidecarServer"

    def log_message(self, fmt, *args):  # requests are not worth a line each on stderr
        log.debug("sidecar: " + fmt, *args)

    def setup(self):
        super().setup()
        # small answers on a kept-alive connection: without this, Nagle + delayed ACK add ~40 ms each
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def handle_one_request(self):
        self.server.track(self, busy=False)
        try:
            super().handle_one_request()
        finally:
            if self.server.stopping.is_set():
                self.close_connection = True

    def parse_request(self) -> bool:
        ok = super().parse_request()
        if ok:
            self.server.track(self, busy=True)
            self.server.last_request = time.monotonic()
        return ok

    def _send(self, status: int, obj: dict, *, close: bool = False) -> None:
        data = orjson.dumps(obj)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if close or self.server.stopping.is_set():
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        got = self.headers.get("Authorization", "")
        scheme, _, token = got.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.server.token)

    def _refuse(self, exc: RequestError, *, close: bool = False) -> None:
        self._send(exc.status, {"error": str(exc)}, close=close)

    def do_GET(self):
        if not self._authorized():
            return self._refuse(RequestError(401, "missing or wrong token: send 'Authorization: Bearer <token>' "
                                                  "with the token from the sidecar's token file"), close=True)
        if self.path.split("?", 1)[0] != "/health":
            return self._refuse(RequestError(404 if not self.path.startswith("/v1/") else 405,
                                             f"{self.command} {self.path[:60]}: only GET /health and POST /v1/<name>"))
        self._send(200, self.server.sidecar.health())

    def do_POST(self):
        if not self._authorized():
            return self._refuse(RequestError(401, "missing or wrong token: send 'Authorization: Bearer <token>' "
                                                  "with the token from the sidecar's token file"), close=True)
        path = self.path.split("?", 1)[0]
        if not path.startswith("/v1/"):
            return self._refuse(RequestError(404 if path != "/health" else 405,
                                             f"POST {path[:60]}: expected /v1/<hook or tool>"), close=True)
        if self.headers.get("Transfer-Encoding"):
            return self._refuse(RequestError(411, "send a Content-Length (chunked bodies are not accepted)"),
                                close=True)
        raw_len = self.headers.get("Content-Length")
        try:
            length = int(raw_len) if raw_len is not None else -1
        except ValueError:
            length = -2
        if length == -1:
            return self._refuse(RequestError(411, "Content-Length required"), close=True)
        if length < 0:
            return self._refuse(RequestError(400, f"Content-Length {raw_len[:20]!r}: not a number"), close=True)
        if length > self.server.max_body:
            if length <= MAX_DRAIN:  # read it away so the client gets the answer instead of a broken pipe
                left = length
                while left > 0:
                    chunk = self.rfile.read(min(left, 1 << 16))
                    if not chunk:
                        break
                    left -= len(chunk)
            return self._refuse(RequestError(413, f"body of {length} bytes is over the limit of "
                                                  f"{self.server.max_body} bytes"), close=True)
        body = self.rfile.read(length)
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            return self._refuse(RequestError(400, f"body: not valid JSON ({str(exc).splitlines()[0][:120]})"))
        try:
            answer = self.server.sidecar.call(path[len("/v1/"):], obj)
        except RequestError as exc:
            return self._refuse(exc)
        self._send(200, answer)


class SidecarServer(ThreadingHTTPServer):
    """A threading HTTP server that knows its connections, so a shutdown drains them instead of hanging."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, sidecar: Sidecar, token: str, *, max_body: int = MAX_BODY):
        self.sidecar = sidecar
        self.token = token.encode()
        self.max_body = max_body
        self.stopping = threading.Event()
        self.last_request = time.monotonic()
        self._conns: dict[int, tuple[Any, bool]] = {}
        self._conns_lock = threading.Lock()
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.address_family = family
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}"

    def track(self, handler: _Handler, *, busy: bool) -> None:
        with self._conns_lock:
            self._conns[id(handler)] = (handler, busy)

    def shutdown_request(self, request):
        with self._conns_lock:
            for key, (h, _) in list(self._conns.items()):
                if h.request is request:
                    del self._conns[key]
        super().shutdown_request(request)

    def busy(self) -> int:
        with self._conns_lock:
            return sum(1 for _, b in self._conns.values() if b)

    def drain(self, timeout: float = DRAIN_S) -> None:
        """Let requests in flight finish (up to ``timeout``) and close idle keep-alive connections."""
        self.stopping.set()
        deadline = time.monotonic() + timeout
        while True:
            with self._conns_lock:
                conns = list(self._conns.values())
            for h, busy in conns:
                if not busy:
                    try:
                        h.request.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
            if not conns or time.monotonic() > deadline:
                return
            time.sleep(0.02)


# ---- running -------------------------------------------------------------------
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
    d = _private_dir(sidecar_dir(memory_root))
    fd = os.open(d / "lock", os.O_RDWR | os.O_CREAT, 0o600)
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


def build_host(plugin_dir: str | Path | None = None) -> Host:
    """A Host with memtier registered (and the plugins of ``plugin_dir``, if given)."""
    from .. import plugin as builtin

    host = Host()
    host.register(builtin)
    if plugin_dir:
        host.load_plugin_dir(plugin_dir)
    return host


def serve(workspace: Path | str, memory_root: Path | str, *, host: str = "127.0.0.1", port: int = 0,
          token_file: Path | str | None = None, max_body: int = MAX_BODY, plugin_dir: str | Path | None = None,
          idle_exit_s: float = 0, on_ready: Callable[[Endpoint], None] | None = None,
          stop: threading.Event | None = None) -> int:
    """Run the sidecar until SIGTERM/SIGINT, ``stop``, or ``idle_exit_s`` without requests (0: never).

    Returns the exit status (0 after a clean shutdown). A runtime that starts
    the sidecar for short-lived processes (``openclaw agent --local``) leaves it
    running for the next one and relies on the idle exit.

    Startup order: lock the workspace, token, warm the memory (index opened once,
    not by the first request), listen, publish ``endpoint.json``, then ``on_ready``.
    Shutdown: stop accepting, drain requests in flight, save the index, remove
    ``endpoint.json``.
    """
    if host not in _LOOPBACK:
        raise MemtierError(f"--host {host}: the sidecar listens on loopback only (127.0.0.1 or ::1)")
    if max_body < 1024:
        raise MemtierError(f"--max-body {max_body}: expected at least 1024 bytes")
    workspace, memory_root = Path(workspace), Path(memory_root)
    lock_fd = lock_workspace(memory_root)
    try:
        token_path = Path(token_file) if token_file else sidecar_dir(memory_root) / "token"
        token = ensure_token(token_path)
        hooks = build_host(plugin_dir)
        from ..memory import memory_for

        mem = memory_for(HookContext(agent_id="main", workspace_dir=str(workspace)))
        mem.retriever  # noqa: B018 - open the index now, not inside the first request's timeout
        mem.warm_up_in_background()  # vectors and models beside the server (the first request need not wait)
        server = SidecarServer(("::1" if host == "::1" else "127.0.0.1", port), Sidecar(hooks, workspace),
                               token, max_body=max_body)
        stop = stop or threading.Event()
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: stop.set())
        loop = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                name="memtier-sidecar", daemon=True)
        loop.start()
        if idle_exit_s > 0:
            threading.Thread(target=_idle_watch, args=(server, stop, idle_exit_s), name="memtier-sidecar-idle",
                             daemon=True).start()
        endpoint = Endpoint(server.url, str(token_path.resolve()), os.getpid(), str(workspace))
        ep_file = endpoint_path(memory_root)
        _write_private(ep_file, orjson.dumps(dataclasses.asdict(endpoint), option=orjson.OPT_INDENT_2))
        try:
            if on_ready:
                on_ready(endpoint)
            stop.wait()
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
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 0
    finally:
        os.close(lock_fd)
