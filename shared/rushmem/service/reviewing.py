"""Writes that wait for review (RUSHMEM_REVIEW_WRITES), and consolidation's proposals with review
on: list them, approve or reject one. Every text listed is shown with its hidden characters made
visible (:func:`rushmem_contract.inputs.reveal_hidden`)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from rushmem.records import WriteOutcome
from rushmem.service.base import Collaborators
from rushmem.service.context import Context
from rushmem.service.writing import store_facts
from rushmem.store.engine.session import Session
from rushmem.store.memories import pending as held_writes
from rushmem.store.memories import proposals
from rushmem_contract.errors import Conflict
from rushmem_contract.inputs import reveal_hidden
from rushmem_contract.models import PendingMemory, PendingPage, ProposedChange, ProposedMemory, ReviewOutcome
from rushmem_contract.schemas import PendingRequest, ReviewRequest

logger = logging.getLogger(__name__)


def pending(parts: Collaborators, request: PendingRequest, ctx: Context) -> PendingPage:
    """The user's writes waiting for review and, with review on, consolidation's proposals, oldest
    first: never recalled until approved. Texts as a reviewer must see them (hidden characters shown)."""
    user_id, project_id, limit = ctx.user, request.project_id, request.limit
    found = parts.db.run(lambda conn: held_writes.list_pending(conn, user_id, project_id=project_id, limit=limit))
    waiting = parts.db.run(lambda conn: proposals.list_waiting(conn, user_id, project_id=project_id, limit=limit))
    shown = [held.model_copy(update={"content": reveal_hidden(held.content)}) for held in found]
    merged = sorted([*shown, *map(_proposal, waiting)], key=lambda p: (p.created_at, p.id))
    return PendingPage(memories=merged[:limit])


# Why a proposal waits, by its action (the reasons a held write's list has).
_REASONS = {"merge": "consolidation:same_fact", "retire": "consolidation:newer_value"}


def _proposal(row: dict[str, Any]) -> PendingMemory:
    """A waiting proposal as listed: what approving does in words, both texts as a reviewer must see them."""
    memory = ProposedMemory(id=row["memory_id"], content=reveal_hidden(row["memory_content"]))
    kept = ProposedMemory(id=row["other_id"], content=reveal_hidden(row["other_content"]))
    if row["action"] == "merge":
        summary = f'Merge "{memory.content}" into "{kept.content}"'
    else:
        summary = f'Retire "{memory.content}", superseded by "{kept.content}"'
    return PendingMemory(
        id=row["id"],
        user_id=row["user_id"],
        project_id=row["project_id"],
        content=summary,
        category=row["category"],
        source="consolidate",
        reasons=[_REASONS[row["action"]]],
        created_at=row["created_at"],
        write_id=row["write_id"],
        kind=row["action"],
        proposal=ProposedChange(memory=memory, kept=kept, still_applies=row["still_applies"]),
    )


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
        proposed = _decide_proposal(parts, request, ctx)
        if proposed is not None:
            return proposed
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


def _decide_proposal(parts: Collaborators, request: ReviewRequest, ctx: Context) -> ReviewOutcome | None:
    """A decision on one of consolidation's proposals (None: there is no such proposal). Approved,
    the merge or retirement is applied in the decision's transaction, once both memories are still
    as proposed; else the proposal is withdrawn and the answer is a Conflict naming the decision,
    as is any decision on a proposal decided before."""
    user_id, proposal_id, source = ctx.user, request.pending_id, ctx.source
    approve, write_id = request.decision == "approve", uuid.uuid4()
    done, kept = parts.db.run(
        lambda conn: proposals.decide(conn, user_id, proposal_id, approve=approve, source=source, write_id=write_id)
    )
    if done == "":
        return None
    if isinstance(done, str):
        raise Conflict(f"this proposal was already {done}; this decision was not applied", field="decision")
    if done is proposals.Decided.STALE:
        raise Conflict(
            "the memories changed since consolidation proposed this (edited, deleted or ended): the proposal "
            "is withdrawn and this decision was not applied",
            field="decision",
        )
    ctx.wrote = True  # the dispatcher publishes the change events (a merge's, a supersession's)
    logger.info("reviewed", extra={"user_id": user_id, "decision": request.decision, "write_id": str(write_id)})
    return ReviewOutcome(id=proposal_id, decision=request.decision, memory_id=kept, write_id=write_id)
