"""What an explained recall reads of the memories its caller names (``explain_ids``): each one's
lifecycle, whether the recall's scope and filters let it in, its similarity to the query and its
place by similarity among the memories in scope, or that it is a write still waiting for review.
One statement, only when asked for."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence

import numpy as np
from psycopg import sql

from rushmem.records import NamedRow
from rushmem.store.engine.session import Session, vector_column
from rushmem.store.engine.transactions import read_as_user
from rushmem.store.memories.filters import filters_sql
from rushmem.store.memories.recall import TS_CONFIG, text_query
from rushmem.store.memories.scope import Scope, ScopeShape, scope_params, scope_sql

# The scope's clause is unqualified: in the subquery it names the inner user_memories (PostgreSQL
# resolves the innermost FROM first), in `named` the outer one.
_NAMED = """
WITH named AS (
    SELECT id, project_id, created_at, expires_at, superseded_at, valid_from, valid_until,
           {vec} <=> %(query_vector)s AS distance,
           content_tsv @@ websearch_to_tsquery('{cfg}', %(text_query)s) AS text_match,
           (TRUE{filters}) AS in_filters,
           ({scope}) AS in_scope
    FROM user_memories WHERE user_id = %(user_id)s AND id = ANY(%(ids)s)
)
SELECT named.*, CASE WHEN in_scope THEN (
    SELECT count(*) + 1 FROM user_memories WHERE {scope} AND {vec} <=> %(query_vector)s < named.distance
) END AS vector_position, false AS pending
FROM named
UNION ALL
-- A write held for review (0016) is no memory yet: named by its pending id, it says so.
SELECT id, project_id, created_at, NULL, NULL, created_at, NULL, NULL, NULL, false, false, NULL, true
FROM pending_memories WHERE user_id = %(user_id)s AND id = ANY(%(ids)s)
"""


@functools.lru_cache(maxsize=32)
def _named_sql(shape: ScopeShape, column: str) -> str:
    return (
        sql.SQL(_NAMED)
        .format(
            vec=sql.Identifier(column),
            cfg=sql.SQL(TS_CONFIG),
            filters=sql.SQL(filters_sql(shape.filters)),
            scope=sql.SQL(scope_sql(shape)),
        )
        .as_string()
    )


def named_memories(
    conn: Session, scope: Scope, ids: Sequence[uuid.UUID], query_vector: np.ndarray, query_text: str
) -> dict[uuid.UUID, NamedRow]:
    """The user's memories among ``ids`` (another user's id is simply absent), by id."""
    params = {
        **scope_params(scope),
        "ids": list(ids),
        "query_vector": query_vector,
        "text_query": text_query(query_text),
    }
    rows = read_as_user(conn, scope.user_id, _named_sql(scope.shape(), vector_column(conn)), params, vectors=True)
    return {r["id"]: NamedRow.from_row(r) for r in rows}
