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

**The learned map.** Without the common direction, bge-small's cosine still
cannot tell which of a user's preferences a question is about when they are
linked by what the world knows rather than by words ("I get seasick" and
"How do I get from Athens to Santorini?"). A center file may also hold a map
``q -> q + (q U) V^T`` (``U``, ``V``: dimension x rank), applied to the
prompt's vector after the center is taken out and before it is normalised
again: fitted (:func:`fit_map`) so that among each user's preferences the
question's own one is nearest (a softmax over the user's items, an L2 pull
toward no map, then the best low-rank part). Trained on PrefEval-format sets
of users' preferences and questions (``memtier train center --preferences``;
docs/standing.md, "A learned map of what prompts are about"). Only the
prompt's vector is mapped: the items' stored vectors stay as they are, and
``standing.center_map: false`` leaves the map out.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ..errors import ConfigError
from ..store.artifacts import FileCache, artifact_doc, bounded_number, load_named, read_artifact

log = logging.getLogger(__name__)

MARKER = "memtier_prompt_center"
VERSION = 1
SHIPPED = Path(__file__).resolve().parent.parent / "data" / "prompt_center.yaml"
MAX_BYTES = 1024 * 1024  # the vector and a map of rank 64 over 1,024 dimensions, base64
MAX_DIM = 4096
MAX_RANK = 64
MAP_BOUND = 100.0  # a map's entry (an L2-pulled map of unit vectors stays far under it)


@dataclass
class Center:
    """The mean query vector of ordinary prompts, for one embedder."""

    vector: np.ndarray
    embedder: str  # the embedder's name whose query vectors it is the mean of
    source: str = "<built-in>"
    meta: dict = field(default_factory=dict)
    map: "Map | None" = None  # the learned map (the module docstring), applied after the center

    def apply(self, query_vector: np.ndarray) -> np.ndarray | None:
        """The prompt's unit vector without the common direction (and mapped, with a map); None when that leaves
        nothing (or the dimensions differ)."""
        q = np.asarray(query_vector, dtype=np.float32)
        if q.shape != self.vector.shape:
            return None
        r = q - self.vector
        n = float(np.linalg.norm(r))
        if n <= 1e-6:
            return None
        r = r / n
        if self.map is not None:
            r = self.map.apply(r)
            n = float(np.linalg.norm(r))
            if n <= 1e-6:
                return None
            r = r / n
        return r.astype(np.float32, copy=False)

    def without_map(self) -> "Center":
        return replace(self, map=None) if self.map is not None else self

    def to_doc(self) -> dict[str, Any]:
        return {MARKER: VERSION, "embedder": self.embedder, "vector": [round(float(x), 6) for x in self.vector],
                **({"map": self.map.to_doc()} if self.map is not None else {}),
                **({"meta": self.meta} if self.meta else {})}


@dataclass
class Map:
    """``q -> q + (q u) v^T``: ``u`` and ``v`` are dimension x rank."""

    u: np.ndarray
    v: np.ndarray
    meta: dict = field(default_factory=dict)

    def apply(self, q: np.ndarray) -> np.ndarray:
        return q + (q @ self.u) @ self.v.T

    def to_doc(self) -> dict[str, Any]:
        """``u`` and ``v`` as one base64 line (float32, little-endian) per rank component: numbers a YAML list
        would hold in tens of thousands of nodes."""
        def b64(m: np.ndarray) -> list[str]:
            return [base64.b64encode(np.ascontiguousarray(col, dtype="<f4").tobytes()).decode("ascii") for col in m.T]

        return {"rank": int(self.u.shape[1]), "dtype": "float32-le", "u": b64(self.u), "v": b64(self.v),
                **({"meta": self.meta} if self.meta else {})}


def map_from_doc(doc: Any, dim: int, where: str) -> Map:
    """A validated map of vectors of ``dim`` dimensions; ConfigError naming the key otherwise."""
    if not isinstance(doc, dict):
        raise ConfigError(f"{where}: expected a mapping (rank, dtype, u, v)")
    extra = sorted(set(doc) - {"rank", "dtype", "u", "v", "meta"})
    if extra:
        raise ConfigError(f"{where}.{extra[0]}: unknown key (expected rank, dtype, u, v, meta)"[:300])
    rank = doc.get("rank")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= MAX_RANK:
        raise ConfigError(f"{where}.rank: expected a whole number 1-{MAX_RANK}, got {rank!r}"[:300])
    if doc.get("dtype") != "float32-le":
        raise ConfigError(f"{where}.dtype: expected float32-le, got {doc.get('dtype')!r}"[:300])
    mats = []
    for key in ("u", "v"):
        raw = doc.get(key)
        if not isinstance(raw, list) or len(raw) != rank:
            raise ConfigError(f"{where}.{key}: expected a list of {rank} base64 lines (one a rank component)")
        cols = []
        for i, line in enumerate(raw):
            try:
                buf = base64.b64decode(line.encode("ascii"), validate=True) if isinstance(line, str) else None
            except (ValueError, UnicodeEncodeError):
                buf = None
            if buf is None or len(buf) != dim * 4:
                raise ConfigError(f"{where}.{key}[{i}]: expected {dim} float32 numbers, base64")
            col = np.frombuffer(buf, dtype="<f4")
            if not np.isfinite(col).all() or float(np.abs(col).max()) > MAP_BOUND:
                raise ConfigError(f"{where}.{key}[{i}]: expected finite numbers within ±{MAP_BOUND:g}")
            cols.append(col)
        mats.append(np.stack(cols, axis=1).astype(np.float32))
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    return Map(mats[0], mats[1], meta)


def fit_map(groups: list[tuple[np.ndarray, np.ndarray, int]], *, rank: int = 32, l2: float = 0.01,
            temperature: float = 0.05, steps: int = 200, rate: float = 0.5,
            progress=None) -> Map:
    """The map under which, for each ``(q, items, own)`` (the question's vector after :meth:`Center.apply`
    without a map, the user's item vectors as rows, the row of the question's own one), the own item is the
    nearest: full-batch gradient descent on the softmax of ``(q + q A) . item / temperature`` over the user's items,
    each step shrunk by ``1 + rate * l2`` toward zero (no map), then ``A``'s best ``rank`` part (``u`` = its left singular
    vectors times the values, ``v`` the right ones). Deterministic; ``progress(step)`` after each step."""
    if not groups:
        raise ConfigError("no questions to fit the map on (each needs a user with two or more preferences)")
    dim = int(groups[0][0].shape[0])
    if not 1 <= rank <= min(MAX_RANK, dim):
        raise ConfigError(f"rank: expected 1-{min(MAX_RANK, dim)}, got {rank}")
    qs = [np.asarray(q, dtype=np.float64) for q, _, _ in groups]
    items = [np.asarray(p, dtype=np.float64) for _, p, _ in groups]
    a = np.zeros((dim, dim))
    for step in range(steps):
        grad = np.zeros_like(a)
        for q, p, (_, _, own) in zip(qs, items, groups):
            s = p @ (q + q @ a) / temperature
            e = np.exp(s - s.max())
            w = e / e.sum()
            w[own] -= 1.0  # d loss / d s
            grad += np.outer(q, w @ p) / temperature
        a = (a - rate * grad / len(groups)) / (1.0 + rate * l2)  # the L2 pull as a shrink: stable at any l2
        if progress is not None:
            progress(step)
    if not np.isfinite(a).all():
        raise ConfigError("the map's fit diverged (non-finite weights); fewer steps or a larger l2")
    left, values, right = np.linalg.svd(a)
    return Map((left[:, :rank] * values[:rank]).astype(np.float32), right[:rank].T.astype(np.float32),
               meta={"rank": rank, "l2": l2, "temperature": temperature, "steps": steps, "questions": len(groups)})


def nearest_share(groups: list[tuple[np.ndarray, np.ndarray, int]], m: "Map | None") -> float:
    """The share of ``groups`` whose own item is the nearest to the question (mapped by ``m`` when given)."""
    if not groups:
        return 0.0
    hit = 0
    for q, p, own in groups:
        q = np.asarray(q, dtype=np.float64)
        hit += int(np.argmax(np.asarray(p) @ (m.apply(q) if m is not None else q)) == own)
    return hit / len(groups)


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
    extra = sorted(set(doc) - {MARKER, "embedder", "vector", "map", "meta"})
    if extra:
        raise ConfigError(f"{source}: {extra[0]}: unknown key (expected embedder, vector, map, meta)"[:300])
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
    mapped = map_from_doc(doc["map"], len(vec), f"{source}: map") if doc.get("map") is not None else None
    return Center(vec, name.strip(), source, meta, mapped)


_CACHE = FileCache(limit=8)


_HOW = {"reading": "the prompt center", "kind": "a prompt center file", "hint": "; write one with `memtier train center`"}


def _read(path: Path) -> Center:
    return from_doc(read_artifact(path, MARKER, max_bytes=MAX_BYTES, **_HOW), str(path))


def parse(raw: bytes, where: str | Path) -> Center:
    """A center from a file's bytes, checked as :func:`load` checks a file (what ``memtier train center`` writes)."""
    if len(raw) > MAX_BYTES:
        raise ConfigError(f"{where}: larger than {MAX_BYTES:,} bytes; not read as a prompt center file")
    return from_doc(artifact_doc(raw, where, MARKER, **_HOW), str(where))


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
    startup); without its map when ``standing.center_map`` is false."""
    from .gate import embedder_name  # the name an embedder's learned files are fitted under

    if embedder is None:
        return None
    try:
        center = for_config(config)
    except Exception as exc:
        log.warning("the prompt center is not used: %s", exc)
        return None
    if center is None or embedder_name(embedder) != center.embedder:
        return None
    return center if config.standing.center_map else center.without_map()
