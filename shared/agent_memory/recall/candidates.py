"""Recall's candidates: one statement, scoped to the user, with two index-backed legs (cosine
distance ``<=>`` and full text), up to k rows each, read in a single round trip.

Nothing here ranks: :mod:`agent_memory.recall.ranking` orders the legs and scores the candidates.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import re
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql

from agent_memory.db.connection import Connection, vector_column
from agent_memory.db.filters import FilterShape, filter_shape, filters_sql
from agent_memory.db.scope import Scope, scope_params, scope_sql
from agent_memory.db.transactions import read_as_user
from agent_memory.db.usage import UPSERT_USAGE, usage_params
from agent_memory.errors import StatementTimeout
from agent_memory.usage import UsageRow

TS_CONFIG = "english"  # must match the generated content_tsv column


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    """A live memory of the user that one leg or both found, with what ranking needs."""

    id: uuid.UUID
    user_id: str
    project_id: str | None
    content: str
    category: str
    source: str | None
    is_evergreen: bool
    created_at: dt.datetime
    updated_at: dt.datetime
    expires_at: dt.datetime | None
    superseded_by: uuid.UUID | None
    superseded_at: dt.datetime | None
    metadata: dict[str, Any]
    embedding: npt.NDArray[np.float32]  # unit length
    distance: float  # cosine distance to the query, 0 = same direction
    text_rank: float  # ts_rank_cd, 0 when the text does not match
    in_vector: bool  # among the vector leg's k nearest
    in_text: bool  # among the full-text leg's k best
    injection: tuple[str, ...] = ()  # why it looks like it carries instructions (agent_memory.poison)


def text_query(text: str) -> str:
    """websearch_to_tsquery input that ORs the words of ``text``.

    websearch_to_tsquery never raises on any input, but ANDs plain words: a natural
    question would then match almost nothing. Only word characters survive, so quotes,
    '-' and 'or' from the user cannot change the query's meaning.
    """
    words = [w for w in re.findall(r"\w+", text) if w.casefold() != "or"]
    return " or ".join(words)


_HYBRID = """
WITH {usage_cte}{scoped_cte} vec AS (
    {vector_leg}
), fts AS (
    SELECT id FROM user_memories
    WHERE {scope} AND content_tsv @@ websearch_to_tsquery('{cfg}', %(text_query)s)
    ORDER BY ts_rank_cd(content_tsv, websearch_to_tsquery('{cfg}', %(text_query)s)) DESC, updated_at DESC, content
    LIMIT %(k)s
)
SELECT m.id, m.user_id, m.project_id, m.content, m.category, m.source, m.is_evergreen, m.created_at,
       m.updated_at, m.expires_at, m.superseded_by, m.superseded_at, m.metadata, m.injection,
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


# The recall's usage count, added in the same statement (a data-modifying CTE runs once, whether or
# not the query reads it): no message more than the read itself, so recall stays one round trip.
_USAGE_CTE = "usage_upsert AS ({upsert}),"


def _hybrid_sql(scope: Scope, exact: bool, column: str, usage: bool = False) -> str:
    return _hybrid_query(
        scope.project_id is not None,
        scope.include_inactive,
        scope.now is not None,
        exact,
        column,
        filter_shape(scope.filters),
        usage,
    )


@functools.lru_cache(maxsize=256)
def _hybrid_query(
    has_project: bool,
    include_inactive: bool,
    as_of: bool,
    exact: bool,
    column: str,
    filters: FilterShape,
    usage: bool,
) -> str:
    """The candidate query, composed once per shape (the recall hot path only binds values).
    The filters narrow the scope of every leg, so the exact fallback still gives a user
    min(k, their matching memories)."""
    where = sql.SQL(scope_sql(has_project, include_inactive, as_of) + filters_sql(filters))
    vec = sql.Identifier(column)
    return (
        sql.SQL(_HYBRID)
        .format(
            usage_cte=sql.SQL(_USAGE_CTE).format(upsert=sql.SQL(UPSERT_USAGE.strip())) if usage else sql.SQL(""),
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
    statement_timeout_ms: int = 0,
    usage: Sequence[UsageRow] = (),
) -> list[Candidate]:
    """Up to k candidates from each leg (vector by cosine distance, full text by ts_rank_cd).

    The vector leg first uses the HNSW index. An index scan under a selective filter
    (one user among many) can come back short, so when it returns fewer than k rows the
    leg is recomputed exactly over the user's rows: a user always gets
    min(k, their memories) vector candidates, however many rows other users have.
    ``usage`` (the recall's own counts) is added to the user's usage by the first statement
    itself (a data-modifying CTE), so it costs no extra message nor round trip.
    """
    params: dict[str, Any] = {
        **scope_params(scope),
        "query_vector": query_vector,
        "text_query": text_query(query_text),
        "k": k,
    }
    column = vector_column(conn)
    first = {**params, **usage_params(scope.user_id, usage)} if usage else params
    rows = _run_hybrid(conn, _hybrid_sql(scope, False, column, bool(usage)), first, k, statement_timeout_ms)
    if sum(1 for r in rows if r["in_vector"]) < k:
        rows = _run_hybrid(conn, _hybrid_sql(scope, True, column), params, k, statement_timeout_ms)
    return [_candidate(r) for r in rows]


def _run_hybrid(
    conn: Connection, query: str, params: dict[str, Any], k: int, statement_timeout_ms: int
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
    if "usage_user" in params:
        # The statement writes the recall's usage count: no need to wait for that to reach the disk
        # (a crash may lose the last moment's counts, never a memory), so the read stays as fast.
        local["synchronous_commit"] = "off"
    try:
        return read_as_user(conn, params["user_id"], query, params, settings=local, vectors=True)
    except psycopg.errors.QueryCanceled as exc:
        raise StatementTimeout(f"recall query exceeded statement_timeout ({statement_timeout_ms} ms)") from exc


def _candidate(row: dict[str, Any]) -> Candidate:
    return Candidate(
        id=row["id"],
        user_id=row["user_id"],
        project_id=row["project_id"],
        content=row["content"],
        category=row["category"],
        source=row["source"],
        is_evergreen=row["is_evergreen"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        expires_at=row["expires_at"],
        superseded_by=row["superseded_by"],
        superseded_at=row["superseded_at"],
        metadata=row["metadata"] or {},
        embedding=np.asarray(row["embedding"].to_numpy(), dtype=np.float32),
        distance=float(row["distance"]),
        text_rank=float(row["text_rank"]),
        in_vector=row["in_vector"],
        in_text=row["in_text"],
        injection=tuple(row["injection"] or ()),
    )
