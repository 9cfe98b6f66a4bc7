"""What the learned intervention policy reads (Pulse §3.4): features of a proposed call against standing knowledge.

At pre_tool the fixed rule (:mod:`.rules`) only knows conflicts it can compute
(a weekday, a time, an amount, a call that already failed). A standing
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
  "alcohol-free", "vegan leather"); with the cross-encoder, its reading of the pair;
* with the pair model (``scheduling.judge``), its probability that the call goes
  against each of the top items (:func:`judge_features`).

How well each separates following from violating options is in docs/evaluation.md.
"""

from __future__ import annotations

import re
import threading

import numpy as np

from ..tokenize import token_set

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
# the pair model (models.judge) on (standing item, call) in two phrasings of the call: the option alone
# ("judge_*") and "Asked: <request> Suggested: <option>" ("judge_ask_*"); *_sel: P(the call goes against the
# evidence-selected item), *_top1: the best-applying item's, *_max: the highest of the top EVIDENCE_K. Only
# the pairs a policy's features name are scored (a pair ~0.1 s on one core)
JUDGE_PHRASINGS = {"judge": "option", "judge_ask": "asked"}
JUDGE_FEATURES = ("judge_sel", "judge_ask_sel", "judge_ask_top1", "judge_ask_max")
KNOWN_FEATURES = FEATURES + EVIDENCE_FEATURES + RANKED_FEATURES + CROSS_FEATURES + JUDGE_FEATURES
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


def judge_pair(phrasing: str, item_text: str, call: str, request: str) -> tuple[str, str]:
    """The (preference, text) pair the judge reads: the call text alone (``option``) or with the request it
    answers (``asked``: "Asked: <request> Suggested: <call>")."""
    text = call if phrasing == "option" else f"Asked: {request.strip()} Suggested: {call}"
    return item_text, text


def judge_features(judge, call: str, request: str, scored: list, feats: dict,
                   names: tuple = JUDGE_FEATURES) -> dict[str, float]:
    """The JUDGE_FEATURES ``names`` asks for: ``judge.score`` over the (item, call) pairs they need (the
    evidence-selected item for *_sel, the best-applying one for *_top1, the top EVIDENCE_K for *_max), in one
    call. ``feats``: the call's other features (their SELECTED_KEY names the selected item). Every value is a
    number in [0, 1] (ValueError otherwise)."""
    top = [it for it, _ in scored[:EVIDENCE_K]]
    sel = int(feats.get(SELECTED_KEY, 0))
    sel = sel if 0 <= sel < len(top) else 0
    need: dict[str, list[int]] = {}
    for n in names:
        if n in JUDGE_FEATURES and top:
            p, what = n.rsplit("_", 1)
            idx = {"sel": [sel], "top1": [0], "max": list(range(len(top)))}[what]
            need[p] = sorted(set(need.get(p, [])) | set(idx))
    pairs = list(dict.fromkeys(judge_pair(JUDGE_PHRASINGS[p], top[k].content, call, request)
                               for p, ks in need.items() for k in ks))
    if not pairs:
        return {}
    probs = judge.score(pairs)
    if len(probs) != len(pairs) or not all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in probs):
        raise ValueError("the judge's scores are not one probability a pair")
    got = dict(zip(pairs, probs))

    def prob(p: str, k: int) -> float:
        return got[judge_pair(JUDGE_PHRASINGS[p], top[k].content, call, request)]

    out: dict[str, float] = {}
    for n in names:
        if n in JUDGE_FEATURES and top:
            p, what = n.rsplit("_", 1)
            out[n] = prob(p, sel) if what == "sel" else prob(p, 0) if what == "top1" else \
                max(prob(p, k) for k in range(len(top)))
    return out


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
