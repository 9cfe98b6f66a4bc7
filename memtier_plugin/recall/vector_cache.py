"""On-disk vector cache for one embedder: append-only keys/rows files, torn tails cut on open.

Derived data under ``memory/.index/vectors/``: deleting it only costs
recomputation (see :class:`VectorCache`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path

import numpy as np

from ..models.embedders import Embedder
from ..errors import MemtierError

try:  # POSIX advisory locks guard concurrent appends; elsewhere appends are unlocked.
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


class VectorCache:
    """Append-only on-disk cache of one embedder's vectors, in directory ``path``.

    Two files per embedder: ``<name>-<dim>.keys`` (little-endian uint64, the first
    8 bytes of blake2b(name NUL text)) and ``<name>-<dim>.f32`` (raw float32 rows).
    Row i of one belongs to key i of the other; a batch is appended rows first,
    keys second, under an advisory lock. On open, both are cut to their common
    whole-record prefix, so a crash mid-append loses only that batch. Deleting
    the files is safe: missing vectors are recomputed. The cache is derived data.
    """

    def __init__(self, path: str | Path, embedder: Embedder) -> None:
        self.dir = Path(path)
        self.embedder = embedder
        self.dim = int(embedder.dim)
        stem = f"{_slug(embedder.name)}-{self.dim}"
        self.keys_path = self.dir / f"{stem}.keys"
        self.vecs_path = self.dir / f"{stem}.f32"
        self._lock_path = self.dir / f"{stem}.lock"
        self._prefix = embedder.name.encode("utf-8") + b"\x00"
        self._row: dict[int, int] = {}
        self._buf = np.zeros((0, self.dim), dtype=np.float32)  # rows [0, _n) are valid
        self._n = 0
        self._loaded = False

    def __len__(self) -> int:
        self._load()
        return len(self._row)

    def key(self, text: str) -> int:
        digest = hashlib.blake2b(self._prefix + text.encode("utf-8"), digest_size=8).digest()
        return int.from_bytes(digest, "little")

    def _load(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        if not (self.keys_path.is_file() and self.vecs_path.is_file()):
            return
        keys = np.fromfile(self.keys_path, dtype="<u8", count=self.keys_path.stat().st_size // 8)
        n_rows = self.vecs_path.stat().st_size // (4 * self.dim)
        n = min(len(keys), n_rows)
        mat = np.fromfile(self.vecs_path, dtype="<f4", count=n * self.dim).reshape(n, self.dim)
        bad = np.flatnonzero(~np.isfinite(mat).all(axis=1))
        if bad.size:  # garbage in a torn tail: keep the prefix before it
            n = int(bad[0])
        if n < len(keys) or n < n_rows:
            log.warning(
                "vector cache %s: ignoring a torn tail (%d keys, %d rows, %d kept)", self.keys_path, len(keys), n_rows, n
            )
        self._buf = np.array(mat[:n], dtype=np.float32)
        self._n = n
        self._row = {int(k): i for i, k in enumerate(keys[:n].tolist())}

    def get(self, text: str) -> np.ndarray:
        return self.get_many([text])[0]

    def get_many(self, texts: list[str], *, max_new: int | None = None) -> np.ndarray | None:
        """Vectors for ``texts`` in order, shape (n, dim); embeds only uncached texts. ``max_new``: None
        (embedding nothing) when more than that many distinct texts are not cached."""
        return self.get_mixed([(t, None) for t in texts], 0.0, max_new=max_new)

    def mix_key(self, context: str, weight: float) -> int:
        """The key of a mixed vector (see :meth:`get_mixed`): its context text and weight."""
        tag = f"mix {weight!r}".encode("ascii") + b"\x00"
        digest = hashlib.blake2b(self._prefix + tag + context.encode("utf-8"), digest_size=8).digest()
        return int.from_bytes(digest, "little")

    def get_mixed(self, items: list[tuple[str, str | None]], weight: float, *,
                  max_new: int | None = None) -> np.ndarray | None:
        """Unit vectors for (text, context) items in order: the text's own vector when context is None, else
        normalise((1 − weight)·v(text) + weight·v(context)). A mixed vector is cached under its own key
        (:meth:`mix_key`), so the cache holds one row per item, not two; the parts are not kept. ``max_new``:
        None (embedding nothing) when more than that many distinct texts would have to be embedded."""
        self._load()
        keys = [self.key(t) if c is None else self.mix_key(c, weight) for t, c in items]
        todo: dict[int, tuple[str, str | None]] = {}
        for k, item in zip(keys, items):
            if k not in self._row and k not in todo:
                todo[k] = item
        need: dict[str, None] = {}  # texts to embed: a part already cached as a plain vector is read instead
        for text, context in todo.values():
            if context is None or self.key(text) not in self._row:
                need[text] = None
            if context is not None and self.key(context) not in self._row:
                need[context] = None
        if max_new is not None and len(need) > max_new:
            return None
        if todo:
            texts = list(need)
            vecs = np.asarray(self.embedder.embed(texts), dtype=np.float32) if texts else \
                np.zeros((0, self.dim), np.float32)
            if vecs.shape != (len(texts), self.dim):
                raise MemtierError(f"embedder {self.embedder.name} returned shape {vecs.shape}, "
                                   f"expected {(len(texts), self.dim)}")
            fresh = dict(zip(texts, vecs))

            def vec(text: str) -> np.ndarray:
                return fresh[text] if text in fresh else self._buf[self._row[self.key(text)]]

            out = np.empty((len(todo), self.dim), np.float32)
            for i, (text, context) in enumerate(todo.values()):
                if context is None:
                    out[i] = fresh[text]
                else:
                    v = (1.0 - weight) * vec(text) + weight * vec(context)
                    out[i] = v / max(float(np.linalg.norm(v)), 1e-12)
            self._store(list(todo), out)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._buf[[self._row[k] for k in keys]]

    def _store(self, new_keys: list[int], vecs: np.ndarray) -> None:
        """Add rows for new keys: appended to the files and to the in-memory buffer."""
        self._append(new_keys, vecs)
        base = self._n
        if base + len(vecs) > len(self._buf):  # grow by doubling: amortised O(1) per row
            grown = np.zeros((max(2 * len(self._buf), base + len(vecs), 64), self.dim), dtype=np.float32)
            grown[:base] = self._buf[:base]
            self._buf = grown
        self._buf[base: base + len(vecs)] = vecs
        self._n = base + len(vecs)
        for i, k in enumerate(new_keys):
            self._row[k] = base + i

    def _append(self, keys: list[int], vecs: np.ndarray) -> None:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            with open(self._lock_path, "ab") as lock:
                if fcntl is not None:
                    fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
                with open(self.vecs_path, "ab") as fv, open(self.keys_path, "ab") as fk:
                    # Align both files to their common whole-record prefix first, so
                    # a torn tail left by a crash never shifts later rows.
                    n = min(fk.seek(0, os.SEEK_END) // 8, fv.seek(0, os.SEEK_END) // (4 * self.dim))
                    fk.truncate(n * 8)
                    fv.truncate(n * 4 * self.dim)
                    fv.write(np.ascontiguousarray(vecs, dtype="<f4").tobytes())
                    fv.flush()
                    fk.write(np.asarray(keys, dtype="<u8").tobytes())
        except OSError as e:  # a cache that cannot be written only costs recomputation
            log.warning("vector cache %s not written: %s", self.dir, e)
