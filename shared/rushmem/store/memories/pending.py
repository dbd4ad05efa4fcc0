"""The SQL of writes that wait for review (migration 0016): hold them, list them, take one for a
decision and close it. pending_memories is a table of its own, so no recall statement reads it;
its trigger records each step in the history and the change events."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb

from rushmem.store.engine.session import Session, oldest_first
from rushmem.store.engine.transactions import user_transaction
from rushmem_contract.errors import AgentMemoryError, Conflict, NotFound
from rushmem_contract.models import NewMemory, PendingMemory, content_hash

_COLUMNS = "id, user_id, project_id, content, category, source, reasons, created_at, write_id"

# The same fact held twice (a retried write) is one pending row: its id either way.
_HOLD = """
WITH held AS (
    INSERT INTO pending_memories
        (user_id, project_id, content, content_hash, category, source, reasons, memory, write_id)
    VALUES (%(user_id)s, %(project_id)s, %(content)s, %(hash)s, %(category)s, %(source)s, %(reasons)s, %(memory)s,
            %(write_id)s)
    ON CONFLICT (user_id, coalesce(project_id, ''), content_hash) DO NOTHING
    RETURNING id
)
SELECT id FROM held
UNION ALL
SELECT id FROM pending_memories
WHERE user_id = %(user_id)s AND coalesce(project_id, '') = coalesce(%(project_id)s, '') AND content_hash = %(hash)s
  AND NOT EXISTS (SELECT FROM held)
"""


def hold(
    conn: Session,
    user_id: str,
    memories: Sequence[tuple[NewMemory, list[str]]],
    *,
    project_id: str | None,
    source: str | None,
    write_id: uuid.UUID,
) -> list[uuid.UUID]:
    """Keep ``memories`` (each with why it waits) for review; their pending ids, in order."""
    ids: list[uuid.UUID] = []
    with user_transaction(conn, user_id, source=source, write_id=write_id):
        for memory, reasons in memories:
            scope = memory.project_id or project_id
            params: dict[str, Any] = {
                "user_id": user_id,
                "project_id": scope,
                "content": memory.content,
                "hash": content_hash(memory.content),
                "category": memory.category,
                "source": source,
                "reasons": reasons,
                "memory": Jsonb(memory.model_dump(mode="json", exclude_defaults=True) | {"project_id": scope}),
                "write_id": write_id,
            }
            row = conn.execute(_HOLD, params).fetchone()
            assert row is not None  # inserted, or the row that conflicted
            ids.append(row[0])
    return ids


def list_pending(conn: Session, user_id: str, *, project_id: str | None, limit: int) -> list[PendingMemory]:
    """The user's writes waiting for review (with a project: its own and the user-wide), oldest first;
    read in statements of at most a Data API answer each (:func:`oldest_first`)."""
    query = (
        f"SELECT {_COLUMNS} FROM pending_memories WHERE user_id = %(user_id)s "
        "AND (%(project_id)s::text IS NULL OR project_id = %(project_id)s OR project_id IS NULL) "
        "AND (%(after_at)s::timestamptz IS NULL OR (created_at, id) > (%(after_at)s, %(after_id)s)) "
        "ORDER BY created_at, id LIMIT %(limit)s"
    )
    with user_transaction(conn, user_id):
        found = oldest_first(conn, query, _COLUMNS, {"user_id": user_id, "project_id": project_id}, limit=limit)
    return [PendingMemory(**row) for row in found]


def pending_memory(conn: Session, user_id: str, pending_id: uuid.UUID) -> tuple[NewMemory, str | None] | None:
    """The fact a pending write holds, as it will be written, and its source; None when there is none."""
    with user_transaction(conn, user_id):
        row = conn.execute_dicts(
            "SELECT memory, source FROM pending_memories WHERE user_id = %s AND id = %s", [user_id, pending_id]
        ).fetchone()
    return None if row is None else (NewMemory.model_validate(row["memory"]), row["source"])


def close_pending(
    conn: Session,
    user_id: str,
    pending_id: uuid.UUID,
    *,
    approve: bool,
    source: str | None,
    write_id: uuid.UUID,
) -> None:
    """End a pending write in a transaction of its own, approved without a memory (nothing was
    written) or rejected; raises as :func:`decide`."""
    with user_transaction(conn, user_id, write_id=write_id):
        decide(conn, user_id, pending_id, approve=approve, approved_as=None, source=source)


def decide(
    conn: Session,
    user_id: str,
    pending_id: uuid.UUID,
    *,
    approve: bool,
    approved_as: uuid.UUID | None,
    source: str | None,
) -> None:
    """In the caller's open transaction of this user, as its last statements: end the pending
    write with this decision (they set the decision, its source and the approved memory for the
    trigger). The pending row is the lock: a decision racing this one waits for it, then finds it
    gone. When it is gone, raises Conflict naming the decision that ended it (read in the same
    transaction, after the failed delete: that decision has committed), or NotFound when the
    history holds none (never held, or not this user's); the caller's transaction rolls back."""
    conn.execute(
        "SELECT set_config('agent_memory.change_reason', %s, true), "
        "set_config('agent_memory.change_source', %s, true), set_config('agent_memory.approved_as', %s, true)",
        ["approved" if approve else "rejected", source or "", str(approved_as) if approved_as is not None else ""],
    )
    row = conn.execute(
        "DELETE FROM pending_memories WHERE user_id = %s AND id = %s RETURNING id", [user_id, pending_id]
    ).fetchone()
    if row is None:
        raise already_decided(decision_of(conn, user_id, pending_id))


_DECISION = (
    "SELECT event FROM memory_events WHERE user_id = %s AND memory_id = %s "
    "AND event IN ('approved', 'rejected') ORDER BY at DESC, id DESC LIMIT 1"
)


def decision_of(conn: Session, user_id: str, pending_id: uuid.UUID) -> str | None:
    """In the caller's open transaction: the decision the history records for one of the user's
    held writes ('approved' or 'rejected'); None when there is none (never held, or forgotten
    with its user)."""
    row = conn.execute(_DECISION, [user_id, pending_id]).fetchone()
    return None if row is None else str(row[0])


def decided(conn: Session, user_id: str, pending_id: uuid.UUID) -> str | None:
    """:func:`decision_of` in a transaction of its own."""
    with user_transaction(conn, user_id):
        return decision_of(conn, user_id, pending_id)


def already_decided(taken: str | None) -> AgentMemoryError:
    """The answer to a decision on a held write no longer waiting: Conflict (field ``decision``)
    naming the decision taken (the same words at every door: the approved memory's id is in the
    held write's history), or NotFound when there is none to name."""
    if taken is None:
        return NotFound("no pending write with this id for this user")
    return Conflict(f"this write was already {taken}; this decision was not applied", field="decision")
