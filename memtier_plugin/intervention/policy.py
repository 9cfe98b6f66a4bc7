"""The learned intervention policy (Pulse §3.4, §4.4): features of (call, evidence) → silent / supplement / intervene.

At pre_tool the fixed rule of :mod:`intervention` only knows conflicts it can
compute (a weekday, a time, an amount, a call that already failed). A standing
*preference* conflicts with a call in words: "I avoid shows with graphic
violence" against ``select_option({"option": "Narcos, a crime series depicting
graphic violence"})``. The features here describe that pair from what a real
pre_tool sees — the call's arguments, the current task's text and memory —
never a label:

* the **evidence**: the standing item that applies best to the task (its
  applicability, the margin over the next one);
* the **call text**: the argument values the task does not already say (for
  ``select_option`` the option, not the request the task repeats);
* the item's **polarity**: the clauses it avoids ("graphic violence") and the
  ones it asks for ("well-fitted and structured pieces"), split at negation
  cues (:func:`polarity`);
* how close the call text is to each (embedding cosine with bge-small when the
  standing embedder is there; word overlap always), to the request, and to the
  whole item; and words in the call that soften a match ("minimal violence",
  "alcohol-free", "vegan leather").

On the PrefEval dev options the embedding cosine of an option and the *whole*
preference does not separate the option that follows it from the three that
violate it (AUC 0.44: violating options name what the preference avoids); the
cosine with the avoided clause does (0.72), and together with the others a
linear model reaches ~0.80 on topics it was not trained on.

The model is a softmax over the three actions, linear in standardised features,
trained by :mod:`policy_training` and stored in its own YAML file (never the
user's config), named by ``scheduling.policy``. Inference is numpy only: a
3×F matrix product.
"""

from __future__ import annotations

import math
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError
from ..store.artifacts import POLICY_MARKER, artifact_doc, read_artifact, write_artifact
from ..tokenize import token_set

MARKER_KEY = POLICY_MARKER  # value: format version
ACTIONS = ("silent", "supplement", "intervene")
FEATURES = ("applicability", "margin", "has_avoid", "has_want", "sem_avoid", "sem_want", "sem_request",
            "sem_item", "avoid_minus_request", "avoid_minus_want", "lex_avoid", "lex_want", "softeners",
            "embedded")  # format 1: every policy file of format 1 is over exactly these
# evidence selection: the top EVIDENCE_K standing items, and the one the call conflicts with most
EVIDENCE_FEATURES = ("max_sem_avoid", "max_conflict", "max_lex_avoid", "sel_applicability", "sel_is_top",
                     "sel_sem_avoid", "sel_sem_want")
# the cross-encoder reads (call, the selected item's avoided clause) and (call, its wanted clause) together
CROSS_FEATURES = ("ce_avoid", "ce_want", "ce_conflict", "ce_used")
EVIDENCE_K = 3
RANKED_FEATURES = tuple(f"top{k}_{n}" for k in range(1, EVIDENCE_K + 1)
                        for n in ("app", "sem_avoid", "sem_want", "lex_avoid"))
KNOWN_FEATURES = FEATURES + EVIDENCE_FEATURES + RANKED_FEATURES + CROSS_FEATURES
SELECTED_KEY = "sel_rank"  # in the traced features, not among them: the rank of the selected evidence item
CE_CLIP = 12.0  # cross-encoder logits are kept within ±CE_CLIP
MAX_CALL_TEXT = 1000  # characters of call text a decision reads

_AVERSE = re.compile(
    r"\b(?:avoid\w*|dislike\w*|hate|hates|detest\w*|despise\w*|loathe\w*|can't stand|cannot stand|refuse\w*|"
    r"against|aversion|averse|allergic|allergy|intoleran\w*|fear|phobia|afraid|scared|terrified|uncomfortable|"
    r"steer clear|stay away|free from|away from|exclude\w*|excluding|except|opposed|sensitive to|tired of|bored|"
    r"boring|overwhelm\w*|distract\w*|ineffective|struggle\w*|minimal)\b", re.IGNORECASE)
_NEGATOR = re.compile(r"\b(?:not|no|never|nor|without|don't|doesn't|didn't|isn't|aren't|won't|can't|cannot|unable)\b",
                      re.IGNORECASE)
_SEGMENT = re.compile(
    r"[;.!?]|,\s*(?:but|and|so|while|as|because)\b|\bbut\b|\bwhile\b|\bwhereas\b|\binstead(?: of)?\b|"
    r"\brather than\b|\bover\b|\bbecause\b|\bas (?:I|they|it)\b|\bdue to\b|"
    r"\band (?=(?:\w+ ){0,2}(?:prefer|love|enjoy|like|do not|don't|dislike|avoid|never|can't|cannot|refuse|hate)\b)",
    re.IGNORECASE)
_SOFTENER = re.compile(r"\b(?:no|non|not|free|without|minimal|minimally|low|vegan|plant-based|alternative|less|zero|"
                       r"avoid\w*|instead)\b|-free\b", re.IGNORECASE)


def polarity(text: str) -> tuple[str, str]:
    """(what the item avoids, what it asks for): its clauses split at contrast words; a clause is avoided
    when it has an aversion word ("avoid", "dislike", "allergic") or an odd number of negators ("don't
    like") but not both ("don't mind avoiding" cancels): the words after its last cue, else wanted."""
    avoid, want = [], []
    for clause in _SEGMENT.split(text):
        if not clause or not clause.strip(" ,\"'"):
            continue
        averse = [(m.start(), m.end()) for m in _AVERSE.finditer(clause)]
        negators = [(m.start(), m.end()) for m in _NEGATOR.finditer(clause)  # "can't stand" is an aversion
                    if not any(lo <= m.start() < hi for lo, hi in averse)]
        if bool(averse) != (len(negators) % 2 == 1):
            last = max(end for _, end in (*averse, *negators))
            avoid.append(clause[last:].strip(" ,\"'") or clause.strip())
        else:
            want.append(clause.strip(" ,\"'"))
    return " ; ".join(a for a in avoid if a), " ; ".join(w for w in want if w)


def _flat_strings(params, out: list[str], depth: int = 0) -> None:
    if depth > 4 or len(out) > 50:
        return
    if isinstance(params, dict):
        for v in list(params.values())[:50]:
            _flat_strings(v, out, depth + 1)
    elif isinstance(params, list):
        for v in params[:50]:
            _flat_strings(v, out, depth + 1)
    elif isinstance(params, str) and params.strip():
        out.append(params)


def call_text(params: dict, task_text: str) -> str:
    """The argument values the task does not already say (their words not all in the task), joined."""
    words = token_set(task_text)
    values: list[str] = []
    _flat_strings(params, values)
    new = [v for v in values if not (token_set(v) and token_set(v) <= words)]
    return " ; ".join(new)[:MAX_CALL_TEXT]


def explicit_choice(params: dict, task_text: str) -> bool:
    """The task's own words name a specific argument of the call ("save it to Notion" → ``{"app": "notion"}``):
    an explicit instruction, which a general habit does not override. An argument that restates the task
    (``{"request": <the task>}``: half or more of its words) names no choice."""
    words = token_set(task_text)
    values: list[str] = []
    _flat_strings(params, values)
    for v in values:
        toks = token_set(v)
        if 2 < len(v) < 80 and toks and toks <= words and len(toks) < 0.5 * len(words):
            return True
    return False


# ---------------------------------------------------------------- embeddings (cached per process)

_VECS: dict[tuple[str, str], np.ndarray] = {}
_VECS_LOCK = threading.Lock()
_VECS_MAX = 20_000


def _vectors(embedder, texts: list[str], space: str = "") -> list[np.ndarray]:
    """One unit vector per text (documents, no query prefix), each text embedded once per process and ``space``.

    The int8 embedder's vector of a text moves slightly with the batch it was embedded in, so the evidence
    features embed in their own ``space``: the format-1 features stay the vectors they always were."""
    name = getattr(embedder, "name", type(embedder).__name__) + space
    with _VECS_LOCK:
        missing = list(dict.fromkeys(t for t in texts if (name, t) not in _VECS))
    if missing:
        vecs = np.asarray(embedder.embed(missing), dtype=np.float32).reshape(len(missing), -1)
        with _VECS_LOCK:
            if len(_VECS) + len(missing) > _VECS_MAX:
                _VECS.clear()
            for t, v in zip(missing, vecs):
                _VECS[(name, t)] = v
    with _VECS_LOCK:
        return [_VECS[(name, t)] for t in texts]


def conflicting_item(scored: list, feats: dict, policy) -> tuple:
    """The (item, applicability) a decision of ``policy`` quotes: for a policy that reads the evidence
    features, the item it selected as the one the call conflicts with most (the best-applying item is then
    often another preference); else the item that applies best to the task."""
    rank = int(feats.get(SELECTED_KEY, 0)) if policy.uses_evidence else 0
    return scored[rank] if 0 <= rank < len(scored) else scored[0]


def _clause_scores(call: str, ctoks: set, c, pol: tuple[str, str], vec: dict) -> tuple[float, float, float]:
    """(cosine with the avoided clause, with the wanted clause, words shared with the avoided clause)."""
    avoid, want = pol
    sa = float(c @ vec[avoid]) if c is not None and avoid else 0.0
    sw = float(c @ vec[want]) if c is not None and want else 0.0
    return sa, sw, float(min(3, len(ctoks & token_set(avoid))))


def features(call: str, request: str, scored: list, embedder=None, cross_encoder=None,
             evidence: bool = True) -> dict[str, float] | None:
    """The features of (call text, standing evidence) — None when there is no call text or no evidence.

    ``scored``: (item, applicability) pairs, best first (preferences, constraints, rules, identity, choices).
    ``embedder``: the standing embedder, or None (the embedding features are then 0 and ``embedded`` 0).
    ``cross_encoder``: a :class:`rerank.CrossEncoder` (``score(query, texts)``), or None: the CROSS_FEATURES
    are then absent (a policy that uses them refuses to decide without one). ``evidence``: False computes
    FEATURES only (a format-1 policy's; no other item's clauses embedded, no cross-encoder).

    FEATURES describe the best item; EVIDENCE_FEATURES look at the best EVIDENCE_K and select the one whose
    avoided clause the call is closest to, beyond its wanted clause (``max_conflict``): when the item that
    applies best to the request is another of the user's preferences, the conflicting one is often second.
    """
    if not call.strip() or not scored:
        return None
    item, app = scored[0]
    second = scored[1][1] if len(scored) > 1 else 0.0
    top = scored[:EVIDENCE_K]
    pols = [polarity(it.content) for it, _ in top]
    avoid, want = pols[0]
    ctoks = token_set(call)
    f = {"applicability": float(app), "margin": float(app - second), "has_avoid": float(bool(avoid)),
         "has_want": float(bool(want)), "lex_avoid": float(min(3, len(ctoks & token_set(avoid)))),
         "lex_want": float(min(3, len(ctoks & token_set(want)))),
         "softeners": float(min(2, len(_SOFTENER.findall(call)))), "sem_avoid": 0.0, "sem_want": 0.0,
         "sem_request": 0.0, "sem_item": 0.0, "avoid_minus_request": 0.0, "avoid_minus_want": 0.0, "embedded": 0.0}
    c, vec = None, {}
    if embedder is not None:
        base = [call, avoid or "-", want or "-", request or "-", item.content]  # one batch, as format 1 had it
        c, a, w, r, i = _vectors(embedder, base)
        sem_avoid = float(c @ a) if avoid else 0.0
        sem_want = float(c @ w) if want else 0.0
        sem_request = float(c @ r) if request else 0.0
        f.update(sem_avoid=sem_avoid, sem_want=sem_want, sem_request=sem_request, sem_item=float(c @ i),
                 avoid_minus_request=sem_avoid - sem_request if avoid else 0.0,
                 avoid_minus_want=sem_avoid - sem_want if avoid and want else 0.0, embedded=1.0)
        if evidence:  # the other items' clauses: embedded once per task (cached), never re-batched with the above
            vec = dict(zip(base, (c, a, w, r, i)))
            extra = list(dict.fromkeys(t for pol in pols[1:] for t in pol if t and t not in vec))
            vec.update(zip(extra, _vectors(embedder, extra, "/evidence") if extra else []))
    if not evidence:
        return f
    # evidence selection: the conflict of the call with each of the top items (cosine when embedded, else words)
    per = [_clause_scores(call, ctoks, c, pol, vec) for pol in pols]
    base = f["sem_request"]  # an item that asks for nothing: the call against the request
    conflict = [(sa - (sw if pol[1] else base) if c is not None
                 else la - float(min(3, len(ctoks & token_set(pol[1]))))) if pol[0] else -9.0
                for (sa, sw, la), pol in zip(per, pols)]
    sel = int(np.argmax(conflict))
    f[SELECTED_KEY] = float(sel)  # which item a hold quotes: not a feature (no policy reads it)
    f.update(max_sem_avoid=max(sa for sa, _, _ in per), max_conflict=max(0.0 if v == -9.0 else v for v in conflict),
             max_lex_avoid=max(la for _, _, la in per), sel_applicability=float(top[sel][1]),
             sel_is_top=float(sel == 0), sel_sem_avoid=per[sel][0], sel_sem_want=per[sel][1])
    for k in range(EVIDENCE_K):  # each of the top items, by rank (0 past the last)
        sa, sw, la = per[k] if k < len(per) else (0.0, 0.0, 0.0)
        f.update({f"top{k + 1}_app": float(top[k][1]) if k < len(top) else 0.0, f"top{k + 1}_sem_avoid": sa,
                  f"top{k + 1}_sem_want": sw, f"top{k + 1}_lex_avoid": la})
    if cross_encoder is not None:
        s_avoid, s_want = pols[sel]
        pairs = [t for t in (s_avoid, s_want) if t]
        logits = [float(v) for v in cross_encoder.score(call, pairs)] if pairs else []
        ce = dict(zip([k for k, t in (("a", s_avoid), ("w", s_want)) if t], logits))
        lo = -CE_CLIP  # a clause the item does not have: no relevance at all
        a, w = (max(lo, min(CE_CLIP, ce.get(k, lo))) for k in ("a", "w"))
        f.update(ce_avoid=a, ce_want=w, ce_conflict=a - w if len(ce) == 2 else 0.0, ce_used=1.0)
    return f


_PAIR_SCORERS: dict[str, object] = {}


def pair_scorer(model_dir: str = ""):
    """The shared cross-encoder of ``rerank.model_dir`` (loaded once per process), or None when it cannot run
    (runtime or model missing: logged by the caller's check)."""
    from ..recall.rerank import CrossEncoder, RerankerUnavailable, model_folder

    key = str(model_folder(model_dir))
    with _VECS_LOCK:
        if key in _PAIR_SCORERS:
            return _PAIR_SCORERS[key]
    ce = CrossEncoder(model_folder(model_dir))
    try:
        ce = ce.load() if ce.available() else None
    except RerankerUnavailable:
        ce = None
    with _VECS_LOCK:
        return _PAIR_SCORERS.setdefault(key, ce)


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


def policy_path(config) -> Path | None:
    """``scheduling.policy`` with ``~`` expanded, a relative path taken in the workspace; None when unset."""
    if not config.scheduling.policy:
        return None
    p = Path(config.scheduling.policy).expanduser()
    return p if p.is_absolute() else config.workspace / p
