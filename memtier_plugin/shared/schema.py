"""The engine's schema: ``schema.sql`` applied under an advisory lock, and the checks that make
row-level security a storage boundary rather than a filter the caller must remember.

:func:`apply` runs as an owner (``shared.admin_dsn_env``) and grants the application role (the user of
``shared.dsn_env``) what it needs and nothing more. :func:`problems` says what is wrong for the role in
hand: a superuser or ``BYPASSRLS`` role, or the table's owner, would read every tenant's rows.
"""

from __future__ import annotations

from importlib import resources

import psycopg
from psycopg import sql

VERSION = 1
TABLES = ("memtier_records", "memtier_heads", "memtier_hosts")
_LOCK = "memtier:schema"


def ddl() -> str:
    return resources.files(__package__).joinpath("schema.sql").read_text(encoding="utf-8")


def apply(admin: psycopg.Connection, app_role: str | None) -> None:
    """Create or update the schema (idempotent; two hosts may run it at once) and grant ``app_role``."""
    with admin.transaction():
        admin.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (_LOCK,))
        admin.execute(ddl())
        if app_role:
            role = sql.Identifier(app_role)
            admin.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(role))
            for table in TABLES:
                admin.execute(sql.SQL("GRANT SELECT, INSERT, UPDATE ON {} TO {}").format(sql.Identifier(table), role))
            admin.execute(sql.SQL("GRANT SELECT ON memtier_schema TO {}").format(role))


def problems(conn: psycopg.Connection) -> list[str]:
    """What makes this connection's role unsafe or unready for the shared tiers (empty: none)."""
    out = []
    row = conn.execute("SELECT rolsuper, rolbypassrls, current_user FROM pg_roles WHERE rolname = current_user").fetchone()
    if row is None:
        return ["the connection's role is not in pg_roles"]
    superuser, bypass, user = row
    if superuser:
        out.append(f"role {user} is a superuser: row-level security does not apply to it; connect as a plain role")
    if bypass:
        out.append(f"role {user} has BYPASSRLS: it would read every tenant's rows")
    for table in TABLES:
        t = conn.execute("SELECT c.relrowsecurity, c.relforcerowsecurity, pg_get_userbyid(c.relowner) "
                         "FROM pg_class c WHERE c.relname = %s AND c.relkind = 'r'", (table,)).fetchone()
        if t is None:
            out.append(f"table {table} is missing: run `memtier shared init`")
            continue
        enabled, forced, owner = t
        if not (enabled and forced):
            out.append(f"table {table}: row-level security is not enabled and forced")
        if owner == user:
            out.append(f"role {user} owns {table}: connect as a role that does not own the tables")
    return out


def version(conn: psycopg.Connection) -> int | None:
    try:
        row = conn.execute("SELECT max(version) FROM memtier_schema").fetchone()
    except psycopg.errors.UndefinedTable:
        return None
    return row[0] if row else None
