"""A queue batch: each delivered message ingested in its user's cell, committed without waiting for
the disk, and every cell the batch wrote to flushed once when the batch ends (one WAL flush per
batch and cell instead of one per message)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from rushmem.store.memories.messages import UnflushedWrites
from rushmem_contract.errors import DatabaseUnavailable

if TYPE_CHECKING:
    from rushmem.service.base import Collaborators


def flush_writes(parts: Collaborators, unflushed: UnflushedWrites) -> None:
    """:func:`rushmem.service.writing.flush_writes`, imported by a queue's first batch: importing this
    module (the service does) must not import the write path."""
    from rushmem.service.writing import flush_writes as flush

    flush(parts, unflushed)


class BatchNotDurable(DatabaseUnavailable):
    """A queue batch's writes could not be made durable: none of its messages may be acknowledged."""


class QueueBatch:
    """One queue batch's unflushed writes, per cell; safe to use from several threads."""

    def __init__(self) -> None:
        self._cells: dict[int, tuple[Collaborators, UnflushedWrites]] = {}
        self._lock = threading.Lock()

    def unflushed(self, parts: Collaborators) -> UnflushedWrites:
        """The batch's writes in this cell (the dispatcher hands them to each message's verb)."""
        with self._lock:
            return self._cells.setdefault(id(parts), (parts, UnflushedWrites()))[1]

    @property
    def pending(self) -> bool:
        """Writes (or receipts found) that wait for the batch's flush."""
        return any(bool(unflushed) for _, unflushed in self._cells.values())

    def flush(self) -> None:
        """Every cell's writes made durable; BatchNotDurable when any could not be."""
        try:
            for parts, unflushed in self._cells.values():
                flush_writes(parts, unflushed)
        except Exception as exc:
            raise BatchNotDurable(
                "this batch's writes are not known to be on the database's disk; the batch must be delivered again"
            ) from exc
