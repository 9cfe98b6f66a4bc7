"""The one validated config model.

Precedence, implemented once in :func:`load_config`:

    command-line flag  >  environment (MEMTIER_*)  >  YAML file  >  built-in default

* The YAML file is ``--config PATH``, else ``$MEMTIER_CONFIG``, else
  ``<workspace>/memtier.yaml`` when it exists, else nothing (defaults only).
* Environment overrides are ``MEMTIER_<SECTION>__<KEY>`` (double underscore),
  e.g. ``MEMTIER_RETRIEVAL__TOP_K=2``; plus the shortcuts ``MEMTIER_WORKSPACE``
  and ``MEMTIER_PRESET``. Values are parsed as YAML; a text key's value stays text.
* Flags arrive as a dict of dotted keys (``{"retrieval.top_k": 2}``).

A preset (one of :data:`PRESETS`: ``paper``, ``recommended``, ``hybrid``, ``hybrid-fast``) is applied where it is named: above
the layers below it, below the other keys of its own layer. Unknown keys, wrong types and out-of-range values stop
startup with one :class:`ConfigError` line naming the file, the key and what
was expected. Numbers must be finite (no NaN, no infinity); text must be UTF-8
without control characters. YAML (files, env values, ``eval --set``) is read by
:func:`memtier_plugin.safe_yaml.parse_yaml`, which bounds nesting, alias expansion and
value length before any object is built. Renamed or removed keys are refused with a hint naming the new key.
"""

from __future__ import annotations

import copy
import math
import os
import re
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, get_type_hints


from .vocabulary import PRESET_NAMES, ROLES, TIERS  # noqa: F401  (TIERS: config.TIERS callers)
from .errors import ConfigError
from .safe_yaml import MAX_DEPTH, MAX_NODES, MAX_TEXT, NotYaml, key_at, parse_yaml, show  # noqa: F401

DEFAULT_WORKSPACE = "~/.openclaw/workspace"
ENV_PREFIX = "MEMTIER_"

EPISODIC_ROLES = ROLES

# Bounds on what a config may hold, far above any real config (the shipped one has ~80 values).
MAX_CONFIG_BYTES = 1 << 20  # a memtier config is a few KB

# Keys that no longer exist: old dotted name -> the hint shown when a config still uses it.
RETIRED_KEYS = {
    "packing.max_entry_chars": "was renamed to packing.max_chars (it caps the whole delivered block, not one entry)",
    "retrieval.depth": "was removed: recall ranks max(4 x top_k, 16) candidates and evaluation ranks its own depth; "
                       "delete the key",
}


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
        default_factory=lambda: {"episodic": 1.0, "semantic": 1.2, "procedural": 1.4},
        metadata={"keys": TIERS, **_rng(0, 10)},  # merged over the defaults, each a finite number
    )
    scoping: str = field(default="hard", metadata={"choices": ("hard", "soft")})
    reply_context: bool = True
    include_roles: list = field(default_factory=lambda: ["user", "assistant", "tool"],
                                metadata={"item_choices": EPISODIC_ROLES})


@dataclass
class PackingConfig:
    token_budget: int = field(default=300, metadata=_rng(1, 1_000_000))
    max_chars: int = field(default=6000, metadata=_rng(1, 1_000_000))  # all delivered entries together
    # the first N episodic candidates carry their exchange's other half, when within exchange_tokens (recall/exchange.py)
    exchange: int = field(default=4, metadata=_rng(0, 100))
    exchange_tokens: int = field(default=120, metadata=_rng(1, 10_000))


@dataclass
class PathsConfig:
    workspace: str = DEFAULT_WORKSPACE
    memory_dir: str = "memory"


@dataclass
class AgentsConfig:
    global_read: list = field(default_factory=list, metadata={"items": str})


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
    circuit_breaker_s: float = field(default=60.0, metadata=_rng(0, 86400))
    hook_deadline_s: float = field(default=5.0, metadata=_rng(0.1, 3600))


@dataclass
class EmbeddingsConfig:
    backend: str = field(default="none", metadata={"choices": ("none", "minilm", "bge-small", "hashing")})
    min_similarity: float = field(default=0.3, metadata=_rng(-1, 1))
    model_dir: str = ""  # where bge-small's folder is; "" = the per-user models folder (model_paths.py)
    # share of an episodic entry's vector taken from its reply context: the message it answers (its session's
    # previous entry, from another role) followed by its own text; 0 = its own text only (docs/retrieval.md)
    reply_context: float = field(default=0.3, metadata=_rng(0, 1))


@dataclass
class RerankConfig:
    backend: str = field(default="none", metadata={"choices": ("none", "cross-encoder")})
    top_n: int = field(default=100, metadata=_rng(1, 1000))
    weight: float = field(default=0.6, metadata=_rng(0, 1))
    k: float = field(default=3.0, metadata=_rng(1, 1000))
    threads: int = field(default=1, metadata=_rng(1, 64))
    model_dir: str = ""
    # wall-time budget of one re-ranking (ms): re-rank as much of the head as fits, batch by batch; 0 = the whole
    # top_n always (docs/foresight.md has the measured quality per budget)
    budget_ms: float = field(default=0.0, metadata=_rng(0, 600_000))
    cache_size: int = field(default=0, metadata=_rng(0, 10_000_000))  # (query, entry) logits kept; 0 = no cache
    # the budget of Foresight's background preparations, off the critical path: a prepared result can re-rank
    # a deeper head than a prompt may wait for; -1 = budget_ms, 0 = the whole top_n
    background_budget_ms: float = field(default=-1.0, metadata=_rng(-1, 600_000))


@dataclass
class StandingConfig:
    """Standing knowledge (the Global layer's preferences, constraints, rules; Workspace skills): issue 12."""

    enabled: bool = True
    max_items: int = field(default=4, metadata=_rng(0, 100))  # standing candidates per prompt (calibration decides)
    min_score: float = field(default=0.2, metadata=_rng(0, 1))  # applicability below this is not delivered
    embedder: str = field(default="auto", metadata={"choices": ("auto", "none", "bge-small", "minilm", "hashing")})
    extractor: str = field(default="heuristic", metadata={"choices": ("heuristic", "model")})  # model: also ask model.*
    # the learned gate (layers/gate.py): a user sentence the rules pass over is a preference when a model over its
    # embedding says so; auto: when the standing embedder is the one the gate was fitted with; none: rules only
    gate: str = field(default="auto", metadata={"choices": ("auto", "none")})
    gate_file: str = ""  # a gate from `memtier train gate` (relative: to the workspace); "" the shipped one
    gate_threshold: float = field(default=-1.0, metadata=_rng(-1, 1))  # ≥ 0 replaces the gate's own threshold
    # the common direction of prompts (layers/center.py), taken out of a prompt's vector before it is compared with
    # standing items; auto: when the standing embedder is the one the center was computed with; none: raw cosines
    center: str = field(default="auto", metadata={"choices": ("auto", "none")})
    center_file: str = ""  # a center from `memtier train center` (relative: to the workspace); "" the shipped one
    # the center file's learned map of what prompts are about (layers/center.py), when it holds one; false: left out
    center_map: bool = True
    # the request model (layers/asking.py): a prompt the request rules do not read as asking for a choice asks when a
    # model over its embedding says so; auto: when the standing embedder is the one it was fitted with; none: rules
    request_model: str = field(default="auto", metadata={"choices": ("auto", "none")})
    request_model_file: str = ""  # a model from `memtier train requests` (relative: to the workspace); "" the shipped one
    # what an item bears on by world knowledge (layers/implications.py: data/implications.yaml and the user's
    # memory/global/implications.yaml): a request that names it reaches the item; false: words, topics, embedding only
    implications: bool = True
    sem: float = field(default=1.0, metadata=_rng(0, 10))  # weight of the embedding cosine
    topic: float = field(default=0.3, metadata=_rng(0, 10))  # weight of the topic-route cosine
    lexical: float = field(default=0.2, metadata=_rng(0, 10))  # weight of the word overlap


@dataclass
class CalibrationConfig:
    """One calibrated scale for every layer (issue 25, recall/calibration.py): the probability that a candidate
    applies to the prompt; the block takes those at or above the threshold, best first."""

    # a calibration file (`memtier train calibration`; relative: to the workspace); "" the one shipped for the preset
    file: str = ""
    # the probability below which a standing item or skill is not delivered, whatever the prompt; -1 = the file's
    # own thresholds, and its rule for a prompt that asks for a choice (recall/calibration.py, ``choice``)
    threshold: float = field(default=-1.0, metadata=_rng(-1, 1))


@dataclass
class SchedulingConfig:
    """Memory scheduling beside the agent (issue 13): what pre_tool may do."""

    # retrieval: pre_tool stays silent; hooks: bound memory as supplements; intervention: silent /
    # supplement / intervene on conflicting calls (intervention.py); combined: hooks and intervention
    mode: str = field(default="combined", metadata={"choices": ("retrieval", "hooks", "intervention", "combined")})
    # a learned policy file (`memtier train policy`; docs/learning.md): decides silent / supplement / intervene
    # for standing preferences once the fixed rule finds no hard conflict; "default" the one memtier ships
    # (memtier_plugin/data/policy/default.yaml, needs bge-small; opt-in, docs/learning.md); "" or "none" the fixed
    # rule alone
    policy: str = ""
    # the policy's evidence and features (an embedding on a task's first call) get this long; past it the
    # call gets a supplement saying the check did not finish (never a silent allow), the work finishes aside
    policy_timeout_ms: float = field(default=500.0, metadata=_rng(1, 60000))
    # the pair model (`memtier model setup --judge`, docs/models.md) for a policy that reads its features: auto
    # when it is fetched; none never loads it (such a policy is then refused and the fixed rule decides). Its
    # scores share policy_timeout_ms: past it the call is decided without them (docs/learning.md, "The judge")
    judge: str = field(default="auto", metadata={"choices": ("auto", "none")})
    judge_model_dir: str = ""  # where the judge's folder is ("": the models folder, docs/models.md)


@dataclass
class HooksConfig:
    """Hooks: memory entries bound to event predicates, each fired at most once per task (issue 13)."""

    enabled: bool = True
    max_entries: int = field(default=6, metadata=_rng(1, 100))  # entries per delivery (MemSidecar: 6)
    max_chars: int = field(default=6000, metadata=_rng(1, 1_000_000))  # characters per delivery (MemSidecar: 6,000)
    # hooks derived from memory when it is written (a standing rule's own hook, stored beside the node in
    # memory/hooks/.derived/, retired with it; docs/hooks_memory.md); false: hand-written files only
    from_memory: bool = True
    # who proposes them: rules (the rule's own words); model: the configured model (model.*) proposes more
    # at write time, within model.hook_deadline_s, each checked as data like a person's file (never executed)
    proposer: str = field(default="rules", metadata={"choices": ("rules", "model")})


@dataclass
class ForesightConfig:
    """Foresight (issue 14, MemSidecar §3.4): predicted queries prepared in the background (docs/foresight.md)."""

    enabled: bool = False
    k: int = field(default=4, metadata=_rng(1, 32))  # predicted queries per task (the budget K)
    entry_ttl_s: float = field(default=600.0, metadata=_rng(1, 86400))  # a prepared result lives this long
    task_ttl_s: float = field(default=3600.0, metadata=_rng(1, 7 * 86400))  # an idle task's cache lives this long
    # share of the query's distinctive words in a prediction's vocabulary that serves it (foresight.match)
    match_threshold: float = field(default=0.5, metadata=_rng(0, 1))
    # query-to-prediction cosine (both embedded as queries), when an embedder is loaded
    embed_threshold: float = field(default=0.75, metadata=_rng(-1, 1))
    wait_ms: float = field(default=250.0, metadata=_rng(0, 60_000))  # longest wait for a preparation in progress
    queue_size: int = field(default=16, metadata=_rng(1, 1024))  # background preparations waiting at most
    predictor: str = field(default="rules", metadata={"choices": ("rules", "model")})  # model: also ask model.*
    # separate: Foresight replaces the recall block, Hooks keep their own block; joint: one block, merged and
    # deduplicated within the Hooks budget (hooks.max_entries, hooks.max_chars; MemSidecar Table B2)
    delivery: str = field(default="separate", metadata={"choices": ("separate", "joint")})


@dataclass
class StepConfig:
    """Memory for the step (issue 27, docs/retrieval.md "Memory for the step"): what a prompt with little content
    of its own and a tool result retrieve on."""

    # a prompt with fewer content words than this (words not stop words or acknowledgements: "Yes, go." has none)
    # that answers a question of the agent is searched with the recent turns before it; 0 = the prompt alone
    min_terms: int = field(default=3, metadata=_rng(0, 100))
    # how many of the conversation's latest user/assistant messages join such a prompt's query (each cut to
    # 1,000 characters, the whole query to intake.MAX_QUERY_CHARS)
    context_turns: int = field(default=2, metadata=_rng(0, 20))
    # a tool result with an error or a name the run has not seen yet is retrieved on in the background, and
    # what clears the calibrated threshold is delivered at the agent's next decision
    tool_results: bool = True
    # the longest a prompt waits for such a retrieval still in progress (after its own recall); what is not
    # ready by then is delivered at the decision after. 0: never waits (a replay with no think time paid
    # +230-300 ms at p95 for 100 ms here: docs/retrieval.md, "Memory for the step")
    wait_ms: float = field(default=0.0, metadata=_rng(0, 60_000))


@dataclass
class SharedConfig:
    """Shared tiers on PostgreSQL for agents on many machines (issue 29, docs/shared.md). Off by default: the
    embedded mode imports nothing of it."""

    backend: str = field(default="none", metadata={"choices": ("none", "postgres")})
    # the NAME of the environment variable holding the application role's DSN (never the DSN itself)
    dsn_env: str = "MEMTIER_PG_DSN"
    # the NAME of the variable holding an owner's DSN, for `memtier shared init` only (unset: dsn_env's)
    admin_dsn_env: str = "MEMTIER_PG_ADMIN_DSN"
    tenant: str = ""  # the user or team whose memory this is ("" = the OS user's name)
    host_id: str = ""  # this host's name in the fleet ("" = the machine's host name)
    # which tiers are shared; "forgotten": a forget on one host holds on every host (ids only)
    tiers: list = field(default_factory=lambda: ["semantic", "global", "procedural", "state", "forgotten"],
                        metadata={"item_choices": ("semantic", "global", "procedural", "state", "forgotten")})
    pull_interval_s: float = field(default=5.0, metadata=_rng(0.05, 3600))  # the safety net when a NOTIFY is lost
    notify: bool = True  # LISTEN for other hosts' writes (freshness of one round trip)
    ship_interval_s: float = field(default=0.1, metadata=_rng(0.01, 60))  # how often new local lines are looked for
    connect_timeout_s: float = field(default=2.0, metadata=_rng(0.1, 60))
    statement_timeout_ms: float = field(default=2000.0, metadata=_rng(10, 600_000))
    batch: int = field(default=200, metadata=_rng(1, 10_000))  # records per push transaction
    leader_retry_s: float = field(default=30.0, metadata=_rng(0.1, 3600))


@dataclass
class Config:
    preset: str = field(default="paper", metadata={"choices": PRESET_NAMES})
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
    standing: StandingConfig = field(default_factory=StandingConfig)
    calibration: CalibrationConfig = field(default_factory=CalibrationConfig)
    scheduling: SchedulingConfig = field(default_factory=SchedulingConfig)
    hooks: HooksConfig = field(default_factory=HooksConfig)
    foresight: ForesightConfig = field(default_factory=ForesightConfig)
    step: StepConfig = field(default_factory=StepConfig)
    shared: SharedConfig = field(default_factory=SharedConfig)
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
    # no time decay and a milder BM25 length norm (b 0.5: a reply's key holds its question's words too); what it
    # changed on LoCoMo and LongMemEval is measured in docs/retrieval.md
    "hybrid": {"retrieval.top_k": 4, "packing.token_budget": 300, "retrieval.scoping": "soft",
               "weights.sem": 1.5, "weights.decay": 0.0, "bm25.b": 0.5, "embeddings.backend": "bge-small",
               "rerank.backend": "cross-encoder", "rerank.top_n": 200},
    # the recall-first hybrid on the critical path's budget (docs/foresight.md): Foresight prepares predicted
    # queries in the background with a deep re-ranking, a prompt re-ranks only what 20 ms allow; one more item
    # (k 5): its ranking keeps the evidence share of the block at or above the paper preset's k 4 (LoCoMo dev,
    # docs/evaluation.md "hybrid-fast at k 5"), each of its episodes with its exchange's other half, within 460
    # tokens (the whole block, headers included, within 600: docs/evaluation.md "Exchanges")
    "hybrid-fast": {"retrieval.top_k": 5, "packing.token_budget": 460, "packing.exchange": 5,
                    "retrieval.scoping": "soft",
                    "weights.sem": 1.5, "weights.decay": 0.0, "bm25.b": 0.5, "embeddings.backend": "bge-small",
                    "rerank.backend": "cross-encoder",
                    "rerank.top_n": 200, "rerank.budget_ms": 20, "rerank.background_budget_ms": 800,
                    "rerank.cache_size": 20000, "foresight.enabled": True},
}


_BAD_TEXT = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff]")


def _text_problem(value: str) -> str | None:
    """Why ``value`` is not acceptable config text, or None."""
    if len(value) > MAX_TEXT:
        return f"text of at most {MAX_TEXT} characters, got {len(value)}"
    bad = _BAD_TEXT.search(value)
    if bad is None:
        return None
    if "\ud800" <= bad.group() <= "\udfff":
        return f"UTF-8 text, got {show(value)}"
    return f"text without control characters, got {show(value)}"


def _is_number(value: Any) -> bool:
    """An int or a finite float (bool is not a number here; NaN and infinity are refused)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _check_range(where: str, key: str, meta, value) -> None:
    if "range" in meta:
        lo, hi = meta["range"]
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            span = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
            raise ConfigError(f"{where}: {key}: expected a value {span}, got {show(value)}")


def _check_value(where: str, key: str, f, hint, value):
    """Coerce/validate one leaf value; raise ConfigError naming the key."""
    meta = f.metadata
    expected = {float: "a finite number", int: "an integer", bool: "true or false", str: "a string",
                list: "a list", dict: "a mapping"}.get(hint, str(hint))
    ok = False
    if hint is bool:
        ok = isinstance(value, bool)
    elif hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif hint is float:
        ok = _is_number(value)
    elif hint is str:
        ok = isinstance(value, str)
    elif hint is list:
        ok = isinstance(value, list)
    elif hint is dict:
        ok = isinstance(value, dict)
    if not ok:
        raise ConfigError(f"{where}: {key}: expected {expected}, got {show(value)}")
    if isinstance(value, str):
        problem = _text_problem(value)
        if problem:
            raise ConfigError(f"{where}: {key}: expected {problem}")
    if "choices" in meta and value not in meta["choices"]:
        raise ConfigError(f"{where}: {key}: expected one of {', '.join(meta['choices'])}, got {show(value)}")
    _check_range(where, key, meta, value)
    if isinstance(value, list):
        for i, item in enumerate(value):
            if "item_choices" in meta and not (isinstance(item, str) and item in meta["item_choices"]):
                raise ConfigError(f"{where}: {key}[{i}]: expected one of {', '.join(meta['item_choices'])}, "
                                  f"got {show(item)}")
            if meta.get("items") is str:
                if not isinstance(item, str):
                    raise ConfigError(f"{where}: {key}[{i}]: expected a string, got {show(item)}")
                problem = _text_problem(item)
                if problem:
                    raise ConfigError(f"{where}: {key}[{i}]: expected {problem}")
    if hint is float:
        try:
            return float(value)
        except OverflowError:  # an int too large for a float, where the range is open above
            raise ConfigError(f"{where}: {key}: expected {expected}, got {show(value)}") from None
    return value


def _merge_mapping(where: str, key: str, f, current: dict, value) -> dict:
    """A mapping with fixed names (tier_multipliers): merged over ``current``, each value checked."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: {key}: expected a mapping, got {show(value)}")
    names = f.metadata["keys"]
    merged = dict(current)
    for name, item in value.items():
        if name not in names:
            raise ConfigError(f"{where}: unknown key {show(f'{key}.{name}')}; expected one of: {', '.join(names)}")
        if not _is_number(item):
            raise ConfigError(f"{where}: {key}.{name}: expected a finite number, got {show(item)}")
        _check_range(where, f"{key}.{name}", f.metadata, item)
        merged[name] = float(item)
    return merged


def _apply(obj, data: dict, where: str, prefix: str = "") -> None:
    """Merge a nested mapping into a dataclass tree, validating every key."""
    if data is None and prefix:
        return  # an empty section (every key commented out)
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: {prefix.rstrip('.') or 'top level'}: expected a mapping, got {show(data)}")
    hints = get_type_hints(type(obj))
    known = {f.name: f for f in fields(obj) if not f.metadata.get("internal")}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if dotted in RETIRED_KEYS:
            raise ConfigError(f"{where}: {dotted} {RETIRED_KEYS[dotted]}")
        if key not in known:
            close = [k for k in known if _similar(str(key), k)]
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{where}: unknown key {show(dotted)}{hint}; expected one of: {', '.join(known)}")
        f = known[key]
        current = getattr(obj, key)
        if is_dataclass(current):
            _apply(current, value, where, dotted + ".")
        elif "keys" in f.metadata:
            setattr(obj, key, _merge_mapping(where, dotted, f, current, value))
        else:
            setattr(obj, key, _check_value(where, dotted, f, hints[key], value))


def _similar(a: str, b: str) -> bool:
    import difflib

    return difflib.SequenceMatcher(None, a[:100], b).ratio() >= 0.75


def _nest(dotted: dict[str, Any], where: str) -> dict:
    out: dict = {}
    for key, value in dotted.items():
        node = out
        parts = key.split(".")
        for i, p in enumerate(parts[:-1]):
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{where}: {show(key)} conflicts with {'.'.join(parts[:i + 1])!r}, which is a value")
        if isinstance(node.get(parts[-1]), dict):
            raise ConfigError(f"{where}: {show(key)} conflicts with keys below it")
        node[parts[-1]] = value
    return out


def _hint(dotted: str):
    """The declared type of a dotted config key (None when there is no such key)."""
    obj: Any = Config
    for part in dotted.split("."):
        if not (is_dataclass(obj) and part in {f.name for f in fields(obj)}):
            return None
        obj = get_type_hints(obj)[part]
    return obj


def parse_value(raw: str, where: str, key: str = "") -> Any:
    """One override value (environment or ``--set``) for ``key``, parsed as YAML.

    Text that is not YAML stays text, and so does any value of a text key (a
    workspace named ``1000`` is a path, not a number). Bounds (depth, aliases)
    are errors as in a file.
    """
    if raw == "" or _hint(key) is str:
        return raw
    try:
        return parse_yaml(raw, where)
    except NotYaml:
        return raw  # then checked like any value


def read_yaml(path: Path) -> dict:
    """Read one YAML config file (bounded size, UTF-8, see :func:`parse_yaml`); errors name the file."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config: {exc.strerror or exc}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: config file larger than {MAX_CONFIG_BYTES} bytes (a memtier config is a few KB)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        key = key_at(data.decode("utf-8", "replace"), len(data[:exc.start].decode("utf-8", "replace")))
        raise ConfigError(f"{path}: {key + ': ' if key else ''}not UTF-8 text (byte 0x{data[exc.start]:02x}, "
                          f"line {line})") from None
    parsed = parse_yaml(text, str(path))
    if parsed is None:
        return {}
    if not isinstance(parsed, dict):
        raise ConfigError(f"{path}: top level: expected a mapping of sections, got {type(parsed).__name__}")
    return parsed


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
            key = rest.lower().replace("__", ".")
            out[key] = parse_value(raw, f"environment {name}", key)
    return out


def find_config_file(flag_path: str | Path | None, environ: dict[str, str] | None = None,
                     workspace: str | None = None, where: str = "environment") -> Path | None:
    """The config file to read: the flag's, $MEMTIER_CONFIG, or the workspace's memtier.yaml when it exists."""
    environ = os.environ if environ is None else environ
    if flag_path:
        return Path(flag_path)
    if environ.get("MEMTIER_CONFIG"):
        return Path(environ["MEMTIER_CONFIG"])
    ws = Path(os.path.expanduser(workspace or environ.get("MEMTIER_WORKSPACE") or DEFAULT_WORKSPACE))
    candidate = ws / "memtier.yaml"
    try:
        return candidate if candidate.is_file() else None
    except OSError as exc:  # e.g. a name too long for the file system
        raise ConfigError(f"{where}: paths.workspace: {show(str(ws))}: {exc.strerror or exc}") from None


def load_config(path: str | Path | None = None, *, flags: dict[str, Any] | None = None,
                environ: dict[str, str] | None = None, use_env: bool = True) -> Config:
    """Build the Config: default < preset < file < env < flags (see module docstring)."""
    environ = (os.environ if environ is None else environ) if use_env else {}
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    env = env_overrides(environ)
    hint_where, workspace_hint = next(((w, v) for w, v in (("command line", flags.get("paths.workspace")),
                                                           ("environment", env.get("paths.workspace")))
                                       if isinstance(v, str) and v), ("environment", None))
    file_path = find_config_file(path, environ, workspace_hint, hint_where)
    file_data = read_yaml(file_path) if file_path else {}

    layers = [(str(file_path), file_data), ("environment", _nest(env, "environment")),
              ("command line", _nest(flags, "command line"))]
    cfg = Config()
    _apply(cfg, _nest(PRESETS["paper"], "preset paper"), "preset paper")
    for where, data in layers:
        if isinstance(data, dict) and "preset" in data:
            # A preset is applied where it is named: above lower layers, below its own layer's keys.
            name = data["preset"]
            if not isinstance(name, str) or name not in PRESETS:
                raise ConfigError(f"{where}: preset: expected one of {', '.join(PRESETS)}, got {show(name)}")
            _apply(cfg, _nest(PRESETS[name], f"preset {name}"), f"preset {name}")
        _apply(cfg, copy.deepcopy(data), where)
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
