"""`memtier train policy`: learn the pre_tool intervention policy (silent / supplement / intervene) with GRPO
on PrefEval's intervention protocol (Pulse §3.4; docs/learning.md); a subcommand of `memtier train`
(:mod:`.train_cmd` adds it to its group)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import ConfigError, MemtierError

DEFAULT_POLICY_OUT = "memtier-policy.yaml"


@click.command("policy")
@click.argument("path", type=click.Path())
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seeds every draw of the training (initial weights, batches, sampled actions).")
@click.option("--train-topics", default=None,
              help="Comma-separated PrefEval topics to train on (default: every other topic, sorted: 5 of the 10 "
                   "dev topics); the others are held back and measured apart.")
@click.option("--limit", type=click.IntRange(1), default=None, help="At most N questions (in user order).")
@click.option("--turns", type=click.IntRange(0), default=300, show_default=True,
              help="Inter turns among the preferences (2 messages each; the protocol's 300).")
@click.option("--epochs", type=click.IntRange(1), default=150, show_default=True,
              help="Passes over the training calls.")
@click.option("--group-size", type=click.IntRange(2), default=8, show_default=True, help="Actions sampled per call.")
@click.option("--lr", type=float, default=0.05, show_default=True, help="Adam step size.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False),
              help=f"Policy YAML (default <workspace>/{DEFAULT_POLICY_OUT}); never your config file.")
@click.option("--rows-out", type=click.Path(dir_okay=False), default=None,
              help="Also write every traced call (label, actions, features) as JSON lines to this file.")
@click.option("--from-rows", "rows_in", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Train on the calls a --rows-out file holds instead of tracing them again (seconds, not minutes).")
@click.option("--features", "feature_set", default="evidence", show_default=True,
              help="What the policy reads: base (the best standing item: format-1 files), evidence (also the "
                   "item of the top 3 the call conflicts with most), ranked (also each of the top 3), pairs "
                   "(evidence plus the cross-encoder's (call, clause) scores: needs --cross-encoder), judge "
                   "(evidence plus the pair model's scores of the top 3 items, both phrasings: needs --judge), or a "
                   "comma-separated list of feature names.")
@click.option("--hidden", type=int, default=0, show_default=True, callback=lambda c, p, v: _hidden_units(v),
              help="Units of one tanh hidden layer (0: a linear policy; at most 256, what a policy file may hold).")
@click.option("--cross-encoder", "pairs", is_flag=True,
              help="Also trace the cross-encoder's (call, clause) features (two pairs a call, ~25 ms each here; "
                   "needs `memtier model setup --reranker`).")
@click.option("--judge", "judge", is_flag=True,
              help="Also trace the pair model's features (its two phrasings of up to 3 (item, call) pairs a call, "
                   "~0.1 s a pair here; needs `memtier model setup --judge`).")
@click.option("--with-traces", "with_traces", is_flag=True,
              help="Also train on the workspace's real runs: pre_tool decisions traced with the policy's features, "
                   "labelled by what happened to the call and the run (docs/learning.md).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
@click.pass_obj
def policy(state, path, seed, train_topics, limit, turns, epochs, group_size, lr, out_path, rows_out, rows_in,
           feature_set, hidden, pairs, judge, with_traces, as_json, quiet):
    """Learn the pre_tool intervention policy (silent / supplement / intervene) on PrefEval with GRPO.

    PATH is the PrefEval folder (or its parent). Every question of the
    intervention protocol (`memtier eval intervention`) runs through the
    reference host with the fixed rule, tracing the policy's features of each
    select_option call; the calls of the training topics, labelled by the
    benchmark (option 0 follows the preference, 1-3 violate it), train a
    softmax policy with group-relative advantages and Pulse's reward (+1 the
    correct action, -1 a wrong intervention, 0 other errors). Reported: the
    policy, the fixed rule and the BM25 rule on the training topics, the
    held-back topics and all of them. The policy goes to its own YAML file;
    reference it as scheduling.policy.
    """
    from ..config import load_config
    from ..evaluation import prefeval_intervention as iv
    from ..evaluation import prefeval as pe
    from ..intervention.policy import write_policy
    from ..learning.grpo import GRPOConfig, train as grpo
    from .eval_output import Progress, topic_list

    root = pe.find_root(path)
    cfg = load_config(getattr(state, "config_path", None),
                      flags={"paths.workspace": getattr(state, "workspace", None), "preset": getattr(state, "preset", None)})
    out = Path(out_path) if out_path else cfg.workspace / DEFAULT_POLICY_OUT
    src = Path(cfg.source) if cfg.source and cfg.source != "<defaults>" else None
    if src is not None and src.is_file() and out.resolve() == src.resolve():
        raise ConfigError(f"--out {out} is your config file; the policy goes to its own file")
    names = pe.topics(root)
    chosen = topic_list(train_topics) or names[0::2]
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        raise ConfigError(f"--train-topics: no topic {', '.join(unknown)} in {root} (known: {', '.join(names)})")
    held = [t for t in names if t not in chosen]
    feature_names = _feature_names(feature_set)
    cfg.scheduling.policy = "none"  # features are traced under the fixed rule, whatever the config names
    if rows_in:
        result, info = _traced_rows(Path(rows_in))
    else:
        if pairs:
            from ..recall.rerank import SETUP_HINT, CrossEncoder, model_folder

            if not CrossEncoder(model_folder(cfg.rerank.model_dir)).available():
                raise ConfigError(f"--cross-encoder: the cross-encoder is not set up: {SETUP_HINT}")
        if judge:
            from ..models.judge import SETUP_HINT as JUDGE_HINT, Judge, model_folder as judge_folder

            off = cfg.scheduling.judge == "none"
            if off or not Judge(judge_folder(cfg.scheduling.judge_model_dir)).available():
                raise ConfigError(f"--judge: the judge is {'none (scheduling.judge)' if off else 'not set up'}: "
                                  f"{JUDGE_HINT}")
        result, info = iv.run_config(cfg, root, limit=limit, turns=turns, collect=True, pairs=pairs, judge=judge,
                                     progress=None if quiet else Progress(quiet).bound)
    rows, base = result["rows"]["memtier"], result["rows"]["baseline"]
    train_rows = [r for r in rows if r["topic"] in chosen]
    traced = _real_run_rows(cfg.memory_root, feature_names) if with_traces else None
    if traced is not None:
        train_rows += traced.pop("rows")
    embedded = any((r.get("features") or {}).get("embedded") for r in rows)
    gcfg = GRPOConfig(seed=seed, epochs=epochs, group_size=group_size, lr=lr, hidden=hidden,
                      features=feature_names)
    try:
        learned, summary = grpo(train_rows, gcfg, embedder=(info["standing_embedder"] or "") if embedded else "")
    except ValueError as exc:
        raise MemtierError(f"{root}: {exc}") from None
    acts = iv.replay(rows, learned)
    for r, a in zip(rows, acts):
        r["policy_action"] = a
    report: dict = {"seed": seed, "train_topics": chosen, "held_topics": held, "questions": result["questions"],
                    "training": summary, "standing_embedder": info["standing_embedder"] if embedded else None}
    for split, keep in (("train", set(chosen)), ("held_back", set(held)), ("all", set(names))):
        mine = [r for r in rows if r["topic"] in keep]
        theirs = [r for r in base if r["topic"] in keep]
        if not mine:
            continue
        report[split] = {"policy": iv.metrics(mine, "policy_action"), "fixed_rule": iv.metrics(mine, "action"),
                         "bm25": iv.metrics(theirs)}
    for split in ("train", "held_back", "all"):  # the traced calls' time is the policy path's (features computed)
        if split in report:
            report[split]["fixed_rule"]["decision_p50_ms"] = report[split]["fixed_rule"]["decision_p95_ms"] = None
    if traced is not None:
        report["traces"] = traced
    # the measures, not the times: the same data and seed give the same file
    learned.meta = {"seed": seed, "train_topics": chosen, "held_topics": held, "data": str(root),
                    "real_run_calls": traced["used"] if traced is not None else 0, "training": summary,
                    "held_back": {k: v for k, v in (report.get("held_back", {}).get("policy") or {}).items()
                                  if not k.endswith("_ms")}}
    report["out"] = str(write_policy(out, learned, cfg.source).resolve())
    if rows_out:
        with open(rows_out, "w", encoding="utf-8") as fh:
            for system, rs in (("memtier", rows), ("baseline", base)):
                for r in rs:
                    extra = {"standing_embedder": info["standing_embedder"]} if system == "memtier" else {}
                    fh.write(json.dumps({"system": system, **r, **extra}) + "\n")
    report["wall_seconds"] = result["wall_seconds"]
    report["traced_rows"] = str(rows_in) if rows_in else None
    if as_json:
        click.echo(json.dumps(report))
        return
    click.echo(f"memtier train policy: {summary['rows']} training calls ({', '.join(chosen)}), seed {seed}, "
               f"sampled reward {summary['mean_sampled_reward_first_epoch']:+.3f} -> "
               f"{summary['mean_sampled_reward_last_epoch']:+.3f}")
    if traced is not None:
        click.echo(f"real runs ({traced['memory_root']}): {traced['used']} labelled calls "
                   f"({traced['labels']['follow']} follow, {traced['labels']['violate']} violate)"
                   + "".join(f"; skipped {n}: {why}" for why, n in traced["skipped"].items()))
    click.echo(f"{'split':10s} {'system':11s} {'precision':>9s} {'recall':>7s} {'false int':>9s} {'suppl':>6s} {'n':>5s}")
    for split in ("train", "held_back", "all"):
        for system, m in report.get(split, {}).items():
            click.echo(f"{split:10s} {system:11s} {m['precision']:9.3f} {m['recall']:7.3f} "
                       f"{m['false_interrupt_rate']:9.3f} {m['supplement_rate']:6.3f} {m['n']:5d}")
    click.echo(f"wrote {report['out']}")
    click.echo("use it: add to memtier.yaml\n  scheduling:\n    policy: " + report["out"]
               + "\n(your config file is not changed)")


def _hidden_units(value: int) -> int:
    """``--hidden``: 0 to MAX_HIDDEN, the widest layer a policy file may hold (``read_policy`` refuses wider)."""
    from ..intervention.policy import MAX_HIDDEN

    if not 0 <= value <= MAX_HIDDEN:
        raise click.BadParameter(f"{value} units: a policy's hidden layer has 0 to {MAX_HIDDEN} (0: linear)")
    return value


def _real_run_rows(memory_root: Path, names: tuple) -> dict:
    """The labelled calls of the workspace's real runs that carry every feature in ``names`` (MemtierError: none)."""
    from ..learning.grpo import LABELS, rows_from_traces

    rows, skipped = rows_from_traces(memory_root)
    usable = [r for r in rows if all(n in r["features"] for n in names)]
    if len(usable) < len(rows):
        skipped["traced without the features --features names"] = len(rows) - len(usable)
    if not usable:
        why = "; ".join(f"{n} {k}" for k, n in skipped.items()) or "no pre_tool decisions traced"
        raise MemtierError(f"--with-traces: no labelled calls in {memory_root} ({why})")
    return {"memory_root": str(memory_root), "used": len(usable), "rows": usable, "skipped": skipped,
            "labels": {lab: sum(1 for r in usable if r["label"] == lab) for lab in LABELS}}


def _feature_names(spec: str) -> tuple:
    """The features ``--features`` names: a preset or a comma-separated list (ConfigError: unknown names)."""
    from ..intervention.policy import (
        CROSS_FEATURES, EVIDENCE_FEATURES, FEATURES, JUDGE_FEATURES, KNOWN_FEATURES, RANKED_FEATURES,
    )

    presets = {"base": FEATURES, "evidence": FEATURES + EVIDENCE_FEATURES,
               "ranked": FEATURES + EVIDENCE_FEATURES + RANKED_FEATURES,
               "pairs": FEATURES + EVIDENCE_FEATURES + CROSS_FEATURES,
               "judge": FEATURES + EVIDENCE_FEATURES + JUDGE_FEATURES}
    if spec.strip() in presets:
        return presets[spec.strip()]
    chosen = tuple(n.strip() for n in spec.split(",") if n.strip())
    unknown = [n for n in chosen if n not in KNOWN_FEATURES]
    if unknown or not chosen or len(set(chosen)) != len(chosen):
        raise ConfigError(f"--features: {', '.join(unknown) or spec!r} is not a preset ({', '.join(presets)}) nor a "
                          f"list of distinct feature names ({', '.join(KNOWN_FEATURES)})")
    return chosen


def _traced_rows(path: Path) -> tuple[dict, dict]:
    """The result of an earlier run, as its --rows-out file holds it (one JSON object a line)."""
    rows: dict[str, list] = {"memtier": [], "baseline": []}
    emb = None
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            try:
                r = json.loads(line)
                rows[r.pop("system")].append(r)
                if r.get("features") is not None and not isinstance(r["features"], dict):
                    raise TypeError("features")
            except (ValueError, KeyError, TypeError, AttributeError):
                raise MemtierError(f"{path}: line {n} is not a row of `memtier train policy --rows-out`") from None
            if r.get("standing_embedder"):
                emb = r["standing_embedder"]
    if not rows["memtier"]:
        raise MemtierError(f"{path}: no memtier rows")
    questions = len({(r["topic"], r["index"]) for r in rows["memtier"]})
    return ({"rows": rows, "questions": questions, "wall_seconds": 0.0},
            {"standing_embedder": emb})
