"""`memtier eval`: memtier vs plain BM25 on LongMemEval / LoCoMo with the official metrics.

Data is never bundled: pass the file (``../shared/data`` beside the project,
or wherever ``$MEMTIER_DATA`` points). memtier runs with the user's config and
the ``hybrid`` preset unless ``--preset`` names another: bge-small φsem (weight
1.5), soft scoping and cross-encoder re-ranking when the models are there
(:mod:`..backends` chooses them, as for recall); without them, or with
``--no-embed --no-rerank``, the preset's lexical signals only. PrefEval's two commands
(``prefeval``, ``intervention``) are :mod:`.prefeval_cmd`'s, added to this group; the progress line and
the report's output are :mod:`.eval_output`'s.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path

import click

from ..errors import EvalDataError
from .eval_output import Progress, emit
from .prefeval_cmd import intervention_cmd, prefeval_cmd

DEFAULT_PRESET = "hybrid"  # bge-small φsem 1.5 + soft scoping + re-ranking; lexical + soft without the models
HYBRID_SEM_WEIGHT = 0.35  # φsem weight when a preset without embeddings is asked for with --embed
DATA_FILES = {"longmemeval": "longmemeval_s_dev.json.gz", "locomo": "locomo_dev.json"}


@click.group("eval")
def eval_():
    """Benchmarks with their official retrieval metrics: memtier vs plain BM25, same questions, same run."""


# ---------------------------------------------------------------- shared options


def _data_path(path: str, kind: str) -> Path:
    p = Path(path)
    if p.is_dir() and (p / DATA_FILES[kind]).is_file():
        return p / DATA_FILES[kind]
    if not p.is_file():
        env = os.environ.get("MEMTIER_DATA")
        hint = f"$MEMTIER_DATA/{DATA_FILES[kind]} ({env})" if env else f"../shared/data/{DATA_FILES[kind]} or set MEMTIER_DATA"
        raise EvalDataError(f"{p}: no such file; pass the benchmark file, e.g. {hint}")
    return p


def _parse_sets(values: tuple[str, ...]) -> dict:
    from ..config import parse_value

    flags = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected key=value, got {item!r}", param_hint="--set")
        flags[key.strip()] = parse_value(raw.strip(), f"--set {key.strip()}", key.strip())  # as in a file
    return flags


def _options(state, embed, rerank, cache, sets, workdir: Path):
    """(runner.Options, description of the memtier side, the effective config).

    The config is the user's (``--config``, the workspace's ``memtier.yaml``, the
    environment) with the ``hybrid`` preset unless ``--preset`` names another, and
    ``--set`` on top. Its embedder, re-ranker and weights are chosen once by
    :func:`..backends.choose` — exactly what recall would use — and shared by
    every question's retriever with one vector cache (in ``workdir`` without
    ``--cache``). ``--embed`` / ``--rerank`` make a missing model an error (``--embed``
    with a config that names no embedder: MiniLM, ``weights.sem`` 0.35 unless set);
    ``--no-embed`` / ``--no-rerank`` turn them off. A backend the config names but
    that is not there is one line on stderr, and the run goes on without it."""
    from ..recall.backends import choose
    from ..config import load_config
    from ..evaluation.runner import Options

    flags = {"preset": getattr(state, "preset", None) or DEFAULT_PRESET, **_parse_sets(sets)}
    base = {"paths.workspace": getattr(state, "workspace", None)}
    config_path = getattr(state, "config_path", None)
    cfg = load_config(config_path, flags={**base, **flags})  # ConfigError names a bad --set now
    if embed and cfg.embeddings.backend == "none":
        flags = {"weights.sem": HYBRID_SEM_WEIGHT, **flags}  # an explicit --set weights.sem wins
        cfg = load_config(config_path, flags={**base, **flags})
    chosen = choose(cfg, embed=embed, rerank=rerank, load=True)
    for note in chosen.notes:
        click.echo(f"memtier eval: {note}", err=True)
    if chosen.embedder is not None:
        mode = f"hybrid: {chosen.embedder_name} φsem + BM25 fusion (weights.sem {chosen.weights[0]:g}, " \
               f"scoping {cfg.retrieval.scoping})"
    elif embed is False:
        mode = "lexical (--no-embed): BM25 + decay + cw + tier, no φsem"
    elif cfg.embeddings.backend != "none":
        mode = f"lexical ({cfg.embeddings.backend} not available): no φsem"
    else:
        mode = "lexical (embeddings.backend none): no φsem"
    if chosen.reranker is not None:
        mode += f" + {chosen.reranker_name} re-ranking the top {cfg.rerank.top_n} (weight {cfg.rerank.weight})"
    cache_dir = Path(cache) if cache else workdir / "vectors"
    source = cfg.source if cfg.source != "<defaults>" else None
    return Options(flags=flags, config_path=source, backends=chosen,
                   vector_cache=cache_dir if chosen.embedder is not None else None), mode, cfg


def _system_meta(opts, mode: str, cfg=None) -> dict:
    """What the memtier side ran with, for every report's ``meta``."""
    from ..recall.signals import SIGNAL_NAMES

    b = opts.backends
    meta = {"mode": mode, "embeddings": b.embedder is not None, "rerank": b.reranker is not None,
            "embedder": b.embedder_name, "reranker": b.reranker_name,
            "weights": dict(zip(SIGNAL_NAMES, b.weights)),
            "weights_file": None if b.learned_file is None else str(b.learned_file),
            "flags": opts.flags, "config": opts.config_path}
    if cfg is not None:
        meta.update(top_k=cfg.retrieval.top_k, token_budget=cfg.packing.token_budget)
    return meta


def _common(f):
    opts = [
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object {memtier, bm25, meta}."),
        click.option("--json-out", type=click.Path(dir_okay=False), default=None,
                     help="Also write the JSON object to this file."),
        click.option("--embed/--no-embed", default=None,
                     help="φsem with the config's embeddings.backend (hybrid: bge-small). Default: when it is "
                          "there; --embed: a missing model is an error (MiniLM, weights.sem 0.35, when the "
                          "config names none)."),
        click.option("--rerank/--no-rerank", default=None,
                     help="Cross-encoder re-ranking of the top rerank.top_n (memtier model setup --reranker). "
                          "Default: as the config says (hybrid: on) when the model has been fetched; "
                          "--rerank: on, a missing model is an error."),
        click.option("--cache", type=click.Path(file_okay=False), default=None,
                     help="Vector cache directory kept between runs (default: a temporary one)."),
        click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                     help="Config override for memtier, dotted key (repeatable), e.g. --set weights.decay=0.1."),
        click.option("--workdir", type=click.Path(file_okay=False), default=None,
                     help="Where the throwaway workspaces go (default: the system temp dir)."),
        click.option("--quiet", "-q", is_flag=True, help="No progress on stderr."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


# ---------------------------------------------------------------- through the host


def _ranking_only(f):
    return click.option("--ranking-only", is_flag=True,
                        help="Score Retriever.rank alone (the ranking before packing, no layers, no hooks; the "
                             "eval default preset hybrid), as before issue 25. Default: replay through the host "
                             "and score the block before_prompt_build returns.")(f)


def _host_replay(state, embed, rerank, cache, sets, work: Path):
    """(HostReplay, effective config, flags, mode) for a through-the-host run: the user's config as the host
    loads it (``--config``, ``--preset``, the workspace's memtier.yaml, the environment; the paper preset when
    none is named) with ``--set`` on top; ``--no-embed`` turns the embedders off (recall's and the standing
    layer's), ``--no-rerank`` the cross-encoder. Every throwaway workspace carries it as its memtier.yaml."""
    from ..config import load_config
    from ..evaluation.host_replay import HostReplay

    flags = {"preset": getattr(state, "preset", None), **_parse_sets(sets)}
    if embed is False:
        flags.update({"embeddings.backend": "none", "standing.embedder": "none"})
    if rerank is False:
        flags["rerank.backend"] = "none"
    cfg = load_config(getattr(state, "config_path", None),
                      flags={"paths.workspace": getattr(state, "workspace", None), **flags})
    if embed and cfg.embeddings.backend == "none":
        raise click.UsageError("--embed through the host: the config names no embedder "
                               "(set embeddings.backend, e.g. --preset hybrid-fast)")
    if rerank and cfg.rerank.backend == "none":
        raise click.UsageError("--rerank through the host: the config names no re-ranker "
                               "(set rerank.backend, e.g. --preset hybrid-fast)")
    rp = HostReplay(cfg, work, vector_cache=Path(cache) if cache else work / "vectors")
    for note in rp.notes:
        click.echo(f"memtier eval: {note}", err=True)
    b = rp._backends
    mode = f"through the host, preset {cfg.preset}, " + (f"{b.embedder_name} φsem" if b.embedder else "lexical") \
        + (f" + {b.reranker_name} re-ranking" if b.reranker else "") \
        + f"; standing {'on' if cfg.standing.enabled else 'off'} (embedder {cfg.standing.embedder}), " \
        f"consolidation {'on' if cfg.consolidation.enabled else 'off'}, foresight " \
        f"{'on' if cfg.foresight.enabled else 'off'}"
    return rp, cfg, {k: v for k, v in flags.items() if v is not None}, mode


def _host_meta(rp, cfg, flags: dict, mode: str) -> dict:
    b = rp._backends
    return {"protocol": "host", "mode": mode, "preset": cfg.preset, "flags": flags,
            "config": None if cfg.source == "<defaults>" else cfg.source,
            "embeddings": b.embedder is not None, "rerank": b.reranker is not None,
            "embedder": b.embedder_name, "reranker": b.reranker_name,
            "standing": cfg.standing.enabled, "consolidation": cfg.consolidation.enabled,
            "foresight": cfg.foresight.enabled, "hooks": cfg.hooks.enabled,
            "top_k": cfg.retrieval.top_k, "token_budget": cfg.packing.token_budget,
            "candidate_depth": max(4 * cfg.retrieval.top_k, 16),
            "workspaces": rp.workspaces, "failed_recalls": rp.failed}


@contextlib.contextmanager
def _host_run(state, embed, rerank, cache, sets, workdir):
    """(HostReplay, config, flags, mode) in a temporary folder (removed after), with $MEMTIER_CONFIG set aside
    while the host loads each workspace's own memtier.yaml (the evaluated config, already folded in)."""
    work = Path(tempfile.mkdtemp(prefix="memtier-eval-", dir=workdir))
    saved = os.environ.pop("MEMTIER_CONFIG", None)
    rp = None
    try:
        rp, cfg, flags, mode = _host_replay(state, embed, rerank, cache, sets, work)
        yield rp, cfg, flags, mode
    finally:
        if rp is not None:
            rp.close()
        if saved is not None:
            os.environ["MEMTIER_CONFIG"] = saved
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------- longmemeval


@eval_.command("longmemeval")
@click.argument("path", type=click.Path(dir_okay=True))
@click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N questions.")
@click.option("--max-minutes", type=click.FloatRange(0, min_open=True), default=None,
              help="Take no new question after this long; score (both systems) the questions done, and say so.")
@_ranking_only
@_common
@click.pass_obj
def longmemeval_cmd(state, path, limit, max_minutes, ranking_only, as_json, json_out, embed, rerank, cache, sets,
                    workdir, quiet):
    """LongMemEval (.json or .json.gz): what memtier delivers vs plain BM25, official protocol.

    Default (through the host): each question's haystack is lived through the
    hooks in a fresh workspace (user turns as prompts, assistant turns as the
    replies at agent_end, session_end and consolidation at each session's
    close, haystack dates as the clock), then the question is asked at its
    date; scored: an answer session's turn in the delivered block (any / all
    answer sessions), precision, items per layer, tokens; the official
    metrics of the recall's candidate list beside BM25's.

    --ranking-only: the haystack is written through the ledger and ranked with
    Retriever.rank at depth ≥ 50 (recall_any/recall_all/ndcg_any @
    1,3,5,10,30,50, session and turn level, strict and no-abstention
    averaging, per question type).
    """
    from ..evaluation import longmemeval as lme
    from ..evaluation.report import lme_extras, lme_scores, lme_table, stats
    from ..evaluation.runner import LongMemEvalRanker

    p = _data_path(path, "longmemeval")
    questions = lme.load(p)[:limit]
    if not questions:
        raise EvalDataError(f"{p}: no questions")
    if not ranking_only:
        return _longmemeval_host(state, p, questions, max_minutes, as_json, json_out, embed, rerank, cache, sets,
                                 workdir, quiet)
    work = Path(tempfile.mkdtemp(prefix="memtier-eval-", dir=workdir))
    try:
        opts, mode, cfg = _options(state, embed, rerank, cache, sets, work)
        prog = Progress(quiet)
        t0 = time.perf_counter()
        ranker = LongMemEvalRanker(opts, work / "ws")
        tick = prog.bound("memtier")
        deadline = time.monotonic() + 60 * max_minutes if max_minutes else None
        per_question = []
        for i, q in enumerate(questions):
            if i and deadline is not None and time.monotonic() > deadline:  # at least one question
                break
            per_question.append(lme.score_question(*ranker(q), q))
            tick(i + 1, len(questions))
        planned, questions = len(questions), questions[:len(per_question)]
        mem = {avg: lme.aggregate(per_question, avg) for avg in lme.AVERAGINGS}
        bm25_seconds: dict[str, float] = {}

        def bm25_rank(q):
            t = time.perf_counter()
            out = lme.bm25_rank_longmemeval(q)
            bm25_seconds[q.question_id] = time.perf_counter() - t
            return out

        base = lme.evaluate_longmemeval(questions, bm25_rank, prog.bound("bm25"))
        wall = time.perf_counter() - t0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc = {
        "memtier": lme_scores(mem),
        "bm25": lme_scores(base),
        "meta": {
            "benchmark": "longmemeval", "path": str(p), "questions": len(questions), "planned": planned,
            "strict_n": mem["strict"]["n"], "noabs_n": mem["noabs"]["n"],
            **_system_meta(opts, mode, cfg),
            "tokens": stats(ranker.tokens.values()), "seconds": stats(ranker.seconds.values()),
            "bm25_seconds": stats(bm25_seconds.values()), "wall_seconds": round(wall, 1),
            "memtier": lme_extras(mem), "bm25": lme_extras(base),
        },
    }
    emit(doc, as_json, json_out, lme_table)


# ---------------------------------------------------------------- locomo


@eval_.command("locomo")
@click.argument("path", type=click.Path(dir_okay=True))
@click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N conversations.")
@_ranking_only
@_common
@click.pass_obj
def locomo_cmd(state, path, limit, ranking_only, as_json, json_out, embed, rerank, cache, sets, workdir, quiet):
    """LoCoMo (.json): evidence delivered (or recalled) per category, memtier vs BM25.

    Default (through the host): each conversation is lived through the hooks
    (speaker A's turns as prompts, speaker B's as the replies at agent_end,
    session_end and consolidation at each session's close, the session dates
    as the clock); each question is then the first prompt of a fresh session
    in a throwaway copy, the day after the last session, and the block
    before_prompt_build returns is scored: evidence delivered (any / all),
    precision, items per layer, tokens; evidence recall@5/10/20 of the
    recall's candidate list beside BM25's.

    --ranking-only: the turns are written with their session dates (speaker
    A as "user", speaker B as "assistant") and every question is ranked with
    Retriever.rank (official recall_acc @5/10/20).
    """
    from ..evaluation import locomo as lc
    from ..evaluation.report import locomo_extras, locomo_scores, locomo_table, stats
    from ..evaluation.runner import LoCoMoRanker

    p = _data_path(path, "locomo")
    convs = lc.load(p)[:limit]
    if not convs:
        raise EvalDataError(f"{p}: no conversations")
    if not ranking_only:
        return _locomo_host(state, p, convs, as_json, json_out, embed, rerank, cache, sets, workdir, quiet)
    work = Path(tempfile.mkdtemp(prefix="memtier-eval-", dir=workdir))
    try:
        opts, mode, cfg = _options(state, embed, rerank, cache, sets, work)
        prog = Progress(quiet)
        t0 = time.perf_counter()
        ranker = LoCoMoRanker(opts, work / "ws")
        per_q: list[float] = []
        last = [time.perf_counter()]

        def timed(conv, qa):
            out = ranker(conv, qa)
            now = time.perf_counter()
            per_q.append(now - last[0])  # the first question of a conversation also pays for writing it
            last[0] = now
            return out

        mem = lc.evaluate_locomo(convs, timed, prog.bound("memtier"))
        t1 = time.perf_counter()
        base = lc.evaluate_locomo(convs, lc.BM25LoCoMo(), prog.bound("bm25"))
        t2 = time.perf_counter()
        ranker.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc = {
        "memtier": locomo_scores(mem),
        "bm25": locomo_scores(base),
        "meta": {
            "benchmark": "locomo", "path": str(p), "conversations": len(convs),
            "questions": mem["overall"]["n"], "excluded": mem["excluded"],
            **_system_meta(opts, mode, cfg),
            "tokens": stats(ranker.tokens), "seconds": stats(per_q),
            "memtier_seconds": round(t1 - t0, 1), "bm25_seconds": round(t2 - t1, 2), "wall_seconds": round(t2 - t0, 1),
            "memtier": locomo_extras(mem), "bm25": locomo_extras(base),
        },
    }
    emit(doc, as_json, json_out, locomo_table)


def _longmemeval_host(state, p, questions, max_minutes, as_json, json_out, embed, rerank, cache, sets, workdir,
                      quiet):
    from ..evaluation import host_replay as hr
    from ..evaluation import longmemeval as lme
    from ..evaluation.delivered import block_summary
    from ..evaluation.report import host_table, lme_extras, lme_scores, lme_table, stats

    with _host_run(state, embed, rerank, cache, sets, workdir) as (rp, cfg, flags, mode):
        prog = Progress(quiet)
        t0 = time.perf_counter()
        tick = prog.bound("memtier")
        deadline = time.monotonic() + 60 * max_minutes if max_minutes else None
        per_question, blocks, seconds = [], [], []
        for i, q in enumerate(questions):
            if i and deadline is not None and time.monotonic() > deadline:  # at least one question
                break
            t = time.perf_counter()
            row, block = hr.longmemeval_question(q, rp)
            seconds.append(time.perf_counter() - t)
            per_question.append(row)
            blocks.append({**block, **{avg: lme.included(q, avg) for avg in lme.AVERAGINGS}})
            tick(i + 1, len(questions))
        planned, questions = len(questions), questions[:len(per_question)]
        mem = {avg: lme.aggregate(per_question, avg) for avg in lme.AVERAGINGS}
        t1 = time.perf_counter()
        bm25_seconds: list[float] = []

        def bm25_rank(q):
            t = time.perf_counter()
            out = lme.bm25_rank_longmemeval(q)
            bm25_seconds.append(time.perf_counter() - t)
            return out

        base = lme.evaluate_longmemeval(questions, bm25_rank, prog.bound("bm25"))
        wall = time.perf_counter() - t0
    host = {avg: block_summary([b for b in blocks if b[avg]]) for avg in lme.AVERAGINGS}
    doc = {
        "memtier": lme_scores(mem),
        "bm25": lme_scores(base),
        "host": host,
        "meta": {
            "benchmark": "longmemeval", "path": str(p), "questions": len(questions), "planned": planned,
            "strict_n": mem["strict"]["n"], "noabs_n": mem["noabs"]["n"], **_host_meta(rp, cfg, flags, mode),
            "tokens": host["noabs"].get("tokens", stats([])), "seconds": stats(seconds),
            "bm25_seconds": stats(bm25_seconds), "memtier_seconds": round(t1 - t0, 1), "wall_seconds": round(wall, 1),
            "memtier": lme_extras(mem), "bm25": lme_extras(base),
        },
    }
    emit(doc, as_json, json_out, lambda d: lme_table(d) + "\n" + host_table(d))


def _locomo_host(state, p, convs, as_json, json_out, embed, rerank, cache, sets, workdir, quiet):
    from ..evaluation import host_replay as hr
    from ..evaluation import locomo as lc
    from ..evaluation.report import host_table, locomo_extras, locomo_scores, locomo_table, stats

    with _host_run(state, embed, rerank, cache, sets, workdir) as (rp, cfg, flags, mode):
        prog = Progress(quiet)
        t0 = time.perf_counter()
        res = hr.locomo(convs, rp, prog.bound("memtier"))
        t1 = time.perf_counter()
        base = lc.evaluate_locomo(convs, lc.BM25LoCoMo(), prog.bound("bm25"))
        t2 = time.perf_counter()
    mem = res["ranking"]
    n = mem["overall"]["n"]
    doc = {
        "memtier": locomo_scores(mem),
        "bm25": locomo_scores(base),
        "host": res["block"],
        "meta": {
            "benchmark": "locomo", "path": str(p), "conversations": len(convs),
            "questions": n, "excluded": mem["excluded"], **_host_meta(rp, cfg, flags, mode),
            "tokens": res["block"]["overall"].get("tokens", stats([])),
            "seconds": {"mean": round((t1 - t0) / max(n, 1), 4)},
            "memtier_seconds": round(t1 - t0, 1), "bm25_seconds": round(t2 - t1, 2), "wall_seconds": round(t2 - t0, 1),
            "memtier": locomo_extras(mem), "bm25": locomo_extras(base),
        },
    }
    emit(doc, as_json, json_out, lambda d: locomo_table(d) + "\n" + host_table(d))


# ---------------------------------------------------------------- ablations


@eval_.group("ablations")
def ablations():
    """MemTier Table 2 from one command: each signal removed, two-stage off, k and budget sweeps."""


@ablations.command("longmemeval")
@click.argument("path", type=click.Path(dir_okay=True))
@click.option("--limit", type=click.IntRange(1), default=None, help="Only the first N questions.")
@_common
@click.pass_obj
def ablations_longmemeval(state, path, limit, as_json, json_out, embed, rerank, cache, sets, workdir, quiet):
    """Full system; w=0 for sem, bm25, decay, cw, tier; two-stage off (retrieval metrics, strict);
    k ∈ {1,2,4,8} and budget ∈ {150,300,600} (delivered tokens, gold delivered).

    One vector cache is shared by every row, so each text is embedded once.
    """
    from ..evaluation import longmemeval as lme
    from ..evaluation.ablation import run_ablations
    from ..evaluation.report import ablation_table

    p = _data_path(path, "longmemeval")
    questions = lme.load(p)[:limit]
    if not questions:
        raise EvalDataError(f"{p}: no questions")
    work = Path(tempfile.mkdtemp(prefix="memtier-eval-", dir=workdir))
    try:
        opts, mode, _ = _options(state, embed, rerank, cache, sets, work)
        t0 = time.perf_counter()
        result = run_ablations(questions, opts, Progress(quiet), workdir=work)
        wall = time.perf_counter() - t0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc = {**result, "meta": {
        "benchmark": "longmemeval", "path": str(p), "questions": len(questions),
        "strict_n": sum(lme.included(q, "strict") for q in questions),
        **_system_meta(opts, mode), "wall_seconds": round(wall, 1),
    }}
    emit(doc, as_json, json_out, ablation_table)


eval_.add_command(prefeval_cmd)
eval_.add_command(intervention_cmd)
