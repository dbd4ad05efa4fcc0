"""Transactions on one user's memories (or, for maintenance, on everyone's), on either engine.

Row-level security admits the user a transaction names (``agent_memory.user_id``); the
history trigger records the source and reason it names. Statements are pipelined where the engine
can (:meth:`Session.pipelined_transaction`) so that a read is one network round trip and a write a
few, which counts between Lambda and the database.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from rushmem.store.engine.session import Query, Rows, Session, VectorSchema
from rushmem_contract.errors import ConfigurationError

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
    conn: Session,
    user_id: str,
    *,
    source: str | None = None,
    reason: str | None = None,
    lock: bool = False,
    settings: dict[str, str] | None = None,
    vectors: bool = False,
    write_id: uuid.UUID | None = None,
    send: Callable[[Session], T] | None = None,
) -> Iterator[T | None]:
    """One transaction on one user's memories.

    Sets, for this transaction only (set_config(..., true): safe on pooled connections),
    the user that row-level security lets through, and the source and reason the history
    trigger records; optionally other settings; with ``lock``, serialises this user's
    writers (the near-duplicate check reads before it writes); with ``write_id``, the write
    that the rows it touches and the history events it causes record (migration 0012); with ``vectors``, checks in
    the same round trip that the store still uses the model the connection was set up for.

    The block runs in pipeline mode (see ``Session.pipelined_transaction``; off with RUSHMEM_DB_PIPELINE=false):
    a statement is sent, and its rowcount known, only when a result is fetched or the block
    ends; use RETURNING and fetch when the block needs to know what a statement did.

    ``send``: statements issued (without fetching) in the same round trip as BEGIN, its scope, lock
    and schema check, after the lock is taken; the block gets what it returned (its cursors, whose
    results are there), and runs only once the schema check passed. A statement that failed because
    the store changed model raises SchemaChanged, as the check would have.
    """
    schema = conn.vector_schema if vectors else None
    if write_id is not None:
        settings = {**(settings or {}), "agent_memory.write_id": str(write_id)}
    if conn.change_events:
        # The outbox trigger (migration 0009) records this transaction's changes only when told to.
        settings = {**(settings or {}), "agent_memory.outbox": conn.change_events}
    query, values = _begin(user_id, source=source, reason=reason, lock=lock, settings=settings, schema=schema)
    with conn.pipelined_transaction():
        begin = conn.execute(query, values)
        try:
            sent = send(conn) if send is not None else None
            # In pipeline mode this one fetch waits for every statement sent so far.
            row = begin.fetchone()
        except psycopg.Error:
            _check_answered(begin, schema)
            raise
        _check_schema(row, schema)
        yield sent


def _begin(
    user_id: str,
    *,
    source: str | None = None,
    reason: str | None = None,
    lock: bool = False,
    settings: Mapping[str, str] | None = None,
    schema: VectorSchema | None = None,
) -> tuple[str, list[Any]]:
    extra = tuple(settings or {})
    values = [user_id, source or "", reason or "", *(settings or {}).values()]
    if lock:
        values.append(user_id)
    return _begin_sql(extra, lock, schema.meta_key if schema is not None else None), values


def _check_schema(row: Any, schema: VectorSchema | None) -> None:
    if schema is not None and row is not None:
        schema.check(row[-1])


def _check_answered(begin: Rows, schema: VectorSchema | None) -> None:
    """After a failed statement: the schema check, if BEGIN's answer came before the error (the
    statement may have failed *because* the store moved to another model, say the vector column
    changed dimension: that, not the statement's error, is what the caller handles)."""
    if begin.rownumber is not None and begin.rowcount == 1:
        _check_schema(begin.fetchone(), schema)


def read_as_user(
    conn: Session,
    user_id: str,
    query: Query,
    params: Mapping[str, Any],
    *,
    settings: Mapping[str, str] | None = None,
    vectors: bool = False,
) -> list[dict[str, Any]]:
    """One read-only statement in a user transaction, in a single round trip.

    The same statements as ``user_transaction`` (BEGIN, the scope set_config, the query,
    COMMIT), but nothing is fetched inside the transaction, so a pipelined transaction sends them
    all with one Sync: one network round trip instead of four, which counts between Lambda
    and the database. The schema check runs after COMMIT, which is harmless for a read: the
    rows are discarded when it fails.
    """
    schema = conn.vector_schema if vectors else None
    begin_sql, values = _begin(user_id, settings=settings, schema=schema)
    begin: Rows | None = None
    try:
        with conn.pipelined_transaction():
            begin = conn.execute(begin_sql, values)
            # Binary results: parsing 384 floats per row from text costs more than the query itself.
            rows = conn.execute_dicts(query, params, binary=True)
    except psycopg.Error:
        if begin is not None:
            _check_answered(begin, schema)
        raise
    assert begin is not None
    _check_schema(begin.fetchone(), schema)
    return rows.fetchall()


@contextlib.contextmanager
def maintenance_transaction(
    conn: Session, *, source: str, reason: str | None = None, events: bool = False
) -> Iterator[Session]:
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
            [source, reason or "", (conn.change_events or "") if events else ""],
        )
        yield conn
