"""`memtier train requests`: fit the request model (layers/asking.py; docs/standing.md "Asked in people's own
words") from labelled prompts, and optionally a PrefEval folder's questions and a LoCoMo file's; a subcommand of
`memtier train` (:mod:`.train_cmd` adds it)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import ConfigError, EvalDataError
from .center_cmd import spread
from .gate_cmd import config_and_embedder, fit_embedded, read_labels, write_model

DEFAULT_REQUESTS_OUT = "memtier-request-model.yaml"
LOCOMO_TURNS, LOCOMO_QUESTIONS = 1500, 600  # taken evenly: enough of chit-chat and of questions about someone


def data_prompts(prefeval: str | None, locomo: str | None) -> tuple[list[str], list[str]]:
    """(prompts that ask for a choice, prompts that do not) from the data folders: a PrefEval folder's questions
    (every one asks for a recommendation), a LoCoMo file's questions (each asks a fact about someone) and the
    turns the request rules do not read as asking (friends' chit-chat; the ones the rules read as asking are
    left out, neither label is sure)."""
    from ..evaluation import locomo as L, prefeval as P
    from ..layers.requests import asks_for_choice

    asking, not_asking = [], []
    try:
        if prefeval:
            root = P.find_root(prefeval)
            asking = list(dict.fromkeys(it.question for items in P.load_items(root, "explicit") for it in items))
        if locomo:
            convs = L.load(locomo)
            turns = [t.text for c in convs for t in c.turns if t.text.strip() and not asks_for_choice(t.text)]
            questions = [q.question for c in convs for q in c.qa]
            not_asking = spread(list(dict.fromkeys(turns)), LOCOMO_TURNS) + \
                spread(list(dict.fromkeys(questions)), LOCOMO_QUESTIONS)
    except EvalDataError as exc:
        raise ConfigError(str(exc)) from None
    return asking, not_asking


@click.command("requests")
@click.argument("labels_path", metavar="LABELS", type=click.Path(exists=True, dir_okay=False))
@click.option("--prefeval", "prefeval", type=click.Path(exists=True),
              help="A PrefEval folder: its questions are prompts that ask for a choice.")
@click.option("--locomo", "locomo", type=click.Path(exists=True, dir_okay=False),
              help=f"A LoCoMo file: {LOCOMO_QUESTIONS} of its questions and {LOCOMO_TURNS} of its turns the rules "
                   "do not read as asking are prompts that do not.")
@click.option("--exclude-split", "exclude", multiple=True, default=("heldout",), show_default=True,
              help="Leave out the labelled rows of this split (repeatable): a held-out split measures the model.")
@click.option("--l2", type=click.FloatRange(0), default=30.0, show_default=True,
              help="L2 penalty on the (standardised) weights.")
@click.option("--threshold", type=click.FloatRange(0, 1), default=0.7, show_default=True,
              help="The probability at or above which a prompt asks for a choice.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False),
              help=f"Model YAML (default <workspace>/{DEFAULT_REQUESTS_OUT}); name it as "
                   "standing.request_model_file.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.pass_obj
def requests(state, labels_path, prefeval, locomo, exclude, l2, threshold, out_path, as_json):
    """Fit the request model (docs/standing.md, "Asked in people's own words").

    LABELS is a JSON-lines file of {text, label, split}: label true for a
    prompt that asks for a recommendation, options or an errand done for the
    user (tests/data/request_labels.jsonl is the one the shipped model was
    fitted on, with --prefeval ../shared/data/prefeval_dev and --locomo
    ../shared/data/locomo_dev.json). Each prompt is embedded as a query with
    the standing embedder, and a logistic model over the vector says whether
    it asks; the standing scorer reads it for the prompts its request rules do
    not read as asking. The model goes to its own YAML: name it as
    standing.request_model_file.
    """
    from ..layers.asking import MARKER
    from ..layers.gate import embedder_name
    from ..models.embedders import embed_as_query

    cfg, embedder = config_and_embedder(state, "the request model reads an embedding")
    texts, labels, _splits = read_labels(Path(labels_path), exclude=tuple(exclude))
    asking, not_asking = data_prompts(prefeval, locomo)
    texts, labels = texts + asking + not_asking, labels + [True] * len(asking) + [False] * len(not_asking)
    # a prompt is embedded as a query, as the scorer does
    model, train = fit_embedded(texts, labels, lambda t: embed_as_query(embedder, t),
                                embedder_name(embedder), l2=l2,
                                threshold=threshold, meta={"prompts": len(texts), "asking": int(sum(labels)),
                                                           "l2": l2, "excluded_splits": list(exclude)})
    name = model.embedder
    out = write_model(cfg, out_path, DEFAULT_REQUESTS_OUT, MARKER, model, "memtier request model (memtier train "
                      "requests); name it as standing.request_model_file", "a request model file")
    report = {"out": str(out), "embedder": name, "prompts": len(texts), "asking": int(sum(labels)),
              "threshold": threshold, "train": train}
    if as_json:
        click.echo(json.dumps(report, sort_keys=True))
        return
    click.echo(f"request model ({name}, {len(texts)} prompts, {sum(labels)} asking) -> {out}")
    click.echo(f"  on its own training prompts at {threshold:.2f}: precision {train['precision']:.3f}, "
               f"recall {train['recall']:.3f}")
