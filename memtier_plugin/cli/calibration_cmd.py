"""`memtier train calibration`: fit the calibration that puts every layer on one scale (docs/retrieval.md,
"Calibration"); a subcommand of `memtier train` (:mod:`.train_cmd` adds it to its group)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import ConfigError

DEFAULT_CALIBRATION_OUT = "memtier-calibration.yaml"


def _num(v) -> str:
    return "-" if v is None else f"{v:.3f}"


@click.command("calibration")
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@click.option("--locomo-limit", type=click.IntRange(0), default=None,
              help="LoCoMo conversations to read (default: all in locomo_dev.json; 0: none).")
@click.option("--prefeval-limit", type=click.IntRange(0), default=None,
              help="PrefEval multi questions per form, explicit and choice (default: all; 0: none).")
@click.option("--inter", "inter_prompts", type=click.IntRange(0), default=3, show_default=True,
              help="Inter-chat user turns recalled per PrefEval question as prompts no standing item applies to.")
@click.option("--l2", type=click.FloatRange(0), default=1.0, show_default=True, help="L2 penalty on the weights.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False),
              help=f"Calibration YAML (default <workspace>/{DEFAULT_CALIBRATION_OUT}); never your config file.")
@click.option("--rows-out", type=click.Path(dir_okay=False), default=None,
              help="Also write every labelled candidate as JSON lines (layer, features, label, query).")
@click.option("--from-rows", "rows_in", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Fit on a --rows-out file instead of collecting again (seconds, not minutes).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option("--quiet", "-q", is_flag=True, help="No progress on stderr.")
@click.pass_obj
def calibration(state, path, locomo_limit, prefeval_limit, inter_prompts, l2, out_path, rows_out, rows_in, as_json,
                quiet):
    """Fit the calibration that puts every layer on one scale (docs/retrieval.md, "Calibration").

    PATH is the benchmark folder holding locomo_dev.json and/or prefeval_dev/.
    Every candidate recall hands to the block (episodes, facts, standing items,
    skills) is collected with its features and labelled by the benchmark
    (evidence, or the question's own preference; inter-chat prompts: no
    standing item applies); a logistic model per layer maps features to the
    probability that the candidate applies, and the threshold is the one that
    maximises F2 (recall-weighted) of the delivered candidates. Collected
    under the config and preset you run it with; the file goes to its own YAML:
    name it as calibration.file.
    """
    import orjson

    from ..config import load_config
    from ..evaluation.calibration_data import Rows, collect
    from ..learning.calibrate import fit_all
    from ..recall.calibration import MARKER, derive
    from ..store.artifacts import write_artifact
    from .eval_output import Progress

    flags = {k: v for k, v in state.flags().items() if v is not None}
    cfg = load_config(getattr(state, "config_path", None), flags=flags)
    out = Path(out_path) if out_path else cfg.workspace / DEFAULT_CALIBRATION_OUT
    if rows_in:
        rows = Rows()
        with open(rows_in, "rb") as fh:
            for n, line in enumerate(fh, 1):
                try:
                    q = orjson.loads(line)
                    hits = [(layer, derive(layer, feats), int(label), hid) for layer, feats, label, hid in q["hits"]]
                    rows.queries.append({"source": q["source"], "hits": hits})
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    raise ConfigError(f"{rows_in}:{n}: not a calibration row ({exc})") from None
    else:
        data = Path(path)
        if not (data / "locomo_dev.json").is_file() and not (data / "prefeval_dev").is_dir():
            raise ConfigError(f"{data}: holds neither locomo_dev.json nor prefeval_dev/ (the benchmark folder)")
        bar = None if quiet else Progress(quiet)
        rows = collect(data, flags, locomo_limit=locomo_limit, prefeval_limit=prefeval_limit,
                       inter_prompts=inter_prompts, progress=bar)
    if rows_out:
        with open(rows_out, "wb") as fh:
            for q in rows.queries:
                fh.write(orjson.dumps(q) + b"\n")
    cal, report = fit_all(rows, top_k=cfg.retrieval.top_k, l2=l2, preset=cfg.preset)
    src = cfg.source if cfg.source and cfg.source != "<defaults>" else ""
    write_artifact(out, MARKER, cal.to_doc(), header="memtier calibration (memtier train calibration); "
                   "name it as calibration.file", kind="a calibration file", config_source=src,
                   refuse_config_name=True)
    report["out"] = str(out)
    if as_json:
        click.echo(json.dumps(report, sort_keys=True))
        return
    click.echo(f"calibration for preset {cfg.preset} -> {out}")
    for layer, r in report["layers"].items():
        click.echo(f"  {layer:8s} n={r['n']:6d} positives={r['positives']:5d} AUC train {_num(r['auc_train'])} "
                   f"held-out {_num(r['auc_heldout'])}")
    t = report["chosen"]
    click.echo("  thresholds " + ", ".join(f"{k} {v:.3f}" for k, v in t["threshold"].items()) + ": "
               + "  ".join(f"{k} {v:.3f}" for k, v in t.items() if k != "threshold"))
