"""Attribution: connect tool outcomes to the memories that informed them (MemTier §3.2).

At agent_end, every tool call of the run is compared with every episodic entry
delivered in that run. The update rule (config ``attribution``):

* overlap(e, c) = Jaccard(tokens(entry), tokens(tool name + params + result/error)),
  or, with ``strategy: logprob`` and a model endpoint that returns log
  probabilities, the lift in log-likelihood of the call's tokens when the entry
  is in context (falling back to Jaccard when the endpoint gives none);
* entries with overlap ≥ ``threshold`` share the call's credit in proportion to
  their overlap: Δ = ±``rate`` · overlap / Σ overlap (+ success, − failure);
* CW ← clip(CW + Δ, −1, 1), written as an appended ``cw_update`` record naming
  the run, the tool call, the overlap and the change.
"""

from __future__ import annotations

import logging
from typing import Callable

import orjson

from .tokenize import jaccard, token_set

log = logging.getLogger(__name__)


def call_text(call: dict) -> str:
    params = orjson.dumps(call.get("params") or {}, default=str).decode()
    outcome = call.get("error") or (call.get("result") if isinstance(call.get("result"), str)
                                    else orjson.dumps(call.get("result"), default=str).decode())
    return f"{call.get('name', '')} {params} {outcome}"


def jaccard_overlaps(entries: list[dict], call: dict) -> list[float]:
    c = token_set(call_text(call))
    return [jaccard(token_set(e.get("content", "")), c) for e in entries]


def credit(entries: list[dict], calls: list[dict], *, threshold: float, rate: float,
           overlap_fn: Callable[[list[dict], dict], list[float]] = jaccard_overlaps) -> list[dict]:
    """Pure rule: the CW changes a run's calls imply, one dict per (entry, call) credited."""
    changes = []
    for call in calls:
        sign = 1.0 if call.get("error") is None else -1.0
        overlaps = overlap_fn(entries, call)
        chosen = [(e, o) for e, o in zip(entries, overlaps) if o >= threshold and o > 0]
        total = sum(o for _, o in chosen)
        for entry, o in chosen:
            changes.append({"entry_id": entry["id"], "agent_id": entry.get("agent_id", ""),
                            "tool_call_id": call.get("tool_call_id", ""), "tool": call.get("name", ""),
                            "overlap": round(o, 4), "delta": round(sign * rate * o / total, 6),
                            "reason": f"{call.get('name', 'tool')} {'succeeded' if sign > 0 else 'failed'}"})
    return changes


def logprob_overlaps(client) -> Callable[[list[dict], dict], list[float]]:
    """Overlap as the normalised log-likelihood lift of the call given each entry (≥ 0)."""

    def fn(entries: list[dict], call: dict) -> list[float]:
        target = call_text(call)
        base = client.prompt_logprob([{"role": "user", "content": "Next tool call:"}], target)
        if base is None:
            return jaccard_overlaps(entries, call)
        out = []
        for e in entries:
            lp = client.prompt_logprob([{"role": "user", "content": f"Memory: {e.get('content', '')}\nNext tool call:"}],
                                       target)
            if lp is None:
                return jaccard_overlaps(entries, call)
            n = max(1, len(target.split()))
            out.append(max(0.0, min(1.0, (lp - base) / n)))
        return out

    return fn


def attribute_run(memory, ctx, state, *, success: bool) -> list[dict]:
    """Apply the rule to one finished run and append the update records."""
    entries = [row for row in state.delivered if row.get("tier", "episodic") == "episodic"]
    if not entries or not state.tool_calls:
        return []
    cfg = memory.config.attribution
    overlap_fn = jaccard_overlaps
    if cfg.strategy == "logprob":
        client = getattr(memory, "model_client", None)
        if client is not None:
            overlap_fn = logprob_overlaps(client)
    changes = credit(entries, state.tool_calls, threshold=cfg.threshold, rate=cfg.rate, overlap_fn=overlap_fn)
    written = []
    for ch in changes:
        owner = ch.pop("agent_id") or ctx.agent_id
        rec = memory.ledger.add_update(owner, {"kind": "cw_update", "entry_id": ch["entry_id"],
                                               "delta": ch["delta"], "run_id": state.run_id,
                                               "tool_call_id": ch["tool_call_id"], "tool": ch["tool"],
                                               "overlap": ch["overlap"], "reason": ch["reason"]})
        if memory._retriever is not None:
            memory._retriever.episodic.ingest(rec, -1, -1)
        written.append(rec)
    return written
