"""Changing what is stored: edit one memory, forget one or all of a user's, erasure receipts."""

from __future__ import annotations

import logging
import uuid
from functools import partial
from typing import Any

from rushmem.ingest.redaction import REDACTED_KEY
from rushmem.ingest.rows import check_metadata
from rushmem.service.base import Collaborators
from rushmem.service.cells import Cells
from rushmem.service.context import Context
from rushmem.store.accounts import erasures as receipts
from rushmem.store.memories import catalog, edits
from rushmem.usage import UsageRow, metering
from rushmem_contract.errors import InvalidInput, NotFound
from rushmem_contract.models import MemoryRecord, too_large
from rushmem_contract.schemas import (
    DeleteRequest,
    ErasureList,
    ErasureReceipt,
    ErasureRequest,
    ErasuresRequest,
    ForgetUserRequest,
    UpdateRequest,
)

logger = logging.getLogger(__name__)


def update(parts: Collaborators, request: UpdateRequest, ctx: Context) -> MemoryRecord:
    """Change one memory as :class:`~rushmem_contract.models.MemoryChanges` says (the store's
    :func:`~rushmem.store.memories.edits.update_memory` keeps the past) and return it as it now is,
    its ``write_id`` naming this edit; NotFound as :func:`get`. No change given: the memory as it is."""
    user_id, memory_id = ctx.user, request.memory_id
    values = request.changed()
    if not values:
        found: MemoryRecord | None = parts.db.run(lambda conn: edits.get_memory(conn, user_id, memory_id))
        if found is None:
            raise NotFound("no memory with this id for this user")
        return found
    vector = None
    used: list[UsageRow] = []
    if "content" in values:
        if len(values["content"]) > parts.settings.max_memory_chars:
            raise too_large("content", len(values["content"]), parts.settings.max_memory_chars)
        with metering() as meter:
            _redact_change(parts, user_id, memory_id, values)
            vector = parts.embedder.embed([values["content"]])[0]
        meter.add("write", calls=1, items=1)
        used = parts.usage(meter)
    elif values.get("metadata"):
        _redact_change(parts, user_id, memory_id, values)
    if values.get("metadata"):
        check_metadata(parts.settings, values["metadata"], "metadata")
    write_id = uuid.uuid4()
    updated: MemoryRecord | None = parts.db.run(
        lambda conn: edits.update_memory(
            conn,
            user_id,
            memory_id,
            values,
            embedding=vector,
            source=ctx.source,
            usage=used,
            write_id=write_id,
            keep_past=not request.typo_fix,
        )
    )
    if updated is None:
        raise NotFound("no memory with this id for this user")
    ctx.wrote = True
    logger.info("updated", extra={"user_id": user_id, "fields": sorted(values), "source": ctx.source})
    return updated


def _redact_change(parts: Collaborators, user_id: str, memory_id: uuid.UUID, values: dict[str, Any]) -> None:
    """A new content or metadata passes the write path's redaction (AGENT_MEMORY_PII) like any
    other write: placeholders in the text and the metadata's string values, what was removed
    in the metadata's record; refused, naming the field, in drop mode."""
    if not parts.redactor.enabled:
        return
    given = values.get("metadata") if "metadata" in values else None
    outcome = parts.redactor.redact_change(values.get("content"), given)
    if outcome.dropped:
        raise InvalidInput(
            f"{outcome.dropped_field} holds personal data this deployment does not store (AGENT_MEMORY_PII)",
            field=outcome.dropped_field,
        )
    if outcome.content is not None:
        values["content"] = outcome.content
    if outcome.metadata is not None:
        values["metadata"] = outcome.metadata
    if outcome.removed:
        if "metadata" in values:
            base = values["metadata"]
        else:
            found = parts.db.run(lambda conn: edits.get_memory(conn, user_id, memory_id))
            base = found.metadata if found is not None else {}
        values["metadata"] = {**(base or {}), REDACTED_KEY: outcome.removed}


def delete(parts: Collaborators, request: DeleteRequest, ctx: Context) -> None:
    """Delete one memory of the user; NotFound when the user has no memory with that id (another
    user's id answers the same: nothing leaks)."""
    user_id = ctx.user
    deleted = bool(
        parts.db.run(lambda conn: catalog.delete_memory(conn, user_id, request.memory_id, source=ctx.source))
    )
    logger.info("forgot", extra={"user_id": user_id, "deleted": int(deleted), "one": True})
    if not deleted:
        raise NotFound("no memory with this id for this user")
    ctx.wrote = True


def forget_user(cells: Cells, request: ForgetUserRequest, ctx: Context) -> ErasureReceipt:
    """Delete everything stored about the user (memories, history, held writes, instructions,
    message receipts, usage) and return the erasure receipt stored with the deletion, in one
    transaction per cell (see :mod:`rushmem.store.accounts.erasures`): in the user's cell, and in
    any other that still holds something of theirs (an interrupted move's copy); then the directory
    entry. The receipt is the user's cell's; ``requested_by`` never holds the user's own id."""
    user_id = ctx.user
    home = cells.reading(user_id)
    others = [p for p in cells.each() if p is not home and p.db.run(lambda conn: receipts.holds_user(conn, user_id))]
    erase = partial(receipts.erase_user, user_id=user_id, requested_by=ctx.caller.requested_by)
    receipt: ErasureReceipt = home.db.run(erase, retry=False)
    for parts in (home, *others):
        if parts is not home:
            parts.db.run(erase, retry=False)
        parts.reads.erased(user_id)  # never served again by a reader that has not replayed this
        parts.publish_changes(user_id)
    cells.forget(user_id)
    # The receipt's id, not the user's: logs outlive the erasure.
    logger.info("erased", extra={"erasure_id": str(receipt.id), "deleted": receipt.deleted.model_dump()})
    return receipt


def erasure(cells: Cells, request: ErasureRequest, ctx: Context) -> ErasureReceipt:
    """A stored erasure receipt; a caller acting for one user reads only that user's own. Looked
    up in every cell: the receipt stays in the cell that erased."""
    for parts in cells.each():
        found: ErasureReceipt | None = parts.db.run(
            lambda conn: receipts.get_receipt(conn, request.erasure_id, user_id=ctx.user_id)
        )
        if found is not None:
            return found
    raise NotFound("no erasure receipt with this id")


def erasures(cells: Cells, request: ErasuresRequest, ctx: Context) -> ErasureList:
    """Every erasure receipt of this user id in every cell, oldest first (matched by the keyed hash)."""
    user_id = ctx.user
    found = [r for parts in cells.each() for r in parts.db.run(lambda conn: receipts.receipts_for(conn, user_id))]
    return ErasureList(receipts=sorted(found, key=lambda r: r.erased_at))
