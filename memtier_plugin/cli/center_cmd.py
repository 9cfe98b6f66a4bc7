"""`memtier train center`: the common direction of prompts (layers/center.py; docs/standing.md, "The common
direction of prompts") from a file of ordinary user prompts; a subcommand of `memtier train` (:mod:`.train_cmd`
adds it)."""

from __future__ import annotations

import gzip
import json
import re
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


def preference_set(value: str) -> tuple[Path, tuple[int, int] | None]:
    """``--preferences DIR`` or ``DIR:START:END`` (only the items with an index in [START, END) of each topic file,
    as ``eval prefeval --items``) → (folder, slice); a clear error naming the option otherwise."""
    path, sl = Path(value), None
    if not path.exists():
        m = re.fullmatch(r"(.+):(\d+):(\d+)", value)
        if m and int(m.group(2)) < int(m.group(3)):
            path, sl = Path(m.group(1)), (int(m.group(2)), int(m.group(3)))
    if not (path / "explicit_preference").is_dir():
        raise click.BadParameter(f"{value!r}: expected a PrefEval-format folder (with explicit_preference/), "
                                 "optionally followed by :START:END", param_hint="'--preferences'")
    return path, sl


def preference_groups(sets: list[tuple[Path, tuple[int, int] | None]], embedder, center) -> list:
    """(the question's vector after ``center``, the user's preference vectors, the row of its own) for every
    question of every set whose user holds two or more preferences: user ``u`` holds item ``u`` of every topic,
    as ``eval prefeval --variant multi`` lays them out. Each text is embedded alone, as the standing scorer does."""
    import numpy as np

    from ..evaluation import prefeval as pe
    from ..layers.gate import embed_each
    from ..models.embedders import embed_as_query

    users: dict[tuple[int, int], list] = {}
    for n, (root, sl) in enumerate(sets):
        for topic_items in pe.load_items(root, "explicit", sl):
            for it in topic_items:
                users.setdefault((n, it.index), []).append((it.exchange[0][1], it.question))
    held = [mine for _, mine in sorted(users.items()) if len(mine) >= 2]
    total = sum(len(mine) for mine in held)
    out = []
    with click.progressbar(length=total, label="embedding preferences",
                           file=click.get_text_stream("stderr")) as bar:
        for user in held:
            items = embed_each(embedder, [pref for pref, _ in user]).astype(np.float32)
            for own, (_, question) in enumerate(user):
                q = center.apply(embed_as_query(embedder, question))
                if q is not None:
                    out.append((q, items, own))
                bar.update(1)
    return out


@click.command("center")
@click.argument("prompts_path", metavar="PROMPTS", type=click.Path(exists=True, dir_okay=False))
@click.option("--limit", type=click.IntRange(10), default=3000, show_default=True,
              help="Prompts embedded at most, taken evenly over the file.")
@click.option("--preferences", "preference_sets", multiple=True, callback=lambda _c, _p, v: [preference_set(x) for x in v],
              metavar="DIR[:START:END]",
              help="A PrefEval-format folder of users' preferences and questions to fit the learned map on "
                   "(repeat for more; :START:END takes only those items of each topic file). Without it: no map.")
@click.option("--rank", type=click.IntRange(1, 64), default=32, show_default=True, help="The map's rank.")
@click.option("--l2", type=click.FloatRange(0), default=0.01, show_default=True,
              help="The pull of the map toward none.")
@click.option("--steps", type=click.IntRange(1, 5000), default=200, show_default=True, help="Gradient steps.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False),
              help=f"Center YAML (default <workspace>/{DEFAULT_CENTER_OUT}); name it as standing.center_file.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.pass_obj
def center(state, prompts_path, limit, preference_sets, rank, l2, steps, out_path, as_json):
    """Compute the common direction of prompts, and a learned map (docs/standing.md, "The common direction of
    prompts", "A learned map of what prompts are about").

    PROMPTS holds ordinary user prompts: a LongMemEval file (its user turns;
    the shipped center is the mean of 3,000 of LongMemEval-S dev's), a LoCoMo
    file (its turns), a JSON list of strings, or a text file with one prompt a
    line. Each prompt is embedded alone as a query with the standing embedder
    (standing.embedder; bge-small after `memtier model setup --embedder`); the
    mean vector goes to its own YAML: name it as standing.center_file.

    With --preferences, the file also holds a map of the prompt's vector,
    fitted so that each question's own preference is the nearest of its
    user's (user u holds item u of every topic file, as `eval prefeval
    --variant multi` lays them out).
    """
    from ..layers.center import MARKER, fit, fit_map, nearest_share, parse
    from ..layers.gate import embedder_name
    from ..models.embedders import embed_as_query
    from .gate_cmd import config_and_embedder
    from ..store.artifacts import write_artifact

    cfg, embedder = config_and_embedder(state, "the center is a mean of embeddings")
    path = Path(prompts_path)
    prompts = spread(read_prompts(path), limit)
    with click.progressbar(prompts, label="embedding", file=click.get_text_stream("stderr")) as bar:
        vecs = [embed_as_query(embedder, t) for t in bar]
    name = embedder_name(embedder)
    c = fit(vecs, name, meta={"from": path.name})
    mapped = {}
    if preference_sets:
        groups = preference_groups(preference_sets, embedder, c)
        with click.progressbar(length=steps, label="fitting the map", file=click.get_text_stream("stderr")) as bar:
            c.map = fit_map(groups, rank=rank, l2=l2, steps=steps, progress=lambda _s: bar.update(1))
        c.map.meta["from"] = [f"{p.name}:{sl[0]}:{sl[1]}" if sl else p.name for p, sl in preference_sets]
        mapped = {"questions": len(groups), "rank": rank,
                  "nearest_before": round(nearest_share(groups, None), 4),
                  "nearest_after": round(nearest_share(groups, c.map), 4)}
    out = Path(out_path) if out_path else cfg.workspace / DEFAULT_CENTER_OUT
    src = cfg.source if cfg.source and cfg.source != "<defaults>" else ""
    write_artifact(out, MARKER, c.to_doc(), header="memtier prompt center (memtier train center); name it as "
                   "standing.center_file", kind="a prompt center file", config_source=src, refuse_config_name=True,
                   check=lambda data: parse(data, out))
    import numpy as np

    report = {"out": str(out), "embedder": name, "prompts": len(prompts),
              "norm": round(float(np.linalg.norm(c.vector)), 4), **({"map": mapped} if mapped else {})}
    if as_json:
        click.echo(json.dumps(report, sort_keys=True))
        return
    click.echo(f"prompt center ({name}, {len(prompts)} prompts, norm {report['norm']:.3f}) -> {out}")
    if mapped:
        click.echo(f"map (rank {rank}, {mapped['questions']} questions): own preference nearest "
                   f"{mapped['nearest_before']:.3f} -> {mapped['nearest_after']:.3f} on the questions it was fitted on")
