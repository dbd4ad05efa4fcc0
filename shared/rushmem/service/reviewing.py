"""Writes that wait for review (RUSHMEM_REVIEW_WRITES): list them, approve or reject one."""

from __future__ import annotations

import logging
import uuid

from rushmem.records import WriteOutcome
from rushmem.service.base import Collaborators
from rushmem.service.context import Context
from rushmem.service.writing import store_facts
from rushmem.store.engine.session import Session
from rushmem.store.memories import pending as held_writes
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
    reject it (nothing is stored; its text leaves the history). One decision per held write,
    however many reviewers decide at once, on any number of containers: an approval's memory and
    the end of the held write commit in one transaction, rolled back when another decision ended
    the held write first (:func:`rushmem.store.memories.pending.decide`). A decision that lost, or
    any decision after one, is a Conflict naming the decision taken. NotFound when the user has no
    such pending write (never, or not theirs)."""
    user_id, pending_id, decision = ctx.user, request.pending_id, request.decision
    found = parts.db.run(lambda conn: held_writes.pending_memory(conn, user_id, pending_id))
    if found is None:
        raise held_writes.already_decided(parts.db.run(lambda conn: held_writes.decided(conn, user_id, pending_id)))
    memory, written_by = found
    memory_id: uuid.UUID | None = None
    closed = False
    if decision == "approve":
        approved = Context(caller=ctx.caller, user_id=user_id, source=written_by, reviewed=True)

        def close(conn: Session, outcomes: list[WriteOutcome]) -> None:
            nonlocal closed
            made = outcomes[0].id if outcomes else None
            held_writes.decide(conn, user_id, pending_id, approve=True, approved_as=made, source=ctx.source)
            closed = True

        stored = store_facts(parts, [memory], approved, project_id=memory.project_id, commit_with=close)
        memory_id = stored.ids[0] if stored.ids else None
        write_id = stored.write_id or uuid.uuid4()
    else:
        write_id = uuid.uuid4()
    if not closed:  # a rejection, or an approval whose fact was not written (redaction dropped it)
        parts.db.run(
            lambda conn: held_writes.close_pending(
                conn, user_id, pending_id, approve=decision == "approve", source=ctx.source, write_id=write_id
            )
        )
    ctx.wrote = True
    logger.info("reviewed", extra={"user_id": user_id, "decision": decision, "write_id": str(write_id)})
    return ReviewOutcome(id=pending_id, decision=decision, memory_id=memory_id, write_id=write_id)
