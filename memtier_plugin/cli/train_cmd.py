"""`memtier train`: learn the retrieval weight vector with PPO (MemTier §3.5). `memtier train policy` (the
intervention policy with GRPO, Pulse §3.4) is :mod:`.policy_cmd`'s, `memtier train calibration`
:mod:`.calibration_cmd`'s, `memtier train gate` (the learned standing gate) :mod:`.gate_cmd`'s, `memtier train
center` (the common direction of prompts) :mod:`.center_cmd`'s and `memtier train requests` (the request model)
:mod:`.requests_cmd`'s, all added to this group."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..errors import ConfigError, MemtierError
from .calibration_cmd import calibration
from .center_cmd import center
from .gate_cmd import gate
from .requests_cmd import requests
from .policy_cmd import policy

DEFAULT_OUT = "memtier-learned-weights.yaml"


def _bar(label: str):
    """A progress callback drawing one click progress bar on stderr."""
    state = {"bar": None}

    def update(done: int, total: int) -> None:
        if state["bar"] is None:
            state["bar"] = click.progressbar(length=total, label=label, file=click.get_text_stream("stderr"),
                                             show_pos=True)
            state["bar"].__enter__()
        bar = state["bar"]
        bar.update(done - bar.pos)
        if done >= total:
            bar.__exit__(None, None, None)
            state["bar"] = None

    return update


def _fmt(v) -> str:
    return "  ".join(f"{x:.3f}" for x in v)


@click.group(invoke_without_command=True)
@click.option("--from-traces", "from_traces", is_flag=True,
              help="Episodes from this workspace's logged runs (the default source).")
@click.option("--longmemeval", "lme_path", type=click.Path(dir_okay=False),
              help="Train on a LongMemEval file: reward +1 when every gold session is in the top 5.")
@click.option("--limit", type=int, default=0, help="With --longmemeval: only the first N questions.")
@click.option("--holdout", type=int, default=0,
              help="With --longmemeval: keep N questions (chosen by --seed) out of training and report them apart.")
@click.option("--embed/--no-embed", default=None,
              help="With --longmemeval: φsem from the config's embeddings.backend, as recall has it (default: when "
                   "it is there, else w_sem is frozen); --embed: a missing model is an error (MiniLM when the "
                   "config names none).")
@click.option("--rerank/--no-rerank", default=None,
              help="With --longmemeval: the config's cross-encoder re-ranking, as recall has it (default: when "
                   "it is fetched); --rerank: a missing model is an error.")
@click.option("--cache", "cache_dir", type=click.Path(file_okay=False),
              help="With --longmemeval: keep the vector cache here (default: a temporary directory).")
@click.option("--epochs", type=int, default=4, show_default=True)
@click.option("--batch-size", type=int, default=16, show_default=True, help="Items per PPO batch.")
@click.option("--group-size", type=int, default=4, show_default=True, help="Weight samples per item.")
@click.option("--sigma0", type=float, default=0.15, show_default=True, help="Initial exploration std.")
@click.option("--lr", type=float, default=0.02, show_default=True, help="Adam step size.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--freeze", default="", help="Comma-separated weights not to learn: sem,bm25,decay,cw,tier.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False),
              help=f"Learned-weights YAML (default <workspace>/{DEFAULT_OUT}); never your config file.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.pass_obj
def train(state, from_traces, lme_path, limit, holdout, embed, rerank, cache_dir, epochs, batch_size, group_size, sigma0, lr,
          seed, freeze, out_path, as_json):
    """Learn the retrieval weights w = [sem, bm25, decay, cw, tier] with PPO (`train policy`: the intervention policy).

    Rewards are +1/−1 per episode: from the workspace's logged runs (traces,
    attribution and agent_end success) or, with --longmemeval, from whether
    the gold evidence sessions are retrieved (MemTier eq. 2). The result goes
    to its own YAML file; reference it as weights.learned_file.
    """
    if click.get_current_context().invoked_subcommand:
        return  # `memtier train policy ...`
    import numpy as np

    from ..recall.backends import fusion_weights
    from ..learning.ppo import PPOConfig, WEIGHT_NAMES, evaluate_weights, train as ppo, write_learned_weights

    if from_traces and lme_path:
        raise click.UsageError("give --from-traces or --longmemeval, not both")
    config = state.config
    names = [n.strip() for n in freeze.split(",") if n.strip()]
    frozen = []
    for n in names:
        key = n if n.startswith("w_") else f"w_{n}"
        if key not in WEIGHT_NAMES:
            raise ConfigError(f"--freeze: unknown weight {n!r}; expected some of sem,bm25,decay,cw,tier")
        frozen.append(key)
    notes: list[str] = []
    w0_list, w0_file = fusion_weights(config)  # what recall uses now: the learned file (in the workspace) or weights.*
    w0 = np.asarray(w0_list, dtype=float)
    cfg = PPOConfig(sigma0=sigma0, lr=lr, epochs=epochs, batch_size=batch_size, group_size=group_size, seed=seed,
                    sigma_min=min(0.02, sigma0))
    out = Path(out_path) if out_path else config.workspace / DEFAULT_OUT
    src = Path(config.source) if config.source and config.source != "<defaults>" else None
    if src is not None and src.is_file() and out.resolve() == src.resolve():
        raise ConfigError(f"--out {out} is your config file; learned weights go to their own file")
    report: dict = {"source": "longmemeval" if lme_path else "traces", "seed": seed,
                    "weights_file": None if w0_file is None else str(w0_file)}
    env = None
    try:
        if lme_path:
            env, reward, train_idx, eval_sets = _longmemeval(state, config, lme_path, limit, holdout, embed, rerank,
                                                             cache_dir, seed, notes, report, as_json)
            if env.opts.backends.embedder is None and "w_sem" not in frozen:
                frozen.append("w_sem")
                notes.append("w_sem frozen: no embedding backend, φsem is 0 for every entry")
        else:
            from ..learning.rewards import load_trace_episodes, trace_reward

            episodes, stats = load_trace_episodes(config.memory_root)
            report["traces"] = {"runs": stats.runs, "with_outcome": stats.with_outcome, "episodes": stats.episodes,
                                "skipped": stats.skipped}
            if not episodes:
                why = ", ".join(f"{n} {k}" for k, n in stats.skipped.items()) or "no traces"
                raise MemtierError(f"no training episodes in {config.memory_root} ({stats.runs} runs traced; {why}); "
                                   "run the agent with memtier first, or use --longmemeval")
            reward = trace_reward(episodes)
            train_idx = list(range(len(episodes)))
            eval_sets = {}
            if "w_sem" not in frozen and all(float(e.signals[:, 0].max()) == 0.0 for e in episodes):
                frozen.append("w_sem")
                notes.append("w_sem frozen: φsem was 0 in every logged candidate")

        def item_reward(w, i):
            return reward(w, train_idx[i])

        def mean_reward(w):
            return evaluate_weights(item_reward, len(train_idx), w)

        result = ppo(item_reward, len(train_idx), w0, config=cfg, freeze=frozen,
                     progress=None if as_json else _bar("training"))
        from ..learning.rewards import choose_iterate

        pick = choose_iterate(result, mean_reward)
        learned = pick["weights"]
        result.weights_after = learned
        report.update({
            "items": len(train_idx), "episodes": cfg.epochs * len(train_idx) * cfg.group_size,
            "weights_before": dict(zip(WEIGHT_NAMES, map(float, w0))),
            "weights_after": dict(zip(WEIGHT_NAMES, map(float, learned))),
            "final_iterate": dict(zip(WEIGHT_NAMES, map(float, np.clip(result.history[-1]["mu"], 0, 1)))),
            "sigma_after": [float(x) for x in result.sigma_after],
            "mean_reward_before": pick["w0_mean_reward"], "mean_reward_after": pick["mean_reward"],
            "final_iterate_mean_reward": pick["final_mean_reward"], "chosen": pick["rule"],
            "batches": result.n_batches, "skipped_batches": result.skipped_batches,
            "distance_from_w0": float(np.linalg.norm(learned - np.clip(w0, 0, 1))),
            "frozen": frozen, "notes": notes,
        })
        for name, idx in eval_sets.items():
            report.setdefault("session_recall_all@5", {})[name] = {
                "n": len(idx), "w0": env.recall_all_at_5(w0, idx), "learned": env.recall_all_at_5(learned, idx)}
        if result.skipped_batches == result.n_batches:
            notes.append("every batch had zero reward variance (the zero-variance trap): weights unchanged")
        meta = {k: report[k] for k in ("source", "items", "mean_reward_before", "mean_reward_after", "chosen",
                                       "skipped_batches")}
        if "session_recall_all@5" in report:
            meta["session_recall_all@5"] = report["session_recall_all@5"]
        if lme_path:
            meta["data"] = str(lme_path)
        path = write_learned_weights(out, result, meta)
        report["out"] = str(path.resolve())
    finally:
        if env is not None:
            env.close()
    if as_json:
        click.echo(json.dumps(report, indent=None, sort_keys=False))
        return
    _print_table(report)


def _longmemeval(state, config, path, limit, holdout, embed, rerank, cache_dir, seed, notes, report, quiet):
    import numpy as np

    from ..recall.backends import choose
    from ..evaluation.longmemeval import included, load
    from ..evaluation.longmemeval_env import LongMemEvalEnv

    questions = [q for q in load(path) if included(q, "strict")]
    if limit:
        questions = questions[:limit]
    if len(questions) < 2:
        raise MemtierError(f"{path}: need at least 2 questions with gold evidence, found {len(questions)}")
    if not 0 <= holdout < len(questions):
        raise ConfigError(f"--holdout must be between 0 and {len(questions) - 1}")
    # recall's own choice from the same config (EmbeddingUnavailable / RerankerUnavailable: one line, exit 2)
    backends = choose(config, embed=embed, rerank=rerank, load=True)
    notes.extend(f"{n}; trained without it" for n in backends.notes)
    flags = {k: v for k, v in state.flags().items() if k != "paths.workspace" and v is not None}
    env = LongMemEvalEnv(questions, backends=backends, flags=flags,
                         config_path=config.source if config.source != "<defaults>" else None,
                         cache_dir=Path(cache_dir) if cache_dir else None,
                         progress=None if quiet else _bar("building workspaces"))
    order = np.random.default_rng(seed).permutation(len(questions))
    held = sorted(order[:holdout].tolist())
    train_idx = sorted(order[holdout:].tolist())
    report["questions"] = len(questions)
    report["embeddings"] = backends.embedder_name
    report["reranker"] = backends.reranker_name
    eval_sets = {"dev": list(range(len(questions)))}
    if held:
        eval_sets["train"] = train_idx
        eval_sets["holdout"] = held
    return env, env.reward, train_idx, eval_sets


def _print_table(r: dict) -> None:
    from ..learning.ppo import WEIGHT_NAMES

    click.echo(f"memtier train ({r['source']}): {r['items']} items, {r['episodes']} episodes, "
               f"{r['batches']} batches ({r['skipped_batches']} skipped: zero reward variance)")
    click.echo(f"{'':<22}" + "".join(f"{n:>9}" for n in WEIGHT_NAMES) + f"{'mean reward':>13}")
    click.echo(f"{'before (w0)':<22}" + "".join(f"{r['weights_before'][n]:>9.3f}" for n in WEIGHT_NAMES)
               + f"{r['mean_reward_before']:>+13.3f}")
    click.echo(f"{'PPO final iterate':<22}" + "".join(f"{r['final_iterate'][n]:>9.3f}" for n in WEIGHT_NAMES)
               + f"{r['final_iterate_mean_reward']:>+13.3f}")
    click.echo(f"{'after (learned)':<22}" + "".join(f"{r['weights_after'][n]:>9.3f}" for n in WEIGHT_NAMES)
               + f"{r['mean_reward_after']:>+13.3f}")
    click.echo(f"kept: {r['chosen']}; moved {r['distance_from_w0']:.3f} from w0 (L2)")
    for name, row in (r.get("session_recall_all@5") or {}).items():
        click.echo(f"session recall_all@5 on {name} ({row['n']} questions): w0 {row['w0']:.3f} -> "
                   f"learned {row['learned']:.3f}")
    for note in r["notes"]:
        click.echo(f"note: {note}")
    click.echo(f"wrote {r['out']}")
    click.echo("use it: add to memtier.yaml\n  weights:\n    learned_file: " + r["out"]
               + f"\nor set MEMTIER_WEIGHTS__LEARNED_FILE={r['out']} (your config file is not changed)")
    sys.stdout.flush()


train.add_command(calibration)  # `memtier train calibration`: its own module, one command of this group
train.add_command(policy)  # `memtier train policy`: the intervention policy, :mod:`.policy_cmd`'s
train.add_command(gate)  # `memtier train gate`: the learned standing gate, :mod:`.gate_cmd`'s
train.add_command(center)  # `memtier train center`: the common direction of prompts, :mod:`.center_cmd`'s
train.add_command(requests)  # `memtier train requests`: the request model, :mod:`.requests_cmd`'s
