import json
import os
from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES, ROOT, run_cli
from memtier_plugin.config import Config, as_dict, load_config
from memtier_plugin.errors import ConfigError

SHIPPED = ROOT / "config" / "memtier.yaml"


def test_shipped_yaml_holds_every_default():
    assert as_dict(load_config(SHIPPED, use_env=False)) == as_dict(Config())


def test_shipped_yaml_comments_every_key():
    for lineno, line in enumerate(SHIPPED.read_text().splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and ":" in stripped and not stripped.endswith(":"):
            assert "#" in line, f"config/memtier.yaml:{lineno} has no comment: {line}"


def test_paper_numbers():
    cfg = Config()
    assert cfg.weights.vector() == [0.0, 0.35, 0.25, 0.25, 0.15]
    assert (cfg.bm25.k1, cfg.bm25.b, cfg.retrieval.decay_lambda, cfg.retrieval.bypass_threshold) == (1.5, 0.75, 0.05, 2.0)
    assert cfg.retrieval.tier_multipliers == {"episodic": 1.0, "semantic": 1.2, "procedural": 1.4}
    assert (cfg.retrieval.top_k, cfg.packing.token_budget) == (4, 300)


def test_precedence_flag_over_env_over_file(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("retrieval: {top_k: 3, stage1_sessions: 30}\npacking: {token_budget: 100}\n")
    env = {"MEMTIER_RETRIEVAL__TOP_K": "5", "MEMTIER_PACKING__TOKEN_BUDGET": "200"}
    cfg = load_config(f, flags={"packing.token_budget": 250}, environ=env)
    assert cfg.retrieval.stage1_sessions == 30  # file
    assert cfg.retrieval.top_k == 5  # env beats file
    assert cfg.packing.token_budget == 250  # flag beats env


def test_preset_applies_where_named(tmp_path):
    assert load_config(environ={"MEMTIER_PRESET": "recommended"}).retrieval.top_k == 2
    f = tmp_path / "c.yaml"
    f.write_text("preset: recommended\nretrieval: {top_k: 3}\n")
    cfg = load_config(f, environ={})
    assert (cfg.retrieval.top_k, cfg.packing.token_budget) == (3, 600)


def test_workspace_default_and_override(tmp_path):
    assert load_config(environ={}).workspace == Path("~/.openclaw/workspace").expanduser()
    assert load_config(environ={"MEMTIER_WORKSPACE": str(tmp_path)}).memory_root == tmp_path / "memory"


@pytest.mark.parametrize("name, needle", [
    ("misspelled-key.yaml", "top_kk"),
    ("wrong-type.yaml", "retrieval.top_k"),
    ("out-of-range.yaml", "retrieval.decay_lambda"),
    ("not-yaml.yaml", "not valid YAML"),
])
def test_bad_config_names_file_and_key(name, needle):
    path = FIXTURES / "configs" / name
    with pytest.raises(ConfigError) as exc:
        load_config(path, environ={})
    msg = str(exc.value)
    assert str(path) in msg and needle in msg and "\n" not in msg


def test_cli_stops_with_one_line(tmp_path):
    proc = run_cli("--config", str(FIXTURES / "configs" / "misspelled-key.yaml"), "config", "validate", check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "top_kk" in lines[0] and "Traceback" not in proc.stderr


def test_env_override_bad_value_names_key():
    with pytest.raises(ConfigError, match="retrieval.top_k"):
        load_config(environ={"MEMTIER_RETRIEVAL__TOP_K": "many"})


def test_hybrid_preset_and_missing_model_degrades_to_lexical(workspace, monkeypatch, caplog, tmp_path):
    monkeypatch.setenv("MEMTIER_MODELS_DIR", str(tmp_path / "no-models"))
    cfg = load_config(environ={"MEMTIER_PRESET": "hybrid", "MEMTIER_WORKSPACE": str(workspace)})
    assert (cfg.weights.sem, cfg.retrieval.scoping, cfg.embeddings.backend) == (1.5, "soft", "bge-small")
    from memtier_plugin.recall.retriever import Retriever

    r = Retriever(cfg)
    assert r.embedder is None and "memtier model setup --embedder" in caplog.text


# ---- hostile configs (issue 11, defect 12) ----------------------------------------------------------

BAD_FIXTURES = [  # (fixture, what the one line must name)
    ("preset-list.yaml", "preset"),
    ("huge-number.yaml", "weights.bm25"),
    ("deep-nesting.yaml", "retrieval.include_roles"),
    ("not-utf8.yaml", "paths.workspace"),
    ("nan-weight.yaml", "weights.decay"),
    ("nan-decay.yaml", "retrieval.decay_lambda"),
    ("inf-tier.yaml", "retrieval.tier_multipliers.semantic"),
    ("unknown-tier.yaml", "retrieval.tier_multipliers.semantik"),
    ("alias-bomb.yaml", "agents.global_read"),
    ("renamed-key.yaml", "packing.max_entry_chars was renamed to packing.max_chars"),
    ("removed-key.yaml", "retrieval.depth was removed"),
]


def _limited_memtier(*args, env=None):
    """`memtier ARGS` in a subprocess capped at 1.5 GB of address space (an unbounded expansion dies, not the host)."""
    import resource
    import subprocess
    import sys

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))

    return subprocess.run([sys.executable, "-m", "memtier_plugin", *args], capture_output=True, text=True,
                          timeout=120, preexec_fn=cap, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("name, needle", BAD_FIXTURES)
def test_hostile_config_is_one_line_naming_file_and_key(name, needle):
    path = FIXTURES / "configs" / name
    with pytest.raises(ConfigError) as exc:
        load_config(path, environ={})
    msg = str(exc.value)
    assert str(path) in msg and needle in msg and "\n" not in msg and len(msg) < 300


@pytest.mark.parametrize("command", [("config", "validate"), ("config", "show", "--json")])
@pytest.mark.parametrize("name, needle", BAD_FIXTURES)
def test_cli_refuses_hostile_config_with_exit_2(name, needle, command):
    proc = _limited_memtier("--config", str(FIXTURES / "configs" / name), *command)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-500:]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("var, raw, needle", [
    ("MEMTIER_WEIGHTS__BM25", ".nan", "weights.bm25"),
    ("MEMTIER_RETRIEVAL__DECAY_LAMBDA", "-.inf", "retrieval.decay_lambda"),
    ("MEMTIER_RETRIEVAL__TIER_MULTIPLIERS__EPISODIC", ".nan", "retrieval.tier_multipliers.episodic"),
    ("MEMTIER_RETRIEVAL__TOP_K", "9" * 400, "retrieval.top_k"),
    ("MEMTIER_AGENTS__GLOBAL_READ", "[" * 3000 + "]" * 3000, "MEMTIER_AGENTS__GLOBAL_READ"),
    ("MEMTIER_AGENTS__GLOBAL_READ", "&a [x, *a]", "alias refers to itself"),
    ("MEMTIER_PACKING__MAX_ENTRY_CHARS", "100", "packing.max_entry_chars was renamed to packing.max_chars"),
    ("MEMTIER_PATHS__MEMORY_DIR", "mem\x1b[2Jory", "paths.memory_dir"),
])
def test_environment_overrides_get_the_same_validation(var, raw, needle):
    proc = _limited_memtier("config", "show", "--json", env={var: raw})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr[-500:]


@pytest.mark.parametrize("key, value, needle", [
    ("agents.global_read", (FIXTURES / "configs" / "alias-bomb.yaml").read_text().split("global_read: ", 1)[1],
     "expands to more than"),
    ("weights.decay", ".nan", "weights.decay"),
    ("retrieval.depth", "1", "retrieval.depth was removed"),
])
def test_eval_set_flags_get_the_same_validation(key, value, needle):
    tiny = FIXTURES / "eval" / "longmemeval_tiny.json"
    proc = _limited_memtier("eval", "longmemeval", str(tiny), "--no-embed", "--set", f"{key}={value}")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr[-500:]


def test_tier_multipliers_merge_and_are_checked(tmp_path):
    cfg = load_config(environ={"MEMTIER_RETRIEVAL__TIER_MULTIPLIERS__SEMANTIC": "1.5"})
    assert cfg.retrieval.tier_multipliers == {"episodic": 1.0, "semantic": 1.5, "procedural": 1.4}
    f = tmp_path / "c.yaml"
    for body, needle in [("{semantic: 11}", "between 0 and 10"), ("{semantic: true}", "finite number"),
                         ("[1, 2]", "expected a mapping")]:
        f.write_text(f"retrieval:\n  tier_multipliers: {body}\n")
        with pytest.raises(ConfigError, match="retrieval.tier_multipliers"):
            load_config(f, environ={})
        with pytest.raises(ConfigError, match=needle):
            load_config(f, environ={})


def test_renamed_key_works_under_its_new_name(tmp_path):
    """packing.max_chars caps the whole delivered block (all entries together), through `memtier search`."""
    from click.testing import CliRunner

    from memtier_plugin.cli import cli
    from memtier_plugin.store.episodic import Ledger

    ws = tmp_path / "ws"
    ledger = Ledger(ws / "memory", fsync=False)
    for i in range(3):
        ledger.add(agent_id="main", session_id="s", project="", content=f"note {i} about the harbour " + "x" * 60)
    runner = CliRunner()
    full = json.loads(runner.invoke(cli, ["-w", str(ws), "search", "harbour", "--json"]).stdout)
    lines = full["block"].split("\n")[2:-1]  # one line per delivered entry
    assert len(full["hits"]) == len(lines) == 3
    cap = len(lines[0]) + len(lines[1]) + 1  # two entries fit together, three do not
    capped = json.loads(runner.invoke(cli, ["-w", str(ws), "search", "harbour", "--json"],
                                      env={"MEMTIER_PACKING__MAX_CHARS": str(cap)}).stdout)
    assert len(capped["hits"]) == 2
    assert any(f"packing.max_chars {cap}" in why for why in capped["left_out"])


# Seeded fuzzing: mutations of the shipped config must load as a sane Config or fail with one ConfigError line.

SENTINEL = "MUTANT_VALUE_SENTINEL"


def _leaf_paths(node, prefix=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaf_paths(v, prefix + (k,))
    yield prefix


def _bomb(rng) -> str:
    levels = rng.randint(3, 9)
    items = ["&b0 [" + ", ".join(["lol"] * 9) + "]"]
    items += [f"&b{i} [" + ", ".join([f"*b{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "[" + ", ".join(items) + "]"


def _raw_value(rng) -> str:
    """A hostile YAML value as text."""
    kind = rng.randrange(12)
    if kind == 0:
        return rng.choice([".nan", ".NaN", ".inf", "-.inf", "1e999", "-1e999"])
    if kind == 1:
        return "9" * rng.choice([20, 400, 4000, 5000, 20000])
    if kind == 2:
        d = rng.choice([13, 100, 999, 3000])
        return rng.choice(["[" * d + "]" * d, "{a: " * d + "1" + "}" * d])
    if kind == 3:
        return _bomb(rng)
    if kind == 4:
        return rng.choice(["&s [x, *s]", "&m {a: *m}", "*undefined", "[&x [1, 2], *x, *x]"])
    if kind == 5:
        chars = [chr(rng.choice([0x1b, 0x07, 0x9b, 0x202e, 0x2028, 0xe9, 0x1f600, 0x4e2d, 0xfffd, 0x41]))
                 for _ in range(rng.randint(1, 12))]
        return '"' + "".join(chars).encode("unicode_escape").decode().replace('"', '\\"') + '"'
    if kind == 6:
        return rng.choice(['"\\0"', '"\\ud800"', '"a\\x00b"', '"\\e[2J"'])
    if kind == 7:
        return rng.choice(["!!binary aGVsbG8=", "!!timestamp 2024-13-45", "2024-02-30", "!!set {a, b}",
                           "!!python/object/apply:os.system [true]", "!!float abc", "!!int 0xZZ", "!!omap [a: 1]"])
    if kind == 8:
        return rng.choice(["[]", "{}", "[1, [2, [3]]]", "{a: {b: {c: 1}}}", "null", "~", "''", "true", "-0", "0x10"])
    if kind == 9:
        return "x" * rng.choice([10, 5000])
    if kind == 10:
        return str(rng.uniform(-1e6, 1e6))
    return rng.choice(["user", "hard", "paper", "lucene", "0", "1", "0.5", "1000", "100000", "-1"])


def _mutant(rng, base: dict) -> bytes:
    import copy as _copy

    data = _copy.deepcopy(base)
    paths = [p for p in _leaf_paths(data) if p]
    style = rng.randrange(8)
    if style <= 3:  # one value (or a whole section) replaced by a hostile value
        path = rng.choice(paths)
        node = data
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = SENTINEL
        text = yaml.safe_dump(data, sort_keys=False).replace(SENTINEL, _raw_value(rng))
    elif style == 4:  # a key renamed, added or retired
        section = rng.choice([k for k, v in data.items() if isinstance(v, dict)])
        key = rng.choice(["max_entry_chars", "depth", "top_kk", "ünïcode", "1", "null", "__class__", "tier"])
        text = yaml.safe_dump(data, sort_keys=False) + f"{section}2: 1\n" if rng.random() < 0.2 else \
            yaml.safe_dump({**data, section: {**data[section], key: 1}}, sort_keys=False)
    elif style == 5:  # preset
        text = yaml.safe_dump(data, sort_keys=False).replace("preset: paper", "preset: " + _raw_value(rng))
    else:
        text = yaml.safe_dump(data, sort_keys=False)
    raw = text.encode("utf-8")
    if style == 6:  # odd bytes somewhere
        at = rng.randrange(len(raw))
        raw = raw[:at] + bytes(rng.choice([0xff, 0xfe, 0xe9, 0xc3, 0x80, 0x00, 0x1b, 0x0d])
                               for _ in range(rng.randint(1, 3))) + raw[at:]
    elif style == 7:  # cut short, or a line duplicated
        lines = raw.split(b"\n")
        raw = raw[:rng.randrange(len(raw))] if rng.random() < 0.5 else \
            b"\n".join(lines + [lines[rng.randrange(len(lines))]])
    return raw


def _sane(cfg) -> None:
    """Invariants of an accepted config: finite numbers, clean text, a bounded number of values."""
    import math

    todo, seen = [as_dict(cfg)], 0
    while todo:
        node = todo.pop()
        seen += 1
        assert seen <= 10_000, "accepted config expands without bound"
        if isinstance(node, dict):
            todo.extend(node.keys())
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)
        elif isinstance(node, float):
            assert math.isfinite(node), "accepted a non-finite number"
        elif isinstance(node, str):
            assert not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f or 0xd800 <= ord(c) <= 0xdfff for c in node), \
                f"accepted control characters: {node[:40]!r}"


def test_fuzzed_configs_load_or_fail_with_one_config_error_line(tmp_path):
    import random

    rng = random.Random(1111)
    base = yaml.safe_load(SHIPPED.read_text())
    failures, accepted, rejected = [], 0, 0
    for i in range(400):
        raw = _mutant(rng, base)
        path = tmp_path / f"m{i}.yaml"
        path.write_bytes(raw)
        try:
            cfg = load_config(path, environ={})
            _sane(cfg)
            accepted += 1
        except ConfigError as exc:
            msg = str(exc)
            if "\n" in msg or str(path) not in msg or len(msg) > 400:
                failures.append((i, "bad message", msg[:200]))
            rejected += 1
        except (Exception, RecursionError) as exc:  # noqa: BLE001 - the defect this test looks for
            failures.append((i, type(exc).__name__, str(exc)[:160], raw[:120]))
    assert not failures, f"{len(failures)} of 400 mutants: {failures[:5]}"
    assert accepted >= 5 and rejected >= 300  # the mutations reach both outcomes


def test_fuzzed_environment_overrides_load_or_fail_with_one_config_error_line():
    import random

    rng = random.Random(2222)
    base = yaml.safe_load(SHIPPED.read_text())
    paths = [p for p in _leaf_paths(base) if p]
    failures = []
    for i in range(300):
        path = rng.choice(paths)
        var = "MEMTIER_" + "__".join(str(k).upper() for k in path)
        raw = _raw_value(rng)
        try:
            _sane(load_config(environ={var: raw}))
        except ConfigError as exc:
            if "\n" in str(exc) or not str(exc).startswith("environment"):
                failures.append((var, raw[:40], str(exc)[:200]))
        except (Exception, RecursionError) as exc:  # noqa: BLE001
            failures.append((var, raw[:40], type(exc).__name__, str(exc)[:160]))
    assert not failures, f"{len(failures)} of 300: {failures[:5]}"
