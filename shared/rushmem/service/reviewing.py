"""Writes that wait for review (RUSHMEM_REVIEW_WRITES): list them, approve or reject one."""

from __future__ import annotations

import logging
import uuid

from rushmem.service.base import Collaborators
from rushmem.service.context import Context
from rushmem.service.writing import store_facts
from rushmem.store.memories import pending as held_writes
from rushmem_contract.errors import NotFound
from rushmem_contract.models import PendingPage, ReviewOutcome
from rushmem_contract.schemas import PendingRequest, ReviewRequest

logger = logging.getLogger(__name__)


def pending(parts: Collaborators, request: PendingRequest, ctx: Context) -> PendingPage:
    """The user's writes waiting for review, oldest first: never recalled until approved."""
    user_id = ctx.user
    found = parts.db.run(
        lambda conn: held_writes.list_pending(conn, user_id, project_id=request.project_id, limit=request.limit)
    )
    return PendingPage(memories=found)


def review(parts: Collaborators, request: ReviewRequest, ctx: Context) -> ReviewOutcome:
    """Approve a pending write (it is written as any write is, and recalled from now on) or
    reject it (nothing is stored; its text leaves the history). NotFound when the user has no
    such pending write (decided already, or never theirs)."""
    user_id, pending_id, decision = ctx.user, request.pending_id, request.decision
    found = parts.db.run(lambda conn: held_writes.pending_memory(conn, user_id, pending_id))
    if found is None:
        raise NotFound("no pending write with this id for this user")
    memory, written_by = found
    memory_id: uuid.UUID | None = None
    if decision == "approve":
        approved = Context(caller=ctx.caller, user_id=user_id, source=written_by, reviewed=True)
        stored = store_facts(parts, [memory], approved, project_id=memory.project_id)
        memory_id = stored.ids[0] if stored.ids else None
        write_id = stored.write_id or uuid.uuid4()
    else:
        write_id = uuid.uuid4()
    closed = parts.db.run(
        lambda conn: held_writes.close_pending(
            conn, user_id, pending_id, approved_as=memory_id, source=ctx.source, write_id=write_id
        )
    )
    if not closed and decision == "reject":  # decided meanwhile by another reviewer
        raise NotFound("no pending write with this id for this user")
    ctx.wrote = True
    logger.info("reviewed", extra={"user_id": user_id, "decision": decision, "write_id": str(write_id)})
    return ReviewOutcome(id=pending_id, decision=decision, memory_id=memory_id, write_id=write_id)
