"""Where the text says a secret follows: names, flags, headers, URLs, free text.

The context half of redaction (:mod:`memtier_plugin.redact.tokens` is the
other): the value after a name that calls it a secret, whatever its format.

* ``scheme://user:pass@host`` (user and host kept), ``Authorization:`` headers,
  ``Bearer <token>``;
* ``name = value``, ``"name": "value"``, ``name: value``, ``<name>value</name>``
  where the name ends in a secret word: password, passwd, pwd, pass, secret,
  token, credentials, api_key, private_key, client_secret, ... (any value but a
  placeholder such as ``${DB_PASSWORD}``); or in a weaker word (key, auth, sig,
  signature, salt, cookie, pat, hmac, dsn), whose value is redacted only when
  it looks random;
* command-line flags: ``--token X``, ``--password=X``, ``--client-secret X``;
  ``-p`` of mysql, mariadb, mongo, sshpass and ``docker login``; ``-a`` of
  redis-cli; ``-u user:pass`` of curl;
* free text: ``my password is hunter2``, ``the PIN is 4471``, ``the api key for
  staging is ab12cd34``. A bare lowercase word after "password is" counts only
  when it ends the clause and does not describe the password ("the password
  is wrong"); after "token"/"secret"/"api key" the value needs digits or
  symbols.

Linear time: names and phrases are looked for only at occurrences of their
trigger words (one trie-shaped regex over the lowercased text), each occurrence
examined once with a bounded pattern; a value is read once, and occurrences
inside it are skipped.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .tokens import P_CONTEXT, P_GEN, credential_value, has_digit, strip_dots

#: Marker kinds this module writes.
CONTEXT_KINDS: tuple[str, ...] = ("url_password", "aws_secret_key", "password", "token", "api_key", "secret",
                                  "authorization", "bearer_token")

# scheme://user:PASS@host: scheme, user and host stay; the user may be empty
# (redis://:pass@host); the password runs to the last @ of the authority.
_URL_RE = re.compile(r"://[^\s:/@?#]{0,256}:(?P<val>[^\s/?#]{1,256})(?=@)")
# These two run on the lowercased text (same offsets), so the engine can skip
# ahead to the literal; the value is then taken from the original text.
_AUTH_RE = re.compile(
    r"authorization\\?[\"']?[ \t]{0,3}[:=][ \t]{0,3}\\?[\"']?"
    r"(?:(?P<scheme>bearer|basic|token|digest|bot|apikey|ssws)[ \t]+)?"
    r"(?P<val>[^\s\"'`\\,;]+)"
)

_AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "bot", "apikey", "ssws"})

_BEARER_RE = re.compile(
    r"bearer(?<![a-z]bearer)[ \t]+"
    r"(?P<val>(?=[a-z0-9._~+/-]{0,4096}[0-9]|[a-z0-9._~+/-]{20})[a-z0-9._~+/-]+=*)"
)

# ``name = value`` and friends, looked for at each occurrence of a trigger word
# (_TRIGGER_RE): from there, the rest of the identifier, a separator
# and the start of a value. The identifier's start is found by scanning back.
# The value is read only after a secret name: quoted (to its closing quote or
# the end of the line) or up to the next delimiter.
_ASSIGN_AT = re.compile(
    r"(?P<rest>[\w.\-$@]{0,64}+)\\?[\"'`]?\]?[ \t]{0,3}(?:=>|:=|\?=|[:=])(?![:=])[ \t]{0,3}"
    r"(?=\\?[\"'`]|[^\s\"'`\\,;&|}\]<>()\[=])"
)

_IDENT_REV_RE = re.compile(r"[\w.\-$@]{0,64}")

_QUOTED_RE = re.compile(r"(?P<q>\\?[\"'`])(?P<val>(?:(?!(?P=q))[^\n])+)")

_VALUE_RE = re.compile(r"[^\s\"'`\\,;&|}\]<>()\[]+")

_XML_RE = re.compile(r"<(?P<name>[A-Za-z_][\w.\-]{0,40})>(?P<val>[^<\n]{1,512})</(?P=name)>")
# ``--token VALUE`` (the ``--token=VALUE`` form is an assignment above).
_FLAG_RE = re.compile(
    r"--(?<![\w\-]--)(?P<name>[A-Za-z][A-Za-z0-9]*(?:[\-_][A-Za-z0-9]+){0,6})[ \t]+"
    r"(?:(?P<q>[\"'])(?P<qval>[^\"'\n]{1,1024})(?P=q)?|(?P<val>[^\s\"'\-][^\s\"']*))"
)

# Commands whose short flags carry a password: the flag letters, and whether
# the value may be attached (``-pSECRET``).
_CMD_FLAGS = {
    "mysql": ("p", True), "mariadb": ("p", True), "mongo": ("p", False), "sshpass": ("p", True),
    "login": ("p", False), "redis-cli": ("a", False), "curl": ("u", True),
}

_CMD_RE = re.compile(  # a command word not preceded by [\w-] (checked in Python)
    r"(?P<cmd>m(?:ysql(?:dump|admin|import|check|show|slap)?|ariadb(?:-dump|-admin|-import|-check)?"
    r"|ongo(?:sh|dump|restore|export|import)?)|sshpass|redis-cli|curl"
    r"|(?:docker|podman|nerdctl|buildah|skopeo|oras|helm[ \t]+registry)[ \t]+login)(?![\w\-])"
    r"(?P<args>[^\n;|&]{0,512})"
)

_CMD_HINT_RE = re.compile(r"m(?:ysql|ariadb|ongo)|sshpass|redis-cli|curl|login")

_SHORT_FLAG_RE = re.compile(
    r"(?<!\S)-(?P<f>[a-zA-Z])(?P<att>\S*)(?:[ \t]+(?P<next>\"[^\"\n]*\"|'[^'\n]*'|[^\s\-]\S*))?")
# Free text: "my password is hunter2", "the PIN for the door is 4471", matched on
# the lowercased text. The value is checked in Python (see _phrase_value).
_PHRASE_AT = re.compile(
    r"(?P<word>pass(?:word|code|phrase)|passwd|pin(?: code)?|secret(?: key)?|token"
    r"|(?:api|access|private|secret|license|licence) key)(?![a-z0-9_\-])"
    r"(?:[ \t]+(?:for|to|of|on|at)(?:[ \t]+(?:the|my|our|your|this|that|a|an))?[ \t]+[^\s:=]{1,40})?"
    r"[ \t]+(?:is|was|=)[ \t]*:?[ \t]+"
    r"(?:(?P<q>[\"'`])(?P<qval>[^\"'`\n]{1,256})(?P=q)|(?P<val>[^\s\"'`=:,;]{1,256}))"
)

_CLAUSE_END_RE = re.compile(r"[ \t]*(?:[.,;!?)\]\n\"'`]|\Z)|[ \t]+(?:and|but|so|then|please|thanks)(?![a-z])")

# Name words. A name is split into lowercase words (``OPENAI_API_KEY`` -> openai,
# api, key; ``accessToken`` -> access, token); its last word (ignoring
# qualifiers like ``_prod``) decides.
_WORD_RE = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")

_STRONG_WORDS = frozenset({
    "password", "passwd", "pwd", "pw", "pass", "passphrase", "passcode", "secret", "token",
    "credential", "credentials", "creds", "apikey", "privatekey", "secretkey", "accesskey",
    "authtoken", "accesstoken", "refreshtoken", "clientsecret",
})

_STRONG_SUFFIXES = ("password", "passwd", "passphrase", "secret", "token", "apikey", "credentials")

_STRONG_PAIRS = frozenset({
    ("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"), ("signing", "key"),
    ("encryption", "key"), ("master", "key"), ("ssh", "key"), ("auth", "key"), ("license", "key"),
    ("account", "key"), ("client", "key"), ("app", "secret"), ("client", "secret"),
})

_WEAK_WORDS = frozenset({"key", "auth", "sig", "signature", "salt", "cookie", "pat", "hmac", "dsn"})

_QUALIFIERS = frozenset({
    "value", "val", "str", "string", "raw", "b64", "base64", "prod", "production", "dev", "develop",
    "staging", "stage", "test", "live", "main", "primary", "secondary", "old", "new", "current",
    "encoded", "plain", "plaintext", "v1", "v2", "v3",
})

_NOT_SECRET_BEFORE_KEY = frozenset({
    "public", "pub", "primary", "foreign", "sort", "partition", "cache", "idempotency", "object",
    "row", "hash", "lookup", "map", "group", "shard", "routing", "dedup", "dedupe", "unique",
    "composite", "natural", "index", "message", "event", "session", "s3", "dict", "next", "prev",
    "range", "sharding", "bucket", "storage", "api_version", "keyboard", "hot", "short", "long",
})

# Where a secret name or a free-text phrase can start, in the lowercased text:
# the fragments every secret word contains, as one trie-shaped pattern (the
# engine tries only the branch of the character at hand).
_TRIGGER_RE = re.compile(r"p(?:ass|wd?|at|in)|s(?:ecret|ig|alt)|token|c(?:red|ookie)|key|auth|hmac|dsn")

_TRIGGER_WORDS = ("pass", "pw", "pat", "pin", "secret", "sig", "salt", "token", "cred", "cookie", "key",
                  "auth", "hmac", "dsn")  # the same fragments, for str.find
_PHRASE_KEY_OWNERS = ("api ", "access ", "private ", "secret ", "license ", "licence ")

# Values a secret-named key may carry that are not secrets.
_PLACEHOLDER_RE = re.compile(
    r"(?i:null|none|nil|true|false|undefined|\*+|x+|<[^<>]*>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?"
    r"|\$\([^()]*\)|\{\{[^{}]*\}\}|\{[A-Za-z_][\w.]*\}?|%[A-Za-z_]+%|\.{2,}|…+)"
    r"|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+",  # the name of an environment variable: OPENAI_API_KEY
)

# Bare words after "password is" that describe the password rather than being it.
_PHRASE_STOP = frozenset("""
    a an the my your our his her their its this that it not no none null nil empty blank set unset
    wrong incorrect correct invalid valid expired required missing weak strong same different new
    old long short reset saved stored hidden secure insecure unknown forgotten lost ok okay fine good
    bad there here still now also too very only just being always never case sensitive protected
    known shared public private compromised leaked rotated revoked active inactive enabled disabled
    needed mandatory optional default temporary changed encrypted hashed salted masked redacted
    sent generated displayed shown printed visible below above attached included inside out in on at
    for from to of with without by as secret password token key pin same unchanged available
    """.split())


# --------------------------------------------------------------------------
# Names and values


def key_kind(key: str, before: str = "") -> str:
    """The marker kind for the value of a secret-named key (``before``: text just ahead)."""
    k = (before + key).lower()
    if "aws" in k and "secret" in k:
        return "aws_secret_key"
    if "pass" in k or k.endswith(("pwd", "pw")):
        return "password"
    if "token" in k:
        return "token"
    if "api" in k and "key" in k:
        return "api_key"
    if "authorization" in k or k.endswith("auth"):
        return "authorization"
    return "secret"


@lru_cache(maxsize=4096)
def _name_policy(name: str) -> str | None:
    """``"strong"`` (any value is secret), ``"weak"`` (a random value is) or None."""
    words = [w.lower() for w in _WORD_RE.findall(name)]
    while len(words) > 1 and words[-1] in _QUALIFIERS:
        words.pop()
    if not words:
        return None
    last = words[-1]
    prev = words[-2] if len(words) > 1 else ""
    if last in _STRONG_WORDS or (len(last) > 6 and last.endswith(_STRONG_SUFFIXES)):
        return "strong"
    if (prev, last) in _STRONG_PAIRS:
        return "strong"
    if last in _WEAK_WORDS:
        return None if prev in _NOT_SECRET_BEFORE_KEY else "weak"
    return None


def is_placeholder(value: str) -> bool:
    """Empty, null, ``***``, ``<your key>``, ``${DB_PASSWORD}``, ``{key}``, an env var name..."""
    v = value.strip()
    return not v or _PLACEHOLDER_RE.fullmatch(v) is not None


def _is_path(value: str) -> bool:
    return value.startswith(("/", "~/", "./", "../", "file:")) and " " not in value


# --------------------------------------------------------------------------
# Scanners. Each appends (start, end, priority, kind) to ``spans``.


def _add_value(text: str, start: int, end: int, spans: list, kind: str, prio: int = P_CONTEXT) -> None:
    val = text[start:end]
    if is_placeholder(val) or text.startswith("[REDACTED:", start):
        return
    spans.append((start, end, prio, kind))


def _scan_assignments(text: str, triggers: list[int], spans: list) -> None:
    """``name = value`` where the name ends in a secret word (layers 2 and 3)."""
    covered = -1  # end of the last identifier or value dealt with
    for i in triggers:
        if i < covered:
            continue
        m = _ASSIGN_AT.match(text, i)
        if m is None:
            continue
        name_end = m.end("rest")
        back = _IDENT_REV_RE.match(text[max(0, i - 64):i][::-1]).end()
        name = text[i - back:name_end]
        covered = name_end
        if text.endswith("[REDACTED:", 0, i - back):  # the kind in a marker: [REDACTED:token]: ...
            continue
        policy = _name_policy(name)
        if policy is None:
            continue
        q = _QUOTED_RE.match(text, m.end())
        if q:
            start, end = q.span("val")
        else:
            v = _VALUE_RE.match(text, m.end())
            if v is None:  # an empty quoted value: ""
                continue
            if text.startswith(("(", "["), v.end()):  # code: token = re.compile(...), dict[str, ...]
                covered = v.end()
                continue
            start, end = v.start(), strip_dots(text, v.start(), v.end())
        covered = end
        val = text[start:end]
        if policy == "weak":
            if credential_value(val):
                _add_value(text, start, end, spans, "high_entropy", P_GEN)
        elif name.strip("-_$@").lower() == "token" and val.isalpha() and len(val) < 20:
            continue  # {token: logprob}: a bare "token" is often a word of text, not a credential
        elif not _is_path(val):
            before = text[max(0, i - back - 12):i - back]
            _add_value(text, start, end, spans, key_kind(name.lstrip("-"), before))


def _scan_xml(text: str, spans: list) -> None:
    for m in _XML_RE.finditer(text):
        policy = _name_policy(m.group("name"))
        start, end = m.span("val")
        val = m.group("val").strip()
        if policy == "strong" or (policy == "weak" and credential_value(val)):
            _add_value(text, start, end, spans, key_kind(m.group("name")) if policy == "strong" else "high_entropy")


def _scan_flags(text: str, low: str, spans: list) -> None:
    """``--password VALUE`` and the short flags of commands known to take a password."""
    if "--" in text:
        for m in _FLAG_RE.finditer(text):
            policy = _name_policy(m.group("name"))
            if policy is None:
                continue
            grp = "qval" if m.group("q") else "val"
            start, end = m.span(grp)
            val = text[start:end]
            if policy == "weak":
                if credential_value(val):
                    _add_value(text, start, end, spans, "high_entropy", P_GEN)
            elif not _is_path(val):
                _add_value(text, start, end, spans, key_kind(m.group("name")))
    if not _CMD_HINT_RE.search(low):
        return
    pos = 0
    while (m := _CMD_RE.search(text, pos)) is not None:
        base, args_end = m.span("args")
        inner = _CMD_HINT_RE.search(low, base, args_end)  # another command in the arguments:
        if inner is not None:                             # its flags are its own
            args_end = inner.start()
        pos = args_end
        if m.start() and (text[m.start() - 1].isalnum() or text[m.start() - 1] in "_-"):
            continue
        cmd = m.group("cmd")
        key = "login" if cmd.endswith("login") else next(
            (k for k in _CMD_FLAGS if cmd.startswith(k)), cmd)
        letter, attached = _CMD_FLAGS[key]
        for f in _SHORT_FLAG_RE.finditer(text[base:args_end]):
            if f.group("f") != letter:
                continue
            if f.group("att"):
                if not attached:
                    continue
                start, end = base + f.start("att"), base + f.end("att")
            elif f.group("next"):
                start, end = base + f.start("next"), base + f.end("next")
            else:
                continue
            if letter == "u":  # curl -u user:password: the user stays
                colon = text.find(":", start, end)
                if colon < 0:
                    continue
                start = colon + 1
                if start >= end:
                    continue
            if text[start] in "\"'" and end - start > 1 and text[end - 1] == text[start]:
                start, end = start + 1, end - 1
            while end > start and text[end - 1] in "`'\")]":  # `mysql -p` in backticks
                end -= 1
            if any(c.isalnum() for c in text[start:end]):
                _add_value(text, start, end, spans, "password")


def _phrase_value(word: str, val: str, quoted: bool, ends_clause: bool) -> bool:
    """Whether the word after "password is" is the password (not a description of it)."""
    if val.lower() in _PHRASE_STOP and not quoted:
        return False
    digits = has_digit(val)
    if word.startswith("pin"):
        return sum(c.isdigit() for c in val) >= 4
    evidence = quoted or digits or not val.isalpha() or (val[1:].lower() != val[1:])
    if word.startswith("pass"):
        bare_word = ends_clause and len(val) >= 4 and not val.endswith(("ed", "ing", "ly"))
        return evidence or bare_word
    return evidence and len(val) >= 6 and (digits or quoted or not val.isalnum())


def _scan_phrases(text: str, low: str, triggers: list[int], spans: list) -> None:
    covered = -1
    for i in triggers:
        if low.startswith("key", i):  # "api key is ...": the phrase starts at the owner word
            if not low.endswith(_PHRASE_KEY_OWNERS, 0, i):
                continue
            i -= next(len(w) for w in _PHRASE_KEY_OWNERS if low.endswith(w, 0, i))
        if i < covered or (i and (low[i - 1].isalnum() or low[i - 1] in "_-")):
            continue
        m = _PHRASE_AT.match(low, i)
        if m is None:
            continue
        start, end = m.span("qval" if m.group("q") else "val")
        covered = end
        while not m.group("q") and end > start + 1 and text[end - 1] in ".!?)]":  # the sentence ends
            end -= 1
        val = text[start:end]
        if not any(c.isalnum() for c in val):  # "my password is ..."
            continue
        word = m.group("word")
        ends_clause = _CLAUSE_END_RE.match(low, end) is not None
        if _phrase_value(word, val, bool(m.group("q")), ends_clause):
            kind = ("password" if word.startswith(("pass", "pin")) else "token" if word == "token"
                    else "api_key" if word.startswith("api") else "secret")
            _add_value(text, start, end, spans, kind)


# A URL password holding a raw '/', '#' or '?' (``postgres://app:ab/c#d@db:5432/x``): it runs to the last
# '@' before whitespace that a host (and port) follows. A port (``http://localhost:8080/@vite/client``)
# is not a password: checked in Python.
_URL_RAW_RE = re.compile(
    r"://[^\s:/@?#]{0,256}:(?P<val>[^\s]{1,256})@(?=[A-Za-z0-9\[][A-Za-z0-9.\-_~%\[\]]{0,252}(?::[0-9]{1,5})?"
    r"(?:[/?#\s\"'`>),;\]]|\Z))"
)
_PORT_RE = re.compile(r"[0-9]{1,5}")
_URL_SEP_RE = re.compile(r"[/?#]")

# Credential files. ``.netrc``: ``machine HOST login USER password PASS`` (one line or several).
_NETRC_RE = re.compile(
    r"(?<![\w\-])(?:machine[ \t]+\S{1,256}|default)(?:\s{1,64}(?:login|account|port)[ \t]+\S{1,256}){0,3}"
    r"\s{1,64}password[ \t]+(?P<val>\S{1,1024})"
)
# ``.pgpass``: ``host:port:database:user:password``, a whole word (found at its ``:port:``).
_PGPASS_PORT_RE = re.compile(r":(?:[0-9]{1,5}|\*):")
_PGPASS_HOST_REV_RE = re.compile(r"[\w.\-\[\]*]{1,253}")
_PGPASS_REST_RE = re.compile(
    r"[^\s:\"'`]{1,128}:[^\s:\"'`]{1,128}:(?P<val>(?:\\.|[^\s\\:\"'`]){1,512})(?![^\s\"'`])")
# .NET config: ``<add key="DbPassword" value="..." />``.
_ADD_KEY_RE = re.compile(r"key[ \t]*=[ \t]*\"(?P<name>[^\"\n]{1,64})\"[ \t]+value[ \t]*=[ \t]*\"(?P<val>[^\"\n]{1,1024})\"")

# ``Cookie:`` / ``Set-Cookie:`` headers: a session cookie's value is a credential (matched lowercased).
_COOKIE_RE = re.compile(r"(?<![\w\-])(?:set-)?cookie\\?[\"']?[ \t]*:[ \t]*(?P<pairs>[^\n\"'`]{1,4096})")
_COOKIE_PAIR_RE = re.compile(r"(?P<name>[^=;,\s]{1,128})=(?P<val>[^;,\s]{1,4096})")
_SESSION_COOKIE_RE = re.compile(r"sess|sid|auth|token|jwt|remember|login|secret|key")
_COOKIE_ATTRS = frozenset({"path", "domain", "expires", "max-age", "samesite", "priority", "version"})
# ``openssl ... -pass pass:X`` (also -passin, -passout) and ``-k X``; ``aws configure set NAME VALUE``.
_OPENSSL_PASS_RE = re.compile(r"(?<![\w\-])-(?:pass(?:in|out)?[ \t]+pass:|k[ \t]+)(?P<val>[^\s\"'`]{1,1024})")
_CONFIGURE_SET_RE = re.compile(r"(?<![\w\-])configure[ \t]+set[ \t]+(?P<name>[\w.\-]{1,128})[ \t]+(?P<val>[^\s\"'`]{1,1024})")

# A call whose name says it takes a secret: ``login("admin", "hunter2secret")``, ``set_password(...)``,
# ``HTTPBasicAuth("u", "p")``, ``Token("...")``, ``auth=("user", "pass")``. Found at the secret word
# (lowercased text); the callee's start is found by scanning back, its arguments read once.
_CALL_AT_RE = re.compile(r"(?:log_?in|sign_?in|logon|authenticate|auth|pass(?:word|wd)?|secret|token|credentials?"
                         r"|api_?key|access_?key|private_?key)[a-z0-9_]{0,24}[ \t]*=?[ \t]*\(")
_CALLEE_REV_RE = re.compile(r"[\w.]{0,64}")
_ARGS_RE = re.compile(r"[^()\n]{0,512}\)")
_ARG_RE = re.compile(r"[ \t]*(?:(?P<q>[\"'`])(?P<val>(?:(?!(?P=q))[^\\\n]|\\.){1,512})(?P=q)|[^,]*)[ \t]*(?:,|\Z)")
_LOGIN_WORDS = frozenset({"login", "signin", "logon", "authenticate", "auth", "basicauth", "digestauth",
                          "credentials", "credential", "creds"})
_SETTER_WORDS = frozenset({"set", "with", "use", "put", "store", "save", "update", "new", "make"})
_GETTER_WORDS = frozenset({"get", "read", "fetch", "load", "lookup", "find", "has", "delete", "del", "remove",
                           "rotate", "revoke", "list", "describe", "check", "verify", "validate", "is", "hash",
                           "count", "max", "num", "parse", "encode", "decode", "mask", "redact", "strip"})


def _scan_urls(text: str, spans: list) -> None:
    for m in _URL_RE.finditer(text):
        _add_value(text, *m.span("val"), spans, "url_password")
    for m in _URL_RAW_RE.finditer(text):
        val = m.group("val")
        sep = _URL_SEP_RE.search(val)
        if sep is None or _PORT_RE.fullmatch(val[:sep.start()]):  # no raw '/#?' (the rule above), or a port
            continue
        _add_value(text, *m.span("val"), spans, "url_password")


def _scan_headers_and_tools(text: str, low: str, spans: list) -> None:
    """Session cookies, ``openssl -pass pass:X`` / ``-k X``, ``aws configure set NAME VALUE``."""
    if "cookie" in low:
        for m in _COOKIE_RE.finditer(low):
            base = m.start("pairs")
            for p in _COOKIE_PAIR_RE.finditer(text[base:m.end()]):
                name, val = p.group("name").lower(), p.group("val")
                if name in _COOKIE_ATTRS:
                    continue
                if (_SESSION_COOKIE_RE.search(name) and len(val) >= 8) or credential_value(val):
                    _add_value(text, base + p.start("val"), base + p.end("val"), spans, "secret")
    if "openssl" in low and ("pass:" in low or "-k" in low):
        for m in _OPENSSL_PASS_RE.finditer(text):
            _add_value(text, *m.span("val"), spans, "password")
    if "configure" in low and " set" in low:
        for m in _CONFIGURE_SET_RE.finditer(text):
            if _name_policy(m.group("name")) == "strong" or (
                    _name_policy(m.group("name")) == "weak" and credential_value(m.group("val"))):
                _add_value(text, *m.span("val"), spans, key_kind(m.group("name")))


def _scan_credential_files(text: str, low: str, spans: list) -> None:
    if "password" in low and ("machine" in text or "default" in text):
        for m in _NETRC_RE.finditer(text):
            _add_value(text, *m.span("val"), spans, "password")
    if text.count(":") >= 4:
        pos = 0
        while (m := _PGPASS_PORT_RE.search(text, pos)) is not None:
            pos = m.end() - 1
            s = m.start()
            back = _PGPASS_HOST_REV_RE.match(text[max(0, s - 253):s][::-1])
            if back is None:
                continue
            h0 = s - back.end()
            host = text[h0:s]
            if h0 and text[h0 - 1] not in " \t\r\n\"'`":
                continue
            if host != "*" and not any(c.isalpha() or c == "." for c in host):
                continue
            rest = _PGPASS_REST_RE.match(text, m.end())
            if rest is not None:
                _add_value(text, *rest.span("val"), spans, "password")
                pos = rest.end()
    if "value" in low and "key" in low:
        for m in _ADD_KEY_RE.finditer(text):
            policy = _name_policy(m.group("name"))
            val = m.group("val")
            if policy == "strong" or (policy == "weak" and credential_value(val)):
                kind = key_kind(m.group("name")) if policy == "strong" else "high_entropy"
                _add_value(text, *m.span("val"), spans, kind)


def _call_args(text: str, start: int, end: int) -> list[tuple[int, int] | None]:
    """The positional arguments of a call, ``text[start:end]``: each a string literal's value span, or None."""
    out: list[tuple[int, int] | None] = []
    pos = start
    while pos < end:
        m = _ARG_RE.match(text, pos, end)
        if m is None or m.end() == pos:
            break
        if m.group("q"):
            out.append(m.span("val"))
        else:
            arg = text[m.start():m.end()].rstrip(", \t")
            if "=" in arg and not arg.lstrip().startswith(("=", "\"", "'")):  # a keyword argument: its own rule
                break
            out.append(None)
        pos = m.end()
    return out


def _scan_calls(text: str, low: str, spans: list) -> None:
    """String literals passed to a call whose name says it takes a secret (see _CALL_AT_RE)."""
    pos = 0
    while (m := _CALL_AT_RE.search(low, pos)) is not None:
        pos = m.end()
        i = m.start()
        back = _CALLEE_REV_RE.match(text[max(0, i - 64):i][::-1]).end()
        callee = text[i - back:m.end()].rstrip("( \t=")
        args_m = _ARGS_RE.match(text, m.end())
        if args_m is None:
            continue
        if callee.endswith("="):
            callee = callee[:-1].rstrip()
        words = [w.lower() for w in _WORD_RE.findall(callee.rsplit(".", 1)[-1])]
        if not words or words[0] in _GETTER_WORDS:
            continue
        args = _call_args(text, m.end(), args_m.end() - 1)
        literals = [a for a in args if a is not None]
        if not literals:
            continue
        joined = "".join(words)
        if "=" in text[i:m.end()] or any(w in _LOGIN_WORDS for w in words[-2:]) or joined in _LOGIN_WORDS:
            # login("user", "pass"), auth=("user", "pass"): the arguments after the first
            picks = [a for a in args[1:] if a is not None]
            kind = "password"
        elif _name_policy(callee.rsplit(".", 1)[-1]) == "strong" or words[0] in _SETTER_WORDS:
            picks = [args[0] if words[0] not in _SETTER_WORDS else literals[-1]]
            picks = [p for p in picks if p is not None]
            kind = key_kind(joined)
        else:
            continue
        for start, end in picks:
            val = text[start:end]
            if len(val) >= 4 and not _is_path(val) and " " not in val.strip():
                _add_value(text, start, end, spans, kind)
        pos = max(pos, args_m.end())



def _triggers(low: str) -> list[int]:
    """Where a secret word may start, sorted: one regex pass on short text, str.find on long."""
    if len(low) < 4096:
        first = _TRIGGER_RE.search(low)
        return [m.start() for m in _TRIGGER_RE.finditer(low, first.start())] if first else []
    out: list[int] = []
    for word in _TRIGGER_WORDS:
        i = low.find(word)
        while i >= 0:
            out.append(i)
            i = low.find(word, i + len(word))
    out.sort()
    return out


def scan_context(text: str, low: str, spans: list) -> None:
    """Every value the text calls a secret (``low``: its lowercased copy, same offsets)."""
    if "://" in text and "@" in text:
        _scan_urls(text, spans)
    if "bearer" in low:
        for m in _BEARER_RE.finditer(low):
            start, end = m.span("val")
            _add_value(text, start, strip_dots(text, start, end), spans, "bearer_token")
    colon, equals = ":" in text, "=" in text
    if (colon or equals) and "authorization" in low:
        for m in _AUTH_RE.finditer(low):
            val = m.group("val")
            if len(val) < 4 or val in _AUTH_SCHEMES:  # ``Authorization: Bearer`` alone, f"..."
                continue
            kind = "bearer_token" if m.group("scheme") == "bearer" else "authorization"
            _add_value(text, *m.span("val"), spans, kind)
    triggers = _triggers(low)
    if triggers:
        if colon or equals:
            _scan_assignments(text, triggers, spans)
        if "</" in text:
            _scan_xml(text, spans)
        _scan_phrases(text, low, triggers, spans)
        if "(" in text:
            _scan_calls(text, low, spans)
    _scan_credential_files(text, low, spans)
    _scan_headers_and_tools(text, low, spans)
    _scan_flags(text, low, spans)
