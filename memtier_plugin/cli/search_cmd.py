"""`memtier search`: the before_prompt_build recall path, from the command line.

Recalled text is printed through :mod:`.terminal`: escape sequences and other
controls in stored text are shown, never sent to the terminal.
"""

from __future__ import annotations

import click

from .terminal import json_line, printable, printable_lines


@click.command()
@click.argument("query")
@click.option("--agent", "-a", default="main", show_default=True, help="Search as this agent.")
@click.option("--project", "-p", default=None, help="Only this project (default: every project).")
@click.option("--session", "-s", default="", help="Current session (its entries are always in scope).")
@click.option("--explain", is_flag=True, help="Show every signal's value, weight and contribution.")
@click.option("--k", "top_k", type=int, default=None, help="Override retrieval.top_k.")
@click.option("--budget", type=int, default=None, help="Override packing.token_budget.")
@click.option("--no-two-stage", is_flag=True, help="Score all visible episodic entries (skip stage 1).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.pass_obj
def search(state, query, agent, project, session, explain, top_k, budget, no_two_stage, as_json):
    """Recall memory for QUERY exactly as before_prompt_build would (no trace written)."""
    from ..config import load_config
    from ..memory import Memory
    from ..recall.retriever import Retriever

    flags = dict(state.flags())
    flags.update({"retrieval.top_k": top_k, "packing.token_budget": budget,
                  "retrieval.two_stage": False if no_two_stage else None})
    from ..events import HookContext
    from ..intake import checked_context

    cfg = load_config(state.config_path, flags=flags)
    memory = Memory(cfg)
    memory._retriever = Retriever(cfg, memory.ledger, progress=_progress())
    ctx = checked_context(HookContext(agent_id=agent, session_id=session, project=project or ""))
    result = memory.search(query, ctx, all_projects=project is None)
    if as_json:
        click.echo(json_line({
            "query": query, "mode": result.mode, "stage1_sessions": result.stage1_sessions,
            "tokens": result.tokens, "elapsed_ms": round(result.elapsed_ms, 3), "left_out": result.left_out,
            "hits": [h.row() for h in result.hits],
            "block": result.block}))
        return
    if not result.hits:
        click.echo(f"no memory matches ({printable(result.mode)})")
        return
    if explain:
        click.echo(explain_table(result))
    else:
        click.echo(printable_lines(result.block))


def _p(hit) -> str:
    return "    -" if hit.probability is None else f"{hit.probability:5.3f}"


def _capped(hit) -> bool:
    """A fact whose score was capped at its own entry's (recall/retriever.py): below the sum of its signals."""
    return (hit.tier == "semantic" and hit.rerank is None
            and hit.score < sum(v["contribution"] for v in hit.signals.values()) - 1e-9)


def explain_table(result) -> str:
    """The signal breakdown of each delivered hit as a fixed-width table."""
    reranked = any(h.rerank is not None for h in result.hits)
    lines = [printable(f"query: {result.query}"), printable(f"mode: {result.mode}"
             + (f" (sessions: {', '.join(result.stage1_sessions)})" if result.stage1_sessions else "")),
             f"{'rank':<4} {'id':<26} {'p':>5} {'score':>6}  {'sem':>11} {'bm25':>11} {'decay':>11} {'cw':>11} {'tier':>11}"
             + (f" {'rerank':>6}" if reranked else "") + "  content"]
    for rank, h in enumerate(result.hits, 1):
        if h.standing:  # a standing item: its own signals (docs/standing.md), its layer and topic route
            cells = " ".join(f"{k}={v['value']:.2f}×{v['weight']:.2f}" for k, v in h.signals.items())
            where = f"{h.layer} {h.role}" + (f" · route {', '.join(h.route)}" if h.route else "")
            lines.append(printable(f"{rank:<4} {h.id:<26} {_p(h)} {h.score:>6.3f}  [{where}] {cells}  "
                                   f"{' '.join(h.content.split())[:60]}"))
            continue
        cells = " ".join(f"{h.signals[s]['value']:.2f}×{h.signals[s]['weight']:.2f}".rjust(11)
                         for s in ("sem", "bm25", "decay", "cw", "tier"))
        if reranked:
            cells += " " + ("-" if h.rerank is None else f"{h.rerank:.2f}").rjust(6)
        text = printable(" ".join(h.content.split()))
        mark = "*" if _capped(h) else " "
        lines.append(f"{rank:<4} {printable(h.id):<26} {_p(h)} {h.score:>6.3f}{mark} {cells}  {text[:60]}")
    for why in result.left_out:
        lines.append(f"     left out: {printable(why)}")
    lines.append("p: the calibrated probability that the item applies (one scale for every layer; the block takes "
                 "p ≥ calibration.threshold, best first: docs/retrieval.md); "
                 "cells are value×weight; tier value is μ−1; score = Σ value×weight"
                 + ("; a [layer] row is standing knowledge: its score is its applicability (docs/standing.md)"
                    if any(h.standing for h in result.hits) else "")
                 + ("\n*: a fact ranked at the score of its own entry, which this agent can see (score < Σ: "
                    "docs/retrieval.md, 'A fact ranks no higher than its own turn')"
                    if any(_capped(h) for h in result.hits) else "")
                 + ("\nrerank: the cross-encoder's scaled value; it re-ordered the episodic head, and a moved "
                    "entry takes its new place's score, so there score ≠ Σ (docs/retrieval.md)" if reranked else ""))
    return "\n".join(lines)


def _progress():
    """A progress bar for index rebuilds that take more than a moment (stderr only)."""
    state = {"bar": None}

    def update(done: int, total: int) -> None:
        if total < 20:
            return
        if state["bar"] is None:
            state["bar"] = click.progressbar(length=total, label="indexing ledgers", file=click.get_text_stream("stderr"))
            state["bar"].__enter__()
        state["bar"].update(1)
        if done == total:
            state["bar"].__exit__(None, None, None)

    return update
