"""The deprecated module paths (LAYOUT.md §3.7): each warns, is the new module, and goes in 0.3."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import memtier_plugin

SHIMS = {
    "memtier_plugin.ledger": "memtier_plugin.store.episodic",
    "memtier_plugin.retrieval": "memtier_plugin.recall.retriever",
    "memtier_plugin.memory_hooks": "memtier_plugin.scheduling.hooks",
}


def test_shims_are_removed_in_0_3():
    major, minor = (int(x) for x in memtier_plugin.__version__.split(".")[:2])
    assert (major, minor) < (0, 3), f"memtier {memtier_plugin.__version__}: delete the shims {sorted(SHIMS)}"


@pytest.mark.parametrize("old,new", sorted(SHIMS.items()))
def test_old_path_warns_and_is_the_new_module(old, new):
    code = (f"import warnings\nwarnings.simplefilter('error')\n"
            f"try:\n    import {old}\nexcept DeprecationWarning as w:\n    print('warned', w)\n"
            f"warnings.simplefilter('ignore')\nimport importlib, sys\n"
            f"m = importlib.import_module('{old}')\nprint(m is importlib.import_module('{new}'), m.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert f"warned memtier_plugin.{old.split('.')[-1]} moved to {new}" in out
    assert out.strip().endswith(f"True {new}")


def test_every_root_module_that_only_forwards_is_listed():
    for path in sorted(Path(memtier_plugin.__file__).parent.glob("*.py")):
        if "DeprecationWarning" in path.read_text():
            assert f"memtier_plugin.{path.stem}" in SHIMS, path.name


def test_the_new_modules_import_without_the_shims():
    for new in SHIMS.values():
        importlib.import_module(new)
    code = "import sys, memtier_plugin.memory, memtier_plugin.plugin; print(sorted(m for m in sys.modules if m in %r))" \
        % sorted(SHIMS)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == "[]"
