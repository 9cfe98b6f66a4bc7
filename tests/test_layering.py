"""The package's rooms and their order: no import cycle, no import against the allowed order.

Each module belongs to a room (docs/ARCHITECTURE.md): a sub-package is its own
room, a root module is named in ``ROOT_ROOMS``. A module may import from its
own room and from rooms earlier in ``ORDER``; every import counts, those inside
functions too (a lazy import is still a dependency). The graph must have no
cycle at all, within a room included.
"""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

from conftest import ROOT

PKG = ROOT / "memtier_plugin"
ORDER = ["base", "store", "models", "recall", "layers", "consolidation", "scheduling", "intervention",
         "learning", "shared", "facade", "bridges", "evaluation", "bench", "cli", "shims"]
ROOT_ROOMS = {
    # the host contract and the base modules (used everywhere, depend on nothing above them)
    "hookspecs": "base", "events": "base", "config": "base", "safe_yaml": "base", "errors": "base",
    "vocabulary": "base", "tokenize": "base", "dates": "base",
    # the facade
    "memory": "facade", "tools": "facade", "intake": "facade", "plugin": "facade", "host": "facade",
    "rooms": "facade", "runs": "facade", "forgetting": "facade", "purging": "facade",
    "__main__": "cli",
    # deprecated paths the docs once showed users (LAYOUT.md §3.7): last in the order, so nothing imports them
    "ledger": "shims", "retrieval": "shims", "memory_hooks": "shims",
}
PACKAGE_ROOMS = {"redact": "base"}  # redact/ is a base package: nothing secret reaches disk, used by every room
# Imports against the order that the move has not yet removed: (importer, imported). Must end empty.
KNOWN: set[tuple[str, str]] = set()
KNOWN_CYCLES: set[frozenset[str]] = set()


def modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).with_suffix("").parts
        if rel[-1] == "__init__":
            rel = rel[:-1]
        if rel:
            out[".".join(rel)] = path
    return out


def room(mod: str) -> str:
    parts = mod.split(".")
    if len(parts) == 1 and parts[0] in ROOT_ROOMS:
        return ROOT_ROOMS[parts[0]]
    if len(parts) == 1 and (PKG / parts[0]).is_dir():
        return PACKAGE_ROOMS.get(parts[0], parts[0])
    if len(parts) > 1:
        return PACKAGE_ROOMS.get(parts[0], parts[0])
    raise AssertionError(f"memtier_plugin/{mod}.py belongs to no room: add it to ROOT_ROOMS or move it")


def imports(mod: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that ``mod`` imports (anywhere in the file)."""
    package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module == "memtier_plugin" or (node.module or "").startswith("memtier_plugin."):
                target = node.module[len("memtier_plugin"):].lstrip(".")
            else:
                continue
            names = [f"{target}.{a.name}" if target else a.name for a in node.names]
            hits = [n for n in names if n in known]
            found.update(hits or ([target] if target in known else []))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("memtier_plugin."):
                    name = alias.name[len("memtier_plugin."):]
                    while name and name not in known:
                        name = name.rpartition(".")[0]
                    if name:
                        found.add(name)
    found.discard(mod)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {mod: imports(mod, path, known) for mod, path in known.items()}


def test_every_module_has_a_room():
    for mod in modules():
        if mod:
            assert room(mod) in ORDER, mod


def test_no_import_against_the_order():
    bad = set()
    for mod, targets in graph().items():
        for t in targets:
            if ORDER.index(room(t)) > ORDER.index(room(mod)):
                bad.add((mod, t))
    assert bad <= KNOWN, f"imports against {' → '.join(ORDER)}: {sorted(bad - KNOWN)}"
    assert not KNOWN - bad, f"fixed, remove from KNOWN: {sorted(KNOWN - bad)}"


def cycles(g: dict[str, set[str]]) -> list[frozenset[str]]:
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle():
    found = set(cycles(graph()))
    assert found <= KNOWN_CYCLES, f"import cycles: {[sorted(c) for c in found - KNOWN_CYCLES]}"
    assert not KNOWN_CYCLES - found, "a known cycle is gone: remove it from KNOWN_CYCLES"


def test_the_checker_sees_a_cycle_and_an_upward_import():
    assert cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [frozenset({"a", "b"})]
    assert ORDER.index(room("cli.demo_cmd")) > ORDER.index(room("memory")) > ORDER.index(room("config"))


#: what an optional extra brings: a room that needs it is checked without importing it when it is missing
OPTIONAL_DEPENDENCIES = {"psycopg", "psycopg_pool", "mcp"}
ROOMS_WITH_INIT = [p.parent.name for p in sorted(PKG.glob("*/__init__.py"))
                   if p.parent.name not in {"cli", "evaluation", "redact", "data"}]


def test_room_inits_are_a_docstring_naming_their_modules_sections_and_entry_points():
    import importlib
    import re

    from memtier_plugin.config import Config

    sections = {f.name for f in fields(Config)}
    assert {"store", "recall", "layers", "scheduling", "intervention"} <= set(ROOMS_WITH_INIT)
    for name in ROOMS_WITH_INIT:
        init = PKG / name / "__init__.py"
        tree = ast.parse(init.read_text())
        doc = ast.get_docstring(tree)
        assert doc and len(tree.body) == 1, f"{name}/__init__.py holds a docstring and nothing else"
        for mod in sorted(p.stem for p in (PKG / name).glob("*.py") if p.stem != "__init__"):
            assert f":mod:`.{mod}`" in doc, f"{name}/__init__.py does not list its module {mod}"
        for section in re.findall(r"``([a-z_]+)\.\*``", doc):
            assert section in sections, f"{name}/__init__.py cites config section {section!r}, which does not exist"
        entries = re.findall(r":(?:func|class):`\.([a-z_]+)\.([A-Za-z_]+)`", doc.split("Entry points:")[-1])
        assert entries or name == "bench", f"{name}/__init__.py names no entry point"
        for mod, attr in entries:
            try:
                found = hasattr(importlib.import_module(f"memtier_plugin.{name}.{mod}"), attr)
            except ModuleNotFoundError as exc:  # a room of an optional extra (shared: psycopg) without it installed
                assert exc.name in OPTIONAL_DEPENDENCIES, exc
                tree = ast.parse((PKG / name / f"{mod}.py").read_text())
                found = attr in {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            assert found, f"{name}.{mod}.{attr}"


def test_the_glossary_is_what_the_code_uses():
    """vocabulary.py is the one definition: the presets the config applies, the hooks pluggy knows, the
    actions the policy and the rule decide between, the node kinds the Global layer writes."""
    from memtier_plugin import hookspecs, vocabulary
    from memtier_plugin.config import PRESETS
    from memtier_plugin.intervention.policy import ACTIONS
    from memtier_plugin.layers.global_layer import NODE_KINDS
    from memtier_plugin.recall.index import ROLES, TIER_CODE

    assert tuple(PRESETS) == vocabulary.PRESET_NAMES
    specs = [n for n, f in vars(hookspecs).items() if hasattr(f, "memtier_spec")]
    assert sorted(specs) == sorted(vocabulary.HOOK_NAMES)
    assert tuple(ACTIONS) == vocabulary.ACTIONS and NODE_KINDS == vocabulary.NODE_KINDS
    assert list(TIER_CODE) == list(vocabulary.TIERS) and ROLES[:4] == list(vocabulary.ROLES)
