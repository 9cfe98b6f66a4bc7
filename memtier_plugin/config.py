"""The one validated config model.

Precedence, implemented once in :func:`load_config`:

    command-line flag  >  environment (MEMTIER_*)  >  YAML file  >  built-in default

* The YAML file is ``--config PATH``, else ``$MEMTIER_CONFIG``, else
  ``<workspace>/memtier.yaml`` when it exists, else nothing (defaults only).
* Environment overrides are ``MEMTIER_<SECTION>__<KEY>`` (double underscore),
  e.g. ``MEMTIER_RETRIEVAL__TOP_K=2``; plus the shortcuts ``MEMTIER_WORKSPACE``
  and ``MEMTIER_PRESET``. Values are parsed as YAML scalars.
* Flags arrive as a dict of dotted keys (``{"retrieval.top_k": 2}``).

A preset (``paper`` or ``recommended``) is applied where it is named: above
the layers below it, below the other keys of its own layer. Unknown keys, wrong types and out-of-range values stop
startup with one :class:`ConfigError` line naming the file, the key and what
was expected.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, get_type_hints

import yaml

from .errors import ConfigError

DEFAULT_WORKSPACE = "~/.openclaw/workspace"
ENV_PREFIX = "MEMTIER_"

SIGNALS = ("sem", "bm25", "decay", "cw", "tier")


def _rng(lo=None, hi=None):
    return {"range": (lo, hi)}


@dataclass
class WeightsConfig:
    """Fusion weights w for [phi_sem, phi_bm25, phi_decay, phi_cw] and w_tier (MemTier eq. 1)."""

    sem: float = field(default=0.0, metadata=_rng(0, 10))
    bm25: float = field(default=0.35, metadata=_rng(0, 10))
    decay: float = field(default=0.25, metadata=_rng(0, 10))
    cw: float = field(default=0.25, metadata=_rng(0, 10))
    tier: float = field(default=0.15, metadata=_rng(0, 10))
    learned_file: str = ""

    def vector(self) -> list[float]:
        return [self.sem, self.bm25, self.decay, self.cw, self.tier]


@dataclass
class BM25Config:
    k1: float = field(default=1.5, metadata=_rng(0, 10))
    b: float = field(default=0.75, metadata=_rng(0, 1))
    idf: str = field(default="lucene", metadata={"choices": ("lucene", "okapi")})


@dataclass
class RetrievalConfig:
    top_k: int = field(default=4, metadata=_rng(1, 1000))
    two_stage: bool = True
    stage1_sessions: int = field(default=5, metadata=_rng(1, 1000))
    decay_lambda: float = field(default=0.05, metadata=_rng(0, 10))
    bypass_threshold: float = field(default=2.0, metadata=_rng(0, None))
    tier_multipliers: dict = field(
        default_factory=lambda: {"episodic": 1.0, "semantic": 1.2, "procedural": 1.4}
    )
    depth: int = field(default=50, metadata=_rng(1, 100000))
    scoping: str = field(default="hard", metadata={"choices": ("hard", "soft")})
    reply_context: bool = True
    include_roles: list = field(default_factory=lambda: ["user", "assistant", "tool"])


@dataclass
class PackingConfig:
    token_budget: int = field(default=300, metadata=_rng(1, 1_000_000))
    max_entry_chars: int = field(default=6000, metadata=_rng(1, 1_000_000))


@dataclass
class PathsConfig:
    workspace: str = DEFAULT_WORKSPACE
    memory_dir: str = "memory"


@dataclass
class AgentsConfig:
    global_read: list = field(default_factory=list)


@dataclass
class ConsolidationConfig:
    enabled: bool = True
    extractor: str = field(default="heuristic", metadata={"choices": ("heuristic", "model")})
    dedup_threshold: float = field(default=0.8, metadata=_rng(0, 1))
    debounce_s: float = field(default=0.2, metadata=_rng(0, 3600))
    min_tokens: int = field(default=3, metadata=_rng(0, 100000))


@dataclass
class AttributionConfig:
    strategy: str = field(default="jaccard", metadata={"choices": ("jaccard", "logprob")})
    threshold: float = field(default=0.1, metadata=_rng(0, 1))
    rate: float = field(default=0.2, metadata=_rng(0, 1))


@dataclass
class ModelSection:
    enabled: bool = False
    base_url: str = "http://127.0.0.1:8080/v1"
    model: str = "qwen2.5-coder-0.5b-instruct"
    api_key_env: str = ""
    timeout_s: float = field(default=30.0, metadata=_rng(0.1, 3600))
    max_retries: int = field(default=2, metadata=_rng(0, 20))


@dataclass
class EmbeddingsConfig:
    backend: str = field(default="none", metadata={"choices": ("none", "minilm", "bge-small", "hashing")})
    min_similarity: float = field(default=0.3, metadata=_rng(-1, 1))
    model_dir: str = ""  # where bge-small's folder is; "" = the per-user models folder (model_paths.py)


@dataclass
class RerankConfig:
    backend: str = field(default="none", metadata={"choices": ("none", "cross-encoder")})
    top_n: int = field(default=100, metadata=_rng(1, 1000))
    weight: float = field(default=0.6, metadata=_rng(0, 1))
    k: float = field(default=3.0, metadata=_rng(1, 1000))
    threads: int = field(default=1, metadata=_rng(1, 64))
    model_dir: str = ""


@dataclass
class Config:
    preset: str = field(default="paper", metadata={"choices": ("paper", "recommended", "hybrid")})
    weights: WeightsConfig = field(default_factory=WeightsConfig)
    bm25: BM25Config = field(default_factory=BM25Config)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    packing: PackingConfig = field(default_factory=PackingConfig)
    paths: PathsConfig = field(default_factory=PathsConfig)
    agents: AgentsConfig = field(default_factory=AgentsConfig)
    consolidation: ConsolidationConfig = field(default_factory=ConsolidationConfig)
    attribution: AttributionConfig = field(default_factory=AttributionConfig)
    model: ModelSection = field(default_factory=ModelSection)
    embeddings: EmbeddingsConfig = field(default_factory=EmbeddingsConfig)
    rerank: RerankConfig = field(default_factory=RerankConfig)
    source: str = field(default="<defaults>", metadata={"internal": True})

    @property
    def workspace(self) -> Path:
        return Path(os.path.expanduser(self.paths.workspace))

    @property
    def memory_root(self) -> Path:
        return self.workspace / self.paths.memory_dir


# Named presets (MemTier Table 2): the paper's defaults, and its best setting.
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {"retrieval.top_k": 4, "packing.token_budget": 300},
    "recommended": {"retrieval.top_k": 2, "packing.token_budget": 600},
    # recall-first hybrid: bge-small φsem, soft scoping, cross-encoder re-ranking of a deep head (~2 s a recall on
    # one core; docs/evaluation.md has its numbers; both models: memtier model setup --embedder --reranker)
    "hybrid": {"retrieval.top_k": 4, "packing.token_budget": 300, "retrieval.scoping": "soft",
               "weights.sem": 1.5, "embeddings.backend": "bge-small", "rerank.backend": "cross-encoder",
               "rerank.top_n": 200},
}


def _check_value(where: str, key: str, f, hint, value):
    """Coerce/validate one leaf value; raise ConfigError naming the key."""
    meta = f.metadata
    expected = {float: "a number", int: "an integer", bool: "true or false", str: "a string",
                list: "a list", dict: "a mapping"}.get(hint, str(hint))
    ok = False
    if hint is bool:
        ok = isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif hint is str:
        ok = isinstance(value, str)
    elif hint is list:
        ok = isinstance(value, list)
    elif hint is dict:
        ok = isinstance(value, dict)
    if not ok:
        raise ConfigError(f"{where}: {key}: expected {expected}, got {value!r}")
    if "choices" in meta and value not in meta["choices"]:
        raise ConfigError(f"{where}: {key}: expected one of {', '.join(meta['choices'])}, got {value!r}")
    if "range" in meta:
        lo, hi = meta["range"]
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            span = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
            raise ConfigError(f"{where}: {key}: expected a value {span}, got {value!r}")
    return value


def _apply(obj, data: dict, where: str, prefix: str = "") -> None:
    """Merge a nested mapping into a dataclass tree, validating every key."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: {prefix.rstrip('.') or 'top level'}: expected a mapping, got {data!r}")
    hints = get_type_hints(type(obj))
    known = {f.name: f for f in fields(obj) if not f.metadata.get("internal")}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in known:
            close = [k for k in known if _similar(str(key), k)]
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{where}: unknown key {dotted!r}{hint}; expected one of: {', '.join(known)}")
        f = known[key]
        current = getattr(obj, key)
        if is_dataclass(current):
            _apply(current, value, where, dotted + ".")
        else:
            setattr(obj, key, _check_value(where, dotted, f, hints[key], value))


def _similar(a: str, b: str) -> bool:
    import difflib

    return difflib.SequenceMatcher(None, a, b).ratio() >= 0.75


def _nest(dotted: dict[str, Any]) -> dict:
    out: dict = {}
    for key, value in dotted.items():
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def read_yaml(path: Path) -> dict:
    """Read one YAML config file with safe_load; errors name the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}:{at}: not valid YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level: expected a mapping of sections, got {type(data).__name__}")
    return data


def env_overrides(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """MEMTIER_SECTION__KEY=value pairs as dotted keys (values parsed as YAML scalars)."""
    environ = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        rest = name[len(ENV_PREFIX):]
        if rest == "WORKSPACE":
            out["paths.workspace"] = raw
        elif rest == "PRESET":
            out["preset"] = raw
        elif "__" in rest:
            try:
                value = yaml.safe_load(raw) if raw != "" else ""
            except yaml.YAMLError:
                value = raw
            out[rest.lower().replace("__", ".")] = value
    return out


def find_config_file(flag_path: str | Path | None, environ: dict[str, str] | None = None,
                     workspace: str | None = None) -> Path | None:
    environ = os.environ if environ is None else environ
    if flag_path:
        return Path(flag_path)
    if environ.get("MEMTIER_CONFIG"):
        return Path(environ["MEMTIER_CONFIG"])
    ws = Path(os.path.expanduser(workspace or environ.get("MEMTIER_WORKSPACE") or DEFAULT_WORKSPACE))
    candidate = ws / "memtier.yaml"
    return candidate if candidate.is_file() else None


def load_config(path: str | Path | None = None, *, flags: dict[str, Any] | None = None,
                environ: dict[str, str] | None = None, use_env: bool = True) -> Config:
    """Build the Config: default < preset < file < env < flags (see module docstring)."""
    environ = (os.environ if environ is None else environ) if use_env else {}
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    env = env_overrides(environ)
    workspace_hint = flags.get("paths.workspace") or env.get("paths.workspace")
    file_path = find_config_file(path, environ, workspace_hint)
    file_data = read_yaml(file_path) if file_path else {}

    layers = [(str(file_path), file_data), ("environment", _nest(env)), ("command line", _nest(flags))]
    cfg = Config()
    _apply(cfg, _nest(PRESETS["paper"]), "preset paper")
    for where, data in layers:
        if isinstance(data, dict) and "preset" in data:
            # A preset is applied where it is named: above lower layers, below its own layer's keys.
            name = data["preset"]
            if name not in PRESETS:
                raise ConfigError(f"{where}: preset: expected one of {', '.join(PRESETS)}, got {name!r}")
            _apply(cfg, _nest(PRESETS[name]), f"preset {name}")
        _apply(cfg, copy.deepcopy(data), where)
    tm = cfg.retrieval.tier_multipliers
    for tier in ("episodic", "semantic", "procedural"):
        if not isinstance(tm.get(tier), (int, float)) or isinstance(tm.get(tier), bool):
            raise ConfigError(f"{file_path or 'config'}: retrieval.tier_multipliers.{tier}: expected a number")
    extra = set(tm) - {"episodic", "semantic", "procedural"}
    if extra:
        raise ConfigError(f"{file_path or 'config'}: unknown key 'retrieval.tier_multipliers.{sorted(extra)[0]}'")
    cfg.source = str(file_path) if file_path else "<defaults>"
    return cfg


def as_dict(cfg: Config) -> dict[str, Any]:
    """The effective config as plain data (for `memtier config show`)."""
    out: dict[str, Any] = {}
    for f in fields(cfg):
        if f.metadata.get("internal"):
            continue
        value = getattr(cfg, f.name)
        out[f.name] = {g.name: copy.deepcopy(getattr(value, g.name)) for g in fields(value)} if is_dataclass(value) else value
    return out
