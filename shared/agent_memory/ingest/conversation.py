"""One "conversation ended" message into memories: check, extract, embed, resolve updates, write.

The client's ``memories`` are stored as given; ``messages`` go through the configured extractor
first (outside any transaction: an LLM call never holds one open). Both then pass the redaction
step (:mod:`agent_memory.ingest.redaction`) before anything is embedded. An LLM extractor is shown the
user's most related memories and may mark a fact as restating one (refreshed, nothing new
stored) or replacing some (superseded by the new memory); see
:mod:`agent_memory.extraction.updates` for the guards. The memories are embedded in one batch
and written with those updates and the message's receipt in one transaction, so a redelivered
message changes nothing and a failure leaves nothing behind.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Sequence

from agent_memory.config import Settings
from agent_memory.embeddings import Embedder
from agent_memory.extraction import ExtractedMemory, Extractor
from agent_memory.extraction.updates import FactUpdate, resolve_updates
from agent_memory.ingest.redaction import Redactor
from agent_memory.ingest.rows import build_rows, check_new_memories, embed_unique
from agent_memory.store import writes
from agent_memory.store.connection import Database
from agent_memory.store.rows import ExistingMemory, MemoryRow
from agent_memory.store.scope import Scope
from agent_memory.usage import Meter
from agent_memory_contract.errors import InputTooLarge
from agent_memory_contract.models import ConversationEnded, IngestOutcome

logger = logging.getLogger(__name__)

# A user turn's head is enough to find the memories it relates to (embedders truncate anyway).
MAX_TURN_CHARS = 2000


def message_digest(message: ConversationEnded) -> bytes:
    """The receipt's key: the same message delivered again has the same digest."""
    return hashlib.sha256(json.dumps(message.model_dump(mode="json"), sort_keys=True).encode()).digest()


def check_conversation(settings: Settings, message: ConversationEnded) -> None:
    """The configured limits (the model holds only the wire format's ceilings)."""
    limit = settings.max_messages_per_conversation
    if len(message.messages) > limit:
        raise InputTooLarge(f"{len(message.messages)} messages; the limit is {limit}", field="messages")
    longest = settings.max_message_chars
    for i, chat in enumerate(message.messages):
        if len(chat.content) > longest:
            raise InputTooLarge(
                f"message content is {len(chat.content)} characters; the limit is {longest}",
                field=f"messages[{i}].content",
            )
    if message.memories:
        check_new_memories(settings, message.memories)


def ingest_conversation(
    message: ConversationEnded,
    *,
    settings: Settings,
    db: Database,
    embedder: Embedder,
    extractor: Callable[[], Extractor],
    observed_at: dt.datetime | None = None,
    redactor: Redactor | None = None,
    meter: Meter | None = None,
    unflushed: writes.UnflushedWrites | None = None,
) -> IngestOutcome:
    """Turn one message into memories: all of them or none (see the module's docstring).

    ``meter``: the provider calls made for this message so far, counted with the conversation
    in the user's usage by the write's transaction (None: no usage is recorded).

    ``conversation_id`` becomes each memory's source (and the source in the history); the
    time of the facts is ``ended_at``, else ``observed_at`` (the handler passes the SQS
    SentTimestamp: stable across redeliveries), else now. Extracted expiries are checked
    against that time. ``extractor`` is called only when the message has chat messages.
    With ``unflushed`` the write does not wait for the disk (see :class:`writes.UnflushedWrites`).
    """
    check_conversation(settings, message)
    user_id, source = message.user_id, message.conversation_id
    digest = message_digest(message)
    outcome = IngestOutcome(user_id=user_id, conversation_id=source, status="duplicate")
    receipt: writes.Receipt = db.run(lambda conn: writes.message_ingested(conn, user_id, digest))
    if receipt.found:
        if unflushed is not None:  # an earlier delivery may have written it without a flush
            unflushed.add(receipt.server_started)
        logger.info("ingest skipped: message already written", extra={"user_id": user_id, "source": source})
        return outcome
    facts: list[ExtractedMemory] = []
    shown: list[ExistingMemory] = []
    fingerprint = ""
    if message.messages:
        chosen = extractor()
        if chosen.updates_existing:
            shown = _related_memories(message, settings=settings, db=db, embedder=embedder, window=chosen.window)
        extraction = chosen.extract(message.messages, ended_at=message.ended_at or observed_at, existing=shown)
        room = settings.max_memories_per_request - len(message.memories)
        outcome.dropped = len(extraction.dropped) + max(0, len(extraction.memories) - room)
        facts = extraction.memories[: max(0, room)]
        fingerprint = chosen.fingerprint
    memories = [*message.memories, *(f.to_new_memory(fingerprint) for f in facts)]
    outcome.provided, outcome.extracted = len(message.memories), len(facts)
    provided = len(message.memories)
    if redactor is not None and redactor.enabled:
        redacted = redactor.apply(memories)
        facts = [f for j, f in enumerate(facts) if redacted.positions[provided + j] is not None]
        provided = sum(1 for p in redacted.positions[:provided] if p is not None)
        memories = redacted.memories
        outcome.pii_redacted, outcome.pii_dropped = redacted.redacted, redacted.dropped
    rows: list[MemoryRow] = []
    positions: list[int] = []
    updates = writes.Updates(project_id=message.project_id)
    if memories:
        vectors = embed_unique(embedder, [m.content for m in memories])
        resolved = [FactUpdate()] * provided + resolve_updates(
            facts, vectors[provided:], shown, min_similarity=settings.supersede_min_similarity
        )
        rows, positions = build_rows(
            [user_id] * len(memories),
            memories,
            vectors,
            project_id=message.project_id,
            source=source,
            observed_at=message.ended_at or observed_at,
            user_wide=[u.user_wide for u in resolved],
        )
        updates = _updates_by_row(resolved, positions, project_id=message.project_id)
        outcome.updates_ignored = sum(u.ignored for u in resolved)
    threshold = settings.near_duplicate_threshold
    if meter is not None:
        meter.add("conversation", calls=1, items=len(rows))
    usage = meter.rows() if meter is not None else []
    written = db.run(
        lambda conn: writes.ingest_message(
            conn,
            user_id,
            digest,
            rows,
            conversation_id=source,
            near_duplicate_threshold=threshold,
            updates=updates,
            usage=usage,
            unflushed=unflushed,
        )
    )
    if written is None:  # a concurrent delivery of the same message won the race
        return outcome
    if written.stale:
        logger.warning(
            "update targets ended or left the scope before the write; their facts were kept as new",
            extra={"user_id": user_id, "source": source, "stale": [str(t) for t in written.stale]},
        )
    outcome.status = "stored" if rows else "nothing_to_store"
    outcome.created = sum(1 for o in written.outcomes if o.action == "created")
    outcome.refreshed = len(written.outcomes) - outcome.created
    outcome.superseded = len(written.superseded)
    outcome.updates_ignored += len(written.stale)
    outcome.ids = [written.outcomes[p].id for p in positions]
    logger.info("ingested", extra={"outcome": outcome.model_dump(mode="json", exclude={"ids"})})
    return outcome


def _related_memories(
    message: ConversationEnded, *, settings: Settings, db: Database, embedder: Embedder, window: int
) -> list[ExistingMemory]:
    """The user's stored memories most related to the conversation's user turns, under handles
    m1, m2, ... (best first): one embedding batch, one query."""
    limit = settings.related_memories_shown
    turns = list(
        dict.fromkeys(m.content.strip()[:MAX_TURN_CHARS] for m in message.messages[-window:] if m.role == "user")
    )
    turns = [t for t in turns if t]
    if limit <= 0 or not turns:
        return []
    vectors = list(embedder.embed(turns))
    scope = Scope(message.user_id, message.project_id)
    found: list[ExistingMemory] = db.run(lambda conn: writes.related_memories(conn, scope, vectors, limit=limit))
    return found


def _updates_by_row(
    resolved: Sequence[FactUpdate], positions: Sequence[int], *, project_id: str | None
) -> writes.Updates:
    """Per-memory updates keyed by row (memories that folded into one row share it: first wins)."""
    restates: dict[int, uuid.UUID] = {}
    replaces: dict[int, list[uuid.UUID]] = {}
    for update, row in zip(resolved, positions, strict=True):
        if update.restates is not None:
            restates.setdefault(row, update.restates)
        if update.replaces:
            targets = replaces.setdefault(row, [])
            targets.extend(t for t in update.replaces if t not in targets)
    return writes.Updates(restates=restates, replaces=replaces, project_id=project_id)
