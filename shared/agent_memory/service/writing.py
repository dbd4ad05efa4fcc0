"""Writes: a client's facts, bulk imports and exports restored, a finished conversation."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import uuid
from collections.abc import Iterator, Sequence
from functools import partial

from agent_memory.config import Settings
from agent_memory.ingest import conversation
from agent_memory.ingest.neighbours import SameFactRule
from agent_memory.ingest.rows import (
    build_rows,
    check_lengths,
    check_new_memories,
    embed_unique,
    fact_outcome,
)
from agent_memory.records import ExistingMemory, MemoryRow, WriteOutcome
from agent_memory.service.base import Collaborators
from agent_memory.store.engine.connection import Connection
from agent_memory.store.memories import messages, related, restore, writes
from agent_memory.store.memories.messages import UnflushedWrites
from agent_memory.store.memories.scope import Scope
from agent_memory.usage import Meter, UsageRow, metering
from agent_memory_contract.errors import DatabaseUnavailable
from agent_memory_contract.models import (
    ConversationEnded,
    ImportLine,
    IngestOutcome,
    NewMemory,
    StoredIds,
)

logger = logging.getLogger(__name__)


def _store_rows(
    conn: Connection,
    *,
    rows: list[MemoryRow],
    restoring: bool,
    source: str | None,
    usage: dict[str, list[UsageRow]],
    write_id: uuid.UUID,
) -> list[WriteOutcome]:
    if restoring:
        return restore.restore_memories(conn, rows, source=source, usage=usage, write_id=write_id)
    return writes.upsert_memories(conn, rows, usage=usage, write_id=write_id)


def _as_restored(row: MemoryRow, line: ImportLine, source: str | None) -> MemoryRow:
    """A row of an exported memory: its id, timestamps, source, supersession and write id as exported."""
    return dataclasses.replace(
        row,
        id=line.id,
        write_id=line.write_id,
        updated_at=line.updated_at,
        superseded_at=line.superseded_at,
        superseded_by=line.superseded_by,
        valid_until=line.valid_until,
        source=line.source if line.source is not None else source,
    )


class Writing:
    # Memory sets both: its settings, and the collaborators its verbs and its admin share.
    settings: Settings
    _parts: Collaborators

    def add(
        self,
        memories: str | NewMemory | Sequence[str | NewMemory],
        *,
        user_id: str,
        project_id: str | None = None,
        source: str | None = None,
        observed_at: dt.datetime | None = None,
    ) -> StoredIds:
        """Store one fact or several for the user, in one transaction. The same fact twice is one
        memory: exact duplicates and near duplicates that state the same fact fold into the stored
        row; a fact that gives another value to a stored one (or names it in ``supersedes``)
        supersedes it. Ids in input order, and per fact what happened to it, with the write's id
        (recorded with each memory it touched and each history event)."""
        items = [memories] if isinstance(memories, str | NewMemory) else memories
        new = [NewMemory(content=m) if isinstance(m, str) else m for m in items]
        check_new_memories(self.settings, new)
        write_id = uuid.uuid4()
        with metering() as meter:
            redacted = self._parts.redactor.apply(new)
            kept = redacted.memories
            vectors = embed_unique(self._parts.embedder, [m.content for m in kept])
        rows, positions = build_rows(
            [user_id] * len(kept), kept, vectors, project_id=project_id, source=source, observed_at=observed_at
        )
        meter.add("write", calls=1, items=len(rows))
        usage = {user_id: self._parts.usage(meter)}
        original = {kept_at: i for i, kept_at in enumerate(redacted.positions) if kept_at is not None}
        named: dict[int, list[tuple[uuid.UUID, str]]] = {}
        for k, memory in enumerate(kept):
            for j, target in enumerate(memory.supersedes):
                named.setdefault(positions[k], []).append((target, f"memories[{original[k]}].supersedes[{j}]"))
        outcomes = self._parts.db.run(
            lambda conn: writes.upsert_memories(
                conn,
                rows,
                neighbours=SameFactRule.from_settings(self.settings),
                usage=usage,
                supersedes=named,
                write_id=write_id,
            )
        )
        created = sum(1 for o in outcomes if o.action == "created")
        logger.info(
            "remembered",
            # "created" is a LogRecord attribute: logging refuses it as an extra key.
            extra={
                "user_id": user_id,
                "memories": len(rows),
                "memories_created": created,
                "source": source,
                "write_id": str(write_id),
            },
        )
        self._parts.publish_changes(user_id)
        return StoredIds(
            ids=[outcomes[p].id for p in positions],
            created=created,
            refreshed=len(rows) - created,
            pii_redacted=redacted.redacted,
            pii_dropped=redacted.dropped_positions,
            write_id=write_id,
            superseded=sum(len(o.superseded) for o in outcomes),
            facts=[fact_outcome(outcomes[p]) for p in positions],
        )

    def import_(
        self, lines: Sequence[ImportLine], *, source: str | None = "import", write_id: uuid.UUID | None = None
    ) -> StoredIds:
        """Load import lines of any users (one embedding pass, one upsert statement per user), taken
        as given: exact duplicates fold, near duplicates are kept. An export's lines are restored
        with their ids and write ids; ``write_id`` names the others' import (a new one by default)."""
        write_id = write_id or uuid.uuid4()
        if not lines:
            return StoredIds(ids=[], created=0, refreshed=0, write_id=write_id)
        check_lengths(self.settings, lines, "lines")
        with metering() as meter:
            redacted = self._parts.redactor.apply(lines)
            kept = redacted.memories
            vectors = embed_unique(self._parts.embedder, [line.content for line in kept])
        # Lines with an id (an export) are restored as they were; the others are upserted.
        built: list[tuple[list[int], bool, list[MemoryRow], list[int]]] = []
        for restoring in (False, True):
            indexes = [i for i, line in enumerate(kept) if (line.id is not None) == restoring]
            if not indexes:
                continue
            part = [kept[i] for i in indexes]
            rows, positions = build_rows(
                [line.user_id for line in part],
                part,
                [vectors[i] for i in indexes],
                project_id=None,
                source=source,
                observed_at=None,
            )
            if restoring:
                first = {p: i for i, p in reversed(list(enumerate(positions)))}
                rows = [_as_restored(row, part[first[n]], source) for n, row in enumerate(rows)]
            built.append((indexes, restoring, rows, positions))
        # Each user's share of the embedding call is counted once, with their first write.
        shares = self._shared_usage(meter, [row for *_, rows, _ in built for row in rows])
        ids: list[uuid.UUID | None] = [None] * len(kept)
        created = refreshed = 0
        for indexes, restoring, rows, positions in built:
            usage = {user: shares.pop(user) for user in {row.user_id for row in rows} if user in shares}
            outcomes = self._parts.db.run(
                partial(_store_rows, rows=rows, restoring=restoring, source=source, usage=usage, write_id=write_id)
            )
            for i, p in zip(indexes, positions, strict=True):
                ids[i] = outcomes[p].id
            new = sum(1 for o in outcomes if o.action == "created")
            created, refreshed = created + new, refreshed + len(rows) - new
        self._parts.publish_changes(None)
        return StoredIds(
            ids=[i for i in ids if i is not None],
            created=created,
            refreshed=refreshed,
            pii_redacted=redacted.redacted,
            pii_dropped=redacted.dropped_positions,
            write_id=write_id,
        )

    def _shared_usage(self, meter: Meter, rows: Sequence[MemoryRow]) -> dict[str, list[UsageRow]]:
        """Per user, their share (by characters) of provider calls that served several users at once."""
        if not self.settings.usage_metering:
            return {}
        chars: dict[str, int] = {}
        items: dict[str, int] = {}
        for row in rows:
            chars[row.user_id] = chars.get(row.user_id, 0) + len(row.content)
            items[row.user_id] = items.get(row.user_id, 0) + 1
        total = sum(chars.values()) or 1
        shares: dict[str, list[UsageRow]] = {}
        for user_id, count in chars.items():
            part = meter.share(count / total)
            part.add("write", calls=1, items=items[user_id])
            shares[user_id] = part.rows()
        return shares

    def ingest_conversation(
        self, message: ConversationEnded, *, observed_at: dt.datetime | None = None
    ) -> IngestOutcome:
        """Turn one "conversation ended" message into memories: all of them or none
        (see :mod:`agent_memory.ingest.conversation`); durable when this returns."""
        return self._ingest(message, observed_at=observed_at, unflushed=None)

    @contextlib.contextmanager
    def ingest_batch(self) -> Iterator[IngestBatch]:
        """A queue batch's ingests: each message commits without waiting for the disk and the
        batch waits once, on leaving the block (one WAL flush per batch, not per message). Raises
        :class:`BatchNotDurable` then when it could not: none of the batch's messages may be
        acknowledged. An error inside the block leaves it without a flush."""
        batch = IngestBatch(self)
        yield batch
        try:
            self._flush_writes(batch.unflushed)
        except Exception as exc:
            raise BatchNotDurable(
                "this batch's writes are not known to be on the database's disk; the batch must be delivered again"
            ) from exc

    def _ingest(
        self, message: ConversationEnded, *, observed_at: dt.datetime | None, unflushed: UnflushedWrites | None
    ) -> IngestOutcome:
        """The write path of one message: the receipt checked (when there is an extraction to
        save), the related memories read, the extraction and embedding done outside any
        transaction, then one write transaction (which checks the receipt again, under the lock).
        With ``unflushed``, that commit does not wait for the disk (see :class:`UnflushedWrites`)."""
        conversation.check_conversation(self.settings, message)
        user_id, source = message.user_id, message.conversation_id
        write_id = uuid.uuid4()
        digest = conversation.message_digest(message)
        # Checked before extraction only when there is an extraction to save: a message that carries
        # its memories goes straight to its write, whose receipt check under the lock makes a
        # redelivery a no-op (one round trip less per message).
        if message.messages:
            receipt: messages.Receipt = self._parts.db.run(
                lambda conn: messages.message_ingested(conn, user_id, digest)
            )
            if receipt.found:
                if unflushed is not None:  # an earlier delivery may have written it without a flush
                    unflushed.add(receipt.server_started)
                logger.info("ingest skipped: message already written", extra={"user_id": user_id, "source": source})
                return IngestOutcome(user_id=user_id, conversation_id=source, status="duplicate")
        with metering() as meter:
            extractor = self._parts.extractor if message.messages else None
            shown: list[ExistingMemory] = []
            if extractor is not None and extractor.updates_existing:
                shown = self._related_memories(message, window=extractor.window)
            planned = conversation.plan_conversation(
                message,
                settings=self.settings,
                embedder=self._parts.embedder,
                extractor=extractor,
                shown=shown,
                observed_at=observed_at,
                redactor=self._parts.redactor,
            )
            meter.add("conversation", calls=1, items=len(planned.rows))
            usage = self._parts.usage(meter)
        written = self._parts.db.run(
            lambda conn: messages.ingest_message(
                conn,
                user_id,
                planned.digest,
                planned.rows,
                conversation_id=source,
                neighbours=SameFactRule.from_settings(self.settings),
                updates=planned.updates,
                usage=usage,
                unflushed=unflushed,
                write_id=write_id,
            )
        )
        if written is None:  # written before: a redelivery, or a concurrent delivery that won the race
            logger.info("ingest skipped: message already written", extra={"user_id": user_id, "source": source})
            return planned.outcome.model_copy(update={"status": "duplicate"})
        if written.stale:
            logger.warning(
                "update targets ended or left the scope before the write; their facts were kept as new",
                extra={"user_id": user_id, "source": source, "stale": [str(t) for t in written.stale]},
            )
        outcome = conversation.written_outcome(planned, written).model_copy(update={"write_id": write_id})
        logger.info("ingested", extra={"outcome": outcome.model_dump(mode="json", exclude={"ids"})})
        self._parts.publish_changes(user_id)
        return outcome

    def _related_memories(self, message: ConversationEnded, *, window: int) -> list[ExistingMemory]:
        """The user's stored memories most related to the conversation's user turns, under handles
        m1, m2, ... (best first): one embedding batch, one query."""
        limit = self.settings.related_memories_shown
        turns = conversation.related_turns(message, window=window)
        if limit <= 0 or not turns:
            return []
        vectors = list(self._parts.embedder.embed(turns))
        scope = Scope(message.user_id, message.project_id)
        found: list[ExistingMemory] = self._parts.db.run(
            lambda conn: related.related_memories(conn, scope, vectors, limit=limit)
        )
        return found

    def _flush_writes(self, unflushed: UnflushedWrites) -> None:
        """Make a batch's unflushed writes durable: one WAL flush for all of them. Raises
        DatabaseUnavailable when the server restarted (or failed over) after one of them, which
        may then be lost: the batch must be delivered again (its receipts make that safe)."""
        pending = unflushed.take()
        if not pending:
            return
        started: dt.datetime = self._parts.db.run(messages.flush_writes)
        if pending != {started}:
            logger.warning(
                "the database restarted between a batch's writes and their flush",
                extra={"server_started": started.isoformat(), "writes_saw": sorted(p.isoformat() for p in pending)},
            )
            raise DatabaseUnavailable(
                "the database restarted before this batch's writes were known to be on its disk; "
                "the batch must be delivered again"
            )


class BatchNotDurable(DatabaseUnavailable):
    """A queue batch's writes could not be made durable (see :meth:`Memory.ingest_batch`)."""


class IngestBatch:
    """One queue batch's ingests (see :meth:`Memory.ingest_batch`); safe to use from several threads."""

    def __init__(self, service: Writing) -> None:
        self._service = service
        self.unflushed = UnflushedWrites()

    def ingest_conversation(
        self, message: ConversationEnded, *, observed_at: dt.datetime | None = None
    ) -> IngestOutcome:
        """As :meth:`Memory.ingest_conversation`, durable once the batch's block is left."""
        return self._service._ingest(message, observed_at=observed_at, unflushed=self.unflushed)

    @property
    def pending(self) -> bool:
        """Writes (or receipts found) that wait for the batch's flush."""
        return bool(self.unflushed)
