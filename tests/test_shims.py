"""The import surface: the public names of memtier_plugin (lazy), and the deprecated module paths (LAYOUT.md
§3.7), each of which warns, is the new module, and goes in 0.3."""

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


def test_the_public_surface_is_lazy_and_complete():
    """Every name of __all__ resolves, and importing the package (or the plugin) loads none of them."""
    code = ("import sys, memtier_plugin\n"
            "alone = sorted(m for m in sys.modules if m.startswith('memtier_plugin.'))\n"
            "import memtier_plugin.plugin\n"
            "heavy = {'numpy', 'memtier_plugin.tools', 'memtier_plugin.host'}\n"
            "print(alone + sorted(heavy & set(sys.modules)))\n"
            "print(all(getattr(memtier_plugin, n) is not None for n in memtier_plugin.__all__))\n"
            "print(memtier_plugin.hookimpl.project_name)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         check=True).stdout.split("\n")
    assert out[0] == "[]" and out[1] == "True" and out[2] == "memtier"
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        memtier_plugin.nothing  # noqa: B018
