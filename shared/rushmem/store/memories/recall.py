"""Recall's candidates: one statement, scoped to the user, with two legs (cosine distance ``<=>``,
exact over the user's rows or through a dense user's own HNSW index; and full text), up to k
rows each, and the date leg when the query names a date window, read in a single round trip.

Nothing here ranks: :mod:`rushmem.recall.ranking` orders the legs and scores the candidates.
One module for one statement: its legs are fragments of the same SQL, composed per shape, and
read together they show what the single round trip does.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import functools
import json
import re
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from rushmem.records import Candidate, Window
from rushmem.store.accounts.usage import UPSERT_USAGE, usage_params
from rushmem.store.engine.session import Session, vector_column
from rushmem.store.indexes.dense import HNSW_VECTOR_MAX_DIM, ann_expression
from rushmem.store.memories.filters import dense_filters_sql
from rushmem.store.memories.scope import Scope, ScopeShape, scope_params, scope_sql
from rushmem.usage import UsageRow
from rushmem_contract.errors import StatementTimeout

TS_CONFIG = "english"  # must match the generated content_tsv column
# The distinct words of a query the full-text leg searches for (a question has a dozen or two).
MAX_TEXT_TERMS = 64
# Words the text leg never searches for: "or" (websearch syntax) and "user(s)", the subject of almost
# every memory ("The user's son attends ...": the extractors write them so). Searched, it matched
# every memory, and the text rank, scaled to the best match, gave unrelated "The user ..." memories
# the whole text weight for "Who teaches the user's boy?" while the answer had no word in common.
_NOT_SEARCHED = frozenset({"or", "user", "users"})


def text_query(text: str) -> str:
    """websearch_to_tsquery input that ORs the words of ``text``.

    websearch_to_tsquery never raises on any input, but ANDs plain words: a natural
    question would then match almost nothing. Only word characters survive, so quotes,
    '-' and 'or' from the user cannot change the query's meaning. "user" is not searched
    (:data:`_NOT_SEARCHED`).
    """
    # Each word once, and at most MAX_TEXT_TERMS of them (the first ones): the leg's cost grows with
    # the terms times the rows they match, so a pasted 4,000-character message cost ~10x a
    # 2,000-character one; now it costs what its first MAX_TEXT_TERMS distinct words cost.
    first: dict[str, str] = {}
    for word in re.findall(r"\w+", text):
        if word.casefold() not in _NOT_SEARCHED and len(first) < MAX_TEXT_TERMS:
            first.setdefault(word.casefold(), word)
    return " or ".join(first.values())


_HYBRID = """
WITH {usage_cte}{scoped_cte}{dense_cte}{ann_cte} vec AS (
    {vector_leg}
), fts AS (
    {text_leg}
){date_leg}
{json_open}SELECT m.id, m.user_id, m.project_id, m.content, m.category, m.source, m.is_evergreen, m.created_at,
       m.updated_at, m.expires_at, m.superseded_by, m.superseded_at, m.metadata, m.injection, m.valid_from,
       m.valid_until, m.stale_at, m.stale_because, m.stale_reason,
       {embedding}, {distance} AS distance, {text_rank} AS text_rank,
       m.id IN (SELECT id FROM vec) AS in_vector,
       m.id IN (SELECT id FROM fts) AS in_text,
       {dense_flag} AS dense_user{date_column}
FROM user_memories m
WHERE m.user_id = %(user_id)s AND m.id IN ({all_legs}){json_close}
"""
_DISTANCE = "m.{vec} <=> %(query_vector)s"
# Over the RDS Data API every value is JSON text and an answer stops at 1 MiB: a 1024-d vector is
# ~11 KB as text, and a recall's 150-300 candidates at limit 50 would need 2-3 MB. MMR only compares
# candidates with each other, so they come back as their sign bits (pgvector's binary_quantize,
# 128 bytes, ~172 in base64): ranking estimates each pair's cosine from the bits that differ
# (rushmem.recall.scoring.mmr_select). The query's distance is still computed on the full
# vectors, in the statement.
_EMBEDDING = "m.{vec} AS embedding"
_EMBEDDING_SIGNS = "encode(varbit_send(binary_quantize(m.{vec})), 'base64') AS embedding_signs"
_TEXT_RANK = "coalesce(ts_rank_cd(m.content_tsv, {tsq}), 0)"

# Two shapes, by whether the user is dense (why, and how a dense user's text leg reaches their GIN
# index: docs/how-it-works.md, "Indexes: what recall costs"). The ordinary shape probes the registry
# only to skip a dense user's text leg and to say so (dense_user): the caller then asks again with
# the dense shape, whose words leave out the user's common lexemes (NULL when every word is common).
_DENSE_FLAG_CTE = " dense AS MATERIALIZED (SELECT FROM agent_memory_dense_users WHERE user_id = %(user_id)s AND ready),"
_TEXT_LEG = """SELECT id FROM user_memories
    WHERE {scope} AND content_tsv @@ {tsq} AND NOT EXISTS (SELECT FROM dense)
    ORDER BY ts_rank_cd(content_tsv, {tsq}) DESC, updated_at DESC, content
    LIMIT %(k)s"""
_TSQ_WORDS = "websearch_to_tsquery('{cfg}', %(text_query)s)"
# A recall at another time (evaluated at ``now``, or valid at ``as_of``) reads user_memories for everyone, a dense user
# too: the validity it asks about (valid_from, valid_until) is not in their partition's copy, nor
# in the dense text leg's function. Correct for every user; for a dense user as slow as an exact
# scan of their rows (a rare, historical question).
_TEXT_LEG_AT = """SELECT id FROM user_memories
    WHERE {scope} AND content_tsv @@ {tsq}
    ORDER BY ts_rank_cd(content_tsv, {tsq}) DESC, updated_at DESC, content
    LIMIT %(k)s"""

_DENSE_TERMS_CTE = """ terms AS MATERIALIZED (
    SELECT d.user_id IS NOT NULL AS dense,
           nullif(array_to_string(ARRAY(
               -- each lexeme quoted for tsquery input: backslash and quote escaped
               SELECT '''' || replace(replace(l, '\\', '\\\\'), '''', '''''') || ''''
               FROM unnest(tsvector_to_array(to_tsvector('{cfg}', %(text_query)s))) AS l
               WHERE l <> ALL (coalesce(d.common_lexemes, '{{}}'))), ' | '), '')::tsquery AS q
    FROM (VALUES (1)) AS one (x) LEFT JOIN agent_memory_dense_users d ON d.user_id = %(user_id)s AND d.ready
),"""
_TEXT_LEG_DENSE = """SELECT id FROM agent_memory_dense_text_leg(
        (SELECT q FROM terms), %(k)s, %(project_id)s, {now}, {include_inactive}, {filters})"""
_TSQ_DENSE = "(SELECT q FROM terms)"

# Memories stated inside a window the query names, nearest first (the span of all the windows
# narrows the scan first). Its scope clause is unqualified: it names user_memories in the
# innermost FROM, where PostgreSQL resolves the columns first.
_DATE_LEG = """, dated AS (
    SELECT id FROM user_memories
    WHERE {scope} AND created_at >= %(window_min)s AND created_at < %(window_max)s
      AND EXISTS (SELECT 1 FROM unnest(%(window_starts)s::timestamptz[], %(window_ends)s::timestamptz[]) AS w(s, e)
                  WHERE created_at >= w.s AND created_at < w.e)
    ORDER BY {vec} <=> %(query_vector)s
    LIMIT %(date_k)s
)"""

# ORDER BY distance LIMIT k: exact over an ordinary user's rows (through the scope b-tree); for a
# dense user, through their partition's HNSW index (iterative scan; above 2,000 dimensions on the
# halfvec cast, so the leg orders by the same expression).
_VECTOR_LEG_INDEXED = """SELECT id FROM user_memories WHERE {scope}
    ORDER BY {ann} <=> {ann_query} LIMIT %(k)s"""
# The dense user's leg, and in the same statement its exact form, which runs only when the index
# scan came back short (fewer rows in scope than k, or the scan gave up): one round trip either way.
_ANN_CTE = """ ann AS (
    SELECT id FROM dense_memories WHERE {scope} ORDER BY {ann} <=> {ann_query} LIMIT %(k)s
),"""
_VECTOR_LEG_PARTITION = """SELECT id FROM ann WHERE (SELECT count(*) FROM ann) >= %(k)s
    UNION ALL
    (SELECT id FROM user_memories WHERE {scope} AND (SELECT count(*) FROM ann) < %(k)s
     ORDER BY {vec} <=> %(query_vector)s LIMIT %(k)s)"""
# Exact: every live row of the user, fenced off from any HNSW index by MATERIALIZED.
_SCOPED_CTE = "scoped AS MATERIALIZED (SELECT id, {vec} AS embedding FROM user_memories WHERE {scope}),"
_VECTOR_LEG_EXACT = "SELECT id FROM scoped ORDER BY embedding <=> %(query_vector)s LIMIT %(k)s"


# The recall's usage count, added in the same statement (a data-modifying CTE runs once, whether or
# not the query reads it): no message more than the read itself, so recall stays one round trip.
_USAGE_CTE = "usage_upsert AS ({upsert}),"


@dataclasses.dataclass(frozen=True, slots=True)
class HybridShape:
    """Which candidate statement a recall runs: everything but the values it binds. The statement is
    composed once per shape (:func:`hybrid_sql`); the recall hot path only binds values."""

    scope: ScopeShape  # whose rows, at which time, under which filters: the WHERE of every leg
    column: str  # the embedding column (a re-embedding's grace period reads the previous one)
    exact: bool = False  # the vector leg over every row in scope (the re-run of a leg that came back short)
    usage: bool = False  # the statement also adds the recall's usage count
    dated: bool = False  # with the date leg (the query names a date window)
    dense: bool = False  # the dense shape (see _DENSE_TERMS_CTE)
    # Above 2,000, the dimension of the halfvec cast a dense user's HNSW index is on (0 otherwise).
    half_dimension: int = 0
    sign_codes: bool = False  # the candidates' vectors as their sign bits (the Data API: see _EMBEDDING_SIGNS)
    as_json: bool = False  # each row one jsonb value (one statement through agent_memory_read_as)


@functools.lru_cache(maxsize=256)
def hybrid_sql(shape: HybridShape) -> str:
    """The candidate query of a shape. The scope's filters narrow every leg, so the exact fallback
    still gives a user min(k, their matching memories)."""
    where = sql.SQL(scope_sql(shape.scope))
    vec = sql.Identifier(shape.column)
    cfg = sql.SQL(TS_CONFIG)
    ann, ann_query = ann_expression(shape.column, shape.half_dimension)
    tsq: sql.Composable
    dense_cte: sql.Composable
    if shape.dense:
        tsq = sql.SQL(_TSQ_DENSE)
        dense_cte = sql.SQL(_DENSE_TERMS_CTE).format(cfg=cfg)
        text_leg = sql.SQL(_TEXT_LEG_DENSE).format(
            now=sql.SQL("%(now)s::timestamptz" if shape.scope.now else "NULL::timestamptz"),
            include_inactive=sql.Literal(shape.scope.include_inactive),
            filters=sql.SQL(dense_filters_sql(shape.scope.filters)),
        )
        flag = sql.SQL("(SELECT dense FROM terms)")
    else:
        tsq = sql.SQL(_TSQ_WORDS).format(cfg=cfg)
        dense_cte = sql.SQL(_DENSE_FLAG_CTE)
        text_leg = sql.SQL(_TEXT_LEG_AT if shape.scope.timed else _TEXT_LEG).format(scope=where, tsq=tsq)
        flag = sql.SQL("EXISTS (SELECT FROM dense)")
    # The partition holds the current model's vectors only: a process still reading the previous
    # model's column (a re-embedding's grace period) searches a dense user exactly.
    partitioned = shape.dense and shape.column == "embedding" and not shape.exact and not shape.scope.timed
    every = ["SELECT id FROM vec", "SELECT id FROM fts"]
    if shape.dated:
        every.append("SELECT id FROM dated")
    return (
        sql.SQL(_HYBRID)
        .format(
            usage_cte=sql.SQL(_USAGE_CTE).format(upsert=sql.SQL(UPSERT_USAGE.strip())) if shape.usage else sql.SQL(""),
            scoped_cte=sql.SQL(_SCOPED_CTE).format(scope=where, vec=vec) if shape.exact else sql.SQL(""),
            dense_cte=dense_cte,
            ann_cte=sql.SQL(_ANN_CTE).format(scope=where, ann=ann, ann_query=ann_query) if partitioned else sql.SQL(""),
            vector_leg=sql.SQL(_VECTOR_LEG_EXACT)
            if shape.exact
            else sql.SQL(_VECTOR_LEG_PARTITION).format(scope=where, vec=vec)
            if partitioned
            else sql.SQL(_VECTOR_LEG_INDEXED).format(scope=where, ann=ann, ann_query=ann_query),
            text_leg=text_leg,
            dense_flag=flag,
            vec=vec,
            embedding=sql.SQL(_EMBEDDING_SIGNS if shape.sign_codes else _EMBEDDING).format(vec=vec),
            json_open=sql.SQL("SELECT to_jsonb(r) FROM (" if shape.as_json else ""),
            # Best first (by the better of its places in the two legs): one statement's answer holds
            # at most 1 MiB, and a recall of the largest memories is cut there (engine.dataapi).
            json_close=sql.SQL(
                ") AS r ORDER BY least(row_number() OVER (ORDER BY r.distance), "
                "row_number() OVER (ORDER BY r.text_rank DESC)), r.id"
                if shape.as_json
                else ""
            ),
            date_leg=sql.SQL(_DATE_LEG).format(scope=where, vec=vec) if shape.dated else sql.SQL(""),
            distance=sql.SQL(_DISTANCE).format(vec=vec),
            text_rank=sql.SQL(_TEXT_RANK).format(tsq=tsq),
            date_column=sql.SQL(",\n       m.id IN (SELECT id FROM dated) AS in_date" if shape.dated else ""),
            all_legs=sql.SQL(" UNION ".join(every)),
        )
        .as_string()
    )


def hybrid_candidates(
    conn: Session,
    scope: Scope,
    query_vector: np.ndarray,
    query_text: str,
    k: int,
    *,
    statement_timeout_ms: int = 0,
    usage: Sequence[UsageRow] = (),
    windows: Sequence[Window] = (),
    date_k: int = 0,
) -> list[Candidate]:
    """Up to k candidates from each leg (vector by cosine distance, full text by ts_rank_cd),
    and with ``windows`` (the date windows the query names) up to ``date_k`` stated inside one,
    nearest first, in one statement: min(k, their memories) vector candidates for any user, however
    many rows other users have (see the legs above). The statement says whether the user is dense,
    and the process remembers it (:data:`DENSE_USERS`), so their next recalls start with that shape.
    ``usage`` (the recall's own counts) is added by the first statement itself (:data:`_USAGE_CTE`).
    """
    params: dict[str, Any] = {
        **scope_params(scope),
        "query_vector": query_vector,
        "text_query": text_query(query_text),
        "k": k,
    }
    dated = bool(windows) and date_k > 0
    if dated:
        params.update(
            window_starts=[w[0] for w in windows],
            window_ends=[w[1] for w in windows],
            window_min=min(w[0] for w in windows),
            window_max=max(w[1] for w in windows),
            date_k=date_k,
        )
    dimension = len(query_vector)
    where = scope.shape()
    timed = where.timed  # every user is then read from user_memories (see _TEXT_LEG_AT)
    shape = HybridShape(
        scope=where,
        column=vector_column(conn),
        usage=bool(usage),
        dated=dated,
        dense=DENSE_USERS.seen(scope.user_id) and not timed,
        half_dimension=dimension if dimension > HNSW_VECTOR_MAX_DIM else 0,
        sign_codes=conn.sign_code_vectors,
        as_json=conn.single_statement_reads,
    )
    for _attempt in range(_MAX_STATEMENTS):
        values = {**params, **usage_params(scope.user_id, usage)} if shape.usage else params
        rows = _run_hybrid(conn, hybrid_sql(shape), values, k, statement_timeout_ms)
        shape = dataclasses.replace(shape, usage=False)  # counted once, by the first statement
        if rows and not timed and bool(rows[0]["dense_user"]) != shape.dense:
            # The user became dense (their text leg was skipped), or no longer is: ask again.
            shape = dataclasses.replace(shape, dense=DENSE_USERS.note(scope.user_id, not shape.dense))
            continue
        # No row at all tells nothing (a store whose dense users still have 0005's partial indexes):
        # exactly. A dense user's statement recomputed a short leg exactly itself.
        if not shape.exact and not rows:
            shape = dataclasses.replace(shape, exact=True)
            continue
        break
    return [_candidate(r) for r in rows]


# At most: the first shape, the other shape, the exact re-run (a statement that found nothing), and
# one more flip should the registry change between them.
_MAX_STATEMENTS = 4


class DenseUsers:
    """Users this process saw to be dense, until when to assume they still are. Only which shape
    is tried first depends on it: each shape says whether it was the right one."""

    def __init__(self, ttl_s: float = 300.0, max_users: int = 10_000) -> None:
        self.ttl_s = ttl_s
        self.max_users = max_users
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def seen(self, user_id: str) -> bool:
        until = self._until.get(user_id)
        return until is not None and until > time.monotonic()

    def note(self, user_id: str, dense: bool) -> bool:
        with self._lock:
            if not dense:
                self._until.pop(user_id, None)
            else:
                if len(self._until) >= self.max_users:
                    self._until.clear()
                self._until[user_id] = time.monotonic() + self.ttl_s
        return dense

    def clear(self) -> None:
        with self._lock:
            self._until.clear()


DENSE_USERS = DenseUsers()


def _run_hybrid(
    conn: Session, query: str, params: dict[str, Any], k: int, statement_timeout_ms: int
) -> list[dict[str, Any]]:
    local = {
        "statement_timeout": str(statement_timeout_ms),
        # ef_search below k would cap the index scan at ef_search rows.
        "hnsw.ef_search": str(max(40, k)),
        "hnsw.iterative_scan": "relaxed_order",
        # psycopg prepares a statement after a few runs, and PostgreSQL then switches to a
        # generic plan, in which websearch_to_tsquery($text) is no constant any more (it is
        # parsed again for every row of the user, ~1.5-2.5 ms per recall) and neither is the
        # user id (a dense user's partial indexes, WHERE user_id = '...', would not match).
        # Planning each recall with its values costs ~0.3 ms.
        "plan_cache_mode": "force_custom_plan",
        # No parallel workers: starting them costs milliseconds (more on busy cores), even for a
        # leg a one-time filter then skips (a dense user's text leg in the ordinary shape).
        "max_parallel_workers_per_gather": "0",
    }
    if "usage_user" in params:
        # The statement writes the recall's usage count: no need to wait for that to reach the disk
        # (a crash may lose the last moment's counts, never a memory), so the read stays as fast.
        local["synchronous_commit"] = "off"
    try:
        rows = conn.read_once_as_user(params["user_id"], query, params, settings=local, vectors=True)
    except psycopg.errors.QueryCanceled as exc:
        raise StatementTimeout(f"recall query exceeded statement_timeout ({statement_timeout_ms} ms)") from exc
    # One statement's rows come back as JSON documents (see HybridShape.as_json): typed here.
    return [_typed(row) for row in rows] if conn.single_statement_reads else rows


_UUIDS = ("id", "superseded_by", "stale_because")
_TIMES = ("created_at", "updated_at", "expires_at", "superseded_at", "valid_from", "valid_until", "stale_at")


def _typed(document: dict[str, Any]) -> dict[str, Any]:
    """A candidate row from its jsonb form: ids and timestamps back to the types a row has."""
    row = dict(document)
    for name in _UUIDS:
        if row.get(name) is not None:
            row[name] = uuid.UUID(row[name])
    for name in _TIMES:
        if row.get(name) is not None:
            row[name] = dt.datetime.fromisoformat(row[name])
    return row


# The fields a candidate takes from its row as they are (the others are worked out below).
_AS_IS = [
    f.name
    for f in dataclasses.fields(Candidate)
    if f.name not in {"metadata", "embedding", "distance", "text_rank", "injection", "in_date", "sign_code"}
]


def _candidate(row: dict[str, Any]) -> Candidate:
    signs = "embedding_signs" in row
    return Candidate(
        **{name: row[name] for name in _AS_IS},
        metadata=row["metadata"] or {},
        embedding=_sign_vector(row["embedding_signs"]) if signs else _vector(row["embedding"]),
        distance=float(row["distance"]),
        text_rank=float(row["text_rank"]),
        injection=tuple(row["injection"] or ()),
        in_date=bool(row.get("in_date", False)),
        sign_code=signs,
    )


def _vector(value: Any) -> np.ndarray:
    if isinstance(value, str):  # a row read as JSON holds pgvector's text form, [1,2,3]
        return np.asarray(json.loads(value), dtype=np.float32)
    return np.asarray(value.to_numpy(), dtype=np.float32)


def _sign_vector(encoded: str) -> np.ndarray:
    """pgvector's bit(d) as varbit_send gives it (a 4-byte big-endian length, then the bits),
    base64-encoded: a unit vector of +-1/sqrt(d)."""
    raw = base64.b64decode(encoded)
    bits = int.from_bytes(raw[:4], "big")
    signs = np.unpackbits(np.frombuffer(raw[4:], dtype=np.uint8))[:bits].astype(np.float32) * 2 - 1
    return signs / np.float32(np.sqrt(bits))
