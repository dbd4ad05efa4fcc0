"""Changing what is stored: edit one memory, forget one or all of a user's, erasure receipts."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from functools import partial
from typing import Any

from rushmem.config import Settings
from rushmem.ingest.redaction import REDACTED_KEY
from rushmem.ingest.rows import check_metadata
from rushmem.providers.ledger import LedgerEntry
from rushmem.service.base import Collaborators, utcnow
from rushmem.service.cells import Cells
from rushmem.service.context import Context
from rushmem.service.ledger import reapply_with
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
    """A new content or metadata passes the write path's redaction (RUSHMEM_PII) like any
    other write: placeholders in the text and the metadata's string values, what was removed
    in the metadata's record; refused, naming the field, in drop mode."""
    if not parts.redactor.enabled:
        return
    given = values.get("metadata") if "metadata" in values else None
    outcome = parts.redactor.redact_change(values.get("content"), given)
    if outcome.dropped:
        raise InvalidInput(
            f"{outcome.dropped_field} holds personal data this deployment does not store (RUSHMEM_PII)",
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
    """Delete one memory of the user with its lineage, the earlier versions of its fact (what its
    edits kept, what its corrections replaced): no reader finds their text again, the history keeps
    only that they were deleted. NotFound when the user has no memory with that id (another user's
    id answers the same: nothing leaks)."""
    user_id = ctx.user
    deleted: int = parts.db.run(lambda conn: catalog.delete_memory(conn, user_id, request.memory_id, source=ctx.source))
    logger.info("forgot", extra={"user_id": user_id, "deleted": deleted, "one": True})
    if not deleted:
        raise NotFound("no memory with this id for this user")
    ctx.wrote = True


def forget_user(cells: Cells, request: ForgetUserRequest, ctx: Context) -> ErasureReceipt:
    """Delete everything stored about the user (memories, history, held writes, instructions,
    message receipts, usage) and return the erasure receipt stored with the deletion, in one
    transaction per cell (see :mod:`rushmem.store.accounts.erasures`): in the user's cell, and in
    any other that still holds something of theirs (an interrupted move's copy); then the directory
    entry. The receipt is the user's cell's; ``requested_by`` never holds the user's own id.

    Each cell's erasure is put in the erasure ledger (RUSHMEM_ERASURE_LEDGER) first, with the
    receipt's id and time: a crash after it leaves an entry whose erasure the next migrate completes;
    a ledger that cannot be written stops the erasure (503), so none goes unrecorded."""
    user_id = ctx.user
    home = cells.reading(user_id)
    others = [p for p in cells.each() if p is not home and p.db.run(lambda conn: receipts.holds_user(conn, user_id))]
    receipt: ErasureReceipt | None = None
    for parts in (home, *others):
        erased = _erase(parts, user_id, ctx.caller.requested_by)
        receipt = receipt or erased
        parts.reads.erased(user_id)  # never served again by a reader that has not replayed this
        parts.publish_changes(user_id)
    cells.forget(user_id)
    assert receipt is not None
    # The receipt's id, not the user's: logs outlive the erasure.
    logger.info("erased", extra={"erasure_id": str(receipt.id), "deleted": receipt.deleted.model_dump()})
    return with_horizon(receipt, home.settings)


def _erase(parts: Collaborators, user_id: str, requested_by: str) -> ErasureReceipt:
    receipt_id, erased_at = uuid.uuid4(), utcnow()
    ledger = parts.ledger
    if ledger is not None:
        store, subject = parts.db.run(lambda conn: receipts.ledger_identity(conn, user_id))
        ledger.record(LedgerEntry(receipt_id, subject, store, erased_at, requested_by))
    erase = partial(
        receipts.erase_user, user_id=user_id, requested_by=requested_by, receipt_id=receipt_id, erased_at=erased_at
    )
    erased: ErasureReceipt = parts.db.run(erase, retry=False)
    return erased


def with_horizon(receipt: ErasureReceipt, settings: Settings) -> ErasureReceipt:
    """The receipt with when the automated backups holding the erased data expire: Aurora restores
    to any point in its retention period, so the last point before the erasure is restorable until
    the erasure's time plus that period (docs/tenant-data.md, Erasure ledger)."""
    days = settings.backup_retention_days
    horizon = receipt.erased_at + dt.timedelta(days=days) if days else None
    return receipt.model_copy(update={"backup_horizon": horizon})


def reapply_erasures(parts: Collaborators) -> list[uuid.UUID]:
    """After a restore: every erasure the ledger holds for this database and the database lacks
    (no receipt with its id) is done again, under its own receipt id and time, before the database
    serves (``rushmem migrate``, the deploy's MigrateFunction, and the first connection of a process
    that migrates on start). A user found by the entry's keyed hash is erased again; where the
    restored database holds nothing of theirs, the receipt alone is put back. Idempotent: a second
    run finds every receipt present. Returns the receipts re-applied, oldest first."""
    ledger = parts.ledger
    if ledger is None:
        return []
    return reapply_with(parts.db, ledger)


def erasure(cells: Cells, request: ErasureRequest, ctx: Context) -> ErasureReceipt:
    """A stored erasure receipt; a caller acting for one user reads only that user's own. Looked
    up in every cell: the receipt stays in the cell that erased."""
    for parts in cells.each():
        found: ErasureReceipt | None = parts.db.run(
            lambda conn: receipts.get_receipt(conn, request.erasure_id, user_id=ctx.user_id)
        )
        if found is not None:
            return with_horizon(found, parts.settings)
    raise NotFound("no erasure receipt with this id")


def erasures(cells: Cells, request: ErasuresRequest, ctx: Context) -> ErasureList:
    """Every erasure receipt of this user id in every cell, oldest first (matched by the keyed hash)."""
    user_id = ctx.user
    found = [
        with_horizon(r, parts.settings)
        for parts in cells.each()
        for r in parts.db.run(lambda conn: receipts.receipts_for(conn, user_id))
    ]
    return ErasureList(receipts=sorted(found, key=lambda r: r.erased_at))
