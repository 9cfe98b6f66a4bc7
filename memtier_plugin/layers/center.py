"""The common direction of prompts, taken out before a prompt is compared with standing items.

bge-small puts every prompt close to one direction: what prompts share as
prompts (a question's form, a request's words), whatever they are about. Its
cosine to a standing item therefore mixes how near the item is to what the
prompt is about with how near it is to prompts in general, and the second
part is the same for every prompt: "I'm wary of pharmaceuticals and prefer to
manage minor ailments without medication" sits nearer to prompts in general
than "I'm severely allergic to cats" (0.41 vs 0.33 to their mean), so it was
the nearest item to "What pet would suit me?". Subtracting the
mean vector of many ordinary user prompts from the prompt's vector (and
normalising again) leaves what this prompt is about. On PrefEval dev the
question's own preference is then the user's nearest item for 0.877 of the
questions instead of 0.838, and on the hand-written held-out probes for
0.71-0.88 instead of 0.61-0.80 (docs/standing.md, "The common direction of
prompts").

The center is data, never code: a file holding ``memtier_prompt_center: 1``,
the embedder whose query vectors it was computed from, and the vector
(``memtier train center`` writes one; ``data/prompt_center.yaml`` is the
shipped one, the mean of 3,000 LongMemEval-S dev user turns). It is used only
with that embedder (``standing.center``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ..errors import ConfigError
from ..store.artifacts import FileCache, bounded_number, load_named, read_artifact

log = logging.getLogger(__name__)

MARKER = "memtier_prompt_center"
VERSION = 1
SHIPPED = Path(__file__).resolve().parent.parent / "data" / "prompt_center.yaml"
MAX_BYTES = 256 * 1024
MAX_DIM = 4096


@dataclass
class Center:
    """The mean query vector of ordinary prompts, for one embedder."""

    vector: np.ndarray
    embedder: str  # the embedder's name whose query vectors it is the mean of
    source: str = "<built-in>"
    meta: dict = field(default_factory=dict)

    def apply(self, query_vector: np.ndarray) -> np.ndarray | None:
        """The prompt's unit vector without the common direction; None when that leaves nothing (or the
        dimensions differ)."""
        q = np.asarray(query_vector, dtype=np.float32)
        if q.shape != self.vector.shape:
            return None
        r = q - self.vector
        n = float(np.linalg.norm(r))
        return r / n if n > 1e-6 else None

    def to_doc(self) -> dict[str, Any]:
        return {MARKER: VERSION, "embedder": self.embedder, "vector": [round(float(x), 6) for x in self.vector],
                **({"meta": self.meta} if self.meta else {})}


def fit(query_vectors: Iterable[np.ndarray], embedder: str, meta: dict | None = None) -> Center:
    """The mean of ``query_vectors`` (each normalised first)."""
    vecs = [np.asarray(v, dtype=np.float64) for v in query_vectors]
    if not vecs:
        raise ConfigError("no prompts to compute the center from")
    m = np.vstack([v / max(float(np.linalg.norm(v)), 1e-12) for v in vecs]).mean(axis=0)
    return Center(m.astype(np.float32), embedder, meta={"prompts": len(vecs), **(meta or {})})


def from_doc(doc: Any, source: str) -> Center:
    """A validated center from a parsed document; ConfigError (one line naming the key) otherwise."""
    if not isinstance(doc, dict) or doc.get(MARKER) != VERSION:
        raise ConfigError(f"{source}: not a prompt center file (no '{MARKER}: {VERSION}' key)")
    extra = sorted(set(doc) - {MARKER, "embedder", "vector", "meta"})
    if extra:
        raise ConfigError(f"{source}: {extra[0]}: unknown key (expected embedder, vector, meta)"[:300])
    name = doc.get("embedder")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{source}: embedder: expected the name of the embedder the center was computed with")
    raw = doc.get("vector")
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_DIM:
        raise ConfigError(f"{source}: vector: expected a list of 1-{MAX_DIM} numbers")
    vec = np.array([bounded_number(x, f"{source}: vector[{i}]", 1.0) for i, x in enumerate(raw)], dtype=np.float32)
    if float(np.linalg.norm(vec)) >= 1.0 + 1e-4:
        raise ConfigError(f"{source}: vector: a mean of unit vectors has a norm below 1, got "
                          f"{float(np.linalg.norm(vec)):.3f}")
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    return Center(vec, name.strip(), source, meta)


_CACHE = FileCache(limit=8)


def _read(path: Path) -> Center:
    doc = read_artifact(path, MARKER, reading="the prompt center", kind="a prompt center file",
                        hint="; write one with `memtier train center`", max_bytes=MAX_BYTES)
    return from_doc(doc, str(path))


def load(path: str | Path | None = None) -> Center:
    """The center file at ``path`` (None: the shipped one), read and validated once per (path, size, mtime)."""
    return _CACHE.get(Path(path) if path else SHIPPED, _read, reading="the prompt center")


def for_config(config, workspace: Path | None = None) -> Center | None:
    """The center ``standing.center`` names, or None (``none``); ``standing.center_file`` (relative: to the
    workspace) replaces the shipped one."""
    if config.standing.center == "none":
        return None
    return load_named("standing.center_file", config.standing.center_file,
                      workspace if workspace is not None else config.workspace, load)


def resolve(config, embedder: Any) -> Center | None:
    """The center to use with ``embedder``: None when ``standing.center`` is none, there is no embedder, the
    center was computed with another one, or it cannot be read (logged; a bad ``center_file`` already stopped
    startup)."""
    from .gate import embedder_name  # the name an embedder's learned files are fitted under

    if embedder is None:
        return None
    try:
        center = for_config(config)
    except Exception as exc:
        log.warning("the prompt center is not used: %s", exc)
        return None
    return center if center is not None and embedder_name(embedder) == center.embedder else None
