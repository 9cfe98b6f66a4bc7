"""Standing knowledge the configured model proposes for the user's messages (MemSidecar A.1, with a model).

Optional (a model client configured): the model answers with JSON under :func:`model_schema`, and each item it
proposes is kept only when its words are mostly the user's own, in the message it names (:func:`model_candidates`),
so a model cannot invent a preference. Its output is validated data, never executed. Without a model the rules of
:mod:`.extract` decide alone.
"""

from __future__ import annotations

from ..tokenize import tokenize
from .extract import MAX_TEXT, Candidate

MODEL_PROMPT = (
    "From the user's messages below, list the standing knowledge that should shape later requests: "
    "preferences, constraints (amounts, limits), standing rules for the assistant, identity facts. "
    "Use the user's own words; leave out questions, one-off requests and small talk. Answer with JSON: "
    '{"items": [{"kind": "preference|constraint|rule|identity", "content": "...", "attribute": "...", '
    '"message": <index of the message it comes from>}]}')


def model_schema(n_messages: int) -> dict:
    return {"type": "object", "required": ["items"], "additionalProperties": False, "properties": {
        "items": {"type": "array", "maxItems": 20, "items": {
            "type": "object", "required": ["kind", "content", "message"], "additionalProperties": False,
            "properties": {"kind": {"type": "string", "enum": ["preference", "constraint", "rule", "identity"]},
                           "content": {"type": "string", "minLength": 8, "maxLength": MAX_TEXT},
                           "attribute": {"type": "string", "maxLength": 40, "pattern": "^[a-z0-9_]*$"},
                           "message": {"type": "integer", "minimum": 0, "maximum": max(0, n_messages - 1)}}}}}}


def model_candidates(client, messages: list[tuple[str, str, str]], *, deadline: float | None = None) -> list[Candidate]:
    """Candidates the configured model proposes for the user's messages (validated; never executed).

    Each item must quote words the user actually wrote (its content's words must
    mostly occur in the message it names), so a model cannot invent a preference.
    """
    users = [(eid, text) for eid, role, text in messages if role == "user" and isinstance(text, str)][-20:]
    if not users:
        return []
    listing = "\n".join(f"[{i}] {text[:1500]}" for i, (_eid, text) in enumerate(users))
    result = client.chat([{"role": "system", "content": MODEL_PROMPT}, {"role": "user", "content": listing}],
                         schema=model_schema(len(users)), deadline=deadline)
    out = []
    for item in result.data["items"]:
        eid, source = users[item["message"]]
        words, said = set(tokenize(item["content"])), set(tokenize(source))
        if not words or len(words & said) / len(words) < 0.6:
            continue  # not the user's words
        out.append(Candidate(item["kind"], item["content"].strip(), item.get("attribute", ""), [eid], form="stated"))
    return out
