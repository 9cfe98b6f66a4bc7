"""Delivering standing knowledge: what applies to this prompt, with no time decay.

Standing knowledge (the Global layer's preferences, constraints, rules,
identity and revealed choices; the Workspace layer's skills) holds until
revised or out of scope, so it is not ranked like an episode. For a prompt:

1. the prompt is routed to topics (:mod:`topics`);
2. every current item in scope (the project, the time) gets an applicability
   score in [0, 1] from three signals — the embedding cosine of prompt and item
   (when an embedder is available; mapped from bge-small's scale to [0, 1]),
   the cosine of their topic routes, and their word overlap — weighted by
   ``standing.sem``, ``standing.topic``, ``standing.lexical``;
3. an item whose attribute the prompt itself sets ("a hotel under $400 this
   time") is left out: a current explicit requirement overrides a stored
   preference within its scope (MemSidecar A.1);
4. the best ``standing.max_items`` with applicability ≥ ``standing.min_score``
   that the prompt reaches (``routed``) become candidates; calibration
   (:mod:`..recall.calibration`) turns their signals into the probability that
   they apply, on the same scale as every episode's, and they compete with
   episodes for the same ``top_k`` and token budget — the packed block labels
   them as standing preferences, rules or skills.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ..models.embedders import embed_as_query
from ..recall.packing import Hit
from .extract import main_clause, requirement_attributes
from .implications import Implications, implications
from .picks import as_said, reply_of
from .asking import asks as model_asks
from .requests import asks_for_choice, errand_objects, in_scope, scope_object
from ..tokenize import token_set
from .topics import TopicTree, cosine
from .workspace_layer import current_skills, skill_applies, skill_text

log = logging.getLogger(__name__)
SEM_FLOOR, SEM_SPAN = 0.30, 0.25  # embedding cosine → [0, 1] applicability (bge-small's scale)
# routed(): an item is reachable through its topics (their words, or — with an embedder — the topics the
# embeddings of prompt and item are nearest to), its words, or a near-certain embedding match. How these gates
# were chosen, and what they reach on PrefEval, is in docs/standing.md.
TOPIC_GATE, LEXICAL_GATE, SEM_GATE = 0.30, 0.10, 0.90
ROUTE_GATE, ROUTE_DELTA = 0.30, 0.04  # embedding route: the topics within 0.04 of the nearest one


@dataclass
class Item:
    """One standing item a prompt may be given."""

    id: str
    content: str
    label: str  # preference | constraint | rule | identity | choice | pick | skill
    tier: str  # global | procedural
    timestamp: str
    attribute: str = ""
    sources: list = field(default_factory=list)
    route: dict = field(default_factory=dict)
    tokens: frozenset = field(default_factory=frozenset)
    agent_id: str = ""
    session_id: str = ""
    tools: tuple = ()  # a skill's tools, in order
    requests: str = ""  # the kind of request it was said for ("anything you book for me": requests.in_scope)
    asked: str = ""  # the question the user answered choosing among offered options (picks.asked_in)


class StandingItems:
    """Every standing item in scope: the current Global nodes for a project and the project's skills, each
    built once (records never change, so items are cached by id). An id in ``forgotten`` (the user told memory
    to forget it: store/tombstones.py) is never an item: this is where every standing candidate is gathered."""

    def __init__(self):
        self._cache: dict[str, Item] = {}

    def __call__(self, global_store, skills, tree: TopicTree, project: str, now: float, *,
                 forgotten: frozenset = frozenset()) -> list[Item]:
        items = []
        for n in global_store.current(project, now):
            if n.id in forgotten:
                continue
            it = self._cache.get(n.id)
            if it is None:
                r, prov = n.rec, n.rec.get("provenance") or {}
                # a pick's or choice's option is written for the reader; what the user said is what is matched
                said = as_said(r["content"]) if r["node_kind"] in _SAID else r["content"]
                it = self._cache[n.id] = Item(r["id"], r["content"], r["node_kind"], "global", r["timestamp"],
                                              r.get("attribute", ""), list(prov.get("entry_ids") or []),
                                              tree.route(said), n.tokens if said == r["content"] else
                                              frozenset(token_set(said)), prov.get("agent_id", ""),
                                              prov.get("session_id", ""),
                                              requests=str((r.get("applies") or {}).get("requests") or ""),
                                              asked=str((r.get("applies") or {}).get("asked") or ""))
            items.append(it)
        for r in current_skills(skills):
            if r["id"] in forgotten:
                continue
            it = self._cache.get(r["id"])
            if it is None:
                prov = r.get("provenance") or {}
                text = skill_text(r)
                it = self._cache[r["id"]] = Item(r["id"], r["content"], "skill", "procedural", r["timestamp"], "",
                                                 list(prov.get("entry_ids") or []), tree.route(text),
                                                 frozenset(token_set(text)), prov.get("agent_id", ""),
                                                 prov.get("session_id", ""), tuple(r.get("tools") or ()))
            items.append(it)
        return items


def directory(items: list[Item], tree: TopicTree) -> dict[str, list[str]]:
    """The visible topic directory (MemSidecar I): topic → the ids of the items under it (3 topics each)."""
    out: dict[str, list[str]] = {}
    for it in items:
        for topic in tree.top(it.route, 3):
            out.setdefault(topic, []).append(it.id)
    return out


_TOPIC_VECTORS: dict[tuple, np.ndarray] = {}  # (embedder, topic texts) → their vectors
_TOPIC_LOCK = threading.Lock()


def overlap(q: frozenset, d: frozenset) -> float:
    """Share of the item's words the prompt has, damped for very short items (in [0, 1])."""
    if not q or not d:
        return 0.0
    return len(q & d) / (len(d) ** 0.5 * max(1.0, len(q)) ** 0.5)


def routed(sig: dict, route: float = 0.0) -> bool:
    """The prompt reaches the item through its topics (``route``: their embedding routes' cosine) or its
    words (or a near-certain embedding match): the topic index decides where to look, the score what to
    deliver (MemSidecar §3.2)."""
    return (sig["topic"] >= TOPIC_GATE or route >= ROUTE_GATE or sig["lexical"] >= LEXICAL_GATE
            or sig["sem"] >= SEM_GATE)


def reached_by_choice(item: Item, sig: dict) -> bool:
    """A prompt that asks for a choice reaches the Global items nearest it by embedding (``nearest``: within
    ROUTE_DELTA of the nearest cosine), with no topic or word in common: a preference that applies by world
    knowledge ("a trip to Las Vegas", "I dislike gambling") shares neither. Calibration still decides."""
    return bool(sig.get("asks")) and bool(sig.get("nearest")) and item.label != "skill"


# a pick (layers/picks.py bare_pick) says what the user went for when asked, not why: it is for a prompt that asks for
# a choice again, about what the pick's question was about: the prompt's vector less the common direction of prompts
# (``ccos``) at PICK_CCOS or more. Its "Asked '...?'" reads as a question, near every question by raw cosine, so the
# calibrated probability alone handed picks to other questions of a topic (probe_b's choice form: 0.425 wrong items a
# question without the floor, 0.312 at 0.05 for 0.013 fewer own ones; 0.1 cut more own: docs/evaluation.md "Picks")
PICK_CCOS = 0.05


def picked_for(sig: dict) -> bool:
    """A pick applies to a prompt that asks for a choice, and (when embedded) one about what its question was about."""
    return bool(sig.get("asks")) and (not sig.get("embedded") or sig.get("ccos", 0.0) >= PICK_CCOS)


def bears_on(sig: dict) -> bool:
    """The prompt asks for a choice and names what the item bears on by world knowledge (``implied``:
    layers/implications.py): "a dairy-free milk" and "I have a tree nut allergy" (calibration.IMPLIED_LOGIT)."""
    return bool(sig.get("asks")) and bool(sig.get("implied"))


_SAID = ("pick", "choice")  # written with the option taken beside what the user said (layers/picks.py as_said)
_HELD = ("preference", "constraint", "rule")  # a pick's "because" is what it reveals; skills and identity: as said


def embedded_text(item: Item) -> str:
    """What an item's embedding is computed from: a preference's, constraint's or rule's main clause (its reason's
    words would bring it to prompts the reason is about: issue 25), a pick or a choice as the user said it (without
    the option written beside it), anything else as said."""
    if item.label in _SAID:
        return as_said(item.content)
    return main_clause(item.content) if item.label in _HELD else item.content


_GROUP = {"skill": 1, "identity": 2}  # the kinds of item margin compares apart (0: preferences, rules, constraints)


def same_errand(item_route: dict[str, float], query_route: dict[str, float]) -> bool:
    """An item said for a kind of request applies to one about what it is about: not when the two are about
    different sub-topics of one topic ("an aisle seat", travel/transport, to a hotel, travel/lodging). An item
    under no sub-topic ("vegetarian meals" to a flight) is not told apart."""
    top = max(item_route.values(), default=0.0)
    for leaf in (t for t, w in item_route.items() if "/" in t and w >= top > 0):
        parent = leaf.rsplit("/", 1)[0] + "/"
        siblings = {t for t, w in query_route.items() if w > 0 and t.startswith(parent)}
        if siblings and leaf not in siblings:
            return False
    return True


def nearest_topics(sims: np.ndarray) -> np.ndarray:
    """A unit vector over topics: the cosines of the topics within ROUTE_DELTA of the nearest, others 0."""
    r = np.where(sims >= sims.max() - ROUTE_DELTA, np.maximum(sims, 0.0), 0.0)
    n = float(np.linalg.norm(r))
    return r / n if n > 0 else r


class StandingScorer:
    """Scores items for a prompt; holds the embedder and the item vectors it has computed."""

    def __init__(self, config, tree: TopicTree, embedder=None, *, center=None, request_model=None):
        self.cfg = config.standing
        self.tree = tree
        # what items bear on by world knowledge (layers/implications.py): the built-in concepts and the user's
        self.bears: Implications = implications(config.memory_root)
        self._concepts: dict[str, frozenset] = {}  # item id → the concepts its text holds
        self.embedder = embedder
        self.center = center  # layers/center.Center: the common direction of prompts, or None (raw cosines)
        # layers/asking: whether a prompt the rules do not read as asking asks, by its query vector; None: rules only
        self.request_model = request_model
        self._vectors: dict[str, np.ndarray] = {}
        self._asked: dict[str, np.ndarray] = {}  # item id → the vector of the question it was said answering
        self._routes: dict[str, np.ndarray] = {}  # item id → its embedding route (nearest_topics)
        self._object_routes: dict[str, dict[str, float]] = {}  # stated scope → the topic route of its object
        self._topics: np.ndarray | None = None  # one vector per topic of the tree, in tree order
        self._failed = False

    def _topic_vectors(self) -> np.ndarray:
        """Each topic embedded once per process and embedder as "name: its words" (~30 short texts)."""
        if self._topics is None:
            docs = tuple(f"{t.replace('/', ' ')}: {', '.join(sorted(w))}" for t, w in self.tree.words.items())
            e = self.embedder
            key = (type(e).__name__, getattr(e, "name", ""), str(getattr(e, "folder", "")), docs)
            with _TOPIC_LOCK:
                vecs = _TOPIC_VECTORS.get(key)
            if vecs is None:
                vecs = np.asarray(self.embedder.embed(list(docs)), dtype=np.float32).reshape(len(docs), -1)
                with _TOPIC_LOCK:
                    if len(_TOPIC_VECTORS) >= 8:  # a few trees (user topics) and embedders at most
                        _TOPIC_VECTORS.clear()
                    _TOPIC_VECTORS[key] = vecs
            self._topics = vecs
        return self._topics

    def _sem(self, query: str, items: list[Item]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """(embedding cosine of prompt and item, cosine of the embedding routes, cosine with the prompt's vector
        less the common direction of prompts (:mod:`.center`; the raw cosine without a center)) per item, and the
        prompt's query vector; or None."""
        if self.embedder is None or self._failed or not items or self.cfg.sem <= 0:
            return None
        try:
            topics = self._topic_vectors()
            missing = [it for it in items if it.id not in self._vectors]
            if missing:
                # one at a time: an int8 model quantises each batch on its own scale, so an item embedded beside
                # other texts gets a slightly different vector than alone, and what a prompt is handed would depend
                # on which items happened to be embedded together (once per item and process, so cheap)
                vecs = [self.embedder.embed([embedded_text(it)])[0] for it in missing]
                for it, v in zip(missing, vecs):
                    v = self._vectors[it.id] = np.asarray(v, dtype=np.float32)
                    self._routes[it.id] = nearest_topics(topics @ v)
            for it in items:
                if it.asked and it.id not in self._asked:
                    self._asked[it.id] = np.asarray(self.embedder.embed([it.asked])[0], dtype=np.float32)
            qv = np.asarray(embed_as_query(self.embedder, query), dtype=np.float32)
            qc = self.center.apply(qv) if self.center is not None else None
            vecs = [self._nearer(it, qv if qc is None else qc) for it in items]
            cos = np.array([float(v @ qv) for v in vecs])
            ccos = cos if qc is None else np.array([float(v @ qc) for v in vecs])
            qroute = nearest_topics(topics @ qv) if len(topics) else qv[:0]
            routes = np.array([float(self._routes[it.id] @ qroute) if len(topics) else 0.0 for it in items])
        except Exception as exc:  # a model failure keeps the lexical signals
            log.warning("standing knowledge: embedder failed (%s); topic and word signals only", exc)
            self._failed = True
            return None
        # bge-small puts unrelated text at ~0.30-0.40 and an applicable preference at ~0.45-0.55
        return cos, routes, ccos, qv

    def _nearer(self, item: Item, q: np.ndarray) -> np.ndarray:
        """The item's vector, or the vector of the question it was said answering (``asked``) when that is nearer
        the prompt's (``q``: its vector less the common direction of prompts). "The flight. I get horribly seasick."
        said choosing how to get from Athens to Santorini bears on a later trip between islands, which the words
        "I get horribly seasick" are far from; the item's own words and topics still make its other signals."""
        v = self._vectors[item.id]
        a = self._asked.get(item.id) if item.asked else None
        return a if a is not None and float(a @ q) > float(v @ q) else v

    def score(self, query: str, items: list[Item]) -> list[tuple[Item, float, dict]]:
        """(item, applicability, signals) for every item the prompt can bear on (not one said for another topic's
        errands), best first."""
        if not items:
            return []
        qroute = self.tree.route(query)
        qtoks = frozenset(token_set(query))
        sem = self._sem(query, items)
        cos, routes, ccos, qv = sem if sem is not None else (None, None, None, None)
        sem = np.clip((cos - SEM_FLOOR) / SEM_SPAN, 0.0, 1.0) if cos is not None else None
        w_sem = self.cfg.sem if sem is not None else 0.0
        total = w_sem + self.cfg.topic + self.cfg.lexical
        # the rules' request forms, else the request model over the prompt's vector (layers/asking.py)
        asks = asks_for_choice(query) or (1.0 if model_asks(self.request_model, qv) else 0.0)
        # the concepts whose objects the prompt names (standing.implications: false, none)
        named = self.bears.named(query) if self.cfg.implications else frozenset()
        # what the request is about, for the items said for a kind of request (same_errand)
        about = self.tree.route(errand_objects(query)) if any(it.requests for it in items) else qroute
        # margin and nearest compare an item with the nearest item of its own kind: a skill's text holds the prompt
        # that made it, so beside a skill every preference would read "far from the nearest"; an identity fact
        # (a name, a membership number) answers no question in a preference's place
        group = np.array([_GROUP.get(it.label, 0) for it in items])
        best = {k: float(ccos[group == k].max()) if ccos is not None and (group == k).any() else 0.0
                for k in set(group.tolist())}
        out = []
        for i, it in enumerate(items):
            sig = {"sem": float(sem[i]) if sem is not None else 0.0, "topic": cosine(qroute, it.route),
                   "lexical": min(1.0, overlap(qtoks, it.tokens))}
            s = (w_sem * sig["sem"] + self.cfg.topic * sig["topic"] + self.cfg.lexical * sig["lexical"]) / total \
                if total > 0 else 0.0
            sig["route"] = float(routes[i]) if routes is not None else 0.0  # gates delivery, not in the score
            # what calibration reads besides: whether ``sem`` was measured, and the raw cosine
            sig["embedded"] = 1.0 if cos is not None else 0.0
            sig["cos"] = float(cos[i]) if cos is not None else 0.0
            # the cosine with what this prompt is about: its vector less the common direction of prompts (.center)
            sig["ccos"] = float(ccos[i]) if ccos is not None else 0.0
            sig["prompt_words"] = min(len(qtoks), 20) / 20  # a prompt of few words embeds unreliably
            sig["asks"] = asks  # the prompt asks for a choice (layers/requests.py)
            # the item holds a concept whose objects the prompt names: it bears on it by world knowledge
            sig["implied"] = 1.0 if named and it.label != "skill" and self._held(it) & named else 0.0
            # how far the item's cosine (``ccos``) is under this prompt's nearest item's (0 for the nearest): one
            # preference usually answers a question, but several close ones may all apply, so it is graded
            sig["margin"] = float(ccos[i]) - best[int(group[i])] if ccos is not None else 0.0
            # among the nearest: within ROUTE_DELTA of the nearest cosine (closer than that, bge-small's cosines
            # do not order two items reliably, so a flight booking's seat and meal rules are both nearest)
            sig["nearest"] = 1.0 if cos is not None and sig["margin"] >= -ROUTE_DELTA else 0.0
            # a request about another topic than the one the user said the item is for ("whenever you book a
            # restaurant" to "Find me a flight") is not the item's at all, whatever its words share with the prompt.
            # Another sub-topic of the same topic (a flight's seat to a hotel) only keeps it from being requested: a
            # prompt's route can miss a facet ("going to Porto for two nights" is a trip too)
            if it.requests and not self._object_applies(it.requests, about):
                continue
            # the prompt is a request of the kind the user said the item is for ("anything you book for me"):
            # the item applies by the user's own word (calibration.FIXED["requested"])
            sig["requested"] = 1.0 if it.requests and same_errand(it.route, about) \
                and in_scope(query, it.requests, asks=asks) else 0.0
            out.append((it, s, sig))
        out.sort(key=lambda t: (-t[1], t[0].id))
        return out

    def _held(self, item: Item) -> frozenset:
        """The concepts an item's text holds, once per item: of a pick or choice, the reply the user chose with (the
        question asked is about what was offered, "What coffee should I try?", and the option is the offer's)."""
        got = self._concepts.get(item.id)
        if got is None:
            got = self._concepts[item.id] = self.bears.concepts(
                reply_of(item.content) if item.label in _SAID else item.content)
        return got

    def _object_applies(self, phrase: str, about: dict[str, float]) -> bool:
        """A scope that names what its errands are about ("whenever you book a restaurant", "book flights") holds
        for a request about the same: not when both route and share no topic ("Find me a flight" is no restaurant
        booking). A request whose words route nowhere is not told apart."""
        obj = self._object_routes.get(phrase)
        if obj is None:  # one route per scope phrase: they are few and outlive the prompt
            obj = self._object_routes[phrase] = self.tree.route(scope_object(phrase))
        if not obj or not about:
            return True
        tops = {t.split("/")[0] for t, w in obj.items() if w > 0}
        return any(t.split("/")[0] in tops for t, w in about.items() if w > 0)

    def hits(self, query: str, items: list[Item], *, own: str | None = None) -> list[Hit]:
        """The standing items to deliver for ``query`` (see the module docstring); ``own``: the user's own words
        when the query holds the turns before them (an amount in the agent's offer sets no requirement)."""
        t0 = time.perf_counter()
        if self.cfg.max_items <= 0:
            return []
        overridden = requirement_attributes(query if own is None else own)
        items = [it for it in items if not (it.attribute and it.attribute in overridden)
                 and (it.label != "skill" or skill_applies(query, it))]  # a skill only for its kind of task
        out = []
        scored = self.score(query, items)  # best first; the items the prompt's kind of request names go first
        ranked = 0  # the items k bounds: an item the prompt's kind of request names is not one of them
        for it, s, sig in sorted(scored, key=lambda t: -t[2]["requested"]):
            # an item the user's word or world knowledge puts on this request is a candidate whatever its score
            named = sig["requested"] or bears_on(sig)
            if not named and (ranked >= self.cfg.max_items or s < self.cfg.min_score):
                continue
            if not (routed(sig, sig["route"]) or reached_by_choice(it, sig) or named):
                continue
            if it.label == "pick" and not picked_for(sig):
                continue
            ranked += not named
            signals = {k: {"value": v, "weight": getattr(self.cfg, k, 0.0), "contribution": v * getattr(self.cfg, k, 0.0)}
                       for k, v in sig.items()}
            out.append(Hit(id=it.id, content=it.content, timestamp=it.timestamp, session_id=it.session_id,
                           agent_id=it.agent_id, role=it.label, tier=it.tier, score=s,
                           signals=signals, sources=list(it.sources), route=self.tree.top(it.route, 3),
                           said_for=it.requests))
        log.debug("standing: %d of %d items in %.1f ms", len(out), len(items), (time.perf_counter() - t0) * 1000)
        return out
