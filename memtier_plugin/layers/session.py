"""The standing-knowledge candidates of one session (or run): each user message's statements (:mod:`.extract`)
and the picks that reveal a preference (:mod:`.picks`), with the scope a list was said for carried to the
answer of "Anything else I should know?" (docs/standing.md, "Stated for a kind of request")."""

from __future__ import annotations

import re

from .extract import Candidate, extract, sentences, stated_scope
from .picks import asked_in, choice

# the assistant asks for more of what the user was listing
_MORE = re.compile(r"\b(?:anything|something) (?:else|more)\b|\bany (?:other|more)\b|\bwhat else\b", re.IGNORECASE)


def from_session(messages: list[tuple[str, str, str]], before=()) -> list[Candidate]:
    """Every candidate of one session (or run): ``messages`` are (entry id, role, text) in order; ``before``: the
    session's messages before them, read only for the scope a list was said for (nothing is extracted from them)."""
    out: list[Candidate] = []
    scope = ""  # the scope the user's last message stated (or carried)
    said = [m for m in (*before, *messages) if m[1] in ("user", "assistant")]
    first = len(said) - sum(m[1] in ("user", "assistant") for m in messages)
    for i, (eid, role, text) in enumerate(said):
        if role != "user":
            continue
        # the assistant asked for more of it ("Anything else I should know?"): the answer adds to the list the
        # user was giving, so its items are said for the same kind of request
        carried = scope if i >= 1 and said[i - 1][1] == "assistant" and _MORE.search(said[i - 1][2]) else ""
        scope = next((s for s in map(stated_scope, sentences(text)) if s), "") or carried
        if i < first:
            continue
        offer = said[i - 1] if i >= 1 and said[i - 1][1] == "assistant" else None
        query = next(((m[2], m[0]) for m in reversed(said[: i - 1]) if m[1] == "user"), None) if offer else None
        # a reply that chooses among offered options is said about what was being chosen (picks.asked_in)
        asked = asked_in(query, offer[2], text) if offer else ""
        for c in extract(text, role=role, entry_id=eid):
            c.requests = c.requests or carried
            c.asked = asked
            out.append(c)
        chose = choice(query, (offer[2], offer[0]), (text, eid)) if offer else None
        if chose is not None:
            out.append(chose)
    return out
