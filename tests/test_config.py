from pathlib import Path

import pytest

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
    f.write_text("retrieval: {top_k: 3, depth: 30}\npacking: {token_budget: 100}\n")
    env = {"MEMTIER_RETRIEVAL__TOP_K": "5", "MEMTIER_PACKING__TOKEN_BUDGET": "200"}
    cfg = load_config(f, flags={"packing.token_budget": 250}, environ=env)
    assert cfg.retrieval.depth == 30  # file
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
    from memtier_plugin.retrieval import Retriever

    r = Retriever(cfg)
    assert r.embedder is None and "memtier model setup --embedder" in caplog.text
