"""The SQL behind what users and operators do with stored memories: list, history, forget, purge
(forgetting a whole user, with its receipt, is :mod:`rushmem.store.accounts.erasures`)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from psycopg import sql

from rushmem.store.engine.session import Session, bounded, cut
from rushmem.store.engine.transactions import maintenance_transaction, user_transaction
from rushmem.store.memories.scope import Scope, scope_filter, scope_params
from rushmem_contract.models import MemoryEvent, MemoryRecord, UserCount

MEMORY_COLUMNS = (
    "id, user_id, project_id, content, category, source, is_evergreen, created_at, updated_at, "
    "expires_at, superseded_by, superseded_at, metadata, injection, write_id, valid_from, valid_until, depends_on, "
    "stale_at, stale_because, stale_reason"
)


def list_memories(
    conn: Session, scope: Scope, *, limit: int, after: tuple[dt.datetime, uuid.UUID] | None = None
) -> list[MemoryRecord]:
    """A page of the user's memories, newest first; ``after`` is the last row of the previous page.
    Read in statements of at most a Data API answer each (:func:`bounded`): one unless it is large."""
    found: list[dict[str, Any]] = []
    with user_transaction(conn, scope.user_id):
        while len(found) < limit:
            where = scope_filter(scope)
            if after is not None:
                where = sql.SQL("{} AND (created_at, id) < (%(after_at)s, %(after_id)s)").format(where)
            query = sql.SQL(
                "SELECT {cols} FROM user_memories WHERE {where} ORDER BY created_at DESC, id DESC LIMIT %(limit)s"
            )
            params = {
                **scope_params(scope),
                "limit": limit - len(found),
                "after_at": after[0] if after else None,
                "after_id": after[1] if after else None,
            }
            page = query.format(cols=sql.SQL(MEMORY_COLUMNS), where=where)
            rows = conn.execute_dicts(bounded(page, MEMORY_COLUMNS, "created_at DESC, id DESC"), params).fetchall()
            found += rows
            if not cut(rows):
                break
            after = (rows[-1]["created_at"], rows[-1]["id"])
    return [MemoryRecord(**row) for row in found]


# A memory and its lineage: every earlier version of its fact, however deep (the text an edit kept,
# what a correction replaced, a duplicate consolidation merged into it), each found by its
# superseded_by. A memory that lives again after being replaced is no earlier version of anything.
_DELETE_LINEAGE = """
WITH RECURSIVE lineage (id) AS (
    SELECT id FROM user_memories WHERE user_id = %(user_id)s AND id = %(id)s
    UNION
    SELECT m.id FROM user_memories m JOIN lineage l ON m.superseded_by = l.id
    WHERE m.user_id = %(user_id)s AND m.superseded_at IS NOT NULL
)
DELETE FROM user_memories WHERE user_id = %(user_id)s AND id IN (SELECT id FROM lineage) RETURNING id
"""


def delete_memory(conn: Session, user_id: str, memory_id: uuid.UUID, *, source: str | None = None) -> int:
    """Delete one memory of this user with its lineage (the earlier versions of its fact), recording
    who asked; how many memories went (0: the user has none with that id). The history trigger takes
    every deleted memory's text out of the history and the outbox. Under the user's write lock, so no
    write adds a version to the lineage while it is deleted."""
    with user_transaction(conn, user_id, source=source, lock=True):
        rows = conn.execute(_DELETE_LINEAGE, {"user_id": user_id, "id": memory_id}).fetchall()
    return len(rows)


_EVENT_COLUMNS = "memory_id, event, at, source, content, related_id, project_id, detail, write_id"

# The user's events as they are read: an 'updated' event's previous metadata whole again from the
# patches it is stored as (functions.sql, agent_memory_metadata_fold), and its text, which it keeps
# only when the edit changed it, from the memory's event before (agent_memory_latest), so a
# history reads as it did when every event kept whole copies. ``{where}`` picks the events; a
# reader after a cursor also passes the memory's earlier events these start from, and drops them after.
EVENTS_AS_READ = """
SELECT id, memory_id, event, at, source, related_id, project_id, write_id,
       CASE WHEN event = 'updated' AND content IS NULL THEN agent_memory_latest(content) OVER w
            ELSE content END AS content,
       CASE WHEN detail -> 'previous' ? 'metadata_patch'
            THEN jsonb_set(detail #- '{{previous,metadata_patch}}', '{{previous,metadata}}',
                           agent_memory_metadata_fold(detail -> 'previous') OVER w)
            ELSE detail END AS detail
FROM memory_events WHERE user_id = %(user_id)s AND {where}
WINDOW w AS (PARTITION BY memory_id ORDER BY at, id ROWS UNBOUNDED PRECEDING)
"""
# An event the fold of a later one may need: one that recorded previous metadata.
METADATA_EVENT = "(event = 'updated' AND detail -> 'previous' ?| ARRAY['metadata', 'metadata_patch'])"
# Before a cursor, each memory's last event with its text (an 'updated' event after it may have none).
_LAST_TEXT = (
    "id IN (SELECT DISTINCT ON (memory_id) id FROM memory_events "
    "WHERE user_id = %(user_id)s AND (%(memory_id)s::uuid IS NULL OR memory_id = %(memory_id)s) "
    "AND (at, id) <= (%(after_at)s, %(after_id)s) AND content IS NOT NULL ORDER BY memory_id, at DESC, id DESC)"
)


def history_page(
    conn: Session,
    user_id: str,
    memory_id: uuid.UUID | None = None,
    *,
    limit: int,
    after: tuple[dt.datetime, int] | None = None,
) -> list[tuple[int, MemoryEvent]]:
    """Up to ``limit`` recorded changes, oldest first, each with its event id (the cursor's key with
    ``at``); ``after``: the (at, id) of the previous page's last event."""
    found: list[dict[str, Any]] = []
    with user_transaction(conn, user_id):
        while len(found) < limit:
            later = "(%(after_at)s::timestamptz IS NULL OR (at, id) > (%(after_at)s, %(after_id)s))"
            events = EVENTS_AS_READ.format(
                where=f"(%(memory_id)s::uuid IS NULL OR memory_id = %(memory_id)s) "
                f"AND ({later} OR {METADATA_EVENT} OR {_LAST_TEXT})"
            )
            query = f"SELECT id, {_EVENT_COLUMNS} FROM ({events}) e WHERE {later} ORDER BY at, id LIMIT %(limit)s"
            params = {
                "user_id": user_id,
                "memory_id": memory_id,
                "limit": limit - len(found),
                "after_at": after[0] if after else None,
                "after_id": after[1] if after else None,
            }
            rows = conn.execute_dicts(bounded(sql.SQL(query), f"id, {_EVENT_COLUMNS}", "at, id"), params).fetchall()
            found += rows
            if not cut(rows):
                break
            after = (rows[-1]["at"], rows[-1]["id"])
    rows = found
    return [(row.pop("id"), MemoryEvent(**row)) for row in rows]


def memory_owner(conn: Session, memory_id: uuid.UUID) -> str | None:
    """Whose stored memory this is (None: none has this id): across users, so as the maintenance
    role (an operator's connection; the stack's, as agent_memory_app, cannot: ConfigurationError)."""
    with maintenance_transaction(conn, source="owner"):
        row = conn.execute("SELECT user_id FROM user_memories WHERE id = %s", [memory_id]).fetchone()
    return None if row is None else str(row[0])


_USER_COUNTS = """
WITH stored AS (
    SELECT user_id,
           count(*) FILTER (WHERE superseded_at IS NULL AND (expires_at IS NULL OR expires_at > now())) AS memories,
           count(*) AS stored
    FROM user_memories GROUP BY user_id
), held AS (
    -- held writes and consolidation's proposals waiting for a decision (0021): the page's "waiting"
    SELECT user_id, count(*) AS pending FROM (
        SELECT user_id FROM pending_memories
        UNION ALL SELECT user_id FROM consolidation_proposals WHERE decision IS NULL
    ) w GROUP BY user_id
)
SELECT coalesce(s.user_id, h.user_id) AS user_id, coalesce(s.memories, 0) AS memories,
       coalesce(s.stored, 0) AS stored, coalesce(h.pending, 0) AS pending
FROM stored s FULL JOIN held h ON h.user_id = s.user_id
ORDER BY 1 LIMIT %(limit)s
"""


def user_counts(conn: Session, *, limit: int) -> list[UserCount]:
    """Every user (up to ``limit``, by id) with their memory counts: across users, so as the
    maintenance role (an operator's connection, as `rushmem serve` has)."""
    with maintenance_transaction(conn, source="users"):
        rows = conn.execute_dicts(_USER_COUNTS, {"limit": limit}).fetchall()
    return [UserCount(**row) for row in rows]


def purge(conn: Session, *, now: dt.datetime, superseded_before: dt.datetime) -> tuple[int, int]:
    """Remove expired memories and those superseded before the cut-off; (expired, superseded) counts.

    Both are recorded in the history (as 'expired' / 'purged'), which is kept.
    """
    with maintenance_transaction(conn, source="purge", reason="expired", events=True):
        expired = conn.execute("DELETE FROM user_memories WHERE expires_at <= %s", [now]).rowcount
    with maintenance_transaction(conn, source="purge", reason="purged", events=True):
        superseded = conn.execute("DELETE FROM user_memories WHERE superseded_at < %s", [superseded_before]).rowcount
    return expired, superseded
