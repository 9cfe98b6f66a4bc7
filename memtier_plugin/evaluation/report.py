"""Shaping evaluation results for `memtier eval`: the ``--json`` objects and the tables.

The JSON contract (issue 4): ``{"memtier": X, "bm25": X, "meta": {...}}`` where
for LongMemEval ``X`` maps averaging (``strict``, ``noabs``) → level
(``session``, ``turn``) → metric (``recall_all@5``) → value, and for LoCoMo
``X`` maps ``overall`` and each official category name → ``recall@k`` → value.
Everything else (question counts, per-type scores, the turn ranking scored at
session level, tokens, seconds, config) lives under ``meta``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .locomo import CATEGORIES
from .locomo import KS as LOCOMO_KS
from .longmemeval import AVERAGINGS, METRICS
from .metrics import KS as LME_KS

LME_LEVELS = ("session", "turn")
SYSTEMS = ("memtier", "bm25")

#: Headline numbers and the issue-4 targets (reported, never enforced).
LME_TARGETS = {("strict", "session", "recall_all@5"): 0.90, ("strict", "turn", "recall_all@10"): 0.80}
LOCOMO_TARGETS = {("overall", "recall@10"): 0.75, ("multi-hop", "recall@10"): 0.50}


def _r(x: float, nd: int = 4) -> float:
    return round(float(x), nd)


def stats(values: Iterable[float]) -> dict[str, float]:
    """``{"mean", "p50", "p95", "max"}`` of a sample (zeros when empty)."""
    v = np.asarray(list(values), dtype=np.float64)
    if not v.size:
        return {"mean": 0.0, "p50": 0.0, "p95": 0.0, "max": 0.0}
    return {"mean": _r(v.mean()), "p50": _r(np.percentile(v, 50)), "p95": _r(np.percentile(v, 95)),
            "max": _r(v.max())}


# ---------------------------------------------------------------- LongMemEval


def lme_scores(result: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """averaging → level → metric → value, from :func:`evaluate_longmemeval`'s result."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for avg in AVERAGINGS:
        agg = result[avg]
        out[avg] = {level: {m: _r(v) for m, v in agg[level].items()} for level in LME_LEVELS if level in agg}
    return out


def lme_extras(result: dict[str, Any]) -> dict[str, Any]:
    """What :func:`lme_scores` leaves out: counts, per type, turn ranking scored per session."""
    out: dict[str, Any] = {}
    for avg in AVERAGINGS:
        agg = result[avg]
        out[avg] = {
            "n": agg["n"],
            "turn_as_session": {m: _r(v) for m, v in agg.get("turn_as_session", {}).items()},
            "by_type": {t: {"n": r["n"], **{lv: {m: _r(v) for m, v in r[lv].items()}
                                            for lv in LME_LEVELS if lv in r}}
                        for t, r in agg["by_type"].items()},
        }
    return out


def _fmt(v: float | None) -> str:
    return "    –" if v is None else f"{v:.3f}"


def lme_table(doc: dict[str, Any]) -> str:
    """The readable LongMemEval report from the ``--json`` object."""
    meta = doc["meta"]
    lines = [f"LongMemEval  {meta['path']}  {meta['questions']} questions "
             f"(strict n={meta['strict_n']}, noabs n={meta['noabs_n']})"
             + (f"; STOPPED at --max-minutes after {meta['questions']} of {meta['planned']}"
                if meta.get("planned", meta["questions"]) > meta["questions"] else ""),
             f"memtier: {meta['mode']}; flags {meta['flags'] or '{}'}",
             ""]
    head = f"{'strict':28s}" + "".join(f"{'@' + str(k):>7s}" for k in LME_KS)
    lines.append(head)
    for level in LME_LEVELS:
        for metric in METRICS:
            for sys_i, system in enumerate(SYSTEMS):
                scores = doc[system]["strict"].get(level, {})
                label = f"{level} {metric}" if sys_i == 0 else ""
                row = f"{label:20s}{system:8s}" + "".join(f"{_fmt(scores.get(f'{metric}@{k}')):>7s}" for k in LME_KS)
                lines.append(row)
    lines.append("")
    lines.append(f"noabs (n={meta['noabs_n']})          memtier   bm25")
    for level, metric in (("session", "recall_all@5"), ("session", "ndcg_any@5"), ("session", "recall_all@10"),
                          ("turn", "recall_all@10"), ("turn", "ndcg_any@10")):
        m = doc["memtier"]["noabs"].get(level, {}).get(metric)
        b = doc["bm25"]["noabs"].get(level, {}).get(metric)
        lines.append(f"  {level + ' ' + metric:26s}{_fmt(m):>7s}{_fmt(b):>7s}")
    lines.append("")
    lines.append("per question type, strict, session recall_all@5     n  memtier   bm25")
    by_m = meta["memtier"]["strict"]["by_type"]
    by_b = meta["bm25"]["strict"]["by_type"]
    for qtype in sorted(by_m):
        m = by_m[qtype].get("session", {}).get("recall_all@5")
        b = by_b.get(qtype, {}).get("session", {}).get("recall_all@5")
        lines.append(f"  {qtype:44s}{by_m[qtype]['n']:5d}{_fmt(m):>9s}{_fmt(b):>7s}")
    lines.append("")
    tok, sec, bsec = meta["tokens"], meta["seconds"], meta["bm25_seconds"]
    lines.append(f"delivered tokens per question (memtier, k={meta['top_k']}, budget {meta['token_budget']}): "
                 f"mean {tok['mean']:.0f}, max {tok['max']:.0f}")
    lines.append(f"time per question: memtier mean {sec['mean']:.2f} s, p95 {sec['p95']:.2f} s "
                 f"(write + index + rank); bm25 mean {bsec['mean']:.3f} s, p95 {bsec['p95']:.3f} s; "
                 f"wall {meta['wall_seconds']:.0f} s")
    lines.append(targets_lines(doc, LME_TARGETS))
    return "\n".join(lines)


def targets_lines(doc: dict[str, Any], targets: dict[tuple, float]) -> str:
    """One line per issue-4 target: memtier, bm25, target, met or not (report only)."""
    out = ["targets (issue 4, reported, not enforced):"]
    for key, want in targets.items():
        m, b = doc["memtier"], doc["bm25"]
        for part in key:
            m, b = m.get(part, {}) if isinstance(m, dict) else None, b.get(part, {}) if isinstance(b, dict) else None
        m = m if isinstance(m, float) else None
        b = b if isinstance(b, float) else None
        verdict = "–" if m is None else ("met" if m >= want else "below")
        out.append(f"  {' '.join(key):34s} memtier {_fmt(m)}  bm25 {_fmt(b)}  target ≥ {want:.2f}  {verdict}")
    return "\n".join(out)


# ---------------------------------------------------------------- LoCoMo


def locomo_scores(result: dict[str, Any]) -> dict[str, dict[str, float]]:
    """``overall`` and each category name → ``recall@k`` → value."""
    out: dict[str, dict[str, float]] = {}
    for group in ("overall", *CATEGORIES.values()):
        if group in result:
            out[group] = {f"recall@{k}": _r(result[group][f"recall@{k}"]) for k in LOCOMO_KS}
    return out


def locomo_extras(result: dict[str, Any]) -> dict[str, Any]:
    groups = ("overall", *CATEGORIES.values())
    return {g: {k: (_r(v) if isinstance(v, float) else v) for k, v in result[g].items()
                if not k.startswith("recall@")} for g in groups if g in result}


def locomo_table(doc: dict[str, Any]) -> str:
    meta = doc["meta"]
    lines = [f"LoCoMo  {meta['path']}  {meta['conversations']} conversations, {meta['questions']} questions scored "
             f"({meta['excluded']} without valid evidence)",
             f"memtier: {meta['mode']}; flags {meta['flags'] or '{}'}",
             "",
             f"{'evidence recall':18s}{'n':>5s}" + "".join(f"{'@' + str(k) + ' mt':>9s}{'bm25':>7s}" for k in LOCOMO_KS)]
    for group in doc["memtier"]:
        n = meta["memtier"][group]["n"]
        cells = "".join(f"{_fmt(doc['memtier'][group][f'recall@{k}']):>9s}{_fmt(doc['bm25'][group][f'recall@{k}']):>7s}"
                        for k in LOCOMO_KS)
        lines.append(f"{group:18s}{n:5d}{cells}")
    lines.append("")
    all_m, all_b = meta["memtier"]["overall"], meta["bm25"]["overall"]
    lines.append(f"all evidence in top 10: memtier {all_m['all@10']:.3f}  bm25 {all_b['all@10']:.3f}; "
                 f"top turn in a gold session: memtier {all_m['session@1']:.3f}  bm25 {all_b['session@1']:.3f}")
    tok, sec = meta["tokens"], meta["seconds"]
    lines.append(f"delivered tokens per question (memtier, k={meta['top_k']}, budget {meta['token_budget']}): "
                 f"mean {tok['mean']:.0f}; time: memtier {meta['memtier_seconds']:.1f} s total "
                 f"({sec['mean'] * 1000:.0f} ms per question incl. writing), bm25 {meta['bm25_seconds']:.1f} s; "
                 f"wall {meta['wall_seconds']:.0f} s")
    lines.append(targets_lines(doc, LOCOMO_TARGETS))
    return "\n".join(lines)


# ---------------------------------------------------------------- ablations

ABLATION_METRICS = (("session", "recall_all@5"), ("session", "recall_all@10"), ("session", "ndcg_any@5"),
                    ("turn", "recall_all@10"), ("turn", "ndcg_any@10"))


def ablation_table(doc: dict[str, Any]) -> str:
    meta = doc["meta"]
    lines = [f"Ablations (MemTier Table 2) on LongMemEval  {meta['path']}  {meta['questions']} questions "
             f"(strict n={meta['strict_n']})",
             f"memtier: {meta['mode']}; base flags {meta['flags'] or '{}'}",
             "",
             "retrieval (strict)      " + "".join(f"{lv[0] + ' ' + m:>17s}" for lv, m in ABLATION_METRICS)
             + f"{'Δ s r_all@5':>13s}{'s/q':>7s}"]
    full = doc["rows"][0]["strict"] if doc["rows"] else None
    for row in doc["rows"]:
        if row.get("skipped"):
            lines.append(f"{row['name']:24s}  skipped: {row['skipped']}")
            continue
        cells = "".join(f"{_fmt(row['strict'].get(lv, {}).get(m)):>17s}" for lv, m in ABLATION_METRICS)
        delta = row["strict"]["session"]["recall_all@5"] - full["session"]["recall_all@5"]
        lines.append(f"{row['name']:24s}{cells}{delta:>+13.3f}{row['seconds']['mean']:>7.2f}")
    lines.append("")
    lines.append("packing (same ranking as 'full'; ranking happens before packing, so retrieval metrics do not move)")
    lines.append(f"{'setting':24s}{'k':>4s}{'budget':>8s}{'tokens mean':>13s}{'p95':>7s}"
                 f"{'gold session delivered: any':>30s}{'all':>7s}{'gold turn any':>15s}")
    for row in doc["packing"]:
        lines.append(f"{row['name']:24s}{row['top_k']:>4d}{row['token_budget']:>8d}{row['tokens']['mean']:>13.0f}"
                     f"{row['tokens']['p95']:>7.0f}{row['gold_session_any']:>30.3f}{row['gold_session_all']:>7.3f}"
                     f"{row['gold_turn_any']:>15.3f}")
    lines.append("  delivered = the entries packed into the prompt (a fact delivers the sessions it came from); "
                 f"fractions over the {meta['strict_n']} strict questions.")
    lines.append(f"wall {meta['wall_seconds']:.0f} s")
    return "\n".join(lines)


def flatten(table: dict[str, Any], prefix: Sequence[str] = ()) -> dict[str, float]:
    """``{"strict.session.recall_all@5": 0.8, ...}`` (for diffs and CI logs)."""
    out: dict[str, float] = {}
    for k, v in table.items():
        if isinstance(v, dict):
            out.update(flatten(v, (*prefix, k)))
        else:
            out[".".join((*prefix, k))] = v
    return out


# ---------------------------------------------------------------- through the host


def host_table(doc: dict[str, Any]) -> str:
    """The delivered-block figures of a through-the-host run (``doc["host"]``: group → block summary)."""
    meta = doc["meta"]
    lines = ["", f"Through the host ({meta['mode']}): what before_prompt_build delivered to each question",
             f"{'group':18s}{'n':>5s}{'any':>7s}{'all':>7s}{'prec':>7s}{'items':>7s}  "
             f"{'epi':>5s}{'sem':>5s}{'glob':>5s}{'wksp':>5s}{'hook':>5s}{'tok':>6s}{'p95':>6s}"]
    for group, s in doc["host"].items():
        if not s.get("n"):
            continue
        by = s["items_by_layer"]
        lines.append(f"{group:18s}{s['n']:5d}{s['delivered_any']:7.3f}{s['delivered_all']:7.3f}{s['precision']:7.3f}"
                     f"{s['items_per_prompt']:7.2f}  {by['episodic']:5.2f}{by['semantic']:5.2f}{by['global']:5.2f}"
                     f"{by['workspace']:5.2f}{by['hooks']:5.2f}{s['tokens']['mean']:6.0f}{s['tokens']['p95']:6.0f}")
    lines.append("any/all: the question's evidence (any of it / all of it) among the delivered items; prec: the "
                 "share of delivered items that are evidence; items by layer and tokens are per prompt.")
    lines.append("The ranking table above scores the host recall's candidate list (the ranking the block was "
                 f"packed from: {meta.get('candidate_depth', '16')} episodes and facts deep, plus standing items).")
    return "\n".join(lines)
