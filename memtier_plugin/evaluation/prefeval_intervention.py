"""PrefEval intervention (pre_tool): does memory hold the calls that go against the user's preference?

The data README's protocol ("Intervention (pre_tool)"): the multi layout in
explicit form (:func:`.prefeval.layouts`: user u holds item u of every topic,
each preference stated in its own session among the inter conversations);
each question is the prompt of ``before_prompt_build`` in a session of its
own, then the agent proposes ``select_option({"request": <question>, "option":
<option text>})`` for each of the four options of ``mcq_options/<topic>.json``
in turn through the host's ``pre_tool``. By the benchmark's convention option
0 follows the preference and options 1–3 violate it: blocking 1–3 is correct,
blocking 0 is a false interrupt (a supplement there is not).

Measures: precision of the blocks, recall over the violating options, the
false-interrupt rate over option 0, the supplement rate over all calls, and the
decision time (p50 / p95 of the host's pre_tool, milliseconds). The baseline is
the README's BM25 rule: query = question + option, block when the question's
own preference message is in the BM25 top 4 (0.785 / 0.301 / 0.247 on the dev
split).

Each memtier row also carries the features the pre_tool computed for the
learned policy (``policy.features``) and the fixed rule's action, so one run
serves ``memtier train policy`` (features and labels of the training topics)
and the comparison of the policies on the held-back ones.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import EvalDataError
from . import prefeval as pe

OPTIONS_DIR = "mcq_options"
TOOL = "select_option"
JUDGE_MISSES = ("judge_timeout", "judge_error", "judge_unavailable")  # a call decided without the judge, and why
BM25_TOP = 4  # the README's rule: block when the question's own preference is in the top 4
MEASURES = ("precision", "recall", "false_interrupt_rate", "supplement_rate", "decision_p50_ms",
            "decision_p95_ms", "n")


def load_options(root: Path, items: list[list[pe.Item]]) -> dict[tuple[str, int], list[str]]:
    """The four options of every explicit item, by (topic, index); EvalDataError for a file that does not
    match the explicit one item for item."""
    out = {}
    for topic_items in items:
        if not topic_items:
            continue
        topic = topic_items[0].topic
        path = root / OPTIONS_DIR / f"{topic}.json"
        data = pe._read_json(path)
        if not isinstance(data, list) or len(data) != len(topic_items):
            raise EvalDataError(f"{path}: expected a JSON list of {len(topic_items)} items (one per explicit item)")
        for it, raw in zip(topic_items, data):
            where = f"{path}: item {it.index}"
            if not isinstance(raw, dict) or raw.get("question") != it.question:
                raise EvalDataError(f"{where}: its question differs from the explicit item's")
            opts = raw.get("classification_task_options")
            if not isinstance(opts, list) or len(opts) != 4 or not all(isinstance(o, str) and o.strip() for o in opts):
                raise EvalDataError(f"{where}: classification_task_options: expected 4 non-empty texts")
            out[(topic, it.index)] = list(opts)
    return out


def select(lays: list[pe.Layout], topics: Sequence[str] | None, limit: int | None) -> list[pe.Layout]:
    """Keep the questions of ``topics`` (all: None), at most ``limit`` in all (user order); every layout
    keeps all its sessions (memory holds the user's other preferences either way)."""
    out, asked = [], 0
    for lay in lays:
        qs = [q for q in lay.questions if topics is None or q.topic in topics]
        if limit is not None:
            qs = qs[:max(0, limit - asked)]
        if qs:
            asked += len(qs)
            out.append(pe.Layout(lay.name, lay.sessions, qs, lay.now))
    return out


def label(option: int) -> str:
    return "follow" if option == 0 else "violate"


def metrics(rows: Sequence[dict], action_key: str = "action") -> dict[str, Any]:
    """The protocol's measures over rows ({label, action or another action key, ms})."""
    blocks = [r[action_key] == "intervene" for r in rows]
    violate = [r["label"] == "violate" for r in rows]
    tp = sum(b and v for b, v in zip(blocks, violate))
    fp = sum(b and not v for b, v in zip(blocks, violate))
    n_v, n_f = sum(violate), len(rows) - sum(violate)
    ms = np.array([r["ms"] for r in rows if r.get("ms") is not None], dtype=float)
    return {"precision": round(tp / (tp + fp), 4) if tp + fp else 0.0,
            "recall": round(tp / n_v, 4) if n_v else 0.0,
            "false_interrupt_rate": round(fp / n_f, 4) if n_f else 0.0,
            "supplement_rate": round(sum(r[action_key] == "supplement" for r in rows) / len(rows), 4) if rows else 0.0,
            "decision_p50_ms": round(float(np.percentile(ms, 50)), 3) if len(ms) else None,
            "decision_p95_ms": round(float(np.percentile(ms, 95)), 3) if len(ms) else None,
            "n": len(rows)}


class BM25Intervention:
    """The README's BM25 rule over the layout's messages (rank_bm25 BM25Okapi, lower-cased alphanumeric
    tokens): query = question + option; block when the question's own preference is in the top 4."""

    def __init__(self, options: dict[tuple[str, int], list[str]]):
        self.options = options
        self._bm25 = pe.BM25PrefEval(BM25_TOP)

    def __call__(self, lay: pe.Layout) -> list[dict]:
        from rank_bm25 import BM25Okapi

        docs = lay.documents()
        bm25 = BM25Okapi([self._bm25.tokens(text) for _, text in docs])
        rows = []
        for q in lay.questions:
            gold = lay.gold(q)
            for k, opt in enumerate(self.options[(q.topic, q.index)]):
                t0 = time.perf_counter()
                order = np.argsort(-bm25.get_scores(pe.alnum_tokens(f"{q.text} {opt}")), kind="stable")
                block = any(docs[i][0] in gold for i in order[:BM25_TOP].tolist())
                ms = (time.perf_counter() - t0) * 1000
                rows.append({"topic": q.topic, "index": q.index, "option": k, "label": label(k),
                             "action": "intervene" if block else "silent", "ms": ms})
        return rows


@dataclass
class MemtierIntervention(pe.MemtierPrefEval):
    """memtier through the reference host (workspaces as :class:`.prefeval.MemtierPrefEval` builds them):
    the question through ``before_prompt_build``, then each option as a ``select_option`` call through
    ``pre_tool``. ``collect``: trace the learned policy's features even without a policy (training)."""

    options: dict = field(default_factory=dict)
    collect: bool = True
    pairs: bool = False  # with collect: the cross-encoder's features too
    judge: bool = False  # with collect: the pair model's features too (models.judge)

    def score(self, ws: Path, q: pe.Question, lay: pe.Layout, keys: dict) -> list[dict]:
        from ..events import PromptEvent, ToolCallEvent

        ctx = self._ctx(ws, f"question-{q.owner}")
        mem = self._memory(ctx)
        mem.collect_policy_features = self.collect
        mem.collect_policy_pairs = self.collect and self.pairs  # when the cross-encoder can run
        mem.collect_policy_judge = self.collect and self.judge  # when the judge is set up
        self.host.before_prompt_build(PromptEvent(q.text, timestamp=lay.now), ctx)
        rows, gold = [], lay.gold(q)

        def own(item) -> bool:  # the standing item was written from this question's own preference exchange
            return any(keys.get(e) in gold for e in item.sources)

        for k, opt in enumerate(self.options[(q.topic, q.index)]):
            event = ToolCallEvent(TOOL, {"request": q.text, "option": opt}, tool_call_id=f"q{q.owner}-o{k}",
                                  timestamp=lay.now + 1 + k)
            mem.last_decision = None
            t0 = time.perf_counter()
            answer = self.host.pre_tool(event, ctx)
            ms = (time.perf_counter() - t0) * 1000
            action = "intervene" if answer.block else "supplement" if answer.supplement else "silent"
            d = mem.last_decision
            feats = d.features if d is not None else {}
            task = mem.run(ctx).standing_task  # the evidence the policy path read: is it this question's own?
            items = [it for it, _ in task[1]] if task and task[1] else []
            top = items[0] if items else None
            by_id = {it.id: it for it in items}
            quoted = [by_id[e.id] for e in (d.evidence if d is not None else []) if e.id in by_id]  # in order
            rows.append({"topic": q.topic, "index": q.index, "option": k, "label": label(k), "action": action,
                         "ms": ms, "rule_action": feats.get("rule_action", d.action if d is not None else None),
                         "explicit_choice": bool(feats.get("explicit_choice")),
                         "judge_missed": next((k for k in JUDGE_MISSES if feats.get(k)), None),
                         "features": feats.get("policy_features"),
                         "evidence": [e.id for e in d.evidence] if d is not None else [],
                         "evidence_is_own": None if top is None else own(top),
                         "quotes_own": None if not quoted else any(own(it) for it in quoted),
                         "first_quoted_is_own": None if not quoted else own(quoted[0])})
        return rows


def run(root: Path, *, memtier: MemtierIntervention, topics: Sequence[str] | None = None, limit: int | None = None,
        turns: int = 300, progress=None) -> dict[str, Any]:
    """Both systems over the selected questions: {"rows": {"memtier": [...], "baseline": [...]}, "seconds": ...,
    "questions": n}."""
    items = pe.load_items(root, "explicit")
    known = {t[0].topic for t in items if t}
    unknown = sorted(set(topics or ()) - known)
    if unknown:
        raise EvalDataError(f"{root}: no topic {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    memtier.options = load_options(root, items)
    inter = pe.inter_sessions(pe.load_inter(root, turns))
    lays = select(pe.layouts("multi", items, inter), topics, limit)
    memtier.prefix = "intervention"
    out: dict[str, Any] = {"rows": {}, "seconds": {}, "questions": sum(len(lay.questions) for lay in lays)}
    for system, scorer in (("memtier", memtier), ("baseline", BM25Intervention(memtier.options))):
        t0 = time.perf_counter()
        bar = progress(f"{system} intervention") if progress else None
        tick = (lambda done, total, bar=bar: bar(done // 4, total)) if bar else None  # 4 rows a question
        out["rows"][system] = pe.evaluate(lays, scorer, tick)
        out["seconds"][system] = round(time.perf_counter() - t0, 1)
    return out


def hold_evidence(rows: Sequence[dict]) -> dict[str, Any]:
    """Of the holds that quote standing evidence, how many quote the question's own preference, and how many
    quote it first (a hold that quotes only another of the user's preferences gives the agent the wrong
    reason)."""
    quoting = [r for r in rows if r["action"] == "intervene" and r.get("quotes_own") is not None]
    own = sum(bool(r["quotes_own"]) for r in quoting)
    first = sum(bool(r.get("first_quoted_is_own")) for r in quoting)
    return {"holds_quoting_standing": len(quoting), "quoting_own_preference": own,
            "own_share": round(own / len(quoting), 4) if quoting else None, "own_quoted_first": first}


def replay(rows: Sequence[dict], policy) -> list[str]:
    """The action ``policy`` takes on each traced memtier row, as pre_tool would: the fixed rule's hold
    stands; a row without features (no call text or no evidence) keeps the fixed rule's action; an explicit
    choice in the task is silent."""
    out = []
    for r in rows:
        if r.get("rule_action") == "intervene" or not r.get("features"):
            out.append(r.get("rule_action") or "silent")
            continue
        action, _ = policy.act(r["features"])
        out.append("silent" if r.get("explicit_choice") else action)
    return out


def table(doc: dict[str, Any]) -> str:
    """The human-readable report of ``memtier eval intervention``'s JSON object."""
    meta = doc["meta"]
    head = f"{'system':9s} {'precision':>9s} {'recall':>7s} {'false int':>9s} {'suppl':>6s} {'p50 ms':>8s} " \
           f"{'p95 ms':>8s} {'n':>5s}"
    lines = [f"PrefEval intervention (multi explicit, {meta['questions']} questions x 4 options; {meta['path']}); "
             f"memtier: {meta['decision']}", head, "-" * len(head)]
    for system in ("memtier", "baseline"):
        r = doc[system]
        p50 = "-" if r["decision_p50_ms"] is None else f"{r['decision_p50_ms']:.3f}"
        p95 = "-" if r["decision_p95_ms"] is None else f"{r['decision_p95_ms']:.3f}"
        lines.append(f"{system:9s} {r['precision']:9.3f} {r['recall']:7.3f} {r['false_interrupt_rate']:9.3f} "
                     f"{r['supplement_rate']:6.3f} {p50:>8s} {p95:>8s} {r['n']:5d}")
    lines.append(f"baseline: BM25 rule (query = question + option, block when the preference is in the top "
                 f"{BM25_TOP}); wall {meta['wall_seconds']:.1f} s, {meta['workspaces']} workspaces")
    held = meta.get("hold_evidence") or {}
    if held.get("holds_quoting_standing"):
        lines.append(f"memtier holds quoting a standing item: {held['holds_quoting_standing']}, of which "
                     f"{held['quoting_own_preference']} quote the question's own preference "
                     f"({held['own_quoted_first']} first)")
    return "\n".join(lines)


def run_config(cfg, root: Path, *, topics: Sequence[str] | None = None, limit: int | None = None,
               turns: int = 300, workdir: Path | None = None, collect: bool = True, pairs: bool = False,
               judge: bool = False, progress=None) -> tuple[dict[str, Any], dict]:
    """:func:`run` with the effective config ``cfg`` written into every workspace (a temporary folder unless
    ``workdir`` keeps them); (result, meta about the memtier side). ``pairs``: trace the cross-encoder's
    features too (policy.CROSS_FEATURES; two pairs a call); ``judge``: the pair model's (policy.JUDGE_FEATURES;
    two phrasings of up to 3 pairs a call)."""
    import os
    import shutil
    import tempfile

    keep = workdir is not None
    work = Path(workdir) if keep else Path(tempfile.mkdtemp(prefix="memtier-intervention-"))
    # every workspace carries the evaluated config in its memtier.yaml; $MEMTIER_CONFIG would make the host
    # read that file instead
    env_config = os.environ.pop("MEMTIER_CONFIG", None)
    memtier = None
    try:
        memtier = MemtierIntervention(cfg, work, keep=keep, collect=collect, pairs=pairs, judge=judge)
        t0 = time.perf_counter()
        result = run(root, memtier=memtier, topics=topics, limit=limit, turns=turns, progress=progress)
        result["wall_seconds"] = round(time.perf_counter() - t0, 1)
    finally:
        if memtier is not None:
            memtier.close()
        if env_config is not None:
            os.environ["MEMTIER_CONFIG"] = env_config
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    from ..recall.backends import standing_embedder

    emb, _ = standing_embedder(cfg)
    meta = {"workspaces": memtier.workspaces, "notes": memtier.notes,
            "standing_embedder": getattr(emb, "name", None) if emb is not None else None,
            "embedder": memtier.backends.get("embedder"), "workdir": str(work) if keep else None}
    return result, meta
