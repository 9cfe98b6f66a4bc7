"""Exchanges: an episode delivered with the other half of the exchange it belongs to.

A prompt's words are often only the question ("What did you paint last week?") and the
answer is in the reply that followed it; a reply ("A sunset over the lake.") often names
nothing the later question asks by. Recall ranks each entry on its own, so the half that
matched is delivered and the half that holds the answer is not. With ``packing.exchange``
N > 0 the first N episodic candidates (best first, as the block will take them) carry
their exchange's other half: a user prompt the reply that answered it (the run's last
assistant message before the session's next prompt, tool calls between skipped), an
assistant reply the prompt it answered (the last prompt before it). The other half is cut
at a word to ``packing.exchange_tokens`` and counted in the item's tokens, so the budget
still bounds the block; it is shown as context in the item's line, never as an entry of
its own. Shown whole, it is said: packing does not deliver that entry again (nor a fact
made from it that says what it says), and an evaluation counts the item for both turns;
cut, the entry may still come as an item of its own.

The other half is read only when its entry is visible to this recall as a candidate
would be (not forgotten, not [system], the agent may read it, same project, a recalled
role): a forgotten reply never comes back as its prompt's context.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Callable

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
    docs = idx.session_docs.get(int(idx.cols["session"][doc]))
    at = bisect_left(docs, doc)
    agent, roles = int(idx.cols["agent"][doc]), idx.cols["role"]
    if role == _REPLY:
        for other in reversed(docs[max(0, at - reach): at]):
            if int(idx.cols["agent"][other]) == agent and int(roles[other]) == _PROMPT:
                return other
        return None
    answer = None
    for other in docs[at + 1: at + 1 + reach]:
        if int(idx.cols["agent"][other]) != agent:
            continue
        if int(roles[other]) == _PROMPT:
            break
        if int(roles[other]) == _REPLY:
            answer = other
    return answer


def cut(text: str, max_tokens: int) -> str:
    """``text`` on one line within ``max_tokens`` (4 characters a token, as :func:`..tokenize.count_tokens`),
    cut after a whole word with "…" when longer."""
    text = " ".join(text.split())
    limit = 4 * max_tokens
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip(" ,;:") + "…"


def add_exchanges(hits: list, n: int, idx: DocIndex, visible: Callable[[int], bool], read: Callable[[int], str],
                  max_tokens: int) -> None:
    """Give the first ``n`` episodic ``hits`` (in order) their exchange's other half (``Hit.exchange``,
    ``Hit.exchange_id``, ``Hit.exchange_whole``), when it is visible and not a hit ranked before them (that
    one is delivered anyway)."""
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
        whole = " ".join(read(other).split())
        text = cut(whole, max_tokens)
        if text:
            hit.exchange, hit.exchange_id, hit.exchange_whole = text, idx.ids[other], text == whole
