"""Foresight's predictor: a task's instruction and the topic directory → predicted memory needs (MemSidecar eq. 11).

Rules and keywords first (the instruction's steps, then the directory's topics
the instruction reaches); with ``foresight.predictor: model`` the configured
model proposes too, and its answer is validated data (strings and layer names),
never executed. Each :class:`Prediction` is a short query with its nonempty
set of target layers.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from ..vocabulary import PREDICTION_TARGETS
from ..tokenize import jaccard, token_set

log = logging.getLogger(__name__)
LAYERS = PREDICTION_TARGETS
MAX_QUERY = 300  # characters of one predicted query

_SPLIT = re.compile(r"(?:\n\s*(?:[-*•]|\d+[.)])\s*|;\s*|,\s*(?:and\s+|then\s+)?|\s+and then\s+|\s+then\s+|\.\s+)",
                    re.I)
_BULLETS = re.compile(r"\n\s*(?:[-*•]|\d+[.)])\s")
_LEAD = re.compile(r"^(?:and|then|also|finally|first|next|after that|please)\s+", re.I)
MODEL_PROMPT = ("You predict what an agent will need to look up in its memory during a task. Given the task "
                "instruction and the topics memory holds, answer JSON {\"queries\": [{\"query\": <short search "
                "query>, \"layers\": [episodic|semantic|global|procedural, ...]}]} with at most {k} queries. "
                "Output only JSON.")


@dataclass(frozen=True)
class Prediction:
    """One predicted memory need: the query and its nonempty target-layer set (eq. 11)."""

    query: str
    layers: tuple
    source: str  # step | topic | model


def steps(instruction: str) -> tuple[str, list[str]]:
    """(subject, steps) of an instruction: the words before a colon (or its first clause) and its sub-tasks."""
    text = instruction if _BULLETS.search(instruction) else " ".join(instruction.split())
    head, sep, rest = text.partition(":")
    if not sep or not rest.strip():
        parts = [p.strip(" .") for p in _SPLIT.split(text) if p and p.strip(" .")]
        return (parts[0] if parts else text.strip()), parts[1:]
    parts = [_LEAD.sub("", p.strip(" .")) for p in _SPLIT.split(rest) if p and p.strip(" .")]
    return head.strip(), [p for p in parts if token_set(p)]


def _layers(text: str, directory: dict[str, list[str]], tree) -> tuple:
    """Episodes and facts always; the Global and Workspace layers when the text reaches a directory topic."""
    route = tree.route(text) if tree is not None else {}
    out = ["episodic", "semantic"]
    if any(t in directory for t in route):
        out += ["global", "procedural"]
    return tuple(out)


def predict_rules(instruction: str, directory: dict[str, list[str]], k: int, *, tree=None,
                  exclude: list[str] = ()) -> list[Prediction]:
    """Up to ``k`` predictions by rules: each step of the instruction with its subject's words, then each
    directory topic the instruction reaches (its standing knowledge), skipping near-duplicates of ``exclude``."""
    subject, parts = steps(instruction)
    subj_words = " ".join(sorted(token_set(subject), key=subject.lower().find))
    cands: list[Prediction] = []
    for p in parts:
        q = f"{p} {subj_words}".strip()
        cands.append(Prediction(q[:MAX_QUERY], _layers(q, directory, tree), "step"))
    if tree is not None:
        route = tree.route(instruction)
        for topic in tree.top({t: w for t, w in route.items() if t in directory}, k):
            words = " ".join(sorted(tree.words.get(topic, ()))[:6])
            q = f"{subject} {topic.replace('/', ' ')} preferences {words}".strip()
            cands.append(Prediction(q[:MAX_QUERY], ("global", "procedural", "semantic"), "topic"))
    out: list[Prediction] = []
    seen = [token_set(e) for e in exclude]
    for c in cands:
        ts = token_set(c.query)
        if not ts or any(jaccard(ts, s) >= 0.8 for s in seen):
            continue
        seen.append(ts)
        out.append(c)
        if len(out) >= k:
            break
    return out


def predictions_from_model(data: Any, k: int) -> list[Prediction]:
    """The model's answer as predictions: validated data only (strings, known layers); anything else is dropped."""
    if not isinstance(data, dict) or not isinstance(data.get("queries"), list):
        return []
    out = []
    for item in data["queries"][:k]:
        if not isinstance(item, dict) or not isinstance(item.get("query"), str) or not token_set(item["query"]):
            continue
        layers = item.get("layers")
        layers = tuple(x for x in layers if x in LAYERS) if isinstance(layers, list) else ()
        out.append(Prediction(" ".join(item["query"].split())[:MAX_QUERY], layers or ("episodic", "semantic"),
                              "model"))
    return out


def predict(instruction: str, directory: dict[str, list[str]], k: int, *, tree=None, client=None,
            deadline: float | None = None, exclude: list[str] = ()) -> list[Prediction]:
    """F(q, I, K) (eq. 11): the model's predictions first when a client is given (validated), rules fill the rest."""
    out: list[Prediction] = []
    if client is not None and k > 0:
        topics = ", ".join(sorted(directory)[:40]) or "(none)"
        try:
            res = client.chat([{"role": "system", "content": MODEL_PROMPT.replace("{k}", str(k))},
                               {"role": "user", "content": f"Task: {instruction[:2000]}\nTopics: {topics}"}],
                              schema={"type": "object", "required": ["queries"]}, deadline=deadline)
            out = predictions_from_model(res.data, k)
        except Exception as exc:  # the rules stay the floor
            log.warning("foresight: the model's prediction failed (%s); rules only", exc)
    rules = predict_rules(instruction, directory, k - len(out), tree=tree, exclude=[*exclude, *(p.query for p in out)])
    return out + rules


def _signature(directory: dict[str, list[str]]) -> frozenset:
    """What a refill compares: every topic with the items under it."""
    return frozenset((t, frozenset(ids)) for t, ids in directory.items())
