"""Dense vectors of the index's documents, held for φsem: rows appended on the critical path without copying.

The retriever keeps one :class:`Rows` per index (episodic, semantic); a row is
a document's key vector from the vector cache (:mod:`.vector_cache`), zeros for
a document not embedded yet (cosine 0 until it is).
"""

from __future__ import annotations

import numpy as np


class Rows:
    """Append-only (n, dim) float32 rows with spare capacity: appending a prompt's one new vector to 10k rows
    copies nothing (``np.vstack`` copied all of them on every prompt). A view handed out stays valid.

    The first ``embedded`` rows are vectors; rows past them are zeros standing for documents not
    embedded yet (cosine 0 until :meth:`put` fills them).
    """

    def __init__(self, first: np.ndarray):
        first = np.asarray(first, dtype=np.float32)
        n = len(first)
        # spare rows from the start: the next prompts' entries never copy the matrix on the critical path
        self._buf = np.zeros((n + max(64, n // 4), first.shape[1]), dtype=np.float32)
        self._buf[:n] = first
        self.n = self.embedded = n

    def __len__(self) -> int:
        return self.n

    def _reserve(self, need: int) -> None:
        if need > len(self._buf):
            buf = np.zeros((max(need, 2 * len(self._buf), 64), self._buf.shape[1]), dtype=np.float32)
            buf[:self.n] = self._buf[:self.n]
            self._buf = buf

    def append(self, new: np.ndarray) -> Rows:
        """Embedded rows after the embedded ones (zero rows past them are overwritten)."""
        return self.put(self.embedded, new)

    def put(self, start: int, new: np.ndarray) -> Rows:
        end = start + len(new)
        self._reserve(end)
        self._buf[start:end] = new
        self.n = max(self.n, end)
        if start <= self.embedded:
            self.embedded = max(self.embedded, end)
        return self

    def pad(self, n: int) -> Rows:
        """Zero rows up to ``n`` (documents not embedded yet)."""
        if n > self.n:
            self._reserve(n)
            self._buf[self.n:n] = 0.0
            self.n = n
        return self

    def view(self) -> np.ndarray:
        return self._buf[:self.n]
