"""The sidecar: one workspace's hook contract over loopback HTTP, for runtimes that are not Python.

``memtier serve`` runs it (:mod:`.serving`: lock, token, endpoint file, shutdown); the answers are
:class:`.sidecar.Sidecar`'s. A TypeScript OpenClaw plugin (``openclaw-plugin/``)
or any other runtime calls the same pluggy path as the reference host: every
request becomes one call on a :class:`~memtier_plugin.host.Host` with memtier
registered, so the answers (and the isolation rules of docs/hooks.md) are
identical to the in-process ones.

Protocol (JSON in, JSON out, UTF-8)::

    POST /v1/<hook>   {"ctx": {...}, "event": {...}}   hook = before_prompt_build | pre_tool |
                                                              post_tool | agent_end |
                                                              before_compaction | session_end
    POST /v1/<tool>   {"ctx": {...}, "params": {...}}  tool = memory_search | memory_get | memory_add |
                                                              memory_forget {"ids": [...]} |
                                                              memory_correct {"id", "text"}
    GET  /health
    GET  /v1/challenge?nonce=<hex>                     (no token: the server proves it holds it)

``ctx`` and ``event`` carry the field names of :mod:`memtier_plugin.events`
(snake_case); unknown fields are ignored, so clients may send newer ones
(:mod:`.request_parsing` reads them). Every request needs
``Authorization: Bearer <token>``, compared in constant time; the token file
and the ``GET /v1/challenge`` proof a client checks before it sends the token
are :mod:`.sidecar_token`'s. A token file left by a sidecar that did not exit
cleanly is replaced at the next start (:func:`.serving.serve`). The server listens on
loopback only.

Under many clients: at most ``max_connections`` connections (past it, the
oldest connection that has not yet sent the token is closed to make room, or
the new one is closed unread); a connection that never sent the token is closed
after ``UNAUTH_IDLE_S`` idle; a request (request line, headers, body) must
arrive whole within ``request_timeout`` seconds of its first byte (408, closed);
``--idle-exit`` counts only authenticated requests; a failed write (a client
that went away) is one log line, and those lines are rate-limited.

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
import hmac
import logging
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

from .. import __version__
from .request_parsing import RequestError, parse_body
from .sidecar import Sidecar
from .sidecar_token import challenge_proof

log = logging.getLogger(__name__)

#: The largest request body accepted (a 10 MB paste is bounded by the hooks anyway; this bounds reading it).
MAX_BODY = 1 << 20
#: An oversized body up to this size is read and dropped before the 413 (beyond it the connection is cut).
MAX_DRAIN = 64 << 20
#: Seconds a keep-alive connection may sit idle before the server closes it.
IDLE_TIMEOUT_S = 60.0
#: Seconds a clean shutdown waits for requests in flight.
DRAIN_S = 10.0
#: Open connections at most (a thread each); past it the oldest unauthenticated one makes room, or the new one is closed.
MAX_CONNECTIONS = 128
#: Seconds a connection that has not sent the token may sit idle (60 s is for clients that did).
UNAUTH_IDLE_S = 10.0
#: Seconds from a request's first byte to its last (request line, headers, body); past it: 408 and closed.
REQUEST_TIMEOUT_S = 10.0
#: Failed writes logged per minute at most (then one line counting the rest).
FAILED_WRITES_PER_MIN = 20
LOOPBACK = {"127.0.0.1", "::1", "localhost"}


# ---- HTTP -----------------------------------------------------------------------
_UNAUTHORIZED = ("missing or wrong token: send 'Authorization: Bearer <token>' "
                 "with the token from the sidecar's token file")


@dataclasses.dataclass
class _Conn:
    """One open connection, as the server's accept loop and reaper see it."""

    sock: Any
    accepted: float
    authed: bool = False  #: it sent the right token at least once
    phase: str = "new"  #: new | idle (waiting for a request) | reading | busy (answering)
    started: float = 0.0  #: when the request being read sent its first byte
    expired: bool = False  #: the reaper cut its reading (request over the deadline)
    evicted: bool = False  #: closed to make room for a new connection


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
        self.conn = self.server.conn_state(self.request)

    def handle_one_request(self):
        conn = self.conn
        try:
            # wait for the request's first byte: 60 s for a client that sent the token, less for one that did not
            self.connection.settimeout(IDLE_TIMEOUT_S if conn.authed else self.server.unauth_idle_s)
            try:
                if not self.rfile.peek(1):
                    self.close_connection = True
                    return
            except (TimeoutError, OSError, ValueError):
                self.close_connection = True
                return
            conn.started, conn.phase = time.monotonic(), "reading"
            self.connection.settimeout(self.server.request_timeout)  # the reaper bounds the whole request
            super().handle_one_request()
        finally:
            conn.phase = "idle"
            if self.server.stopping.is_set() or conn.expired or conn.evicted:
                self.close_connection = True

    def _send(self, status: int, obj: dict, *, close: bool = False) -> None:
        data = orjson.dumps(obj)
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if close or self.server.stopping.is_set():
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError as exc:  # the client went away: one line, no traceback
            self.close_connection = True
            self.server.failed_write(self.client_address, f"{self.command} {self.path[:60]}", exc)

    def _authorized(self) -> bool:
        got = self.headers.get("Authorization", "")
        scheme, _, token = got.partition(" ")
        ok = scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self.server.token)
        if ok:
            self.conn.authed = True
            self.server.last_request = time.monotonic()
        return ok

    def _refuse(self, exc: RequestError, *, close: bool = False) -> None:
        self._send(exc.status, {"error": str(exc)}, close=close)

    def _challenge(self) -> None:
        """Prove to a client, before it sends the token, that this server holds it (no token needed)."""
        from urllib.parse import parse_qs, urlsplit

        nonce = (parse_qs(urlsplit(self.path).query).get("nonce") or [""])[0]
        if not (32 <= len(nonce) <= 128 and all(c in "0123456789abcdef" for c in nonce)):
            return self._refuse(RequestError(400, "challenge: send nonce=<32 to 128 lowercase hex digits>"))
        server = self.server
        port = server.server_address[1]
        workspace = str(server.sidecar.workspace)
        self._send(200, {"service": "memtier", "pid": os.getpid(), "workspace": workspace, "port": port,
                         "proof": challenge_proof(server.token, nonce, os.getpid(), workspace, port)})

    def do_GET(self):
        if self.path.split("?", 1)[0] == "/v1/challenge":
            return self._challenge()
        if not self._authorized():
            return self._refuse(RequestError(401, _UNAUTHORIZED), close=True)
        self.conn.phase = "busy"
        if self.path.split("?", 1)[0] != "/health":
            return self._refuse(RequestError(404 if not self.path.startswith("/v1/") else 405,
                                             f"{self.command} {self.path[:60]}: only GET /health and POST /v1/<name>"))
        self._send(200, self.server.sidecar.health())

    def _read_body(self, length: int) -> bytes | None:
        """The body, or None after answering 408 (over the request deadline) or 400 (cut short)."""
        body = self.rfile.read(length)
        if len(body) == length:
            return body
        if self.conn.expired:
            self._refuse(RequestError(408, f"request not complete within {self.server.request_timeout:g} s"),
                         close=True)
        else:
            self._refuse(RequestError(400, f"body: {len(body)} of {length} bytes before the connection closed"),
                         close=True)
        return None

    def do_POST(self):
        if not self._authorized():
            return self._refuse(RequestError(401, _UNAUTHORIZED), close=True)
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
        body = self._read_body(length)
        if body is None:
            return None
        self.conn.phase = "busy"
        try:
            obj = parse_body(body)
        except ValueError as exc:
            return self._refuse(RequestError(400, f"body: not valid JSON ({exc})"))
        try:
            answer = self.server.sidecar.call(path[len("/v1/"):], obj)
        except RequestError as exc:
            return self._refuse(exc)
        self._send(200, answer)


class SidecarServer(ThreadingHTTPServer):
    """A threading HTTP server that knows its connections: it caps them, cuts slow requests,
    and drains them on shutdown instead of hanging."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, sidecar: Sidecar, token: str, *, max_body: int = MAX_BODY,
                 max_connections: int = MAX_CONNECTIONS, request_timeout: float = REQUEST_TIMEOUT_S,
                 unauth_idle_s: float = UNAUTH_IDLE_S):
        self.sidecar = sidecar
        self.token = token.encode()
        self.max_body = max_body
        self.max_connections = max_connections
        self.request_timeout = request_timeout
        self.unauth_idle_s = unauth_idle_s
        self.stopping = threading.Event()
        self._closed = threading.Event()
        self.last_request = time.monotonic()
        self._conns: dict[Any, _Conn] = {}
        self._conns_lock = threading.Lock()
        self._log_window = (0.0, 0, 0)  # (window start, lines logged, lines suppressed)
        self._log_lock = threading.Lock()
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.address_family = family
        super().__init__(address, _Handler)
        threading.Thread(target=self._reap, name="memtier-sidecar-reaper", daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{'[' + host + ']' if ':' in host else host}:{port}"

    # -- connections --------------------------------------------------------------
    def verify_request(self, request, client_address) -> bool:
        """Admit a new connection within the cap (in the accept loop, before anything is read from it)."""
        with self._conns_lock:
            live = [c for c in self._conns.values() if not c.evicted]
            if len(live) >= self.max_connections:
                spare = [c for c in live if not c.authed and c.phase in ("new", "idle", "reading")]
                if not spare:
                    log.debug("sidecar: %d connections open; refusing %s", len(live), client_address)
                    return False
                victim = min(spare, key=lambda c: c.accepted)
                victim.evicted = True
                _cut(victim.sock, socket.SHUT_RDWR)
            self._conns[request] = _Conn(request, time.monotonic())
        return True

    def conn_state(self, request) -> _Conn:
        with self._conns_lock:
            return self._conns.setdefault(request, _Conn(request, time.monotonic()))

    def shutdown_request(self, request):
        with self._conns_lock:
            self._conns.pop(request, None)
        super().shutdown_request(request)

    def connections(self) -> int:
        with self._conns_lock:
            return len(self._conns)

    def busy(self) -> int:
        """Authenticated requests being answered (what ``--idle-exit`` and a shutdown wait for)."""
        with self._conns_lock:
            return sum(1 for c in self._conns.values() if c.phase == "busy")

    def _reap(self) -> None:
        """Cut every request that has been arriving for longer than ``request_timeout`` (a trickled body)."""
        step = max(0.05, min(0.5, self.request_timeout / 4))
        while not self._closed.wait(step):
            now = time.monotonic()
            with self._conns_lock:
                late = [c for c in self._conns.values()
                        if c.phase == "reading" and not c.expired and now - c.started > self.request_timeout]
                for c in late:
                    c.expired = True
                    _cut(c.sock, socket.SHUT_RD)  # reads end now; the 408 can still be written

    # -- errors ---------------------------------------------------------------------
    def failed_write(self, client_address, what: str, exc: BaseException) -> None:
        """One line per failed write (a client that reset early), at most FAILED_WRITES_PER_MIN a minute."""
        with self._log_lock:
            start, logged, suppressed = self._log_window
            now = time.monotonic()
            if now - start >= 60:
                if suppressed:
                    log.warning("sidecar: %d more failed writes in the last minute not logged", suppressed)
                start, logged, suppressed = now, 0, 0
            if logged < FAILED_WRITES_PER_MIN:
                logged += 1
                log.warning("sidecar: answer to %s not delivered (%s: %s)", what, type(exc).__name__,
                            str(exc)[:120])
            else:
                suppressed += 1
            self._log_window = (start, logged, suppressed)

    def handle_error(self, request, client_address):
        """An error outside an answer (a reset while reading): one line, never a traceback."""
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):
            self.failed_write(client_address, "a request", exc)
        else:
            log.exception("sidecar: a connection failed")

    def server_close(self) -> None:
        self._closed.set()
        super().server_close()

    def drain(self, timeout: float = DRAIN_S) -> None:
        """Let requests in flight finish (up to ``timeout``) and close every other connection."""
        self.stopping.set()
        deadline = time.monotonic() + timeout
        while True:
            with self._conns_lock:
                conns = list(self._conns.values())
            for c in conns:
                if c.phase != "busy":
                    _cut(c.sock, socket.SHUT_RDWR)
            if not conns or time.monotonic() > deadline:
                return
            time.sleep(0.02)


def _cut(sock, how: int) -> None:
    try:
        sock.shutdown(how)
    except OSError:
        pass
