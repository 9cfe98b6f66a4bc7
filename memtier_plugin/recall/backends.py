"""What recall scores with — the φsem embedder, the re-ranker, the fusion weights — chosen from one config.

Recall (:class:`~memtier_plugin.recall.retriever.Retriever`), ``memtier eval`` and
``memtier train`` all call :func:`choose`, so one config gives all three the
same backends and the same weights:

* **embedder**: ``embeddings.backend`` (``none``, ``minilm``, ``bge-small``,
  ``hashing``); bge-small's folder is ``embeddings.model_dir`` or the per-user
  models folder (:mod:`.model_paths`).
* **re-ranker**: ``rerank.backend`` (``none``, ``cross-encoder``) from
  ``rerank.model_dir`` or the models folder, with ``rerank.threads``.
* **weights**: the five of ``weights.*``, or the vector of
  ``weights.learned_file`` (written by ``memtier train``) when it is set. A
  relative learned file lives in the workspace, whatever the current directory;
  :func:`read_learned_weights` reads it (through ``store.artifacts``).

A backend the config names but that cannot run (extra not installed, model not
fetched) is left out with one line in :attr:`Backends.notes` naming what is
missing and the command that fetches it; recall then stays lexical or keeps
the fused order. Callers that must have it (``memtier eval --embed``) pass
``embed=True`` / ``rerank=True`` and get the loader's one-line error instead.
The models themselves load lazily unless ``load=True``.

Dependencies run one way: this module imports the loaders (:mod:`.embeddings`,
:mod:`.rerank`); they import neither it nor :mod:`.model_setup`, only
:mod:`.model_paths` for the models folder and the pinned hashes.
"""

from __future__ import annotations

import threading

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Config
from ..errors import ConfigError
from ..store.artifacts import WEIGHTS_MARKER, read_artifact

#: The fusion weights, in the order of every weight vector (MemTier eq. 1).
WEIGHT_NAMES = ("w_sem", "w_bm25", "w_decay", "w_cw", "w_tier")


@dataclass
class Backends:
    """One config's choice: embedder and re-ranker (None: off) and the fusion weights."""

    embedder: Any = None  # an embeddings.Embedder
    reranker: Any = None  # anything with score(query, texts) -> logits (rerank.CrossEncoder)
    weights: list[float] = field(default_factory=list)  # [sem, bm25, decay, cw, tier]
    learned_file: Path | None = None  # where the weights came from, when not from weights.*
    notes: list[str] = field(default_factory=list)  # one line per backend named but not available

    @property
    def embedder_name(self) -> str | None:
        return None if self.embedder is None else self.embedder.name

    @property
    def reranker_name(self) -> str | None:
        return None if self.reranker is None else getattr(self.reranker, "name", type(self.reranker).__name__)


def learned_weights_path(config: Config) -> Path | None:
    """``weights.learned_file`` with ``~`` expanded, a relative path taken in the workspace; None when unset."""
    if not config.weights.learned_file:
        return None
    path = Path(config.weights.learned_file).expanduser()
    return path if path.is_absolute() else config.workspace / path


def fusion_weights(config: Config) -> tuple[list[float], Path | None]:
    """(the five fusion weights, the learned file they came from or None); ConfigError for a bad file."""
    path = learned_weights_path(config)
    if path is None:
        return [float(x) for x in config.weights.vector()], None
    return [float(x) for x in read_learned_weights(path)], path


def embedder(config: Config, want: bool | None = None, *, load: bool = False) -> tuple[Any, str | None]:
    """(the embedder ``embeddings.backend`` names or None, a note when it is named but unavailable).

    ``want``: None as the config says; False off; True required — MiniLM when the
    config names none, and a backend that cannot load raises its one-line error.
    """
    name = config.embeddings.backend
    if want is False or (want is None and name == "none"):
        return None, None  # nothing imported: a lexical recall never loads the ONNX modules
    from ..models.embedders import BGE_NAME, BGE_SETUP_HINT, INSTALL_HINT, bge_folder, get_embedder
    from ..models.paths import legacy_hint

    if name == "none":
        name = "minilm"
    opts = {"folder": bge_folder(config.embeddings.model_dir)} if name == "bge-small" else {}
    emb = get_embedder(name, **opts)
    available = getattr(emb, "available", None)
    if not want and available is not None and not available():
        if name == "bge-small":
            why = f"model or runtime missing in {emb.folder} ({BGE_SETUP_HINT}){legacy_hint(BGE_NAME)}"
        else:
            why = f"not installed ({INSTALL_HINT})"
        return None, f"embeddings.backend {name}: {why}; recall stays lexical (φsem = 0)"
    if (want or load) and hasattr(emb, "load"):
        emb.load()  # EmbeddingUnavailable: one line naming the file and the setup command
    return emb, None


def reranker(config: Config, want: bool | None = None, *, load: bool = False) -> tuple[Any, str | None]:
    """(the cross-encoder ``rerank.backend`` names or None, a note when it is named but unavailable).

    ``want``: None as the config says; False off; True required (a model that
    cannot load raises its one-line error).
    """
    if want is False or (want is None and config.rerank.backend == "none"):
        return None, None
    from ..models.paths import legacy_hint
    from ..models.cross_encoder import MODEL_NAME, SETUP_HINT, CrossEncoder

    ce = CrossEncoder.from_config(config.rerank)
    if not want and not ce.available():
        return None, (f"rerank.backend cross-encoder: model or runtime missing in {ce.folder} "
                      f"({SETUP_HINT}){legacy_hint(MODEL_NAME)}; keeping the fused order")
    if want or load:
        ce.load()  # RerankerUnavailable: one line naming the file and the setup command
    return ce, None


def choose(config: Config, *, embed: bool | None = None, rerank: bool | None = None,
           load: bool = False) -> Backends:
    """The backends and weights ``config`` asks for (see the module docstring)."""
    weights, learned = fusion_weights(config)
    emb, emb_note = embedder(config, embed, load=load)
    ce, ce_note = reranker(config, rerank, load=load)
    return Backends(emb, ce, weights, learned, [n for n in (emb_note, ce_note) if n])


_STANDING: dict[tuple[str, str], Any] = {}
_STANDING_LOCK = threading.Lock()


def standing_embedder(config: Config, shared: Any = None) -> tuple[Any, str | None]:
    """The embedder that scores standing knowledge (``standing.embedder``) and a note when it is missing.

    ``auto``: bge-small when its runtime and model are there, else none (lexical:
    topic routes and word overlap). ``shared``: recall's embedder, reused when it is
    the same model (one ONNX session per process).
    """
    name = config.standing.embedder
    if name == "none":
        return None, None
    want = "bge-small" if name == "auto" else name
    if shared is not None and getattr(shared, "name", "").startswith(want.replace("-small", "-small-en")):
        return shared, None
    from ..models.embedders import BGE_SETUP_HINT, bge_folder, get_embedder

    opts = {"folder": bge_folder(config.embeddings.model_dir)} if want == "bge-small" else {}
    key = (want, str(opts.get("folder", "")))
    with _STANDING_LOCK:  # one model per process, however many workspaces it serves (~0.2 s a load)
        emb = _STANDING.get(key)
        if emb is None:
            emb = _STANDING[key] = get_embedder(want, **opts)
    available = getattr(emb, "available", None)
    if available is not None and not available():
        if name == "auto":
            return None, None  # lexical standing scoring, said once in docs, not on every start
        return None, f"standing.embedder {name}: not available ({BGE_SETUP_HINT}); standing knowledge scored lexically"
    return emb, None


def read_learned_weights(path: Path):
    """The learned vector (numpy, 5 values in [0, 1]) of a learned-weights file; ConfigError otherwise."""
    import numpy as np

    path = Path(path)
    doc = read_artifact(path, WEIGHTS_MARKER, reading="learned weights", kind="a learned-weights file")
    try:
        arr = np.asarray(doc.get("vector"), dtype=float).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: key 'vector' is not a list of numbers") from exc
    if arr.shape != (5,):
        raise ConfigError(f"{path}: key 'vector' must have 5 values {WEIGHT_NAMES}, got {arr.size}")
    if not np.all(np.isfinite(arr)) or arr.min() < 0 or arr.max() > 1:
        raise ConfigError(f"{path}: key 'vector' values must lie in [0, 1], got {arr.tolist()}")
    return arr
