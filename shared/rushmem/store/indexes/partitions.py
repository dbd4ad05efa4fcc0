"""Dense users' own partitions of ``dense_memories`` (docs/how-it-works.md, "Indexes: what recall
costs", says what they are, how the copy is kept in step and why; migrations 0005 and 0013 hold the
schema). :func:`refresh_dense_users` brings them in line with the data, on a schedule
(``rushmem dense-users``; in the stack, MigrateFunction hourly), as the table's owner on an
autocommit connection. Safe to interrupt and run again: each step is idempotent, and a user is
read from their partition only once it is marked ready.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import psycopg
from psycopg import sql
from pydantic import BaseModel

from rushmem.config import Settings
from rushmem.store.engine.connection import Database
from rushmem.store.engine.session import Session
from rushmem.store.engine.transactions import maintenance_transaction
from rushmem.store.indexes.dense import (
    HNSW_HALFVEC_MAX_DIM,
    HNSW_VECTOR_MAX_DIM,
    INDEX_PREFIX,
    PARTITION_PREFIX,
    ann_expression,
    dense_index_names,
    partition_name,
)
from rushmem.store.schema.migrate import read_meta, register_types
from rushmem_contract.errors import ConfigurationError, InvalidInput, SchemaMismatch

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
    conn: Session,
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
    if not conn.owns_session:  # the RDS Data API shares sessions between calls
        raise ConfigurationError("refresh_dense_users needs a direct connection (its lock is per session)")
    if min_memories < 2:
        raise InvalidInput("min_memories must be at least 2", field="min_memories")
    meta = read_meta(conn)
    if "embedding_dimension" not in meta:
        raise SchemaMismatch("the database has no rushmem schema yet: run `rushmem migrate`")
    dimension = int(meta["embedding_dimension"])
    locked = conn.execute("SELECT pg_try_advisory_lock(%s)", [REFRESH_LOCK_KEY]).fetchone()
    if not locked or not locked[0]:
        logger.info("dense users: another refresh is running")
        return DenseUsersReport(done=False)
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    report = DenseUsersReport()
    keep_from = max(1, min_memories // 2)
    try:
        with maintenance_transaction(conn, source="dense-users"):
            # One pass over the scope b-tree (~1 s per million rows).
            counts: dict[str, int] = dict(
                conn.execute(
                    "SELECT user_id, count(*) FROM user_memories GROUP BY user_id HAVING count(*) >= %s", [keep_from]
                ).fetchall()
            )
            listed: dict[str, bool] = dict(
                conn.execute("SELECT user_id, ready FROM agent_memory_dense_users").fetchall()
            )
        dense = {u: n for u, n in counts.items() if n >= min_memories or u in listed}
        for user_id in sorted(listed.keys() - dense.keys()):
            _unlist(conn, user_id)
            report.unlisted += 1
        # 0005's partial indexes on user_memories, and partitions nobody is listed for: the triggers
        # keep a partition in step only while its user is listed (a re-embedding's switch unlists
        # everyone: their partitions hold the previous model's vectors), so it is built anew.
        _drop_indexes(conn, _old_partial_indexes(conn), concurrently=concurrently)
        kept = {partition_name(user_id) for user_id in dense if user_id in listed}
        strays = [name for name in _partitions(conn) if name not in kept]
        for name in strays:
            _drop_partition(conn, name, concurrently=concurrently)
        report.orphans_dropped = len(strays)
        _match_dimension(conn, dimension)
        conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", [maintenance_work_mem])
        try:
            # Listed users first (their partitions may need finishing), then the largest new ones.
            for user_id in sorted(dense, key=lambda u: (u not in listed, -dense[u], u)):
                if deadline is not None and time.monotonic() >= deadline:
                    report.done = False
                    break
                changed = _ensure_partition(
                    conn, user_id, dimension, ready=listed.get(user_id, False), concurrently=concurrently
                )
                _mark_ready(conn, user_id, dense[user_id], max_text_matches)
                if user_id not in listed:
                    report.indexed += 1
                elif changed or not listed[user_id]:
                    report.rebuilt += 1
                else:
                    report.refreshed += 1
        finally:
            conn.execute("RESET maintenance_work_mem")
    finally:
        if not conn.closed:
            conn.execute("SELECT pg_advisory_unlock(%s)", [REFRESH_LOCK_KEY])
    logger.info("dense users refreshed", extra={"report": report.model_dump()})
    return report


def _old_partial_indexes(conn: Session) -> list[str]:
    rows = conn.execute(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = 'user_memories'::regclass AND starts_with(c.relname, %s) ORDER BY c.relname",
        [INDEX_PREFIX],
    ).fetchall()
    return [r[0] for r in rows]


def _partitions(conn: Session) -> list[str]:
    """Every table named like a dense user's partition: attached, or left detached by an interrupted run."""
    rows = conn.execute(
        "SELECT relname FROM pg_class WHERE relkind = 'r' AND starts_with(relname, %s) "
        "AND relnamespace = current_schema()::regnamespace ORDER BY relname",
        [PARTITION_PREFIX],
    ).fetchall()
    return [r[0] for r in rows]


def _attached(conn: Session, name: str) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT FROM pg_inherits WHERE inhrelid = to_regclass(%s) "
        "AND inhparent = 'dense_memories'::regclass)",
        [name],
    ).fetchone()
    return bool(row and row[0])


def _match_dimension(conn: Session, dimension: int) -> None:
    """After a re-embedding to another dimension (which unlists every user), the copy's column takes
    the new one; by then no partition is left, so nothing is rewritten."""
    row = conn.execute(
        "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'dense_memories'::regclass AND attname = 'embedding'"
    ).fetchone()
    if row is not None and row[0] != dimension:
        _owner_ddl(
            conn,
            sql.SQL("ALTER TABLE dense_memories ALTER COLUMN embedding TYPE vector({})").format(
                sql.Literal(int(dimension))
            ),
        )


def _ensure_partition(conn: Session, user_id: str, dimension: int, *, ready: bool, concurrently: bool) -> bool:
    """Give the user a filled, indexed partition; True when something had to be done. Each step is
    idempotent, so a run interrupted anywhere is finished by the next. A ready partition is not
    filled again (the triggers keep it), only rid of rows deleted during its fill."""
    name = partition_name(user_id)
    table = sql.Identifier(name)
    changed = False
    if conn.execute("SELECT to_regclass(%s)", [name]).fetchone() == (None,):
        _owner_ddl(conn, sql.SQL("CREATE TABLE {} (LIKE dense_memories INCLUDING DEFAULTS)").format(table))
        changed = True
    if not _attached(conn, name):
        # Scans the (empty) table to check its rows belong; SHARE UPDATE EXCLUSIVE on the parent.
        _owner_ddl(
            conn,
            sql.SQL("ALTER TABLE dense_memories ATTACH PARTITION {} FOR VALUES IN ({})").format(
                table, sql.Literal(user_id)
            ),
        )
        changed = True
    # Listed under the user's write lock (the one writers take): a write that began before sees no
    # listing and commits before the fill's snapshot; every later one is copied by the triggers.
    with maintenance_transaction(conn, source="dense-users"):
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", [user_id])
        conn.execute(
            "INSERT INTO agent_memory_dense_users (user_id, memories) VALUES (%s, 0) ON CONFLICT (user_id) DO NOTHING",
            [user_id],
        )
    filled = 0
    with maintenance_transaction(conn, source="dense-users"):
        if not ready:
            filled = conn.execute(
                "INSERT INTO dense_memories (user_id, id, project_id, category, metadata, created_at, updated_at, "
                "expires_at, superseded_at, embedding, content_tsv, valid_from, valid_until) "
                "SELECT user_id, id, project_id, category, metadata, created_at, updated_at, expires_at, "
                "superseded_at, embedding, content_tsv, valid_from, valid_until FROM user_memories "
                "WHERE user_id = %(u)s "
                "ON CONFLICT (user_id, id) DO NOTHING",
                {"u": user_id},
            ).rowcount
        # Rows a delete removed while the user was being listed (it saw no listing yet): their
        # words must not outlive the memory.
        ghosts = conn.execute(
            "DELETE FROM dense_memories d WHERE d.user_id = %(u)s "
            "AND NOT EXISTS (SELECT FROM user_memories m WHERE m.user_id = %(u)s AND m.id = d.id)",
            {"u": user_id},
        ).rowcount
    changed = changed or filled > 0 or ghosts > 0
    vec_name, tsv_name = dense_index_names(user_id)
    wanted: list[tuple[str, sql.Composable]] = [(tsv_name, sql.SQL("USING gin (content_tsv)"))]
    if dimension <= HNSW_HALFVEC_MAX_DIM:
        ann, _query = ann_expression("embedding", dimension)
        opclass = sql.SQL("vector_cosine_ops" if dimension <= HNSW_VECTOR_MAX_DIM else "halfvec_cosine_ops")
        wanted.insert(0, (vec_name, sql.SQL("USING hnsw ({} {})").format(ann, opclass)))
    for index, body in wanted:
        state = conn.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(%s)", [index]).fetchone()
        if state is not None and state[0]:
            continue
        if state is not None:  # left invalid by an interrupted concurrent build
            _drop_indexes(conn, [index], concurrently=concurrently)
        _owner_ddl(
            conn,
            sql.SQL("CREATE INDEX {} {} ON {} {}").format(
                sql.SQL("CONCURRENTLY" if concurrently else ""), sql.Identifier(index), table, body
            ),
        )
        changed = True
    if changed:
        conn.execute(sql.SQL("ANALYZE {}").format(table))
    return changed


def _mark_ready(conn: Session, user_id: str, memories: int, max_text_matches: int) -> None:
    """Ready for recall, with the lexemes more than ``max_text_matches`` of the user's memories contain."""
    with maintenance_transaction(conn, source="dense-users"):
        common = conn.execute(
            "SELECT coalesce(array_agg(word ORDER BY word), '{}') FROM ts_stat("
            "format('SELECT content_tsv FROM dense_memories WHERE user_id = %%L', %s::text)) WHERE ndoc > %s",
            [user_id, max_text_matches],
        ).fetchone()
        conn.execute(
            "UPDATE agent_memory_dense_users SET memories = %s, common_lexemes = %s, ready = true, checked_at = now() "
            "WHERE user_id = %s",
            [memories, common[0] if common else [], user_id],
        )


def _unlist(conn: Session, user_id: str) -> None:
    """Recall goes back to exact search for the user; their partition is dropped."""
    with maintenance_transaction(conn, source="dense-users"):
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", [user_id])
        conn.execute("DELETE FROM agent_memory_dense_users WHERE user_id = %s", [user_id])
    _drop_partition(conn, partition_name(user_id), concurrently=True)


def _drop_partition(conn: Session, name: str, *, concurrently: bool) -> None:
    """Detach (CONCURRENTLY: reads and writes of other users go on) and drop a partition nobody is
    listed for; its rows are a copy."""
    table = sql.Identifier(name)
    if _attached(conn, name):
        pending = conn.execute(
            "SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = to_regclass(%s)", [name]
        ).fetchone()
        if pending and pending[0]:
            _owner_ddl(conn, sql.SQL("ALTER TABLE dense_memories DETACH PARTITION {} FINALIZE").format(table))
        else:
            _owner_ddl(
                conn,
                sql.SQL("ALTER TABLE dense_memories DETACH PARTITION {} {}").format(
                    table, sql.SQL("CONCURRENTLY" if concurrently else "")
                ),
            )
    _owner_ddl(conn, sql.SQL("DROP TABLE IF EXISTS {}").format(table))


def _drop_indexes(conn: Session, names: Iterable[str], *, concurrently: bool) -> None:
    for name in names:
        _owner_ddl(
            conn,
            sql.SQL("DROP INDEX {} IF EXISTS {}").format(
                sql.SQL("CONCURRENTLY" if concurrently else ""), sql.Identifier(name)
            ),
        )


def _owner_ddl(conn: Session, statement: sql.Composed) -> None:
    try:
        conn.execute(statement)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise ConfigurationError("dense users' partitions change the schema: run it as the table's owner") from exc


def refresh(
    settings: Settings,
    *,
    min_memories: int | None = None,
    concurrently: bool = True,
    max_seconds: float | None = None,
    maintenance_work_mem: str = "256MB",
) -> DenseUsersReport:
    """:func:`refresh_dense_users` on an owner connection opened for it, with the configured
    thresholds (``min_memories`` overrides RUSHMEM_DENSE_MIN_MEMORIES)."""
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
