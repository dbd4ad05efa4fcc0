"""The public API: :class:`Memory`, the verbs every door calls (the HTTP API, the queue consumer,
MCP, the CLI) and in-process Python code too, and :class:`Admin`, operating the store.

Both are thin over one :class:`~agent_memory.service.engine.Engine` (the settings, the lazily
built embedder, extractor and database, and the steps of each path), where each verb's rules are
documented. Names follow mem0's where a verb exists there (add, get, update, delete, history).
"""

from __future__ import annotations

import builtins
import contextlib
import datetime as dt
import uuid
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    import numpy as np

from agent_memory.config import Settings, get_settings
from agent_memory.embeddings import Embedder
from agent_memory.extraction import Extractor
from agent_memory.ingest.consolidation import ConsolidationReport
from agent_memory.ingest.importing import ImportReport
from agent_memory.recall.plan import RecallPlan
from agent_memory.rerank import Reranker
from agent_memory.service.drain import DrainResult, OutboxStatus, Publish
from agent_memory.service.engine import Engine
from agent_memory.service.writing import IngestBatch
from agent_memory.store import indexes as dense_users
from agent_memory.store import reembed as reembedding
from agent_memory.store.connection import Database
from agent_memory.store.readers import ReadRouter
from agent_memory.store.setup import MigrateResult
from agent_memory_contract.errors import InvalidInput
from agent_memory_contract.models import (
    DEFAULT_PAGE,
    Consistency,
    ConversationEnded,
    ExportPage,
    ImportLine,
    IngestOutcome,
    MemoryChanges,
    MemoryEvent,
    MemoryFilters,
    MemoryPage,
    MemoryRecord,
    NewMemory,
    RecallQuery,
    RecallResult,
    StoredIds,
)
from agent_memory_contract.schemas import ErasureReceipt, TenantUsage, UsageReport


class Memory:
    """Long-term memory for AI agents: add facts, recall them, read, edit and forget them.

    ``Memory()`` takes its settings from the environment (AGENT_MEMORY_*; by default an embedded
    PostgreSQL under AGENT_MEMORY_DATA_DIR and the local embedding model); ``Memory(settings)``
    or keyword overrides (``Memory(embedding_provider="hash")``) choose others. Construction does
    no I/O: the model and the database connection are made on first use, then reused, and
    :meth:`close` (or leaving a ``with Memory() as m:`` block) closes the connection.
    Operations on the store (migrations, re-embedding, indexes, purge) are on :attr:`admin`.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        database: Database | None = None,
        extractor: Extractor | None = None,
        publisher: Publish | None = None,
        reranker: Reranker | None = None,
        **overrides: Any,
    ) -> None:
        unknown = sorted(set(overrides) - set(Settings.model_fields))
        if unknown:  # the settings ignore unknown keys (the environment's): a typo here must not pass
            raise TypeError(f"Memory() got unknown settings: {', '.join(unknown)}")
        if settings is None:
            settings = Settings(**overrides) if overrides else get_settings()
        elif overrides:
            settings = Settings.model_validate({**settings.model_dump(), **overrides})
        self._engine = Engine(
            settings, embedder=embedder, database=database, extractor=extractor, publisher=publisher, reranker=reranker
        )
        self.admin = Admin(self._engine)

    @property
    def settings(self) -> Settings:
        return self._engine.settings

    # ---- writing ---------------------------------------------------------------------

    def add(
        self,
        memories: str | NewMemory | Sequence[str | NewMemory],
        *,
        user_id: str,
        project_id: str | None = None,
        source: str | None = None,
        observed_at: dt.datetime | None = None,
    ) -> StoredIds:
        """Store one fact or several for the user (ids in input order); the same fact twice is one
        memory (see :meth:`Engine.remember <agent_memory.service.writing.Writing.remember>`)."""
        items = [memories] if isinstance(memories, str | NewMemory) else memories
        new = [NewMemory(content=m) if isinstance(m, str) else m for m in items]
        return self._engine.remember(user_id, new, project_id=project_id, source=source, observed_at=observed_at)

    def ingest_conversation(
        self, message: ConversationEnded, *, observed_at: dt.datetime | None = None
    ) -> IngestOutcome:
        """Hand over a finished conversation: its facts are extracted and stored, all or none; the
        same message twice changes nothing."""
        return self._engine.ingest_conversation(message, observed_at=observed_at)

    def ingest_batch(self) -> contextlib.AbstractContextManager[IngestBatch]:
        """A queue batch of conversations, made durable once on leaving the block
        (see :meth:`~agent_memory.service.writing.Writing.ingest_batch`)."""
        return self._engine.ingest_batch()

    def import_(self, lines: Sequence[ImportLine], *, source: str | None = "import") -> StoredIds:
        """Load import lines (any users'; an export's lines are restored with their ids)."""
        return self._engine.import_memories(lines, source=source)

    # ---- reading ---------------------------------------------------------------------

    def recall(
        self,
        query: str,
        *,
        user_id: str,
        project_id: str | None = None,
        limit: int | None = None,
        now: dt.datetime | None = None,
        filters: MemoryFilters | None = None,
        plan: RecallPlan | None = None,
        consistency: Consistency = "eventual",
        query_vector: np.ndarray | None = None,
        as_of: dt.datetime | None = None,
    ) -> RecallResult:
        """The user's memories most relevant to ``query``, best first, and the prompt block.
        ``query_vector``: the query already embedded by the configured embedder (a benchmark's).
        ``as_of``: among the memories true then (valid time) instead of the current ones."""
        return self._engine.recall(
            user_id,
            query,
            project_id=project_id,
            limit=limit,
            now=now,
            filters=filters,
            plan=plan,
            consistency=consistency,
            query_vector=query_vector,
            as_of=as_of,
        )

    def recall_batch(
        self, queries: Sequence[RecallQuery], *, limit: int | None = None
    ) -> builtins.list[RecallResult | InvalidInput]:
        """Recall for many queries at once; per query its result or the error that refused it."""
        return self._engine.recall_batch(queries, limit=limit)

    def get(self, memory_id: uuid.UUID, *, user_id: str, consistency: Consistency = "eventual") -> MemoryRecord:
        """One memory of the user; NotFound when the user has none with this id."""
        return self._engine.get_memory(user_id, memory_id, consistency=consistency)

    def list(
        self,
        *,
        user_id: str,
        project_id: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
        include_inactive: bool = False,
        filters: MemoryFilters | None = None,
        consistency: Consistency = "eventual",
        as_of: dt.datetime | None = None,
    ) -> MemoryPage:
        """A page of the user's memories, newest first, and the cursor of the next page; with
        ``as_of``, those true then (valid time)."""
        return self._engine.list_memories(
            user_id,
            project_id=project_id,
            limit=limit,
            cursor=cursor,
            include_inactive=include_inactive,
            filters=filters,
            consistency=consistency,
            as_of=as_of,
        )

    def history(
        self,
        memory_id: uuid.UUID | None = None,
        *,
        user_id: str,
        limit: int = 1000,
        consistency: Consistency = "eventual",
    ) -> builtins.list[MemoryEvent]:
        """Every recorded change of one memory (or of all the user's), oldest first."""
        return self._engine.history(user_id, memory_id, limit=limit, consistency=consistency)

    def export(
        self,
        *,
        user_id: str,
        history: bool = False,
        limit: int = DEFAULT_PAGE,
        cursor: str | None = None,
        consistency: Consistency = "eventual",
        as_of: dt.datetime | None = None,
    ) -> ExportPage:
        """A page of everything the user has, as import lines (:meth:`import_` restores them);
        with ``as_of``, only what was true then."""
        return self._engine.export_memories(
            user_id, history=history, limit=limit, cursor=cursor, consistency=consistency, as_of=as_of
        )

    # ---- editing and forgetting --------------------------------------------------------

    def update(
        self, memory_id: uuid.UUID, changes: MemoryChanges, *, user_id: str, source: str | None = None
    ) -> MemoryRecord:
        """Change one memory in place and return it as it now is (the history keeps the old values)."""
        return self._engine.update_memory(user_id, memory_id, changes, source=source)

    def delete(self, memory_id: uuid.UUID, *, user_id: str, source: str | None = None) -> bool:
        """Delete one memory of the user; False when the user has no memory with that id."""
        return self._engine.forget_memory(user_id, memory_id, source=source)

    def forget_user(self, user_id: str, *, requested_by: str = "service") -> ErasureReceipt:
        """Delete everything stored about the user; the erasure's receipt."""
        return self._engine.forget_user(user_id, requested_by=requested_by)

    def erasure(self, receipt_id: uuid.UUID, *, user_id: str | None = None) -> ErasureReceipt:
        """A stored erasure receipt; with ``user_id``, only that user's own."""
        return self._engine.erasure(receipt_id, user_id=user_id)

    def erasures(self, user_id: str) -> builtins.list[ErasureReceipt]:
        """Every erasure receipt of this user id, oldest first."""
        return self._engine.erasures_of(user_id)

    # ---- accounting and lifecycle --------------------------------------------------------

    def usage(self, user_id: str, *, start: dt.date | None = None, end: dt.date | None = None) -> UsageReport:
        """The user's usage per day, kind and model, with its cost (default: the last 30 days)."""
        return self._engine.usage(user_id, start=start, end=end)

    def close(self) -> None:
        """Close the database connections (they are opened again on next use)."""
        self._engine.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Admin:
    """Operating the store behind a :class:`Memory` (``memory.admin``): migrations, re-embedding,
    entity backfill, dense users' indexes, purge, the change-event outbox, every tenant's usage,
    and the collaborators themselves (for warm-ups, health checks and tests)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    # ---- collaborators (built on first use) -------------------------------------------

    @property
    def settings(self) -> Settings:
        return self._engine.settings

    @property
    def embedder(self) -> Embedder:
        return self._engine.embedder

    @property
    def extractor(self) -> Extractor:
        return self._engine.extractor

    @property
    def reranker(self) -> Reranker | None:
        return self._engine.reranker

    @property
    def db(self) -> Database:
        """The writer's connection."""
        return self._engine.db

    @property
    def reads(self) -> ReadRouter:
        """Where reads go (the reader endpoint when configured, else the writer)."""
        return self._engine.reads

    @property
    def recall_plan(self) -> RecallPlan:
        """How recall finds and ranks, built once from the settings."""
        return self._engine.recall_plan

    def reader_fallbacks(self) -> int:
        """Reads the writer served because the reader failed, since the last call (a metric)."""
        return self._engine.reader_fallbacks()

    @property
    def rerank_fallbacks(self) -> int:
        """Recalls of this process whose reranker failed (they kept the fused order)."""
        return self._engine.rerank_fallbacks

    def release_secrets(self) -> None:
        """Close connections, forget cached secrets and API-keyed providers (before a snapshot)."""
        self._engine.release_secrets()

    # ---- operations -----------------------------------------------------------------------

    def migrate(self) -> MigrateResult:
        """Apply pending migrations (idempotent), then set up the application's database roles."""
        return self._engine.migrate()

    def reembed(
        self,
        *,
        batch_size: int = 256,
        restart: bool = False,
        max_batches: int | None = None,
        progress: Callable[[int], None] | None = None,
        reconnect_s: float = reembedding.RECONNECT_S,
    ) -> reembedding.ReembedResult:
        """Move the store to the configured embedder without taking reads down."""
        return self._engine.reembed(
            batch_size=batch_size,
            restart=restart,
            max_batches=max_batches,
            progress=progress,
            reconnect_s=reconnect_s,
        )

    def drop_previous_vectors(self) -> bool:
        """After every process runs the new model: drop the previous model's vectors."""
        return self._engine.drop_previous_vectors()

    def consolidate(
        self,
        *,
        max_seconds: float | None = None,
        cursor: str | None = None,
        restart: bool = False,
        threshold: float | None = None,
    ) -> ConsolidationReport:
        """Merge the true duplicates that slipped in, user by user, bounded in time and resumable
        (see :meth:`Engine.consolidate <agent_memory.service.operating.Operating.consolidate>`)."""
        return self._engine.consolidate(max_seconds=max_seconds, cursor=cursor, restart=restart, threshold=threshold)

    def refresh_dense_users(
        self, *, min_memories: int | None = None, max_seconds: float | None = None, concurrently: bool = True
    ) -> dense_users.DenseUsersReport:
        """Give users with many memories their own indexes (and take them back)."""
        return self._engine.refresh_dense_users(
            min_memories=min_memories, max_seconds=max_seconds, concurrently=concurrently
        )

    def purge(self, *, now: dt.datetime | None = None, superseded_days: float | None = None) -> dict[str, int]:
        """Remove expired memories and those superseded longer ago than the retention."""
        return self._engine.purge(now=now, superseded_days=superseded_days)

    def import_jsonl(
        self,
        lines: Iterable[tuple[int, str]],
        report: ImportReport,
        *,
        source: str | None = "import",
        progress: Callable[[int], None] | None = None,
    ) -> ImportReport:
        """Bulk import numbered JSON lines, skipping (and reporting) the invalid ones."""
        return self._engine.import_jsonl(lines, report, source=source, progress=progress)

    def similarities(self, text: str, others: Sequence[str]) -> list[float]:
        """Cosine similarity of ``text`` to each of ``others`` with the configured embedder."""
        return self._engine.similarities(text, others)

    def usage_by_user(self, *, start: dt.date | None = None, end: dt.date | None = None) -> list[TenantUsage]:
        """Every user's totals over the period, most expensive first."""
        return self._engine.usage_by_user(start=start, end=end)

    def drain_events(self, *, user_id: str | None = None, max_batches: int = 100) -> DrainResult:
        """Publish the change events waiting in the outbox."""
        return self._engine.drain_events(user_id=user_id, max_batches=max_batches)

    def events_status(self, *, user_id: str | None = None) -> OutboxStatus:
        """How many change events wait in the outbox, since when, and the latest publish error."""
        return self._engine.events_status(user_id=user_id)
