"""One calibrated scale for every layer: the probability that a candidate applies to this prompt.

Each layer scores its candidates on a scale of its own (an episode's fused
five-signal score, a standing item's applicability, a skill's), so no fixed
offset can order them against each other. Calibration maps each candidate's
features, read from its own layer's signals, to one number, the probability
that it applies (Platt scaling: a logistic model per layer, fitted on the dev
splits' labelled candidates by ``memtier train calibration``). The block then
takes the candidates above ``threshold``, best first, within k and the token
budget; when nothing applies, nothing is delivered (Pulse §3.3: memory that
does not bear on the decision stays out).

A calibration file is a learned file (:mod:`..store.artifacts`): marker
``memtier_calibration``, one model per layer (``episode``, ``global``,
``skill``), each ``{bias, weights: {feature: w}}``, and ``threshold``: one
probability, or one per layer (a standing item or skill says "this holds now",
so a false one misleads more than a past episode and may need more evidence). One
ships per preset in ``memtier_plugin/data/calibration/``; ``calibration.file``
names a user's own.

A prompt that asks for a choice (a recommendation, options, an errand: layers/requests.py) is what a user's
preferences bear on, and one of them usually answers it, but which one is told apart by the probabilities
better than their level (bge-small's cosines sit low and close for a preference that applies by world
knowledge: "a trip to Las Vegas" and "I dislike gambling"). So the optional ``choice`` section gives such a
prompt's Global items a rule of their own: an item is delivered at ``choice.threshold`` or more, and at
``choice.relative`` times the best Global item's probability or more (items that stand far under the best
are another preference's, docs/standing.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ..errors import ConfigError
from ..store.artifacts import FileCache, bounded_number, read_artifact

MARKER = "memtier_calibration"
VERSION = 1
MAX_BYTES = 64 * 1024
SHIPPED = Path(__file__).resolve().parent.parent / "data" / "calibration"
MAX_WEIGHT = 1e3

#: Each layer's features, read from a candidate's signals (names in Hit.signals), in this order.
FEATURES: dict[str, tuple[str, ...]] = {
    # episodes and facts: the fused score (all five signals: the learned cognitive weights and time decay keep
    # their say), the raw BM25 level (φbm25 is relative to the query's best), the cross-encoder's scaled value
    # where the head was re-ranked and whether it was, and whether it is a fact
    "episode": ("score", "log_raw_bm25", "fact", "rerank", "reranked"),
    # standing items: their applicability signals (layers/standing.py), the raw cosine and the cosine with the prompt's
    # vector less the common direction of prompts (``ccos``, layers/center.py), whether the prompt asks
    # for a choice (layers/requests.py), how far the item's ``ccos`` is under the prompt's nearest item's
    # (``margin``) and whether it is among the nearest (``nearest``: within 0.04 of it, so a flight booking's
    # seat, meal and departure-time rules can all be; on PrefEval one preference answers a question)
    "global": ("sem", "cos", "ccos", "topic", "lexical", "route", "embedded", "cos_topic", "prompt_words",
               "asks", "margin", "nearest"),
    # a skill answers a task of its kind (``skill_applies`` gates it), not a request for advice: no ``asks``
    "skill": ("sem", "cos", "topic", "lexical", "route", "embedded", "cos_topic", "prompt_words"),
    # the same without an embedder (standing.embedder none, or no model fetched): the word signals only
    "global_lexical": ("topic", "lexical", "topic_lexical", "prompt_words", "asks"),
    "skill_lexical": ("topic", "lexical", "topic_lexical", "prompt_words"),
}
#: features made from others by :func:`derive` (a candidate's signals never carry them)
DERIVED = frozenset({"cos_topic", "topic_lexical"})
#: a lexical layer's threshold is its embedded counterpart's (one probability scale)
LEXICAL = {"global_lexical": "global", "skill_lexical": "skill"}
LAYERS = tuple(FEATURES)
#: Items on a fixed probability rather than a fitted model (no labelled data picks them out; docs/standing.md):
#: an entry whose hook's predicate holds at this event is due by construction; a project's own latest working
#: state that leaves steps pending, at the first prompt of the project's next session, very nearly so. They
#: merge with the calibrated items by probability (packing.repack), within the same k and budget. A standing item
#: the user said is for a kind of request ("anything you book for me": layers/requests.py) applies to a prompt of
#: that kind by their own word, whatever its words or embedding say ("vegetarian meals" to "book my flight").
FIXED = {"hook": 1.0, "state": 0.9, "requested": 0.8}
#: A Global item that bears on a request by world knowledge (recall/packing.py ``Hit.implied``, layers/implications.py:
#: "a dairy-free milk" and "I have a tree nut allergy") has this added to its fitted logit, and it needs its layer's
#: threshold, not the ``choice`` section's share of the best item's (a nearer preference, "I avoid dairy", says
#: nothing of whether the allergy applies too). Set, not fitted (docs/standing.md "What an item bears on"): on
#: probe_a's explicit form, 1.0 delivered 11 more own preferences of 100 for 6 wrong items, 2.0 13 for 15.
IMPLIED_LOGIT = 1.0


def layer_of(hit) -> str:
    """The calibration layer of a hit: skill, global (standing), or episode (episodes and facts)."""
    if hit.tier in ("procedural", "global") or hit.role == "skill":
        layer = "skill" if (hit.tier == "procedural" or hit.role == "skill") else "global"
        embedded = (hit.signals.get("embedded") or {}).get("value", 1.0)
        return layer if embedded else f"{layer}_lexical"
    return "episode"


def derive(layer: str, feats: dict[str, float]) -> dict[str, float]:
    """``feats`` with the features made from others: the embedding cosine where the topics agree
    (``cos_topic``), and words where topics agree (``topic_lexical``, without an embedder)."""
    if layer == "episode":
        return feats
    if layer in LEXICAL:
        return {**feats, "topic_lexical": feats.get("topic", 0.0) * feats.get("lexical", 0.0)}
    return {**feats, "cos_topic": feats.get("cos", 0.0) * feats.get("topic", 0.0)}


def features(hit) -> dict[str, float]:
    """The named features of ``hit`` for its layer (missing signals read as 0)."""
    sig = {k: float(v["value"]) for k, v in hit.signals.items()}
    layer = layer_of(hit)
    if layer == "episode":
        return derive(layer, {"score": float(hit.score),
                "log_raw_bm25": math.log1p(max(0.0, float(hit.raw_bm25))), "fact": 1.0 if hit.tier == "semantic" else 0.0,
                "rerank": 0.0 if hit.rerank is None else float(hit.rerank),
                "reranked": 0.0 if hit.rerank is None else 1.0})
    if layer in LEXICAL:
        return derive(layer, {"topic": sig.get("topic", 0.0), "lexical": sig.get("lexical", 0.0),
                              "prompt_words": sig.get("prompt_words", 0.0), "asks": sig.get("asks", 0.0)})
    return derive(layer, {"sem": sig.get("sem", 0.0), "cos": sig.get("cos", 0.0),
                          "topic": sig.get("topic", 0.0), "lexical": sig.get("lexical", 0.0),
                          "route": sig.get("route", 0.0), "embedded": 1.0 if sig.get("embedded", 1.0) else 0.0,
                          "prompt_words": sig.get("prompt_words", 0.0), "asks": sig.get("asks", 0.0),
                          "margin": sig.get("margin", 0.0), "nearest": sig.get("nearest", 0.0),
                          "ccos": sig.get("ccos", 0.0)})


@dataclass
class LayerModel:
    bias: float
    weights: dict[str, float]

    def logit(self, feats: dict[str, float]) -> float:
        return self.bias + sum(w * feats.get(k, 0.0) for k, w in self.weights.items())


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@dataclass
class Calibration:
    """Per-layer logistic models and delivery thresholds."""

    models: dict[str, LayerModel]
    thresholds: dict[str, float]  # per layer: a false standing item ("holds now") misleads more than an old episode
    source: str = "<built-in>"
    meta: dict = field(default_factory=dict)
    # a prompt that asks for a choice: {threshold, relative} for its Global items (module docstring); {} none
    choice: dict = field(default_factory=dict)

    def probability(self, hit) -> float:
        """The fitted model's probability; for a standing item the prompt's kind of request names, at least
        ``FIXED["requested"]``."""
        p = self.model_probability(hit)
        if hit.requested:  # recall/packing.py Hit.requested: a Global item the prompt's kind of request names
            return max(p, FIXED["requested"])
        return p

    def model_probability(self, hit, *, implied: bool = True) -> float:
        """The fitted model's probability, with IMPLIED_LOGIT added for an item that bears on the request (unless
        ``implied`` is false)."""
        model = self.models.get(layer_of(hit))
        if model is None:
            return 0.0
        return _sigmoid(model.logit(features(hit)) + (IMPLIED_LOGIT if implied and hit.implied else 0.0))

    def apply(self, hits: list, threshold: float | None = None) -> tuple[list, list[str]]:
        """(the hits at or above their layer's threshold, merged by probability (:func:`merge_by_probability`);
        the reasons the others were left out). ``threshold`` (``calibration.threshold``; None or < 0: the file's) replaces the standing
        layers' thresholds. Each hit's ``probability`` is set."""
        kept, left = [], []
        for h in hits:
            h.probability = self.probability(h)
        override = threshold is not None and threshold >= 0
        choice = self.choice_threshold(hits) if not override else None
        for h in hits:
            layer = layer_of(h)
            t = threshold if override and layer != "episode" else self.thresholds[layer]
            why = ""
            if choice is not None and layer == "global" and not h.implied:
                t, why = choice, " of a prompt that asks for a choice"
            if h.probability >= t:
                kept.append(h)
            else:
                left.append(f"{h.id}: p={h.probability:.3f} below the {layer} threshold {t:.3f}{why}")
        return merge_by_probability(kept), left

    def choice_threshold(self, hits: list) -> float | None:
        """The Global items' threshold when the prompt asks for a choice (``choice`` section: at least its
        threshold and its relative share of the best Global item's probability); None when the prompt asks for
        none, or the file has no ``choice`` section. ``hits``' probabilities are set."""
        if not self.choice:
            return None
        standing = [h for h in hits if layer_of(h) == "global"]
        if not standing or not any((h.signals.get("asks") or {}).get("value", 0.0) >= 1.0 for h in standing):
            return None
        # the best on the fitted scale (an item on a fixed probability, requested, says nothing of the others),
        # among the items that could answer the choice: an identity fact (a membership number) answers none
        # (world knowledge's lift, IMPLIED_LOGIT, is not the evidence of nearness the share is measured against)
        best = max((self.model_probability(h, implied=False) for h in standing if h.role != "identity"), default=0.0)
        return max(self.choice["threshold"], self.choice["relative"] * best)

    def to_doc(self) -> dict[str, Any]:
        return {MARKER: VERSION, "threshold": {k: round(v, 6) for k, v in self.thresholds.items()},
                **({"choice": {k: round(v, 6) for k, v in self.choice.items()}} if self.choice else {}),
                "layers": {name: {"bias": round(m.bias, 6), "weights": {k: round(v, 6) for k, v in m.weights.items()}}
                           for name, m in self.models.items()},
                **({"meta": self.meta} if self.meta else {})}


def merge_by_probability(hits: list) -> list:
    """Episodes and facts in the order their ranking gave them (fusion, re-ranking: the layer's own order),
    standing items and skills best first, merged by probability: at each step the more probable of the two
    heads goes first, so calibration decides between layers and never reorders a layer's ranking."""
    episodes = [h for h in hits if layer_of(h) == "episode"]
    standing = sorted((h for h in hits if layer_of(h) != "episode"), key=lambda h: -h.probability)
    out, i, j = [], 0, 0
    while i < len(episodes) or j < len(standing):
        if j >= len(standing) or (i < len(episodes) and episodes[i].probability > standing[j].probability):
            out.append(episodes[i])
            i += 1
        else:
            out.append(standing[j])
            j += 1
    return out


def _number(value: Any, where: str) -> float:
    return bounded_number(value, where, MAX_WEIGHT)


def from_doc(doc: Any, source: str) -> Calibration:
    """A validated calibration from a parsed document; ConfigError (one line naming the key) otherwise."""
    if not isinstance(doc, dict) or doc.get(MARKER) != VERSION:
        raise ConfigError(f"{source}: not a calibration file (no '{MARKER}: {VERSION}' key)")
    raw = doc.get("threshold")
    raw = raw if isinstance(raw, dict) else {name: raw for name in LAYERS}
    thresholds = {}
    for name in LAYERS:
        t = _number(raw.get(name, raw.get(LEXICAL.get(name, ""))), f"{source}: threshold.{name}")
        if not 0.0 <= t <= 1.0:
            raise ConfigError(f"{source}: threshold.{name}: expected a probability in [0, 1], got {t}")
        thresholds[name] = t
    extra = sorted(set(raw) - set(LAYERS))
    if extra:
        raise ConfigError(f"{source}: threshold.{extra[0]}: unknown layer (expected one of {', '.join(LAYERS)})")
    layers = doc.get("layers")
    if not isinstance(layers, dict):
        raise ConfigError(f"{source}: layers: expected a mapping of {', '.join(LAYERS)}")
    models = {}
    for name, spec in layers.items():
        if name not in FEATURES:
            raise ConfigError(f"{source}: layers.{name}: unknown layer (expected one of {', '.join(LAYERS)})"[:300])
        if not isinstance(spec, dict) or not isinstance(spec.get("weights"), dict):
            raise ConfigError(f"{source}: layers.{name}: expected {{bias, weights: {{feature: number}}}}")
        weights = {}
        for k, v in spec["weights"].items():
            if k not in FEATURES[name]:
                raise ConfigError(f"{source}: layers.{name}.weights.{k}: unknown feature (expected one of "
                                  f"{', '.join(FEATURES[name])})"[:300])
            weights[k] = _number(v, f"{source}: layers.{name}.weights.{k}")
        models[name] = LayerModel(_number(spec.get("bias"), f"{source}: layers.{name}.bias"), weights)
    missing = [n for n in LAYERS if n not in models]
    if missing:
        raise ConfigError(f"{source}: layers: missing {', '.join(missing)}")
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    return Calibration(models, thresholds, source, meta, _choice(doc.get("choice"), source))


CHOICE_KEYS = ("threshold", "relative")


def _choice(raw: Any, source: str) -> dict[str, float]:
    """The validated ``choice`` section ({} when absent): two probabilities."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: choice: expected {{threshold: p, relative: r}}")
    extra = sorted(set(raw) - set(CHOICE_KEYS))
    if extra:
        raise ConfigError(f"{source}: choice.{extra[0]}: unknown key (expected threshold, relative)"[:300])
    out = {}
    for key in CHOICE_KEYS:
        v = _number(raw.get(key), f"{source}: choice.{key}")
        if not 0.0 <= v <= 1.0:
            raise ConfigError(f"{source}: choice.{key}: expected a value in [0, 1], got {v}")
        out[key] = v
    return out


#: presets that share another's features (and so its calibration): recommended is paper at k 2, hybrid is
#: hybrid-fast with a deeper re-ranking on the critical path
SHARED_PRESET = {"recommended": "paper", "hybrid": "hybrid-fast"}


def shipped_path(preset: str) -> Path:
    """The calibration shipped for ``preset`` (its own file, else the one of the preset it shares features with,
    else paper's)."""
    for name in (preset, SHARED_PRESET.get(preset, "paper"), "paper"):
        if (SHIPPED / f"{name}.yaml").is_file():
            return SHIPPED / f"{name}.yaml"
    return SHIPPED / "paper.yaml"


_CACHE = FileCache()


def _read(path: Path) -> Calibration:
    doc = read_artifact(path, MARKER, reading="the calibration", kind="a calibration file",
                        hint="; write one with `memtier train calibration`", max_bytes=MAX_BYTES)
    return from_doc(doc, str(path))


def load(path: str | Path) -> Calibration:
    """The calibration file at ``path``, read and validated once per (path, size, mtime)."""
    return _CACHE.get(Path(path), _read, reading="the calibration")


def for_config(config) -> Calibration:
    """The calibration a config names: ``calibration.file`` (relative: to the workspace), else the shipped one
    for its preset."""
    name = config.calibration.file
    if name:
        path = Path(name).expanduser()
        if not path.is_absolute():
            path = config.workspace / path
        try:
            return load(path)
        except ConfigError as exc:
            raise ConfigError(f"calibration.file: {exc}") from None
    return load(shipped_path(config.preset))


# ---------------------------------------------------------------- fitting


def fit_layer(X: np.ndarray, y: np.ndarray, names: Iterable[str], l2: float = 1.0,
              iterations: int = 50) -> LayerModel:
    """Logistic regression by Newton's method with an L2 penalty on the weights (not the bias)."""
    names = list(names)
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n, d = X.shape
    A = np.hstack([np.ones((n, 1)), X])
    w = np.zeros(d + 1)
    prior = min(max(y.mean() if n else 0.5, 1e-4), 1 - 1e-4)
    w[0] = math.log(prior / (1 - prior))
    reg = np.full(d + 1, l2)
    reg[0] = 0.0
    for _ in range(iterations):
        z = np.clip(A @ w, -30, 30)
        p = 1.0 / (1.0 + np.exp(-z))
        g = A.T @ (p - y) + reg * w
        H = (A * (p * (1 - p))[:, None]).T @ A + np.diag(reg + 1e-9)
        step = np.linalg.solve(H, g)
        w -= step
        if float(np.max(np.abs(step))) < 1e-8:
            break
    return LayerModel(float(w[0]), {k: float(v) for k, v in zip(names, w[1:])})


def auc(scores: list[float], labels: list[int]) -> float:
    """Area under the ROC curve (ties count half); NaN with one class only."""
    pos = [s for s, l in zip(scores, labels) if l]
    neg = [s for s, l in zip(scores, labels) if not l]
    if not pos or not neg:
        return float("nan")
    order = sorted(scores)
    ranks: dict[float, float] = {}
    i = 0
    while i < len(order):
        j = i
        while j < len(order) and order[j] == order[i]:
            j += 1
        ranks[order[i]] = (i + j + 1) / 2
        i = j
    r = sum(ranks[s] for s in pos)
    return (r - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg))
