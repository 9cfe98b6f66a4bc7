"""Whether a prompt asks for a choice, read from its embedding: the request model.

:func:`.requests.asks_for_choice` knows the request forms it lists, and people
ask in more ways than a list holds: of 30 questions a fresh author wrote
("I've got a job interview Friday. How do I prepare?", "Our dog gets anxious
in thunderstorms. What helps calm dogs down?", "I'm after a light jacket for
spring in Paris."), the rules read 16 as asking. Words alone cannot tell "How
do I meet people in a new city?" from "How do I deploy a Flask app?"; the
prompt's embedding can, because what it is about differs. A prompt the rules
do not read as asking is scored by a logistic model over its query vector (the
one the standing scorer has computed already: no second embedding on the
prompt's path); at or above the model's threshold it asks (``asks`` 1.0). The
rules' reading is never overridden the other way.

The model is data, never code: a file in the standing gate's shape
(:class:`.gate.Gate`) under the marker ``memtier_request_model: 1``, with the
embedder it was fitted with (``memtier train requests`` fits one; the shipped
``data/request_model.yaml`` was fitted on tests/data/request_labels.jsonl
without its ``heldout`` split, PrefEval dev's questions as asking, and LoCoMo
dev's questions and the turns the rules do not read as asking as not). It is
used only with that embedder (``standing.request_model``; docs/standing.md
"Asked in people's own words").
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from ..store.artifacts import FileCache, load_named, read_artifact
from .gate import Gate, embedder_name, from_doc as gate_from_doc

log = logging.getLogger(__name__)

MARKER = "memtier_request_model"
SHIPPED = Path(__file__).resolve().parent.parent / "data" / "request_model.yaml"
MAX_BYTES = 256 * 1024
WHAT = "request model"


def from_doc(doc: Any, source: str) -> Gate:
    """A validated request model from a parsed document; ConfigError (one line naming the key) otherwise."""
    return gate_from_doc(doc, source, marker=MARKER, what=WHAT)


_CACHE = FileCache(limit=8)


def _read(path: Path) -> Gate:
    doc = read_artifact(path, MARKER, reading="the request model", kind="a request model file",
                        hint="; write one with `memtier train requests`", max_bytes=MAX_BYTES)
    return from_doc(doc, str(path))


def load(path: str | Path | None = None) -> Gate:
    """The request model at ``path`` (None: the shipped one), read and validated once per (path, size, mtime)."""
    return _CACHE.get(Path(path) if path else SHIPPED, _read, reading="the request model")


def for_config(config, workspace: Path | None = None) -> Gate | None:
    """The model ``standing.request_model`` names, or None (``none``); ``standing.request_model_file`` (relative:
    to the workspace) replaces the shipped one."""
    cfg = config.standing
    if cfg.request_model == "none":
        return None
    return load_named("standing.request_model_file", cfg.request_model_file,
                      workspace if workspace is not None else config.workspace, load)


def resolve(config, embedder: Any) -> Gate | None:
    """The model to use with ``embedder``: None when ``standing.request_model`` is none, there is no embedder, the
    model was fitted with another one, or it cannot be read (logged; a bad ``request_model_file`` already stopped
    startup)."""
    if embedder is None:
        return None
    try:
        model = for_config(config)
    except Exception as exc:
        log.warning("the request model is not used: %s", exc)
        return None
    return model if model is not None and embedder_name(embedder) == model.embedder else None


def asks(model: Gate | None, query_vector: np.ndarray | None) -> bool:
    """Whether the prompt whose query vector this is asks for a choice, by the model (False without one, or for a
    vector of another size)."""
    if model is None or query_vector is None:
        return False
    v = np.asarray(query_vector, dtype=np.float64)
    if v.shape != model.weights.shape:
        return False
    return bool(model.probabilities(v[None, :])[0] >= model.threshold)
