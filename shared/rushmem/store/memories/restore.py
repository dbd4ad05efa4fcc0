"""Restoring exported memories (import lines that carry an id): each keeps its id, timestamps,
source and supersession; a line whose id another user's memory has is refused, never taken over."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from rushmem.records import MemoryRow, WriteOutcome
from rushmem.store.accounts.usage import add_usage
from rushmem.store.engine.session import Session
from rushmem.store.engine.transactions import user_transaction
from rushmem.store.memories.writes import check_writable, row_params
from rushmem.usage import UsageRow
from rushmem_contract.errors import InvalidInput

# ON CONFLICT DO NOTHING covers both keys: the id (whoever has it: uniqueness is checked past
# row-level security, so another user's row is never touched) and the fact key.
_RESTORE = """
INSERT INTO user_memories AS m (id, user_id, project_id, content, content_hash, category, source, is_evergreen,
                                embedding, created_at, updated_at, expires_at, superseded_at, superseded_by, metadata,
                                injection, write_id, valid_from, valid_until, depends_on, stale_at, stale_because,
                                stale_reason)
SELECT t.id, t.user_id, t.project_id, t.content, t.content_hash, t.category, t.source, t.is_evergreen, t.embedding,
       COALESCE(t.created_at, now()), COALESCE(t.updated_at, t.created_at, now()), t.expires_at,
       t.superseded_at, t.superseded_by, t.metadata, string_to_array(t.injection, ','), t.write_id,
       COALESCE(t.valid_from, t.created_at, now()), COALESCE(t.valid_until, t.superseded_at),
       string_to_array(t.depends_on, ',')::uuid[], t.stale_at, t.stale_because, t.stale_reason
FROM unnest(%(ids)s::uuid[], %(user_ids)s::text[], %(project_ids)s::text[], %(contents)s::text[],
            %(hashes)s::bytea[], %(categories)s::text[], %(sources)s::text[], %(evergreen)s::boolean[],
            %(embeddings)b::vector[], %(created)s::timestamptz[], %(updated)s::timestamptz[],
            %(expires)s::timestamptz[], %(superseded_at)s::timestamptz[], %(superseded_by)s::uuid[],
            %(metadata)s::jsonb[], %(injection)s::text[], %(write_ids)s::uuid[], %(valid_from)s::timestamptz[],
            %(valid_until)s::timestamptz[], %(depends_on)s::text[], %(stale_at)s::timestamptz[],
            %(stale_because)s::uuid[], %(stale_reason)s::text[])
     AS t(id, user_id, project_id, content, content_hash, category, source, is_evergreen, embedding,
          created_at, updated_at, expires_at, superseded_at, superseded_by, metadata, injection, write_id,
          valid_from, valid_until, depends_on, stale_at, stale_because, stale_reason)
ON CONFLICT DO NOTHING
RETURNING m.id
"""

# What the user already has under those ids or fact keys (the rows the insert skipped).
_EXISTING = """
SELECT id, project_id, content_hash FROM user_memories
WHERE user_id = %(user_id)s AND (id = ANY(%(ids)s) OR content_hash = ANY(%(hashes)s))
"""


def _params(rows: Sequence[MemoryRow]) -> dict[str, Any]:
    """The write path's arrays, and what only a restore carries: ids, updated_at, supersession."""
    return {
        **row_params(rows),
        "ids": [r.id for r in rows],
        "updated": [r.updated_at for r in rows],
        "superseded_at": [r.superseded_at for r in rows],
        "superseded_by": [r.superseded_by for r in rows],
        # The write that made the exported memory (kept); none: the import's own (the trigger's).
        "write_ids": [r.write_id for r in rows],
        "valid_until": [r.valid_until for r in rows],
        # What it follows from and whether it went stale, as exported (a name kept as it was, as
        # superseded_by's successors are not: a memory it followed from may have been deleted since).
        "depends_on": [",".join(map(str, r.depends_on)) for r in rows],
        "stale_at": [r.stale_at for r in rows],
        "stale_because": [r.stale_because for r in rows],
        "stale_reason": [r.stale_reason for r in rows],
    }


# Which of the named memories the user has (row-level security hides every other user's).
_HAS = "SELECT id FROM user_memories WHERE user_id = %(user_id)s AND id = ANY(%(ids)s)"


def _check_successors(conn: Session, user_id: str, rows: Sequence[MemoryRow]) -> None:
    """Every restored row's ``superseded_by`` names a memory the user has (stored before, or in this
    call): InvalidInput naming ``superseded_by`` otherwise, the same for another user's memory as for
    none (nothing leaks), and the transaction with the row rolls back."""
    wanted = {row.superseded_by for row in rows if row.superseded_by is not None}
    if not wanted:
        return
    found = {r[0] for r in conn.execute(_HAS, {"user_id": user_id, "ids": list(wanted)}).fetchall()}
    missing = sorted(str(memory_id) for memory_id in wanted - found)
    if missing:
        raise InvalidInput(
            f"superseded_by {', '.join(missing)} names no memory of this user (neither stored nor imported)",
            field="superseded_by",
        )


def restore_memories(
    conn: Session,
    rows: Sequence[MemoryRow],
    *,
    source: str | None,
    usage: Mapping[str, Sequence[UsageRow]] | None = None,
    write_id: uuid.UUID | None = None,
) -> list[WriteOutcome]:
    """Insert rows that carry their id, one transaction per user; outcomes in input order.
    ``usage``: per user, the counts the restore adds to the user's usage, in the same transaction.

    A row whose id or fact key the user already has changes nothing and answers with that
    memory ("refreshed": importing the same export twice is a no-op). A row whose id belongs to
    another user is refused (InvalidInput naming ``id``), and with it the whole call; so is a row
    whose ``superseded_by`` names no memory of its user (InvalidInput naming ``superseded_by``).
    """
    check_writable(conn)  # as every write of vectors: never the previous model's into the new column
    outcomes: dict[int, WriteOutcome] = {}
    by_user: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        if row.id is None:
            raise ValueError("a restored row needs its id")
        by_user.setdefault(row.user_id, []).append(i)
    for user_id, indexes in by_user.items():
        batch = [rows[i] for i in indexes]
        with user_transaction(conn, user_id, source=source, lock=True, vectors=True, write_id=write_id):
            add_usage(conn, user_id, (usage or {}).get(user_id, ()))
            inserted = {r[0] for r in conn.execute(_RESTORE, _params(batch)).fetchall()}
            _check_successors(conn, user_id, [row for row in batch if row.id in inserted])
            skipped = [i for i in indexes if rows[i].id not in inserted]
            existing: dict[Any, uuid.UUID] = {}
            if skipped:
                found = conn.execute(
                    _EXISTING,
                    {
                        "user_id": user_id,
                        "ids": [rows[i].id for i in skipped],
                        "hashes": [rows[i].content_hash for i in skipped],
                    },
                ).fetchall()
                for memory_id, project_id, digest in found:
                    existing[memory_id] = memory_id
                    existing[(project_id, bytes(digest))] = memory_id
            for i in indexes:
                row = rows[i]
                if row.id is not None and row.id in inserted:
                    outcomes[i] = WriteOutcome(row.id, "created")
                    continue
                same = existing.get(row.id) or existing.get((row.project_id, row.content_hash))
                if same is None:
                    raise InvalidInput(f"id {row.id} is already used by another memory", field="id")
                outcomes[i] = WriteOutcome(same, "refreshed")
    return [outcomes[i] for i in range(len(rows))]
