"""Transactions on one user's memories (or, for maintenance, on everyone's), and pipelining.

Row-level security admits the user a transaction names (``agent_memory.user_id``); the
history trigger records the source and reason it names. Statements are pipelined so that a
read is one network round trip and a write a few, which counts between Lambda and the database.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from rushmem.store.engine.connection import Connection, vector_schema_of
from rushmem.store.engine.vector_schema import VectorSchema
from rushmem_contract.errors import ConfigurationError, SchemaChanged

logger = logging.getLogger(__name__)

# Held shared by every transaction that reads or writes vectors, exclusively by the re-embedding
# switch: a query never runs against a column that changed model under it.
VECTOR_SCHEMA_LOCK_KEY = 0x616D5F766563  # "am_vec"

T = TypeVar("T")


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
    vectors: bool = False,
    write_id: uuid.UUID | None = None,
) -> Iterator[Connection]:
    """One transaction on one user's memories.

    Sets, for this transaction only (set_config(..., true): safe on pooled connections),
    the user that row-level security lets through, and the source and reason the history
    trigger records; optionally other settings; with ``lock``, serialises this user's
    writers (the near-duplicate check reads before it writes); with ``write_id``, the write
    that the rows it touches and the history events it causes record (migration 0012); with ``vectors``, checks in
    the same round trip that the store still uses the model the connection was set up for.

    The block runs in pipeline mode (see ``pipelined_transaction``; off with AGENT_MEMORY_DB_PIPELINE=false):
    a statement is sent, and its rowcount known, only when a result is fetched or the block
    ends; use RETURNING and fetch when the block needs to know what a statement did.
    """
    with user_transaction_with(
        conn,
        user_id,
        lambda c: c,
        source=source,
        reason=reason,
        lock=lock,
        settings=settings,
        vectors=vectors,
        write_id=write_id,
    ) as same:
        yield same


@contextlib.contextmanager
def user_transaction_with(
    conn: Connection,
    user_id: str,
    send: Callable[[Connection], T],
    *,
    source: str | None = None,
    reason: str | None = None,
    lock: bool = False,
    settings: dict[str, str] | None = None,
    vectors: bool = False,
    write_id: uuid.UUID | None = None,
) -> Iterator[T]:
    """As :func:`user_transaction`, with the statements ``send`` issues (without fetching) in
    the same round trip as BEGIN, its scope, lock and schema check: the block gets what ``send``
    returned (its cursors, whose results are there). The statements run after the lock is
    taken, and the block runs only once the schema check passed; a statement that failed
    because the store changed model raises SchemaChanged, as the check would have."""
    schema = vector_schema_of(conn) if vectors else None
    if write_id is not None:
        settings = {**(settings or {}), "agent_memory.write_id": str(write_id)}
    events = getattr(conn, "change_events", None)
    if events:
        # The outbox trigger (migration 0009) records this transaction's changes only when told to.
        settings = {**(settings or {}), "agent_memory.outbox": events}
    query, values = _begin(user_id, source=source, reason=reason, lock=lock, settings=settings, schema=schema)
    with pipelined_transaction(conn):
        begin = conn.execute(query, values)
        try:
            sent = send(conn)
            # In pipeline mode this one fetch waits for every statement sent so far.
            row = begin.fetchone()
        except psycopg.Error:
            if begin.pgresult is not None and begin.rowcount == 1:
                _check_schema(begin.fetchone(), schema)
            raise
        _check_schema(row, schema)
        yield sent


@contextlib.contextmanager
def pipelined_transaction(conn: Connection) -> Iterator[None]:
    """A transaction whose BEGIN travels with the first statement and whose COMMIT travels
    with the last ones (pipeline mode): two round trips fewer than ``conn.transaction()``,
    which waits for each on its own. Statements in the block are sent when a result is
    needed; an error, or an exception in the block, rolls everything back. Inside a
    caller's transaction, on a connection that is not in autocommit, or with pipelining
    turned off, it is a plain ``conn.transaction()``: a savepoint, or psycopg's own BEGIN (on the
    RDS Data API, which pipelines nothing: BeginTransaction and CommitTransaction).
    """
    if not (_may_pipeline(conn) and conn.autocommit and _idle(conn)):
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


@contextlib.contextmanager
def pipeline_of_transactions(conn: Connection) -> Iterator[bool]:
    """A pipeline for several whole transactions the block sends itself (``BEGIN`` ... ``COMMIT``
    each), all sent with one Sync at the end: one round trip. Yields False, with no pipeline, where
    none can be (the RDS Data API, pipelining off, a transaction already open): the caller then
    runs its transactions one by one."""
    if not (_may_pipeline(conn) and conn.autocommit and _idle(conn)):
        yield False
        return
    try:
        with conn.pipeline():
            yield True
    except BaseException:
        _recover(conn)
        raise


def _idle(conn: Connection) -> bool:
    return conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


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


def read_as_user(
    conn: Connection,
    user_id: str,
    query: str | sql.Composed,
    params: dict[str, Any],
    *,
    settings: dict[str, str] | None = None,
    vectors: bool = False,
) -> list[dict[str, Any]]:
    """One read-only statement in a user transaction, in a single round trip.

    The same statements as ``user_transaction`` (BEGIN, the scope set_config, the query,
    COMMIT), but nothing is fetched inside the transaction, so ``pipelined_transaction`` sends them
    all with one Sync: one network round trip instead of four, which counts between Lambda
    and the database. The schema check runs after COMMIT, which is harmless for a read: the
    rows are discarded when it fails.
    """
    schema = vector_schema_of(conn) if vectors else None
    begin_sql, values = _begin(user_id, settings=settings, schema=schema)
    # Binary results: parsing 384 floats per row from text costs more than the query itself.
    cur = conn.cursor(row_factory=dict_row, binary=True)
    begin: psycopg.Cursor[Any] | None = None
    try:
        with pipelined_transaction(conn):
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
def maintenance_transaction(
    conn: Connection, *, source: str, reason: str | None = None, events: bool = False
) -> Iterator[Connection]:
    """A transaction across all users (purge, re-embedding) as agent_memory_maintenance; with
    ``events``, its changes go to the change outbox when the connection publishes them."""
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
            "set_config('agent_memory.change_reason', %s, true), "
            "set_config('agent_memory.outbox', %s, true)",
            [source, reason or "", (getattr(conn, "change_events", None) or "") if events else ""],
        )
        yield conn
