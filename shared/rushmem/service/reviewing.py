"""Writes that wait for review (AGENT_MEMORY_REVIEW_WRITES): list them, approve or reject one."""

from __future__ import annotations

import builtins
import logging
import uuid

from rushmem.service.writing import Writing
from rushmem.store.memories import pending as held_writes
from rushmem_contract.errors import InvalidInput, NotFound
from rushmem_contract.models import (
    MAX_PAGE,
    PendingMemory,
    ReviewDecision,
    ReviewOutcome,
)

logger = logging.getLogger(__name__)


class Reviewing(Writing):
    """Writing's verbs and the review of what they held (an approval is a write)."""

    def pending(
        self, *, user_id: str, project_id: str | None = None, limit: int = MAX_PAGE
    ) -> builtins.list[PendingMemory]:
        """The user's writes waiting for review, oldest first: never recalled until approved."""
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}, got {limit}", field="limit")
        found: list[PendingMemory] = self._parts.db.run(
            lambda conn: held_writes.list_pending(conn, user_id, project_id=project_id, limit=limit)
        )
        return found

    def review(
        self, pending_id: uuid.UUID, decision: ReviewDecision, *, user_id: str, source: str | None = None
    ) -> ReviewOutcome:
        """Approve a pending write (it is written as any write is, and recalled from now on) or
        reject it (nothing is stored; its text leaves the history). NotFound when the user has no
        such pending write (decided already, or never theirs)."""
        found = self._parts.db.run(lambda conn: held_writes.pending_memory(conn, user_id, pending_id))
        if found is None:
            raise NotFound("no pending write with this id for this user")
        memory, written_by = found
        memory_id: uuid.UUID | None = None
        if decision == "approve":
            stored = self.add([memory], user_id=user_id, project_id=memory.project_id, source=written_by, reviewed=True)
            memory_id = stored.ids[0] if stored.ids else None
            write_id = stored.write_id or uuid.uuid4()
        else:
            write_id = uuid.uuid4()
        closed = self._parts.db.run(
            lambda conn: held_writes.close_pending(
                conn, user_id, pending_id, approved_as=memory_id, source=source, write_id=write_id
            )
        )
        if not closed and decision == "reject":  # decided meanwhile by another reviewer
            raise NotFound("no pending write with this id for this user")
        logger.info("reviewed", extra={"user_id": user_id, "decision": decision, "write_id": str(write_id)})
        self._parts.publish_changes(user_id)
        return ReviewOutcome(id=pending_id, decision=decision, memory_id=memory_id, write_id=write_id)
