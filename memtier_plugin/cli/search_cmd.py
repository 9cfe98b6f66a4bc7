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
    from ..retrieval import Retriever

    flags = dict(state.flags())
    flags.update({"retrieval.top_k": top_k, "packing.token_budget": budget,
                  "retrieval.two_stage": False if no_two_stage else None})
    cfg = load_config(state.config_path, flags=flags)
    agents = Memory(cfg).visible_agents(agent)
    retriever = Retriever(cfg, progress=_progress())
    result = retriever.recall(query, agent_id=agent, project=project, session_id=session, agents=agents,
                              record_trace=False)
    if as_json:
        click.echo(json_line({
            "query": query, "mode": result.mode, "stage1_sessions": result.stage1_sessions,
            "tokens": result.tokens, "elapsed_ms": round(result.elapsed_ms, 3), "left_out": result.left_out,
            "hits": [{"id": h.id, "score": h.score, "tier": h.tier, "session_id": h.session_id,
                      "agent_id": h.agent_id, "timestamp": h.timestamp, "content": h.content,
                      "raw_bm25": h.raw_bm25, "signals": h.signals, "rerank": h.rerank} for h in result.hits],
            "block": result.block}))
        return
    if not result.hits:
        click.echo(f"no memory matches ({printable(result.mode)})")
        return
    if explain:
        click.echo(explain_table(result))
    else:
        click.echo(printable_lines(result.block))


def explain_table(result) -> str:
    """The signal breakdown of each delivered hit as a fixed-width table."""
    reranked = any(h.rerank is not None for h in result.hits)
    lines = [printable(f"query: {result.query}"), printable(f"mode: {result.mode}"
             + (f" (sessions: {', '.join(result.stage1_sessions)})" if result.stage1_sessions else "")),
             f"{'rank':<4} {'id':<26} {'score':>6}  {'sem':>11} {'bm25':>11} {'decay':>11} {'cw':>11} {'tier':>11}"
             + (f" {'rerank':>6}" if reranked else "") + "  content"]
    for rank, h in enumerate(result.hits, 1):
        cells = " ".join(f"{h.signals[s]['value']:.2f}×{h.signals[s]['weight']:.2f}".rjust(11)
                         for s in ("sem", "bm25", "decay", "cw", "tier"))
        if reranked:
            cells += " " + ("-" if h.rerank is None else f"{h.rerank:.2f}").rjust(6)
        text = printable(" ".join(h.content.split()))
        lines.append(f"{rank:<4} {printable(h.id):<26} {h.score:>6.3f}  {cells}  {text[:60]}")
    for why in result.left_out:
        lines.append(f"     left out: {printable(why)}")
    lines.append("cells are value×weight; tier value is μ−1; score = Σ value×weight"
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
