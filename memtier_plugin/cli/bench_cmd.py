"""`memtier bench`: benchmarks on synthetic corpora (a group: one subcommand per subsystem)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import click

TARGETS = "issue 3 targets: recall p50 ≤ 5 ms @100k, ≤ 25 ms @1M; ≥ 50× rank_bm25 @100k; " \
          "append→search ≤ 5 ms @100k; cold start ≤ 2 s @100k; peak RSS ≤ 1 GB @1M"


@click.group()
def bench():
    """Benchmarks on synthetic corpora written as real ledgers in a temporary workspace."""


def _sizes(value: str) -> list[int]:
    try:
        sizes = [int(s.replace("_", "").strip()) for s in value.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None
    if not sizes or any(s < 100 for s in sizes):
        raise click.BadParameter("every size must be at least 100 entries")
    return sizes


@bench.command("retrieval")
@click.option("--sizes", default="1000,10000,100000,1000000", show_default=True,
              help="Comma-separated corpus sizes (episodic entries).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, one object per size.")
@click.option("--queries", type=click.IntRange(10, 100_000), default=200, show_default=True,
              help="Recall queries timed per size.")
@click.option("--seed", type=int, default=0, show_default=True, help="Corpus and query seed.")
@click.option("--no-rank-bm25", is_flag=True, help="Skip the rank_bm25 reference rescore.")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Where to write the temporary workspaces (default: the system temp dir).")
@click.option("--keep", is_flag=True, help="Keep the generated workspaces (their paths go to stderr).")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
@click.option("--json-out", type=click.Path(dir_okay=False), default=None,
              help="Also write the JSON list to this file.")
@click.option("--check", is_flag=True, help="Exit 1 when a measured size misses an issue-3 target.")
def retrieval(sizes, as_json, queries, seed, no_rank_bm25, workdir, keep, quiet, json_out, check):
    """Build time, full recall p50/p95, append→search, cold start and peak RSS per corpus size,
    with the same-run time of a rank_bm25 BM25Okapi rescore of the same corpus and the ratio."""
    from ..bench.retrieval import RANK_BM25_PARAMS, bench_size

    size_list = _sizes(sizes)
    base = Path(tempfile.mkdtemp(prefix="memtier-bench-", dir=workdir))
    rows = []
    try:
        for size in size_list:
            rows.append(bench_size(size, seed=seed, queries=queries, workdir=base, progress=not quiet,
                                   rank_bm25=not no_rank_bm25))
            if not keep:
                shutil.rmtree(base / f"ws-{size}", ignore_errors=True)
    finally:
        if keep:
            click.echo(f"memtier bench: workspaces kept under {base}", err=True)
        else:
            shutil.rmtree(base, ignore_errors=True)
    from ..bench.retrieval import check_targets

    doc = json.dumps([{k: _round(v) for k, v in row.items()} for row in rows], indent=1)
    if json_out:
        Path(json_out).write_text(doc + "\n")
    verdicts = check_targets(rows)
    missed = [d for d, ok in verdicts if not ok]
    if as_json:
        click.echo(doc)
        if check and missed:
            click.echo("memtier bench: missed: " + "; ".join(missed), err=True)
            raise SystemExit(1)
        return
    click.echo(table(rows))
    params = ", ".join(f"{k}={v}" for k, v in RANK_BM25_PARAMS.items())
    click.echo(f"\nrank_bm25: BM25Okapi({params}).get_scores(query) over the same corpus tokens, same queries.")
    for row in rows:
        if row.get("rank_bm25_sampled"):
            click.echo(f"  {row['size']}: {row['rank_bm25_note']}.")
    click.echo("recall: Retriever.recall (stage 1 + stage 2 + fusion + packing), record_trace=False; "
               "append: durable Ledger.write_entry (flock+fsync) + notify_append + recall finding it.")
    click.echo(TARGETS)
    for desc, ok in verdicts:
        click.echo(f"  {'met   ' if ok else 'MISSED'} {desc}")
    if check and missed:
        raise SystemExit(1)


@bench.command("consolidation")
@click.option("--appends", type=click.IntRange(1, 10_000), default=30, show_default=True,
              help="Entries appended (one new fact each), timed one at a time.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--json-out", type=click.Path(dir_okay=False), default=None,
              help="Also write the JSON object to this file.")
@click.option("--seed", type=int, default=None, help="Seed of the made-up fact words (default: random).")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Where to create the temporary workspace (default: the system temp dir).")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
def consolidation(appends, as_json, json_out, seed, workdir, quiet):
    """Append → promoted fact visible in recall, through the real daemon in a subprocess
    (issue 6 target: ≤ 1 s at p50). Exits 1 when the daemon does not exit 0 on SIGTERM."""
    from ..bench.consolidation import Terminated, bench_consolidation

    try:
        row = bench_consolidation(appends, seed=seed, workdir=workdir, progress=not quiet and not as_json)
    except RuntimeError as exc:
        click.echo(f"memtier bench consolidation: {exc}", err=True)
        raise SystemExit(1) from None
    except Terminated:
        click.echo("memtier bench consolidation: terminated; daemon stopped, workspace removed", err=True)
        raise SystemExit(143) from None
    doc = _dump(row, json_out)
    if as_json:
        click.echo(doc)
    else:
        def ms(v):
            return "–" if v is None else f"{v:.0f} ms"

        click.echo(f"appends {row['appends']}: append → promoted fact visible in recall "
                   f"p50 {ms(row['promote_visible_p50_ms'])}, p95 {ms(row['promote_visible_p95_ms'])}, "
                   f"max {ms(row['promote_visible_max_ms'])}, misses {row['misses']} "
                   f"(deadline {row['deadline_s']:.0f} s)")
        click.echo(f"daemon: consolidation.debounce_s {row['debounce_s']}, ready after "
                   f"{row['daemon_ready_s']:.2f} s, exit code on SIGTERM {row['daemon_exit_code']}; "
                   f"recall polled every {row['poll_interval_ms']:.0f} ms, daemon idle "
                   f"{row['idle_before_append_s']} s before each append")
        click.echo(f"issue 6 target: p50 ≤ {row['target_p50_ms']:.0f} ms: "
                   f"{'met' if row['target_met'] else 'MISSED'}")
    if not row["daemon_clean_exit"]:
        click.echo(f"memtier bench consolidation: the daemon exited {row['daemon_exit_code']} on SIGTERM "
                   "(None: killed after 30 s)", err=True)
        raise SystemExit(1)


@bench.command("bridge")
@click.option("--entries", type=click.IntRange(100, 1_000_000), default=10_000, show_default=True,
              help="Synthetic corpus size (episodic entries).")
@click.option("--calls", type=click.IntRange(10, 100_000), default=300, show_default=True,
              help="Timed before_prompt_build calls per path.")
@click.option("--warmup", type=click.IntRange(0, 10_000), default=20, show_default=True, help="Untimed calls first.")
@click.option("--rounds", type=click.IntRange(1, 100), default=5, show_default=True,
              help="Interleaved rounds (each path in turn), so a load change hits all paths alike.")
@click.option("--seed", type=int, default=0, show_default=True, help="Corpus and prompt seed.")
@click.option("--node", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Node binary for the plugin path (default: $MEMTIER_NODE, the e2e test's Node 24, node on PATH).")
@click.option("--plugin", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The built OpenClaw plugin (default: openclaw-plugin/dist/index.js of this checkout).")
@click.option("--workdir", type=click.Path(file_okay=False), default=None, help="Where to write the temporary workspaces.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--json-out", type=click.Path(dir_okay=False), default=None, help="Also write the JSON object to this file.")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
def bridge(entries, calls, warmup, rounds, seed, node, plugin, workdir, as_json, json_out, quiet):
    """before_prompt_build in process vs over the sidecar (http.client) vs through the OpenClaw plugin
    under Node: p50/p95 per path and what the sidecar adds (issue 15 target: ≤ 5 ms at p95)."""
    from ..bench.bridge import bench_bridge

    say = None if quiet or as_json else (lambda msg: click.echo(f"memtier bench bridge: {msg}", err=True))
    try:
        row = bench_bridge(entries=entries, calls=calls, warmup=warmup, rounds=rounds, seed=seed, node=node, plugin=plugin,
                           workdir=workdir, progress=say)
    except RuntimeError as exc:
        click.echo(f"memtier bench bridge: {exc}", err=True)
        raise SystemExit(1) from None
    doc = _dump(row, json_out)
    if as_json:
        click.echo(doc)
        return
    click.echo(f"before_prompt_build over {row['entries']:,} entries, {row['calls']} calls per path in "
               f"{row['rounds']} interleaved rounds (after {row['warmup']} warm-up calls; "
               f"load average {row['load_before']} → {row['load_after']}):")
    paths = [("in process (Host)", "in_process"), ("sidecar via http.client", "http")]
    if "plugin_p50_ms" in row:
        paths.append((f"OpenClaw plugin (node {row['node']}) + sidecar", "plugin"))
    for label, key in paths:
        click.echo(f"  {label:<44} p50 {row[key + '_p50_ms']:7.2f} ms   p95 {row[key + '_p95_ms']:7.2f} ms   "
                   f"memory delivered {row[key + '_delivered']}/{row['calls']}")
    click.echo(f"  sidecar adds (http.client)                   p50 {row['http_added_p50_ms']:+7.2f} ms   "
               f"p95 {row['http_added_p95_ms']:+7.2f} ms")
    if "plugin_p50_ms" in row:
        click.echo(f"  sidecar adds (through the plugin)            p50 {row['added_p50_ms']:+7.2f} ms   "
                   f"p95 {row['added_p95_ms']:+7.2f} ms")
        click.echo(f"issue 15 target: p95 added ≤ {row['target_added_p95_ms']:.0f} ms: "
                   f"{'met' if row['target_met'] else 'MISSED'}")
    else:
        click.echo(f"  plugin path left out: {row['plugin_skipped']}")


@bench.command("latency")
@click.option("--presets", default="paper,hybrid", show_default=True,
              help="Comma-separated presets (hybrid needs the embed extra and both models).")
@click.option("--sizes", default="1000,10000", show_default=True,
              help="Comma-separated workspace sizes in entries (add 100000 for the largest: see docs/foresight.md).")
@click.option("--rounds", type=click.IntRange(1, 50), default=2, show_default=True,
              help="Warm replays of the task per row (after the cold one).")
@click.option("--think-ms", type=click.FloatRange(0, 60_000), default=1000.0, show_default=True,
              help="The model's time before each memory query but the first, with Foresight on.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Config override for every row (dotted key, YAML value), e.g. rerank.budget_ms=150.")
@click.option("--scenario", type=click.Choice(["foresight", "steps"]), default="foresight", show_default=True,
              help="The replayed task: foresight (workspace-fixtures/foresight) or steps (workspace-fixtures/steps: "
                   "tool results, a failure an earlier session fixed, \"Yes, go.\").")
@click.option("--fixture", type=click.Path(file_okay=False, exists=True), default=None,
              help="The replayed task's folder (overrides --scenario).")
@click.option("--workdir", type=click.Path(file_okay=False), default=None, help="Where to write the workspaces.")
@click.option("--keep", is_flag=True, help="Keep the workspaces (their folder goes to stderr).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per row, one a line.")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
def latency(presets, sizes, rounds, think_ms, sets, scenario, fixture, workdir, keep, as_json, quiet):
    """before_prompt_build wall time per preset and size, cold and warm, with and without Foresight, on a
    replayed multi-step task: p50/p95, hit rate and wait saved (issue 14 targets)."""
    from ..bench.latency import SCENARIOS, bench_latency
    from ..config import PRESETS, load_config, parse_value
    from ..errors import ConfigError

    names = [p.strip() for p in presets.split(",") if p.strip()]
    bad = [p for p in names if p not in PRESETS]
    if not names or bad:
        raise click.BadParameter(f"expected presets among {', '.join(PRESETS)}, got {presets!r}", param_hint="--presets")
    overrides = {}
    for item in sets:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--set")
        overrides[key.strip()] = parse_value(raw, "--set", key.strip())
    try:
        load_config(flags=overrides, use_env=False)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--set") from None
    say = None if quiet else (lambda msg: click.echo(f"memtier bench latency: {msg}", err=True))
    try:
        rows = bench_latency(presets=names, sizes=_sizes(sizes), rounds=rounds, think_ms=think_ms,
                             overrides=overrides, fixture=fixture or SCENARIOS[scenario], workdir=workdir, keep=keep,
                             progress=say)
    except RuntimeError as exc:
        click.echo(f"memtier bench latency: {exc}", err=True)
        raise SystemExit(1) from None
    if as_json:
        for row in rows:
            click.echo(json.dumps({k: _round(v) for k, v in row.items()}))
        return
    def ms(v):
        return "–" if v is None else f"{v:.1f}"

    w = max([len("preset")] + [len(r["preset"]) for r in rows])
    click.echo(f"{'preset':<{w}} {'entries':>8} {'foresight':>9} {'phase':>5} {'p50 ms':>8} {'p95 ms':>8} "
               f"{'hit rate':>8} {'hits':>5} {'wrong':>5} {'wait ms':>8} {'saved ms':>9} {'miss p95':>9} "
               f"{'pre_tool p95':>12}")
    for r in rows:
        click.echo(f"{r['preset']:<{w}} {r['entries']:>8,} {'on' if r['foresight'] else 'off':>9} {r['phase']:>5} "
                   f"{ms(r['p50_ms']):>8} {ms(r['p95_ms']):>8} "
                   f"{'–' if r['hit_rate'] is None else format(r['hit_rate'], '.2f'):>8} "
                   f"{r['hits']:>2}/{r['memory_queries']:<2} {r['wrong_hits']:>5} {ms(r['hit_wait_ms']):>8} "
                   f"{ms(r['wait_saved_ms']):>9} {ms(r['miss_prompt_p95_ms']):>9} {ms(r['pre_tool_p95_ms']):>12}")
    click.echo("issue 14 targets: hybrid(-fast) p95 ≤ 100 ms at 10k with Foresight on, ≤ 300 ms on a miss; "
               "hit rate ≥ 0.70; wait on a hit ≥ 5× lower than normal retrieval.")


def _dump(row: dict, json_out: str | None) -> str:
    """``row`` as indented JSON (floats rounded), also written to ``json_out`` when given."""
    doc = json.dumps({k: _round(v) for k, v in row.items()}, indent=1)
    if json_out:
        Path(json_out).write_text(doc + "\n")
    return doc

@bench.command("sidecar")
@click.option("--hooks", "sizes", default="0,100,1000", show_default=True,
              help="Comma-separated numbers of bound hooks.")
@click.option("--calls", type=click.IntRange(100, 1_000_000), default=3000, show_default=True,
              help="Proposed tool calls timed per size.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the hooks and the calls.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--check", is_flag=True, help="Exit 1 when a size of at least 1,000 hooks misses p99 ≤ 1 ms.")
@click.option("--model-path", "model_path", is_flag=True,
              help="Also time the model path: the whole pre_tool through the reference host with the learned "
                   "policy (standing embedder, bge-small when set up), per size, beside its timeout.")
@click.option("--policy", "policy_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The policy the model path uses (memtier train policy); default: zero weights over the "
                   "evidence features (the time does not depend on the weights).")
@click.option("--tasks", type=click.IntRange(1, 10_000), default=25, show_default=True,
              help="Model path: tasks of four select_option calls per size.")
def sidecar(sizes, calls, seed, as_json, check, model_path, policy_file, tasks):
    """pre_tool hook decision time (no model) with N bound hooks: p50/p95/p99, beside the same-run
    time of json.dumps of the call's params, plus one adversarial event stopped by the step budget.
    With --model-path, also the whole pre_tool with the learned policy (its p95 beside its timeout)."""
    from ..bench.hooks import TARGET_P99_MS, bench_adversarial, bench_hooks, bench_policy
    from ..bench.hooks import check as check_rows

    try:
        counts = [int(s.replace("_", "").strip()) for s in sizes.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {sizes!r}", param_hint="--hooks") from None
    if not counts or any(c < 0 or c > 100_000 for c in counts):
        raise click.BadParameter("every number of hooks must be between 0 and 100,000", param_hint="--hooks")
    rows = [bench_hooks(n, calls=calls, seed=seed) for n in counts]
    policy_rows = []
    if model_path:
        from ..intervention.policy import load_policy

        if policy_file:
            load_policy(Path(policy_file))  # a bad file: one line naming it, before any work
        policy_rows = [bench_policy(n, tasks=tasks, seed=seed, policy_file=Path(policy_file) if policy_file else None)
                       for n in counts]
    adversarial = bench_adversarial()
    verdicts = check_rows(rows)
    missed = [d for d, ok in verdicts if not ok]
    if as_json:
        click.echo(json.dumps({"sidecar": [{k: _round(v) for k, v in r.items()} for r in rows],
                               **({"model_path": [{k: _round(v) for k, v in r.items()} for r in policy_rows]}
                                  if model_path else {}),
                               "adversarial": {k: _round(v) for k, v in adversarial.items()},
                               "meta": {"path": "no-model", "target_p99_ms": TARGET_P99_MS, "seed": seed,
                                        "reference": "json.dumps(params) of the same call",
                                        "target_judged_on": "thread CPU time",
                                        "load_average": [round(x, 2) for x in os.getloadavg()]}}, indent=1))
    else:
        for r in rows:
            click.echo(f"{r['hooks']:>6,} hooks: pre_tool wall p50 {r['p50_ms']:.3f} ms, p95 {r['p95_ms']:.3f} ms, "
                       f"p99 {r['p99_ms']:.3f} ms; CPU p50 {r['cpu_p50_ms']:.3f} ms, p95 {r['cpu_p95_ms']:.3f} ms, "
                       f"p99 {r['cpu_p99_ms']:.3f} ms (json.dumps of the params {r['ref_json_dumps_p50_ms'] * 1000:.1f} "
                       f"µs: p50 {r['p50_over_ref'] or 0:.1f}×); {r['evaluated_mean']:.1f} predicates evaluated a "
                       f"call; load {r['load_s']:.2f} s")
        for r in policy_rows:
            click.echo(f"{r['hooks']:>6,} hooks, model path ({r['standing_embedder']}): pre_tool wall p50 "
                       f"{r['p50_ms']:.1f} ms, p95 {r['p95_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, max "
                       f"{r['max_ms']:.1f} ms over {r['calls']} calls (a task's first call p95 "
                       f"{r['first_call_p95_ms']:.1f} ms); timeout {r['policy_timeout_ms']:.0f} ms: "
                       f"{r['over_timeout']} calls past it, {r['timeouts']} answered by the timeout")
        a = adversarial
        click.echo(f"adversarial: {a['hooks']} hooks of {a['pattern']!r} on a {a['argument_chars']:,}-character "
                   f"argument: {a['evaluated']} evaluated, {a['skipped_by_budget']} skipped by the step budget, "
                   f"p50 {a['p50_ms']:.1f} ms, max {a['max_ms']:.1f} ms")
        click.echo(f"load average {', '.join(f'{x:.1f}' for x in os.getloadavg())} (wall-time tails include "
                   "time the OS gave other processes; the target is judged on CPU time)")
        for desc, ok in verdicts:
            click.echo(f"  {'met   ' if ok else 'MISSED'} {desc}")
    if check and missed:
        raise SystemExit(1)


def _round(v):
    if isinstance(v, float):
        return round(v, 4)
    return v


COLUMNS = [("size", "entries", "{:,}"), ("build_s", "build s", "{:.2f}"), ("recall_p50_ms", "p50 ms", "{:.2f}"),
           ("recall_p95_ms", "p95 ms", "{:.2f}"), ("append_search_ms", "append ms", "{:.2f}"),
           ("append_fsync_ms", "fsync ms", "{:.2f}"), ("cold_start_s", "cold s", "{:.2f}"),
           ("peak_rss_mb", "RSS MB", "{:.0f}"), ("rank_bm25_p50_ms", "rank_bm25 ms", "{:.1f}"),
           ("speedup_vs_rank_bm25", "speedup", "{:.0f}×"), ("recall_hit_rate", "hit rate", "{:.2f}")]


def table(rows: list[dict]) -> str:
    cells = [[h for _, h, _ in COLUMNS]]
    for row in rows:
        line = []
        for key, _, fmt in COLUMNS:
            v = row.get(key)
            line.append("–" if v is None else fmt.format(v) + ("*" if key == "rank_bm25_p50_ms"
                                                                  and row.get("rank_bm25_sampled") else ""))
        cells.append(line)
    widths = [max(len(r[i]) for r in cells) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells)


# MemSidecar's Hooks are what it measures (with the learned policy): `bench hooks` names it so; `bench sidecar` stays.
bench.add_command(sidecar, "hooks")


@bench.command("shared")
@click.option("--prompts", type=click.IntRange(10, 100_000), default=200, show_default=True,
              help="Warm before_prompt_build calls per side of the latency measure.")
@click.option("--entries", type=click.IntRange(10, 1_000_000), default=1000, show_default=True,
              help="Episodic entries of the latency workspace (plus 40 standing preferences).")
@click.option("--writes", type=click.IntRange(1, 10_000), default=30, show_default=True,
              help="Writes timed from host A to host B, with NOTIFY and with the periodic pull alone.")
@click.option("--hosts", type=click.IntRange(1, 64), default=8, show_default=True, help="Host processes pushing at once.")
@click.option("--rows", "rows_per_host", type=click.IntRange(1, 1_000_000), default=1000, show_default=True,
              help="Records each host process pushes.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--json-out", type=click.Path(dir_okay=False), default=None, help="Also write the JSON object to this file.")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
def shared(prompts, entries, writes, hosts, rows_per_host, as_json, json_out, quiet):
    """The shared tiers on a throwaway PostgreSQL started here: before_prompt_build p95 with the shared tier on
    against off, freshness from host A to host B, append throughput of many hosts (docs/shared.md)."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise click.ClickException("the shared tiers need psycopg: pip install 'memtier-plugin[shared]'") from None
    from ..bench.shared import bench_shared
    from ..shared.server import find_bindir

    if find_bindir() is None:
        raise click.ClickException("no PostgreSQL server binaries (initdb) found: apt-get install postgresql")
    say = None if quiet else (lambda msg: click.echo(f"memtier bench shared: {msg}", err=True))
    try:
        row = bench_shared(prompts=prompts, entries=entries, writes=writes, hosts=hosts, rows_per_host=rows_per_host,
                           progress=say)
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    text = _dump(_round_deep(row), json_out)
    if as_json:
        click.echo(text)
        return
    lat = row["latency"]

    def ms(v):
        return "–" if v is None else f"{v:.2f}"
    click.echo(f"{row['server']}, load {row['load_1m']:.2f}, {row['seconds']:.0f} s")
    click.echo(f"before_prompt_build, {lat['entries']} entries, warm: off p50 {ms(lat['off']['p50_ms'])} / p95 "
               f"{ms(lat['off']['p95_ms'])} ms; on p50 {ms(lat['on']['p50_ms'])} / p95 {ms(lat['on']['p95_ms'])} ms; "
               f"p95 on - off {lat['p95_diff_ms']:+.2f} ms (target ≤ +2); engine calls on the hook's thread: "
               f"{lat['engine_calls_on_hook_thread']}; rows pulled meanwhile: {lat['rows_pulled_during_run']}")
    for label in ("notify", "pull_only"):
        f = row[f"freshness_{label}"]
        click.echo(f"freshness A → B ({label.replace('_', ' ')}): p50 {ms(f['p50_ms'])} / p95 {ms(f['p95_ms'])} ms "
                   f"(target p95 ≤ {f['target_p95_ms']:.0f})")
    t = row["throughput"]
    click.echo(f"append throughput, {t['hosts']} hosts through outbox → shipper → engine: {t['rows']} rows in "
               f"{t['wall_s']:.2f} s = {t['rows_per_s']:,.0f} rows/s (target ≥ {t['target_rows_per_s']:,.0f}); batch "
               f"commit p95 {ms(t['batch_commit']['p95_ms'])} ms")


def _round_deep(value):
    if isinstance(value, dict):
        return {k: _round_deep(v) for k, v in value.items()}
    if isinstance(value, float):
        return round(value, 3)
    return value
