"""Writes: a client's facts (or chat messages, through extraction), a finished conversation, bulk
imports and exports restored; writes held for review."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from pydantic import ValidationError

from rushmem.ingest import conversation
from rushmem.ingest.neighbours import SameFactRule
from rushmem.ingest.review import review_reasons
from rushmem.ingest.rows import build_rows, check_lengths, check_new_memories, embed_unique, fact_outcome
from rushmem.records import DependsOn, ExistingMemory, MemoryRow, WriteOutcome
from rushmem.service.base import Collaborators
from rushmem.service.context import Context
from rushmem.service.instructing import effective_instructions
from rushmem.store.engine.session import Session
from rushmem.store.memories import messages, related, restore, writes
from rushmem.store.memories import pending as held_writes
from rushmem.store.memories.messages import UnflushedWrites
from rushmem.store.memories.scope import Scope
from rushmem.usage import Meter, UsageRow, metering
from rushmem_contract.errors import DatabaseUnavailable
from rushmem_contract.models import (
    ChatMessage,
    ConversationEnded,
    ImportLine,
    IngestOutcome,
    NewMemory,
    StoredIds,
    refusal,
)
from rushmem_contract.schemas import AddRequest, ConversationRequest

logger = logging.getLogger(__name__)


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
        depends_on=tuple(line.depends_on),
        stale_at=line.stale_at,
        stale_because=line.stale_because,
        stale_reason=line.stale_reason,
        source=line.source if line.source is not None else source,
    )


def _restorable(line: ImportLine) -> ImportLine:
    """A line stating an end (valid_until, superseded_at) and no id, with an id of its own: it is
    then restored as stated, its end kept (the upsert of live facts has no end to write, and would
    make an ended fact current). The fact key still folds it into the same fact stored before."""
    if line.id is None and (line.valid_until is not None or line.superseded_at is not None):
        return line.model_copy(update={"id": uuid.uuid4()})
    return line


def _messages_as_facts(chat: list[ChatMessage]) -> list[NewMemory]:
    """``infer=False``: each user and assistant message's text, with its role (mem0 stores them so)."""
    facts: list[NewMemory] = []
    for i, m in enumerate(chat):
        if m.role not in ("user", "assistant") or not m.content.strip():
            continue
        try:
            facts.append(NewMemory(content=m.content, metadata={"role": m.role}))
        except ValidationError as exc:
            raise refusal(exc, prefix=f"messages[{i}]") from exc
    return facts


# ---- add -------------------------------------------------------------------------------------


def add(parts: Collaborators, request: AddRequest, ctx: Context) -> StoredIds:
    """Store facts for the user in one transaction (how they fold and supersede:
    :func:`~rushmem.store.memories.writes.upsert_memories`), or chat ``messages`` through extraction
    as a finished conversation (the context's source its conversation id), as :class:`AddRequest`'s
    ``infer`` says. With RUSHMEM_REVIEW_WRITES, a flagged fact is held for review instead
    (``pending``), unless the context says a person approved it."""
    if request.messages is not None and request.infer is not False:
        return _add_conversation(parts, request.messages, request, ctx)
    if request.infer:
        said = [ChatMessage(role="user", content=m.content) for m in request.memories]
        return _add_conversation(parts, said, request, ctx)
    if request.messages is not None:  # infer=False: each message's text, as it is
        request = request.model_copy(update={"memories": _messages_as_facts(request.messages), "messages": None})
    return store_facts(parts, request.facts(), ctx, project_id=request.project_id)


def store_facts(
    parts: Collaborators,
    new: list[NewMemory],
    ctx: Context,
    *,
    project_id: str | None,
    commit_with: Callable[[Session, list[WriteOutcome]], None] | None = None,
) -> StoredIds:
    """:func:`add` for facts given as they are. ``commit_with``: statements of the caller's that
    commit or roll back with the facts' write (not called when nothing is written)."""
    user_id, source = ctx.user, ctx.source
    check_new_memories(parts.settings, new)
    write_id = uuid.uuid4()
    with metering() as meter:
        redacted = parts.redactor.apply(new)
        now, pending = _held_for_review(parts, redacted.memories, ctx, project_id=project_id, write_id=write_id)
        kept = [redacted.memories[i] for i in now]
        vectors = embed_unique(parts.embedder, [m.content for m in kept]) if kept else []
    # Each stored fact's position in the caller's input (for the supersedes fields' paths).
    given = {kept_at: i for i, kept_at in enumerate(redacted.positions) if kept_at is not None}
    original = {k: given[i] for k, i in enumerate(now)}
    if not kept:
        return StoredIds(
            ids=[], created=0, refreshed=0, pii_redacted=redacted.redacted,
            pii_dropped=redacted.dropped_positions, write_id=write_id, pending=pending,
        )  # fmt: skip
    rows, positions = build_rows(
        [user_id] * len(kept), kept, vectors, project_id=project_id, source=source, observed_at=ctx.observed_at
    )
    meter.add("write", calls=1, items=len(rows))
    usage = {user_id: parts.usage(meter)}
    named: dict[int, list[tuple[uuid.UUID, str]]] = {}
    follows: dict[int, list[tuple[uuid.UUID, str]]] = {}
    for k, memory in enumerate(kept):
        for j, target in enumerate(memory.supersedes):
            named.setdefault(positions[k], []).append((target, f"memories[{original[k]}].supersedes[{j}]"))
        for j, target in enumerate(memory.depends_on):
            follows.setdefault(positions[k], []).append((target, f"memories[{original[k]}].depends_on[{j}]"))
    outcomes = parts.db.run(
        lambda conn: writes.upsert_memories(
            conn,
            rows,
            neighbours=SameFactRule.from_settings(parts.settings),
            usage=usage,
            supersedes=named,
            write_id=write_id,
            commit_with=commit_with,
            depends_on=DependsOn(named=follows),
        )
    )
    ctx.wrote = True
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
    return StoredIds(
        ids=[outcomes[p].id for p in positions],
        created=created,
        refreshed=len(rows) - created,
        pii_redacted=redacted.redacted,
        pii_dropped=redacted.dropped_positions,
        write_id=write_id,
        superseded=sum(len(o.superseded) for o in outcomes),
        facts=[fact_outcome(outcomes[p], rows[p]) for p in positions],
        pending=pending,
    )


def review_rule(
    parts: Collaborators, source: str | None, *, conversation: bool
) -> Callable[[NewMemory], list[str]] | None:
    """Why a fact from ``source`` must wait for review, with RUSHMEM_REVIEW_WRITES on."""
    if not parts.settings.review_writes:
        return None
    return partial(
        review_reasons,
        source=source,
        untrusted=parts.settings.untrusted_sources,
        detectors=parts.redactor.detectors,
        conversation=conversation,
    )


def _held_for_review(
    parts: Collaborators, memories: Sequence[NewMemory], ctx: Context, *, project_id: str | None, write_id: uuid.UUID
) -> tuple[list[int], list[uuid.UUID]]:
    """With RUSHMEM_REVIEW_WRITES, holds the flagged facts for review (one transaction): the
    indexes of the others, to store now, and the held facts' pending ids."""
    everything = list(range(len(memories)))
    review = None if ctx.reviewed else review_rule(parts, ctx.source, conversation=False)
    if review is None or not memories:
        return everything, []
    flagged = {i: why for i, m in enumerate(memories) if (why := review(m))}
    if not flagged:
        return everything, []
    held = [(memories[i], why) for i, why in flagged.items()]
    user_id, source = ctx.user, ctx.source
    pending = parts.db.run(
        lambda conn: held_writes.hold(conn, user_id, held, project_id=project_id, source=source, write_id=write_id)
    )
    ctx.wrote = True
    logger.info("held for review", extra={"user_id": user_id, "memories": len(held), "write_id": str(write_id)})
    return [i for i in everything if i not in flagged], pending


def _add_conversation(parts: Collaborators, chat: list[ChatMessage], request: AddRequest, ctx: Context) -> StoredIds:
    """:func:`add` with chat messages: the write path of a conversation, its outcome as ids."""
    try:
        message = ConversationEnded(
            user_id=ctx.user, project_id=request.project_id, conversation_id=ctx.source, messages=chat
        )
    except ValidationError as exc:
        raise refusal(exc, "messages") from exc
    outcome = ingest_message(parts, message, ctx, metadata=request.metadata or None)
    # Every field a write's answer shares with the outcome but pii_dropped (positions there, a count here).
    shared = [name for name in StoredIds.model_fields if name != "pii_dropped"]
    return StoredIds(**{name: getattr(outcome, name) for name in shared})


# ---- import ----------------------------------------------------------------------------------


def import_lines(
    parts: Collaborators, lines: Sequence[ImportLine], *, source: str | None, write_id: uuid.UUID
) -> StoredIds:
    """Load import lines of users of one cell (one embedding pass, one upsert statement per user),
    taken as given: exact duplicates fold, near duplicates are kept. An export's lines are
    restored with their ids and write ids; ``write_id`` names the others' import."""
    if not lines:
        return StoredIds(ids=[], created=0, refreshed=0, write_id=write_id)
    check_lengths(parts.settings, lines, "lines")
    with metering() as meter:
        redacted = parts.redactor.apply(lines)
        kept = [_restorable(line) for line in redacted.memories]
        vectors = embed_unique(parts.embedder, [line.content for line in kept])
    # Lines with an id (an export) are restored as they were; the others are upserted.
    built: list[tuple[list[int], bool, list[MemoryRow], list[int], DependsOn]] = []
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
        first = {p: i for i, p in reversed(list(enumerate(positions)))}
        follows: dict[int, list[tuple[uuid.UUID, str]]] = {}
        if restoring:
            rows = [_as_restored(row, part[first[n]], source) for n, row in enumerate(rows)]
        else:  # a line's own source, as a restored line's (the import's when it names none)
            rows = [dataclasses.replace(row, source=part[first[n]].source or source) for n, row in enumerate(rows)]
            # A line without an id names memories the user has now (checked as an add's).
            for k, line in enumerate(part):
                for j, target in enumerate(line.depends_on):
                    follows.setdefault(positions[k], []).append((target, f"lines[{indexes[k]}].depends_on[{j}]"))
        built.append((indexes, restoring, rows, positions, DependsOn(named=follows)))
    # Each user's share of the embedding call is counted once, with their first write.
    shares = _shared_usage(parts, meter, [row for *_, rows, _, _ in built for row in rows])
    ids: list[uuid.UUID | None] = [None] * len(kept)
    created = refreshed = 0
    for indexes, restoring, rows, positions, links in built:
        usage = {user: shares.pop(user) for user in {row.user_id for row in rows} if user in shares}
        store = (
            partial(restore.restore_memories, source=source)
            if restoring
            else partial(writes.upsert_memories, depends_on=links)
        )
        outcomes = parts.db.run(partial(store, rows=rows, usage=usage, write_id=write_id))
        for i, p in zip(indexes, positions, strict=True):
            ids[i] = outcomes[p].id
        new = sum(1 for o in outcomes if o.action == "created")
        created, refreshed = created + new, refreshed + len(rows) - new
    parts.publish_changes(None)
    return StoredIds(
        ids=[i for i in ids if i is not None],
        created=created,
        refreshed=refreshed,
        pii_redacted=redacted.redacted,
        pii_dropped=redacted.dropped_positions,
        write_id=write_id,
    )


def _shared_usage(parts: Collaborators, meter: Meter, rows: Sequence[MemoryRow]) -> dict[str, list[UsageRow]]:
    """Per user, their share (by characters) of provider calls that served several users at once."""
    if not parts.settings.usage_metering:
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


# ---- a finished conversation -----------------------------------------------------------------


def ingest_conversation(parts: Collaborators, request: ConversationRequest, ctx: Context) -> IngestOutcome:
    """Turn one "conversation ended" message into memories: all of them or none
    (see :mod:`rushmem.ingest.conversation`); durable when this returns, or, in a queue batch
    (the context's ``unflushed``), when the batch ends."""
    message = ConversationEnded.model_validate({**request.model_dump(exclude_unset=True), "user_id": ctx.user})
    outcome = ingest_message(parts, message, ctx)
    logger.info("ingested", extra={"outcome": outcome.model_dump(mode="json", exclude={"ids"})})
    return outcome


def ingest_message(
    parts: Collaborators, message: ConversationEnded, ctx: Context, *, metadata: dict[str, Any] | None = None
) -> IngestOutcome:
    """The write path of one message: the receipt checked (when there is an extraction to
    save), the related memories read, the extraction and embedding done outside any
    transaction, then one write transaction (which checks the receipt again, under the lock).
    With the context's ``unflushed``, that commit does not wait for the disk (see
    :class:`UnflushedWrites`)."""
    conversation.check_conversation(parts.settings, message)
    user_id, source, unflushed = message.user_id, message.conversation_id, ctx.unflushed
    write_id = uuid.uuid4()
    digest = conversation.message_digest(message)
    # Checked before extraction only when there is an extraction to save: a message that carries
    # its memories goes straight to its write, whose receipt check under the lock makes a
    # redelivery a no-op (one round trip less per message).
    if message.messages:
        receipt: messages.Receipt = parts.db.run(lambda conn: messages.message_ingested(conn, user_id, digest))
        if receipt.found:
            if unflushed is not None:  # an earlier delivery may have written it without a flush
                unflushed.add(receipt.server_started)
            logger.info("ingest skipped: message already written", extra={"user_id": user_id, "source": source})
            return IngestOutcome(user_id=user_id, conversation_id=source, status="duplicate")
    with metering() as meter:
        extractor = parts.extractor if message.messages else None
        instructions = effective_instructions(parts, user_id, message.project_id) if extractor is not None else None
        shown: list[ExistingMemory] = []
        if extractor is not None and extractor.updates_existing:
            shown = _related_memories(parts, message, window=extractor.window)
        planned = conversation.plan_conversation(
            message,
            settings=parts.settings,
            embedder=parts.embedder,
            extractor=extractor,
            shown=shown,
            observed_at=ctx.observed_at,
            redactor=parts.redactor,
            instructions=instructions,
            metadata=metadata,
            review=review_rule(parts, source, conversation=True),
        )
        meter.add("conversation", calls=1, items=len(planned.rows))
        usage = parts.usage(meter)
    pending: list[uuid.UUID] = []
    if planned.held:
        # Held first, in a transaction of its own: a redelivery holds the same facts again, which
        # is one row each (pending_memories' unique fact), so nothing is lost or doubled.
        pending = parts.db.run(
            lambda conn: held_writes.hold(
                conn, user_id, planned.held, project_id=message.project_id, source=source, write_id=write_id
            )
        )
        ctx.wrote = True
    written = parts.db.run(
        lambda conn: messages.ingest_message(
            conn,
            user_id,
            planned.digest,
            planned.rows,
            conversation_id=source,
            neighbours=SameFactRule.from_settings(parts.settings),
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
    ctx.wrote = True
    return conversation.written_outcome(planned, written).model_copy(update={"write_id": write_id, "pending": pending})


def _related_memories(parts: Collaborators, message: ConversationEnded, *, window: int) -> list[ExistingMemory]:
    """The user's stored memories most related to the conversation's user turns, under handles
    m1, m2, ... (best first): one embedding batch, one query."""
    limit = parts.settings.related_memories_shown
    turns = conversation.related_turns(message, window=window)
    if limit <= 0 or not turns:
        return []
    vectors = list(parts.embedder.embed(turns))
    scope = Scope(message.user_id, message.project_id)
    found: list[ExistingMemory] = parts.db.run(lambda conn: related.related_memories(conn, scope, vectors, limit=limit))
    return found


def flush_writes(parts: Collaborators, unflushed: UnflushedWrites) -> None:
    """Make a batch's unflushed writes durable: one WAL flush for all of them. Raises
    DatabaseUnavailable when the server restarted (or failed over) after one of them, which
    may then be lost: the batch must be delivered again (its receipts make that safe)."""
    pending = unflushed.take()
    if not pending:
        return
    started: dt.datetime = parts.db.run(messages.flush_writes)
    if pending != {started}:
        logger.warning(
            "the database restarted between a batch's writes and their flush",
            extra={"server_started": started.isoformat(), "writes_saw": sorted(p.isoformat() for p in pending)},
        )
        raise DatabaseUnavailable(
            "the database restarted before this batch's writes were known to be on its disk; "
            "the batch must be delivered again"
        )
