"""The sidecar's shared secret, kept in a private folder beside the workspace (the token file), and the challenge proof.

Every request to ``memtier serve`` needs ``Authorization: Bearer <token>``; the
token lives in ``<memory root>/.sidecar/token`` (mode 0600, its folder 0700,
never inside a ledger) and the server compares it in constant time. A token
file others could read, or one that is not ours, is replaced, not trusted
(:func:`ensure_token`).

Before a client sends the token or any content on a connection it asks
``GET /v1/challenge?nonce=<16-64 random bytes, hex>`` (no token) and checks the
answer ``{"service", "pid", "workspace", "port", "proof"}``: ``proof`` is the hex
HMAC-SHA256, keyed with the token, of ``memtier-sidecar-challenge-v1\n<nonce>\n
<pid>\n<workspace>\n<port>`` (:func:`challenge_proof`). Only a server holding the
token can answer, and naming its own port stops a squatter from relaying the
challenge to the real sidecar. A token file left by a sidecar that did not exit
cleanly is replaced at the next start (:func:`memtier_plugin.bridges.serving.serve`).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
from pathlib import Path

from ..store.files import atomic_write

log = logging.getLogger(__name__)

#: What the challenge proof is computed over (versioned: a new layout is a new prefix).
CHALLENGE_PREFIX = "memtier-sidecar-challenge-v1"


def sidecar_dir(memory_root: Path | str) -> Path:
    """``<memory root>/.sidecar``: token, endpoint and lock (mode 0700; never read as a ledger)."""
    return Path(memory_root) / ".sidecar"


def private_dir(path: Path) -> Path:
    """``path`` as a folder only its owner may enter (0700), made if missing."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, readable by the owner only (0600 from creation)."""
    atomic_write(path, data, mode=0o600)


def ensure_token(path: Path | str, *, rotate: bool = False) -> str:
    """The sidecar token in ``path``: reused when it is a private (0600) file of ours, else a new one.

    A token file others could read is replaced, not trusted: it may have leaked. ``rotate``: always a
    new one (the last sidecar did not exit cleanly, so whatever listened on its port since may hold it).
    """
    path = Path(path)
    if rotate:
        token = secrets.token_urlsafe(32)
        write_private(path, (token + "\n").encode())
        return token
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
    write_private(path, (token + "\n").encode())
    return token


def challenge_proof(token: str | bytes, nonce: str, pid: int, workspace: str, port: int) -> str:
    """The hex HMAC-SHA256 (keyed with the token) a sidecar answers ``GET /v1/challenge?nonce=`` with."""
    key = token.encode() if isinstance(token, str) else token
    msg = f"{CHALLENGE_PREFIX}\n{nonce}\n{pid}\n{workspace}\n{port}".encode()
    return hmac.new(key, msg, hashlib.sha256).hexdigest()


def read_token(path: Path | str) -> str:
    """The token a client sends (first line of the file)."""
    return Path(path).read_text(encoding="ascii").strip()
