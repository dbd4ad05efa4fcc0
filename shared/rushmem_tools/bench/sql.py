"""The benchmarks' own SQL: bulk loading (COPY, search indexes built after the load), the seed
article's ranking query as a baseline, and the HNSW insert ceiling. Never used to serve requests.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from rushmem.records import MemoryRow
from rushmem.store.engine.connection import Connection
from rushmem.store.engine.pg import PgSession
from rushmem.store.engine.transactions import user_transaction
from rushmem.store.memories.catalog import MEMORY_COLUMNS
from rushmem.store.memories.recall import TS_CONFIG
from rushmem.store.memories.scope import Scope, scope_filter, scope_params
from rushmem_contract.errors import ConfigurationError

# The same definition as migration 0001; building it once after a bulk load is far faster than
# maintaining it row by row. (The embedding has no table-wide index: migration 0005.)
SEARCH_INDEXES = {
    "user_memories_tsv_idx": "CREATE INDEX IF NOT EXISTS user_memories_tsv_idx"
    " ON user_memories USING gin (content_tsv)",
}


def drop_search_indexes(conn: Connection, *, names: Sequence[str] = tuple(SEARCH_INDEXES)) -> None:
    """Drop the GIN index (or those named) before a bulk load; recall still works without it."""
    with conn.transaction():
        for name in names:
            if name not in SEARCH_INDEXES:
                raise ValueError(f"{name} is not one of the search indexes")
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(name)))


def build_search_indexes(conn: Connection, *, maintenance_work_mem: str = "2GB", parallel_workers: int = 1) -> None:
    """(Re)create the GIN index, then refresh the planner's statistics."""
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
    "id",
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
_COPY_TYPES = [
    "uuid", "text", "text", "text", "bytea", "text", "text", "bool", "vector", "timestamptz", "timestamptz", "jsonb",
]  # fmt: skip


def copy_memories(conn: Connection, rows: Iterable[MemoryRow]) -> int:
    """Append rows with binary COPY, in one transaction: no upsert, no duplicate folding.

    For loading new, unique data fast (an existing fact raises a unique violation and
    nothing of the batch is kept); the history trigger records each row as created.
    PostgreSQL refuses COPY FROM into a table with row-level security for any role the
    policies apply to, so this needs a superuser or a BYPASSRLS role. Returns the rows written.
    """
    if not isinstance(conn, PgSession):
        raise ConfigurationError("bulk loading with COPY needs a direct PostgreSQL connection, not the RDS Data API")
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
                        r.id or uuid.uuid4(),
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


# The seed article's ranking query, kept only as the benchmarks' baseline.

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
    where = sql.SQL("WHERE {}").format(scope_filter(scope)) if scope is not None else sql.SQL("")
    query = sql.SQL(_ARTICLE_SEED_QUERY).format(cols=sql.SQL(MEMORY_COLUMNS), cfg=sql.SQL(TS_CONFIG), where=where)
    params: dict[str, Any] = {"query_vector": query_vector, "text": query_text, "limit": limit}
    # Never prepared: a generic plan would parse the tsquery again for every row, which
    # would make the baseline slower than the article's query really is.
    if scope is None:
        return conn.execute_dicts(query, params, prepare=False, binary=True).fetchall()
    params.update(scope_params(scope))
    with user_transaction(conn, scope.user_id):
        return conn.execute_dicts(query, params, prepare=False, binary=True).fetchall()


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


def backend_count(conn: Connection, dbname: str) -> int:
    """Client connections to ``dbname`` right now (the load bench samples it)."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'", [dbname]
    ).fetchone()
    return int(row[0]) if row else 0


def url_dbname(url: str) -> str:
    return str(psycopg.conninfo.conninfo_to_dict(url)["dbname"])
