"""The service's shared state: settings, and the embedder, extractor, reranker, database and
read router built on first use; change events published after a commit."""

from __future__ import annotations

import datetime as dt
import logging
from functools import cached_property

from agent_memory.config import Settings
from agent_memory.embeddings import Embedder, create_embedder
from agent_memory.extraction import Extractor, create_extractor
from agent_memory.ingest.redaction import Redactor
from agent_memory.providers.aws import clear_secret_cache
from agent_memory.recall.plan import RecallPlan
from agent_memory.rerank import Reranker, create_reranker
from agent_memory.service.drain import Publish, drain_outbox
from agent_memory.store.connection import Connection, Database, VectorSchema
from agent_memory.store.migrate import prepare_connection
from agent_memory.store.readers import ReadRouter, reader_settings
from agent_memory.usage import Meter, UsageRow

logger = logging.getLogger(__name__)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class ServiceBase:
    """What every part of the service shares: the settings and the lazily built collaborators.

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
        the writer, :attr:`db` (see :mod:`agent_memory.store.readers`)."""
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
    def recall_plan(self) -> RecallPlan:
        """How recalls find and rank, from the settings once (the benchmarks pass their own)."""
        return RecallPlan.from_settings(self.settings)

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
