"""`memtier eval prefeval` and `memtier eval intervention`: PrefEval through the host, recall of standing
preferences and pre_tool's decisions (docs/evaluation.md); subcommands of `memtier eval` (:mod:`.eval_cmd`
adds them to its group)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import click

from .eval_output import Progress, emit, json_flags, topic_list

UNRELATED_PROMPTS = 8  # eval prefeval: inter-chat prompts a workspace (multi, 250 questions: ~260 prompts)


# ---------------------------------------------------------------- prefeval


def items_range(value: str | None) -> tuple[int, int] | None:
    """``--items START:END`` → (START, END); a clear error naming the option when it is not two counts in order."""
    if value is None:
        return None
    start, sep, end = value.partition(":")
    if not sep or not start.strip().isdigit() or not end.strip().isdigit() or int(start) >= int(end):
        raise click.BadParameter(f"{value!r}: expected START:END, two counts with START < END (e.g. 4:8)",
                                 param_hint="'--items'")
    return int(start), int(end)


@click.command("prefeval")
@click.argument("path", type=click.Path())
@click.option("--variant", type=click.Choice(["single", "multi"]), default=None,
              help="single: a workspace per item; multi: a user's ~8 preferences together. Default: both.")
@click.option("--form", type=click.Choice(["explicit", "choice", "persona"]), default=None,
              help="How the preference was given. Default: explicit and choice.")
@click.option("--turns", type=click.IntRange(0), default=300, show_default=True,
              help="Inter turns between the preferences and the question (2 messages each).")
@click.option("--limit", type=click.IntRange(1), default=None,
              help="At most N questions per variant and form (in user order).")
@click.option("--unrelated", type=click.IntRange(0), default=UNRELATED_PROMPTS, show_default=True,
              help="Inter-chat user turns sent as prompts to each workspace (a deterministic sample; 0: none): "
                   "the false-delivery rate is the share handed any standing item or skill.")
@click.option("--inter", "inter_path", type=click.Path(exists=True, dir_okay=False), default=None,
              help="The inter chats (default: PATH/filtered_inter_turns.json); a set of your own topics can borrow "
                   "PrefEval's (benchmarks/heldout-probes/).")
@click.option("--items", "items_slice", callback=lambda _c, _p, v: items_range(v), default=None, metavar="START:END",
              help="Only the items with an index in [START, END) of each topic's file, e.g. 4:8 (the held-out half "
                   "of benchmarks/heldout-probes/probe_c).")
@json_flags("{memtier, bm25, host, meta}")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Build the workspaces here and keep each one, as <variant>-<form>/<item> (default: a "
                   "temporary folder, each workspace deleted when scored).")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
@click.pass_obj
def prefeval_cmd(state, path, variant, form, turns, limit, unrelated, inter_path, items_slice, as_json, json_out,
                 workdir, quiet):
    """PrefEval recall (single, multi): is the user's standing preference delivered? memtier vs plain BM25.

    memtier runs through the reference host with the user's config (--config,
    --preset, the workspace's memtier.yaml, the environment): each session is
    written through the ledger and closed with agent_end and session_end, then
    the question goes through before_prompt_build on day 30. Scores:
    hit@delivered (a gold message in the delivered block) and hit@1/5/10 of
    the ranking; BM25 "delivers" its top k at the same k. The block's own
    figures (under "host"): precision (items of the question's own exchange),
    items per layer, tokens, wrong standing items per question, and the
    false-delivery rate over --unrelated inter-chat prompts per workspace.
    """
    from ..config import load_config
    from ..evaluation import prefeval as pe

    root = pe.find_root(path, inter=inter_path)
    variants = [variant] if variant else list(pe.VARIANTS)
    forms = [form] if form else ["explicit", "choice"]
    cfg = load_config(getattr(state, "config_path", None),
                      flags={"paths.workspace": getattr(state, "workspace", None),
                             "preset": getattr(state, "preset", None)})
    keep = workdir is not None
    work = Path(workdir) if keep else Path(tempfile.mkdtemp(prefix="memtier-prefeval-"))
    # every workspace carries the evaluated config in its memtier.yaml; $MEMTIER_CONFIG (already folded
    # into it) would make the host read that file instead
    env_config = os.environ.pop("MEMTIER_CONFIG", None)
    memtier = pe.MemtierPrefEval(cfg, work, keep=keep, unrelated=unrelated)
    for note in memtier.notes:
        click.echo(f"memtier eval: {note}", err=True)
    try:
        t0 = time.perf_counter()
        result = pe.run(root, variants=variants, forms=forms, turns=turns, limit=limit, memtier=memtier,
                        k=cfg.retrieval.top_k, progress=Progress(quiet).bound,
                        inter=Path(inter_path) if inter_path else None, items_slice=items_slice)
        wall = time.perf_counter() - t0
    finally:
        memtier.close()
        if env_config is not None:
            os.environ["MEMTIER_CONFIG"] = env_config
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    emb, rr = memtier.backends.get("embedder"), memtier.backends.get("reranker")
    mode = f"preset {cfg.preset}, " + (f"{emb} φsem" if emb else "lexical") + (f" + {rr} re-ranking" if rr else "")
    doc = {
        "memtier": result["memtier"],
        "bm25": result["bm25"],
        "host": result["host"],
        "meta": {
            "benchmark": "prefeval", "unrelated_per_workspace": unrelated, "path": str(root), "turns": turns, "limit": limit,
            "items": list(items_slice) if items_slice else None,
            "variants": variants, "forms": forms, "mode": mode, "preset": cfg.preset,
            "config": None if cfg.source == "<defaults>" else cfg.source,
            "embedder": emb, "reranker": rr, "top_k": cfg.retrieval.top_k, "token_budget": cfg.packing.token_budget,
            "scoping": cfg.retrieval.scoping, "wall_seconds": round(wall, 1), "seconds": result["seconds"],
            "workspaces": memtier.workspaces, "failed_recalls": memtier.failed,
            "workdir": str(work) if keep else None,
        },
    }
    emit(doc, as_json, json_out, pe.table)


# ---------------------------------------------------------------- intervention


@click.command("intervention")
@click.argument("path", type=click.Path())
@click.option("--limit", type=click.IntRange(1), default=None, help="At most N questions (in user order).")
@click.option("--topics", default=None, help="Comma-separated topics whose questions are asked (default: all; "
                                               "memory still holds every topic's preferences).")
@click.option("--turns", type=click.IntRange(0), default=300, show_default=True,
              help="Inter turns among the preferences (2 messages each; the protocol's 300).")
@click.option("--policy", "policy_file", type=click.Path(dir_okay=False), default=None,
              help="Decide with this learned policy (sets scheduling.policy; `memtier train policy` writes one); "
                   "'default': the one memtier ships; 'none': the fixed rule alone.")
@json_flags("{memtier, baseline, meta}")
@click.option("--rows-out", type=click.Path(dir_okay=False), default=None,
              help="Also write every call's row (label, action, time, the policy's features) as JSON lines to "
                   "this file (the features are then computed on every call, in the decision time).")
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="Build the workspaces here and keep each one (default: a temporary folder).")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
@click.pass_obj
def intervention_cmd(state, path, limit, turns, topics, policy_file, as_json, json_out, rows_out, workdir, quiet):
    """PrefEval intervention at pre_tool: does memtier hold the options that go against the preference?

    The data README's protocol: the multi layout in explicit form, each
    question through before_prompt_build, then select_option({request,
    option}) for each of its 4 options through the host's pre_tool. Option 0
    follows the preference (blocking it is a false interrupt), options 1-3
    violate it. Scores: precision, recall over violating options,
    false-interrupt rate over option 0, supplement rate, decision time
    p50/p95; baseline: the README's BM25 rule (block when the preference is
    in the top 4 for question + option).
    """
    from ..config import load_config
    from ..evaluation import prefeval_intervention as iv
    from ..evaluation import prefeval as pe

    root = pe.find_root(path)
    cfg = load_config(getattr(state, "config_path", None),
                      flags={"paths.workspace": getattr(state, "workspace", None),
                             "preset": getattr(state, "preset", None)})
    if policy_file and policy_file.strip().lower() in ("default", "none"):
        cfg.scheduling.policy = policy_file.strip().lower()  # the shipped policy, or the fixed rule alone
    elif policy_file:
        from ..intervention.policy import read_policy

        read_policy(policy_file)  # a bad file: its one-line error now, not a fallback in every workspace
        cfg.scheduling.policy = str(Path(policy_file).resolve())
    result, info = iv.run_config(cfg, root, topics=topic_list(topics), limit=limit, turns=turns,
                                 workdir=Path(workdir) if workdir else None, collect=bool(rows_out),
                                 progress=Progress(quiet).bound)
    for note in info["notes"]:
        click.echo(f"memtier eval: {note}", err=True)
    rows = result["rows"]
    from ..intervention.policy import is_default, load_policy, policy_path

    chosen = policy_path(cfg)  # 'default': the policy memtier ships (docs/learning.md); unset: the fixed rule
    decision = "fixed rule" if chosen is None else f"{'default policy' if is_default(chosen) else 'policy'} {chosen}"
    if chosen is not None and is_default(chosen):
        need = load_policy(chosen).embedder
        if need and info["standing_embedder"] != need:  # pre_tool left the default aside: say what decided
            decision = f"fixed rule (the default policy reads {need}, which standing.embedder does not give here)"
            chosen = None
    judge = None
    if chosen is not None and load_policy(chosen).uses_judge:
        from ..models.judge import MODEL_NAME as JUDGE_NAME, Judge, model_folder as judge_folder

        if cfg.scheduling.judge == "none" or not Judge(judge_folder(cfg.scheduling.judge_model_dir)).available():
            decision = f"fixed rule ({chosen} reads the judge, which is not set up or is none here)"
            chosen = None
        else:  # which judge read the calls, and how many it missed (decided without it)
            missed = [r["judge_missed"] for r in rows["memtier"] if r.get("judge_missed")]
            judge = {"model": JUDGE_NAME, "calls_without_it": {k: missed.count(k) for k in sorted(set(missed))}}
            decision += f", with the judge {JUDGE_NAME}"
    doc = {"memtier": iv.metrics(rows["memtier"]), "baseline": iv.metrics(rows["baseline"]), "meta": {
        "benchmark": "prefeval-intervention", "path": str(root), "questions": result["questions"], "limit": limit,
        "turns": turns,
        "topics": topic_list(topics), "decision": decision, "judge": judge, "mode": cfg.scheduling.mode,
        "policy": str(chosen) if chosen else None, "preset": cfg.preset,
        "config": None if cfg.source == "<defaults>" else cfg.source, "standing_embedder": cfg.standing.embedder,
        "embedder": info["embedder"], "standing_embedder_used": info["standing_embedder"],
        "features_traced": bool(rows_out), "baseline": f"BM25 top {iv.BM25_TOP} holds the preference (query = question + option)",
        "hold_evidence": iv.hold_evidence(rows["memtier"]),
        "seconds": result["seconds"], "wall_seconds": result["wall_seconds"], "workspaces": info["workspaces"],
        "workdir": info["workdir"]}}
    if rows_out:
        with open(rows_out, "w", encoding="utf-8") as fh:
            for system, rs in rows.items():
                for r in rs:
                    fh.write(json.dumps({"system": system, **r}) + "\n")
    emit(doc, as_json, json_out, iv.table)
