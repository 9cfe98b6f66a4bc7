"""`memtier train center`: the common direction of prompts (layers/center.py; docs/standing.md, "The common
direction of prompts") from a file of ordinary user prompts; a subcommand of `memtier train` (:mod:`.train_cmd`
adds it)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import click

from ..errors import ConfigError

DEFAULT_CENTER_OUT = "memtier-prompt-center.yaml"
MAX_CHARS = 1000  # a prompt's first characters (as a query is bounded)
MAX_FILE = 2 << 30


def _json(path: Path):
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError, EOFError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the prompts: {exc}"[:300]) from None


def read_prompts(path: Path) -> list[str]:
    """The distinct user prompts of ``path``, in file order: a LongMemEval file's user turns, a LoCoMo file's
    turns, a JSON list of strings, or a text file with one prompt a line; ConfigError naming what is wrong."""
    if path.stat().st_size > MAX_FILE:
        raise ConfigError(f"{path}: larger than {MAX_FILE >> 30} GiB")
    texts: list = []
    if path.name.endswith((".json", ".json.gz")):
        data = _json(path)
        if not isinstance(data, list):
            raise ConfigError(f"{path}: expected a JSON list (LongMemEval questions, LoCoMo conversations or strings)")
        for i, rec in enumerate(data):
            if isinstance(rec, str):
                texts.append(rec)
            elif isinstance(rec, dict) and isinstance(rec.get("haystack_sessions"), list):
                texts += [t.get("content") for s in rec["haystack_sessions"] if isinstance(s, list)
                          for t in s if isinstance(t, dict) and t.get("role") == "user"]
            elif isinstance(rec, dict) and isinstance(rec.get("conversation"), dict):
                texts += [t.get("text") for k, s in rec["conversation"].items()
                          if k.startswith("session_") and isinstance(s, list) for t in s if isinstance(t, dict)]
            else:
                raise ConfigError(f"{path}: item {i}: expected a LongMemEval question, a LoCoMo conversation or a "
                                  "string")
    else:
        try:
            texts = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read the prompts: {exc}") from None
    seen, out = set(), []
    for t in texts:
        t = t.strip()[:MAX_CHARS] if isinstance(t, str) else ""
        if t and t not in seen:
            seen.add(t)
            out.append(t)
    if not out:
        raise ConfigError(f"{path}: no prompts found")
    return out


def spread(items: list[str], limit: int) -> list[str]:
    """At most ``limit`` of ``items``, taken evenly over the whole list (deterministic)."""
    if len(items) <= limit:
        return items
    return [items[i * len(items) // limit] for i in range(limit)]


@click.command("center")
@click.argument("prompts_path", metavar="PROMPTS", type=click.Path(exists=True, dir_okay=False))
@click.option("--limit", type=click.IntRange(10), default=3000, show_default=True,
              help="Prompts embedded at most, taken evenly over the file.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False),
              help=f"Center YAML (default <workspace>/{DEFAULT_CENTER_OUT}); name it as standing.center_file.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.pass_obj
def center(state, prompts_path, limit, out_path, as_json):
    """Compute the common direction of prompts (docs/standing.md, "The common direction of prompts").

    PROMPTS holds ordinary user prompts: a LongMemEval file (its user turns;
    the shipped center is the mean of 3,000 of LongMemEval-S dev's), a LoCoMo
    file (its turns), a JSON list of strings, or a text file with one prompt a
    line. Each prompt is embedded alone as a query with the standing embedder
    (standing.embedder; bge-small after `memtier model setup --embedder`); the
    mean vector goes to its own YAML: name it as standing.center_file.
    """
    from ..layers.center import MARKER, fit
    from ..layers.gate import embedder_name
    from .gate_cmd import config_and_embedder
    from ..store.artifacts import write_artifact

    cfg, embedder = config_and_embedder(state, "the center is a mean of embeddings")
    path = Path(prompts_path)
    prompts = spread(read_prompts(path), limit)
    embed_query = getattr(embedder, "embed_query", None)
    vecs = []
    with click.progressbar(prompts, label="embedding", file=click.get_text_stream("stderr")) as bar:
        for t in bar:
            vecs.append(embed_query(t) if embed_query is not None else embedder.embed([t])[0])
    name = embedder_name(embedder)
    c = fit(vecs, name, meta={"from": path.name})
    out = Path(out_path) if out_path else cfg.workspace / DEFAULT_CENTER_OUT
    src = cfg.source if cfg.source and cfg.source != "<defaults>" else ""
    write_artifact(out, MARKER, c.to_doc(), header="memtier prompt center (memtier train center); name it as "
                   "standing.center_file", kind="a prompt center file", config_source=src, refuse_config_name=True)
    import numpy as np

    report = {"out": str(out), "embedder": name, "prompts": len(prompts),
              "norm": round(float(np.linalg.norm(c.vector)), 4)}
    if as_json:
        click.echo(json.dumps(report, sort_keys=True))
        return
    click.echo(f"prompt center ({name}, {len(prompts)} prompts, norm {report['norm']:.3f}) -> {out}")
