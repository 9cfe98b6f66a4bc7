"""Secret redaction: nothing that looks like a credential reaches disk.

Every string memtier writes goes through :func:`redact` (or :func:`redact_obj`
for JSON-ish tool params and results) first. A secret is replaced by a marker
naming its kind, ``[REDACTED:openai_key]``, so a person reading a ledger still
sees *that* something was there, and never any character of it.

What counts as a secret, in four layers: the first two know formats, the last
two generalise to formats no rule names.

1. **Token formats** (:mod:`memtier_plugin.redact.tokens`): about 120 vendor
   token shapes (GitLab, SendGrid, npm, PyPI, Shopify, DigitalOcean, OpenAI,
   AWS, GitHub, Slack, Stripe, ...), JWTs, PEM private key blocks, webhook
   URLs, Telegram bot tokens, payment card numbers (Luhn-checked).
2. **Context** (:mod:`memtier_plugin.redact.context`): URL passwords (a raw
   ``#`` or ``/`` included), ``Authorization``/``Bearer``, ``name = value``
   where the name ends in a secret word, command-line flags (``--token X``,
   ``mysql -pX``, ``curl -u user:pass``), credential-file lines (``.netrc``,
   ``.pgpass``, .NET ``<add key= value=>``), string literals passed to a call
   that takes a secret (``login("u", "pw")``, ``set_password(...)``), session
   cookies, ``openssl -pass pass:X``, ``aws configure set NAME X``, and free
   text (``my password is hunter2``).
3. **Weak context + entropy**: a name ending in key, auth, sig, salt, cookie,
   ... redacts its value only when the value looks random (a UUID or 16+ hex
   digits count in these credential positions); so does a string literal
   passed to any call (``Client("...")``), from 24 characters.
4. **Entropy alone**: a long token close to random (upper case, lower case
   and digits mixed): after ``=``/``:`` (24+ characters), behind a short
   prefix like ``xyz_live_`` (20+), or alone (32+). Hex digests, git SHAs,
   UUIDs, dates, paths, URLs and words are left alone.

Why a table of our own rather than a vendored rule set: detect-secrets' plugins
are Python classes tied to its line scanner, and gitleaks' rules are written
for Go's linear-time RE2; under Python's backtracking engine several of them
rescan (the ``curl`` rules' ``.*?`` spans, the lazy 50-character prefix of its
keyword rules), so each would need converting and re-verifying at every
upstream update. Token formats are facts the vendors publish; here they are one
row each, and layers 2-4 catch what no row names.

Linear time. A hostile input (``'=' * 200_000``, a 150 KB tool result) must not
stall a turn, so no pattern rescans: each has bounded width or consumes what it
scans, candidate tokens are the maximal runs of token characters (each examined
once), and names are looked for only where a trigger word occurs.

Redaction before clipping. Text of unbounded size (tool results, pasted logs,
a prompt's head and tail) is never cut and then redacted: a cut can split a
secret so that no rule recognises the part kept (a URL password whose
``@host`` fell past the cut, a password whose "the password is" fell in a
dropped middle). :func:`redact_head` and :func:`redact_tail` redact a window
reaching :data:`CLIP_MARGIN` characters past the cut, then cut: a secret the
cut splits is replaced whole by its marker, a run of token characters the
window itself cuts is dropped whole, and a key block whose ``-----BEGIN``
precedes a tail window is removed up to its ``-----END``. The work is linear in
the part kept plus the margin, whatever the text's size.
``redact(text, max_chars=DEFAULT_MAX_CHARS)`` does the same for the head and
marks the cut with ``[TRUNCATED:<n> chars]``. Speed:
``benchmarks/redact_speed.py``.

Matches are collected as spans, overlapping spans are merged, and the merged
span is replaced once, with the most specific kind (``Authorization: Bearer
eyJ...`` gives ``jwt``). Markers are never re-redacted, so ``redact`` is
idempotent.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from typing import Any

from .context import CONTEXT_KINDS, is_placeholder, key_kind, scan_context
from .tokens import FORMAT_KINDS, OTHER_KINDS, P_CONTEXT, P_PEM, RUN_CHARS, format_kind, scan_tokens

__all__ = [
    "CLIP_MARGIN", "DEFAULT_MAX_CHARS", "KINDS", "MARKER_RE", "TRUNCATION_RE", "is_secret_key", "marker",
    "redact", "redact_head", "redact_obj", "redact_tail",
]

#: A cap for callers that redact text of unbounded size (tool results, pasted
#: logs): ``redact(text, max_chars=DEFAULT_MAX_CHARS)``. 64 K characters redact
#: in a few milliseconds; memtier keeps far less of a tool result anyway.
DEFAULT_MAX_CHARS = 65_536

#: Matches a marker this module writes.
MARKER_RE = re.compile(r"\[REDACTED:[a-z0-9_]+\]")
#: Matches the mark :func:`redact` appends where ``max_chars`` cut the text.
TRUNCATION_RE = re.compile(r"\[TRUNCATED:[0-9]+ chars\]")

#: Every kind name a marker can carry.
KINDS: tuple[str, ...] = tuple(dict.fromkeys((*FORMAT_KINDS, *OTHER_KINDS, *CONTEXT_KINDS)))

# Dict keys (redact_obj) naming a secret: the text keywords plus auth, cookie, pwd.
_DICT_KEY_RE = re.compile(
    r"[\w.\- ]*?(?:passw(?:or)?d|passphrase|secret|token|credentials?|pwd|auth|authorization"
    r"|cookie|(?:api|access|secret|private|signing|encryption|master|ssh)[_-]?key)",
    re.IGNORECASE,
)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_CUT_TAIL_RE = re.compile(rf"[{RUN_CHARS}=]+")


def marker(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind}]"


def _spans(text: str) -> list[tuple[int, int, int, str]]:
    """Every (start, end, priority, kind) a detector reports, unsorted."""
    spans: list[tuple[int, int, int, str]] = []
    low = text.lower()
    if len(low) != len(text):  # a few non-ASCII letters change length when lowered
        low = text.translate(_ASCII_LOWER)
    scan_tokens(text, low, spans)
    scan_context(text, low, spans)
    return spans


def _drop_marker_overlaps(text: str, spans: list) -> list:
    """Spans that do not touch a marker already in the text (idempotence)."""
    marks = [m.span() for m in MARKER_RE.finditer(text)]
    marks += [m.span() for m in TRUNCATION_RE.finditer(text)]
    if not marks:
        return spans
    marks.sort()
    starts = [s for s, _ in marks]
    kept = []
    for span in spans:
        i = bisect.bisect_left(starts, span[1])  # markers starting before the span ends
        if i and marks[i - 1][1] > span[0]:
            continue
        kept.append(span)
    return kept


# --------------------------------------------------------------------------
# Public API


_CODE_CALL_RE = re.compile(r"(?=[a-z_][a-z0-9_.]*[._])[a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*\(")


_CODE_CHAIN_RE = re.compile(r"[A-Z][A-Za-z0-9]*\((?:[^()\n]|\([^()\n]*\))*\)\.[a-z_]")  # Path(...).read_text()


def _is_code_call(text: str, span: tuple) -> bool:
    """A context span (a secret-named value) that is a function call in code: ``token = make_token(32)``,
    ``token = secrets.token_urlsafe(32)`` — a snake_case or dotted callee. ``password=hunter2(`` is not code.

    Token formats (a known prefix, priority below the context patterns) are never dropped.
    """
    start, end, prio, _kind = span
    if prio < P_CONTEXT:
        return False
    m = _CODE_CALL_RE.match(text, start) or _CODE_CHAIN_RE.match(text, start)
    return m is not None and m.start() == start


def _plan(text: str, extra: tuple = ()) -> list[list]:
    """The merged spans ``[start, end, priority, kind]`` :func:`redact` replaces, sorted."""
    spans = _spans(text)
    spans.extend(extra)
    if spans and ("[REDACTED:" in text or "[TRUNCATED:" in text):
        spans = _drop_marker_overlaps(text, spans)
    if spans and "(" in text:
        spans = [sp for sp in spans if not _is_code_call(text, sp)]
    spans.sort()
    merged: list[list] = []  # [start, end, priority, kind]
    for start, end, prio, kind in spans:
        if merged and start < merged[-1][1]:
            last = merged[-1]
            last[1] = max(last[1], end)
            if prio < last[2]:
                last[2], last[3] = prio, kind
        else:
            merged.append([start, end, prio, kind])
    return merged


def _render(text: str, merged: list[list], lo: int, hi: int) -> tuple[str, list[str]]:
    """``text[lo:hi]`` with every span replaced by its marker; a span cut by ``lo`` or ``hi`` is replaced
    whole (its marker is kept, none of its characters)."""
    parts: list[str] = []
    kinds: list[str] = []
    pos = lo
    for start, end, _prio, kind in merged:
        if end <= lo or start >= hi:
            continue
        if start > pos:
            parts.append(text[pos:start])
        parts.append(marker(kind))
        kinds.append(kind)
        pos = max(pos, end)
    if pos < hi:
        parts.append(text[pos:hi])
    return "".join(parts), list(dict.fromkeys(kinds))


def _run_start(text: str, i: int, floor: int = 0) -> int:
    """Where the run of token characters holding ``text[i - 1]`` and ``text[i]`` starts (``i`` when
    position ``i`` does not cut a run)."""
    if not (floor < i < len(text) and _CUT_TAIL_RE.fullmatch(text[i]) and _CUT_TAIL_RE.fullmatch(text[i - 1])):
        return i
    m = _CUT_TAIL_RE.match(text[floor:i][::-1])
    return i - m.end()


def _run_end(text: str, i: int, ceiling: int) -> int:
    """Where the run of token characters cut at ``i`` ends (``i`` when position ``i`` does not cut one)."""
    if not (0 < i < len(text) and _CUT_TAIL_RE.fullmatch(text[i]) and _CUT_TAIL_RE.fullmatch(text[i - 1])):
        return i
    m = _CUT_TAIL_RE.match(text, i, ceiling)
    return m.end()


#: How far past a cut redaction looks. A secret that straddles the cut (a URL
#: password whose ``@host`` falls past it, a key block, a ``name = value``) is
#: seen whole inside this margin and replaced whole by its marker; a run of
#: token characters that the margin itself cuts is dropped whole.
CLIP_MARGIN = 4096

_PEM_END_RE = re.compile(r"-----END[A-Z0-9 ]{0,64}PRIVATE KEY(?: BLOCK)?-----")


def redact_head(text: str, n: int, margin: int = CLIP_MARGIN) -> tuple[str, list[str], int]:
    """The first ``n`` characters of ``text``, redacted as part of the whole text.

    Redaction runs on a window of ``n + margin`` characters (so time is linear
    in ``n + margin``, whatever ``len(text)``), then the window is cut at ``n``:
    a secret the cut splits is replaced whole by its marker, never kept in part.
    Returns ``(redacted, kinds, used)``, ``used`` being how many characters of
    ``text`` the result covers (``n`` or fewer).
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    end = min(len(text), n + margin)
    if end < len(text):
        end = _run_start(text, end)  # a run cut by the window is dropped whole
    hi = min(n, end)
    window = text[:end]
    out, kinds = _render(window, _plan(window), 0, hi)
    return out, kinds, hi


def redact_tail(text: str, n: int, margin: int = CLIP_MARGIN) -> tuple[str, list[str], int]:
    """The last ``n`` characters of ``text``, redacted as part of the whole text (see :func:`redact_head`).

    A key block whose ``-----BEGIN`` line lies before the window is redacted up to its ``-----END`` line.
    Returns ``(redacted, kinds, used)``.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    start = max(0, len(text) - n - margin)
    if start:
        start = _run_end(text, start, len(text))  # a run cut by the window is dropped whole
    window = text[start:]
    extra = ()
    if start and "-----END" in window:
        m = _PEM_END_RE.search(window)
        begin = window.find("-----BEGIN")
        if m is not None and (begin < 0 or begin > m.start()):
            extra = ((0, m.end(), P_PEM, "private_key"),)
    lo = max(0, len(window) - n)
    out, kinds = _render(window, _plan(window, extra), lo, len(window))
    return out, kinds, len(window) - lo


def redact(text: str, max_chars: int | None = None) -> tuple[str, list[str]]:
    """Replace every secret in ``text`` with ``[REDACTED:<kind>]``.

    Returns the redacted text and the kinds of the markers written, each once,
    in order of first occurrence. When nothing is found (and nothing is cut)
    the same string object comes back with an empty list.

    ``max_chars`` caps the work for text of unbounded size: the text is
    redacted in a window of ``max_chars`` plus :data:`CLIP_MARGIN` characters,
    then cut to at most ``max_chars`` (a token cut in half at the end is
    dropped whole, a secret the cut splits is replaced whole by its marker, so
    no prefix of a secret survives), and ``[TRUNCATED:<n> chars]`` is
    appended, ``n`` being the characters dropped. The result can be longer
    than ``max_chars`` by that mark and by markers longer than the secrets they
    replace. Time is linear in ``len(text)`` (or ``max_chars``) either way.
    """
    if max_chars is not None and len(text) > max_chars:
        if max_chars < 0:
            raise ValueError(f"max_chars must be >= 0, got {max_chars}")
        cut = _run_start(text, max_chars, max(0, max_chars - 8192))
        end = min(len(text), max_chars + CLIP_MARGIN)
        if end < len(text):
            end = _run_start(text, end)
        cut = min(cut, end)
        window = text[:end]
        out, kinds = _render(window, _plan(window), 0, cut)
        return f"{out}[TRUNCATED:{len(text) - cut} chars]", kinds
    merged = _plan(text)
    if not merged:
        return text, []
    return _render(text, merged, 0, len(text))


def is_secret_key(name: str) -> bool:
    """True when a dict key names a secret (``password``, ``apiKey``, ``X-Api-Key``...).

    ``tokens``, ``max_tokens``, ``session_key`` and ``secret_name`` are not.
    """
    name = name.strip()
    return len(name) <= 256 and _DICT_KEY_RE.fullmatch(name) is not None


def redact_obj(obj: Any, max_chars: int | None = None) -> tuple[Any, list[str]]:
    """Redact a JSON-ish value (dicts, lists, tuples, strings, scalars).

    Every string (dict keys included) goes through :func:`redact` (with
    ``max_chars`` applied to each string value; keys are never cut). The value of a key that names a
    secret (see :func:`is_secret_key`) is replaced as a whole by a marker
    whatever its shape (string, number, dict, list), except ``None``,
    booleans, empty values and placeholders like ``"${DB_PASSWORD}"``.
    Returns a new object (the input is not modified) and the kinds removed,
    each once, in order of first occurrence.
    """
    found: list[str] = []
    out = _walk(obj, found, None, max_chars)
    return out, list(dict.fromkeys(found))


def _redact_str(text: str, found: list[str], max_chars: int | None) -> str:
    out, kinds = redact(text, max_chars)
    found.extend(kinds)
    return out


def _walk(obj: Any, found: list[str], secret_kind: str | None, max_chars: int | None) -> Any:
    if secret_kind is not None and obj is not None and not isinstance(obj, bool):
        if isinstance(obj, str):
            if is_placeholder(obj) or MARKER_RE.fullmatch(obj.strip()):
                return obj
            kind = format_kind(obj.strip()) or secret_kind
        elif not obj and isinstance(obj, (Mapping, list, tuple)):
            return obj
        else:
            kind = secret_kind
        found.append(kind)
        return marker(kind)
    if isinstance(obj, str):
        return _redact_str(obj, found, max_chars)
    if isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            if isinstance(k, str):
                kind = key_kind(k) if is_secret_key(k) else None
                out[_redact_str(k, found, None)] = _walk(v, found, kind, max_chars)  # keys are never cut
            else:
                out[k] = _walk(v, found, None, max_chars)
        return out
    if isinstance(obj, list):
        return [_walk(x, found, None, max_chars) for x in obj]
    if isinstance(obj, tuple):
        return tuple(_walk(x, found, None, max_chars) for x in obj)
    return obj
