"""The SQL of reading and editing one memory by id: get, and update in place (content, category,
metadata, expiry, evergreen) with the history recording the change."""

from __future__ import annotations

import datetime as dt
import functools
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
from psycopg import sql
from psycopg.types.json import Jsonb

from rushmem import poison
from rushmem.store.accounts.usage import add_usage
from rushmem.store.engine.session import Session, vector_column
from rushmem.store.engine.transactions import read_as_user, user_transaction
from rushmem.store.memories.catalog import EVENTS_AS_READ, MEMORY_COLUMNS
from rushmem.usage import UsageRow
from rushmem_contract.errors import Conflict, SchemaMismatch
from rushmem_contract.models import MemoryEvent, MemoryRecord, content_hash

_GET = f"SELECT {MEMORY_COLUMNS} FROM user_memories WHERE user_id = %(user_id)s AND id = %(id)s"

# The other memory of the same scope that already states the new content (the unique key is
# user, project, content hash), whether it is still live, and whether it is an earlier version of
# the memory being edited (superseded by it).
_CLASH = """
SELECT m.id, m.superseded_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > now()) AS live,
       m.superseded_by = t.id AS version
FROM user_memories m JOIN user_memories t ON t.user_id = m.user_id AND t.project_id IS NOT DISTINCT FROM m.project_id
WHERE t.user_id = %(user_id)s AND t.id = %(id)s AND m.content_hash = %(hash)s AND m.id <> t.id
"""

# The memory as it is before a change of what it says, if it is current (valid now): that text is
# kept as a version of its own (below), so the past is never rewritten.
_CURRENT_ROW = """
SELECT user_id, project_id, content, content_hash, category, source, is_evergreen, {vec} AS embedding, created_at,
       updated_at, expires_at, metadata, injection, valid_from, write_id
FROM user_memories
WHERE user_id = %(user_id)s AND id = %(id)s AND superseded_at IS NULL AND valid_from <= now()
  AND (expires_at IS NULL OR expires_at > now())
"""
# The previous text as a version: true from when it was, until now, superseded by the edited memory.
_KEEP_VERSION = """
INSERT INTO user_memories (user_id, project_id, content, content_hash, category, source, is_evergreen, {vec},
                           created_at, updated_at, expires_at, metadata, injection, valid_from, write_id,
                           valid_until, superseded_at, superseded_by)
VALUES (%(user_id)s, %(project_id)s, %(content)s, %(content_hash)s, %(category)s, %(source)s, %(is_evergreen)s,
        %(embedding)s, %(created_at)s, %(updated_at)s, %(expires_at)s, %(metadata)s, %(injection)s,
        %(valid_from)s, %(write_id)s, GREATEST(%(valid_from)s, now()), now(), %(id)s)
"""

# A new text kept as a new version (not a typo fix) changes the fact: what followed from it is stale
# (0023), as when a correction supersedes it (the trigger's case; the edited memory keeps its id).
_DEPENDENTS_STALE = """
UPDATE user_memories SET stale_at = now(), stale_because = %(id)s, stale_reason = 'superseded'
WHERE user_id = %(user_id)s AND depends_on <> '{}' AND depends_on @> ARRAY[%(id)s::uuid]
  AND superseded_at IS NULL AND stale_at IS NULL AND id <> %(id)s
"""

# Columns a change may set, and the SQL value each takes (the embedding's column is the store's).
_SETTERS = {
    "content": "content = %(content)s, content_hash = %(hash)s, {vec} = %(embedding)s, updated_at = now(), "
    "injection = %(injection)s",
    "category": "category = %(category)s",
    "metadata": "metadata = %(metadata)s",
    "expires_at": "expires_at = %(expires_at)s",
    "is_evergreen": "is_evergreen = %(is_evergreen)s",
    # A new text keeping the past: the edited memory says it from now on.
    "valid_from": "valid_from = now()",
}


def get_memory(conn: Session, user_id: str, memory_id: uuid.UUID) -> MemoryRecord | None:
    """The user's memory with this id (live or not), or None: one round trip."""
    rows = read_as_user(conn, user_id, _GET, {"user_id": user_id, "id": memory_id})
    return MemoryRecord.model_validate(rows[0]) if rows else None


@functools.lru_cache(maxsize=64)
def _update_sql(fields: frozenset[str], column: str) -> sql.Composed:
    """The UPDATE for one set of changed fields, composed once per shape."""
    sets = sql.SQL(", ").join(sql.SQL(_SETTERS[f]).format(vec=sql.Identifier(column)) for f in sorted(fields))
    return sql.SQL(
        "UPDATE user_memories SET {sets} WHERE user_id = %(user_id)s AND id = %(id)s RETURNING {cols}"
    ).format(sets=sets, cols=sql.SQL(MEMORY_COLUMNS))


def update_memory(
    conn: Session,
    user_id: str,
    memory_id: uuid.UUID,
    changes: dict[str, Any],
    *,
    embedding: np.ndarray | None = None,
    source: str | None = None,
    write_id: uuid.UUID | None = None,
    usage: Sequence[UsageRow] = (),
    keep_past: bool = True,
) -> MemoryRecord | None:
    """Apply ``changes`` (column -> new value; a new content needs its ``embedding``) to the
    user's memory; the memory as it now is, or None when the user has none with that id.

    In the user's locked transaction, so no other write of the user slips between the check
    for a clash and the update. Raises Conflict (field ``content``) when another memory of the
    same scope already states the new content. ``write_id`` names the edit in the row and its
    history. ``usage`` (the new content's embedding) is counted in the same transaction, only
    when the memory was changed.

    A new content of a current memory never rewrites the past (``keep_past``, unless the new text
    only rewords it: the same content hash, or a typo fix the caller says it is): the previous text
    is kept as a version (a row of its own, valid until now, superseded by this memory) and the
    memory says the new text from now on, so ``as_of`` before the edit reads the old text. Going
    back to an earlier version's text folds that version into the memory (one row per fact in a
    scope: its earlier validity interval is not kept, as with any fact stated again).
    """
    params: dict[str, Any] = {"user_id": user_id, "id": memory_id, **changes}
    if "metadata" in changes:
        params["metadata"] = Jsonb(changes["metadata"])
    with user_transaction(
        conn, user_id, source=source, reason="updated", lock=True, vectors="content" in changes, write_id=write_id
    ):
        if "content" in changes:
            if embedding is None:
                raise ValueError("a new content needs its embedding")
            schema = conn.vector_schema
            if schema is not None and not schema.writable:
                raise SchemaMismatch(
                    f"the store now embeds with {schema.current_model}; this process uses {schema.fingerprint} "
                    "and may not write vectors until it is redeployed with the new model"
                )
            params["hash"] = content_hash(changes["content"])
            params["injection"] = poison.reasons(changes["content"])  # a new text is marked anew
            params["embedding"] = embedding
            clash = conn.execute(_CLASH, params).fetchone()
            if clash is not None and clash[2]:
                conn.execute("DELETE FROM user_memories WHERE user_id = %s AND id = %s", [user_id, clash[0]])
            elif clash is not None:
                state = "" if clash[1] else " (superseded or expired: forget it first to reuse its content)"
                raise Conflict(
                    f"memory {clash[0]}{state} already states this content in the same scope", field="content"
                )
        column = vector_column(conn)
        previous = None
        if "content" in changes and keep_past:
            previous = conn.execute_dicts(sql.SQL(_CURRENT_ROW).format(vec=sql.Identifier(column)), params).fetchone()
            if previous is not None and bytes(previous["content_hash"]) == params["hash"]:
                previous = None  # the same fact reworded (case, spacing): no new version
        fields = frozenset(changes) | ({"valid_from"} if previous is not None else set())
        found = conn.execute_dicts(_update_sql(fields, column), params).fetchone()
        updated = MemoryRecord(**found) if found is not None else None
        if updated is not None and previous is not None:
            version = {**previous, "id": memory_id, "metadata": Jsonb(previous["metadata"])}
            conn.execute(sql.SQL(_KEEP_VERSION).format(vec=sql.Identifier(column)), version)
            conn.execute(_DEPENDENTS_STALE, {"user_id": user_id, "id": memory_id})
        if updated is not None:  # no memory, no write: nothing is counted
            add_usage(conn, user_id, usage)
        return updated


# Each memory's events from its first, while their content and detail as read (the previous
# metadata whole) add up to the budget (and the first whatever its size), with how many the memory
# has: the rest is never read out.
_HISTORIES = """
SELECT id, memory_id, event, at, source, content, related_id, project_id, detail, write_id, kept, total FROM (
    SELECT id, memory_id, event, at, source, content, related_id, project_id, detail, write_id,
           sum(octet_length(coalesce(content, '')) + octet_length(detail::text) + 200) OVER w AS used,
           row_number() OVER w AS kept, count(*) OVER (PARTITION BY memory_id) AS total
    FROM ({events}) r
    WINDOW w AS (PARTITION BY memory_id ORDER BY at, id)
) e WHERE used <= %(budget)s OR kept = 1 ORDER BY at, id
""".format(events=EVENTS_AS_READ.format(where="memory_id = ANY(%(ids)s)"))


def histories(
    conn: Session, user_id: str, memory_ids: list[uuid.UUID], *, budget: int
) -> tuple[list[MemoryEvent], dict[uuid.UUID, tuple[dt.datetime, int]]]:
    """The recorded changes of several of the user's memories, oldest first (one round trip): of
    each memory, its events from the first while they add up to ``budget`` bytes; and for each
    memory whose history goes on, the (at, id) of the last event given (a history page's cursor)."""
    rows = read_as_user(conn, user_id, _HISTORIES, {"user_id": user_id, "ids": memory_ids, "budget": budget})
    events: list[MemoryEvent] = []
    last: dict[uuid.UUID, tuple[dt.datetime, int]] = {}
    short: set[uuid.UUID] = set()
    for row in rows:
        event_id, kept, total = row.pop("id"), row.pop("kept"), row.pop("total")
        event = MemoryEvent.model_validate(row)
        events.append(event)
        last[event.memory_id] = (event.at, int(event_id))
        if int(kept) < int(total):
            short.add(event.memory_id)
        else:
            short.discard(event.memory_id)
    return events, {memory_id: last[memory_id] for memory_id in short}
