"""PPO over the retrieval weight vector w (MemTier §3.5), pure numpy.

w = [w_sem, w_bm25, w_decay, w_cw, w_tier], w0 = [0, .35, .25, .25, .15].

Policy. A diagonal Gaussian pi(z) = N(mu, diag(sigma^2)); mu starts at w0,
sigma at ``sigma0`` = 0.15 (the paper's forced exploration). The action is
the unclipped sample z (its log-density is what PPO ratios use); the weights
handed to ``reward_fn`` are ``clip(z, 0, 1)``, i.e. clipping is part of the
environment. There is no renormalisation: eq. 1 is a linear fusion, so
rankings depend only on the ratios between weights and a common rescale is
harmless; clipping alone keeps every weight in the documented [0, 1] range.
Frozen dimensions (e.g. w_sem when no embedding backend is configured) are
not sampled: they are exactly w0 in every episode and never updated.

Episodes. Items are shuffled under the seed each of ``epochs`` passes and cut
into batches of ``batch_size``. For every item the trainer samples a group of
``group_size`` weight vectors and calls ``reward_fn(w, item_index)`` for each
(eq. 2: +1 correct / gold evidence retrieved, -1 otherwise; any finite float).
Cost: epochs * n_items * group_size reward calls.

Why group-relative advantages avoid the zero-variance trap. The paper's
trainer used A_t = r_t - r_bar over episodes that all ran with (nearly) the
same weights and a CW-derived reward that was near-uniform, so A_t ~ 0 for
every episode and the gradient was identically zero: "training" could not
move w. Here (GRPO, as in Pulse) the same item is replayed with G different
sampled weight vectors and A = (r - mean_group) / (std_group + eps): the
item's difficulty cancels, only the effect of *the weights* remains, and the
advantage is normalised to unit scale, so a few informative groups produce a
full-size gradient. sigma0 = 0.15 guarantees that the G samples actually
differ. When a group's rewards are all equal its advantages are exactly 0
(no NaN); when every group in a batch is degenerate (the whole batch carries
no signal about w) the update is skipped and counted in ``skipped_batches``
rather than being silently applied as a no-op -- a run where every batch
was skipped is the paper's trap, reported.

Update. pi_old is frozen at the start of each batch. ``inner_steps`` Adam
steps of gradient ascent on the clipped surrogate
L = mean(min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A)),
ratio = exp(log pi_new(z) - log pi_old(z)), with the analytic gradients
d log pi / d mu = (z - mu) / sigma^2 and d log pi / d log sigma =
(z - mu)^2 / sigma^2 - 1 (only over non-frozen dims). A sample whose clipped
term is the minimum contributes no gradient. After every step mu is projected
onto [0, 1] (outside it all samples clip to the same bound and the gradient
vanishes) and sigma onto [sigma_min, sigma0] (the floor keeps log-densities
finite and exploration alive; the ceiling stops noise from inflating sigma).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..errors import ConfigError, MemtierError
from ..recall.backends import WEIGHT_NAMES, read_learned_weights  # noqa: F401  (read back by tests and train)
from ..store.artifacts import WEIGHTS_MARKER, write_artifact

log = logging.getLogger(__name__)

DEFAULT_W0 = (0.0, 0.35, 0.25, 0.25, 0.15)
MARKER_KEY = WEIGHTS_MARKER  # value: format version
_ADV_EPS = 1e-8
_ZERO_STD = 1e-12

RewardFn = Callable[[np.ndarray, int], float]


@dataclass
class PPOConfig:
    sigma0: float = 0.15  # initial exploration std (paper §3.5), also the ceiling
    clip: float = 0.2  # PPO epsilon
    lr: float = 0.02  # Adam step, ~the per-step move of mu; 0.05 collapses sigma fast
    epochs: int = 4
    batch_size: int = 16  # items per batch (each replayed group_size times)
    group_size: int = 4  # G weight samples per item for the group advantage
    inner_steps: int = 4  # gradient steps per batch against the same pi_old
    seed: int = 0
    sigma_min: float = 0.02  # floor on sigma

    def __post_init__(self) -> None:
        if not 0 < self.sigma_min <= self.sigma0:
            raise ConfigError(f"trainer: need 0 < sigma_min <= sigma0, got {self.sigma_min}, {self.sigma0}")
        if not 0 < self.clip < 1 or self.lr <= 0:
            raise ConfigError(f"trainer: need 0 < clip < 1 and lr > 0, got {self.clip}, {self.lr}")
        if self.group_size < 2:
            raise ConfigError(f"trainer: group_size must be >= 2, got {self.group_size}")
        if min(self.epochs, self.batch_size, self.inner_steps) < 1:
            raise ConfigError("trainer: epochs, batch_size and inner_steps must be >= 1")


@dataclass
class TrainResult:
    weights_before: np.ndarray
    weights_after: np.ndarray  # final mean mu, clipped to [0, 1]
    sigma_after: np.ndarray
    history: list[dict] = field(default_factory=list)  # one dict per batch
    skipped_batches: int = 0
    n_batches: int = 0
    frozen: np.ndarray = field(default_factory=lambda: np.zeros(5, dtype=bool))
    config: PPOConfig = field(default_factory=PPOConfig)


def _vector(w, what: str) -> np.ndarray:
    arr = np.asarray(w, dtype=float).reshape(-1)
    if arr.shape != (5,) or not np.all(np.isfinite(arr)):
        raise ConfigError(f"trainer: {what} must be 5 finite numbers {WEIGHT_NAMES}, got {w!r}")
    return arr


def freeze_mask(freeze) -> np.ndarray:
    """A bool mask of length 5 from None, a bool sequence, or names/indices."""
    if freeze is None:
        return np.zeros(5, dtype=bool)
    items = list(freeze)
    if len(items) == 5 and all(isinstance(x, (bool, np.bool_)) for x in items):
        return np.array(items, dtype=bool)
    mask = np.zeros(5, dtype=bool)
    for x in items:
        if isinstance(x, str) and x in WEIGHT_NAMES:
            mask[WEIGHT_NAMES.index(x)] = True
        elif isinstance(x, (int, np.integer)) and not isinstance(x, bool) and 0 <= x < 5:
            mask[int(x)] = True
        else:
            raise ConfigError(f"trainer: cannot freeze {x!r}; use names {WEIGHT_NAMES} or indices 0-4")
    return mask


def _sigma(log_sigma: np.ndarray, frozen: np.ndarray) -> np.ndarray:
    """Reported sigma: frozen dims are never sampled, so their sigma is 0."""
    return np.where(frozen, 0.0, np.exp(log_sigma))


def _reward(reward_fn: RewardFn, w: np.ndarray, item: int) -> float:
    r = float(reward_fn(w.copy(), item))
    if not math.isfinite(r):
        raise MemtierError(f"trainer: reward_fn returned {r} for item {item}")
    return r


def _log_prob(z: np.ndarray, mu: np.ndarray, log_sigma: np.ndarray, active: np.ndarray) -> np.ndarray:
    """Gaussian log-density of each row of z over the active dims."""
    u = (z - mu) / np.exp(log_sigma)
    per_dim = -0.5 * u**2 - log_sigma - 0.5 * math.log(2 * math.pi)
    return per_dim[:, active].sum(axis=1)


def _surrogate_grad(z, adv, logp_old, mu, log_sigma, active, clip):
    """Gradient of the clipped surrogate w.r.t. (mu, log_sigma)."""
    ratio = np.exp(_log_prob(z, mu, log_sigma, active) - logp_old)
    # the unclipped term is the min (so it carries gradient) unless the ratio
    # has already moved past the clip bound in the direction A favours
    live = np.where(adv >= 0, ratio <= 1 + clip, ratio >= 1 - clip)
    coef = (adv * ratio * live) / len(adv)
    sigma2 = np.exp(2 * log_sigma)
    d = z - mu
    g_mu = coef @ (d / sigma2)
    g_ls = coef @ (d**2 / sigma2 - 1.0)
    g_mu[~active] = 0.0
    g_ls[~active] = 0.0
    return g_mu, g_ls


def train(reward_fn: RewardFn, n_items: int, w0=DEFAULT_W0, *, config: PPOConfig | None = None,
          freeze=None, progress: Callable[[int, int], None] | None = None) -> TrainResult:
    """Learn a weight vector with group-relative PPO; see the module docstring."""
    cfg = config or PPOConfig()
    if n_items < 1:
        raise ConfigError(f"trainer: need at least one training item, got {n_items}")
    w0 = _vector(w0, "w0")
    frozen = freeze_mask(freeze)
    active = ~frozen
    rng = np.random.default_rng(cfg.seed)
    mu = np.clip(w0, 0.0, 1.0)
    mu[frozen] = w0[frozen]
    log_sigma = np.full(5, math.log(cfg.sigma0))
    lo, hi = math.log(cfg.sigma_min), math.log(cfg.sigma0)
    # Adam state over theta = (mu, log_sigma), kept across batches
    m = np.zeros((2, 5))
    v = np.zeros((2, 5))
    b1, b2, t = 0.9, 0.999, 0
    per_epoch = math.ceil(n_items / cfg.batch_size)
    total = cfg.epochs * per_epoch
    result = TrainResult(weights_before=w0.copy(), weights_after=w0.copy(), sigma_after=_sigma(log_sigma, frozen),
                         n_batches=total, frozen=frozen, config=cfg)
    done = 0
    for epoch in range(cfg.epochs):
        order = rng.permutation(n_items)
        for b in range(per_epoch):
            items = order[b * cfg.batch_size:(b + 1) * cfg.batch_size]
            g = cfg.group_size
            eps = rng.standard_normal((len(items) * g, 5))
            z = mu + np.exp(log_sigma) * eps
            z[:, frozen] = w0[frozen]
            rewards = np.array([_reward(reward_fn, np.clip(z[k], 0.0, 1.0), int(items[k // g]))
                                for k in range(len(z))]).reshape(len(items), g)
            std = rewards.std(axis=1, keepdims=True)
            adv = np.where(std > _ZERO_STD, (rewards - rewards.mean(axis=1, keepdims=True)) / (std + _ADV_EPS), 0.0)
            skipped = bool(np.all(std <= _ZERO_STD)) or not active.any()
            if skipped:
                result.skipped_batches += 1
            else:
                adv = adv.reshape(-1)
                logp_old = _log_prob(z, mu, log_sigma, active)
                for _ in range(cfg.inner_steps):
                    grad = np.stack(_surrogate_grad(z, adv, logp_old, mu, log_sigma, active, cfg.clip))
                    t += 1
                    m = b1 * m + (1 - b1) * grad
                    v = b2 * v + (1 - b2) * grad**2
                    step = cfg.lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + 1e-8)
                    step[:, frozen] = 0.0  # ascent: theta += step
                    mu = np.clip(mu + step[0], 0.0, 1.0)
                    mu[frozen] = w0[frozen]
                    log_sigma = np.clip(log_sigma + step[1], lo, hi)
            result.history.append({
                "epoch": epoch, "batch": b, "mean_reward": float(rewards.mean()), "skipped": skipped,
                "mu": [float(x) for x in mu], "sigma": [float(x) for x in _sigma(log_sigma, frozen)],
            })
            done += 1
            if progress is not None:
                progress(done, total)
    if result.skipped_batches == total:
        log.warning("trainer: all %d batches had zero reward variance; weights unchanged", total)
    after = np.clip(mu, 0.0, 1.0)
    after[frozen] = w0[frozen]
    result.weights_after = after
    result.sigma_after = _sigma(log_sigma, frozen)
    return result


def evaluate_weights(reward_fn: RewardFn, n_items: int, w) -> float:
    """Mean reward over items 0..n_items-1 with a fixed weight vector."""
    w = np.clip(_vector(w, "w"), 0.0, 1.0)
    if n_items < 1:
        raise ConfigError(f"trainer: need at least one evaluation item, got {n_items}")
    return float(np.mean([_reward(reward_fn, w, i) for i in range(n_items)]))


def _plain(x):
    """YAML-safe python scalars/lists from numpy values and dataclasses."""
    if isinstance(x, np.ndarray):
        return [_plain(v) for v in x.tolist()]
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def write_learned_weights(path: Path, result: TrainResult, meta: dict | None = None) -> Path:
    """Write learned weights to their own YAML file (never the main config).

    An existing file is overwritten only if it carries the ``MARKER_KEY``
    written here; anything else raises ``ConfigError``.
    """
    doc = {
        MARKER_KEY: 1,
        "weights": dict(zip(WEIGHT_NAMES, _plain(result.weights_after))),
        "vector": _plain(result.weights_after),
        "w0": _plain(result.weights_before),
        "sigma_after": _plain(result.sigma_after),
        "frozen": [n for n, f in zip(WEIGHT_NAMES, result.frozen) if f],
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "seed": result.config.seed,
        "config": _plain(asdict(result.config)),
        "batches": result.n_batches,
        "skipped_batches": result.skipped_batches,
        "meta": _plain(dict(meta or {})),  # data used, mean reward before/after, ...
    }
    return write_artifact(path, MARKER_KEY, doc, header="memtier learned retrieval weights (memtier_plugin.learning.ppo)",
                          kind="a learned-weights file")
