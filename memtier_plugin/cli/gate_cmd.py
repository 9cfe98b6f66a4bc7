"""`memtier train gate`: fit the learned standing gate (layers/gate.py, docs/standing.md "The learned gate") from
labelled sentences; a subcommand of `memtier train` (:mod:`.train_cmd` adds it to its group)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import ConfigError

DEFAULT_GATE_OUT = "memtier-standing-gate.yaml"
MAX_ROWS = 100_000


def read_labels(path: Path, *, exclude: tuple[str, ...] = ()) -> tuple[list[str], list[bool], list[str]]:
    """(texts, labels, splits) of a labelled JSON-lines file ({text, label, split?}), rows of an ``exclude``d split
    left out; ConfigError naming the line of a bad row."""
    texts, labels, splits = [], [], []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the labelled sentences: {exc}") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{n}: not a JSON object ({exc.msg})") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("text"), str) or not rec["text"].strip():
            raise ConfigError(f"{path}:{n}: text: expected a sentence")
        if not isinstance(rec.get("label"), bool):
            raise ConfigError(f"{path}:{n}: label: expected true or false")
        split = str(rec.get("split") or "")
        if split in exclude:
            continue
        texts.append(rec["text"])
        labels.append(rec["label"])
        splits.append(split)
        if len(texts) > MAX_ROWS:
            raise ConfigError(f"{path}: more than {MAX_ROWS:,} labelled sentences")
    if not any(labels) or all(labels):
        raise ConfigError(f"{path}: needs sentences labelled both true and false")
    return texts, labels, splits


def _scores(probs, labels, threshold: float) -> dict[str, float]:
    tp = sum(1 for p, y in zip(probs, labels) if p >= threshold and y)
    fp = sum(1 for p, y in zip(probs, labels) if p >= threshold and not y)
    fn = sum(1 for p, y in zip(probs, labels) if p < threshold and y)
    return {"precision": round(tp / max(1, tp + fp), 4), "recall": round(tp / max(1, tp + fn), 4)}


def config_and_embedder(state, needs: str):
    """(the config the flags load, the standing embedder); ConfigError when there is none (``needs``: why one is
    needed, "the gate reads an embedding")."""
    from ..config import load_config
    from ..recall.backends import standing_embedder

    flags = {k: v for k, v in state.flags().items() if v is not None}
    cfg = load_config(getattr(state, "config_path", None), flags=flags)
    if cfg.standing.embedder == "none":
        raise ConfigError(f"standing.embedder: none; {needs} (set it to auto or bge-small)")
    embedder, note = standing_embedder(cfg)
    if embedder is None:
        raise ConfigError(note or "standing.embedder: no embedder available (memtier model setup --embedder)")
    return cfg, embedder


def fit_embedded(texts: list[str], labels: list[bool], embed_one, embedder: str, *, l2: float, threshold: float,
                 meta: dict):
    """(a logistic model over each text's vector (``embed_one``), its precision and recall on its own texts at
    ``threshold``), with a progress bar on stderr: the gate's and the request model's fit."""
    import numpy as np

    from ..layers.gate import Gate, fit

    with click.progressbar(length=len(texts), label="embedding", file=click.get_text_stream("stderr")) as bar:
        vecs = []
        for t in texts:
            vecs.append(np.asarray(embed_one(t), dtype=np.float64))
            bar.update(1)
    X = np.vstack(vecs)
    weights, bias = fit(X, labels, l2=l2)
    model = Gate(weights, bias, threshold, embedder, meta=dict(meta))
    model.meta["train"] = _scores(model.probabilities(X), labels, threshold)
    return model, model.meta["train"]


def write_model(cfg, out_path, default_name: str, marker: str, model, header: str, kind: str) -> Path:
    """Write ``model`` under ``marker`` to ``out_path`` (default: the workspace's ``default_name``); never over the
    config file."""
    from ..store.artifacts import write_artifact

    out = Path(out_path) if out_path else cfg.workspace / default_name
    src = cfg.source if cfg.source and cfg.source != "<defaults>" else ""
    write_artifact(out, marker, model.to_doc(marker), header=header, kind=kind, config_source=src,
                   refuse_config_name=True)
    return out


@click.command("gate")
@click.argument("labels_path", metavar="LABELS", type=click.Path(exists=True, dir_okay=False))
@click.option("--exclude-split", "exclude", multiple=True, default=("colloquial_heldout",), show_default=True,
              help="Leave out the rows of this split (repeatable): a held-out split measures the gate, never fits it.")
@click.option("--l2", type=click.FloatRange(0), default=30.0, show_default=True,
              help="L2 penalty on the (standardised) weights.")
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.8, show_default=True,
              help="The probability at or above which a sentence is taken.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False),
              help=f"Gate YAML (default <workspace>/{DEFAULT_GATE_OUT}); name it as standing.gate_file.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.pass_obj
def gate(state, labels_path, exclude, l2, threshold, out_path, as_json):
    """Fit the learned standing gate (docs/standing.md, "The learned gate").

    LABELS is a JSON-lines file of {text, label, split} (tests/data/
    standing_labels.jsonl is the one the shipped gate was fitted on). Each
    sentence is embedded with the standing embedder (standing.embedder; bge-small
    after `memtier model setup --embedder`), and a logistic model over the vector
    says whether it states something lasting. The file goes to its own YAML:
    name it as standing.gate_file.
    """
    from ..layers.gate import MARKER, embed_each, embedder_name

    cfg, embedder = config_and_embedder(state, "the gate reads an embedding")
    texts, labels, _splits = read_labels(Path(labels_path), exclude=tuple(exclude))
    g, train = fit_embedded(texts, labels, lambda t: embed_each(embedder, [t])[0], embedder_name(embedder),
                            l2=l2, threshold=threshold, meta={"sentences": len(texts), "positives": int(sum(labels)),
                                                              "l2": l2, "excluded_splits": list(exclude)})
    name = g.embedder
    out = write_model(cfg, out_path, DEFAULT_GATE_OUT, MARKER, g, "memtier standing gate (memtier train gate); name it "
                      "as standing.gate_file", "a standing gate file")
    report = {"out": str(out), "embedder": name, "sentences": len(texts), "positives": int(sum(labels)),
              "threshold": threshold, "train": train}
    if as_json:
        click.echo(json.dumps(report, sort_keys=True))
        return
    click.echo(f"standing gate ({name}, {len(texts)} sentences, {sum(labels)} standing) -> {out}")
    click.echo(f"  on its own training sentences at {threshold:.2f}: precision {train['precision']:.3f}, "
               f"recall {train['recall']:.3f}")
