"""Writes: a client's facts, bulk imports and exports restored, a finished conversation."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from pydantic import ValidationError

from rushmem.config import Settings
from rushmem.ingest import conversation
from rushmem.ingest.neighbours import SameFactRule
from rushmem.ingest.review import review_reasons
from rushmem.ingest.rows import (
    build_rows,
    check_lengths,
    check_new_memories,
    embed_unique,
    fact_outcome,
)
from rushmem.records import ExistingMemory, MemoryRow, WriteOutcome
from rushmem.service.base import Collaborators
from rushmem.service.instructing import effective_instructions
from rushmem.store.engine.connection import Connection
from rushmem.store.memories import messages, related, restore, writes
from rushmem.store.memories import pending as held_writes
from rushmem.store.memories.messages import UnflushedWrites
from rushmem.store.memories.scope import Scope
from rushmem.usage import Meter, UsageRow, metering
from rushmem_contract.errors import DatabaseUnavailable, InvalidInput
from rushmem_contract.inputs import field_path
from rushmem_contract.models import (
    ChatMessage,
    ConversationEnded,
    ImportLine,
    IngestOutcome,
    NewMemory,
    StoredIds,
    describe_errors,
    error_field,
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


# A chat message as mem0's add takes it: {"role": ..., "content": ...} (or the model itself).
ChatInput = ChatMessage | Mapping[str, Any]


def _is_sequence(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _chat_messages(items: list[Any]) -> list[ChatMessage] | None:
    """The items as chat messages when they are chat messages (a mapping with a ``role``, or a
    ChatMessage), None when they are facts; InvalidInput for a mix, or a message that is not one."""
    is_chat = [isinstance(m, ChatMessage) or (isinstance(m, Mapping) and "role" in m) for m in items]
    if not any(is_chat):
        for i, m in enumerate(items):
            if not isinstance(m, str | NewMemory):
                raise InvalidInput(
                    f"memories[{i}] is neither a fact (a string or NewMemory) nor a chat message "
                    '({"role": ..., "content": ...})',
                    field=f"memories[{i}]",
                )
        return None
    if not all(is_chat):
        raise InvalidInput(
            "give either chat messages or facts (strings, NewMemory), not both",
            field=f"memories[{is_chat.index(not is_chat[0])}]",  # the first item unlike the first
        )
    messages: list[ChatMessage] = []
    for i, m in enumerate(items):
        try:
            messages.append(m if isinstance(m, ChatMessage) else ChatMessage.model_validate(dict(m)))
        except ValidationError as exc:
            raise InvalidInput(
                f"memories[{i}]: {describe_errors(exc, 'message')}",
                field=field_path(["memories", i, *[p for p in exc.errors()[0]["loc"] if isinstance(p, str | int)]]),
            ) from exc
    return messages


def _messages_as_facts(chat: list[ChatMessage]) -> list[NewMemory]:
    """``infer=False``: each user and assistant message's text, with its role (mem0 stores them so)."""
    facts: list[NewMemory] = []
    for i, m in enumerate(chat):
        if m.role not in ("user", "assistant") or not m.content.strip():
            continue
        try:
            facts.append(NewMemory(content=m.content, metadata={"role": m.role}))
        except ValidationError as exc:
            raise InvalidInput(
                f"memories[{i}].content: {describe_errors(exc)}", field=f"memories[{i}].content"
            ) from exc
    return facts


def _as_user_messages(items: list[Any]) -> list[ChatMessage]:
    """Facts read as what the user said (``infer=True``)."""
    return [ChatMessage(role="user", content=m if isinstance(m, str) else m.content) for m in items]


def _checked_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if metadata is None:
        return None
    try:
        return NewMemory(content="x", metadata=dict(metadata)).metadata
    except ValidationError as exc:
        raise InvalidInput(describe_errors(exc, "metadata"), field="metadata") from exc


def _with_metadata(memories: list[NewMemory], metadata: Mapping[str, Any] | None) -> list[NewMemory]:
    """Each memory with ``metadata`` added (its own keys win)."""
    extra = _checked_metadata(metadata)
    if not extra:
        return memories
    return [m.model_copy(update={"metadata": {**extra, **m.metadata}}) for m in memories]


class Writing:
    # Memory sets both: its settings, and the collaborators its verbs and its admin share.
    settings: Settings
    _parts: Collaborators

    def add(
        self,
        memories: str | NewMemory | ChatInput | Sequence[str | NewMemory | ChatInput],
        *,
        user_id: str,
        project_id: str | None = None,
        source: str | None = None,
        observed_at: dt.datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
        infer: bool | None = None,
        reviewed: bool = False,
    ) -> StoredIds:
        """Store one fact or several for the user, in one transaction. The same fact twice is one
        memory: exact duplicates and near duplicates that state the same fact fold into the stored
        row; a fact that gives another value to a stored one (or names it in ``supersedes``)
        supersedes it. Ids in input order, and per fact what happened to it, with the write's id
        (recorded with each memory it touched and each history event).

        Chat messages (``[{"role": "user", "content": ...}, ...]``, as mem0's ``add`` takes them) go
        through extraction, as a finished conversation does (:meth:`ingest_conversation`, with
        ``source`` as its conversation id): the ids are those of the facts kept (none for a
        conversation already added). ``infer=False`` stores each user and assistant message's text
        as is instead (its role in the metadata); ``infer=True`` extracts from strings too (each a
        user message). ``metadata`` is added to every memory stored (a fact's own keys win). With
        AGENT_MEMORY_REVIEW_WRITES, a flagged fact is held for review instead (``pending``), unless
        ``reviewed`` (a person approved it)."""
        items: list[Any] = list(memories) if _is_sequence(memories) else [memories]  # type: ignore[arg-type]
        chat = _chat_messages(items)
        if infer or (chat is not None and infer is None):
            messages = chat if chat is not None else _as_user_messages(items)
            return self._add_conversation(
                messages,
                user_id=user_id,
                project_id=project_id,
                source=source,
                observed_at=observed_at,
                metadata=metadata,
            )
        if chat is not None:  # infer=False: each message's text, as it is
            items = _messages_as_facts(chat)
        new = _with_metadata([NewMemory(content=m) if isinstance(m, str) else m for m in items], metadata)
        check_new_memories(self.settings, new)
        write_id = uuid.uuid4()
        with metering() as meter:
            redacted = self._parts.redactor.apply(new)
            now, pending = self._held_for_review(
                redacted.memories,
                user_id=user_id,
                project_id=project_id,
                source=source,
                write_id=write_id,
                skip=reviewed,
            )
            kept = [redacted.memories[i] for i in now]
            vectors = embed_unique(self._parts.embedder, [m.content for m in kept]) if kept else []
        # Each stored fact's position in the caller's input (for the supersedes fields' paths).
        given = {kept_at: i for i, kept_at in enumerate(redacted.positions) if kept_at is not None}
        original = {k: given[i] for k, i in enumerate(now)}
        if not kept:
            return StoredIds(
                ids=[], created=0, refreshed=0, pii_redacted=redacted.redacted,
                pii_dropped=redacted.dropped_positions, write_id=write_id, pending=pending,
            )  # fmt: skip
        rows, positions = build_rows(
            [user_id] * len(kept), kept, vectors, project_id=project_id, source=source, observed_at=observed_at
        )
        meter.add("write", calls=1, items=len(rows))
        usage = {user_id: self._parts.usage(meter)}
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
            pending=pending,
        )

    def _review_rule(self, source: str | None, *, conversation: bool) -> Callable[[NewMemory], list[str]] | None:
        """Why a fact from ``source`` must wait for review, with AGENT_MEMORY_REVIEW_WRITES on."""
        if not self.settings.review_writes:
            return None
        return partial(
            review_reasons,
            source=source,
            untrusted=self.settings.untrusted_sources,
            detectors=self._parts.redactor.detectors,
            conversation=conversation,
        )

    def _held_for_review(
        self,
        memories: Sequence[NewMemory],
        *,
        user_id: str,
        project_id: str | None,
        source: str | None,
        write_id: uuid.UUID,
        skip: bool = False,
    ) -> tuple[list[int], list[uuid.UUID]]:
        """With AGENT_MEMORY_REVIEW_WRITES, holds the flagged facts for review (one transaction): the
        indexes of the others, to store now, and the held facts' pending ids."""
        everything = list(range(len(memories)))
        review = None if skip else self._review_rule(source, conversation=False)
        if review is None or not memories:
            return everything, []
        flagged = {i: why for i, m in enumerate(memories) if (why := review(m))}
        if not flagged:
            return everything, []
        held = [(memories[i], why) for i, why in flagged.items()]
        pending = self._parts.db.run(
            lambda conn: held_writes.hold(conn, user_id, held, project_id=project_id, source=source, write_id=write_id)
        )
        logger.info("held for review", extra={"user_id": user_id, "memories": len(held), "write_id": str(write_id)})
        self._parts.publish_changes(user_id)
        return [i for i in everything if i not in flagged], pending

    def _add_conversation(
        self,
        messages: list[ChatMessage],
        *,
        user_id: str,
        project_id: str | None,
        source: str | None,
        observed_at: dt.datetime | None,
        metadata: Mapping[str, Any] | None,
    ) -> StoredIds:
        """:meth:`add` with chat messages: the write path of a conversation, its outcome as ids."""
        try:
            message = ConversationEnded(
                user_id=user_id, project_id=project_id, conversation_id=source, messages=messages
            )
        except ValidationError as exc:
            raise InvalidInput(describe_errors(exc, "memories"), field=error_field(exc)) from exc
        extra = _checked_metadata(metadata)
        outcome = self._ingest(message, observed_at=observed_at, unflushed=None, metadata=extra)
        return StoredIds(
            ids=outcome.ids,
            created=outcome.created,
            refreshed=outcome.refreshed,
            pii_redacted=outcome.pii_redacted,
            write_id=outcome.write_id,
            superseded=outcome.superseded,
            facts=outcome.facts,
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
        (see :mod:`rushmem.ingest.conversation`); durable when this returns."""
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
        self,
        message: ConversationEnded,
        *,
        observed_at: dt.datetime | None,
        unflushed: UnflushedWrites | None,
        metadata: dict[str, Any] | None = None,
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
            instructions = (
                effective_instructions(self._parts, user_id, message.project_id) if extractor is not None else None
            )
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
                instructions=instructions,
                metadata=metadata,
                review=self._review_rule(source, conversation=True),
            )
            meter.add("conversation", calls=1, items=len(planned.rows))
            usage = self._parts.usage(meter)
        pending: list[uuid.UUID] = []
        if planned.held:
            # Held first, in a transaction of its own: a redelivery holds the same facts again, which
            # is one row each (pending_memories' unique fact), so nothing is lost or doubled.
            pending = self._parts.db.run(
                lambda conn: held_writes.hold(
                    conn, user_id, planned.held, project_id=message.project_id, source=source, write_id=write_id
                )
            )
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
        outcome = conversation.written_outcome(planned, written).model_copy(
            update={"write_id": write_id, "pending": pending}
        )
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
