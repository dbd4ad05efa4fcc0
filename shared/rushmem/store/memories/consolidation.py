"""Consolidation's SQL: the users to visit in order, one user's live memories with their vectors, the
merges, and the checkpoint a run resumes from.

A merge marks the duplicate as replaced by the memory it duplicates (superseded_by, with the
change reason 'merged': its history says 'merged', not 'superseded') and refreshes the kept one
with what the duplicate brought (the later time, its metadata, evergreen). Nothing is deleted:
the duplicate stays readable with its history until the retention purge, like any replaced memory.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import numpy as np
from psycopg import sql

from rushmem.records import LiveMemory
from rushmem.store.engine.session import Session, vector_column
from rushmem.store.engine.transactions import maintenance_transaction, user_transaction
from rushmem.store.memories.writes import supersede_memories

# Where the last run stopped (the last user done; '' when a run went round): agent_memory_meta.
CHECKPOINT_KEY = "consolidate_after"


def users_after(conn: Session, *, after: str, limit: int) -> list[str]:
    """Up to ``limit`` users with live memories, in id order, after ``after`` (''= from the start).
    Across users: as agent_memory_maintenance."""
    with maintenance_transaction(conn, source="consolidate"):
        rows = conn.execute(
            "SELECT DISTINCT user_id FROM user_memories WHERE user_id > %s AND superseded_at IS NULL "
            "ORDER BY user_id LIMIT %s",
            [after, limit],
        ).fetchall()
    return [r[0] for r in rows]


def read_checkpoint(conn: Session) -> str:
    with maintenance_transaction(conn, source="consolidate"):
        row = conn.execute("SELECT value FROM agent_memory_meta WHERE key = %s", [CHECKPOINT_KEY]).fetchone()
    return row[0] if row else ""


def write_checkpoint(conn: Session, *, after: str) -> None:
    with maintenance_transaction(conn, source="consolidate"):
        conn.execute("UPDATE agent_memory_meta SET value = %s WHERE key = %s", [after, CHECKPOINT_KEY])


_LIVE = """
SELECT id, project_id, content, created_at, {vec} AS embedding, valid_from FROM user_memories
WHERE user_id = %(user_id)s AND superseded_at IS NULL AND (expires_at IS NULL OR expires_at > now())
ORDER BY valid_from, created_at, id
"""


def live_memories(conn: Session, user_id: str) -> list[LiveMemory]:
    """The user's live memories, oldest first (valid time, then when stated), with their embeddings
    (one read; the comparing is done in memory: one matrix product per scope, see
    rushmem.ingest.consolidation)."""
    with user_transaction(conn, user_id, vectors=True):
        query = sql.SQL(_LIVE).format(vec=sql.Identifier(vector_column(conn)))
        rows = conn.execute(query, {"user_id": user_id}, binary=True).fetchall()
    return [
        LiveMemory(r[0], r[1], r[2], r[3], np.asarray(r[4].to_numpy(), dtype=np.float32), valid_from=r[5]) for r in rows
    ]


def merge(
    conn: Session, user_id: str, pairs: Sequence[tuple[uuid.UUID, uuid.UUID]], *, write_id: uuid.UUID
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Merge each (duplicate, kept) pair, both still live, in one transaction of the user (their
    writers wait); the pairs actually merged. Recorded in the history ('merged' on the duplicate,
    'refreshed' on the kept one when it became fresher) under ``write_id``."""
    if not pairs:
        return []
    with user_transaction(conn, user_id, source="consolidate", reason="merged", lock=True, write_id=write_id):
        rows = conn.execute(
            MERGE_SIMPLE,
            {"user_id": user_id, "dups": [p[0] for p in pairs], "keeps": [p[1] for p in pairs]},
        ).fetchall()
        merged = [(r[0], r[1]) for r in rows]
        if merged:
            conn.execute(
                REFRESH_KEPT, {"user_id": user_id, "dups": [m[0] for m in merged], "keeps": [m[1] for m in merged]}
            )
    return merged


def supersede(
    conn: Session, user_id: str, pairs: Sequence[tuple[uuid.UUID, uuid.UUID]], *, write_id: uuid.UUID
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Supersede each stale memory by its update, both still live, in one transaction of the user
    (the write path's statement: valid-until set to when the update became true); the pairs done.
    Recorded in the history ('superseded') under ``write_id``."""
    with user_transaction(conn, user_id, source="consolidate", lock=True, write_id=write_id):
        return supersede_memories(conn, user_id, pairs)


MERGE_SIMPLE = """
UPDATE user_memories d SET superseded_at = now(), superseded_by = t.keep,
                           valid_until = GREATEST(d.valid_from, now())
FROM unnest(%(dups)s::uuid[], %(keeps)s::uuid[]) AS t(dup, keep)
WHERE d.id = t.dup AND d.user_id = %(user_id)s AND d.superseded_at IS NULL AND t.dup <> t.keep
  AND EXISTS (SELECT 1 FROM user_memories k WHERE k.id = t.keep AND k.user_id = %(user_id)s
              AND k.superseded_at IS NULL)
RETURNING d.id, t.keep
"""

# The kept memory takes what its duplicates brought: the latest statement time, their metadata
# under its own (its keys win), evergreen if any was.
REFRESH_KEPT = """
UPDATE user_memories k SET
    updated_at   = GREATEST(k.updated_at, s.updated_at),
    metadata     = s.metadata || k.metadata,
    is_evergreen = k.is_evergreen OR s.is_evergreen
FROM (
    SELECT t.keep, max(d.updated_at) AS updated_at, bool_or(d.is_evergreen) AS is_evergreen,
           coalesce(jsonb_object_agg(e.key, e.value) FILTER (WHERE e.key IS NOT NULL), '{}'::jsonb) AS metadata
    FROM unnest(%(dups)s::uuid[], %(keeps)s::uuid[]) AS t(dup, keep)
    JOIN user_memories d ON d.id = t.dup AND d.user_id = %(user_id)s
    LEFT JOIN LATERAL jsonb_each(d.metadata) e ON true
    GROUP BY t.keep
) s
WHERE k.id = s.keep AND k.user_id = %(user_id)s
"""
