"""Time and memory on generated data (``memtier bench``), reported as ratios against a reference in the same run.

Modules by purpose:

* :mod:`.retrieval`: ``bench retrieval``, synthetic corpora and recall latency / memory;
* :mod:`.consolidation`: ``bench consolidation``, append → promoted fact visible;
* :mod:`.bridge`: ``bench bridge``, what the HTTP sidecar adds to a hook;
* :mod:`.latency`: ``bench latency``, before_prompt_build on a replayed task;
* :mod:`.hooks`: ``bench sidecar``, one pre_tool decision with N bound Hooks and the policy;
* :mod:`.shared`: ``bench shared``, the shared tiers on a throwaway PostgreSQL: hook latency with the tier
  on and off, freshness from one host to another, append throughput of many hosts;
* :mod:`.stats`: the one ``percentile`` (q in 0–100) every benchmark reports with.
"""
