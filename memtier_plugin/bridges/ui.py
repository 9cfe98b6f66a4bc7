"""``memtier ui``: a local web page over one workspace's memory, for the person whose memory it is.

The page (``memtier_plugin/data/ui/``: one HTML file, one script, one style
sheet, no external asset and no build step) shows memory by layer, search with
the explain of every signal, each traced prompt with what was delivered and why,
and buttons to forget and correct (:mod:`memtier_plugin.forgetting`). The views
are :mod:`.ui_views`; this module is the server and its guards.

Guards, in the order a request meets them:

* it listens on loopback only (127.0.0.1 or ::1);
* ``Host`` must name this server on a loopback address (``127.0.0.1:<port>``,
  ``localhost:<port>``, ``[::1]:<port>``): a page on another name that a DNS
  rebinding pointed at 127.0.0.1 is refused (403);
* ``Origin``, when sent, must be this server's own origin, and
  ``Sec-Fetch-Site``, when sent, ``same-origin`` or ``none`` (403); a POST must
  send an ``Origin`` and ``Content-Type: application/json`` (403, 415);
* the token: a random one per run, in the URL the command prints
  (``/?token=<token>``) for the page, and in the ``X-Memtier-Token`` header for
  every ``/api/`` call (401 without it; compared in constant time);
* ids and agent names in a request are checked (400, one line naming the field).

Answers carry ``Cache-Control: no-store``, ``X-Content-Type-Options: nosniff``,
``Referrer-Policy: no-referrer``; the page a Content-Security-Policy that runs
only its own script (a per-answer nonce) and loads nothing from elsewhere. Stored
text is untrusted: the script writes it with ``textContent`` only.

API (JSON; GET unless said): ``/api/episodes``, ``/api/facts``, ``/api/global``,
``/api/workspace``, ``/api/traces?agent=``, ``/api/search?q=&agent=&project=&session=``,
``POST /api/forget {"ids": [...]}``, ``POST /api/correct {"id", "text"}``.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

import orjson

from .. import __version__
from ..errors import MemtierError
from ..memory import Memory
from ..store.paths import checked_id, is_valid_id
from . import ui_views as views
from .http import LOOPBACK
from .request_parsing import RequestError, parse_body
from .stopping import StopOnSignals

log = logging.getLogger(__name__)

TOKEN_HEADER = "X-Memtier-Token"
#: The largest POST body (a list of ids, or one corrected text).
MAX_BODY = 256 << 10
#: Ids one forget may name.
MAX_IDS = 500
#: The longest corrected text and search query accepted.
MAX_TEXT = 4000
#: Seconds a connection may sit idle.
IDLE_TIMEOUT_S = 30.0
_VIEWS = {"episodes": views.episodes, "facts": views.facts, "global": views.global_layer,
          "workspace": views.workspace_layer}


def page(nonce: str) -> bytes:
    """The page: ``index.html`` with its style sheet and script inlined under ``nonce``."""
    base = resources.files("memtier_plugin") / "data" / "ui"
    html = (base / "index.html").read_text(encoding="utf-8")
    parts = {"{{nonce}}": nonce, "{{style}}": (base / "style.css").read_text(encoding="utf-8"),
             "{{script}}": (base / "app.js").read_text(encoding="utf-8"), "{{version}}": __version__}
    for key, value in parts.items():
        html = html.replace(key, value)
    return html.encode("utf-8")


def _csp(nonce: str) -> str:
    return (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
            "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


class UI:
    """The transport-free core: one API call (name, query or body) in, its JSON answer out."""

    def __init__(self, mem: Memory):
        self.mem = mem
        self.forgotten = mem.forgotten  # the Memory's own: a forget by any process applies at the next call
        self._lock = threading.Lock()  # one call at a time: the rooms are shared (no file lock is held)

    def get(self, name: str, query: dict[str, str]) -> dict:
        with self._lock:
            gone = self.forgotten.ids()
            if name in _VIEWS:
                return _VIEWS[name](self.mem, gone)
            if name == "traces":
                agent = query.get("agent") or None
                return views.traces(self.mem, gone, _checked_agent(agent) if agent else None)
            if name == "search":
                q = query.get("q", "")
                if not q.strip() or len(q) > MAX_TEXT:
                    raise RequestError(400, f"q: expected a query of 1 to {MAX_TEXT} characters")
                project = query.get("project")
                return views.search(self.mem, gone, q, agent=_checked_agent(query.get("agent") or "main"),
                                    project=_bounded("project", project) if project else None,
                                    session=_bounded("session", query.get("session") or ""))
        raise RequestError(404, f"GET /api/{name[:40]}: expected one of {', '.join([*_VIEWS, 'traces', 'search'])}")

    def post(self, name: str, body: Any) -> dict:
        if name not in ("forget", "correct"):
            raise RequestError(404, f"POST /api/{name[:40]}: expected forget or correct")
        if not isinstance(body, dict):
            raise RequestError(400, "body: expected a JSON object")
        if name == "forget":
            ids = body.get("ids")
            if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_IDS:
                raise RequestError(400, f"ids: expected a list of 1 to {MAX_IDS} ids")
            ids = [_checked_item(i, "ids[]") for i in ids]
        else:
            item_id, text = _checked_item(body.get("id"), "id"), body.get("text")
            if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
                raise RequestError(400, f"text: expected the new text, 1 to {MAX_TEXT} characters")
        try:
            from .. import forgetting
        except ImportError:
            raise RequestError(501, "forget and correct are not in this build of memtier") from None
        with self._lock:
            try:
                if name == "forget":
                    return forgetting.forget(self.mem, ids, reason="ui")
                return forgetting.correct(self.mem, item_id, text)
            except MemtierError as exc:
                raise RequestError(400, str(exc)) from None


def _checked_agent(value: str) -> str:
    try:
        return checked_id(value, "agent")
    except MemtierError as exc:
        raise RequestError(400, str(exc)) from None


def _checked_item(value: Any, where: str) -> str:
    if not is_valid_id(value):
        raise RequestError(400, f"{where}: {str(value)[:60]!r} is not an item id (letters, digits, '.', '_', '-')")
    return value


def _bounded(where: str, value: str) -> str:
    if len(value) > 256 or any(c in value for c in "\r\n\x00"):
        raise RequestError(400, f"{where}: expected at most 256 characters on one line")
    return value


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = f"memtier-ui/{__version__}"
    timeout = IDLE_TIMEOUT_S
    server: "UIServer"

    def log_message(self, fmt, *args):
        log.debug("ui: " + fmt, *args)

    def _send(self, status: int, data: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
        try:
            self.send_response(status)
            headers = {"Content-Type": ctype, "Content-Length": str(len(data)), "Cache-Control": "no-store",
                       "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                       "X-Frame-Options": "DENY", **(extra or {})}
            if status >= 400:
                headers["Connection"] = "close"
                self.close_connection = True
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except OSError as exc:  # the browser went away
            self.close_connection = True
            log.debug("ui: answer not delivered: %s", exc)

    def _json(self, status: int, obj: dict) -> None:
        self._send(status, orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS), "application/json; charset=utf-8")

    def _refuse(self, exc: RequestError) -> None:
        self._json(exc.status, {"error": str(exc)})

    def _guard(self, *, post: bool) -> None:
        """Raise RequestError unless Host, Origin and Sec-Fetch-Site say this request is our own page's."""
        srv = self.server
        host = (self.headers.get("Host") or "").strip().lower()
        if host not in srv.hosts:
            raise RequestError(403, f"Host {host[:60]!r}: expected this server's loopback address "
                                    f"(127.0.0.1:{srv.port}, localhost:{srv.port} or [::1]:{srv.port})")
        origin = self.headers.get("Origin")
        if origin is not None and origin.strip().lower() not in srv.origins:
            raise RequestError(403, f"Origin {origin[:60]!r}: only this page's own origin may call it")
        site = self.headers.get("Sec-Fetch-Site")
        if site is not None and site not in ("same-origin", "none"):
            raise RequestError(403, f"Sec-Fetch-Site {site[:30]!r}: only this page's own requests are answered")
        if post and origin is None:
            raise RequestError(403, "POST without an Origin header: only this page's own requests are answered")

    def _token_ok(self, sent: str | None) -> bool:
        return sent is not None and hmac.compare_digest(sent.strip().encode(), self.server.token)

    def _route(self) -> tuple[str, dict[str, str]]:
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        return parts.path, query

    def do_GET(self):
        try:
            self._guard(post=False)
            path, query = self._route()
            if path == "/":
                if not self._token_ok(query.get("token")):
                    raise RequestError(401, "missing or wrong token: open the URL `memtier ui` printed")
                nonce = secrets.token_urlsafe(18)
                return self._send(200, page(nonce), "text/html; charset=utf-8",
                                  {"Content-Security-Policy": _csp(nonce)})
            if not self._token_ok(self.headers.get(TOKEN_HEADER)):
                raise RequestError(401, f"missing or wrong token: send {TOKEN_HEADER}")
            if not path.startswith("/api/"):
                raise RequestError(404, f"GET {path[:60]}: not found")
            self._json(200, self.server.ui.get(path[len("/api/"):], query))
        except RequestError as exc:
            self._refuse(exc)
        except Exception as exc:  # a view failed: one line for the page, the traceback in the log
            log.exception("ui: %s failed", self.path[:80])
            self._refuse(RequestError(500, f"{type(exc).__name__}: the view failed (see the log)"))

    do_HEAD = do_GET

    def do_POST(self):
        try:
            self._guard(post=True)
            path, _ = self._route()
            if not self._token_ok(self.headers.get(TOKEN_HEADER)):
                raise RequestError(401, f"missing or wrong token: send {TOKEN_HEADER}")
            if (self.headers.get("Content-Type") or "").split(";")[0].strip().lower() != "application/json":
                raise RequestError(415, "Content-Type: expected application/json")
            try:
                length = int(self.headers.get("Content-Length") or "-1")
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY:
                raise RequestError(413 if length > MAX_BODY else 411,
                                   f"Content-Length: expected 0 to {MAX_BODY} bytes")
            body = self.rfile.read(length)
            try:
                obj = parse_body(body)
            except ValueError as exc:
                raise RequestError(400, f"body: not valid JSON ({exc})") from None
            if not path.startswith("/api/"):
                raise RequestError(404, f"POST {path[:60]}: not found")
            self._json(200, self.server.ui.post(path[len("/api/"):], obj))
        except RequestError as exc:
            self._refuse(exc)
        except Exception as exc:
            log.exception("ui: %s failed", self.path[:80])
            self._refuse(RequestError(500, f"{type(exc).__name__}: the change failed (see the log)"))


class UIServer(ThreadingHTTPServer):
    """The page's server: knows its token, port and the Host and Origin values it answers."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], ui: UI, token: str):
        import socket

        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.ui = ui
        self.token = token.encode()
        super().__init__(address, _Handler)
        self.port = self.server_address[1]
        self.hosts = {f"{h}:{self.port}" for h in ("127.0.0.1", "localhost", "[::1]")}
        self.origins = {f"http://{h}" for h in self.hosts}

    @property
    def url(self) -> str:
        host = self.server_address[0]
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.port}/?token={self.token.decode()}"


def serve(mem: Memory, *, host: str = "127.0.0.1", port: int = 0, on_ready: Callable[[str], None] | None = None,
          stop: threading.Event | None = None) -> int:
    """Serve the page for ``mem``'s workspace until SIGTERM/SIGINT or ``stop``; ``on_ready`` gets the URL
    (with the token). Returns the exit status."""
    if host not in LOOPBACK:
        raise MemtierError(f"--host {host}: the page is served on loopback only (127.0.0.1 or ::1)")
    server = UIServer(("::1" if host == "::1" else "127.0.0.1", port), UI(mem), secrets.token_urlsafe(32))
    stop = stop or threading.Event()
    with StopOnSignals(stop) as signals:
        loop = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="memtier-ui",
                                daemon=True)
        loop.start()
        try:
            if on_ready:
                on_ready(server.url)
            signals.wait()
        finally:
            server.shutdown()
            server.server_close()
    return 0
