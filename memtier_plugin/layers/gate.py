"""The learned standing gate: what the rules pass over, read by a model of what users say for good.

The rules of :mod:`.extract` are precise but know only the wordings they were
written for: on hand-written held-out sentences ("Cruises? Not my scene.",
"Anything departing before 7 a.m. is my kryptonite", "Middle seats are my
personal nightmare") they took about half of what users mean for good. A
user sentence they do not take, and that could state something lasting (the
speaker's own words: first person, no question, no past occasion, no request
of the moment), is embedded with the standing embedder (bge-small) and
scored by a logistic model over its vector; at or above the gate's threshold
it becomes a preference candidate, with the same provenance and the same
later path as a rule's (dedupe, revision, calibrated delivery). A message none
of whose sentences passes alone, of a statement's shape, is read once more,
whole ("mushrooms are the devil. remove them from my life":
:func:`whole_messages`; the gate was fitted on whole messages). A reply that
picks one of the options the assistant offered is read for the reason it
gives besides the pick ("Audiobook. I'm dyslexic, listening is just way easier
for me."), at probability 0.1 when it could hold beyond the pick: not said of
the moment, not a fact about the option (:func:`lasting_reason`, :mod:`.picks`).

The model is data, never code: a file holding ``memtier_standing_gate: 1``,
the embedder it was fitted with, the threshold, a bias and one weight per
dimension (``memtier train gate`` fits one from labelled sentences; the one
shipped in ``data/standing_gate.yaml`` was fitted on tests/data/
standing_labels.jsonl without its ``colloquial_heldout`` split). It is used
only with the embedder it was fitted with (``standing.gate``; docs/standing.md
"The learned gate"). Each sentence is embedded alone (an int8 model quantises
a batch on one scale: docs/standing.md), once per message, at a task boundary
or a consolidation batch, never on a prompt's path.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import ConfigError
from ..store.artifacts import FileCache, bounded_number, load_named, read_artifact
from . import forms
from .extract import Candidate, clean, episodic, extract, holds_since, of_the_moment, sentences
from .picks import among_options, answered, choice, picks_an_option, reason_given, restates_pick
from .requests import asks_for_choice

log = logging.getLogger(__name__)

MARKER = "memtier_standing_gate"
VERSION = 1
SHIPPED = Path(__file__).resolve().parent.parent / "data" / "standing_gate.yaml"
MAX_BYTES = 256 * 1024
MAX_DIM = 4096
MAX_WEIGHT = 1e3
# someone else's liking or doing ("My husband refuses to fly", "My kids hate broccoli"): the subject is another
_OTHER = re.compile(r"^(?:\w+,\s*)?(?:my|our)\s+(?:[\w-]+\s+){0,2}?(?:husband|wife|partner|boyfriend|girlfriend|son|"
                    r"daughter|kids?|children|sister|brother|mom|mother|dad|father|parents|friends?|boss|colleagues?|"
                    r"coworkers?|roommates?|neighbou?rs?|family|team)\s+(?!and I\b)", re.IGNORECASE)
MIN_CHARS, MAX_WORDS = 12, 60
# a pick's reason is taken when it could hold beyond the pick (:func:`lasting_reason`) and the gate gives it 0.1 or
# more: the reply picks from an offer, so what it says besides the pick, unless of the moment or about the option, is
# a disposition far more often than a sentence anywhere; the gate, fitted on sentences said on their own, scores a
# pick's lasting reason low ("Pickleball. Contact sports are out for me since the shoulder surgery." 0.07) and its
# 0.1 keeps out what says neither a moment nor the option ("The salad, I had a huge lunch." 0.05;
# tests/data/standing_labels.jsonl, choice_d: 0.5 took 0.812 of the lasting reasons, this 0.894, both at precision 1).
# A "reason" that says the pick again ("Option 2, the split schedule with a break at 3, would work best for us":
# picks.restates_pick) is no disposition of the speaker's: it needs 0.5, as every pick's reason did before (at 0.1,
# probe_b's choice questions were handed 22 more wrong items, most of them such picks), as does a reason in a reply
# longer than a pick's
PICK_THRESHOLD = 0.1
RESTATED_THRESHOLD = 0.5
# ... and only in a reply of a pick's length: a longer one that names an option by a word of a long answer is a
# follow-up of its own (LongMemEval's haystacks: "By the way, speaking of basketball, I've been thinking about my own
# game and was wondering if you could give me some tips ...")
PICK_WORDS = 40
# a reason said of this moment ("sushi, craving it tonight", "The taster session for now", "Barbie, I'm not in the
# mood for anything heavy", "Soup, I've got a sore throat", "I only have like 30 minutes") or of the option itself
# ("it's the newest model", "since it's the season opener"): it holds for this pick only
_NOW = re.compile(r"\b(?:today|tonight|tomorrow|yesterday|right now|for now|at the moment|currently|"
                  r"this (?:time|once|week|weekend|morning|evening|afternoon|month|trip|visit)|"
                  r"next (?:week|weekend|month|time)|(?:in|in no) (?:the )?mood|short on|(?:our|my|the) dates|"
                  r"where (?:I'm|we're|I am|we are) staying|"
                  r"(?:only|just) (?:have|got) (?:like |about |maybe )?(?:\d+|a few|an?) (?:minutes?|mins|hours?)|"
                  r"on (?:a|the|this|my) [\w-]+ (?:drive|flight|ride)|"
                  r"I(?:'ve| have) got (?:an? )?(?:cold|sore throat|headache|fever|cough|flu|hangover)|"
                  r"I'm (?:so |really )?(?:sick|tired|exhausted|starving|hungry|stuffed|hungover|wiped))\b",
                  re.IGNORECASE)
_OF_THE_OPTION = re.compile(r"^(?:(?:since|because|as|and)\s+)?(?:it|it's|its|they|they're|that one|this one|"
                            r"that's|which)\b", re.IGNORECASE)
# nor the pick's own praise, said with no subject or the option's ("Working out around 5 p.m. makes the most sense for
# me", "Option 1, Chamberi, sounds right for me", "That works nicely for me", "Sitting back and enjoying the scenery
# sounds perfect"): how the option strikes the speaker this time, not a disposition
_PRAISE = re.compile(r"^(?:[\w'-]+,\s*)?(?:(?:that|this|it|which)(?:\s+one)?\s+(?:\w+ly\s+)?)?"
                     r"(?:makes|sounds?|seems?|looks?|feels?|works?|fits?|suits?)\b|"
                     # or said of what it names ("Sitting back and enjoying the scenery sounds perfect.")
                     r"^[^,;]{0,80}?\b(?:sounds?|seems?|looks?)\s+(?:\w+\s+)?(?:perfect|great|good|ideal|right|nice|fun|"
                     r"lovely|amazing|wonderful|best|better|fantastic|awesome)\b", re.IGNORECASE)
# nor a reason: a proposal or an instruction for the task at hand ("Let's work this out step by step:", "Do not provide
# the ending"), something asked of the assistant ("please provide some additional options"), a recent event
_PROPOSAL = re.compile(r"(?:let(?:'s| us)|(?:please\s+)?(?:do not|don't|never) (?:provide|give|show|tell|write|include|"
                       r"add|list|mention|make))\b", re.IGNORECASE)
_ASKS = re.compile(r"\b(?:please|recently|lately|wondering|wonder if)\b", re.IGNORECASE)
# nor thanks: what extract.clean leaves of "Thanks for the tips and advice!"
_THANKS = re.compile(r"^(?:thank|thanks|thx|cheers|appreciate)\b|^for (?:the|all|your)\b", re.IGNORECASE)
# texts read per call (a run, a session of a batch; a sentence, or a message read whole: :func:`whole_messages`):
# about 6 ms each, so a host's 20,000-character message costs agent_end at most ~0.3 s; the first ones are read
# (deterministic, unlike a time budget)
MAX_READ = 48


@dataclass
class Gate:
    """A logistic model over a sentence's embedding."""

    weights: np.ndarray
    bias: float
    threshold: float
    embedder: str  # the embedder's name it was fitted with (its vectors are what the weights read)
    source: str = "<built-in>"
    meta: dict = field(default_factory=dict)

    def probabilities(self, vectors: np.ndarray) -> np.ndarray:
        z = np.asarray(vectors, dtype=np.float64) @ self.weights + self.bias
        return 1.0 / (1.0 + np.exp(-np.clip(z, -60, 60)))

    def to_doc(self, marker: str = MARKER) -> dict[str, Any]:
        return {marker: VERSION, "embedder": self.embedder, "threshold": round(float(self.threshold), 6),
                "bias": round(float(self.bias), 6), "weights": [round(float(w), 6) for w in self.weights],
                **({"meta": self.meta} if self.meta else {})}


def _number(value: Any, where: str) -> float:
    return bounded_number(value, where, MAX_WEIGHT)


def from_doc(doc: Any, source: str, *, marker: str = MARKER, what: str = "standing gate") -> Gate:
    """A validated gate from a parsed document; ConfigError (one line naming the key) otherwise. ``marker`` and
    ``what``: another logistic model over an embedding in the same shape (:mod:`.asking`'s request model)."""
    if not isinstance(doc, dict) or doc.get(marker) != VERSION:
        raise ConfigError(f"{source}: not a {what} file (no '{marker}: {VERSION}' key)")
    extra = sorted(set(doc) - {marker, "embedder", "threshold", "bias", "weights", "meta"})
    if extra:
        raise ConfigError(f"{source}: {extra[0]}: unknown key (expected embedder, threshold, bias, weights, meta)"[:300])
    name = doc.get("embedder")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{source}: embedder: expected the name of the embedder the {what} was fitted with")
    threshold = _number(doc.get("threshold"), f"{source}: threshold")
    if not 0.0 <= threshold <= 1.0:
        raise ConfigError(f"{source}: threshold: expected a probability in [0, 1], got {threshold}")
    raw = doc.get("weights")
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_DIM:
        raise ConfigError(f"{source}: weights: expected a list of 1-{MAX_DIM} numbers")
    weights = np.array([_number(w, f"{source}: weights[{i}]") for i, w in enumerate(raw)], dtype=np.float64)
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    return Gate(weights, _number(doc.get("bias"), f"{source}: bias"), threshold, name.strip(), source, meta)


_CACHE = FileCache(limit=8)


def _read(path: Path) -> Gate:
    doc = read_artifact(path, MARKER, reading="the standing gate", kind="a standing gate file",
                        hint="; write one with `memtier train gate`", max_bytes=MAX_BYTES)
    return from_doc(doc, str(path))


def load(path: str | Path | None = None) -> Gate:
    """The gate file at ``path`` (None: the shipped one), read and validated once per (path, size, mtime)."""
    return _CACHE.get(Path(path) if path else SHIPPED, _read, reading="the standing gate")


def for_config(config, workspace: Path | None = None) -> Gate | None:
    """The gate ``standing.gate`` names, or None (``none``). ``standing.gate_file`` (relative: to the workspace)
    replaces the shipped one; ``standing.gate_threshold`` (≥ 0) its threshold."""
    cfg = config.standing
    if cfg.gate == "none":
        return None
    gate = load_named("standing.gate_file", cfg.gate_file, workspace if workspace is not None else config.workspace,
                      load)
    if cfg.gate_threshold >= 0:
        gate = Gate(gate.weights, gate.bias, cfg.gate_threshold, gate.embedder, gate.source, gate.meta)
    return gate


def resolve(config, embedder: Callable[[], Any]) -> tuple:
    """(the gate the config names, the embedder it reads) for the maintenance path, or (None, None): ``standing.gate:
    none``, no embedder (``embedder()`` is asked only when the gate is on), one it was not fitted with, or a gate
    that cannot be read (logged; extraction keeps its rules: a bad ``gate_file`` already stopped startup)."""
    try:
        gate = for_config(config)
        emb = embedder() if gate is not None else None
    except Exception as exc:
        log.warning("the standing gate is not used: %s", exc)
        return (None, None)
    return (gate, emb) if emb is not None and embedder_name(emb) == gate.embedder else (None, None)


def embedder_name(embedder) -> str:
    return str(getattr(embedder, "name", "") or type(embedder).__name__)


def eligible(sent: str, *, own: bool = False) -> bool:
    """Whether a sentence could state something lasting about the speaker: their own words (first person, not
    someone else's liking), no question, no past occasion, moment, plan or offer, no request, of a sentence's length
    (``sent`` as extract.clean leaves it: plain apostrophes). ``own``: the sentence is the reason a pick gives, the
    speaker's view without a first person ("Big chain hotels all feel the same", "Blue cheese is the worst thing
    ever invented"), unless it addresses the assistant, and only when it could hold beyond the pick
    (:func:`lasting_reason`)."""
    return (len(sent) >= MIN_CHARS and len(sent.split()) <= MAX_WORDS and not sent.rstrip().endswith("?")
            and (bool(forms.FIRST_PERSON.search(sent)) or (own and not forms.YOU.search(sent))) and not _OTHER.match(sent)
            and (not episodic(sent) or holds_since(sent))
            and not of_the_moment(sent)
            and not forms.REQUEST.search(sent)
            and (not own or lasting_reason(sent)))


def lasting_reason(sent: str) -> bool:
    """Whether a pick's reason could hold beyond the pick: not said of the moment, not a fact about the option
    (unless the speaker says what it is to them: "it's the only one without nuts and I'm allergic"), not the pick's
    praise with no subject ("makes the most sense for me"), not a proposal for the task at hand or the lead-in to
    what follows ("Let's work this out step by step:", "Do not provide the ending"), nothing asked of the assistant
    ("please provide some additional options", "wondering if you could give me some tips"), no thanks ("Thanks for
    the tips!")."""
    return not (_NOW.search(sent) or (_OF_THE_OPTION.search(sent) and not forms.FIRST_PERSON.search(sent)) or _PRAISE.match(sent)
                or _PROPOSAL.match(sent) or sent.rstrip().endswith(":") or forms.YOU.search(sent) or _ASKS.search(sent)
                or _THANKS.match(sent))


def unread(messages: Sequence[tuple[str, str, str]]) -> list[tuple[str, str, float | None]]:
    """(entry id, sentence, floor) of every user sentence the rules take nothing from and that is
    :func:`eligible`. A reply that picks one of the options the assistant just offered is read only for the reason
    it gives besides the pick ("Audiobook. I'm dyslexic, listening is just way easier for me."; :func:`.picks.
    reason_given`), and only when the choice rule took no choice from it (a bare pick it keeps as a pick has no
    reason it read: "The salad. I'm vegan."): a reason of the moment ("Uber this time, I've got two heavy
    suitcases") shows no standing preference. ``floor``: None for a
    sentence said on its own, the probability a pick's reason needs for one (PICK_THRESHOLD, RESTATED_THRESHOLD when
    it says the pick again: :func:`.picks.restates_pick`)."""
    out = []
    before = ("", "", "")
    query = None  # the user's last message before the assistant's
    for eid, role, text in messages:
        prev, before = before, (eid, role, text if isinstance(text, str) else "")
        if role != "user" or not isinstance(text, str) or len(text) > 20_000:
            continue
        pick = None
        if prev[1] == "assistant" and picks_an_option(text, prev[2]):
            pick = (query, (prev[2], prev[0]), (text, eid))
            found = choice(*pick)  # the choice rule read the reason already; a bare pick has none to read
            taken = found is not None and found.node_kind == "choice"
            # a pick said as an intention or a verdict ("I'll go with ...", "... works best") is read as one only in
            # a reply of a pick's length to a question that asked for a choice (picks.reason_given)
            if among_options(query, text) and not taken:
                asked = bool(query) and len(text.split()) <= PICK_WORDS and bool(asks_for_choice(query[0]))
                text = reason_given(text, prev[2], asked=asked)
            else:
                text = ""
        query = (text if pick is None else pick[2][0], eid)
        for sent in sentences(text):
            sent = clean(sent)
            if eligible(sent, own=pick is not None) and not extract(sent, role="user"):
                out.append((eid, sent, _floor(sent, pick)))
    return out


def _floor(sent: str, pick: tuple | None) -> float | None:
    """The probability ``sent`` needs besides the gate's own threshold: None for a sentence said on its own; for a
    pick's reason (``pick``: the exchange, (question, (offer, id), (reply, id))) PICK_THRESHOLD, or RESTATED_THRESHOLD
    when the reply is longer than a pick's or the reason says the pick again."""
    if pick is None:
        return None
    reply, offer = pick[2][0], pick[1][0]
    if len(reply.split()) > PICK_WORDS or restates_pick(sent, offer):
        return RESTATED_THRESHOLD
    return PICK_THRESHOLD


def embed_each(embedder, texts: Sequence[str]) -> np.ndarray:
    """One vector per text, each embedded alone (the same vector whatever it is embedded beside)."""
    vecs = [np.asarray(embedder.embed([t])[0], dtype=np.float64) for t in texts]
    return np.vstack(vecs) if vecs else np.zeros((0, 0))


def candidates(messages: Sequence[tuple[str, str, str]], gate: Gate, embedder) -> list[Candidate]:
    """The preference candidates the gate takes from ``messages`` ((entry id, role, text))."""
    if gate is None or embedder is None or embedder_name(embedder) != gate.embedder:
        return []
    todo = unread(messages)
    if len(todo) > MAX_READ:
        log.debug("standing gate: %d sentences to read, the first %d read", len(todo), MAX_READ)
        todo = todo[:MAX_READ]
    if not todo:
        return []
    vecs = embed_each(embedder, [s for _, s, _ in todo])
    if vecs.shape[1] != len(gate.weights):
        log.warning("standing gate %s: fitted on %d dimensions, the embedder gives %d; not used", gate.source,
                    len(gate.weights), vecs.shape[1])
        return []
    probs = gate.probabilities(vecs)
    passed = [p >= (gate.threshold if floor is None else min(gate.threshold, floor)) for (_e, _s, floor), p in
              zip(todo, probs)]
    # a message none of whose sentences passes alone is read once more, whole (:func:`whole_messages`)
    took = {e for (e, _s, _f), ok in zip(todo, passed) if ok}
    wholes = whole_messages(messages, {e for e, _s, _f in todo} - took)[:MAX_READ - len(todo)]
    whole_probs = gate.probabilities(embed_each(embedder, [t for _, t in wholes])) if wholes else []
    # a pick's reason is a preference of its own, like any sentence the gate takes ("I'm dyslexic, listening is just
    # way easier for me."): worded as a choice ("Asked ..., the user chose: ..."), the question's words made it
    # reach every question of its kind (probe_d, hybrid-fast: 13 more wrong items, 2 fewer own ones)
    asked = answered(messages)  # a pick's reason is said about what was being chosen (picks.asked_in)
    return ([Candidate("preference", sent, "", [eid], asked=asked.get(eid, ""))
             for (eid, sent, _floor), ok in zip(todo, passed) if ok]
            + [Candidate("preference", text, "", [eid], asked=asked.get(eid, ""))
               for (eid, text), p in zip(wholes, whole_probs) if p >= gate.threshold])


# a message that reacts to what the other side said ("Yeah, ...", "Wow, ...", "That's ...", "TIL ..."): conversation,
# not a statement about the speaker
_REACTION = re.compile(r"^(?:yeah|yep|yup|yes|wow|oh|haha|lol|thanks|thank|sure|totally|definitely|absolutely|"
                       r"agreed|same|true|right|exactly|ok|okay|nice|cool|great|awesome|sounds|it's|it is|that's|"
                       r"that is|this|til)\b", re.IGNORECASE)
WHOLE_MIN_SENTENCES = 2


def whole_messages(messages: Sequence[tuple[str, str, str]], ids: set[str]) -> list[tuple[str, str]]:
    """(entry id, text) of the user messages among ``ids`` (messages the gate read sentence by sentence and took
    nothing from) to be read whole: a preference said over two or three short sentences ("mushrooms are the devil.
    remove them from my life", "student loans have me broke till further notice lol. cheapest option always") has
    no sentence that says it alone, and the gate was fitted on whole labelled messages. Only a message of a
    statement's shape: 2+ sentences, at most MAX_WORDS words, the speaker's own words (first person, no one else's
    liking, nothing addressed to the assistant), no question, no exclamation, no reaction to the other side, and no
    sentence of a past occasion, an offer, a moment or one the rules take (those messages are read already)."""
    out = []
    for eid, role, text in messages:
        if eid not in ids or role != "user" or not isinstance(text, str) or len(text) > 20_000:
            continue
        whole = clean(" ".join(text.split()))
        parts = [clean(s) for s in sentences(whole)]
        if (len(parts) >= WHOLE_MIN_SENTENCES and len(whole.split()) <= MAX_WORDS and "!" not in whole
                and forms.FIRST_PERSON.search(whole) and not _OTHER.match(whole) and not forms.YOU.search(whole)
                and not _REACTION.match(whole)
                and not any(s.rstrip().endswith("?") or episodic(s) or of_the_moment(s) or extract(s, role="user")
                            for s in parts)):
            out.append((eid, whole))
    return out


def fit(vectors: np.ndarray, labels: Sequence[bool], *, l2: float = 30.0) -> tuple[np.ndarray, float]:
    """Logistic regression on standardised features (L2 ``l2`` on the weights; calibration's Newton solver,
    :func:`..recall.calibration.fit_layer`), returned on the raw vectors' scale: (weights, bias)."""
    from ..recall.calibration import fit_layer

    X = np.asarray(vectors, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if X.ndim != 2 or len(X) != len(y) or not len(y) or not np.isfinite(X).all():
        raise ValueError("fit: expected one finite vector per label")
    mu, sd = X.mean(axis=0), X.std(axis=0) + 1e-6
    names = [str(i) for i in range(X.shape[1])]
    model = fit_layer((X - mu) / sd, y, names, l2=l2)
    w = np.array([model.weights[k] for k in names])
    return w / sd, model.bias - float((mu / sd) @ w)
