"""The schema: numbered SQL migrations (``migrations/NNNN_*.sql``: tables, columns, indexes, data
moves), the functions and their triggers (``migrations/functions.sql``, run again after a migration
and whenever it changed), the store's metadata, and what every new connection checks before use (the application
role, the vector type, the model's column).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.resources
import logging
import re

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from rushmem.store.engine.connection import Connection
from rushmem.store.engine.pg import PgSession
from rushmem.store.engine.session import VectorSchema
from rushmem_contract.errors import ConfigurationError, SchemaMismatch

logger = logging.getLogger(__name__)

# Serialises migrations (and role changes) across processes and containers.
MIGRATION_LOCK_KEY = 0x616D5F6D6967  # "am_mig"
_MIGRATION_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
FUNCTIONS_FILE = "functions.sql"
# functions.sql's row in agent_memory_migrations (no migration is numbered 0): its checksum as last
# run. Applying a migration deletes the row, so the functions run again after every migration (one
# may have dropped a table with its triggers) and a crash in between cannot skip them.
FUNCTIONS_VERSION = 0
FUNCTIONS_NAME = "functions"


@dataclasses.dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available_migrations() -> list[Migration]:
    folder = importlib.resources.files("rushmem.store") / "migrations"
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION_FILE.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda m: m.version)


@dataclasses.dataclass(frozen=True)
class Functions:
    """functions.sql: every function of the schema and the triggers calling them, as they are now."""

    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def schema_functions() -> Functions:
    folder = importlib.resources.files("rushmem.store") / "migrations"
    return Functions((folder / FUNCTIONS_FILE).read_text(encoding="utf-8"))


def apply_migrations(conn: Connection, *, dimension: int, fingerprint: str) -> list[str]:
    """Apply pending migrations in order, each in its own transaction, then functions.sql if it
    changed or a migration was applied; returns what was applied (``functions`` for the latter).

    Safe to run from many processes at once: an advisory lock serialises them and the
    version table makes a second run a no-op.
    """
    if not 0 < dimension <= 16000:
        raise SchemaMismatch(f"embedding dimension {dimension} is outside pgvector's range (1..16000)")
    applied_versions, checksum = _recorded(conn)
    pending = [m for m in available_migrations() if m.version not in applied_versions]
    functions = schema_functions()
    if not pending and checksum == functions.checksum:
        return []  # the common case (every cold start): read-only, no lock, no DDL privileges needed
    try:
        applied = _apply(conn, pending, dimension=dimension, fingerprint=fingerprint)
        if _apply_functions(conn, functions):
            applied.append(FUNCTIONS_NAME)
        return applied
    except psycopg.errors.InsufficientPrivilege as exc:
        names = ", ".join([*(f"{m.version:04d}_{m.name}" for m in pending), FUNCTIONS_FILE])
        raise SchemaMismatch(
            f"the database needs {names}, which this database user may not apply: "
            "run `rushmem migrate` as the owner (on AWS the deploy's migration function does it)"
        ) from exc


def _recorded(conn: Connection) -> tuple[set[int], str | None]:
    """The migrations applied, and functions.sql's checksum as last run (None: not since the last
    migration), in one statement."""
    exists = conn.execute("SELECT to_regclass('agent_memory_migrations') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return set(), None
    # Through to_jsonb, because a store before migration 0020 has no checksum column.
    rows = conn.execute("SELECT version, to_jsonb(m) ->> 'checksum' FROM agent_memory_migrations m").fetchall()
    versions = {row[0] for row in rows if row[0] != FUNCTIONS_VERSION}
    return versions, next((row[1] for row in rows if row[0] == FUNCTIONS_VERSION), None)


def _apply(conn: Connection, pending: list[Migration], *, dimension: int, fingerprint: str) -> list[str]:
    applied: list[str] = []
    for migration in pending:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK_KEY])
            conn.execute(
                "CREATE TABLE IF NOT EXISTS agent_memory_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            done = conn.execute(
                "SELECT 1 FROM agent_memory_migrations WHERE version = %s", [migration.version]
            ).fetchone()
            if done:
                continue
            # A migration that only changed functions (now in functions.sql) is comments alone.
            if re.sub(r"--[^\n]*", "", migration.sql).strip():
                # The only substitution is a validated integer: the SQL stays static otherwise.
                conn.execute(migration.sql.replace("{dimension}", str(int(dimension))).encode())
            conn.execute(
                "INSERT INTO agent_memory_migrations (version, name) VALUES (%s, %s)",
                [migration.version, migration.name],
            )
            conn.execute("DELETE FROM agent_memory_migrations WHERE version = %s", [FUNCTIONS_VERSION])
            if migration.version == 1:
                conn.execute(
                    "INSERT INTO agent_memory_meta (key, value) VALUES ('embedding_model', %s),"
                    " ('embedding_dimension', %s) ON CONFLICT (key) DO NOTHING",
                    [fingerprint, str(dimension)],
                )
            applied.append(f"{migration.version:04d}_{migration.name}")
    return applied


def _apply_functions(conn: Connection, functions: Functions) -> bool:
    """Run functions.sql unless its checksum is recorded (another process ran it meanwhile), and
    record it; whether it ran. Only on a store with every migration applied: the functions name
    its tables and types."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK_KEY])
        row = conn.execute(
            "SELECT checksum FROM agent_memory_migrations WHERE version = %s", [FUNCTIONS_VERSION]
        ).fetchone()
        if row is not None and row[0] == functions.checksum:
            return False
        conn.execute(functions.sql.encode())
        conn.execute(
            "INSERT INTO agent_memory_migrations (version, name, checksum) VALUES (%s, %s, %s)"
            " ON CONFLICT (version) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()",
            [FUNCTIONS_VERSION, FUNCTIONS_NAME, functions.checksum],
        )
    return True


def register_types(conn: Connection) -> None:
    """Teach the connection the vector type (binary and text), for connections set up by hand
    (the Data API path needs nothing: vectors travel as text)."""
    if isinstance(conn, PgSession):
        register_vector(conn)


def read_meta(conn: Connection) -> dict[str, str]:
    exists = conn.execute("SELECT to_regclass('agent_memory_meta') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return {}
    return dict(conn.execute("SELECT key, value FROM agent_memory_meta").fetchall())


def resolve_vector_schema(meta: dict[str, str], *, dimension: int, fingerprint: str) -> VectorSchema:
    if "embedding_dimension" not in meta:
        raise SchemaMismatch("the database has no rushmem schema yet: run `rushmem migrate`")
    current, current_dimension = meta.get("embedding_model", "unknown"), int(meta["embedding_dimension"])
    if current == fingerprint and current_dimension == dimension:
        return VectorSchema(fingerprint, "embedding", current)
    if meta.get("previous_model") == fingerprint and int(meta.get("previous_dimension", 0)) == dimension:
        logger.warning(
            "the store moved to %s; this process still embeds with %s and reads the previous vectors "
            "read-only until it is redeployed with the new model",
            current,
            fingerprint,
        )
        return VectorSchema(fingerprint, "embedding_prev", current)
    raise SchemaMismatch(
        f"the database holds {current_dimension}-dimensional embeddings from {current}, "
        f"but the configured embedder is {fingerprint} ({dimension} dimensions); vectors from "
        "different models cannot be mixed. Configure the same embedder, point "
        "AGENT_MEMORY_DATABASE_URL / AGENT_MEMORY_DATA_DIR at another database, or move the store "
        "to the new model with `rushmem reembed`."
    )


def prepare_connection(
    conn: Connection, *, dimension: int, fingerprint: str, migrate: bool, role: str | None = None
) -> VectorSchema:
    """Run on every new connection: migrate (optionally), take the application role, register the
    vector type, resolve which vector column this embedder may use."""
    if migrate:
        apply_migrations(conn, dimension=dimension, fingerprint=fingerprint)
    if role and not isinstance(conn, PgSession):
        raise ConfigurationError(
            f"AGENT_MEMORY_DB_ROLE={role} cannot be set on the RDS Data API (it shares sessions): let "
            "AGENT_MEMORY_DB_SECRET_ARN name a login role that is a member of agent_memory_app"
        )
    if role and isinstance(conn, PgSession):
        # Session-level on purpose: this connection is ours alone (never a pooled one).
        try:
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
        except (psycopg.errors.InsufficientPrivilege, psycopg.errors.UndefinedObject) as exc:
            user = conn.info.user
            raise ConfigurationError(
                f"database user {user} may not SET ROLE {role}: run the migration with these credentials "
                f"(rushmem migrate, or the deploy's MigrateFunction), or have a DBA run "
                f"GRANT {role} TO {user}"
            ) from exc
    bypass = conn.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user").fetchone()
    if bypass and bypass[0]:
        logger.warning(
            "connected as a role that bypasses row-level security; set AGENT_MEMORY_DB_ROLE=agent_memory_app "
            "or log in as a member of agent_memory_app"
        )
    schema = resolve_vector_schema(read_meta(conn), dimension=dimension, fingerprint=fingerprint)
    register_types(conn)
    return schema
