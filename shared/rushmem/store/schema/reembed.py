"""Moving the store to another embedding model while reads go on (docs/how-it-works.md,
"Lifecycle", gives the steps): a shadow column filled in batches, then one short transaction that
switches the columns and unlists dense users (their partitions hold the previous model's vectors).
Needs the table's owner.

Every step is idempotent (a batch fills the rows still without a new vector), so a lost connection
(a database restart, a failover) is waited out and the step run again; when the database stays
away longer than ``reconnect_s``, the run stops with DatabaseUnavailable and the next run resumes.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import psycopg
from psycopg import sql
from pydantic import BaseModel

from rushmem.config import Settings
from rushmem.store.engine.connection import Connection, Database
from rushmem.store.engine.transactions import VECTOR_SCHEMA_LOCK_KEY, maintenance_transaction
from rushmem.store.schema.migrate import read_meta, register_types
from rushmem_contract.errors import ConfigurationError, DatabaseUnavailable, InvalidInput, StatementTimeout

if TYPE_CHECKING:  # the service hands it in; the store only calls it
    from rushmem.embeddings import Embedder

logger = logging.getLogger(__name__)

RECONNECT_S = 60.0  # how long a run waits for a lost database before it stops (the next run resumes)
T = TypeVar("T")


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
        # Dense users' partitions hold the previous model's vectors: unlisted (searched exactly)
        # until `rushmem dense-users` builds them again from the new ones.
        conn.execute("DELETE FROM agent_memory_dense_users")
        conn.execute("RESET ROLE")
        for statement in (
            "ALTER TABLE user_memories DROP COLUMN IF EXISTS embedding_prev",
            "ALTER TABLE user_memories RENAME COLUMN embedding TO embedding_prev",
            "ALTER TABLE user_memories ALTER COLUMN embedding_prev DROP NOT NULL",
            "ALTER TABLE user_memories RENAME COLUMN embedding_next TO embedding",
            "ALTER TABLE user_memories ALTER COLUMN embedding SET NOT NULL",
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


class ReembedResult(BaseModel):
    """What a re-embedding run did: ``state`` is "started" or "resuming"; ``switched`` is False when
    ``max_batches`` stopped it before the switch (a later run finishes)."""

    state: str
    filled: int
    switched: bool
    model: str


def reembed(
    settings: Settings,
    embedder: Embedder,
    *,
    batch_size: int = 256,
    restart: bool = False,
    max_batches: int | None = None,
    progress: Callable[[int], None] | None = None,
    reconnect_s: float = RECONNECT_S,
) -> ReembedResult:
    """Move the store to ``embedder`` without taking reads down (see the module's docstring)."""
    if not 1 <= batch_size <= 10_000:
        raise InvalidInput(f"batch size must be between 1 and 10000, got {batch_size}", field="batch_size")
    # An owner connection: no application role, no schema check (the schema is what changes).
    admin = Database(settings, setup=register_types)
    filled = batches = late = 0

    def step(work: Callable[[Connection], T]) -> T:
        """Run one idempotent step; while the database is away (for up to ``reconnect_s`` after the
        failure), reconnect and run it again."""
        deadline = time.monotonic() + reconnect_s
        while True:
            try:
                result: T = admin.run(work)
                return result
            except StatementTimeout:
                raise
            except DatabaseUnavailable as exc:
                if time.monotonic() >= deadline:
                    raise DatabaseUnavailable(
                        f"re-embedding interrupted ({exc}); run it again with the same model to resume"
                    ) from exc
                logger.warning("re-embedding: the database connection was lost; reconnecting")
                admin.close()
                time.sleep(0.5)

    def fill(rows: list[tuple[uuid.UUID, str]]) -> None:
        vectors = list(embedder.embed([r[1] for r in rows]))  # outside any retry: embedded once
        step(lambda conn: store_reembedded(conn, [r[0] for r in rows], vectors))

    try:
        fingerprint, dimension = embedder.fingerprint, embedder.dimension
        state = step(lambda conn: begin_reembed(conn, fingerprint=fingerprint, dimension=dimension, restart=restart))
        after: uuid.UUID | None = None
        while max_batches is None or batches < max_batches:
            rows = step(functools.partial(rows_to_reembed, after=after, limit=batch_size))
            if not rows:
                break
            fill(rows)
            after, filled, batches = rows[-1][0], filled + len(rows), batches + 1
            if progress:
                progress(filled)
        else:  # stopped by max_batches, not by running out of rows: switch on a later run
            return ReembedResult(state=state, filled=filled, switched=False, model=embedder.fingerprint)
        # Rows written meanwhile (ids are random, so some sort before where the scan was):
        # embed them now, so the switch itself has (almost) nothing left to do.
        while rows := step(functools.partial(rows_to_reembed, after=None, limit=batch_size)):
            fill(rows)
            filled += len(rows)
        late = step(
            lambda conn: switch_reembed(
                conn, lambda texts: list(embedder.embed(texts)), fingerprint=fingerprint, dimension=dimension
            )
        )
    finally:
        admin.close()
    logger.info("reembedded", extra={"model": embedder.fingerprint, "filled": filled + late})
    return ReembedResult(state=state, filled=filled + late, switched=True, model=embedder.fingerprint)


def drop_previous_model(settings: Settings) -> bool:
    """After every process runs the new model: drop the previous model's vectors. False when there were none."""
    admin = Database(settings)
    try:
        return drop_previous_vectors(admin.connection())
    finally:
        admin.close()
