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

import numpy as np

from agent_memory.config import Settings, get_settings
from agent_memory.db.connection import Connection, Database, VectorSchema
from agent_memory.db.scope import Scope
from agent_memory.embeddings import Embedder, create_embedder
from agent_memory.errors import InputTooLarge, InvalidInput, NotFound
from agent_memory.extraction import Extractor, create_extractor
from agent_memory.ingest import conversation, importing, restore, writes
from agent_memory.ingest.rows import MemoryRow, build_rows, check_lengths, check_new_memories, embed_unique
from agent_memory.manage import edits, pages, queries
from agent_memory.models import (
    DEFAULT_PAGE,
    MAX_HISTORY,
    MAX_PAGE,
    MAX_RECALL_LIMIT,
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
from agent_memory.recall.block import build_memory_block
from agent_memory.recall.candidates import hybrid_candidates
from agent_memory.recall.ranking import RecallOptions, rank_candidates
from agent_memory.rerank import Reranker, create_reranker
from agent_memory.schema import entity_links
from agent_memory.schema import reembed as reembedding
from agent_memory.schema.migrate import prepare_connection
from agent_memory.schema.setup import MigrateResult, migrate

logger = logging.getLogger(__name__)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _store_rows(
    conn: Connection, *, rows: list[MemoryRow], restoring: bool, source: str | None
) -> list[writes.WriteOutcome]:
    if restoring:
        return restore.restore_memories(conn, rows, source=source)
    return writes.upsert_memories(conn, rows)


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
        reranker: Reranker | None = None,
    ) -> None:
        self.settings = settings
        self._embedder = embedder
        self._database = database
        self._extractor = extractor
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

    def close(self) -> None:
        if self._database is not None:
            self._database.close()

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
        vectors = embed_unique(self.embedder, [m.content for m in memories])
        rows, positions = build_rows(
            [user_id] * len(memories), memories, vectors, project_id=project_id, source=source, observed_at=observed_at
        )
        threshold = self.settings.near_duplicate_threshold
        outcomes = self.db.run(lambda conn: writes.upsert_memories(conn, rows, near_duplicate_threshold=threshold))
        created = sum(1 for o in outcomes if o.action == "created")
        logger.info(
            "remembered",
            # "created" is a LogRecord attribute: logging refuses it as an extra key.
            extra={"user_id": user_id, "memories": len(rows), "memories_created": created, "source": source},
        )
        return StoredIds(ids=[outcomes[p].id for p in positions], created=created, refreshed=len(rows) - created)

    def import_memories(self, lines: Sequence[ImportLine], *, source: str | None = "import") -> StoredIds:
        """Bulk load (many users at once): one embedding pass and one upsert statement per user.

        Lines are taken as given: exact duplicates fold, near duplicates are kept.
        """
        if not lines:
            return StoredIds(ids=[], created=0, refreshed=0)
        check_lengths(self.settings, lines, "lines")
        vectors = embed_unique(self.embedder, [line.content for line in lines])
        # Lines with an id (an export) are restored as they were; the others are upserted.
        restored = [i for i, line in enumerate(lines) if line.id is not None]
        upserted = [i for i, line in enumerate(lines) if line.id is None]
        ids: list[uuid.UUID | None] = [None] * len(lines)
        created = refreshed = 0
        for indexes, restoring in ((upserted, False), (restored, True)):
            if not indexes:
                continue
            part = [lines[i] for i in indexes]
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
            outcomes = self.db.run(partial(_store_rows, rows=rows, restoring=restoring, source=source))
            for i, p in zip(indexes, positions, strict=True):
                ids[i] = outcomes[p].id
            new = sum(1 for o in outcomes if o.action == "created")
            created, refreshed = created + new, refreshed + len(rows) - new
        return StoredIds(ids=[i for i in ids if i is not None], created=created, refreshed=refreshed)

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
            lines, lambda chunk: self.import_memories(chunk, source=source), report, progress=progress
        )

    def ingest_conversation(
        self, message: ConversationEnded, *, observed_at: dt.datetime | None = None
    ) -> IngestOutcome:
        """Turn one "conversation ended" message into memories: all of them or none
        (see :mod:`agent_memory.ingest.conversation`)."""
        return conversation.ingest_conversation(
            message,
            settings=self.settings,
            db=self.db,
            embedder=self.embedder,
            extractor=lambda: self.extractor,
            observed_at=observed_at,
        )

    # ---- recall ----------------------------------------------------------------------

    def _check_query(self, query: str, limit: int | None) -> tuple[str, int]:
        query = query.strip()
        if not query:
            raise InvalidInput("query is empty", field="query")
        if "\x00" in query:
            raise InvalidInput("query contains a NUL character (U+0000)", field="query")
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
    ) -> RecallResult:
        """The memories most relevant to ``query`` for this user, best first, and the prompt block;
        with ``filters``, among the memories that match them only."""
        query, limit = self._check_query(query, limit)
        options = options or self.recall_options
        if now is not None and now.tzinfo is None:
            now = now.replace(tzinfo=dt.UTC)
        vector = self.embedder.embed_query(query) if query_vector is None else query_vector
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
        candidates = self.db.run(
            lambda conn: hybrid_candidates(conn, scope, vector, query, k, statement_timeout_ms=timeout_ms, legs=legs)
        )
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
        vectors = self.embedder.embed([q.query.strip() or " " for q in queries])
        results: list[RecallResult | InvalidInput] = []
        for query, vector in zip(queries, vectors, strict=True):
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
    ) -> MemoryPage:
        """A page of the user's memories (those matching ``filters``), newest first, and the cursor
        of the next page."""
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}, got {limit}", field="limit")
        after = pages.decode_cursor(cursor) if cursor else None
        narrowed = None if filters is None or filters.empty else filters
        scope = Scope(user_id, project_id, include_inactive=include_inactive, filters=narrowed)
        found = self.db.run(lambda conn: queries.list_memories(conn, scope, limit=limit + 1, after=after))
        next_cursor = pages.encode_cursor(found[limit - 1]) if len(found) > limit else None
        return MemoryPage(memories=found[:limit], next_cursor=next_cursor)

    def get_memory(self, user_id: str, memory_id: uuid.UUID) -> Memory:
        """The user's memory with this id, live or not; NotFound when the user has none (another
        user's id looks the same as no memory at all)."""
        found: Memory | None = self.db.run(lambda conn: edits.get_memory(conn, user_id, memory_id))
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
            return self.get_memory(user_id, memory_id)
        vector = None
        if "content" in values:
            if len(values["content"]) > self.settings.max_memory_chars:
                raise InputTooLarge(
                    f"memory content is {len(values['content'])} characters; "
                    f"the limit is {self.settings.max_memory_chars}",
                    field="content",
                )
            vector = self.embedder.embed([values["content"]])[0]
        updated: Memory | None = self.db.run(
            lambda conn: edits.update_memory(conn, user_id, memory_id, values, embedding=vector, source=source)
        )
        if updated is None:
            raise NotFound("no memory with this id for this user")
        logger.info("updated", extra={"user_id": user_id, "fields": sorted(values), "source": source})
        return updated

    def export_memories(
        self, user_id: str, *, history: bool = False, limit: int = DEFAULT_PAGE, cursor: str | None = None
    ) -> ExportPage:
        """A page of everything the user has (superseded and expired memories too), newest first,
        as import lines (``agent-memory import`` restores them: same ids, timestamps and
        recall); with ``history``, each line carries its memory's recorded changes."""
        page = self.list_memories(user_id, limit=limit, cursor=cursor, include_inactive=True)
        events: dict[uuid.UUID, list[MemoryEvent]] = {}
        if history and page.memories:
            ids = [m.id for m in page.memories]
            found: list[MemoryEvent] = self.db.run(lambda conn: edits.histories(conn, user_id, ids))
            for event in found:
                events.setdefault(event.memory_id, []).append(event)
        lines = [export_line(m, events.get(m.id, []) if history else None) for m in page.memories]
        return ExportPage(lines=lines, next_cursor=page.next_cursor)

    def forget_memory(self, user_id: str, memory_id: uuid.UUID, *, source: str | None = None) -> bool:
        """Delete one memory of the user; False when the user has no memory with that id."""
        deleted = bool(self.db.run(lambda conn: queries.delete_memory(conn, user_id, memory_id, source=source)))
        logger.info("forgot", extra={"user_id": user_id, "deleted": int(deleted), "one": True})
        return deleted

    def forget_user(self, user_id: str) -> int:
        """Delete every memory of the user, their history and their message receipts; returns
        how many memories went."""
        deleted: int = self.db.run(lambda conn: queries.delete_user(conn, user_id))
        logger.info("forgot", extra={"user_id": user_id, "deleted": deleted, "one": False})
        return deleted

    def history(self, user_id: str, memory_id: uuid.UUID | None = None, *, limit: int = 1000) -> list[MemoryEvent]:
        """Every recorded change of one memory (or of all the user's), oldest first."""
        if not 1 <= limit <= MAX_HISTORY:
            raise InvalidInput(f"limit must be between 1 and {MAX_HISTORY}, got {limit}", field="limit")
        events: list[MemoryEvent] = self.db.run(lambda conn: queries.history(conn, user_id, memory_id, limit=limit))
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
        return {"expired": expired, "superseded": superseded}

    def similarities(self, text: str, others: Sequence[str]) -> list[float]:
        """Cosine similarity of ``text`` to each of ``others`` with the configured embedder (no
        database): how update on write's guard (supersede_min_similarity) sees a pair."""
        vectors = self.embedder.embed([normalize_content(t) for t in (text, *others)])
        return [float(np.dot(vectors[0], v)) for v in vectors[1:]]


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
