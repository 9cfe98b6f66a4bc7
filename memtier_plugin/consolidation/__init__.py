"""MemTier §3.3: episodes become project-shared facts, offline, in crash-safe batches.

Config section: ``consolidation.*`` (and ``standing.*`` for the Global layer it maintains).

Modules by purpose:

* extracting facts: :mod:`.facts` (heuristic and model extraction, Jaccard dedup),
  :mod:`.patterns` (the compiled patterns and lexicons behind it);
* committing them: :mod:`.batch` (eligibility, dedup, revisions, commit, recovery);
* running it: :mod:`.daemon` (watchdog observer, debounce, sweep, signals),
  :mod:`.checkpoints` (``memory/.daemon/``: checkpoints, batch journal, lock).

Entry points: :func:`.batch.consolidate_once`, :class:`.daemon.Daemon` (``memtier daemon``).
"""
