"""The learned intervention policy (Pulse §3.4, §4.4): features of (call, evidence) → silent / supplement / intervene.

The features are :mod:`.features`. The model is a softmax over the three
actions, linear in standardised features (or with one hidden layer), trained by
:mod:`memtier_plugin.learning.grpo` and stored in its own YAML file (never the
user's config), named by ``scheduling.policy`` (``default``: the one memtier ships, :data:`DEFAULT_POLICY`), read through
:mod:`memtier_plugin.store.artifacts` with every number checked. Inference is
numpy only: a 3×F matrix product.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..store.artifacts import POLICY_MARKER, artifact_doc, read_artifact, write_artifact
from .features import (  # noqa: F401  (the policy's inputs, also read through this module)
    CROSS_FEATURES, EVIDENCE_FEATURES, EVIDENCE_K, FEATURES, JUDGE_FEATURES, KNOWN_FEATURES, RANKED_FEATURES,
    SELECTED_KEY, call_text, conflicting_item, explicit_choice, features, pair_scorer, polarity,
)

MARKER_KEY = POLICY_MARKER  # value: format version
ACTIONS = ("silent", "supplement", "intervene")
# ---------------------------------------------------------------- the model


FORMAT = 2  # 1: linear over FEATURES; 2: any known features (its "features" list), optionally one hidden layer
MAX_HIDDEN = 256


@dataclass
class Policy:
    """A softmax over ACTIONS of standardised features: linear, or through one tanh hidden layer.

    ``names``: the features it reads, in order (any of KNOWN_FEATURES); ``hidden_w`` (H, F) and ``hidden_b``
    (H,) when it has a hidden layer, and ``weights`` is then (3, H).
    """

    mean: np.ndarray  # (F,)
    std: np.ndarray  # (F,)
    weights: np.ndarray  # (3, F) or (3, H)
    bias: np.ndarray  # (3,)
    embedder: str = ""  # the standing embedder it was trained with ("" none: lexical features)
    source: str = ""
    meta: dict | None = None
    names: tuple = FEATURES
    hidden_w: np.ndarray | None = None
    hidden_b: np.ndarray | None = None

    @classmethod
    def zero(cls, embedder: str = "", names: tuple = FEATURES) -> Policy:
        n = len(names)
        return cls(np.zeros(n), np.ones(n), np.zeros((len(ACTIONS), n)), np.zeros(len(ACTIONS)), embedder,
                   names=tuple(names))

    @property
    def uses_evidence(self) -> bool:
        """It reads more than FEATURES (the other top items' clauses are then embedded, once per task)."""
        return any(n not in FEATURES for n in self.names)

    @property
    def uses_pairs(self) -> bool:
        """It reads the cross-encoder's features (the decision then scores two (call, clause) pairs)."""
        return any(n in CROSS_FEATURES for n in self.names)

    @property
    def uses_judge(self) -> bool:
        """It reads the pair model's features (models.judge: up to 3 (item, call) pairs a phrasing)."""
        return any(n in JUDGE_FEATURES for n in self.names)

    def vector(self, feats: dict[str, float]) -> np.ndarray:
        return np.array([feats.get(k, 0.0) for k in self.names], dtype=float)

    def logits(self, x: np.ndarray) -> np.ndarray:
        h = (x - self.mean) / self.std
        if self.hidden_w is not None:
            h = np.tanh(h @ self.hidden_w.T + self.hidden_b)
        return h @ self.weights.T + self.bias

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """Action probabilities for feature rows ``x`` ((F,) or (N, F))."""
        z = self.logits(x)
        z = z - z.max(axis=-1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=-1, keepdims=True)

    def act(self, feats: dict[str, float]) -> tuple[str, list[float]]:
        """The most probable action and the probabilities (greedy: a decision never samples).

        PolicyOutputError when a probability is not a finite number (a feature or a weight that overflows):
        the caller treats it as a failed check, never as the first action."""
        with np.errstate(all="ignore"):
            p = self.probabilities(self.vector(feats))
        if not np.all(np.isfinite(p)):
            raise PolicyOutputError(f"{self.source or 'the policy'}: probabilities are not finite numbers "
                                    f"({', '.join(f'{a} {v}' for a, v in zip(ACTIONS, p))})")
        return ACTIONS[int(np.argmax(p))], [round(float(v), 4) for v in p]

    def to_doc(self) -> dict:
        legacy = self.hidden_w is None and tuple(self.names) == FEATURES  # readable by format-1 memtier too
        doc = {MARKER_KEY: 1 if legacy else FORMAT, "features": list(self.names), "actions": list(ACTIONS),
               "embedder": self.embedder, "mean": [float(v) for v in self.mean], "std": [float(v) for v in self.std],
               "weights": {a: [float(v) for v in row] for a, row in zip(ACTIONS, self.weights)},
               "bias": {a: float(v) for a, v in zip(ACTIONS, self.bias)}}
        if self.hidden_w is not None:
            doc["hidden"] = {"weights": [[float(v) for v in row] for row in self.hidden_w],
                             "bias": [float(v) for v in self.hidden_b]}
        doc["meta"] = self.meta or {}
        return doc


MAX_BYTES = 1 << 20  # a policy file larger than this is refused before it is parsed (the largest is ~0.3 MiB)
MAX_VALUE = 1e6  # every number of a policy file is finite and within ±MAX_VALUE (trained ones stay within ±100)
MIN_STD = 1e-6  # training replaces a spread at or below this with 1.0 (learning.grpo)
# YAML values the largest policy holds (MAX_HIDDEN rows of every known feature, three output rows, the lists
# and the training summary in meta), with room to spare: a file may not hold more
MAX_NODES = MAX_HIDDEN * (len(KNOWN_FEATURES) + 6) + 20 * len(KNOWN_FEATURES) + 10_000


class PolicyOutputError(ValueError):
    """The policy gave probabilities that are not finite numbers: a failed check, never an action."""


def _number(value, key: str, path: Path) -> float:
    """One number of the file, finite and within ±MAX_VALUE (ConfigError naming the key otherwise)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{path}: key '{key}' must be a number, got {type(value).__name__}")
    try:
        v = float(value)
    except OverflowError:  # a 400-digit integer
        v = math.inf
    if not math.isfinite(v) or abs(v) > MAX_VALUE:
        shown = f"an integer of {value.bit_length()} bits" if isinstance(value, int) else repr(v)
        raise ConfigError(f"{path}: key '{key}' must be a finite number within ±{MAX_VALUE:g}, got {shown}")
    return v


def _numbers(doc: dict, key: str, n: int, path: Path, where: str = "") -> np.ndarray:
    values = doc.get(key)
    if not isinstance(values, list):
        raise ConfigError(f"{path}: key '{where}{key}' is not a list of numbers")
    if len(values) != n:
        raise ConfigError(f"{path}: key '{where}{key}' must hold {n} finite numbers, got {len(values)}")
    return np.array([_number(v, f"{where}{key}[{i}]", path) for i, v in enumerate(values)], dtype=float)


def read_policy(path: str | Path) -> Policy:
    """A policy file, validated (ConfigError: one line naming the file and what is wrong).

    Refused: a file over MAX_BYTES (before it is parsed), more than MAX_NODES values, any number that is not
    finite or beyond ±MAX_VALUE, a spread (``std``) under MIN_STD: no file can make the model's
    probabilities overflow into NaN."""
    path = Path(path)
    doc = read_artifact(path, MARKER_KEY, reading="the intervention policy", kind="an intervention policy file",
                        hint="; write one with `memtier train policy`", max_bytes=MAX_BYTES, max_nodes=MAX_NODES)
    return _policy_from_doc(doc, path)


def _policy_from_doc(doc: dict, path: Path) -> Policy:
    version = doc[MARKER_KEY]
    if isinstance(version, bool) or version not in (1, FORMAT):
        shown = version if not isinstance(version, int) or abs(version) < 10 ** 6 else "(a huge number)"
        raise ConfigError(f"{path}: policy file format {shown!r} is not one this memtier reads (1, {FORMAT}); "
                          "retrain it with `memtier train policy`")
    names = doc.get("features")
    ok = isinstance(names, list) and names and all(isinstance(n, str) and n in KNOWN_FEATURES for n in names) \
        and len(set(names)) == len(names) and (version == FORMAT or names == list(FEATURES))
    if not ok or doc.get("actions") != list(ACTIONS):
        raise ConfigError(f"{path}: trained for other features or actions than this memtier computes; "
                          "retrain it with `memtier train policy`")
    n = len(names)
    hw = hb = None
    hidden = doc.get("hidden")
    if hidden is not None:
        if version != FORMAT or not isinstance(hidden, dict) or set(hidden) != {"weights", "bias"} \
                or not isinstance(hidden["weights"], list) or not 1 <= len(hidden["weights"]) <= MAX_HIDDEN:
            raise ConfigError(f"{path}: key 'hidden' must map 'weights' (1-{MAX_HIDDEN} rows of {n} numbers) "
                              "and 'bias'")
        hw = np.stack([_numbers({"row": row}, "row", n, path, f"hidden.weights[{i}].")
                       for i, row in enumerate(hidden["weights"])])
        hb = _numbers(hidden, "bias", len(hw), path, "hidden.")
    width = n if hw is None else len(hw)
    weights, bias = doc.get("weights"), doc.get("bias")
    if not isinstance(weights, dict) or not isinstance(bias, dict) or set(weights) != set(ACTIONS) \
            or set(bias) != set(ACTIONS):
        raise ConfigError(f"{path}: keys 'weights' and 'bias' must map each of {list(ACTIONS)}")
    w = np.stack([_numbers(weights, a, width, path, "weights.") for a in ACTIONS])
    b = np.array([_number(bias[a], f"bias.{a}", path) for a in ACTIONS], dtype=float)
    std = _numbers(doc, "std", n, path)
    if np.any(std < MIN_STD):
        raise ConfigError(f"{path}: key 'std' values must be positive, at least {MIN_STD:g}")
    emb = doc.get("embedder", "")
    if not isinstance(emb, str):
        raise ConfigError(f"{path}: key 'embedder' must be text")
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    return Policy(_numbers(doc, "mean", n, path), std, w, b, emb, str(path), meta, tuple(names), hw, hb)


def write_policy(path: str | Path, policy: Policy, config_source: str = "") -> Path:
    """Write ``policy`` to its own YAML file; never over the user's config, nor over a file that is not a
    policy (ConfigError)."""
    path = Path(path)

    def readable(data: bytes) -> None:  # what read_policy would say of these bytes: never write a refused file
        if len(data) > MAX_BYTES:
            raise ConfigError(f"{path}: the policy would be larger than {MAX_BYTES >> 20} MiB; not written")
        try:
            _policy_from_doc(artifact_doc(data, path, MARKER_KEY, reading="the intervention policy",
                                          kind="an intervention policy file", max_nodes=MAX_NODES), path)
        except ConfigError as exc:
            raise ConfigError(f"not written, memtier could not read it back: {exc}") from None

    return write_artifact(path, MARKER_KEY, policy.to_doc(), header="memtier intervention policy "
                          "(memtier_plugin.intervention.policy)", kind="an intervention policy",
                          config_source=config_source, refuse_config_name=True, check=readable)


_CACHE: dict[str, tuple[tuple, Policy | ConfigError]] = {}
_CACHE_LOCK = threading.Lock()


def load_policy(path: Path) -> Policy:
    """``read_policy`` cached by path, modification time, size and inode: pre_tool reads a file once, and a
    refused file is refused again from the cache (its ConfigError) until it changes, never parsed again."""
    st = path.stat()
    sig = (st.st_mtime_ns, st.st_size, st.st_ino)
    with _CACHE_LOCK:
        hit = _CACHE.get(str(path))
    if hit is None or hit[0] != sig:
        try:
            got: Policy | ConfigError = read_policy(path)
        except ConfigError as exc:
            got = exc
        hit = (sig, got)
        with _CACHE_LOCK:
            _CACHE[str(path)] = hit
    if isinstance(hit[1], ConfigError):
        raise ConfigError(str(hit[1]))
    return hit[1]


# The policy memtier ships (package data): `memtier train policy` on all 10 PrefEval dev topics, seed 0, with the
# evidence features and bge-small (docs/learning.md, "The default policy"). It decides when scheduling.policy is
# "default"; it is read through read_policy like any user's file. It is opt-in, not the unset value: every PrefEval
# call has a preference that bears on it, so it never learned to stay silent when none does (on the README demo
# it supplements 22 of ~40 calls, the fixed rule 2), and it holds about one in five calls that follow the
# preference (false interrupts 0.22 on the dev topics).
DEFAULT_POLICY = Path(__file__).resolve().parent.parent / "data" / "policy" / "default.yaml"
OFF = "none"  # scheduling.policy: none (or unset) → the fixed rule alone
DEFAULT = "default"  # scheduling.policy: default → the shipped policy (opt-in: see DEFAULT_POLICY)


def policy_path(config) -> Path | None:
    """The policy file pre_tool reads: ``scheduling.policy`` with ``~`` expanded, a relative path taken in the
    workspace; ``default``: :data:`DEFAULT_POLICY`; unset, empty or ``none``: None (the fixed rule alone)."""
    value = (config.scheduling.policy or "").strip()
    if not value or value.lower() == OFF:
        return None
    if value.lower() == DEFAULT:
        return DEFAULT_POLICY
    p = Path(value).expanduser()
    return p if p.is_absolute() else config.workspace / p


def is_default(path: Path | None) -> bool:
    """``path`` is the policy memtier ships (what an unset ``scheduling.policy`` reads)."""
    return path == DEFAULT_POLICY
