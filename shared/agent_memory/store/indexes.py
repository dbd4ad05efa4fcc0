"""Dense users: an approximate index only where one user's memories are many.

Recall searches a user's rows exactly (the scope b-tree, then a sort): ~5 µs a row for both legs,
so a few milliseconds at 1,000 memories and growing with the user. A user with at least
``min_memories`` (AGENT_MEMORY_DENSE_MIN_MEMORIES) gets an HNSW and a GIN index of their own:
partial indexes, ``WHERE user_id = <that user>``, which only the plans of that user's queries can
use (recall plans each query with its values). They are listed in ``agent_memory_dense_users``
with the lexemes most of their memories contain, which recall leaves out of their text leg
(migration 0005 says why, and how that leg reaches the GIN index under row-level security).

:func:`refresh_dense_users` brings the indexes in line with the data; run it on a schedule
(``agent-memory dense-users``; in the stack, MigrateFunction hourly). As the table's owner, on an
autocommit connection: ``CREATE INDEX CONCURRENTLY`` lets reads and writes go on, but scans the
whole table twice per index. Safe to interrupt and run again: an index an interrupted build left
invalid is built again; a user is listed only once their indexes are valid and unlisted before
they are dropped; indexes nobody is listed for (an erased user's) are dropped.

Every partial index is considered by the planner for every query on the table (~8 µs each per
plan, measured): this fits a few dozen dense users per database, not thousands.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import psycopg
from psycopg import sql
from pydantic import BaseModel

from agent_memory.config import Settings
from agent_memory.store.connection import Connection, Database
from agent_memory.store.dataapi import DataApiConnection
from agent_memory.store.dense import (
    HNSW_HALFVEC_MAX_DIM,
    HNSW_VECTOR_MAX_DIM,
    INDEX_PREFIX,
    ann_expression,
    dense_index_names,
)
from agent_memory.store.migrate import read_meta, register_types
from agent_memory.store.transactions import maintenance_transaction
from agent_memory_contract.errors import ConfigurationError, InvalidInput, SchemaMismatch

logger = logging.getLogger(__name__)

# One refresh at a time (session-level advisory lock): two would build the same indexes.
REFRESH_LOCK_KEY = 0x616D5F64656E  # "am_den"


class DenseUsersReport(BaseModel):
    """What a run did, in counts (user ids stay out of logs): users indexed for the first time,
    users whose indexes were built again (interrupted build, or on the previous column after
    ``reembed``), users unlisted (below half the threshold), users whose common words were
    refreshed, indexes dropped that nobody was listed for, and whether every user was handled
    (False: ``max_seconds`` ran out, or another run held the lock; the next run goes on)."""

    indexed: int = 0
    rebuilt: int = 0
    unlisted: int = 0
    refreshed: int = 0
    orphans_dropped: int = 0
    done: bool = True

    def summary(self) -> str:
        state = "" if self.done else " (not finished: run it again)"
        return (
            f"dense users: {self.indexed} indexed, {self.rebuilt} rebuilt, {self.unlisted} back to exact search, "
            f"{self.refreshed} refreshed, {self.orphans_dropped} stray indexes dropped{state}"
        )


def refresh_dense_users(
    conn: Connection,
    *,
    min_memories: int,
    max_text_matches: int,
    maintenance_work_mem: str = "256MB",
    concurrently: bool = True,
    max_seconds: float | None = None,
) -> DenseUsersReport:
    """Give each user with at least ``min_memories`` memories their own indexes and list them; refresh
    the common words of those listed; unlist and drop the indexes of users below half the threshold.
    ``concurrently=False`` (a fresh bulk load, nobody writing): one table scan per index, writes wait.
    Stops starting new builds after ``max_seconds``."""
    if not conn.autocommit:
        raise ConfigurationError("refresh_dense_users needs an autocommit connection (CREATE INDEX CONCURRENTLY)")
    if isinstance(conn, DataApiConnection):
        # Its lock is the session's, and the Data API shares sessions between calls.
        raise ConfigurationError("refresh_dense_users needs a direct connection (its lock is per session)")
    if min_memories < 2:
        raise InvalidInput("min_memories must be at least 2", field="min_memories")
    meta = read_meta(conn)
    if "embedding_dimension" not in meta:
        raise SchemaMismatch("the database has no agent-memory schema yet: run `agent-memory migrate`")
    dimension = int(meta["embedding_dimension"])
    locked = conn.execute("SELECT pg_try_advisory_lock(%s)", [REFRESH_LOCK_KEY]).fetchone()
    if not locked or not locked[0]:
        logger.info("dense users: another refresh is running")
        return DenseUsersReport(done=False)
    try:
        return _refresh(
            conn,
            dimension=dimension,
            min_memories=min_memories,
            max_text_matches=max_text_matches,
            maintenance_work_mem=maintenance_work_mem,
            concurrently=concurrently,
            deadline=None if max_seconds is None else time.monotonic() + max_seconds,
        )
    finally:
        if not conn.closed:
            conn.execute("SELECT pg_advisory_unlock(%s)", [REFRESH_LOCK_KEY])


def _refresh(
    conn: Connection,
    *,
    dimension: int,
    min_memories: int,
    max_text_matches: int,
    maintenance_work_mem: str,
    concurrently: bool,
    deadline: float | None,
) -> DenseUsersReport:
    report = DenseUsersReport()
    keep_from = max(1, min_memories // 2)
    with maintenance_transaction(conn, source="dense-users"):
        # One pass over the scope b-tree (~1 s per million rows).
        counts: dict[str, int] = dict(
            conn.execute(  # type: ignore[arg-type]
                "SELECT user_id, count(*) FROM user_memories GROUP BY user_id HAVING count(*) >= %s", [keep_from]
            ).fetchall()
        )
        listed = {row[0] for row in conn.execute("SELECT user_id FROM agent_memory_dense_users").fetchall()}
    dense = {u: n for u, n in counts.items() if n >= min_memories or u in listed}
    for user_id in sorted(listed - dense.keys()):
        with maintenance_transaction(conn, source="dense-users"):
            conn.execute("DELETE FROM agent_memory_dense_users WHERE user_id = %s", [user_id])
        _drop(conn, dense_index_names(user_id), concurrently=concurrently)
        report.unlisted += 1
    kept = {name for user_id in dense for name in dense_index_names(user_id)}
    strays = [name for name in _dense_indexes(conn) if name not in kept]
    _drop(conn, strays, concurrently=concurrently)
    report.orphans_dropped = len(strays)
    conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", [maintenance_work_mem])
    built = False
    try:
        # Listed users first (their indexes may need building again), then the largest new ones.
        for user_id in sorted(dense, key=lambda u: (u not in listed, -dense[u], u)):
            if deadline is not None and time.monotonic() >= deadline:
                report.done = False
                break
            changed = _ensure_indexes(conn, user_id, dimension, concurrently=concurrently)
            built = built or changed
            _list(conn, user_id, dense[user_id], max_text_matches)
            if user_id not in listed:
                report.indexed += 1
            elif changed:
                report.rebuilt += 1
            else:
                report.refreshed += 1
    finally:
        conn.execute("RESET maintenance_work_mem")
    if built:
        conn.execute("ANALYZE user_memories")  # the planner's idea of each user's rows
    logger.info("dense users refreshed", extra={"report": report.model_dump()})
    return report


def _dense_indexes(conn: Connection) -> list[str]:
    rows = conn.execute(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = 'user_memories'::regclass AND starts_with(c.relname, %s) ORDER BY c.relname",
        [INDEX_PREFIX],
    ).fetchall()
    return [r[0] for r in rows]


def _ensure_indexes(conn: Connection, user_id: str, dimension: int, *, concurrently: bool) -> bool:
    """Build what the user's indexes lack; True when something was built. A vector index on another
    column than ``embedding`` (the previous model's, after a re-embedding switch) is built again.

    CREATE INDEX takes no parameters: the user id goes in as a quoted literal (sql.Literal)."""
    vec_name, tsv_name = dense_index_names(user_id)
    where = sql.SQL("user_id = {}").format(sql.Literal(user_id))
    wanted: list[tuple[str, sql.Composable]] = [
        (tsv_name, sql.SQL("USING gin (content_tsv) WHERE {}").format(where)),
    ]
    if dimension <= HNSW_HALFVEC_MAX_DIM:
        ann, _query = ann_expression("embedding", dimension)
        opclass = sql.SQL("vector_cosine_ops" if dimension <= HNSW_VECTOR_MAX_DIM else "halfvec_cosine_ops")
        wanted.insert(0, (vec_name, sql.SQL("USING hnsw ({} {}) WHERE {}").format(ann, opclass, where)))
    built = False
    for name, body in wanted:
        state = conn.execute(
            "SELECT i.indisvalid, EXISTS (SELECT FROM pg_depend d JOIN pg_attribute a "
            "  ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid "
            "  WHERE d.classid = 'pg_class'::regclass AND d.objid = i.indexrelid AND a.attname = 'embedding') "
            "FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
            [name],
        ).fetchone()
        if state is not None:
            valid, on_embedding = state
            if valid and (on_embedding or name == tsv_name):
                continue
            _drop(conn, [name], concurrently=concurrently)
        _owner_ddl(
            conn,
            sql.SQL("CREATE INDEX {} {} ON user_memories {}").format(
                sql.SQL("CONCURRENTLY" if concurrently else ""), sql.Identifier(name), body
            ),
        )
        built = True
    return built


def _list(conn: Connection, user_id: str, memories: int, max_text_matches: int) -> None:
    """List the user (their indexes are valid) with the lexemes more than ``max_text_matches`` of
    their memories contain."""
    with maintenance_transaction(conn, source="dense-users"):
        common = conn.execute(
            "SELECT coalesce(array_agg(word ORDER BY word), '{}') FROM ts_stat("
            "format('SELECT content_tsv FROM user_memories WHERE user_id = %%L', %s::text)) WHERE ndoc > %s",
            [user_id, max_text_matches],
        ).fetchone()
        conn.execute(
            "INSERT INTO agent_memory_dense_users (user_id, memories, common_lexemes) VALUES (%s, %s, %s) "
            "ON CONFLICT (user_id) DO UPDATE SET memories = EXCLUDED.memories, "
            "common_lexemes = EXCLUDED.common_lexemes, checked_at = now()",
            [user_id, memories, common[0] if common else []],
        )


def _drop(conn: Connection, names: Iterable[str], *, concurrently: bool) -> None:
    for name in names:
        _owner_ddl(
            conn,
            sql.SQL("DROP INDEX {} IF EXISTS {}").format(
                sql.SQL("CONCURRENTLY" if concurrently else ""), sql.Identifier(name)
            ),
        )


def _owner_ddl(conn: Connection, statement: sql.Composed) -> None:
    try:
        conn.execute(statement)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise ConfigurationError("dense users' indexes change the table: run it as the table's owner") from exc


def refresh(
    settings: Settings,
    *,
    min_memories: int | None = None,
    concurrently: bool = True,
    max_seconds: float | None = None,
    maintenance_work_mem: str = "256MB",
) -> DenseUsersReport:
    """:func:`refresh_dense_users` on an owner connection opened for it, with the configured
    thresholds (``min_memories`` overrides AGENT_MEMORY_DENSE_MIN_MEMORIES)."""
    admin = Database(settings, setup=register_types)
    try:
        return refresh_dense_users(
            admin.connection(),
            min_memories=settings.dense_min_memories if min_memories is None else min_memories,
            max_text_matches=settings.dense_max_text_matches,
            maintenance_work_mem=maintenance_work_mem,
            concurrently=concurrently,
            max_seconds=max_seconds,
        )
    finally:
        admin.close()
