"""The block before_prompt_build returned, as scored items: what every through-the-host evaluation reads.

:func:`delivered` reads the items of the recall that made a block (its hits whose id the block cites) and the
bound Hooks' lines; each item stands for the benchmark messages it came from (:func:`covered`: an episode
its own, a fact or standing item its ``sources``). :func:`block_row` scores one prompt's block against its
evidence, :func:`block_summary` averages the rows (precision: the share of all delivered items that are
evidence).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

LAYERS = ("episodic", "semantic", "global", "workspace", "hooks")


def covered(hit, keys: dict) -> set:
    """The messages a recalled hit stands for: itself (an episodic entry), its ``sources`` (the entries a
    fact or a standing-knowledge node came from) and the other half of its exchange that it shows, whole
    (recall/exchange.py); entries that are no message (the question's) are dropped."""
    return {keys[e] for e in (hit.id, *hit.sources, hit.exchange_id) if e in keys}


@dataclass
class Item:
    """One delivered item: its layer and the benchmark turns it stands for."""

    id: str
    layer: str
    keys: set = field(default_factory=set)


@dataclass
class Delivery:
    """What before_prompt_build handed the agent for one prompt."""

    block: str
    items: list[Item]
    tokens: int
    candidates: list[Item] = field(default_factory=list)  # the ranking the block was packed from, best first


def delivered(result, block: str, keys: dict) -> Delivery:
    """The items of ``block``: the recall's hits whose id the block cites, then bound Hooks' lines."""
    from ..tokenize import count_tokens

    block = block or ""
    items, cited = [], set()
    if result is not None:
        for h in result.hits:
            if f"[{h.id} |" in block:
                items.append(Item(h.id, h.layer, covered(h, keys)))
                cited.add(h.id)
    for line in block.splitlines():  # Hooks' lines: "- [hook id | entry id] text" (scheduling.hooks.format_matches)
        if line.startswith("- [") and "]" in line:
            ref = line[3:line.index("]")]
            parts = [p.strip() for p in ref.split("|")]
            if parts[0] in cited:
                continue
            entry = parts[1] if len(parts) > 1 else ""
            items.append(Item(parts[0], "hooks", {keys[entry]} if entry in keys else set()))
    cands = [] if result is None else [Item(h.id, h.layer, covered(h, keys)) for h in result.candidates]
    return Delivery(block, items, count_tokens(block) if block else 0, cands)


def block_row(d: Delivery, evidence: set) -> dict[str, Any]:
    """One prompt's delivered-block figures against its ``evidence`` keys (empty: an unrelated prompt)."""
    got = set().union(*(i.keys for i in d.items)) if d.items else set()
    row: dict[str, Any] = {
        "delivered_any": float(bool(got & evidence)),
        "delivered_all": float(bool(evidence) and evidence <= got),
        "items": len(d.items),
        "evidence_items": sum(1 for i in d.items if i.keys & evidence),
        "tokens": d.tokens,
        "standing": sum(1 for i in d.items if i.layer in ("global", "workspace")),
    }
    for layer in LAYERS:
        row[f"items.{layer}"] = sum(1 for i in d.items if i.layer == layer)
    return row


def block_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means over prompts; ``precision`` is the share of all delivered items that are evidence (micro)."""
    from .report import stats

    n = len(rows)
    if not n:
        return {"n": 0}
    items = sum(r["items"] for r in rows)
    return {
        "n": n,
        "delivered_any": round(sum(r["delivered_any"] for r in rows) / n, 4),
        "delivered_all": round(sum(r["delivered_all"] for r in rows) / n, 4),
        "precision": round(sum(r["evidence_items"] for r in rows) / items, 4) if items else 0.0,
        "items_per_prompt": round(items / n, 3),
        "items_by_layer": {layer: round(sum(r[f"items.{layer}"] for r in rows) / n, 3) for layer in LAYERS},
        "items_total": items,
        "tokens": stats(r["tokens"] for r in rows),
    }
