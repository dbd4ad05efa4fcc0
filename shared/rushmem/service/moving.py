"""What spans cells' stores: a user's move to another cell (everything they own goes, and nothing
is left behind), and a bulk import's parts, each written in its user's cell, merged back."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Sequence

from rushmem.service import reading, writing
from rushmem.service.base import Collaborators
from rushmem.service.caller import Caller
from rushmem.service.context import Context
from rushmem.store.accounts import erasures
from rushmem.store.accounts.cells import owned_rows, put_owned_rows, replace_events, user_events
from rushmem.store.accounts.usage import user_usage, write_pending_usage
from rushmem.usage import PendingUsage, UsageCount, UsageRow
from rushmem_contract.models import StoredIds
from rushmem_contract.schemas import ExportRequest

logger = logging.getLogger(__name__)

_COUNTS = ("calls", "input_tokens", "output_tokens", "characters", "items")
MOVE_PAGE = 500


def copy_user(source: Collaborators, target: Collaborators, user_id: str) -> int:
    """Copy everything the user owns from ``source`` to ``target`` (a move's copy step), then erase
    it from ``source``: memories with their ids, timestamps and supersession (export pages,
    restored), their whole history (the deleted memories' events too), usage days, held writes,
    extraction instructions and the queue's message receipts. Erasure receipts stay in the cell
    that wrote them (they are looked up across cells). Returns the memories moved."""
    ctx = Context(caller=Caller(door="cell-move"), user_id=user_id)
    # The copy is not the user's work: written without a usage count (their days are copied below).
    copier = Collaborators(
        target.settings.model_copy(update={"usage_metering": False}), embedder=target.embedder, database=target.db
    )
    moved, cursor = 0, None
    while True:
        page = reading.export(source, ExportRequest(limit=MOVE_PAGE, cursor=cursor, consistency="strong"), ctx)
        if page.lines:
            # Each line keeps its own source.
            writing.import_lines(copier, page.lines, source=None, write_id=uuid.uuid4())
            moved += len(page.lines)
        cursor = page.next_cursor
        if cursor is None:
            break
    owned = source.db.run(lambda conn: owned_rows(conn, user_id))
    target.db.run(lambda conn: put_owned_rows(conn, user_id, owned), retry=False)
    # After everything that records events of its own (the copy's 'created', a held write's
    # 'pending'): the history becomes exactly the one the user had.
    events = source.db.run(lambda conn: user_events(conn, user_id))
    target.db.run(lambda conn: replace_events(conn, user_id, events), retry=False)
    _copy_usage(source, target, user_id)
    source.db.run(lambda conn: erasures.erase_user(conn, user_id, requested_by="cell-move"), retry=False)
    source.reads.erased(user_id)
    logger.info("user copied to another cell", extra={"memories": moved})
    return moved


def _copy_usage(source: Collaborators, target: Collaborators, user_id: str) -> None:
    """The user's usage days, added to the new cell's (the old cell's go with its copy)."""
    rows = source.db.run(lambda conn: user_usage(conn, user_id, dt.date.min, dt.date.max))
    pending: dict[dt.date, list[UsageRow]] = {}
    for row in rows:
        count = UsageCount(**{name: int(row[name]) for name in _COUNTS})
        pending.setdefault(row["day"], []).append(UsageRow(row["kind"], row["model"], count))
    batches = [PendingUsage(user_id, day, day_rows) for day, day_rows in sorted(pending.items())]
    target.db.run(lambda conn: write_pending_usage(conn, batches), retry=False)


def merged_imports(parts: Sequence[tuple[list[int], StoredIds]], write_id: uuid.UUID) -> StoredIds:
    """The outcomes of one import's parts (each cell's lines, at these positions) as one: ids in the
    lines' order (a line dropped for personal data has none), counts summed."""
    kept: list[tuple[int, uuid.UUID]] = []
    dropped: list[int] = []
    for indexes, stored in parts:
        gone = set(stored.pii_dropped)
        dropped += [indexes[j] for j in stored.pii_dropped]
        kept += zip([i for j, i in enumerate(indexes) if j not in gone], stored.ids, strict=True)
    return StoredIds(
        ids=[memory_id for _, memory_id in sorted(kept)],
        created=sum(stored.created for _, stored in parts),
        refreshed=sum(stored.refreshed for _, stored in parts),
        superseded=sum(stored.superseded for _, stored in parts),
        pii_redacted=sum(stored.pii_redacted for _, stored in parts),
        pii_dropped=sorted(dropped),
        write_id=write_id,
    )
