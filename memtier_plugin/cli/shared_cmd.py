"""`memtier shared init|status|push|pull|doctor`: the shared tiers on PostgreSQL (docs/shared.md).

Thin: each command is a call into :mod:`memtier_plugin.shared`. psycopg is imported only here and only
when one of them runs; without the ``shared`` extra each says how to install it, in one line.
"""

from __future__ import annotations

import contextlib
import sys
import time

import click

from ..errors import ConfigError, MemtierError
from .terminal import json_line, printable


def _need(state):
    cfg = state.config
    if cfg.shared.backend != "postgres":
        raise ConfigError("shared.backend: is 'none'; set it to 'postgres' (and shared.dsn_env) to share memory "
                          "(docs/shared.md)")
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise MemtierError("the shared tiers need psycopg: pip install 'memtier-plugin[shared]'") from None
    return cfg


def _engine_error(exc) -> MemtierError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return MemtierError(f"PostgreSQL: {first[:300]}")


@click.group()
def shared():
    """Share the project and user tiers through PostgreSQL, for agents on many machines (docs/shared.md)."""


@shared.command()
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.pass_obj
def init(state, as_json):
    """Create or update the schema (as the owner in shared.admin_dsn_env, else shared.dsn_env), grant the
    application role of shared.dsn_env, and check that role. Idempotent; hosts may run it at once."""
    cfg = _need(state)
    import os

    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    from ..shared import schema
    from ..shared.engine import ENGINE_ERRORS, dsn_from_env

    dsn = dsn_from_env(cfg.shared.dsn_env)
    admin = os.environ.get(cfg.shared.admin_dsn_env, "").strip() or dsn
    role = conninfo_to_dict(dsn).get("user")
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=max(1, int(cfg.shared.connect_timeout_s))) as conn:
            schema.apply(conn, role if admin != dsn else None)
        with psycopg.connect(dsn, autocommit=True, connect_timeout=max(1, int(cfg.shared.connect_timeout_s))) as conn:
            problems = schema.problems(conn)
            version = schema.version(conn)
    except ENGINE_ERRORS as exc:
        raise _engine_error(exc) from None
    if as_json:
        click.echo(json_line({"schema_version": version, "role": role, "problems": problems}))
    else:
        click.echo(f"memtier shared: schema version {version} ready; application role {role or '(the DSN user)'}")
        for p in problems:
            click.echo(f"  problem: {printable(p)}", err=True)
    if problems:
        sys.exit(1)


@shared.command()
@click.option("--check", is_flag=True, help="Also ask the engine: the tenant's rows, the feed's head, each host's lag.")
@click.option("--json", "as_json", is_flag=True, help="Print the status as one JSON object.")
@click.pass_obj
def status(state, check, as_json):
    """Whether this host's shared tiers are online, since when they are not, and what waits to be shipped."""
    cfg = state.config
    from ..shared.outbox import Outbox, load_json
    from ..shared.sync import host_of, read_status, tenant_of

    out = {"backend": cfg.shared.backend, "tenant": tenant_of(cfg), "host": host_of(cfg)}
    if cfg.shared.backend == "postgres":
        out.update(read_status(cfg.memory_root))
        out["backlog_bytes"] = Outbox(cfg.memory_root, cfg.shared.tiers).backlog_bytes()
        out["pull_cursor"] = load_json(cfg.memory_root / ".shared" / "pulled.json").get("cursor", 0)
    if check and cfg.shared.backend == "postgres":
        _need(state)
        from ..shared.engine import ENGINE_ERRORS
        from ..shared.sync import engine_for

        engine = engine_for(cfg)
        try:
            with engine.tx() as cur:
                cur.execute("SELECT count(*), coalesce(max(seq), 0) FROM memtier_records WHERE tenant = %s", (engine.tenant,))
                rows, head = cur.fetchone()
                cur.execute("SELECT host, cursor, seen FROM memtier_hosts WHERE tenant = %s ORDER BY host", (engine.tenant,))
                hosts = [{"host": h, "cursor": c, "seen": s.isoformat()} for h, c, s in cur.fetchall()]
            out["engine"] = {"reachable": True, "rows": rows, "feed_head": head, "hosts": hosts}
        except ENGINE_ERRORS as exc:
            out["engine"] = {"reachable": False, "error": str(_engine_error(exc))}
        finally:
            engine.close()
    if as_json:
        click.echo(json_line(out))
        return
    if cfg.shared.backend != "postgres":
        click.echo("memtier shared: off (shared.backend: none); memory lives on this host only")
        return
    online = out.get("online")
    state_line = ("online" if online else f"OFFLINE since {out.get('offline_since')}: {out.get('last_error')}"
                  if online is False else "not started (no long-lived memtier process has synced this workspace yet)")
    click.echo(f"memtier shared: tenant {printable(out['tenant'])}, host {printable(out['host'])}: {printable(state_line)}")
    click.echo(f"  waiting to be shipped: {out['backlog_bytes']} bytes; pulled up to feed position {out['pull_cursor']}")
    if out.get("leader"):
        click.echo(f"  this host leads the tenant's checks; forks found: {out.get('forks')}")
    if "engine" in out:
        e = out["engine"]
        click.echo(f"  engine: {e['rows']} rows, feed at {e['feed_head']}" if e["reachable"] else f"  engine: {e['error']}")
        for h in e.get("hosts", []):
            click.echo(f"    host {printable(h['host'])}: at {h['cursor']} (seen {h['seen']})")


@contextlib.contextmanager
def _one_shot(cfg, *, exclusive: bool = False):
    """A :class:`Sync` for one command: the engine checked first (its refusal named in one line), closed after.
    ``exclusive``: this workspace's sync lock too (what appends to the ledgers must be the only one)."""
    from ..shared.engine import ENGINE_ERRORS
    from ..shared.sync import Sync

    sync = Sync(cfg)
    try:
        if exclusive and not sync.take_lock():
            raise MemtierError(f"{cfg.memory_root}: a running memtier process syncs this workspace and pulls already")
        sync.engine.check()
        yield sync
    except ENGINE_ERRORS as exc:
        raise _engine_error(exc) from None
    finally:
        sync.release()


@shared.command()
@click.option("--all", "everything", is_flag=True, help="Ship every line again from the start (importing an existing "
              "workspace; what the engine holds already is skipped by its id).")
@click.option("--json", "as_json", is_flag=True, help="Print the counts as one JSON object.")
@click.pass_obj
def push(state, everything, as_json):
    """Ship what this host's shared ledgers hold and the engine does not (idempotent)."""
    t0 = time.perf_counter()
    with _one_shot(_need(state)) as sync:
        if everything:
            sync.outbox.reset()
        lines = sync.ship_all()
    out = {"lines": lines, "new_rows": sync.pushed, "seconds": round(time.perf_counter() - t0, 3)}
    click.echo(json_line(out) if as_json else
               f"memtier shared: {lines} lines read, {sync.pushed} new to the engine in {out['seconds']} s")


@shared.command()
@click.option("--json", "as_json", is_flag=True, help="Print the count as one JSON object.")
@click.pass_obj
def pull(state, as_json):
    """Bring the tenant's rows this host lacks into its ledgers (a new host's bootstrap)."""
    with _one_shot(_need(state), exclusive=True) as sync:
        n = sync.pull_once()
    click.echo(json_line({"lines": n, "cursor": sync.puller.cursor}) if as_json else
               f"memtier shared: {n} lines pulled; feed position {sync.puller.cursor}")


@shared.command()
@click.option("--json", "as_json", is_flag=True, help="Print the findings as one JSON object.")
@click.pass_obj
def doctor(state, as_json):
    """Check the connection, the role (no superuser, no BYPASSRLS, not the tables' owner), the schema and the
    round trip; exit status 1 when anything is wrong."""
    cfg = _need(state)
    import psycopg

    from ..shared import schema
    from ..shared.engine import ENGINE_ERRORS, connect_kwargs, dsn_from_env

    dsn = dsn_from_env(cfg.shared.dsn_env)
    t0 = time.perf_counter()
    try:
        with psycopg.connect(dsn, autocommit=True, **connect_kwargs(cfg.shared.connect_timeout_s,
                                                                     cfg.shared.statement_timeout_ms)) as conn:
            connect_ms = (time.perf_counter() - t0) * 1000
            problems = schema.problems(conn)
            t1 = time.perf_counter()
            conn.execute("SELECT 1")
            rtt_ms = (time.perf_counter() - t1) * 1000
            server = conn.info.server_version
    except ENGINE_ERRORS as exc:
        raise _engine_error(exc) from None
    out = {"server_version": server, "connect_ms": round(connect_ms, 2), "round_trip_ms": round(rtt_ms, 3),
           "problems": problems}
    if as_json:
        click.echo(json_line(out))
    else:
        click.echo(f"memtier shared: PostgreSQL {server // 10000}.{server % 10000}, connect {out['connect_ms']} ms, "
                   f"round trip {out['round_trip_ms']} ms")
        click.echo("  no problems" if not problems else "\n".join(f"  problem: {printable(p)}" for p in problems))
    if problems:
        sys.exit(1)
