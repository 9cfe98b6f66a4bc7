"""Attribution: connect tool outcomes to the memories that informed them (MemTier §3.2).

At agent_end, every tool call of the run (from post_tool) is compared with
every episodic entry delivered in that run. The update rule (config
``attribution``, documented in docs/learning.md):

* overlap(e, c) = Jaccard(tokens(entry), tokens(tool name + params + result/error))
  — the default ``strategy: jaccard``; or, with ``strategy: logprob`` and
  ``model.enabled``, the lift in log-likelihood per word of the call's text
  when the entry is in the prompt, clipped to [0, 1] (an endpoint that gives
  no log probabilities, or fails, falls back to Jaccard for that call, and so
  does every call once ``model.hook_deadline_s`` has passed in this hook);
* a call succeeded when it has no error; sign s = +1 on success, −1 on failure;
* entries with overlap ≥ ``threshold`` (and > 0) share the call's credit in
  proportion to their overlap: Δ = s · ``rate`` · overlap / Σ overlap, so one
  call moves the total CW of its entries by exactly ``rate``;
* CW ← clip(CW + Δ, −1, 1), written as an appended ``cw_update`` record naming
  the run, the tool call, the overlap, the ``strategy`` that really produced
  that call's overlaps, and the change (folded on read).

Every run also leaves a ``run_end`` record in the trace ledger
(``memory/traces/<agent>/<day>.jsonl``) with the run's success, so the
trainer can join what was delivered with how the run ended.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, NamedTuple

import orjson

from ..store import traces
from ..tokenize import jaccard, token_set

log = logging.getLogger(__name__)


class Overlaps(NamedTuple):
    """One call's overlap with each entry, and the strategy that produced them ("jaccard", "logprob")."""

    values: list[float]
    strategy: str


OverlapFn = Callable[[list[dict], dict], Overlaps]


def call_text(call: dict) -> str:
    """The text a tool call is compared with: name, params, and its result or error."""
    params = orjson.dumps(call.get("params") or {}, default=str).decode()
    if call.get("error"):
        outcome = str(call["error"])
    elif isinstance(call.get("result"), str):
        outcome = call["result"]
    else:
        outcome = orjson.dumps(call.get("result"), default=str).decode()
    return f"{call.get('name', '')} {params} {outcome}"


def succeeded(call: dict) -> bool:
    return not call.get("error")


def jaccard_overlaps(entries: list[dict], call: dict) -> Overlaps:
    c = token_set(call_text(call))
    return Overlaps([jaccard(token_set(e.get("content", "")), c) for e in entries], "jaccard")


def credit(entries: list[dict], calls: list[dict], *, threshold: float, rate: float,
           overlap_fn: OverlapFn = jaccard_overlaps) -> list[dict]:
    """Pure rule: the CW changes a run's calls imply, one dict per (entry, call) credited."""
    changes = []
    for call in calls:
        sign = 1.0 if succeeded(call) else -1.0
        overlaps, strategy = overlap_fn(entries, call)
        chosen = [(e, o) for e, o in zip(entries, overlaps) if o >= threshold and o > 0]
        total = sum(o for _, o in chosen)
        for entry, o in chosen:
            changes.append({"entry_id": entry["id"], "agent_id": entry.get("agent_id", ""),
                            "tool_call_id": call.get("tool_call_id", ""), "tool": call.get("name", ""),
                            "overlap": round(o, 4), "delta": round(sign * rate * o / total, 6),
                            "strategy": strategy,
                            "reason": f"{call.get('name', 'tool')} {'succeeded' if sign > 0 else 'failed'}"})
    return changes


def logprob_overlaps(client, *, deadline: float | None = None) -> OverlapFn:
    """Overlap as the per-word log-likelihood lift of the call given each entry, in [0, 1].

    lift(e) = (log p(call | "Memory: e. Next tool call:") − log p(call | "Next tool call:")) / words(call).
    Any call the endpoint cannot score (no logprobs, an error, an open circuit breaker) is scored
    by Jaccard instead, and so is every call once ``deadline`` (a ``time.monotonic()`` value) has
    passed; each result says which strategy produced it.
    """
    warned = []

    def fn(entries: list[dict], call: dict) -> Overlaps:
        if deadline is not None and time.monotonic() >= deadline:
            return _fallback(entries, call, "the hook's model deadline has passed", warned)
        target = call_text(call)
        try:
            base = client.prompt_logprob([{"role": "user", "content": "Next tool call:"}], target,
                                         deadline=deadline)
            if base is None:
                return jaccard_overlaps(entries, call)
            out = []
            for e in entries:
                lp = client.prompt_logprob(
                    [{"role": "user", "content": f"Memory: {e.get('content', '')}\nNext tool call:"}], target,
                    deadline=deadline)
                if lp is None:
                    return jaccard_overlaps(entries, call)
                n = max(1, len(target.split()))
                out.append(max(0.0, min(1.0, (lp - base) / n)))
            return Overlaps(out, "logprob")
        except Exception as exc:  # a model failure must not cost the attribution
            return _fallback(entries, call, str(exc), warned)

    return fn


def _fallback(entries: list[dict], call: dict, why: str, warned: list) -> Overlaps:
    """Jaccard for a call the model could not score; warns once per hook (the rest at debug)."""
    if not warned:
        warned.append(why)
        log.warning("logprob attribution: %s; Jaccard for %s and any further call it cannot score",
                    why, call.get("name"))
    else:
        log.debug("logprob attribution: %s; Jaccard for %s", why, call.get("name"))
    return jaccard_overlaps(entries, call)


def overlap_function(config, client=None) -> OverlapFn:
    """The configured overlap for one hook (logprob needs the chat ``client``, i.e. ``model.enabled``; else Jaccard).

    The logprob overlap gets the hook's whole budget, ``model.hook_deadline_s`` from now.
    """
    if config.attribution.strategy == "logprob":
        if client is not None:
            return logprob_overlaps(client, deadline=time.monotonic() + config.model.hook_deadline_s)
        log.info("attribution.strategy is logprob but model.enabled is false; using Jaccard")
    return jaccard_overlaps


def attribute_run(ledger, config, state, agent_id: str, client=None) -> list[dict]:
    """Apply the rule to one finished run (``state``: its delivered rows and tool calls) and append the
    update records to their owners' ledgers; the records written (the caller refreshes its index)."""
    entries = [row for row in state.delivered if row.get("tier", "episodic") == "episodic"]
    if not entries or not state.tool_calls:
        return []
    cfg = config.attribution
    changes = credit(entries, state.tool_calls, threshold=cfg.threshold, rate=cfg.rate,
                     overlap_fn=overlap_function(config, client))
    written = []
    for ch in changes:
        owner = ch.pop("agent_id") or agent_id
        written.append(ledger.add_update(owner, {"kind": "cw_update", "entry_id": ch["entry_id"],
                                                 "delta": ch["delta"], "run_id": state.run_id,
                                                 "tool_call_id": ch["tool_call_id"], "tool": ch["tool"],
                                                 "overlap": ch["overlap"], "strategy": ch["strategy"],
                                                 "reason": ch["reason"]}))
    return written


def run_end(ctx, state, *, success: bool, ts: float) -> dict:
    """The run's outcome as a ``run_end`` trace record, beside its retrieval traces (the trainer's episodes)."""
    return traces.run_end_record(ts=ts, run_id=state.run_id, agent_id=ctx.agent_id, session_id=ctx.session_id,
                                 project=ctx.project, success=success, tool_calls=len(state.tool_calls),
                                 failed_calls=sum(1 for c in state.tool_calls if not succeeded(c)),
                                 delivered=[row["id"] for row in state.delivered])


__all__ = ["Overlaps", "attribute_run", "call_text", "credit", "jaccard_overlaps", "logprob_overlaps",
           "overlap_function", "run_end", "succeeded"]
