"""What recall (the query) and the maintenance run (the partitions) must agree on about dense users'
own partitions of ``dense_memories``: their names and the expression the HNSW index is built on
(see :mod:`rushmem.store.indexes.partitions`, migration 0013)."""

from __future__ import annotations

import hashlib

from psycopg import sql

# 0005's partial indexes on user_memories (dropped by the next run since 0013).
INDEX_PREFIX = "user_memories_dense_"
PARTITION_PREFIX = "dense_memories_"
# pgvector's HNSW takes vector up to 2,000 dimensions and halfvec up to 4,000: above 2,000 a dense
# user's index is on the half-precision cast (recall orders by the same expression); above 4,000
# they get the GIN index only and their vector leg stays exact.
HNSW_VECTOR_MAX_DIM = 2000
HNSW_HALFVEC_MAX_DIM = 4000


def partition_name(user_id: str) -> str:
    """The name of a dense user's partition of ``dense_memories``: a hash, so no user id is in a name;
    its HNSW and GIN indexes are ``<name>_vec`` and ``<name>_tsv``."""
    return PARTITION_PREFIX + hashlib.sha256(user_id.encode()).hexdigest()[:20]


def dense_index_names(user_id: str) -> tuple[str, str]:
    """(HNSW, GIN) index names on a dense user's partition."""
    name = partition_name(user_id)
    return f"{name}_vec", f"{name}_tsv"


def ann_expression(column: str, dimension: int) -> tuple[sql.Composable, sql.Composable]:
    """(indexed expression, query expression) of a dense user's approximate vector leg: the column
    and the query vector, or both cast to halfvec above 2,000 dimensions."""
    col = sql.Identifier(column)
    if dimension <= HNSW_VECTOR_MAX_DIM:
        return col, sql.SQL("%(query_vector)s")
    half = sql.SQL("halfvec({})").format(sql.Literal(int(dimension)))
    return sql.SQL("({}::{})").format(col, half), sql.SQL("%(query_vector)s::{}").format(half)
