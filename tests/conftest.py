"""Every test runs in its own temporary workspace; nothing touches a real one."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from memtier_plugin.model_paths import default_models_dir

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "workspace-fixtures"
SHARED_DATA = Path(os.environ.get("MEMTIER_DATA", ROOT.parent / "shared" / "data"))
# The user's models folder (what `memtier model setup` fetched), resolved before HOME is isolated:
# tests keep seeing it, so the embed-marked tests run where the models were fetched.
MODELS_DIR = default_models_dir()


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("MEMTIER_") and name != "MEMTIER_DATA":
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MEMTIER_MODELS_DIR", str(MODELS_DIR))
    from memtier_plugin.memory import reset_services

    reset_services()
    yield
    reset_services()


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    monkeypatch.setenv("MEMTIER_WORKSPACE", str(ws))
    return ws


def run_cli(*args, env=None, input=None, check=True):
    """Run the real `memtier` command in a subprocess (python -m memtier_plugin)."""
    import subprocess

    full_env = dict(os.environ)
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "memtier_plugin", *args], capture_output=True, text=True,
                          env=full_env, input=input, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"memtier {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc
