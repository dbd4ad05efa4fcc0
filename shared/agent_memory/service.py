"""The service facade: what handlers, the CLI and MCP call. Each method checks its input against
the settings, then runs the steps of its path (:mod:`.ingest`, :mod:`.recall`, :mod:`.manage`,
:mod:`.schema`) on the lazily built embedder and database connection.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property, partial
from typing import Any

import numpy as np

from agent_memory import costs
from agent_memory.changes import DrainResult, OutboxStatus, drain_outbox, outbox_status
from agent_memory.changes.drain import Publish
from agent_memory.config import Settings, get_settings
from agent_memory.db.connection import Connection, Database, VectorSchema
from agent_memory.db.readers import ReadRouter, reader_settings
from agent_memory.db.scope import Scope
from agent_memory.db.usage import record_usage
from agent_memory.embeddings import Embedder, create_embedder
from agent_memory.erasure import ErasureReceipt
from agent_memory.errors import ConfigurationError, DatabaseUnavailable, InputTooLarge, InvalidInput, NotFound
from agent_memory.extraction import Extractor, create_extractor
from agent_memory.ingest import conversation, importing, restore, writes
from agent_memory.ingest.redaction import REDACTED_KEY, Redactor
from agent_memory.ingest.rows import (
    MemoryRow,
    build_rows,
    check_lengths,
    check_metadata,
    check_new_memories,
    embed_unique,
)

# Re-exported: a queue consumer (IngestFunction) keeps one per batch.
from agent_memory.ingest.writes import UnflushedWrites as UnflushedWrites
from agent_memory.inputs import has_visible, lone_surrogate
from agent_memory.manage import edits, pages, queries
from agent_memory.manage import erasure as erasing
from agent_memory.manage import usage as usage_queries
from agent_memory.models import (
    DEFAULT_PAGE,
    MAX_HISTORY,
    MAX_PAGE,
    MAX_RECALL_LIMIT,
    Consistency,
    ConversationEnded,
    ExportPage,
    ImportLine,
    IngestOutcome,
    Memory,
    MemoryChanges,
    MemoryEvent,
    MemoryFilters,
    MemoryPage,
    NewMemory,
    RecalledMemory,
    RecallQuery,
    RecallResult,
    StoredIds,
    export_line,
    normalize_content,
)
from agent_memory.providers.aws import clear_secret_cache
from agent_memory.recall.block import build_memory_block
from agent_memory.recall.candidates import hybrid_candidates
from agent_memory.recall.ranking import RecallOptions, rank_candidates
from agent_memory.rerank import Reranker, create_reranker
from agent_memory.schema import dense_users, entity_links
from agent_memory.schema import reembed as reembedding
from agent_memory.schema.migrate import prepare_connection
from agent_memory.schema.setup import MigrateResult, migrate
from agent_memory.usage import Meter, TenantUsage, UsageLine, UsageReport, UsageRow, metering, usage_totals

logger = logging.getLogger(__name__)

# GET /usage: the default period (days, today included) and the longest one asked at once.
USAGE_DEFAULT_DAYS = 30
USAGE_MAX_DAYS = 366


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _store_rows(
    conn: Connection,
    *,
    rows: list[MemoryRow],
    restoring: bool,
    source: str | None,
    usage: dict[str, list[UsageRow]],
) -> list[writes.WriteOutcome]:
    if restoring:
        return restore.restore_memories(conn, rows, source=source, usage=usage)
    return writes.upsert_memories(conn, rows, usage=usage)


def _as_restored(row: MemoryRow, line: ImportLine, source: str | None) -> MemoryRow:
    """A row of an exported memory: its id, timestamps, source and supersession as exported."""
    return dataclasses.replace(
        row,
        id=line.id,
        updated_at=line.updated_at,
        superseded_at=line.superseded_at,
        superseded_by=line.superseded_by,
        source=line.source if line.source is not None else source,
    )


class MemoryService:
    """Long-term memory for one deployment: remember, recall, list, forget.

    Construction is free of I/O; the embedder and the database connection are created
    on first use and then reused (one per process / Lambda container).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        database: Database | None = None,
        extractor: Extractor | None = None,
        publisher: Publish | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        self.settings = settings
        self._embedder = embedder
        self._database = database
        self._extractor = extractor
        self._publisher = publisher
        self._reads: ReadRouter | None = None
        self._reranker = reranker
        self._reranker_built = reranker is not None

    # ---- lazily built collaborators --------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = create_embedder(self.settings)
        return self._embedder

    @property
    def extractor(self) -> Extractor:
        if self._extractor is None:
            self._extractor = create_extractor(self.settings)
        return self._extractor

    @property
    def reranker(self) -> Reranker | None:
        """The configured reranker (AGENT_MEMORY_RERANK_PROVIDER), None when there is none."""
        if not self._reranker_built:
            self._reranker = create_reranker(self.settings)
            self._reranker_built = True
        return self._reranker

    @property
    def rerank_fallbacks(self) -> int:
        """Recalls of this process whose reranker failed (they kept the fused order)."""
        return self._reranker.fallbacks if self._reranker is not None else 0

    @property
    def db(self) -> Database:
        if self._database is None:
            self._database = Database(self.settings, setup=self._prepare_connection)
        return self._database

    @property
    def reads(self) -> ReadRouter:
        """Where reads go: the reader endpoint when one is configured, else (and as its fallback)
        the writer, :attr:`db` (see :mod:`agent_memory.db.readers`)."""
        if self._reads is None:
            settings = reader_settings(self.settings)
            reader = None
            if settings is not None:
                reader = Database(settings, setup=self._prepare_reader, application_name="agent-memory-reader")
            self._reads = ReadRouter(self.db, reader, retry_after_s=self.settings.db_reader_retry_after_s)
        return self._reads

    def _prepare_reader(self, conn: Connection) -> VectorSchema:
        # Never migrates: a replica is read-only (the writer's connection migrates).
        return prepare_connection(
            conn,
            dimension=self.embedder.dimension,
            fingerprint=self.embedder.fingerprint,
            migrate=False,
            role=self.settings.effective_db_role(),
        )

    def reader_fallbacks(self) -> int:
        """Reads the writer served because the reader failed, since the last call (a metric)."""
        return self._reads.take_fallbacks() if self._reads is not None else 0

    def _prepare_connection(self, conn: Connection) -> VectorSchema:
        return prepare_connection(
            conn,
            dimension=self.embedder.dimension,
            fingerprint=self.embedder.fingerprint,
            migrate=self.settings.auto_migrate,
            role=self.settings.effective_db_role(),
        )

    @cached_property
    def recall_options(self) -> RecallOptions:
        return RecallOptions.from_settings(self.settings)

    @cached_property
    def redactor(self) -> Redactor:
        """The write path's personal-data step (AGENT_MEMORY_PII; off by default)."""
        return Redactor.from_settings(self.settings)

    @property
    def publisher(self) -> Publish:
        """Puts change events on AGENT_MEMORY_EVENT_BUS (built on first use)."""
        if self._publisher is None:
            from agent_memory.providers.eventbridge import EventBridgePublisher

            self._publisher = EventBridgePublisher.from_settings(self.settings).publish
        return self._publisher

    def _usage(self, meter: Meter) -> list[UsageRow]:
        return meter.rows() if self.settings.usage_metering else []

    def _publish_changes(self, user_id: str | None) -> None:
        """After a commit: put the changes it queued on the bus. Never fails the write: what is not
        published now stays in the outbox for the next drain (the next write, or the scheduled one)."""
        if not self.settings.event_bus:
            return
        try:
            drain_outbox(self.db, self.publisher, user_id=user_id, max_batches=1 if user_id is not None else 5)
        except Exception:
            logger.warning("change events not published after commit; the outbox keeps them", exc_info=True)

    def close(self) -> None:
        if self._database is not None:
            self._database.close()
        if self._reads is not None:
            self._reads.close()

    def release_secrets(self) -> None:
        """Close the database connections (each logged in with a password or an IAM token), forget
        cached secrets and the providers built with an API key; all are rebuilt on first use.
        Before a SnapStart snapshot (see :mod:`agent_memory.lifecycle`)."""
        self.close()
        clear_secret_cache()
        if self.settings.embedding_provider == "openai":
            self._embedder = None
        if self.settings.llm_provider == "openai":
            self._extractor = None

    # ---- writes ----------------------------------------------------------------------

    def remember(
        self,
        user_id: str,
        memories: Sequence[NewMemory],
        *,
        project_id: str | None = None,
        source: str | None = None,
        observed_at: dt.datetime | None = None,
    ) -> StoredIds:
        """Store facts for a user in one transaction: embedded in one batch, upserted,
        exact and near duplicates folded into the existing rows. Ids come back in input order."""
        check_new_memories(self.settings, memories)
        with metering() as meter:
            redacted = self.redactor.apply(memories)
            kept = redacted.memories
            vectors = embed_unique(self.embedder, [m.content for m in kept])
        rows, positions = build_rows(
            [user_id] * len(kept), kept, vectors, project_id=project_id, source=source, observed_at=observed_at
        )
        meter.add("write", calls=1, items=len(rows))
        usage = {user_id: self._usage(meter)}
        threshold = self.settings.near_duplicate_threshold
        outcomes = self.db.run(
            lambda conn: writes.upsert_memories(conn, rows, near_duplicate_threshold=threshold, usage=usage)
        )
        created = sum(1 for o in outcomes if o.action == "created")
        logger.info(
            "remembered",
            # "created" is a LogRecord attribute: logging refuses it as an extra key.
            extra={"user_id": user_id, "memories": len(rows), "memories_created": created, "source": source},
        )
        self._publish_changes(user_id)
        return StoredIds(
            ids=[outcomes[p].id for p in positions],
            created=created,
            refreshed=len(rows) - created,
            pii_redacted=redacted.redacted,
            pii_dropped=redacted.dropped_positions,
        )

    def import_memories(self, lines: Sequence[ImportLine], *, source: str | None = "import") -> StoredIds:
        """Bulk load (many users at once): one embedding pass and one upsert statement per user.

        Lines are taken as given: exact duplicates fold, near duplicates are kept.
        """
        if not lines:
            return StoredIds(ids=[], created=0, refreshed=0)
        check_lengths(self.settings, lines, "lines")
        with metering() as meter:
            redacted = self.redactor.apply(lines)
            kept = redacted.memories
            vectors = embed_unique(self.embedder, [line.content for line in kept])
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
            outcomes = self.db.run(partial(_store_rows, rows=rows, restoring=restoring, source=source, usage=usage))
            for i, p in zip(indexes, positions, strict=True):
                ids[i] = outcomes[p].id
            new = sum(1 for o in outcomes if o.action == "created")
            created, refreshed = created + new, refreshed + len(rows) - new
        self._publish_changes(None)
        return StoredIds(
            ids=[i for i in ids if i is not None],
            created=created,
            refreshed=refreshed,
            pii_redacted=redacted.redacted,
            pii_dropped=redacted.dropped_positions,
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

    def import_jsonl(
        self,
        lines: Iterable[tuple[int, str]],
        report: importing.ImportReport,
        *,
        source: str | None = "import",
        progress: Callable[[int], None] | None = None,
    ) -> importing.ImportReport:
        """Import numbered JSON lines in chunks; lines that are invalid (alone) are skipped and
        recorded in ``report``, which stays true if a later chunk fails."""
        return importing.import_lines(
            lines,
            lambda chunk: self.import_memories(chunk, source=source),
            report,
            progress=progress,
            check=lambda line: check_lengths(self.settings, [line], "lines"),
        )

    def ingest_conversation(
        self,
        message: ConversationEnded,
        *,
        observed_at: dt.datetime | None = None,
        unflushed: UnflushedWrites | None = None,
    ) -> IngestOutcome:
        """Turn one "conversation ended" message into memories: all of them or none
        (see :mod:`agent_memory.ingest.conversation`). With ``unflushed`` (one per queue batch),
        the write is committed without waiting for the disk and durable once
        :meth:`flush_writes` has returned for that batch."""
        with metering() as meter:
            outcome = conversation.ingest_conversation(
                message,
                settings=self.settings,
                db=self.db,
                embedder=self.embedder,
                extractor=lambda: self.extractor,
                observed_at=observed_at,
                redactor=self.redactor,
                meter=meter if self.settings.usage_metering else None,
                unflushed=unflushed,
            )
        if outcome.status != "duplicate":
            self._publish_changes(message.user_id)
        return outcome

    def flush_writes(self, unflushed: UnflushedWrites) -> None:
        """Make a batch's unflushed writes durable: one WAL flush for all of them. Raises
        DatabaseUnavailable when the server restarted (or failed over) after one of them, which
        may then be lost: the batch must be delivered again (its receipts make that safe)."""
        pending = unflushed.take()
        if not pending:
            return
        started: dt.datetime = self.db.run(writes.flush_writes)
        if pending != {started}:
            logger.warning(
                "the database restarted between a batch's writes and their flush",
                extra={"server_started": started.isoformat(), "writes_saw": sorted(p.isoformat() for p in pending)},
            )
            raise DatabaseUnavailable(
                "the database restarted before this batch's writes were known to be on its disk; "
                "the batch must be delivered again"
            )

    # ---- recall ----------------------------------------------------------------------

    def _check_query(self, query: str, limit: int | None) -> tuple[str, int]:
        query = query.strip()
        if not query:
            raise InvalidInput("query is empty", field="query")
        if "\x00" in query:
            raise InvalidInput("query contains a NUL character (U+0000)", field="query")
        if (escape := lone_surrogate(query)) is not None:
            raise InvalidInput(f"query contains a lone surrogate ({escape}), which is not text", field="query")
        if not has_visible(query):
            raise InvalidInput("query has no visible character", field="query")
        if len(query) > self.settings.max_query_chars:
            raise InputTooLarge(
                f"query is {len(query)} characters; the limit is {self.settings.max_query_chars}", field="query"
            )
        limit = self.settings.default_limit if limit is None else limit
        if not 1 <= limit <= MAX_RECALL_LIMIT:
            raise InvalidInput(f"limit must be between 1 and {MAX_RECALL_LIMIT}, got {limit}", field="limit")
        return query, limit

    def recall(
        self,
        user_id: str,
        query: str,
        *,
        project_id: str | None = None,
        limit: int | None = None,
        now: dt.datetime | None = None,
        options: RecallOptions | None = None,
        query_vector: np.ndarray | None = None,
        filters: MemoryFilters | None = None,
        usage: Meter | None = None,
        consistency: Consistency = "eventual",
    ) -> RecallResult:
        """The memories most relevant to ``query`` for this user, best first, and the prompt block;
        with ``filters``, among the memories that match them only. ``consistency="strong"`` reads
        the writer when a reader endpoint is configured (see :mod:`agent_memory.db.readers`).

        ``usage``: what was already spent for this recall (a batch's share of its embedding call),
        counted with it."""
        query, limit = self._check_query(query, limit)
        options = options or self.recall_options
        if now is not None and now.tzinfo is None:
            now = now.replace(tzinfo=dt.UTC)
        with metering(usage) as meter:
            vector = self.embedder.embed_query(query) if query_vector is None else query_vector
        meter.add("recall", calls=1, characters=len(query))
        used = self._usage(meter)
        scope = Scope(
            user_id,
            project_id,
            now=now,
            include_inactive=options.include_inactive,
            filters=None if filters is None or filters.empty else filters,
        )
        k = options.overfetch * limit
        timeout_ms = self.settings.recall_statement_timeout_ms
        as_of = now or utcnow()
        legs = options.extra_legs(query, as_of)
        on_reader = self.reads.reader is not None and consistency == "eventual"
        # The recall's usage count is written by its query itself (one statement), which a
        # reader cannot run: there the count goes to the writer on its own (one more round trip).
        candidates = self.reads.run(
            lambda conn: hybrid_candidates(
                conn,
                scope,
                vector,
                query,
                k,
                statement_timeout_ms=timeout_ms,
                usage=() if on_reader else used,
                legs=legs,
            ),
            consistency=consistency,
        )
        if on_reader and used:
            self.db.run(lambda conn: record_usage(conn, user_id, used))
        reranker = self.reranker
        chosen = rank_candidates(
            candidates,
            options,
            limit=limit,
            now=as_of,
            query=query,
            windows=legs.windows,
            rerank=reranker.scores if reranker is not None else None,
        )
        if self.settings.min_score > 0:
            chosen = [(c, score) for c, score in chosen if score >= self.settings.min_score]
        memories = [
            RecalledMemory(
                id=c.id,
                content=c.content,
                category=c.category,
                score=round(score, 4),
                created_at=c.created_at,
                is_evergreen=c.is_evergreen,
                project_id=c.project_id,
                metadata=c.metadata,
                injection=list(c.injection),
            )
            for c, score in chosen
        ]
        block = build_memory_block(
            (m.content for m in memories), max_chars=self.settings.max_block_chars, guard=self.settings.prompt_guard
        )
        return RecallResult(memories=memories, prompt_block=block, query=query)

    def recall_batch(
        self, queries: Sequence[RecallQuery], *, limit: int | None = None
    ) -> list[RecallResult | InvalidInput]:
        """Recall for many queries, their texts embedded in one batch; per query its result, or
        the InvalidInput that refused it (the others still run)."""
        if not queries:
            return []
        texts = [q.query.strip() or " " for q in queries]
        with metering() as batch:
            vectors = self.embedder.embed(texts)
        total = sum(len(t) for t in texts)
        results: list[RecallResult | InvalidInput] = []
        for query, text, vector in zip(queries, texts, vectors, strict=True):
            try:
                results.append(
                    self.recall(
                        query.user_id,
                        query.query,
                        project_id=query.project_id,
                        limit=query.limit or limit,
                        now=query.now,
                        query_vector=vector,
                        filters=query.filters,
                        usage=batch.share(len(text) / total),
                    )
                )
            except InvalidInput as exc:
                results.append(exc)
        return results

    # ---- listing and forgetting ------------------------------------------------------

    def list_memories(
        self,
        user_id: str,
        *,
        project_id: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
        include_inactive: bool = False,
        filters: MemoryFilters | None = None,
        consistency: Consistency = "eventual",
    ) -> MemoryPage:
        """A page of the user's memories (those matching ``filters``), newest first, and the cursor
        of the next page."""
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}, got {limit}", field="limit")
        after = pages.decode_cursor(cursor) if cursor else None
        narrowed = None if filters is None or filters.empty else filters
        scope = Scope(user_id, project_id, include_inactive=include_inactive, filters=narrowed)
        found = self.reads.run(
            lambda conn: queries.list_memories(conn, scope, limit=limit + 1, after=after), consistency=consistency
        )
        next_cursor = pages.encode_cursor(found[limit - 1]) if len(found) > limit else None
        return MemoryPage(memories=found[:limit], next_cursor=next_cursor)

    def get_memory(self, user_id: str, memory_id: uuid.UUID, *, consistency: Consistency = "eventual") -> Memory:
        """The user's memory with this id, live or not; NotFound when the user has none (another
        user's id looks the same as no memory at all)."""
        found: Memory | None = self.reads.run(
            lambda conn: edits.get_memory(conn, user_id, memory_id), consistency=consistency
        )
        if found is None:
            raise NotFound("no memory with this id for this user")
        return found

    def update_memory(
        self, user_id: str, memory_id: uuid.UUID, changes: MemoryChanges, *, source: str | None = None
    ) -> Memory:
        """Change one memory in place and return it as it now is; the history records an
        'updated' event with ``source`` and the previous values. A new content is re-embedded
        and re-hashed; Conflict (409, field ``content``) when another memory of the same scope
        already states it; NotFound as :meth:`get_memory`. No change given: the memory as it is."""
        values = changes.changed()
        if not values:
            return self.get_memory(user_id, memory_id, consistency="strong")  # as an update would answer
        vector = None
        used: list[UsageRow] = []
        if "content" in values:
            if len(values["content"]) > self.settings.max_memory_chars:
                raise InputTooLarge(
                    f"memory content is {len(values['content'])} characters; "
                    f"the limit is {self.settings.max_memory_chars}",
                    field="content",
                )
            with metering() as meter:
                self._redact_change(user_id, memory_id, values)
                vector = self.embedder.embed([values["content"]])[0]
            meter.add("write", calls=1, items=1)
            used = self._usage(meter)
        if values.get("metadata"):
            check_metadata(self.settings, values["metadata"], "metadata")
        updated: Memory | None = self.db.run(
            lambda conn: edits.update_memory(
                conn, user_id, memory_id, values, embedding=vector, source=source, usage=used
            )
        )
        if updated is None:
            raise NotFound("no memory with this id for this user")
        logger.info("updated", extra={"user_id": user_id, "fields": sorted(values), "source": source})
        return updated

    def _redact_change(self, user_id: str, memory_id: uuid.UUID, values: dict[str, Any]) -> None:
        """A new content passes the write path's redaction (AGENT_MEMORY_PII) like any other write:
        placeholders in the text, what was removed in the metadata; refused in drop mode."""
        if not self.redactor.enabled:
            return
        base = values.get("metadata") if "metadata" in values else None
        redacted = self.redactor.apply([NewMemory(content=values["content"], metadata=base or {})])
        if not redacted.memories:
            raise InvalidInput(
                "content holds personal data this deployment does not store (AGENT_MEMORY_PII)", field="content"
            )
        memory = redacted.memories[0]
        values["content"] = memory.content
        if redacted.redacted:
            if "metadata" not in values:
                base = self.get_memory(user_id, memory_id).metadata
            values["metadata"] = {**(base or {}), REDACTED_KEY: memory.metadata[REDACTED_KEY]}

    def export_memories(
        self,
        user_id: str,
        *,
        history: bool = False,
        limit: int = DEFAULT_PAGE,
        cursor: str | None = None,
        consistency: Consistency = "eventual",
    ) -> ExportPage:
        """A page of everything the user has (superseded and expired memories too), newest first,
        as import lines (``agent-memory import`` restores them: same ids, timestamps and
        recall); with ``history``, each line carries its memory's recorded changes."""
        page = self.list_memories(user_id, limit=limit, cursor=cursor, include_inactive=True, consistency=consistency)
        events: dict[uuid.UUID, list[MemoryEvent]] = {}
        if history and page.memories:
            ids = [m.id for m in page.memories]
            found: list[MemoryEvent] = self.reads.run(
                lambda conn: edits.histories(conn, user_id, ids), consistency=consistency
            )
            for event in found:
                events.setdefault(event.memory_id, []).append(event)
        lines = [export_line(m, events.get(m.id, []) if history else None) for m in page.memories]
        return ExportPage(lines=lines, next_cursor=page.next_cursor)

    def forget_memory(self, user_id: str, memory_id: uuid.UUID, *, source: str | None = None) -> bool:
        """Delete one memory of the user; False when the user has no memory with that id."""
        deleted = bool(self.db.run(lambda conn: queries.delete_memory(conn, user_id, memory_id, source=source)))
        logger.info("forgot", extra={"user_id": user_id, "deleted": int(deleted), "one": True})
        if deleted:
            self._publish_changes(user_id)
        return deleted

    def forget_user(self, user_id: str, *, requested_by: str = "service") -> ErasureReceipt:
        """Delete everything stored about the user (memories, history, message receipts, usage,
        entity links) and return the erasure receipt stored with the deletion, in one transaction
        (see :mod:`agent_memory.erasure`). ``requested_by``: who asked, for the receipt; never
        the user's own id."""
        receipt: ErasureReceipt = self.db.run(
            lambda conn: erasing.erase_user(conn, user_id, requested_by=requested_by), retry=False
        )
        # The receipt's id, not the user's: logs outlive the erasure.
        logger.info("erased", extra={"erasure_id": str(receipt.id), "deleted": receipt.deleted.model_dump()})
        self._publish_changes(user_id)
        return receipt

    def erasure(self, receipt_id: uuid.UUID, *, user_id: str | None = None) -> ErasureReceipt:
        """A stored erasure receipt; with ``user_id`` (a JWT caller), only that user's own."""
        found: ErasureReceipt | None = self.db.run(lambda conn: erasing.get_receipt(conn, receipt_id, user_id=user_id))
        if found is None:
            raise NotFound("no erasure receipt with this id")
        return found

    def erasures_of(self, user_id: str) -> list[ErasureReceipt]:
        """Every erasure receipt of this user id, oldest first (matched by the keyed hash)."""
        found: list[ErasureReceipt] = self.db.run(lambda conn: erasing.receipts_for(conn, user_id))
        return found

    # ---- usage and change events -----------------------------------------------------

    def usage(self, user_id: str, *, start: dt.date | None = None, end: dt.date | None = None) -> UsageReport:
        """The user's usage per day, kind and model from ``start`` to ``end`` (UTC days, both
        included; default the last 30), with its cost at the price table's prices."""
        start, end = self._usage_period(start, end)
        found = self.db.run(lambda conn: usage_queries.user_usage(conn, user_id, start, end))
        lines = [UsageLine(**row, estimated_usd=_cost(row)) for row in found]
        return UsageReport(
            user_id=user_id,
            start=start,
            end=end,
            lines=lines,
            totals=usage_totals(lines),
            estimated_usd=round(sum(line.estimated_usd for line in lines), 6),
            prices=f"{costs.DEFAULT_PRICES.region} list prices of {costs.DEFAULT_PRICES.as_of}",
        )

    def usage_by_user(self, *, start: dt.date | None = None, end: dt.date | None = None) -> list[TenantUsage]:
        """Every user's totals over the period, most expensive first (maintenance role: the owner's
        credentials, like purge)."""
        start, end = self._usage_period(start, end)
        found = self.db.run(lambda conn: usage_queries.all_usage(conn, start, end))
        tenants: dict[str, TenantUsage] = {}
        for row in found:
            user = row.pop("user_id")
            tenant = tenants.setdefault(
                user, TenantUsage(user_id=user, calls={}, input_tokens=0, output_tokens=0, estimated_usd=0.0)
            )
            tenant.calls[row["kind"]] = tenant.calls.get(row["kind"], 0) + int(row["calls"])
            tenant.input_tokens += int(row["input_tokens"])
            tenant.output_tokens += int(row["output_tokens"])
            tenant.estimated_usd = round(tenant.estimated_usd + _cost(row), 6)
        return sorted(tenants.values(), key=lambda t: (-t.estimated_usd, t.user_id))

    @staticmethod
    def _usage_period(start: dt.date | None, end: dt.date | None) -> tuple[dt.date, dt.date]:
        end = end or utcnow().date()
        if start is None:
            try:
                start = end - dt.timedelta(days=USAGE_DEFAULT_DAYS - 1)
            except OverflowError:  # an end in the first days of year 1
                start = dt.date.min
        if start > end:
            raise InvalidInput(f"from ({start}) is after to ({end})", field="from")
        if (end - start).days >= USAGE_MAX_DAYS:
            raise InvalidInput(f"at most {USAGE_MAX_DAYS} days at once", field="from")
        return start, end

    def drain_events(self, *, user_id: str | None = None, max_batches: int = 100) -> DrainResult:
        """Publish the change events waiting in the outbox (everyone's by default): the scheduled drain."""
        if not self.settings.event_bus:
            raise ConfigurationError("no change events: AGENT_MEMORY_EVENT_BUS is not set")
        return drain_outbox(self.db, self.publisher, user_id=user_id, max_batches=max_batches)

    def events_status(self, *, user_id: str | None = None) -> OutboxStatus:
        """How many change events wait in the outbox, since when, and the latest publish error."""
        return outbox_status(self.db, user_id=user_id)

    def history(
        self,
        user_id: str,
        memory_id: uuid.UUID | None = None,
        *,
        limit: int = 1000,
        consistency: Consistency = "eventual",
    ) -> list[MemoryEvent]:
        """Every recorded change of one memory (or of all the user's), oldest first."""
        if not 1 <= limit <= MAX_HISTORY:
            raise InvalidInput(f"limit must be between 1 and {MAX_HISTORY}, got {limit}", field="limit")
        events: list[MemoryEvent] = self.reads.run(
            lambda conn: queries.history(conn, user_id, memory_id, limit=limit), consistency=consistency
        )
        return events

    # ---- administration --------------------------------------------------------------

    def migrate(self) -> MigrateResult:
        """Apply pending migrations (idempotent), then set up the application's database roles."""
        return migrate(self.settings, self.embedder)

    def reembed(
        self,
        *,
        batch_size: int = 256,
        restart: bool = False,
        max_batches: int | None = None,
        progress: Callable[[int], None] | None = None,
        reconnect_s: float = reembedding.RECONNECT_S,
    ) -> reembedding.ReembedResult:
        """Move the store to the configured embedder without taking reads down
        (see :mod:`agent_memory.schema.reembed`)."""
        result = reembedding.reembed(
            self.settings,
            self.embedder,
            batch_size=batch_size,
            restart=restart,
            max_batches=max_batches,
            progress=progress,
            reconnect_s=reconnect_s,
        )
        if result.switched:
            self.close()  # reconnect: this process now uses the new column
        return result

    def link_entities(
        self,
        *,
        batch_size: int = 500,
        restart: bool = False,
        max_seconds: float | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> entity_links.EntityLinkResult:
        """Link the memories stored before migration 0007 to the entities they name; resumable
        (see :mod:`agent_memory.schema.entity_links`). Needs the owner's credentials."""
        return entity_links.link_entities(
            self.settings, batch_size=batch_size, restart=restart, max_seconds=max_seconds, progress=progress
        )

    def refresh_dense_users(
        self, *, min_memories: int | None = None, max_seconds: float | None = None, concurrently: bool = True
    ) -> dense_users.DenseUsersReport:
        """Give users with many memories their own indexes, and take them from those who no longer
        have many (see :mod:`agent_memory.schema.dense_users`). Needs the owner's credentials."""
        return dense_users.refresh(
            self.settings, min_memories=min_memories, max_seconds=max_seconds, concurrently=concurrently
        )

    def drop_previous_vectors(self) -> bool:
        """After every process runs the new model: drop the previous model's vectors."""
        return reembedding.drop_previous_model(self.settings)

    def purge(self, *, now: dt.datetime | None = None, superseded_days: float | None = None) -> dict[str, int]:
        """Remove expired memories and those superseded longer ago than the retention."""
        now = now or utcnow()
        days = self.settings.superseded_retention_days if superseded_days is None else superseded_days
        expired, superseded = self.db.run(
            lambda conn: queries.purge(conn, now=now, superseded_before=now - dt.timedelta(days=days))
        )
        logger.info("purged", extra={"expired": expired, "superseded": superseded})
        self._publish_changes(None)
        return {"expired": expired, "superseded": superseded}

    def similarities(self, text: str, others: Sequence[str]) -> list[float]:
        """Cosine similarity of ``text`` to each of ``others`` with the configured embedder (no
        database): how update on write's guard (supersede_min_similarity) sees a pair."""
        vectors = self.embedder.embed([normalize_content(t) for t in (text, *others)])
        return [float(np.dot(vectors[0], v)) for v in vectors[1:]]


def _cost(row: dict[str, Any]) -> float:
    """One usage row at the price table's prices (see :func:`agent_memory.costs.usage_cost`)."""
    return round(
        costs.usage_cost(
            row["kind"],
            row["model"],
            calls=int(row["calls"]),
            input_tokens=int(row["input_tokens"]),
            output_tokens=int(row["output_tokens"]),
            characters=int(row["characters"]),
            items=int(row["items"]),
        ),
        6,
    )


_service: MemoryService | None = None
_service_lock = threading.Lock()


def get_service() -> MemoryService:
    """The process-wide service (settings from the environment), built on first call."""
    global _service
    with _service_lock:
        if _service is None:
            _service = MemoryService(get_settings())
        return _service


def set_service(service: MemoryService | None) -> MemoryService | None:
    """Make ``service`` the process-wide one (a local host such as ``agent-memory serve`` runs the
    handlers on the service it built from its own settings); None forgets it. Returns the previous one."""
    global _service
    with _service_lock:
        previous, _service = _service, service
    return previous
