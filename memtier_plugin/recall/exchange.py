"""Exchanges: an episode delivered with the other half of the exchange it belongs to.

A prompt's words are often only the question ("What did you paint last week?") and the
answer is in the reply that followed it; a reply ("A sunset over the lake.") often names
nothing the later question asks by. Recall ranks each entry on its own, so the half that
matched is delivered and the half that holds the answer is not. With ``packing.exchange``
N > 0 the first N episodic candidates (best first, as the block will take them) carry
their exchange's other half: a user prompt the reply that answered it (the run's last
assistant message before the session's next prompt, tool calls between skipped), an
assistant reply the prompt it answered (the last prompt before it). The other half is
shown whole or not at all, as packing never cuts an entry: one longer than
``packing.exchange_tokens`` is left out (a cut one may have lost the answer, and a long
reply would take the room of other items). It is counted in the item's tokens, so the
budget still bounds the block, and shown as context in the item's line, never as an entry
of its own. Its entry is then said: packing does not deliver it again (nor a fact made from
it that says what it says), and an evaluation counts the item for both turns.

The other half is read only when its entry is visible to this recall as a candidate
would be (not forgotten, not [system], the agent may read it, same project, a recalled
role): a forgotten reply never comes back as its prompt's context.
"""

from __future__ import annotations

from typing import Callable

from ..tokenize import count_tokens
from .index import ROLES, DocIndex

#: the roles that make an exchange: a prompt and the reply to it
_PROMPT, _REPLY = ROLES.index("user"), ROLES.index("assistant")
#: entries of a session looked at for the other half (a run's tool calls lie between a prompt and its answer)
REACH = 64


def other_half(idx: DocIndex, doc: int, reach: int = REACH) -> int | None:
    """The doc of the other half of ``doc``'s exchange in ``idx``, or None: for a user prompt, the last
    assistant message of the same agent in its session before the session's next prompt (the run's answer;
    the tool calls and results between are skipped); for an assistant message, the last user prompt before
    it. At most ``reach`` entries of the session are looked at either way."""
    role = int(idx.cols["role"][doc])
    if role not in (_PROMPT, _REPLY):
        return None
    before, after = idx.session_docs.around(int(idx.cols["session"][doc]), doc, reach)
    agent, roles = int(idx.cols["agent"][doc]), idx.cols["role"]
    if role == _REPLY:
        for other in reversed(before):
            if int(idx.cols["agent"][other]) == agent and int(roles[other]) == _PROMPT:
                return other
        return None
    answer = None
    for other in after:
        if int(idx.cols["agent"][other]) != agent:
            continue
        if int(roles[other]) == _PROMPT:
            break
        if int(roles[other]) == _REPLY:
            answer = other
    return answer


def add_exchanges(hits: list, n: int, idx: DocIndex, visible: Callable[[int], bool], read: Callable[[int], str],
                  max_tokens: int) -> None:
    """Give the first ``n`` episodic ``hits`` (in order) their exchange's other half (``Hit.exchange``,
    ``Hit.exchange_id``), when it is visible, within ``max_tokens`` and not a hit ranked before them (that one
    is delivered anyway)."""
    if n <= 0:
        return
    seen: set[str] = set()
    done = 0
    for hit in hits:
        if done >= n:
            break
        seen.add(hit.id)
        if hit.tier != "episodic":
            continue
        done += 1
        doc = idx.pos.get(hit.id)
        other = None if doc is None else other_half(idx, doc)
        if other is None or idx.ids[other] in seen or not visible(other):
            continue
        text = " ".join(read(other).split())
        if text and count_tokens(text) <= max_tokens:  # whole or not at all: a cut half may lose the answer
            hit.exchange, hit.exchange_id = text, idx.ids[other]
