"""Secret redaction: nothing that looks like a credential reaches disk.

Every string memtier writes goes through :func:`redact` (or :func:`redact_obj`
for JSON-ish tool params and results) first. A secret is replaced by a marker
naming its kind, ``[REDACTED:openai_key]``, so a person reading a ledger still
sees *that* something was there, and never any character of it.

Detectors, each a precompiled regex:

* whole-token formats with a recognisable prefix (OpenAI, Anthropic, AWS key
  ids, GitHub, Slack, Stripe, Google, Hugging Face, JWT) and PEM private keys;
* context patterns where the text says "this is a secret": ``scheme://user:
  pass@host`` (user and host kept), ``Authorization:`` headers, ``Bearer
  <token>``, ``key=value`` / ``"key": "value"`` / ``key: value`` where the key
  names a secret (password, token, api_key, aws_secret_access_key, ...);
* a generic ``name = <long high-entropy string>`` assignment.

Speed: this runs on every ledger write. Each detector is guarded by a plain
substring test (``"sk-" in text``) or starts with a literal, so Python's regex
engine skips ahead in C; ordinary prose costs a few microseconds. Matches are
collected as spans, overlapping spans are merged, and the merged span is
replaced once, with the most specific kind (``Authorization: Bearer eyJ...``
gives ``jwt``). Markers are never re-redacted, so ``redact`` is idempotent.

False positives are kept low: ids like ``ep-20261129-3f2a9c1b``, ISO dates,
UUIDs and 40-hex git SHAs are left alone (the entropy test wants upper case,
lower case and digits together, and enough randomness).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any, NamedTuple

__all__ = ["KINDS", "MARKER_RE", "marker", "redact", "redact_obj", "is_secret_key"]

#: Every kind name a marker can carry.
KINDS: tuple[str, ...] = (
    "anthropic_key", "openai_key", "stripe_key", "aws_access_key", "github_token",
    "slack_token", "google_api_key", "huggingface_token", "jwt", "private_key",
    "url_password", "aws_secret_key", "password", "token", "api_key", "secret",
    "authorization", "bearer_token", "high_entropy",
)

#: Matches a marker this module writes.
MARKER_RE = re.compile(r"\[REDACTED:[a-z_]+\]")


def marker(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind}]"


# --------------------------------------------------------------------------
# Whole-token formats


class _Token(NamedTuple):
    kind: str
    guard: str  # a character every match contains ("" = none), tested first
    triggers: tuple[str, ...]  # substrings; the regex runs only if one is present
    regex: re.Pattern[str]


def _token(kind: str, guard: str, triggers: tuple[str, ...], prefix: str, width: int,
           rest: str) -> _Token:
    # The literal prefix comes first so the engine finds candidates in C; the
    # lookbehind after it rejects a prefix in the middle of a longer word.
    pattern = f"{prefix}(?<![A-Za-z0-9_-].{{{width}}}){rest}"
    return _Token(kind, guard, triggers, re.compile(pattern))


# Order is priority: sk-ant- before sk-.
_TOKENS: tuple[_Token, ...] = (
    _token("anthropic_key", "-", ("sk-ant-",), "sk-ant-", 7, r"[A-Za-z0-9_-]{20,}"),
    _token("openai_key", "-", ("sk-",), "sk-", 3,
           r"(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}"),
    _token("stripe_key", "_", ("k_live_", "k_test_"), r"[sr]k_(?:live|test)_", 8,
           r"[A-Za-z0-9]{16,}"),
    _token("aws_access_key", "", ("AKIA", "ASIA", "ABIA", "ACCA"), r"A(?:KIA|SIA|BIA|CCA)", 4,
           r"[A-Z0-9]{16}(?![A-Za-z0-9])"),
    _token("github_token", "_", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"gh[pousr]_", 4,
           r"[A-Za-z0-9]{30,}"),
    _token("github_token", "_", ("github_pat_",), "github_pat_", 11, r"[A-Za-z0-9_]{22,}"),
    _token("slack_token", "-", ("xox",), r"xox[abeoprs]-", 5, r"[A-Za-z0-9-]{10,}"),
    _token("slack_token", "-", ("xapp-",), "xapp-", 5, r"[0-9]-[A-Za-z0-9-]{10,}"),
    _token("google_api_key", "", ("AIza",), "AIza", 4, r"[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),
    _token("huggingface_token", "_", ("hf_",), "hf_", 3, r"[A-Za-z0-9]{30,}"),
    _token("jwt", "", ("eyJ",), "eyJ", 3,
           r"[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
)

# --------------------------------------------------------------------------
# Context patterns (anchored with .match at a keyword found by str.find)

_PEM_RE = re.compile(
    r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|\Z)"
)
# scheme://user:PASS@host: scheme, user and host stay; the user may be empty
# (redis://:pass@host); the password runs to the last @ of the authority.
_URL_RE = re.compile(r"://[^\s:/@?#]*:(?P<val>[^\s/?#]+)(?=@)")
_AUTH_AT = re.compile(
    r"authorization\\?[\"']?[ \t]{0,3}[:=][ \t]{0,3}\\?[\"']?"
    r"(?:(?P<scheme>bearer|basic|token|digest|bot|apikey|ssws)[ \t]+)?"
    r"(?P<val>[^\s\"'\\,;]+)",
    re.IGNORECASE,
)
_BEARER_AT = re.compile(
    r"bearer[ \t]+(?P<val>(?=[A-Za-z0-9._~+/-]*[0-9]|[A-Za-z0-9._~+/-]{20})[A-Za-z0-9._~+/-]+=*)",
    re.IGNORECASE,
)
# Keys that name a secret, matched from the keyword on: ``db_password`` keeps
# ``db_``. Separator on the same line; a quoted value runs to its closing quote
# (or the end of the line when it is cut off).
_KV_KEYWORDS = ("passw", "passphrase", "secret", "token", "credential", "key")
_KEY_PREFIX_RE = re.compile(r"(?:api|access|private|signing|encryption|master|ssh)[_-]?\Z")
_KV_AT = re.compile(
    r"(?P<key>passw(?:or)?d|passphrase|secret(?:[_-]?key)?|token|credentials?"
    r"|(?:api|access|private|signing|encryption|master|ssh)[_-]?key)"
    r"(?![\w-])\\?[\"']?[ \t]{0,3}(?:=>|:=|[:=])[ \t]{0,3}(?P<q>\\?[\"'])?"
    r"(?P<val>(?(q)(?:(?!(?P=q))[^\n])+|[^\s\"'\\,;&}\]<>]+))",
    re.IGNORECASE,
)
# ``name = <long value>``: starts at the separator, so the engine skips ahead
# in C. A value starting with / is a path or URL.
_GEN_AT = re.compile(r"[:=][ \t]{0,3}\\?[\"']?(?P<val>[A-Za-z0-9_+=.-][A-Za-z0-9_+/=.-]{23,})")

# Dict keys (redact_obj) naming a secret: the text keywords plus auth, cookie, pwd.
_DICT_KEY_RE = re.compile(
    r"[\w.\- ]*?(?:passw(?:or)?d|passphrase|secret|token|credentials?|pwd|auth|authorization"
    r"|cookie|(?:api|access|secret|private|signing|encryption|master|ssh)[_-]?key)",
    re.IGNORECASE,
)

# Values a secret-named key may carry that are not secrets.
_PLACEHOLDER_RE = re.compile(
    r"(?:null|none|nil|true|false|undefined|\*+|x+|<[^<>]*>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)",
    re.IGNORECASE,
)
_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

# Span priorities: lower wins when spans overlap (tokens are most specific).
_P_PEM, _P_CONTEXT, _P_GEN = 20, 21, 22


# --------------------------------------------------------------------------
# Helpers


def _classify(value: str) -> str | None:
    """The token kind if ``value`` is exactly one known token, else None."""
    for tok in _TOKENS:
        m = tok.regex.match(value)
        if m and m.end() == len(value):
            return tok.kind
    return None


def _key_kind(key: str, before: str = "") -> str:
    """The marker kind for the value of a secret-named key (``before``: text just ahead)."""
    k = (before + key).lower()
    if "aws" in k and "secret" in k:
        return "aws_secret_key"
    if "pass" in k or k.endswith("pwd"):
        return "password"
    if "token" in k:
        return "token"
    if "api" in k and "key" in k:
        return "api_key"
    if "authorization" in k or k.endswith("auth"):
        return "authorization"
    return "secret"


def _is_placeholder(value: str) -> bool:
    v = value.strip()
    return not v or _PLACEHOLDER_RE.fullmatch(v) is not None or MARKER_RE.fullmatch(v) is not None


def _high_entropy(value: str) -> bool:
    """A long string mixing upper case, lower case and digits, close to random."""
    if len(value) < 24 or _UUID_RE.fullmatch(value):
        return False
    if value.lower() == value or value.upper() == value or not any(c.isdigit() for c in value):
        return False
    n = len(value)
    entropy = -sum(c / n * math.log2(c / n) for c in Counter(value).values())
    return entropy >= 4.0


def _find_all(low: str, word: str):
    i = low.find(word)
    while i >= 0:
        yield i
        i = low.find(word, i + 1)


def _context_value(text: str, m: re.Match[str], spans: list, kind: str) -> None:
    start, end = m.span("val")
    if m.re is not _URL_RE and not m.groupdict().get("q"):  # unquoted: may end a sentence
        while end > start + 1 and text[end - 1] == ".":
            end -= 1
    val = text[start:end]
    if _is_placeholder(val) or text.startswith("[REDACTED:", start):
        return
    spans.append((start, end, _P_CONTEXT, kind))


def _token_candidates(text: str) -> list[tuple[int, _Token]]:
    """The token formats worth a regex scan: plain substring tests, most strings stop here."""
    t = _TOKENS
    out: list[int] = []
    if "-" in text:
        if "sk-" in text:
            out += (0, 1)
        if "xox" in text:
            out.append(6)
        if "xapp-" in text:
            out.append(7)
    if "_" in text:
        if "k_live_" in text or "k_test_" in text:
            out.append(2)
        if "gh" in text:
            out.append(4)
        if "github_pat_" in text:
            out.append(5)
        if "hf_" in text:
            out.append(9)
    if "A" in text:
        if "AKIA" in text or "ASIA" in text or "ABIA" in text or "ACCA" in text:
            out.append(3)
        if "AIza" in text:
            out.append(8)
    if "eyJ" in text:
        out.append(10)
    return [(i, t[i]) for i in out]


def _spans(text: str) -> list[tuple[int, int, int, str]]:
    """Every (start, end, priority, kind) a detector reports, unsorted."""
    spans: list[tuple[int, int, int, str]] = []
    for prio, tok in _token_candidates(text):
        spans.extend((m.start(), m.end(), prio, tok.kind) for m in tok.regex.finditer(text))
    if "-----BEGIN" in text:
        spans.extend((m.start(), m.end(), _P_PEM, "private_key") for m in _PEM_RE.finditer(text))
    if "@" in text and "://" in text:
        for m in _URL_RE.finditer(text):
            _context_value(text, m, spans, "url_password")

    colon, equals = ":" in text, "=" in text
    low = text.lower()
    if len(low) != len(text):  # a few non-ASCII letters change length when lowered
        low = text.translate(_ASCII_LOWER)
    if "bearer" in low:
        _bearer(text, low, spans)
    if not (colon or equals):
        return spans
    if "authorization" in low:
        for i in _find_all(low, "authorization"):
            m = _AUTH_AT.match(text, i)
            if m:
                scheme = (m.group("scheme") or "").lower()
                kind = "bearer_token" if scheme == "bearer" else "authorization"
                _context_value(text, m, spans, kind)
    for word in _KV_KEYWORDS:
        if word in low:
            _key_values(text, low, word, spans)
    for sep in ":=":
        for i in _find_all(text, sep):
            m = _GEN_AT.match(text, i)
            if m:
                start, end = m.span("val")
                while end > start and text[end - 1] == ".":
                    end -= 1
                if _high_entropy(text[start:end]):
                    spans.append((start, end, _P_GEN, "high_entropy"))
    return spans


def _bearer(text: str, low: str, spans: list) -> None:
    for i in _find_all(low, "bearer"):
        if i and low[i - 1].isalpha():
            continue
        m = _BEARER_AT.match(text, i)
        if m:
            start, end = m.span("val")
            while end > start and text[end - 1] == ".":  # a sentence ending after the token
                end -= 1
            if not text.startswith("[REDACTED:", start):
                spans.append((start, end, _P_CONTEXT, "bearer_token"))


def _key_values(text: str, low: str, word: str, spans: list) -> None:
    for i in _find_all(low, word):
        if word == "key":  # api_key, accessKey, ...: step back to the prefix
            p = _KEY_PREFIX_RE.search(low, max(0, i - 11), i)
            if p is None:
                continue
            i = p.start()
        m = _KV_AT.match(text, i)
        if m:
            before = low[max(0, i - 12):i]
            _context_value(text, m, spans, _key_kind(m.group("key"), before))


# --------------------------------------------------------------------------
# Public API


def redact(text: str) -> tuple[str, list[str]]:
    """Replace every secret in ``text`` with ``[REDACTED:<kind>]``.

    Returns the redacted text and the kinds of the markers written, each once,
    in order of first occurrence. When nothing is found the same string object
    comes back with an empty list.
    """
    spans = _spans(text)
    if not spans:
        return text, []
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
    parts: list[str] = []
    pos = 0
    for start, end, _prio, kind in merged:
        parts.append(text[pos:start])
        parts.append(marker(kind))
        pos = end
    parts.append(text[pos:])
    return "".join(parts), list(dict.fromkeys(kind for *_, kind in merged))


def is_secret_key(name: str) -> bool:
    """True when a dict key names a secret (``password``, ``apiKey``, ``X-Api-Key``...).

    ``tokens``, ``max_tokens``, ``session_key`` and ``secret_name`` are not.
    """
    return _DICT_KEY_RE.fullmatch(name.strip()) is not None


def redact_obj(obj: Any) -> tuple[Any, list[str]]:
    """Redact a JSON-ish value (dicts, lists, tuples, strings, scalars).

    Every string (dict keys included) goes through :func:`redact`. The value of a
    key that names a secret (see :func:`is_secret_key`) is replaced as a whole by
    a marker whatever its shape (string, number, dict, list), except ``None``,
    booleans, empty values and placeholders like ``"${DB_PASSWORD}"``.
    Returns a new object (the input is not modified) and the kinds removed,
    each once, in order of first occurrence.
    """
    found: list[str] = []
    out = _walk(obj, found, None)
    return out, list(dict.fromkeys(found))


def _redact_str(text: str, found: list[str]) -> str:
    out, kinds = redact(text)
    found.extend(kinds)
    return out


def _walk(obj: Any, found: list[str], key_kind: str | None) -> Any:
    if key_kind is not None and obj is not None and not isinstance(obj, bool):
        if isinstance(obj, str):
            if _is_placeholder(obj):
                return obj
            kind = _classify(obj.strip()) or key_kind
        elif not obj and isinstance(obj, (Mapping, list, tuple)):
            return obj
        else:
            kind = key_kind
        found.append(kind)
        return marker(kind)
    if isinstance(obj, str):
        return _redact_str(obj, found)
    if isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            if isinstance(k, str):
                kind = _key_kind(k) if is_secret_key(k) else None
                out[_redact_str(k, found)] = _walk(v, found, kind)
            else:
                out[k] = _walk(v, found, None)
        return out
    if isinstance(obj, list):
        return [_walk(x, found, None) for x in obj]
    if isinstance(obj, tuple):
        return tuple(_walk(x, found, None) for x in obj)
    return obj
