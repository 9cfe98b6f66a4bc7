"""Ablations in the shape of MemTier Table 2, on LongMemEval, from one call.

Retrieval rows re-run the whole question set with one change each: every
fusion signal's weight set to 0 (sem, bm25, decay, cw, tier) and two-stage
scoping off. The ``k`` and ``budget`` rows cannot move the retrieval metrics —
the ranking is computed before packing — so they are measured on the *full*
row's rankings instead: each question's ranking is packed under every
(top_k, token_budget) setting, and we report the delivered tokens and whether
a gold session (turn) is among the delivered entries. A semantic fact
delivers the sessions it was extracted from.

Every row shares one embedder and one vector cache, so each text is embedded
once for the whole table.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..recall.signals import SIGNAL_NAMES
from . import runner
from .longmemeval import Question, corpus, evaluate_longmemeval, included
from .report import lme_scores, stats

#: (row name, dotted flags changed against the base run)
SIGNAL_ROWS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("- sem (w=0)", {"weights.sem": 0.0}),
    ("- bm25 (w=0)", {"weights.bm25": 0.0}),
    ("- decay (w=0)", {"weights.decay": 0.0}),
    ("- cw (w=0)", {"weights.cw": 0.0}),
    ("- tier (w=0)", {"weights.tier": 0.0}),
    ("two-stage off", {"retrieval.two_stage": False}),
)
KS = (1, 2, 4, 8)
BUDGETS = (150, 300, 600)
DEFAULT_K, DEFAULT_BUDGET = 4, 300  # the paper preset: k rows at 300 tokens, budget rows at k 4


def packing_settings() -> list[tuple[str, int, int]]:
    """(name, top_k, token_budget) of the k and budget rows."""
    rows = [(f"k={k}", k, DEFAULT_BUDGET) for k in KS]
    rows += [(f"budget={b}", DEFAULT_K, b) for b in BUDGETS]
    return rows


class SweepRanker(runner.LongMemEvalRanker):
    """A LongMemEval ``rank_fn`` that also packs each question's ranking under several settings.

    The ranking is :func:`runner.rank_question`'s and is read as
    :func:`runner.rank_workspace` reads it; this class also packs it again per setting.
    ``self.delivered[name][question_id]`` = ``(tokens, gold sessions delivered,
    gold sessions, gold turn delivered)``.
    """

    def __init__(self, opts: runner.Options, settings: Sequence[tuple[str, int, int]], workdir: Path | None = None):
        super().__init__(opts, workdir)
        self.settings = list(settings)
        self.delivered: dict[str, dict[str, tuple[int, int, int, bool]]] = {name: {} for name, _, _ in self.settings}

    def __call__(self, q: Question) -> tuple[list[str], list[str]]:
        from ..recall.packing import pack

        t0 = time.perf_counter()
        ws = self.workdir / q.question_id
        shutil.rmtree(ws, ignore_errors=True)
        root = ws / "memory"
        turn_of = runner.write_sessions(root, runner.question_sessions(q), "longmemeval", self.opts)
        retriever = runner.open_retriever(root, self.opts)
        ranked = runner.rank_question(retriever, q.question, runner._ts(q.question_date), "longmemeval", self.opts)
        ranked_s, ranked_t, tokens = runner.read_ranking(retriever, ranked, turn_of)
        self.tokens[q.question_id] = tokens
        self.seconds[q.question_id] = time.perf_counter() - t0

        gold_s = {d.raw_id for d in corpus(q, "session") if "answer" in d.id}
        gold_t = {d.raw_id for d in corpus(q, "turn") if "answer" in d.id}
        limit = max(16, 4 * max(k for _, k, _ in self.settings))
        hits = retriever.hits(ranked, limit) if ranked is not None else []
        where = {idx.ids[doc]: (set(runner.doc_sessions(idx, doc)), turn_of.get(idx.ids[doc]))
                 for idx, doc in (ranked.docs[:limit] if ranked is not None else [])}
        max_chars = retriever.config.packing.max_chars
        for name, k, budget in self.settings:
            packed = pack(hits[:max(16, 4 * k)], k, budget, max_chars)
            got_s: set[str] = set()
            got_t: set[str] = set()
            for h in packed.hits:
                sids, turn = where.get(h.id, (set(), None))
                got_s |= sids
                if turn:
                    got_t.add(turn)
            self.delivered[name][q.question_id] = (packed.tokens, len(got_s & gold_s), len(gold_s),
                                                   bool(got_t & gold_t))
        shutil.rmtree(ws, ignore_errors=True)
        return ranked_s, ranked_t


def _packing_rows(sweep: SweepRanker, questions: Sequence[Question]) -> list[dict[str, Any]]:
    strict = [q.question_id for q in questions if included(q, "strict")]
    rows = []
    for name, k, budget in sweep.settings:
        d = sweep.delivered[name]
        have = [d[qid] for qid in strict if qid in d]
        n = max(len(have), 1)
        rows.append({
            "name": name, "top_k": k, "token_budget": budget, "n": len(have),
            "tokens": stats(v[0] for v in d.values()),
            "gold_session_any": round(sum(v[1] > 0 for v in have) / n, 4),
            "gold_session_all": round(sum(v[1] == v[2] and v[2] > 0 for v in have) / n, 4),
            "gold_turn_any": round(sum(v[3] for v in have) / n, 4),
        })
    return rows


def run_ablations(questions: Sequence[Question], base: runner.Options,
                  progress: Callable[[str, int, int], None] | None = None,
                  workdir: Path | None = None) -> dict[str, Any]:
    """``{"rows": [...], "packing": [...]}``; the first row is the full system.

    A row whose signal already has weight 0 in ``base`` (φsem without an
    embedder) is reported as skipped rather than re-run. A weight row zeroes
    that signal in the weights the full run used (learned ones included).
    """
    work = Path(tempfile.mkdtemp(prefix="memtier-ablate-", dir=workdir))
    try:
        from ..recall.backends import choose

        chosen = base.backends or choose(runner.make_config(work, base))
        base = replace(base, backends=chosen)  # every row shares one embedder, re-ranker and cache
        base_weights = dict(zip(SIGNAL_NAMES, chosen.weights))
        if chosen.embedder is None:
            base_weights["sem"] = 0.0

        def report(name):
            if progress is None:
                return None
            progress(name, 0, len(questions))  # starts the row's clock
            return lambda done, total: progress(name, done, total)

        sweep = SweepRanker(base, packing_settings(), work / "full")
        rows = [_row("full", base.flags, evaluate_longmemeval(questions, sweep, report("full")), sweep)]
        for name, change in SIGNAL_ROWS:
            key = next(iter(change))
            if key.startswith("weights.") and base_weights[key.split(".")[1]] == 0.0:
                why = "no embeddings (run with --embed)" if key == "weights.sem" else "weight already 0"
                rows.append({"name": name, "flags": change, "skipped": why})
                continue
            opts = replace(base, flags={**base.flags, **change})
            if key.startswith("weights."):
                weights = [0.0 if n == key.split(".")[1] else w for n, w in zip(SIGNAL_NAMES, chosen.weights)]
                opts = replace(opts, backends=replace(chosen, weights=weights))
            ranker = runner.LongMemEvalRanker(opts, work / name.replace(" ", "_").replace("/", "_"))
            rows.append(_row(name, opts.flags, evaluate_longmemeval(questions, ranker, report(name)), ranker))
        return {"rows": rows, "packing": _packing_rows(sweep, questions)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _row(name: str, flags: dict[str, Any], result: dict[str, Any], ranker: runner.LongMemEvalRanker) -> dict[str, Any]:
    scores = lme_scores(result)
    return {"name": name, "flags": dict(flags), "strict": scores["strict"], "noabs": scores["noabs"],
            "tokens": stats(ranker.tokens.values()), "seconds": stats(ranker.seconds.values())}
