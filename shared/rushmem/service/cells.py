"""Cells: users spread over independent databases (an Aurora cluster each in AWS; locally an
embedded server each), every door routing each user to their cell (docs/capacity.md, Cells).

:class:`CellMemory` is a :class:`Memory` whose verbs pick the user's cell and call that cell's
own ``Memory``, so the HTTP API, the queue, MCP and the CLI route the same way without knowing
about cells. The directory (which cell holds a user) is a table in the home cell's database
(:mod:`rushmem.store.accounts.cells`), read once per user and cached for
``cell_directory_cache_s``; a user without an entry is placed on their first write, in the cell a
hash of their id chooses (rendezvous hashing: adding a cell moves no placed user). What spans cells:
a queue batch (flushed on every cell it wrote to), erasure (in every cell, and the directory entry),
usage and erasure receipts (summed and gathered across cells), bulk import (each line to its
user's cell), and :meth:`CellMemory.move_user`.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import datetime as dt
import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from rushmem.config import Settings
from rushmem.service.memory import Memory
from rushmem.service.writing import IngestBatch
from rushmem.store.accounts.cells import (
    cell_entry,
    claim_cell,
    forget_cell,
    replace_events,
    set_cell,
    user_events,
)
from rushmem.store.accounts.usage import user_usage, write_pending_usage
from rushmem.usage import PendingUsage, UsageCount, UsageRow
from rushmem_contract.errors import ConfigurationError, DatabaseUnavailable, InvalidInput, NotFound
from rushmem_contract.models import (
    ConversationEnded,
    ImportLine,
    IngestOutcome,
    RecallQuery,
    RecallResult,
    StoredIds,
)
from rushmem_contract.schemas import ErasureReceipt, UsageLine, UsageReport, usage_totals

logger = logging.getLogger(__name__)

_COUNTS = ("calls", "input_tokens", "output_tokens", "characters", "items")


class UserMoving(DatabaseUnavailable):
    """The user's memories are being moved to another cell: their writes wait (503; the queue
    delivers the message again later)."""


def placed_cell(user_id: str, cells: Sequence[str]) -> str:
    """The cell a new user goes to: the highest hash of (cell, user) (rendezvous hashing), so a cell
    added later takes new users only."""
    return max(cells, key=lambda cell: hashlib.sha256(f"{cell}\x00{user_id}".encode()).digest())


@dataclasses.dataclass
class _Entry:
    cell: str
    moving: bool
    placed: bool  # written in the directory (False: a reader's guess for a user never written)
    until: float


class CellMemory(Memory):
    """A :class:`Memory` over the cells of ``settings.cells`` (see the module's docstring). Its own
    ``admin`` is the home cell's."""

    def __init__(self, settings: Settings, **collaborators: Any) -> None:
        if not settings.cells:
            raise ConfigurationError("AGENT_MEMORY_CELLS names no cell")
        cells = dict(settings.cells)
        self.home = next(iter(cells))
        self.cells: dict[str, Memory] = {}
        for name, url in cells.items():
            cell_settings = settings.model_copy(
                update={"cells": None, "database_url": url, "database_reader_url": None, "db_reader_host": None}
            )
            shared = dict(collaborators)
            if self.cells:  # one embedder (a model in memory) for every cell
                first = next(iter(self.cells.values()))
                shared.setdefault("embedder", first.admin.embedder)
            self.cells[name] = Memory(cell_settings, **shared)
        home = self.cells[self.home]
        super().__init__(home.settings, **collaborators)
        # Anything not routed below runs on the home cell, with its collaborators (no second connection).
        self._parts = home._parts
        self.admin = home.admin
        self._all_cells = settings
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    @property
    def settings(self) -> Settings:
        """The settings naming every cell (each cell's service has its own, pointed at its database)."""
        return self._all_cells

    @settings.setter
    def settings(self, value: Settings) -> None:
        self._all_cells = value

    # ---- the directory -----------------------------------------------------------------------

    def _entry(self, user_id: str, *, write: bool) -> _Entry:
        now = time.monotonic()
        cached = self._entries.get(user_id)
        if cached is not None and now < cached.until and (cached.placed or not write):
            return cached
        directory = self.cells[self.home].admin.db
        found = directory.run(lambda conn: cell_entry(conn, user_id))
        placed = found is not None
        if found is None and write:
            choice = placed_cell(user_id, list(self.cells))
            found = directory.run(lambda conn: claim_cell(conn, user_id, choice), retry=False)
            placed = True
        cell, moving = found if found is not None else (placed_cell(user_id, list(self.cells)), False)
        if cell not in self.cells:
            raise ConfigurationError(f"the directory places a user in cell {cell!r}, which AGENT_MEMORY_CELLS lacks")
        entry = _Entry(cell, moving, placed, now + self.settings.cell_directory_cache_s)
        with self._lock:
            self._entries[user_id] = entry
        return entry

    def cell_of(self, user_id: str) -> str:
        """The name of the cell that holds (or would hold) the user."""
        return self._entry(user_id, write=False).cell

    def _writing_cell(self, user_id: str) -> str:
        """The name of the cell the user's writes go to (placing a new user); UserMoving while they move."""
        entry = self._entry(user_id, write=True)
        if entry.moving:
            raise UserMoving("this user's memories are being moved to another cell; try again shortly")
        return entry.cell

    def _reading(self, user_id: str) -> Memory:
        return self.cells[self.cell_of(user_id)]

    def _writing(self, user_id: str) -> Memory:
        return self.cells[self._writing_cell(user_id)]

    # ---- one user's verbs: in their cell -----------------------------------------------------

    def add(self, *args: Any, **kwargs: Any) -> StoredIds:
        return self._writing(kwargs["user_id"]).add(*args, **kwargs)

    def ingest_conversation(self, message: ConversationEnded, **kwargs: Any) -> IngestOutcome:
        return self._writing(message.user_id).ingest_conversation(message, **kwargs)

    def update(self, *args: Any, **kwargs: Any) -> Any:
        return self._writing(kwargs["user_id"]).update(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> bool:
        return self._writing(kwargs["user_id"]).delete(*args, **kwargs)

    def recall(self, *args: Any, **kwargs: Any) -> RecallResult:
        return self._reading(kwargs["user_id"]).recall(*args, **kwargs)

    def list(self, *args: Any, **kwargs: Any) -> Any:
        return self._reading(kwargs["user_id"]).list(*args, **kwargs)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        return self._reading(kwargs["user_id"]).get(*args, **kwargs)

    def export(self, *args: Any, **kwargs: Any) -> Any:
        return self._reading(kwargs["user_id"]).export(*args, **kwargs)

    def history(self, *args: Any, **kwargs: Any) -> Any:
        return self._reading(kwargs["user_id"]).history(*args, **kwargs)

    # ---- work that spans cells ---------------------------------------------------------------

    def recall_batch(
        self, queries: Sequence[RecallQuery], *, limit: int | None = None
    ) -> builtins.list[RecallResult | InvalidInput]:
        """Each cell's queries in one batch of that cell; the answers in the queries' order."""
        by_cell: dict[str, list[int]] = {}
        for i, query in enumerate(queries):
            by_cell.setdefault(self.cell_of(query.user_id), []).append(i)
        results: list[RecallResult | InvalidInput | None] = [None] * len(queries)
        for cell, indexes in by_cell.items():
            answers = self.cells[cell].recall_batch([queries[i] for i in indexes], limit=limit)
            for i, answer in zip(indexes, answers, strict=True):
                results[i] = answer
        return [r for r in results if r is not None]

    @contextlib.contextmanager
    def ingest_batch(self) -> Iterator[IngestBatch]:
        """A queue batch across cells: each message ingested in its user's cell's batch, and every
        cell the batch wrote to flushed on leaving the block (BatchNotDurable if any could not be:
        none of the batch's messages may then be acknowledged)."""
        with contextlib.ExitStack() as stack:
            yield _CellBatch(self, stack)  # type: ignore[misc]  # the same verbs as IngestBatch

    def import_(self, lines: Sequence[ImportLine], **kwargs: Any) -> StoredIds:
        """Each line to its user's cell; the ids in the lines' order."""
        by_cell: dict[str, list[int]] = {}
        for i, line in enumerate(lines):
            by_cell.setdefault(self._writing_cell(line.user_id), []).append(i)
        write_id = kwargs.pop("write_id", None) or uuid.uuid4()
        parts = [
            (indexes, self.cells[cell].import_([lines[i] for i in indexes], write_id=write_id, **kwargs))
            for cell, indexes in by_cell.items()
        ]
        if len(parts) == 1:
            return parts[0][1]
        # Ids in the lines' order (a line dropped for personal data has none), counts summed.
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

    def forget_user(self, user_id: str, *, requested_by: str = "service") -> ErasureReceipt:
        """Erase the user in every cell (a move interrupted may have left a copy) and their directory
        entry; the receipt is their cell's."""
        home = self.cell_of(user_id)
        receipt = self.cells[home].forget_user(user_id, requested_by=requested_by)
        for name, cell in self.cells.items():
            if name != home:
                cell.forget_user(user_id, requested_by=requested_by)
        self.cells[self.home].admin.db.run(lambda conn: forget_cell(conn, user_id), retry=False)
        with self._lock:
            self._entries.pop(user_id, None)
        return receipt

    def erasure(self, receipt_id: uuid.UUID, *, user_id: str | None = None) -> ErasureReceipt:
        for cell in self.cells.values():
            with contextlib.suppress(NotFound):
                return cell.erasure(receipt_id, user_id=user_id)
        raise NotFound("no erasure receipt with this id")

    def erasures(self, user_id: str) -> builtins.list[ErasureReceipt]:
        found = [r for cell in self.cells.values() for r in cell.erasures(user_id)]
        return sorted(found, key=lambda r: r.erased_at)

    def usage(self, user_id: str, **kwargs: Any) -> UsageReport:
        """The user's usage summed over the cells (a moved user's older days stay in the cell they left)."""
        reports = [cell.usage(user_id, **kwargs) for cell in self.cells.values()]
        merged: dict[tuple[Any, ...], UsageLine] = {}
        for report in reports:
            for line in report.lines:
                key = (line.day, line.kind, line.model)
                if key in merged:
                    old = merged[key]
                    merged[key] = old.model_copy(
                        update={name: getattr(old, name) + getattr(line, name) for name in _COUNTS}
                        | {"estimated_usd": round(old.estimated_usd + line.estimated_usd, 6)}
                    )
                else:
                    merged[key] = line
        lines = [merged[k] for k in sorted(merged)]
        return reports[0].model_copy(
            update={
                "lines": lines,
                "totals": usage_totals(lines),
                "estimated_usd": round(sum(line.estimated_usd for line in lines), 6),
            }
        )

    def move_user(self, user_id: str, to_cell: str, *, page: int = 500) -> int:
        """Move the user's memories (with their history, ids and timestamps) to ``to_cell``: hold
        their writes (the directory says ``moving``; writes answer 503 and the queue keeps them), wait
        out every container's cache, copy export pages into the new cell, switch the entry, wait
        again (readers still on the old cell see a complete copy meanwhile), then erase the old copy.
        Their history (every event, the deleted memories' too) and usage days go with them; erasure
        receipts stay in the cell that wrote them (they are looked up across cells). Not carried: the
        queue's message receipts (a message delivered again after the move is written again, and
        folds into the same facts). Returns the memories moved."""
        if to_cell not in self.cells:
            raise InvalidInput(f"no cell named {to_cell!r}", field="cell")
        source = self.cell_of(user_id)
        if source == to_cell:
            return 0
        directory = self.cells[self.home].admin.db
        directory.run(lambda conn: set_cell(conn, user_id, source, moving=True), retry=False)
        self._forget_entry(user_id)
        time.sleep(self.settings.cell_directory_cache_s)  # every container now holds this user's writes
        moved = 0
        cursor: str | None = None
        # The copy is not the user's work: written without a usage count (their days are copied below).
        target = self.cells[to_cell]
        copier = Memory(
            target.settings.model_copy(update={"usage_metering": False}),
            embedder=target.admin.embedder,
            database=target.admin.db,
        )
        try:
            while True:
                exported = self.cells[source].export(
                    user_id=user_id, history=True, limit=page, cursor=cursor, consistency="strong"
                )
                if exported.lines:
                    copier.import_(exported.lines, source=None)  # each line keeps its own source
                    moved += len(exported.lines)
                cursor = exported.next_cursor
                if cursor is None:
                    break
            events = self.cells[source].admin.db.run(lambda conn: user_events(conn, user_id))
            target.admin.db.run(lambda conn: replace_events(conn, user_id, events), retry=False)
            self._copy_usage(user_id, source, to_cell)
        except BaseException:
            directory.run(lambda conn: set_cell(conn, user_id, source, moving=False), retry=False)
            self._forget_entry(user_id)
            raise
        directory.run(lambda conn: set_cell(conn, user_id, to_cell, moving=False), retry=False)
        self._forget_entry(user_id)
        time.sleep(self.settings.cell_directory_cache_s)  # no container reads the old cell any more
        self.cells[source].forget_user(user_id, requested_by="cell-move")
        logger.info("user moved", extra={"from_cell": source, "to_cell": to_cell, "memories": moved})
        return moved

    def _copy_usage(self, user_id: str, source: str, target: str) -> None:
        """The user's usage days, added to the new cell's (the old cell's go with its copy)."""
        rows = self.cells[source].admin.db.run(lambda conn: user_usage(conn, user_id, dt.date.min, dt.date.max))
        pending: dict[dt.date, builtins.list[UsageRow]] = {}
        for row in rows:
            count = UsageCount(**{name: int(row[name]) for name in _COUNTS})
            pending.setdefault(row["day"], []).append(UsageRow(row["kind"], row["model"], count))
        batches = [PendingUsage(user_id, day, day_rows) for day, day_rows in sorted(pending.items())]
        self.cells[target].admin.db.run(lambda conn: write_pending_usage(conn, batches), retry=False)

    def _forget_entry(self, user_id: str) -> None:
        with self._lock:
            self._entries.pop(user_id, None)

    def close(self) -> None:
        for cell in self.cells.values():
            cell.close()


class _CellBatch:
    """One queue batch over the cells (see :meth:`CellMemory.ingest_batch`)."""

    def __init__(self, service: CellMemory, stack: contextlib.ExitStack) -> None:
        self._service = service
        self._stack = stack
        self._batches: dict[str, IngestBatch] = {}
        self._lock = threading.Lock()

    def _batch(self, cell: str) -> IngestBatch:
        with self._lock:
            if cell not in self._batches:
                self._batches[cell] = self._stack.enter_context(self._service.cells[cell].ingest_batch())
            return self._batches[cell]

    def ingest_conversation(self, message: ConversationEnded, **kwargs: Any) -> IngestOutcome:
        cell = self._service._writing_cell(message.user_id)
        return self._batch(cell).ingest_conversation(message, **kwargs)

    @property
    def pending(self) -> bool:
        return any(batch.pending for batch in self._batches.values())

    @property
    def cells(self) -> list[str]:
        """The cells this batch wrote to (each flushed when the batch ends)."""
        return sorted(self._batches)
