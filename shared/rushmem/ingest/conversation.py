"""One "conversation ended" message into memories: check, extract, embed, resolve updates, write.

The client's ``memories`` are stored as given; ``messages`` go through the configured extractor
first (outside any transaction: an LLM call never holds one open). Both then pass the redaction
step (:mod:`rushmem.ingest.redaction`) before anything is embedded. An LLM extractor's updates of
the memories it was shown are checked by :mod:`rushmem.extraction.updates`. The memories are embedded
in one batch and handed back with those updates and the message's receipt key (:class:`ConversationWrite`):
the service writes them in one transaction, so a redelivered message changes nothing and a
failure leaves nothing behind. No step here touches the database.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from rushmem.config import Settings
from rushmem.embeddings.base import Embedder
from rushmem.extraction.base import Extractor
from rushmem.extraction.records import ExtractedMemory
from rushmem.extraction.updates import FactUpdate, resolve_updates
from rushmem.ingest.neighbours import SameFactRule
from rushmem.ingest.redaction import Redactor
from rushmem.ingest.rows import build_rows, check_new_memories, embed_unique, fact_outcome
from rushmem.poison import strip_memory_blocks
from rushmem.records import DependsOn, ExistingMemory, IngestWrite, MemoryRow, Updates
from rushmem_contract.instructions import StoredInstructions
from rushmem_contract.models import ChatMessage, ConversationEnded, IngestOutcome, NewMemory, too_large

# A user turn's head is enough to find the memories it relates to (embedders truncate anyway).
MAX_TURN_CHARS = 2000


def message_digest(message: ConversationEnded) -> bytes:
    """The receipt's key: the same message delivered again has the same digest."""
    return hashlib.sha256(json.dumps(message.model_dump(mode="json"), sort_keys=True).encode()).digest()


def check_conversation(settings: Settings, message: ConversationEnded) -> None:
    """The configured limits (the model holds only the wire format's ceilings)."""
    limit = settings.max_messages_per_conversation
    if len(message.messages) > limit:
        raise too_large("messages", len(message.messages), limit, "items")
    longest = settings.max_message_chars
    for i, chat in enumerate(message.messages):
        if len(chat.content) > longest:
            raise too_large(f"messages[{i}].content", len(chat.content), longest)
    if message.memories:
        check_new_memories(settings, message.memories)


@dataclasses.dataclass
class ConversationWrite:
    """What one message writes (its rows, their updates of existing memories, its receipt's key)
    and, in ``outcome``, what is known of it before the write."""

    digest: bytes
    rows: list[MemoryRow]
    positions: list[int]
    updates: Updates
    outcome: IngestOutcome
    # Facts held for review (RUSHMEM_REVIEW_WRITES), each with why: not among the rows.
    held: list[tuple[NewMemory, list[str]]] = dataclasses.field(default_factory=list)


def without_recalled_blocks(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The chat turns as an extractor may read them: any [RUSH_MEMORY] block (recalled memories an
    agent kept in its prompt or echoed) removed, whatever the extractor, so recalled facts never
    come back as new ones; a turn that held nothing else is left out."""
    kept: list[ChatMessage] = []
    for chat in messages:
        text = strip_memory_blocks(chat.content)
        if text == chat.content:
            kept.append(chat)
        elif text.strip():
            kept.append(chat.model_copy(update={"content": text.strip()}))
    return kept


def related_turns(message: ConversationEnded, *, window: int) -> list[str]:
    """The user turns (their heads, once each) to find the related memories an LLM extractor is shown."""
    chats = without_recalled_blocks(message.messages[-window:])
    turns = dict.fromkeys(m.content.strip()[:MAX_TURN_CHARS] for m in chats if m.role == "user")
    return [t for t in turns if t]


def plan_conversation(  # noqa: PLR0913 -- the message, its collaborators, and the project's rules for it
    message: ConversationEnded,
    *,
    settings: Settings,
    embedder: Embedder,
    extractor: Extractor | None,
    shown: Sequence[ExistingMemory] = (),
    observed_at: dt.datetime | None = None,
    redactor: Redactor | None = None,
    instructions: StoredInstructions | None = None,
    metadata: dict[str, Any] | None = None,
    review: Callable[[NewMemory], list[str]] | None = None,
) -> ConversationWrite:
    """Turn one message into what to write (see the module's docstring); no database.

    ``conversation_id`` becomes each memory's source (and the source in the history); the
    time of the facts is ``ended_at``, else ``observed_at`` (the handler passes the SQS
    SentTimestamp: stable across redeliveries), else now. Extracted expiries are checked
    against that time. ``extractor`` runs on the chat messages without their recalled-memory
    blocks (None when there are none);
    ``shown``: the user's related memories it may restate or replace. ``instructions``: the
    project's extraction instructions (their version is recorded in each extracted memory's
    metadata, ``instructions_version``); ``metadata``: added to each extracted memory's.
    ``review``: why a fact must wait for review (empty: it need not); the facts that must are
    held, not written.
    """
    user_id, source = message.user_id, message.conversation_id
    outcome = IngestOutcome(user_id=user_id, conversation_id=source, status="nothing_to_store")
    facts: list[ExtractedMemory] = []
    fingerprint = ""
    chats = without_recalled_blocks(message.messages)
    if chats and extractor is not None:
        extraction = extractor.extract(
            chats,
            ended_at=message.ended_at or observed_at,
            existing=shown,
            instructions=instructions.instructions if instructions is not None else None,
        )
        room = settings.max_memories_per_request - len(message.memories)
        outcome.dropped = len(extraction.dropped) + max(0, len(extraction.memories) - room)
        facts = extraction.memories[: max(0, room)]
        fingerprint = extractor.fingerprint
    extra = dict(metadata or {})
    if instructions is not None and instructions.version:
        extra["instructions_version"] = instructions.version
    memories = [*message.memories, *(f.to_new_memory(fingerprint, extra) for f in facts)]
    outcome.provided, outcome.extracted = len(message.memories), len(facts)
    provided = len(message.memories)
    if redactor is not None and redactor.enabled:
        redacted = redactor.apply(memories)
        facts = [f for j, f in enumerate(facts) if redacted.positions[provided + j] is not None]
        provided = sum(1 for p in redacted.positions[:provided] if p is not None)
        memories = redacted.memories
        outcome.pii_redacted, outcome.pii_dropped = redacted.redacted, redacted.dropped
    held: list[tuple[NewMemory, list[str]]] = []
    if review is not None and memories:
        reasons = [review(m) for m in memories]
        held = [(m, why) for m, why in zip(memories, reasons, strict=True) if why]
        facts = [f for j, f in enumerate(facts) if not reasons[provided + j]]
        provided = sum(1 for why in reasons[:provided] if not why)
        memories = [m for m, why in zip(memories, reasons, strict=True) if not why]
    rows: list[MemoryRow] = []
    positions: list[int] = []
    updates = Updates(project_id=message.project_id)
    if memories:
        vectors = embed_unique(embedder, [m.content for m in memories])
        # A client's memories may name what they replace (``supersedes``), as an extractor's "replaces".
        given = [FactUpdate(replaces=tuple(m.supersedes), depends_on=tuple(m.depends_on)) for m in memories[:provided]]
        extracted = resolve_updates(
            facts, vectors[provided:], list(shown), min_similarity=settings.supersede_min_similarity
        )
        # An extracted fact's earlier facts, as places among all the message's memories.
        resolved = given + [
            dataclasses.replace(u, depends_within=tuple(provided + j for j in u.depends_within)) for u in extracted
        ]
        rows, positions = build_rows(
            [user_id] * len(memories),
            memories,
            vectors,
            project_id=message.project_id,
            source=source,
            observed_at=message.ended_at or observed_at,
            user_wide=[u.user_wide for u in resolved],
        )
        judged = (
            frozenset(positions[provided:]) if extractor is not None and extractor.updates_existing else frozenset()
        )
        updates = _updates_by_row(resolved, positions, project_id=message.project_id, judged=judged)
        corrected_by = SameFactRule.from_settings(settings).within(rows, _said_order(rows, positions, facts, provided))
        updates = dataclasses.replace(updates, corrected_by=corrected_by)
        outcome.updates_ignored = sum(u.ignored for u in resolved)
    return ConversationWrite(message_digest(message), rows, positions, updates, outcome, held)


def _said_order(
    rows: Sequence[MemoryRow], positions: Sequence[int], facts: Sequence[ExtractedMemory], provided: int
) -> list[tuple[dt.datetime, int, int]]:
    """Per row, when and where it was last said in the message: its valid time (the message's time
    when known), then its place (the client's memories first, in their order; then the extracted
    facts by message, then in the extractor's order)."""
    first = dt.datetime.min.replace(tzinfo=dt.UTC)
    order: list[tuple[dt.datetime, int, int]] = [(r.true_from or first, -1, -1) for r in rows]
    for k, row in enumerate(positions):
        turn = -1 if k < provided else (facts[k - provided].turn or 0)
        order[row] = max(order[row], (rows[row].true_from or first, turn, k))
    return order


def written_outcome(planned: ConversationWrite, written: IngestWrite) -> IngestOutcome:
    """The message's outcome once its write committed."""
    outcome = planned.outcome.model_copy()
    outcome.status = "stored" if planned.rows or planned.held else "nothing_to_store"
    outcome.created = sum(1 for o in written.outcomes if o.action == "created")
    outcome.refreshed = len(written.outcomes) - outcome.created
    outcome.superseded = len(written.superseded)
    outcome.updates_ignored += len(written.stale)
    outcome.ids = [written.outcomes[p].id for p in planned.positions]
    outcome.facts = [fact_outcome(written.outcomes[p], planned.rows[p]) for p in planned.positions]
    return outcome


def _updates_by_row(
    resolved: Sequence[FactUpdate],
    positions: Sequence[int],
    *,
    project_id: str | None,
    judged: frozenset[int] = frozenset(),
) -> Updates:
    """Per-memory updates keyed by row (memories that folded into one row share it: first wins)."""
    restates: dict[int, uuid.UUID] = {}
    replaces: dict[int, list[uuid.UUID]] = {}
    named: dict[int, list[tuple[uuid.UUID, str]]] = {}
    within: dict[int, list[int]] = {}
    for update, row in zip(resolved, positions, strict=True):
        if update.restates is not None:
            restates.setdefault(row, update.restates)
        if update.replaces:
            targets = replaces.setdefault(row, [])
            targets.extend(t for t in update.replaces if t not in targets)
        named.setdefault(row, []).extend((t, "depends_on") for t in update.depends_on)
        # An earlier memory that folded into this same row is no dependency of it.
        within.setdefault(row, []).extend(positions[j] for j in update.depends_within if positions[j] != row)
    return Updates(
        restates=restates,
        replaces=replaces,
        project_id=project_id,
        judged=judged,
        depends_on=DependsOn(
            named={r: v for r, v in named.items() if v}, within={r: v for r, v in within.items() if v}
        ),
    )
