"""Optimising from outcomes: attribution (MemTier §3.2), PPO over the weights (MemTier §3.5), GRPO over the policy (Pulse §3.4).

Config sections: ``attribution.*``, ``calibration.*``. The files it writes (``weights.learned_file``,
``scheduling.policy``) are read at hook time by the room that uses them, through ``store.artifacts``.

Modules by purpose:

* credit: :mod:`.attribution` (Jaccard attribution of a run's outcome to the memories it used);
* weights: :mod:`.ppo` (PPO over w), :mod:`.rewards` (rewards from logged runs);
* policy: :mod:`.grpo` (group-relative training of the intervention policy);
* calibration: :mod:`.calibrate` (one logistic model per layer and the delivery thresholds, from labelled
  candidates: ``memtier train calibration``; read at hook time by ``recall.calibration``).

Entry points: :func:`.attribution.attribute_run`, :func:`.ppo.train`, :func:`.grpo.train`.
"""
