"""Re-applying the erasure ledger (:mod:`rushmem.providers.ledger`) to a database that lacks some
of its erasures: one restored from a snapshot or a point in time before them."""

from __future__ import annotations

import logging
import uuid
from functools import partial

from rushmem.providers.ledger import ErasureLedger
from rushmem.store.accounts import erasures as receipts
from rushmem.store.accounts.cells import forget_cell
from rushmem.store.engine.connection import Database

logger = logging.getLogger(__name__)


def reapply_with(db: Database, ledger: ErasureLedger) -> list[uuid.UUID]:
    """Every entry of this database's the database has no receipt of, done again under its own
    receipt id and time; the receipts re-applied, oldest first (none: the common case, one
    listing of the ledger and one query)."""
    store: str = db.run(receipts.this_store)
    entries = ledger.entries(store)
    if not entries:
        return []
    present: set[uuid.UUID] = db.run(lambda conn: receipts.receipts_present(conn, [e.receipt_id for e in entries]))
    missing = [e for e in entries if e.receipt_id not in present]
    if not missing:
        return []
    users: dict[str, list[str]] = db.run(lambda conn: receipts.users_with_subjects(conn, {e.subject for e in missing}))
    for entry in missing:
        entry = ledger.complete(entry)
        found = users.pop(entry.subject, [])
        for user_id in found:
            db.run(
                partial(
                    receipts.erase_user,
                    user_id=user_id,
                    requested_by=entry.requested_by,
                    receipt_id=entry.receipt_id,
                    erased_at=entry.erased_at,
                ),
                retry=False,
            )
            db.run(partial(forget_cell, user_id=user_id), retry=False)  # the directory, where this one is home
        if not found:
            restore = partial(
                receipts.restore_receipt,
                receipt_id=entry.receipt_id,
                subject=entry.subject,
                requested_by=entry.requested_by,
                erased_at=entry.erased_at,
            )
            db.run(restore)
    logger.warning(
        "erasures re-applied from the ledger",
        extra={"ledger": ledger.describe(), "erasure_ids": [str(e.receipt_id) for e in missing]},
    )
    return [e.receipt_id for e in missing]
