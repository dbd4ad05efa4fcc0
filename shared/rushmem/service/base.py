"""What :class:`~rushmem.service.memory.Memory`'s verbs and its :class:`~.operating.Admin` work
with, one :class:`Collaborators` object they share: the settings and the collaborators (embedder,
extractor, reranker, database, read router), each built on first use and then reused (one per
process / Lambda container); change events published after a commit."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

from rushmem.config import Settings
from rushmem.embeddings import Embedder, create_embedder
from rushmem.providers.aws import clear_secret_cache
from rushmem.providers.ledger import ErasureLedger, open_ledger
from rushmem.recall.plan import RecallPlan
from rushmem.rerank import Reranker, create_reranker
from rushmem.service.drain import Publish, drain_outbox
from rushmem.service.ledger import reapply_with
from rushmem.store.accounts.usage import write_pending_usage
from rushmem.store.engine.connection import Connection, Database, connect_failed
from rushmem.store.engine.readers import ReadRouter, reader_settings
from rushmem.store.engine.session import VectorSchema
from rushmem.store.schema.migrate import prepare_connection
from rushmem.usage import Meter, PendingUsage, UsageBuffer, UsageRow
from rushmem_contract.errors import DatabaseUnavailable

if TYPE_CHECKING:  # the write path's steps, imported where it first builds them (not by a recall)
    from rushmem.extraction import Extractor
    from rushmem.ingest.redaction import Redactor

logger = logging.getLogger(__name__)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Collaborators:
    """The collaborators are cached properties: one given to the constructor stands in for the
    built one, and forgetting one (``vars(self).pop``) has it built again on next use."""

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
        # The erasures the first connection re-applied from the ledger (see ``db``), until reported.
        self.reapplied_on_connect: list[uuid.UUID] = []
        given = {
            "embedder": embedder,
            "db": database,
            "extractor": extractor,
            "publisher": publisher,
            "reranker": reranker,
        }
        vars(self).update({name: value for name, value in given.items() if value is not None})

    def built(self, name: str) -> Any:
        """The collaborator ``name`` if it was built (or given), without building it."""
        return vars(self).get(name)

    @cached_property
    def embedder(self) -> Embedder:
        return create_embedder(self.settings)

    @cached_property
    def extractor(self) -> Extractor:
        from rushmem.extraction import create_extractor

        return create_extractor(self.settings)

    @cached_property
    def reranker(self) -> Reranker | None:
        """RUSHMEM_RERANK_PROVIDER's reranker, None when there is none."""
        return create_reranker(self.settings)

    @cached_property
    def db(self) -> Database:
        """The writer's connection. A process that migrates on start (RUSHMEM_AUTO_MIGRATE, as
        locally) also re-applies the erasure ledger here, before any reader or writer uses the
        database: a database restored from before an erasure never answers with the erased user."""
        database = Database(self.settings, setup=self._prepare)
        if self.settings.auto_migrate and self.ledger is not None:
            try:
                self.reapplied_on_connect = reapply_with(database, self.ledger)
            except BaseException:
                database.close()  # not kept: the next use tries again, and serves nothing meanwhile
                raise
        return database

    @cached_property
    def ledger(self) -> ErasureLedger | None:
        """Where erasures are recorded outside the database (RUSHMEM_ERASURE_LEDGER; None: nowhere)."""
        return open_ledger(self.settings.resolved_erasure_ledger())

    @cached_property
    def reads(self) -> ReadRouter:
        """Where reads go: the reader endpoint when one is configured, else (and as its fallback)
        the writer (see :mod:`rushmem.store.engine.readers`)."""
        settings = reader_settings(self.settings)
        reader = None
        if settings is not None:  # a replica is read-only: its connection never migrates
            reader = Database(
                settings, setup=partial(self._prepare, reader=True), application_name="agent-memory-reader"
            )
        return ReadRouter(
            self.db,
            reader,
            retry_after_s=self.settings.db_reader_retry_after_s,
            deadline_s=self.settings.db_read_deadline_s,
            max_lag_s=self.settings.db_reader_max_lag_s,
            lag_check_s=self.settings.db_reader_lag_check_s,
            read_your_writes_s=self.settings.read_your_writes_s,
        )

    def _prepare(self, conn: Connection, *, reader: bool = False) -> VectorSchema:
        return prepare_connection(
            conn,
            dimension=self.embedder.dimension,
            fingerprint=self.embedder.fingerprint,
            migrate=self.settings.auto_migrate and not reader,
            role=self.settings.effective_db_role(),
        )

    @cached_property
    def recall_plan(self) -> RecallPlan:
        """How recalls find and rank, from the settings once (the benchmarks pass their own)."""
        return RecallPlan.from_settings(self.settings)

    @cached_property
    def redactor(self) -> Redactor:
        """The write path's personal-data step (RUSHMEM_PII; off by default)."""
        from rushmem.ingest.redaction import Redactor
        from rushmem.providers.comprehend import pii_detectors

        return Redactor(self.settings.pii, pii_detectors(self.settings))

    @cached_property
    def publisher(self) -> Publish:
        """Puts change events on RUSHMEM_EVENT_BUS."""
        from rushmem.providers.eventbridge import EventBridgePublisher

        return EventBridgePublisher.from_settings(self.settings).publish

    def usage(self, meter: Meter) -> list[UsageRow]:
        return meter.rows() if self.settings.usage_metering else []

    # ---- usage counted in the container (reads on a reader endpoint) -------------------------

    @cached_property
    def usage_buffer(self) -> UsageBuffer:
        """Counts of reads a reader endpoint served, written to the writer in batches. Written under
        the read deadline: a writer that hangs must not hold the writer's connection (and the reads
        that fall back to it) with it."""

        def write(pending: list[PendingUsage]) -> None:
            self.db.run(lambda conn: write_pending_usage(conn, pending), deadline_s=self.settings.db_read_deadline_s)

        return UsageBuffer(
            max_pending=self.settings.usage_flush_max_pending,
            max_age_s=self.settings.usage_flush_interval_s,
            write=write,
            kept=lambda exc: isinstance(exc, DatabaseUnavailable) and connect_failed(exc),
        )

    def flush_waiting_usage(self) -> None:
        """The usage counts waiting in this container written (best effort): before usage is read
        back, after a commit (the writer just answered), before the connections close."""
        buffer: UsageBuffer | None = self.built("usage_buffer")
        if buffer is not None and len(buffer) > 0:
            buffer.flush_quietly()

    def publish_changes(self, user_id: str | None) -> None:
        """After a commit: put the changes it queued on the bus, and write the usage counts waiting in
        the container (the writer just answered). Never fails the write: what is not published now
        stays in the outbox for the next drain (the next write, or the scheduled one). The user's
        reads go to the writer for a while (read-your-writes, where a reader is configured)."""
        if user_id is not None:
            self.reads.wrote(user_id)  # building the router does no I/O
        self.flush_waiting_usage()
        if not self.settings.event_bus:
            return
        # Through the Data API the scheduled drain is off (it would wake a paused cluster every 5
        # minutes): each write, while the cluster is awake, also sends what earlier ones left behind.
        everyone = user_id is None or self.settings.uses_data_api
        try:
            drain_outbox(
                self.db,
                self.publisher,
                user_id=None if everyone else user_id,
                max_batches=5 if user_id is None else 1,
            )
        except Exception:
            logger.warning("change events not published after commit; the outbox keeps them", exc_info=True)

    def close(self) -> None:
        """Write the usage counts the container keeps (best effort), then close the database
        connections (they are opened again on next use)."""
        self.flush_waiting_usage()
        for name in ("db", "reads"):
            if (built := self.built(name)) is not None:
                built.close()

    def release_secrets(self) -> None:
        """Close the database connections (each logged in with a password or an IAM token), forget
        cached secrets and the providers that hold one (their ``api_key_setting``); all are rebuilt on first use."""
        self.close()
        clear_secret_cache()
        for name in ("embedder", "extractor", "reranker"):
            if getattr(self.built(name), "api_key_setting", None):
                vars(self).pop(name)
