"""Standing items said in one message are delivered as one item.

The extractor takes each sentence of a message that states something lasting
("I avoid dairy; lactose intolerance makes it miserable for me." gives "I avoid
dairy" and "lactose intolerance makes it miserable for me.", two Global nodes
with the same source entry). Delivered apart they are two of the block's
``retrieval.top_k`` items for one thing the user said, and a prompt they do not
apply to is handed it twice. So, after calibration, the Global items that apply
and came from the same message become one item: the most probable, with the
others' words after its own (best first), and the ids of the others on its line
(``also``), so that forgetting one names them all. An item the prompt's kind of
request names (``requested``: k never cuts it) and a skill stay items of their own.
"""

from __future__ import annotations

from .packing import Hit


def _joined(first: str, then: str) -> str:
    """``first`` and ``then`` as one text: a sentence's end between them unless ``first`` has one."""
    first, then = first.rstrip(), then.strip()
    if not then:
        return first
    return first + (" " if first.endswith((".", "!", "?", ";", ":")) else ". ") + then


def _key(h: Hit) -> tuple | None:
    """The message a Global item was said in (its source entries), or None when it is delivered on its own."""
    if h.tier != "global" or not h.sources or h.requested:
        return None
    return tuple(sorted(str(s) for s in h.sources))


def one_per_message(hits: list[Hit]) -> tuple[list[Hit], list[str]]:
    """(``hits`` with the Global items of one message merged into the most probable of them, in place of it;
    "id: why" for each item merged). ``hits`` are the calibrated ones that apply, in delivery order."""
    groups: dict[tuple, list[Hit]] = {}
    for h in hits:
        k = _key(h)
        if k is not None:
            groups.setdefault(k, []).append(h)
    merged: dict[str, Hit] = {}  # id of an item merged away → the item it went into
    for group in groups.values():
        if len(group) < 2:
            continue
        group = sorted(group, key=lambda h: -(h.probability or 0.0))
        head = group[0]
        for other in group[1:]:
            head.content = _joined(head.content, other.content)
            head.also = [*head.also, other.id]
            merged[other.id] = head
    if not merged:
        return hits, []
    out = [h for h in hits if h.id not in merged]
    return out, [f"{i}: said in the same message as {h.id}, delivered with it" for i, h in merged.items()]
