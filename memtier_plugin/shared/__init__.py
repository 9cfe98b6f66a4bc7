"""Shared tiers on PostgreSQL: one project's and one user's memory for agents on many machines
(issue 29; docs/shared.md is the user's guide, SCALE-OUT.md the design).

Config section: ``shared.*``. Off by default (``shared.backend: none``): nothing here is imported, and no
module outside this room imports psycopg. With ``shared.backend: postgres`` the project semantic tier,
the Global layer, skills and working state are shared; episodic ledgers and traces stay local and
remain the source of truth. The hook path never waits on the network: each host's ledgers are its
replica.

Modules by purpose:

* talking to the engine: :mod:`.engine` (the pool, the tenant set per transaction for row-level
  security, every wait bounded), :mod:`.schema` (the versioned DDL in ``schema.sql``, applied under an
  advisory lock; the role checks), :mod:`.server` (a throwaway server for the tests and the bench);
* the record on both sides: :mod:`.rows` (a ledger line as an engine row, with its revision key and
  what it retires, validated by its tier's reader both ways);
* writing: :mod:`.outbox` (the local ledgers as the durable outbox; what each file has shipped),
  :mod:`.revisions` (idempotent appends; each supersession decided under an advisory lock);
* reading: :mod:`.puller` (the gap-free change feed, the transaction-id guard, into the local mirror);
* the fleet: :mod:`.leader` (one host per tenant runs the checks, by a session advisory lock);
* running it: :mod:`.sync` (the background threads of one workspace, its status file).

Entry points: :func:`.sync.start_sync` (a long-lived process), :class:`.sync.Sync` (the CLI's one-shot
``memtier shared push|pull``).
"""
