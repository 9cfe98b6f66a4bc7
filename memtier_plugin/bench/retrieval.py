"""`memtier bench retrieval`: synthetic memory corpora and honest measurements (issue 3 §7).

A corpus is written as real ledger files in a temporary workspace, in the exact
on-disk format (``episodic/<agent>/YYYY-MM-DD.jsonl`` entries,
``semantic/<project>.jsonl`` facts with ``session_ids`` provenance), so the
benchmark measures the code path a host runs. Each size is measured in fresh
processes so sizes do not contaminate each other:

* ``gen``  writes the corpus and the query set (not measured);
* ``measure`` builds the index from the ledgers (no ``.index``), times the full
  recall path, durable append → searchable, and reports its own peak RSS;
* ``cold`` is a new interpreter that opens the saved index and answers one query;
* ``rank_bm25`` rescores the same corpus tokens with rank_bm25's ``BM25Okapi``.

Run a phase by hand with ``python -m memtier_plugin.bench.retrieval PHASE ARGS_JSON``.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import orjson

from .stats import percentile

VOCAB_SIZE = 50_000
ZIPF_S = 1.0
ENTRY_WORDS = (10, 60)
ENTRIES_PER_SESSION = 20
FACT_EVERY = 10  # one semantic fact per this many entries
AGENTS = 4
PROJECTS = 6
DAYS = 365
START = 1_735_689_600.0  # 2025-01-01T00:00:00Z
QUERY_WORDS = (5, 8)
RANK_BM25_PARAMS = {"k1": 1.5, "b": 0.75, "epsilon": 0.25}
RANK_BM25_MAX_DOCS = 100_000  # larger corpora: rank_bm25 is measured on a sample, scaled linearly
RANK_BM25_QUERIES = 40
APPENDS = 40
WARMUP = 5
_CONS, _VOW = "bdfghklmnprstvz", "aeiou"


# ---------------------------------------------------------------- generation
def vocabulary(rng: np.random.Generator, size: int = VOCAB_SIZE) -> list[str]:
    """``size`` distinct pronounceable words (consonant-vowel syllables), frequent words shortest."""
    from ..dates import find_dates
    from ..tokenize import tokenize

    syll = np.array([c + v for c in _CONS for v in _VOW])
    words: list[str] = []
    seen: set[str] = set()
    for n_syll in (2, 3, 4):
        pool = ["".join(p) for p in syll[rng.integers(0, len(syll), (size * 2, n_syll))]]
        for w in pool:
            if w in seen or tokenize(w) != [w]:
                continue
            seen.add(w)
            words.append(w)
            if len(words) == size:
                break
        if len(words) == size:
            break
    from datetime import date

    bad = {w for w in words if find_dates(w, date(2025, 1, 1))}
    return [w for w in words if w not in bad]


def _iso(ts: np.ndarray) -> np.ndarray:
    ms = np.round(ts * 1000).astype("int64").astype("datetime64[ms]")
    return np.char.add(np.datetime_as_string(ms, unit="ms"), "Z")


def generate(workspace: Path, size: int, seed: int, n_queries: int, progress: Callable[[str], None] | None = None) -> dict:
    """Write a synthetic corpus of ``size`` episodic entries under ``workspace/memory``; return the query set."""
    rng = np.random.default_rng(seed)
    words = np.array(vocabulary(rng), dtype=object)
    p = 1.0 / np.arange(1, len(words) + 1) ** ZIPF_S
    cdf = np.cumsum(p / p.sum())
    root = workspace / "memory"

    n_sess = max(1, -(-size // ENTRIES_PER_SESSION))
    sess_of = np.minimum(np.arange(size) // ENTRIES_PER_SESSION, n_sess - 1)
    sess_agent = rng.integers(0, AGENTS, n_sess)
    sess_project = rng.integers(0, PROJECTS, n_sess)
    sess_start = START + rng.uniform(0, (DAYS - 1) * 86400.0, n_sess)
    within = np.arange(size) % ENTRIES_PER_SESSION
    ts = sess_start[sess_of] + within * 60.0 + rng.uniform(0, 30, size)
    lens = rng.integers(ENTRY_WORDS[0], ENTRY_WORDS[1] + 1, size)
    ends = np.cumsum(lens)
    toks = np.minimum(np.searchsorted(cdf, rng.random(int(ends[-1]))), len(words) - 1).astype(np.int32)
    starts = ends - lens
    iso = _iso(ts)
    agents = [f"agent-{i}" for i in range(AGENTS)]
    projects = [f"project-{i}" for i in range(PROJECTS)]
    ids = [f"ep-{iso[i][:10].replace('-', '')}-{i:012x}" for i in range(size)]

    def content(i: int) -> str:
        return " ".join(words[toks[starts[i]: ends[i]]])

    # episodic: one file per (agent, UTC day), lines in time order
    agent_of = sess_agent[sess_of]
    day_of = ((ts - START) // 86400).astype(np.int64)
    order = np.lexsort((ts, day_of, agent_of))
    key = agent_of[order] * 10_000 + day_of[order]
    bounds = np.flatnonzero(np.diff(key)) + 1
    written = 0
    for group in np.split(order, bounds):
        first = int(group[0])
        path = root / "episodic" / agents[agent_of[first]] / f"{iso[first][:10]}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = []
        for i in group.tolist():
            text = content(i)
            s = int(sess_of[i])
            lines.append(orjson.dumps({
                "v": 1, "kind": "entry", "id": ids[i], "timestamp": str(iso[i]), "agent_id": agents[sess_agent[s]],
                "session_id": f"s{s:07d}", "project": projects[sess_project[s]],
                "role": "user" if within[i] % 2 == 0 else "assistant", "content": text,
                "tokens": max(1, -(-len(text) // 4)), "promoted": False, "cognitive_weight": 0.0,
                "provenance": {"run_id": f"r{s:07d}", "turn": int(within[i]), "tool_call_id": None, "source": "bench"},
            }) + b"\n")
        path.write_bytes(b"".join(lines))
        written += len(group)
        if progress and len(bounds) > 50 and (written == size or len(lines) and written % max(1, size // 10) < len(lines)):
            progress(f"writing ledgers {100 * written // size}%")

    # semantic: one fact per FACT_EVERY entries, drawn from two consecutive entries of one session
    facts_by_project: dict[int, list[tuple[float, bytes]]] = {}
    for j, i in enumerate(range(0, size - 1, FACT_EVERY)):
        s = int(sess_of[i])
        if sess_of[i + 1] != s:
            continue
        pool = np.concatenate([toks[starts[i]: ends[i]], toks[starts[i + 1]: ends[i + 1]]])
        pick = rng.choice(pool, size=min(len(pool), int(rng.integers(6, 13))), replace=False)
        rec = {"v": 1, "kind": "fact", "id": f"sf-bench-{j:09d}", "timestamp": str(iso[i + 1]),
               "project": projects[sess_project[s]], "origin_agent": agents[sess_agent[s]], "fact_kind": "event",
               "subject": "user", "attribute": "note", "value": str(words[pick[0]]),
               "content": "User " + " ".join(words[pick]), "source_entry_ids": [ids[i], ids[i + 1]],
               "session_ids": [f"s{s:07d}"], "effective_time": str(iso[i + 1]), "supersedes": None}
        facts_by_project.setdefault(int(sess_project[s]), []).append((float(ts[i + 1]), orjson.dumps(rec) + b"\n"))
    (root / "semantic").mkdir(parents=True, exist_ok=True)
    n_facts = 0
    for proj, rows in facts_by_project.items():
        rows.sort(key=lambda r: r[0])
        (root / "semantic" / f"{projects[proj]}.jsonl").write_bytes(b"".join(r[1] for r in rows))
        n_facts += len(rows)

    # queries: 5-8 distinct words of a random entry; the agent's newest session is the current one
    latest: dict[int, int] = {}
    for s in np.argsort(sess_start).tolist():
        latest[int(sess_agent[s])] = s
    now = float(ts.max()) + 3600.0
    queries = []
    for i in rng.choice(size, size=min(n_queries, size), replace=size < n_queries).tolist():
        uniq = np.unique(toks[starts[i]: ends[i]])
        k = min(len(uniq), int(rng.integers(QUERY_WORDS[0], QUERY_WORDS[1] + 1)))
        q = " ".join(words[rng.choice(uniq, size=k, replace=False)])
        s = int(sess_of[i])
        queries.append({"query": q, "target": ids[i], "agent": agents[sess_agent[s]],
                        "project": projects[sess_project[s]], "session": f"s{latest[int(sess_agent[s])]:07d}"})
    meta = {"size": size, "seed": seed, "sessions": n_sess, "facts": n_facts, "agents": AGENTS, "projects": PROJECTS,
            "vocabulary": len(words), "zipf_s": ZIPF_S, "tokens": int(ends[-1]), "now": now, "queries": queries,
            "rare_words": [str(w) for w in words[-200:]]}
    (workspace / "bench.json").write_bytes(orjson.dumps(meta))
    return meta


# ---------------------------------------------------------------- measurement
def _config(workspace: Path):
    from ..config import load_config

    return load_config(flags={"paths.workspace": str(workspace)}, use_env=False)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


class _FsyncTimer:
    """Wraps os.fsync to time the durable part of the ledger append (fsync stays on)."""

    def __init__(self):
        self.total = 0.0
        self._orig = os.fsync

    def __enter__(self):
        def timed(fd):
            t = time.perf_counter()
            try:
                return self._orig(fd)
            finally:
                self.total += time.perf_counter() - t

        os.fsync = timed
        return self

    def __exit__(self, *exc):
        os.fsync = self._orig


def measure(workspace: Path, progress: Callable[[str], None] | None = None) -> dict:
    """Build from the ledgers, time recall and append→search, save; in this process."""
    from ..recall.retriever import Retriever

    meta = orjson.loads((workspace / "bench.json").read_bytes())
    now, queries = meta["now"], meta["queries"]
    state = {"last": 0}

    def build_progress(done: int, total: int) -> None:
        pct = 100 * done // total
        if progress and pct >= state["last"] + 10:
            state["last"] = pct
            progress(f"building index {pct}%")

    t0 = time.perf_counter()
    r = Retriever(_config(workspace), progress=build_progress)
    build_s = time.perf_counter() - t0
    out = {"build_s": build_s, "build_read_s": r.open_s, "build_save_s": build_s - r.open_s}

    def ask(q: dict, query: str | None = None):
        return r.recall(query or q["query"], agent_id=q["agent"], project=q["project"], session_id=q["session"],
                        agents=[q["agent"]], now=now, record_trace=False)

    for q in queries[:WARMUP]:
        ask(q)
    lat, modes, found = [], {}, 0
    for i, q in enumerate(queries):
        t = time.perf_counter()
        res = ask(q)
        lat.append((time.perf_counter() - t) * 1000)
        modes[res.mode] = modes.get(res.mode, 0) + 1
        found += any(h.id == q["target"] for h in res.hits)
        if progress and len(queries) >= 100 and (i + 1) % (len(queries) // 4) == 0:
            progress(f"recall {i + 1}/{len(queries)}")
    out.update(recall_p50_ms=percentile(lat, 50), recall_p95_ms=percentile(lat, 95), recall_max_ms=max(lat),
               recall_hit_rate=found / len(queries), recall_modes=modes)

    # BM25 alone over every episodic entry (no scoping): the like-for-like comparison with rank_bm25
    from ..tokenize import tokenize

    bm = []
    for q in queries[:RANK_BM25_QUERIES]:
        toks = tokenize(q["query"])
        t = time.perf_counter()
        r.episodic.bm25.score(toks)
        bm.append((time.perf_counter() - t) * 1000)
    out["bm25_score_all_p50_ms"] = percentile(bm, 50)

    # durable append (flock + write + fsync) → notify_append → a recall that must find it
    if progress:
        progress("append → search")
    write_ms, fsync_ms, notify_ms, search_ms, total_ms, missed = [], [], [], [], [], 0
    rare, run = meta["rare_words"], f"{time.time_ns() % 10**12:x}"  # unique even if a workspace is reused
    for i in range(APPENDS):
        q = queries[i % len(queries)]
        marker = f"zqbench{run}{i:05d}x"
        text = f"{marker} {rare[i % len(rare)]} {q['query']}"
        with _FsyncTimer() as ft:
            t0 = time.perf_counter()
            rec, path, offset = r.ledger.write_entry(agent_id=q["agent"], session_id=q["session"],
                                                     project=q["project"], content=text, timestamp=now)
        t1 = time.perf_counter()
        r.notify_append(rec, path, offset)
        t2 = time.perf_counter()
        res = ask(q, f"{marker} {q['query'].split()[0]}")
        t3 = time.perf_counter()
        missed += not any(h.id == rec["id"] for h in res.hits)
        write_ms.append((t1 - t0) * 1000)
        fsync_ms.append(ft.total * 1000)
        notify_ms.append((t2 - t1) * 1000)
        search_ms.append((t3 - t2) * 1000)
        total_ms.append((t3 - t0) * 1000)
    out.update(append_search_ms=percentile(total_ms, 50), append_search_p95_ms=percentile(total_ms, 95),
               append_write_ms=percentile(write_ms, 50), append_fsync_ms=percentile(fsync_ms, 50),
               append_notify_ms=percentile(notify_ms, 50), append_recall_ms=percentile(search_ms, 50),
               append_search_nofsync_ms=percentile([a - b for a, b in zip(total_ms, fsync_ms)], 50),
               append_found=APPENDS - missed, appends=APPENDS)
    # the fallback path (stage 1 off: BM25 over every episodic entry the agent may see), for reference
    r.config.retrieval.two_stage = False
    fb = []
    for q in queries[:RANK_BM25_QUERIES]:
        t = time.perf_counter()
        ask(q)
        fb.append((time.perf_counter() - t) * 1000)
    r.config.retrieval.two_stage = True
    out["recall_all_entries_p50_ms"] = percentile(fb, 50)
    t = time.perf_counter()
    r.save()
    out["save_s"] = time.perf_counter() - t
    out["peak_rss_mb"] = _peak_rss_mb()
    return out


def cold(workspace: Path) -> dict:
    """In a new interpreter: open the saved index, answer one query."""
    t0 = time.perf_counter()
    from ..recall.retriever import Retriever

    meta = orjson.loads((workspace / "bench.json").read_bytes())
    q = meta["queries"][-1]
    t1 = time.perf_counter()
    r = Retriever(_config(workspace))
    t2 = time.perf_counter()
    res = r.recall(q["query"], agent_id=q["agent"], project=q["project"], session_id=q["session"],
                   agents=[q["agent"]], now=meta["now"], record_trace=False)
    t3 = time.perf_counter()
    return {"cold_import_s": t1 - t0, "cold_open_s": t2 - t1, "cold_first_query_ms": (t3 - t2) * 1000,
            "cold_hits": len(res.hits), "cold_peak_rss_mb": _peak_rss_mb()}


def rank_bm25_phase(workspace: Path, seed: int) -> dict:
    """rank_bm25 BM25Okapi over the same corpus tokens (a sample beyond RANK_BM25_MAX_DOCS)."""
    from rank_bm25 import BM25Okapi

    from ..tokenize import tokenize

    meta = orjson.loads((workspace / "bench.json").read_bytes())
    files = sorted((workspace / "memory" / "episodic").rglob("*.jsonl"))
    n = meta["size"]
    keep = None
    if n > RANK_BM25_MAX_DOCS:
        keep = np.zeros(n, bool)
        keep[np.random.default_rng(seed + 1).choice(n, RANK_BM25_MAX_DOCS, replace=False)] = True
    corpus, i = [], 0
    for path in files:
        for line in path.read_bytes().splitlines():
            rec = orjson.loads(line)
            if rec.get("kind") != "entry" or rec["content"].startswith("zqbench"):
                continue
            if keep is None or (i < n and keep[i]):
                corpus.append(tokenize(rec["content"]))
            i += 1
    t = time.perf_counter()
    bm = BM25Okapi(corpus, **RANK_BM25_PARAMS)
    build_s = time.perf_counter() - t
    lat = []
    for q in meta["queries"][:RANK_BM25_QUERIES]:
        toks = tokenize(q["query"])
        t = time.perf_counter()
        bm.get_scores(toks)
        lat.append((time.perf_counter() - t) * 1000)
    measured = percentile(lat, 50)
    scale = i / len(corpus)
    return {"rank_bm25_p50_ms": measured * scale, "rank_bm25_measured_p50_ms": measured,
            "rank_bm25_docs": len(corpus), "rank_bm25_sampled": keep is not None, "rank_bm25_build_s": build_s,
            "rank_bm25_note": (f"measured on a uniform sample of {len(corpus)} of {i} entries and scaled "
                               f"linearly (get_scores is O(docs) per query term)") if keep is not None else
                              "measured on the full corpus"}


def _stderr_progress(size: int) -> Callable[[str], None]:
    def say(msg: str) -> None:
        print(f"memtier bench: [{size}] {msg}", file=sys.stderr, flush=True)

    return say


def _main(argv: list[str]) -> None:
    phase, args = argv[0], json.loads(argv[1])
    ws = Path(args["workspace"])
    say = _stderr_progress(args.get("size", 0)) if args.get("progress") else None
    if phase == "gen":
        meta = generate(ws, args["size"], args["seed"], args["queries"], say)
        out = {"sessions": meta["sessions"], "facts": meta["facts"], "tokens": meta["tokens"],
               "vocabulary": meta["vocabulary"]}
    elif phase == "measure":
        out = measure(ws, say)
    elif phase == "cold":
        out = cold(ws)
    elif phase == "rank_bm25":
        out = rank_bm25_phase(ws, args["seed"])
    else:
        raise SystemExit(f"unknown phase {phase!r}")
    sys.stdout.write(json.dumps(out) + "\n")


def run_phase(phase: str, args: dict) -> tuple[dict, float]:
    """Run one phase in a fresh interpreter; returns (its JSON result, wall seconds)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTIER_")}
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "memtier_plugin.bench.retrieval", phase, json.dumps(args)],
                          stdout=subprocess.PIPE, stderr=None, env=env, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        from ..errors import MemtierError

        raise MemtierError(f"bench phase {phase} failed (exit {proc.returncode})")
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def bench_size(size: int, *, seed: int, queries: int, workdir: Path, progress: bool, rank_bm25: bool = True) -> dict:
    """Every measurement of one corpus size; each phase in its own process."""
    say = _stderr_progress(size) if progress else (lambda msg: None)
    ws = workdir / f"ws-{size}"
    args = {"workspace": str(ws), "size": size, "seed": seed, "queries": queries, "progress": progress}
    say("generating corpus")
    gen, gen_s = run_phase("gen", args)
    say(f"generated {size} entries, {gen['facts']} facts, {gen['sessions']} sessions in {gen_s:.1f} s; building")
    row: dict = {"size": size, "facts": gen["facts"], "sessions": gen["sessions"], "corpus_tokens": gen["tokens"],
                 "vocabulary": gen["vocabulary"], "queries": queries, "seed": seed}
    m, _ = run_phase("measure", args)
    row.update(m)
    say(f"build {m['build_s']:.2f} s, recall p50 {m['recall_p50_ms']:.2f} ms; cold start")
    c, wall = run_phase("cold", args)
    row["cold_start_s"] = wall
    row.update(c)
    if rank_bm25:
        say("rank_bm25 rescore")
        rb, _ = run_phase("rank_bm25", args)
        row.update(rb)
        row["speedup_vs_rank_bm25"] = rb["rank_bm25_p50_ms"] / row["recall_p50_ms"]
        row["speedup_bm25_only_vs_rank_bm25"] = rb["rank_bm25_p50_ms"] / row["bm25_score_all_p50_ms"]
    else:
        row.update(rank_bm25_p50_ms=None, speedup_vs_rank_bm25=None)
    row["rank_bm25_params"] = dict(RANK_BM25_PARAMS)
    return row


# issue 3 "Done when": (field, size it applies to, limit, "max" or "min")
TARGETS = [("recall_p50_ms", 100_000, 5.0, "max"), ("recall_p50_ms", 1_000_000, 25.0, "max"),
           ("speedup_vs_rank_bm25", 100_000, 50.0, "min"), ("append_search_ms", 100_000, 5.0, "max"),
           ("cold_start_s", 100_000, 2.0, "max"), ("peak_rss_mb", 1_000_000, 1024.0, "max")]


def check_targets(rows: list[dict]) -> list[tuple[str, bool]]:
    """Each issue-3 target that applies to a measured size: (description, met)."""
    out = []
    for key, size, limit, kind in TARGETS:
        row = next((r for r in rows if r["size"] == size), None)
        if row is None or row.get(key) is None:
            continue
        value = row[key]
        ok = value <= limit if kind == "max" else value >= limit
        out.append((f"{key} @{size:,}: {value:.2f} ({'≤' if kind == 'max' else '≥'} {limit:g})", ok))
    return out


if __name__ == "__main__":
    _main(sys.argv[1:])
