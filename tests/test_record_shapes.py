"""Record-shape golden files: every record kind memtier writes keeps its keys and their JSON types.

The bundled scenario is replayed by the real ``memtier demo`` into a fresh
workspace; every JSONL record written under ``memory/`` is grouped by its
``kind``, checked by its validator, and reduced to a shape (each key with the
JSON type of its value, recursively; ``v`` and ``kind`` by value). The shapes
must equal ``tests/golden/records/<kind>.json``. A change of format is then a
deliberate edit of a golden file, never a side effect of moving code.
Regenerate with ``MEMTIER_UPDATE_GOLDEN=1 pytest tests/test_record_shapes.py``.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

GOLDEN = ROOT / "tests" / "golden" / "records"
UPDATE = os.environ.get("MEMTIER_UPDATE_GOLDEN") == "1"  # read before the autouse fixture clears MEMTIER_*


def shape(value, key: str = ""):
    if key in ("v", "kind"):
        return value
    if isinstance(value, dict):
        return {k: shape(v, k) for k, v in sorted(value.items())}
    if isinstance(value, list):  # one shape for all elements
        return [functools.reduce(merge, (shape(v) for v in value))] if value else []
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", type(None): "null"}[type(value)]


def _alternatives(x) -> list:
    return x["any_of"] if isinstance(x, dict) and "any_of" in x else [x]


def merge(a, b):
    """One shape for every record of a kind: optional keys, element shapes and differing types unioned."""
    if isinstance(a, dict) and isinstance(b, dict) and "any_of" not in a and "any_of" not in b:
        return {k: merge(a[k], b[k]) if k in a and k in b else a.get(k, b.get(k)) for k in sorted({*a, *b})}
    if isinstance(a, list) and isinstance(b, list):
        return [functools.reduce(merge, a + b)] if a + b else []
    if a == b:
        return a
    alts = {json.dumps(x, sort_keys=True) for x in _alternatives(a) + _alternatives(b)}
    return {"any_of": [json.loads(x) for x in sorted(alts)]}


def validator(rel: str):
    from memtier_plugin.layers.global_layer import node_problem
    from memtier_plugin.store.records import problem
    from memtier_plugin.store.semantic import fact_problem
    from memtier_plugin.store.traces import trace_problem
    from memtier_plugin.layers.workspace_layer import skill_problem

    top = rel.split("/", 1)[0]
    return {"episodic": problem, "semantic": fact_problem, "traces": trace_problem, "global": node_problem,
            "procedural": skill_problem, "state": skill_problem}.get(top)


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, dict]:
    ws = tmp_path_factory.mktemp("golden-ws")
    # no models (an empty models folder): the shapes must not depend on which models a machine fetched
    run_cli("demo", "--quiet", "--into", str(ws), env={"MEMTIER_WORKSPACE": str(ws),
                                                         "MEMTIER_MODELS_DIR": str(ws / "no-models")})
    shapes: dict[str, dict] = {}
    memory = ws / "memory"
    for path in sorted(memory.rglob("*.jsonl")):
        rel = path.relative_to(memory).as_posix()
        if rel.startswith("."):
            continue  # derived (.index) or process state (.daemon, .sidecar)
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            kind = rec.get("kind", "entry")
            check = validator(rel)
            if check is not None:
                assert check(rec) is None, (rel, kind, check(rec))
            s = shape(rec)
            shapes[kind] = merge(shapes[kind], s) if kind in shapes else s
    return shapes


def test_every_record_kind_has_a_golden_shape(written):
    if UPDATE:
        for old in GOLDEN.glob("*.json"):
            old.unlink()
        for kind, s in written.items():
            (GOLDEN / f"{kind}.json").write_text(json.dumps(s, indent=1, sort_keys=True) + "\n")
    golden = {p.stem: json.loads(p.read_text()) for p in GOLDEN.glob("*.json")}
    assert sorted(written) == sorted(golden), "record kinds written by the demo changed"
    for kind, s in written.items():
        assert s == golden[kind], f"the shape of {kind!r} records changed (tests/golden/records/{kind}.json)"


def test_the_demo_writes_every_tier(written):
    # the golden set covers the tiers and layers a user opens in an editor
    for kind in ("entry", "cw_update", "fact", "trace", "run_end", "knowledge", "skill", "state"):
        assert kind in written, kind
