"""All SQL of the package: migrations, writes, the two candidate legs of recall, listing, deletes.

Every statement that touches memories is scoped to one user (``WHERE user_id = ...``);
nothing here ranks over the whole table.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import importlib.resources
import logging
import re
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from agent_memory.embeddings.base import Vectors
from agent_memory.errors import ConfigurationError, InvalidInput, SchemaChanged, SchemaMismatch, StatementTimeout

Connection = psycopg.Connection[Any]
logger = logging.getLogger(__name__)

# Arbitrary constants for advisory locks.
MIGRATION_LOCK_KEY = 0x616D5F6D6967  # "am_mig": serialises migrations across processes and containers
# Held shared by every transaction that reads or writes vectors, exclusively by the re-embedding
# switch: a query never runs against a column that changed model under it.
VECTOR_SCHEMA_LOCK_KEY = 0x616D5F766563  # "am_vec"
_MIGRATION_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
TS_CONFIG = "english"  # must match the generated content_tsv column

MEMORY_COLUMNS = (
    "id, user_id, project_id, content, category, source, is_evergreen, created_at, updated_at, "
    "expires_at, superseded_by, superseded_at, metadata"
)


# --------------------------------------------------------------------------------------
# migrations and the schema check
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available_migrations() -> list[Migration]:
    folder = importlib.resources.files("agent_memory") / "migrations"
    found = []
    for entry in folder.iterdir():
        match = _MIGRATION_FILE.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda m: m.version)


def apply_migrations(conn: Connection, *, dimension: int, fingerprint: str) -> list[str]:
    """Apply pending migrations in order, each in its own transaction; returns the applied names.

    Safe to run from many processes at once: an advisory lock serialises them and the
    version table makes a second run a no-op.
    """
    if not 0 < dimension <= 16000:
        raise SchemaMismatch(f"embedding dimension {dimension} is outside pgvector's range (1..16000)")
    pending = pending_migrations(conn)
    if not pending:
        return []  # the common case (every cold start): read-only, no lock, no DDL privileges needed
    try:
        return _apply(conn, pending, dimension=dimension, fingerprint=fingerprint)
    except psycopg.errors.InsufficientPrivilege as exc:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in pending)
        raise SchemaMismatch(
            f"the database needs migrations {names}, which this database user may not apply: "
            "run `agent-memory migrate` as the owner (on AWS the deploy's migration function does it)"
        ) from exc


def pending_migrations(conn: Connection) -> list[Migration]:
    exists = conn.execute("SELECT to_regclass('agent_memory_migrations') IS NOT NULL").fetchone()
    applied: set[int] = set()
    if exists and exists[0]:
        applied = {row[0] for row in conn.execute("SELECT version FROM agent_memory_migrations").fetchall()}
    return [m for m in available_migrations() if m.version not in applied]


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
            # The only substitution is a validated integer: the SQL stays static otherwise.
            conn.execute(migration.sql.replace("{dimension}", str(int(dimension))).encode())
            conn.execute(
                "INSERT INTO agent_memory_migrations (version, name) VALUES (%s, %s)",
                [migration.version, migration.name],
            )
            if migration.version == 1:
                conn.execute(
                    "INSERT INTO agent_memory_meta (key, value) VALUES ('embedding_model', %s),"
                    " ('embedding_dimension', %s) ON CONFLICT (key) DO NOTHING",
                    [fingerprint, str(dimension)],
                )
            applied.append(f"{migration.version:04d}_{migration.name}")
    return applied


def register_types(conn: Connection) -> None:
    """Teach the connection the vector type (binary and text), for connections set up by hand."""
    register_vector(conn)


def read_meta(conn: Connection) -> dict[str, str]:
    exists = conn.execute("SELECT to_regclass('agent_memory_meta') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return {}
    return dict(conn.execute("SELECT key, value FROM agent_memory_meta").fetchall())


@dataclasses.dataclass(frozen=True)
class VectorSchema:
    """Which vector column this process may use, resolved from agent_memory_meta at connect time.

    Normally the column ``embedding``, read and write. During the grace period after
    ``agent-memory reembed`` switched the store to a new model, a process still configured
    with the previous model reads ``embedding_prev`` and may not write (its vectors would
    land in the new model's column); it should be redeployed with the new model.
    """

    fingerprint: str
    column: str
    current_model: str

    @property
    def writable(self) -> bool:
        return self.column == "embedding"

    @property
    def meta_key(self) -> str:
        """The agent_memory_meta entry naming the model of ``column``."""
        return "embedding_model" if self.writable else "previous_model"


def resolve_vector_schema(meta: dict[str, str], *, dimension: int, fingerprint: str) -> VectorSchema:
    if "embedding_dimension" not in meta:
        raise SchemaMismatch("the database has no agent-memory schema yet: run `agent-memory migrate`")
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
        "to the new model with `agent-memory reembed`."
    )


def prepare_connection(
    conn: Connection, *, dimension: int, fingerprint: str, migrate: bool, role: str | None = None
) -> VectorSchema:
    """Run on every new connection: migrate (optionally), take the application role, register the
    vector type, resolve which vector column this embedder may use."""
    if migrate:
        apply_migrations(conn, dimension=dimension, fingerprint=fingerprint)
    if role:
        # Session-level on purpose: this connection is ours alone (never a pooled one).
        try:
            conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
        except (psycopg.errors.InsufficientPrivilege, psycopg.errors.UndefinedObject) as exc:
            user = conn.info.user
            raise ConfigurationError(
                f"database user {user} may not SET ROLE {role}: run the migration with these credentials "
                f"(agent-memory migrate, or the deploy's MigrateFunction), or have a DBA run "
                f"GRANT {role} TO {user}"
            ) from exc
    bypass = conn.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user").fetchone()
    if bypass and bypass[0]:
        logger.warning(
            "connected as a role that bypasses row-level security; set AGENT_MEMORY_DB_ROLE=agent_memory_app "
            "or log in as a member of agent_memory_app"
        )
    schema = resolve_vector_schema(read_meta(conn), dimension=dimension, fingerprint=fingerprint)
    register_vector(conn)
    return schema


# --------------------------------------------------------------------------------------
# roles: the login role of the request-serving functions (run by the owner, after migrating)
# --------------------------------------------------------------------------------------

APP_ROLE = "agent_memory_app"
RDS_IAM_ROLE = "rds_iam"  # exists on RDS and Aurora only; membership makes a role log in with IAM tokens

# PostgreSQL 16 split membership into ADMIN, INHERIT and SET: a CREATEROLE user gets only ADMIN on
# the roles it creates, so "member" is not enough to SET ROLE (or to use the privileges) there.
_HAS_ROLE = """
SELECT CASE WHEN current_setting('server_version_num')::int >= 160000
            THEN pg_has_role(COALESCE(%(member)s::name, current_user), %(role)s, %(privilege)s)
            ELSE pg_has_role(COALESCE(%(member)s::name, current_user), %(role)s, 'MEMBER') END
"""


@dataclasses.dataclass(frozen=True)
class AppLogin:
    """What :func:`ensure_app_login` found or changed."""

    role: str
    created: bool = False
    granted: tuple[str, ...] = ()  # group roles granted to it now
    password_set: bool = False

    def summary(self) -> str:
        done = (["created"] if self.created else []) + [f"granted {r}" for r in self.granted]
        done += ["password set from the secret"] if self.password_set else []
        return f"{self.role}: {', '.join(done) or 'unchanged'}"


def _has_role(conn: Connection, member: str | None, role: str, privilege: str) -> bool:
    """Whether ``member`` (None: the current user) holds ``privilege`` (SET, USAGE, MEMBER) on ``role``."""
    row = conn.execute(_HAS_ROLE, {"member": member, "role": role, "privilege": privilege}).fetchone()
    return bool(row and row[0])


def _current_user(conn: Connection) -> str:
    row = conn.execute("SELECT current_user").fetchone()
    return str(row[0]) if row else ""


def _run_or_explain(conn: Connection, statement: sql.Composed, *, why: str, dba_sql: str) -> None:
    try:
        with conn.transaction():  # a savepoint: the caller's transaction survives to report
            conn.execute(statement)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise ConfigurationError(
            f"database user {_current_user(conn)} may not {why} ({str(exc).strip().splitlines()[0]}). "
            f"Have a DBA run, once: {dba_sql}; then deploy (or run agent-memory migrate) again"
        ) from exc


def ensure_can_set_role(conn: Connection, role: str) -> bool:
    """Let the connected user (the owner) SET ROLE ``role``; True when this granted it.

    For deployments that log in as the owner and SET ROLE agent_memory_app on each connection.
    """
    user = _current_user(conn)
    try:
        if _has_role(conn, None, role, "SET"):
            return False
    except psycopg.errors.UndefinedObject as exc:
        raise ConfigurationError(f"role {role} does not exist: run the migrations first") from exc
    grant = sql.SQL("GRANT {} TO {}").format(sql.Identifier(role), sql.Identifier(user))
    _run_or_explain(conn, grant, why=f"grant itself {role}", dba_sql=f"GRANT {role} TO {user};")
    return True


def ensure_app_login(conn: Connection, name: str, *, password: str | None = None, iam: bool = False) -> AppLogin:
    """Make ``name`` a login role that is a member of agent_memory_app, and nothing more.

    Creates it (LOGIN, plus rds_iam with ``iam`` where that role exists) when missing; an
    existing role keeps every attribute and membership it has, except that ``password`` (from
    the app secret, the source of truth RDS Proxy logs in with) is always applied. Refuses a
    role that would defeat row-level security (superuser, BYPASSRLS, the tables' owner).
    Idempotent and safe to run concurrently; one transaction.
    """
    user = _current_user(conn)
    if name == user:
        raise ConfigurationError(
            f"the application's login role ({name}) is the user running the migration, i.e. the tables' owner: "
            "an owner can switch row-level security off. Choose another name"
        )
    created, granted = False, []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK_KEY])
        row = conn.execute(
            "SELECT rolsuper OR rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = %s", [name]
        ).fetchone()
        if row is None:
            create = sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name))
            try:
                _run_or_explain(
                    conn,
                    create,
                    why=f"create the login role {name} (it lacks CREATEROLE)",
                    dba_sql=f"CREATE ROLE {name} LOGIN; GRANT {APP_ROLE} TO {name};"
                    + (f" GRANT {RDS_IAM_ROLE} TO {name};" if iam else "")
                    + (f" ALTER ROLE {name} PASSWORD '<the password in the app secret>';" if password else ""),
                )
                created = True
            except (psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
                pass  # roles are cluster-wide: a migration of another database made it just now
        elif row[0]:
            raise ConfigurationError(
                f"role {name} is a superuser or has BYPASSRLS: row-level security would not apply to it. "
                f"Use another role as AGENT_MEMORY_APP_DB_USER"
            )
        elif not row[1]:
            raise ConfigurationError(
                f"role {name} exists but cannot log in (NOLOGIN); this migration leaves existing roles as "
                f"they are: have a DBA run ALTER ROLE {name} LOGIN, or choose another name"
            )
        owner = conn.execute(
            "SELECT tableowner FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'user_memories'"
        ).fetchone()
        if owner is not None and _has_role(conn, name, owner[0], "MEMBER"):
            raise ConfigurationError(
                f"role {name} is (a member of) {owner[0]}, the owner of user_memories, and could switch "
                f"row-level security off: revoke {owner[0]} from it, or choose another name"
            )
        if not _has_role(conn, name, APP_ROLE, "USAGE"):
            grant = sql.SQL("GRANT {} TO {}").format(sql.Identifier(APP_ROLE), sql.Identifier(name))
            _run_or_explain(conn, grant, why=f"grant {APP_ROLE} to {name}", dba_sql=f"GRANT {APP_ROLE} TO {name};")
            granted.append(APP_ROLE)
            if not _has_role(conn, name, APP_ROLE, "USAGE"):
                raise ConfigurationError(
                    f"role {name} is NOINHERIT, so it cannot use {APP_ROLE}'s privileges: have a DBA run "
                    f"ALTER ROLE {name} INHERIT (or choose another name)"
                )
        has_iam_role = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [RDS_IAM_ROLE]).fetchone()
        if iam and has_iam_role:
            if created:
                grant = sql.SQL("GRANT {} TO {}").format(sql.Identifier(RDS_IAM_ROLE), sql.Identifier(name))
                _run_or_explain(
                    conn, grant, why=f"grant {RDS_IAM_ROLE} to {name}", dba_sql=f"GRANT {RDS_IAM_ROLE} TO {name};"
                )
                granted.append(RDS_IAM_ROLE)
            elif not _has_role(conn, name, RDS_IAM_ROLE, "MEMBER"):
                logger.warning(
                    "role %s exists without %s: it can log in with IAM tokens through RDS Proxy only (with its "
                    "secret registered there); to connect directly, a DBA runs GRANT %s TO %s",
                    name,
                    RDS_IAM_ROLE,
                    RDS_IAM_ROLE,
                    name,
                )
        if password is not None:
            if has_iam_role and _has_role(conn, name, RDS_IAM_ROLE, "MEMBER"):
                raise ConfigurationError(
                    f"role {name} is a member of {RDS_IAM_ROLE}, so RDS accepts only IAM tokens for it and the "
                    f"password RDS Proxy logs in with would be refused: REVOKE {RDS_IAM_ROLE} FROM {name}"
                )
            # Hashed here (SCRAM, as the server is configured): the password never reaches server logs.
            verifier = conn.pgconn.encrypt_password(password.encode(), name.encode())
            alter = sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(name), sql.Literal(verifier.decode()))
            _run_or_explain(
                conn,
                alter,
                why=f"set the password of {name}",
                dba_sql=f"ALTER ROLE {name} PASSWORD '<the password in the app secret>';",
            )
    return AppLogin(name, created=created, granted=tuple(granted), password_set=password is not None)


# --------------------------------------------------------------------------------------
# writes
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MemoryRow:
    """A memory ready to store: normalised, hashed and embedded."""

    user_id: str
    project_id: str | None
    content: str
    content_hash: bytes
    category: str
    embedding: np.ndarray
    source: str | None = None
    is_evergreen: bool = False
    created_at: dt.datetime | None = None
    observed_at: dt.datetime | None = None  # when the fact was (re)stated; drives updated_at
    expires_at: dt.datetime | None = None
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class WriteOutcome:
    id: uuid.UUID
    action: str  # "created" | "refreshed" | "near_duplicate" | "restated"


# Arrays of vectors travel in binary (%(...)b): as text, ten 384-d vectors take ~6 ms to
# format and parse (float by float), more than all the rest of writing them.
_UPSERT = """
INSERT INTO user_memories AS m (user_id, project_id, content, content_hash, category, source,
                                is_evergreen, embedding, created_at, updated_at, expires_at, metadata)
SELECT t.user_id, t.project_id, t.content, t.content_hash, t.category, t.source, t.is_evergreen,
       t.embedding, COALESCE(t.created_at, t.observed_at, now()), COALESCE(t.observed_at, t.created_at, now()),
       t.expires_at, t.metadata
FROM unnest(%(user_ids)s::text[], %(project_ids)s::text[], %(contents)s::text[], %(hashes)s::bytea[],
            %(categories)s::text[], %(sources)s::text[], %(evergreen)s::boolean[], %(embeddings)b::vector[],
            %(created)s::timestamptz[], %(observed)s::timestamptz[], %(expires)s::timestamptz[],
            %(metadata)s::jsonb[])
     AS t(user_id, project_id, content, content_hash, category, source, is_evergreen, embedding,
          created_at, observed_at, expires_at, metadata)
ON CONFLICT ON CONSTRAINT user_memories_fact_key DO UPDATE SET
    -- A restated fact is fresh again; a redelivered one (same time) changes nothing.
    updated_at    = GREATEST(m.updated_at, EXCLUDED.updated_at),
    is_evergreen  = m.is_evergreen OR EXCLUDED.is_evergreen,
    metadata      = m.metadata || EXCLUDED.metadata,
    -- A fact that had ended (superseded or expired) and is stated again lives again, with the
    -- new expiry; a live fact keeps its expiry unless the restatement brings one.
    expires_at    = CASE WHEN m.superseded_at IS NOT NULL OR m.expires_at <= now() THEN EXCLUDED.expires_at
                         ELSE COALESCE(EXCLUDED.expires_at, m.expires_at) END,
    superseded_at = NULL,
    superseded_by = NULL
RETURNING m.id, m.user_id, m.project_id, m.content_hash, (m.xmax = 0) AS inserted
"""

_NEAREST_EXISTING = """
SELECT i.ord, n.id, 1 - n.distance AS similarity
FROM unnest(%(embeddings)b::vector[], %(project_ids)s::text[], %(hashes)s::bytea[])
     WITH ORDINALITY AS i(embedding, project_id, content_hash, ord)
CROSS JOIN LATERAL (
    SELECT m.id, m.embedding <=> i.embedding AS distance
    FROM user_memories m
    WHERE m.user_id = %(user_id)s
      AND m.project_id IS NOT DISTINCT FROM i.project_id
      AND m.superseded_at IS NULL
    ORDER BY m.embedding <=> i.embedding
    LIMIT 1
) n
WHERE 1 - n.distance >= %(threshold)s
  -- Exact duplicates are the upsert's (it keeps its own bookkeeping).
  AND NOT EXISTS (
      SELECT 1 FROM user_memories e
      WHERE e.user_id = %(user_id)s AND e.content_hash = i.content_hash
        AND e.project_id IS NOT DISTINCT FROM i.project_id
  )
"""

# A restatement (near duplicate, or what the LLM marked as one): fresher, and it may bring an
# expiry (as the upsert's conflict branch does for exact duplicates).
_REFRESH = """
UPDATE user_memories AS m SET
    updated_at = GREATEST(m.updated_at, COALESCE(t.observed_at, now())),
    metadata   = m.metadata || t.metadata,
    expires_at = COALESCE(t.expires_at, m.expires_at)
FROM unnest(%(ids)s::uuid[], %(observed)s::timestamptz[], %(metadata)s::jsonb[], %(expires)s::timestamptz[])
     AS t(id, observed_at, metadata, expires_at)
WHERE m.id = t.id AND m.user_id = %(user_id)s
"""

# The targets of an ingest message's updates that are still live and visible from its scope
# (its project and the user-wide memories; every project without one), locked until commit.
_LIVE_TARGETS = """
SELECT id FROM user_memories
WHERE user_id = %(user_id)s AND id = ANY(%(ids)s) AND superseded_at IS NULL
  AND (expires_at IS NULL OR expires_at > now())
  AND (%(project_id)s::text IS NULL OR project_id IS NULL OR project_id = %(project_id)s)
ORDER BY id
FOR UPDATE
"""

_SUPERSEDE = """
UPDATE user_memories AS m SET superseded_at = now(), superseded_by = t.new_id
FROM unnest(%(old)s::uuid[], %(new)s::uuid[]) AS t(old_id, new_id)
WHERE m.id = t.old_id AND m.user_id = %(user_id)s AND m.superseded_at IS NULL AND t.old_id <> t.new_id
RETURNING m.id, t.new_id
"""


@functools.lru_cache(maxsize=64)
def _begin_sql(extra_settings: tuple[str, ...], lock: bool, meta_key: str | None) -> str:
    """The first statement of a user transaction, composed once per shape (not per request)."""
    names = ("agent_memory.user_id", "agent_memory.change_source", "agent_memory.change_reason", *extra_settings)
    calls = sql.SQL(", ").join(sql.SQL("set_config({}, %s, true)").format(sql.Literal(n)) for n in names)
    if lock:
        calls = sql.SQL("{}, pg_advisory_xact_lock(hashtextextended(%s, 7))").format(calls)
    if meta_key is not None:
        # The shared lock first, then the check: the switch cannot happen between them and the query.
        calls = sql.SQL(
            "{}, pg_advisory_xact_lock_shared({}), (SELECT value FROM agent_memory_meta WHERE key = {})"
        ).format(calls, sql.Literal(VECTOR_SCHEMA_LOCK_KEY), sql.Literal(meta_key))
    return sql.SQL("SELECT {}").format(calls).as_string()


@contextlib.contextmanager
def user_transaction(
    conn: Connection,
    user_id: str,
    *,
    source: str | None = None,
    reason: str | None = None,
    lock: bool = False,
    settings: dict[str, str] | None = None,
    schema: VectorSchema | None = None,
) -> Iterator[Connection]:
    """One transaction on one user's memories.

    Sets, for this transaction only (set_config(..., true): safe on pooled connections),
    the user that row-level security lets through, and the source and reason the history
    trigger records; optionally other settings; with ``lock``, serialises this user's
    writers (the near-duplicate check reads before it writes); with ``schema``, checks in
    the same round trip that the store still uses the model it was resolved against.

    The block runs in pipeline mode (see ``_transaction``; off with AGENT_MEMORY_DB_PIPELINE=false):
    a statement is sent, and its rowcount known, only when a result is fetched or the block
    ends; use RETURNING and fetch when the block needs to know what a statement did.
    """
    query, values = _begin(user_id, source=source, reason=reason, lock=lock, settings=settings, schema=schema)
    with _transaction(conn):
        _check_schema(conn.execute(query, values).fetchone(), schema)
        yield conn


@contextlib.contextmanager
def _transaction(conn: Connection) -> Iterator[None]:
    """A transaction whose BEGIN travels with the first statement and whose COMMIT travels
    with the last ones (pipeline mode): two round trips fewer than ``conn.transaction()``,
    which waits for each on its own. Statements in the block are sent when a result is
    needed; an error, or an exception in the block, rolls everything back. Inside a
    caller's transaction, on a connection that is not in autocommit, or with pipelining
    turned off, it is a plain ``conn.transaction()``: a savepoint, or psycopg's own BEGIN.
    """
    idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    if not (_may_pipeline(conn) and conn.autocommit and idle):
        with conn.transaction():
            yield
        return
    try:
        with conn.pipeline():
            conn.execute("BEGIN")
            yield
            conn.execute("COMMIT")
    except BaseException:
        _recover(conn)
        raise


def _may_pipeline(conn: Connection) -> bool:
    """Pipeline mode unless AGENT_MEMORY_DB_PIPELINE turned it off for this connection (a
    plain psycopg connection, as tests open, may), or the caller already runs a pipeline."""
    wanted = bool(getattr(conn, "pipeline_transactions", True))
    return wanted and conn.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF


def _recover(conn: Connection) -> None:
    """After a failed pipelined transaction: roll it back, or close a connection that can't be.

    Not a plain ROLLBACK: rollback() also forgets the statements psycopg prepared, some of
    which an aborted pipeline never let reach the server. When the server went away with
    statements still in flight, psycopg may fail to leave pipeline mode ("cannot exit
    pipeline mode while busy") before the connection looks broken; closing it then makes the
    caller see a lost connection (DatabaseUnavailable, retried), not an unexplained error.
    """
    if conn.closed:
        return
    if conn.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF:
        try:
            conn.rollback()
            return
        except psycopg.Error:
            logger.debug("rollback after a failed transaction failed", exc_info=True)
    conn.close()


def _begin(
    user_id: str,
    *,
    source: str | None = None,
    reason: str | None = None,
    lock: bool = False,
    settings: dict[str, str] | None = None,
    schema: VectorSchema | None = None,
) -> tuple[str, list[Any]]:
    extra = tuple(settings or {})
    values = [user_id, source or "", reason or "", *(settings or {}).values()]
    if lock:
        values.append(user_id)
    return _begin_sql(extra, lock, schema.meta_key if schema is not None else None), values


def _check_schema(row: Any, schema: VectorSchema | None) -> None:
    if schema is not None and row is not None and row[-1] != schema.fingerprint:
        raise SchemaChanged(f"the vectors this process reads ({schema.column}) are no longer {schema.fingerprint}")


def _read_as_user(
    conn: Connection,
    user_id: str,
    query: str,
    params: dict[str, Any],
    *,
    settings: dict[str, str],
    schema: VectorSchema | None,
) -> list[dict[str, Any]]:
    """One read-only statement in a user transaction, in a single round trip.

    The same statements as ``user_transaction`` (BEGIN, the scope set_config, the query,
    COMMIT), but nothing is fetched inside the transaction, so ``_transaction`` sends them
    all with one Sync: one network round trip instead of four, which counts between Lambda
    and the database. The schema check runs after COMMIT, which is harmless for a read: the
    rows are discarded when it fails.
    """
    begin_sql, values = _begin(user_id, settings=settings, schema=schema)
    # Binary results: parsing 384 floats per row from text costs more than the query itself.
    cur = conn.cursor(row_factory=dict_row, binary=True)
    begin: psycopg.Cursor[Any] | None = None
    try:
        with _transaction(conn):
            begin = conn.execute(begin_sql, values)
            cur.execute(query, params)
    except psycopg.Error:
        # The query may have failed *because* the store moved to another model (the vector
        # column changed dimension): that, not the query's error, is what the caller handles.
        if begin is not None and begin.pgresult is not None and begin.rowcount == 1:
            _check_schema(begin.fetchone(), schema)
        raise
    assert begin is not None
    _check_schema(begin.fetchone(), schema)
    return cur.fetchall()


@contextlib.contextmanager
def maintenance_transaction(conn: Connection, *, source: str, reason: str | None = None) -> Iterator[Connection]:
    """A transaction across all users (purge, re-embedding) as agent_memory_maintenance."""
    with conn.transaction():
        try:
            conn.execute("SET LOCAL ROLE agent_memory_maintenance")
        except psycopg.errors.InsufficientPrivilege as exc:
            raise ConfigurationError(
                "this maintenance task needs a database user that is a member of agent_memory_maintenance "
                "(the migration grants it to the owner); run it with the owner's credentials"
            ) from exc
        conn.execute(
            "SELECT set_config('agent_memory.change_source', %s, true), "
            "set_config('agent_memory.change_reason', %s, true)",
            [source, reason or ""],
        )
        yield conn


def _upsert_params(rows: Sequence[MemoryRow]) -> dict[str, Any]:
    return {
        "user_ids": [r.user_id for r in rows],
        "project_ids": [r.project_id for r in rows],
        "contents": [r.content for r in rows],
        "hashes": [r.content_hash for r in rows],
        "categories": [r.category for r in rows],
        "sources": [r.source for r in rows],
        "evergreen": [r.is_evergreen for r in rows],
        "embeddings": [r.embedding for r in rows],
        "created": [r.created_at for r in rows],
        "observed": [r.observed_at for r in rows],
        "expires": [r.expires_at for r in rows],
        "metadata": [Jsonb(r.metadata) for r in rows],
    }


def upsert_memories(
    conn: Connection,
    rows: Sequence[MemoryRow],
    *,
    schema: VectorSchema | None = None,
    near_duplicate_threshold: float | None = None,
    exact_only: Collection[int] = (),
) -> list[WriteOutcome]:
    """Store rows in one transaction; outcomes in input order.

    Exact duplicates (same user, project and normalised content) refresh the existing row.
    With a threshold, a row whose nearest live neighbour in the same scope is at least that
    similar refreshes that neighbour instead, except the rows in ``exact_only`` (a fact that
    replaces a memory must not fold into it). Callers pass rows already de-duplicated by hash.
    """
    if not rows:
        return []
    _check_writable(schema)
    outcomes: dict[int, WriteOutcome] = {}
    by_user: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_user.setdefault(row.user_id, []).append(i)
    # One transaction per user: row-level security admits one user at a time. The
    # write path sends one user per call, so there it is one transaction per message.
    for user_id, indexes in by_user.items():
        sources = {rows[i].source for i in indexes}
        source = sources.pop() if len(sources) == 1 else None
        with user_transaction(conn, user_id, source=source, lock=True, schema=schema):
            _write_rows(conn, user_id, rows, indexes, outcomes, near_duplicate_threshold, exact_only)
    return [outcomes[i] for i in range(len(rows))]


def _check_writable(schema: VectorSchema | None) -> None:
    if schema is not None and not schema.writable:
        raise SchemaMismatch(
            f"the store now embeds with {schema.current_model}; this process uses {schema.fingerprint} and "
            "may only read until it is redeployed with the new model (writes are refused so that nothing "
            "is stored with the wrong model; queued messages are retried)"
        )


def _write_rows(
    conn: Connection,
    user_id: str,
    rows: Sequence[MemoryRow],
    indexes: list[int],
    outcomes: dict[int, WriteOutcome],
    near_duplicate_threshold: float | None,
    exact_only: Collection[int],
) -> None:
    """Store one user's rows (``indexes`` into ``rows``) inside that user's locked transaction,
    recording each row's outcome by index."""
    to_insert = indexes
    if near_duplicate_threshold is not None and near_duplicate_threshold <= 1.0:
        near = [i for i in indexes if i not in exact_only]
        if near:
            _refresh_near_duplicates(conn, user_id, rows, near, near_duplicate_threshold, outcomes)
        to_insert = [i for i in indexes if i not in outcomes]
    if to_insert:
        batch = [rows[i] for i in to_insert]
        by_key = {(r.project_id, r.content_hash): i for i, r in zip(to_insert, batch, strict=True)}
        for rec in conn.execute(_UPSERT, _upsert_params(batch)).fetchall():
            index = by_key[(rec[2], bytes(rec[3]))]
            outcomes[index] = WriteOutcome(rec[0], "created" if rec[4] else "refreshed")


def message_ingested(conn: Connection, user_id: str, message_hash: bytes) -> bool:
    """Whether this exact ingest message was already written (a redelivery); one round trip."""
    found = _read_as_user(conn, user_id, _RECEIPT, {"user_id": user_id, "hash": message_hash}, settings={}, schema=None)
    return bool(found)


def _has_receipt(conn: Connection, user_id: str, message_hash: bytes) -> bool:
    return conn.execute(_RECEIPT, {"user_id": user_id, "hash": message_hash}).fetchone() is not None


_RECEIPT = "SELECT 1 FROM ingested_messages WHERE user_id = %(user_id)s AND message_hash = %(hash)s"


@dataclasses.dataclass(frozen=True)
class Updates:
    """What an ingest message's facts say about existing memories, by row index.

    ``restates``: the row says the same as that memory, which is refreshed instead of storing
    the row. ``replaces``: those memories are superseded by the row's memory. Targets must be
    live and visible from ``project_id`` (the message's scope) when the write runs; the others
    are skipped, and their rows stored as new.
    """

    restates: Mapping[int, uuid.UUID] = dataclasses.field(default_factory=dict)
    replaces: Mapping[int, Sequence[uuid.UUID]] = dataclasses.field(default_factory=dict)
    project_id: str | None = None

    @property
    def targets(self) -> set[uuid.UUID]:
        return {*self.restates.values(), *(t for ids in self.replaces.values() for t in ids)}


@dataclasses.dataclass(frozen=True)
class IngestWrite:
    """What one ingest message wrote: outcomes in row order, (old, new) supersessions, and
    the update targets skipped because they had ended or left the scope meanwhile."""

    outcomes: list[WriteOutcome]
    superseded: list[tuple[uuid.UUID, uuid.UUID]]
    stale: list[uuid.UUID]


def ingest_message(
    conn: Connection,
    user_id: str,
    message_hash: bytes,
    rows: Sequence[MemoryRow],
    *,
    conversation_id: str | None = None,
    schema: VectorSchema | None = None,
    near_duplicate_threshold: float | None = None,
    updates: Updates | None = None,
) -> IngestWrite | None:
    """Write one ingest message's memories, its updates (restatements refreshed, replaced
    memories superseded) and its receipt in one transaction: all of it or nothing.

    None (and no change) when the message was already written: concurrent deliveries of the
    same message serialise on the user's lock, and the second finds the first's receipt.
    """
    if any(r.user_id != user_id for r in rows):
        raise ValueError("an ingest message writes the memories of its own user only")
    updates = updates or Updates()
    _check_writable(schema)
    # The transaction is pipelined (see _transaction): the refreshes, the receipt and COMMIT
    # travel with the next statement whose result is needed.
    with user_transaction(conn, user_id, source=conversation_id, lock=True, schema=schema):
        if _has_receipt(conn, user_id, message_hash):
            return None
        targets = updates.targets
        live: set[uuid.UUID] = set()
        if targets:
            found = conn.execute(
                _LIVE_TARGETS, {"user_id": user_id, "ids": sorted(targets), "project_id": updates.project_id}
            ).fetchall()
            live = {r[0] for r in found}
        outcomes: dict[int, WriteOutcome] = {}
        restated = {i: t for i, t in updates.restates.items() if t in live}
        _refresh(conn, user_id, [(t, rows[i]) for i, t in restated.items()])
        outcomes.update((i, WriteOutcome(t, "restated")) for i, t in restated.items())
        replaces = {i: [t for t in ids if t in live] for i, ids in updates.replaces.items()}
        rest = [i for i in range(len(rows)) if i not in restated]
        # A fact that replaces a memory must not fold into it as a near-duplicate.
        exact_only = {i for i in rest if replaces.get(i)}
        _write_rows(conn, user_id, rows, rest, outcomes, near_duplicate_threshold, exact_only)
        pairs = [(old, outcomes[i].id) for i, ids in replaces.items() for old in ids]
        superseded = _supersede(conn, user_id, pairs)
        conn.execute(
            "INSERT INTO ingested_messages (user_id, message_hash, conversation_id, memories) VALUES (%s, %s, %s, %s)",
            [user_id, message_hash, conversation_id, len(rows)],
        )
    return IngestWrite([outcomes[i] for i in range(len(rows))], superseded, sorted(targets - live))


def _supersede(
    conn: Connection, user_id: str, pairs: Sequence[tuple[uuid.UUID, uuid.UUID]]
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Mark live memories (old) as replaced by new ones; the (old, new) pairs actually marked."""
    if not pairs:
        return []
    found = conn.execute(
        _SUPERSEDE, {"old": [p[0] for p in pairs], "new": [p[1] for p in pairs], "user_id": user_id}
    ).fetchall()
    return [(r[0], r[1]) for r in found]


def related_memories(
    conn: Connection, scope: Scope, vectors: Sequence[np.ndarray], *, limit: int, schema: VectorSchema | None = None
) -> list[dict[str, Any]]:
    """The user's live memories in scope most similar to any of ``vectors`` (best first), with
    their embeddings and that best similarity: what an LLM extractor is shown.

    Exact, over the user's rows only: an index scan filtered to one user can come back short.
    """
    if not vectors or limit <= 0:
        return []
    column = sql.Identifier(schema.column if schema else "embedding")
    query = sql.SQL(_RELATED).format(scope=_scope_filter(scope), vec=column)
    params: dict[str, Any] = {
        "user_id": scope.user_id,
        "project_id": scope.project_id,
        "now": scope.now,
        "vectors": list(vectors),
        "limit": limit,
    }
    with (
        user_transaction(conn, scope.user_id, schema=schema),
        conn.cursor(row_factory=dict_row, binary=True) as cur,
    ):
        rows = cur.execute(query, params).fetchall()
    for row in rows:
        row["embedding"] = np.asarray(row["embedding"].to_numpy(), dtype=np.float32)
    return rows


_RELATED = """
WITH scoped AS MATERIALIZED (
    SELECT id, project_id, content, category, {vec} AS embedding FROM user_memories WHERE {scope}
), best AS (
    SELECT s.id, max(1 - (s.embedding <=> q.v)) AS similarity
    FROM scoped s CROSS JOIN unnest(%(vectors)s::vector[]) AS q(v)
    GROUP BY s.id
    ORDER BY similarity DESC, s.id
    LIMIT %(limit)s
)
SELECT s.id, s.project_id, s.content, s.category, s.embedding, b.similarity
FROM best b JOIN scoped s USING (id)
ORDER BY b.similarity DESC, s.id
"""


def _refresh_near_duplicates(
    conn: Connection,
    user_id: str,
    rows: Sequence[MemoryRow],
    indexes: list[int],
    threshold: float,
    outcomes: dict[int, WriteOutcome],
) -> list[int]:
    """Refresh near-identical existing memories of the user; return the indexes still to insert."""
    found = conn.execute(
        _NEAREST_EXISTING,
        {
            "embeddings": [rows[i].embedding for i in indexes],
            "project_ids": [rows[i].project_id for i in indexes],
            "hashes": [rows[i].content_hash for i in indexes],
            "user_id": user_id,
            "threshold": threshold,
        },
    ).fetchall()
    matches = {indexes[int(ordinal) - 1]: memory_id for ordinal, memory_id, _similarity in found}
    _refresh(conn, user_id, [(memory_id, rows[i]) for i, memory_id in matches.items()])
    for i, memory_id in matches.items():
        outcomes[i] = WriteOutcome(memory_id, "near_duplicate")
    return [i for i in indexes if i not in matches]


def _refresh(conn: Connection, user_id: str, restated: Sequence[tuple[uuid.UUID, MemoryRow]]) -> None:
    """Refresh existing memories (id) with what a restating row brings: its time, metadata, expiry."""
    if not restated:
        return
    conn.execute(
        _REFRESH,
        {
            "ids": [memory_id for memory_id, _ in restated],
            "observed": [row.observed_at for _, row in restated],
            "metadata": [Jsonb(row.metadata) for _, row in restated],
            "expires": [row.expires_at for _, row in restated],
            "user_id": user_id,
        },
    )


# --------------------------------------------------------------------------------------
# recall: candidates from two index-backed legs
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Scope:
    """Whose memories a query may see. With a project: that project's plus the user-wide ones."""

    user_id: str
    project_id: str | None = None
    now: dt.datetime | None = None  # "as of": hides memories created later and those expired by then
    include_inactive: bool = False  # superseded and expired memories too (debugging)


@dataclasses.dataclass
class Candidate:
    memory: dict[str, Any]
    embedding: Vectors
    distance: float  # cosine distance, 0 = same direction
    text_rank: float  # ts_rank_cd, 0 when the text does not match
    vector_rank: int | None  # 1-based position in the vector leg, None if not in it
    text_position: int | None  # 1-based position in the full-text leg, None if not in it


def _scope_filter(scope: Scope) -> sql.Composable:
    return sql.SQL(_scope_sql(scope.project_id is not None, scope.include_inactive, scope.now is not None))


@functools.lru_cache(maxsize=16)
def _scope_sql(has_project: bool, include_inactive: bool, as_of: bool) -> str:
    """The WHERE clause of a user's scope, composed once per shape."""
    parts = ["user_id = %(user_id)s"]
    if has_project:
        parts.append("(project_id = %(project_id)s OR project_id IS NULL)")
    if not include_inactive:
        parts.append("superseded_at IS NULL")
        parts.append(f"(expires_at IS NULL OR expires_at > {'%(now)s' if as_of else 'now()'})")
    if as_of:
        parts.append("created_at <= %(now)s")
    return " AND ".join(parts)


def _or_query(text: str) -> str:
    """websearch_to_tsquery input that ORs the words of ``text``.

    websearch_to_tsquery never raises on any input, but ANDs plain words: a natural
    question would then match almost nothing. Only word characters survive, so quotes,
    '-' and 'or' from the user cannot change the query's meaning.
    """
    words = [w for w in re.findall(r"\w+", text) if w.casefold() != "or"]
    return " or ".join(words)


_HYBRID = """
WITH {scoped_cte} vec AS (
    {vector_leg}
), fts AS (
    SELECT id FROM user_memories
    WHERE {scope} AND content_tsv @@ websearch_to_tsquery('{cfg}', %(text_query)s)
    ORDER BY ts_rank_cd(content_tsv, websearch_to_tsquery('{cfg}', %(text_query)s)) DESC, updated_at DESC, content
    LIMIT %(k)s
)
SELECT m.id, m.user_id, m.project_id, m.content, m.category, m.source, m.is_evergreen, m.created_at,
       m.updated_at, m.expires_at, m.superseded_by, m.superseded_at, m.metadata,
       m.{vec} AS embedding, m.{vec} <=> %(query_vector)s AS distance,
       ts_rank_cd(m.content_tsv, websearch_to_tsquery('{cfg}', %(text_query)s)) AS text_rank,
       m.id IN (SELECT id FROM vec) AS in_vector,
       m.id IN (SELECT id FROM fts) AS in_text
FROM user_memories m
WHERE m.user_id = %(user_id)s AND m.id IN (SELECT id FROM vec UNION SELECT id FROM fts)
"""

# Approximate: the HNSW index (iterative scan keeps going when the user filter drops rows).
_VECTOR_LEG_INDEXED = """SELECT id FROM user_memories WHERE {scope}
    ORDER BY {vec} <=> %(query_vector)s LIMIT %(k)s"""
# Exact: every live row of the user, fenced off from the HNSW index by MATERIALIZED.
_SCOPED_CTE = "scoped AS MATERIALIZED (SELECT id, {vec} AS embedding FROM user_memories WHERE {scope}),"
_VECTOR_LEG_EXACT = "SELECT id FROM scoped ORDER BY embedding <=> %(query_vector)s LIMIT %(k)s"


def _hybrid_sql(scope: Scope, exact: bool, column: str = "embedding") -> str:
    return _hybrid_query(scope.project_id is not None, scope.include_inactive, scope.now is not None, exact, column)


@functools.lru_cache(maxsize=64)
def _hybrid_query(has_project: bool, include_inactive: bool, as_of: bool, exact: bool, column: str) -> str:
    """The candidate query, composed once per shape (the recall hot path only binds values)."""
    where = sql.SQL(_scope_sql(has_project, include_inactive, as_of))
    vec = sql.Identifier(column)
    return (
        sql.SQL(_HYBRID)
        .format(
            scoped_cte=sql.SQL(_SCOPED_CTE).format(scope=where, vec=vec) if exact else sql.SQL(""),
            vector_leg=sql.SQL(_VECTOR_LEG_EXACT if exact else _VECTOR_LEG_INDEXED).format(scope=where, vec=vec),
            scope=where,
            vec=vec,
            cfg=sql.SQL(TS_CONFIG),
        )
        .as_string()
    )


def hybrid_candidates(
    conn: Connection,
    scope: Scope,
    query_vector: np.ndarray,
    query_text: str,
    k: int,
    *,
    schema: VectorSchema | None = None,
    statement_timeout_ms: int = 0,
) -> list[Candidate]:
    """Up to k candidates from each leg (vector by cosine distance, full text by ts_rank_cd).

    The vector leg first uses the HNSW index. An index scan under a selective filter
    (one user among many) can come back short, so when it returns fewer than k rows the
    leg is recomputed exactly over the user's rows: a user always gets
    min(k, their memories) vector candidates, however many rows other users have.
    """
    params: dict[str, Any] = {
        "user_id": scope.user_id,
        "project_id": scope.project_id,
        "now": scope.now,
        "query_vector": query_vector,
        "text_query": _or_query(query_text),
        "k": k,
    }
    column = schema.column if schema else "embedding"
    rows = _run_hybrid(conn, _hybrid_sql(scope, False, column), params, k, statement_timeout_ms, schema)
    if sum(1 for r in rows if r["in_vector"]) < k:
        rows = _run_hybrid(conn, _hybrid_sql(scope, True, column), params, k, statement_timeout_ms, schema)
    return _to_candidates(rows)


def _run_hybrid(
    conn: Connection,
    query: str,
    params: dict[str, Any],
    k: int,
    statement_timeout_ms: int,
    schema: VectorSchema | None = None,
) -> list[dict[str, Any]]:
    local = {
        "statement_timeout": str(statement_timeout_ms),
        # ef_search below k would cap the index scan at ef_search rows.
        "hnsw.ef_search": str(max(40, k)),
        "hnsw.iterative_scan": "relaxed_order",
        # psycopg prepares a statement after a few runs, and PostgreSQL then switches to a
        # generic plan, in which websearch_to_tsquery($text) is no constant any more: it is
        # parsed again for every row of the user, several times (~1.5-2.5 ms per recall).
        # Planning each recall with its values costs ~0.3 ms.
        "plan_cache_mode": "force_custom_plan",
    }
    try:
        return _read_as_user(conn, params["user_id"], query, params, settings=local, schema=schema)
    except psycopg.errors.QueryCanceled as exc:
        raise StatementTimeout(f"recall query exceeded statement_timeout ({statement_timeout_ms} ms)") from exc


def _to_candidates(rows: list[dict[str, Any]]) -> list[Candidate]:
    # Ties (common in ts_rank_cd) go to the more recently stated fact, then by content: never
    # by the random ids, so the same memories give the same ranking in every database.
    vector_order = sorted((r for r in rows if r["in_vector"]), key=lambda r: (r["distance"], r["content"]))
    text_order = sorted(
        (r for r in rows if r["in_text"]), key=lambda r: (-r["text_rank"], -r["updated_at"].timestamp(), r["content"])
    )
    vector_pos = {r["id"]: i + 1 for i, r in enumerate(vector_order)}
    text_pos = {r["id"]: i + 1 for i, r in enumerate(text_order)}
    out = []
    for r in rows:
        embedding = np.asarray(r.pop("embedding").to_numpy(), dtype=np.float32)
        distance = float(r.pop("distance"))
        text_rank = float(r.pop("text_rank"))
        r.pop("in_vector")
        r.pop("in_text")
        out.append(
            Candidate(
                memory=r,
                embedding=embedding,
                distance=distance,
                text_rank=text_rank,
                vector_rank=vector_pos.get(r["id"]),
                text_position=text_pos.get(r["id"]),
            )
        )
    # A stable order (SQL returns the union in no particular order) keeps ties reproducible.
    last = len(out) + 1
    out.sort(key=lambda c: (c.vector_rank or last, c.text_position or last, c.memory["content"]))
    return out


# --------------------------------------------------------------------------------------
# reading and forgetting
# --------------------------------------------------------------------------------------


def list_memories(
    conn: Connection, scope: Scope, *, limit: int, after: tuple[dt.datetime, uuid.UUID] | None = None
) -> list[dict[str, Any]]:
    """A page of the user's memories, newest first; ``after`` is the last row of the previous page."""
    where = _scope_filter(scope)
    if after is not None:
        where = sql.SQL("{} AND (created_at, id) < (%(after_at)s, %(after_id)s)").format(where)
    query = sql.SQL("SELECT {cols} FROM user_memories WHERE {where} ORDER BY created_at DESC, id DESC LIMIT %(limit)s")
    params = {
        "user_id": scope.user_id,
        "project_id": scope.project_id,
        "now": scope.now,
        "limit": limit,
        "after_at": after[0] if after else None,
        "after_id": after[1] if after else None,
    }
    with user_transaction(conn, scope.user_id), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(query.format(cols=sql.SQL(MEMORY_COLUMNS), where=where), params).fetchall()


def delete_user(conn: Connection, user_id: str) -> int:
    """Forget every memory of the user, and their history; returns how many memories went."""
    with user_transaction(conn, user_id, reason="forget_user"):
        cur = conn.execute("DELETE FROM user_memories WHERE user_id = %s", [user_id])
        conn.execute("DELETE FROM memory_events WHERE user_id = %s", [user_id])
        # Forgetting everything includes which messages were read: sent again, they count again.
        conn.execute("DELETE FROM ingested_messages WHERE user_id = %s", [user_id])
    return cur.rowcount


def delete_memory(conn: Connection, user_id: str, memory_id: uuid.UUID, *, source: str | None = None) -> bool:
    """Delete one memory of this user (False when the user has none with that id), recording who asked."""
    with user_transaction(conn, user_id, source=source):
        row = conn.execute(
            "DELETE FROM user_memories WHERE user_id = %s AND id = %s RETURNING id", [user_id, memory_id]
        ).fetchone()
    return row is not None


def supersede(
    conn: Connection, user_id: str, old_ids: Sequence[uuid.UUID], new_id: uuid.UUID, *, source: str | None = None
) -> list[uuid.UUID]:
    """Mark live memories of this user as replaced by ``new_id``; returns the ids actually marked."""
    with user_transaction(conn, user_id, source=source):
        return [old for old, _ in _supersede(conn, user_id, [(old, new_id) for old in dict.fromkeys(old_ids)])]


def history(
    conn: Connection, user_id: str, memory_id: uuid.UUID | None = None, *, limit: int = 1000
) -> list[dict[str, Any]]:
    """The recorded changes of one memory, or of all of a user's memories, oldest first."""
    query = (
        "SELECT memory_id, event, at, source, content, related_id, project_id, detail FROM memory_events "
        "WHERE user_id = %(user_id)s AND (%(memory_id)s::uuid IS NULL OR memory_id = %(memory_id)s) "
        "ORDER BY at, id LIMIT %(limit)s"
    )
    with user_transaction(conn, user_id), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(query, {"user_id": user_id, "memory_id": memory_id, "limit": limit}).fetchall()


def purge(conn: Connection, *, now: dt.datetime, superseded_before: dt.datetime) -> tuple[int, int]:
    """Remove expired memories and those superseded before the cut-off; (expired, superseded) counts.

    Both are recorded in the history (as 'expired' / 'purged'), which is kept.
    """
    with maintenance_transaction(conn, source="purge", reason="expired"):
        expired = conn.execute("DELETE FROM user_memories WHERE expires_at <= %s", [now]).rowcount
    with maintenance_transaction(conn, source="purge", reason="purged"):
        superseded = conn.execute("DELETE FROM user_memories WHERE superseded_at < %s", [superseded_before]).rowcount
    return expired, superseded


# --------------------------------------------------------------------------------------
# re-embedding: fill a shadow column in batches, then switch atomically
# --------------------------------------------------------------------------------------

NEXT_INDEX = "user_memories_embedding_next_idx"


def _owner_ddl(conn: Connection, statement: str | sql.Composed, params: Sequence[Any] | None = None) -> None:
    try:
        conn.execute(statement, params)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise ConfigurationError("re-embedding changes the table: run it as the table's owner") from exc


def begin_reembed(conn: Connection, *, fingerprint: str, dimension: int, restart: bool) -> str:
    """Add the shadow column for the new model (or find the one an interrupted run left).

    Returns "started" or "resuming".
    """
    meta = read_meta(conn)
    if meta.get("embedding_model") == fingerprint and int(meta.get("embedding_dimension", 0)) == dimension:
        raise InvalidInput(f"the store already embeds with {fingerprint}: nothing to re-embed")
    target = meta.get("next_model")
    if target == fingerprint and int(meta.get("next_dimension", 0)) == dimension:
        return "resuming"
    if target is not None and not restart:
        raise ConfigurationError(
            f"a re-embedding to {target} is in progress: configure that embedder to resume it, "
            "or pass --restart to abandon it"
        )
    with conn.transaction():
        _owner_ddl(conn, f"DROP INDEX IF EXISTS {NEXT_INDEX}")
        _owner_ddl(conn, "ALTER TABLE user_memories DROP COLUMN IF EXISTS embedding_next")
        _owner_ddl(
            conn,
            sql.SQL("ALTER TABLE user_memories ADD COLUMN embedding_next vector({})").format(sql.Literal(dimension)),
        )
        conn.execute(
            "INSERT INTO agent_memory_meta (key, value) VALUES ('next_model', %s), ('next_dimension', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            [fingerprint, str(dimension)],
        )
    return "started"


def rows_to_reembed(conn: Connection, *, after: uuid.UUID | None, limit: int) -> list[tuple[uuid.UUID, str]]:
    """The next rows (in id order, after ``after``) whose new vector is still missing."""
    with maintenance_transaction(conn, source="reembed"):
        rows = conn.execute(
            "SELECT id, content FROM user_memories WHERE embedding_next IS NULL "
            "AND (%(after)s::uuid IS NULL OR id > %(after)s) ORDER BY id LIMIT %(limit)s",
            {"after": after, "limit": limit},
        ).fetchall()
    return [(r[0], r[1]) for r in rows]


def store_reembedded(conn: Connection, ids: Sequence[uuid.UUID], vectors: Sequence[np.ndarray]) -> None:
    with maintenance_transaction(conn, source="reembed"):
        _fill_next(conn, ids, vectors)


def _fill_next(conn: Connection, ids: Sequence[uuid.UUID], vectors: Sequence[np.ndarray]) -> None:
    conn.execute(
        "UPDATE user_memories AS m SET embedding_next = t.v "
        "FROM unnest(%s::uuid[], %b::vector[]) AS t(id, v) WHERE m.id = t.id",
        [list(ids), list(vectors)],
    )


def build_reembed_index(conn: Connection) -> None:
    """HNSW on the shadow column without blocking reads or writes (CONCURRENTLY, outside a transaction).

    An interrupted build leaves an invalid index behind: it is dropped and built again.
    """
    valid = conn.execute(
        "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)", [NEXT_INDEX]
    ).fetchone()
    if valid is not None and not valid[0]:
        _owner_ddl(conn, f"DROP INDEX CONCURRENTLY IF EXISTS {NEXT_INDEX}")
    _owner_ddl(
        conn,
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {NEXT_INDEX} ON user_memories "
        "USING hnsw (embedding_next vector_cosine_ops)",
    )


def switch_reembed(
    conn: Connection, embed: Callable[[list[str]], Sequence[np.ndarray]], *, fingerprint: str, dimension: int
) -> int:
    """Make the new vectors current in one transaction; returns how many late rows it embedded.

    Call it when (almost) every row has its new vector: readers and writers of vectors wait
    (on the schema lock) for as long as it takes, which is the few late rows and the renames.
    The old vectors stay as ``embedding_prev`` so processes still configured with the old
    model keep reading until they are redeployed.
    """
    meta = read_meta(conn)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [VECTOR_SCHEMA_LOCK_KEY])
        _owner_ddl(conn, "LOCK TABLE user_memories IN ACCESS EXCLUSIVE MODE")
        conn.execute("SET LOCAL ROLE agent_memory_maintenance")
        late = conn.execute("SELECT id, content FROM user_memories WHERE embedding_next IS NULL").fetchall()
        if late:
            _fill_next(conn, [r[0] for r in late], embed([r[1] for r in late]))
        conn.execute("RESET ROLE")
        for statement in (
            "DROP INDEX IF EXISTS user_memories_embedding_prev_idx",
            "ALTER TABLE user_memories DROP COLUMN IF EXISTS embedding_prev",
            "ALTER TABLE user_memories RENAME COLUMN embedding TO embedding_prev",
            "ALTER TABLE user_memories ALTER COLUMN embedding_prev DROP NOT NULL",
            "ALTER INDEX user_memories_embedding_idx RENAME TO user_memories_embedding_prev_idx",
            "ALTER TABLE user_memories RENAME COLUMN embedding_next TO embedding",
            "ALTER TABLE user_memories ALTER COLUMN embedding SET NOT NULL",
            f"ALTER INDEX {NEXT_INDEX} RENAME TO user_memories_embedding_idx",
        ):
            _owner_ddl(conn, statement)
        conn.execute(
            "INSERT INTO agent_memory_meta (key, value) VALUES ('previous_model', %(old)s), "
            "('previous_dimension', %(old_dim)s), ('embedding_model', %(new)s), ('embedding_dimension', %(new_dim)s) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            {
                "old": meta["embedding_model"],
                "old_dim": meta["embedding_dimension"],
                "new": fingerprint,
                "new_dim": str(dimension),
            },
        )
        conn.execute("DELETE FROM agent_memory_meta WHERE key IN ('next_model', 'next_dimension')")
    return len(late)


def drop_previous_vectors(conn: Connection) -> bool:
    """End the grace period: drop the previous model's vectors. False when there were none."""
    meta = read_meta(conn)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [VECTOR_SCHEMA_LOCK_KEY])
        _owner_ddl(conn, "ALTER TABLE user_memories DROP COLUMN IF EXISTS embedding_prev")
        conn.execute("DELETE FROM agent_memory_meta WHERE key IN ('previous_model', 'previous_dimension')")
    return "previous_model" in meta


# --------------------------------------------------------------------------------------
# bulk loading (benchmarks, large imports): rows first, search indexes after
# --------------------------------------------------------------------------------------

# The same definitions as migration 0001; building them once after a bulk load is far
# faster than maintaining them row by row (pgvector's advice for HNSW).
SEARCH_INDEXES = {
    "user_memories_tsv_idx": "CREATE INDEX IF NOT EXISTS user_memories_tsv_idx"
    " ON user_memories USING gin (content_tsv)",
    "user_memories_embedding_idx": "CREATE INDEX IF NOT EXISTS user_memories_embedding_idx"
    " ON user_memories USING hnsw (embedding vector_cosine_ops)",
}


EMBEDDING_INDEX = "user_memories_embedding_idx"


def drop_search_indexes(conn: Connection, *, names: Sequence[str] = tuple(SEARCH_INDEXES)) -> None:
    """Drop the GIN and HNSW indexes (or those named) before a bulk load; recall still works without them."""
    with conn.transaction():
        for name in names:
            if name not in SEARCH_INDEXES:
                raise ValueError(f"{name} is not one of the search indexes")
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(name)))


def build_search_indexes(conn: Connection, *, maintenance_work_mem: str = "2GB", parallel_workers: int = 1) -> None:
    """(Re)create the GIN and HNSW indexes, then refresh the planner's statistics.

    A large maintenance_work_mem keeps the HNSW graph in memory while it is built
    (otherwise the build slows down sharply once the graph spills).
    """
    conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", [maintenance_work_mem])
    conn.execute("SELECT set_config('max_parallel_maintenance_workers', %s, false)", [str(int(parallel_workers))])
    try:
        for statement in SEARCH_INDEXES.values():
            conn.execute(statement.encode())
    finally:
        conn.execute("RESET maintenance_work_mem")
        conn.execute("RESET max_parallel_maintenance_workers")
    # Fresh statistics and visibility map: the planner then sees ~N/users rows per user.
    conn.execute("VACUUM (ANALYZE) user_memories")


_COPY_COLUMNS = (
    "user_id",
    "project_id",
    "content",
    "content_hash",
    "category",
    "source",
    "is_evergreen",
    "embedding",
    "created_at",
    "updated_at",
    "metadata",
)
_COPY_TYPES = ["text", "text", "text", "bytea", "text", "text", "bool", "vector", "timestamptz", "timestamptz", "jsonb"]


def copy_memories(conn: Connection, rows: Iterable[MemoryRow]) -> int:
    """Append rows with binary COPY, in one transaction: no upsert, no duplicate folding.

    For loading new, unique data fast (an existing fact raises a unique violation and
    nothing of the batch is kept); the history trigger records each row as created.
    PostgreSQL refuses COPY FROM into a table with row-level security for any role the
    policies apply to, so this needs a superuser or a BYPASSRLS role. Returns the rows written.
    """
    count = 0
    now = dt.datetime.now(dt.UTC)
    statement = sql.SQL("COPY user_memories ({}) FROM STDIN WITH (FORMAT BINARY)").format(
        sql.SQL(", ").join(sql.Identifier(c) for c in _COPY_COLUMNS)
    )
    try:
        with conn.transaction(), conn.cursor() as cur, cur.copy(statement) as copy:
            copy.set_types(_COPY_TYPES)
            for r in rows:
                created = r.created_at or r.observed_at or now
                copy.write_row(
                    [
                        r.user_id,
                        r.project_id,
                        r.content,
                        r.content_hash,
                        r.category,
                        r.source,
                        r.is_evergreen,
                        r.embedding,
                        created,
                        r.observed_at or created,
                        Jsonb(r.metadata),
                    ]
                )
                count += 1
    except psycopg.errors.FeatureNotSupported as exc:  # "COPY FROM not supported with row-level security"
        raise ConfigurationError(
            "bulk loading with COPY needs a role that bypasses row-level security (a superuser or BYPASSRLS)"
        ) from exc
    return count


def count_all_memories(conn: Connection, *, except_user_prefix: str = "") -> int:
    """Rows across all users (benchmarks): needs a role row-level security does not restrict."""
    row = conn.execute(
        "SELECT count(*) FROM user_memories WHERE %(prefix)s = '' OR NOT starts_with(user_id, %(prefix)s)",
        {"prefix": except_user_prefix},
    ).fetchone()
    return int(row[0]) if row else 0


# --------------------------------------------------------------------------------------
# the seed article's ranking query, kept only as the benchmarks' baseline
# --------------------------------------------------------------------------------------

_ARTICLE_SEED_QUERY = """
SELECT {cols},
       0.7 * (1 - (embedding <-> %(query_vector)s)) + 0.3 * ts_rank(content_tsv, plainto_tsquery('{cfg}', %(text)s))
           AS total_score
FROM user_memories
{where}
ORDER BY total_score DESC
LIMIT %(limit)s
"""


def article_seed_query(
    conn: Connection, query_vector: np.ndarray, query_text: str, *, limit: int = 10, scope: Scope | None = None
) -> list[dict[str, Any]]:
    """The seed article's ranking query, for the benchmarks only: never use it to serve recall.

    As written: 0.7 x (1 - L2 distance ``<->``) + 0.3 x raw ``ts_rank``, ``ORDER BY total_score``
    over the whole table (no index can serve it, and no user filter: everyone's memories
    are ranked). Two deviations, both needed to run it at all: ``plainto_tsquery`` instead
    of ``to_tsquery`` (which raises a syntax error on an ordinary question), and this
    schema's stored ``content_tsv`` column as the document.

    With ``scope``, the rows are limited to that user's live memories, in a user
    transaction (the quality benchmark: otherwise other users' memories would be ranked
    too). Without it, the query is the article's, unscoped: run it on a connection that
    row-level security does not restrict (the owner's), as the article's database had none.
    """
    where = sql.SQL("WHERE {}").format(_scope_filter(scope)) if scope is not None else sql.SQL("")
    query = sql.SQL(_ARTICLE_SEED_QUERY).format(cols=sql.SQL(MEMORY_COLUMNS), cfg=sql.SQL(TS_CONFIG), where=where)
    params: dict[str, Any] = {"query_vector": query_vector, "text": query_text, "limit": limit}
    # Never prepared: a generic plan would parse the tsquery again for every row, which
    # would make the baseline slower than the article's query really is.
    if scope is None:
        with conn.cursor(row_factory=dict_row, binary=True) as cur:
            return cur.execute(query, params, prepare=False).fetchall()
    params.update(user_id=scope.user_id, project_id=scope.project_id, now=scope.now)
    with user_transaction(conn, scope.user_id), conn.cursor(row_factory=dict_row, binary=True) as cur:
        return cur.execute(query, params, prepare=False).fetchall()


def hnsw_insert_rate(conn: Connection, vectors: Sequence[np.ndarray], *, batch: int, dimension: int) -> float:
    """For the benchmarks only: inserts per second into a bare table with nothing but this
    schema's HNSW index (same operator class and defaults), in batches of ``batch`` rows, each
    its own transaction as the write path's are. The ceiling that maintaining the vector index
    alone puts on one writer; the scratch table is dropped afterwards.
    """
    table = sql.Identifier("bench_hnsw_ceiling")
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
    conn.execute(sql.SQL("CREATE TABLE {} (embedding vector({}))").format(table, sql.Literal(int(dimension))))
    try:
        conn.execute(sql.SQL("CREATE INDEX ON {} USING hnsw (embedding vector_cosine_ops)").format(table))
        insert = sql.SQL("INSERT INTO {} (embedding) SELECT unnest(%(embeddings)b::vector[])").format(table)
        started = time.perf_counter()
        for i in range(0, len(vectors), batch):
            with conn.transaction():
                conn.execute(insert, {"embeddings": list(vectors[i : i + batch])})
        elapsed = time.perf_counter() - started
    finally:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
    return len(vectors) / elapsed if elapsed > 0 else float("inf")
