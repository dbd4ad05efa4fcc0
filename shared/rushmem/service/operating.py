"""Operating the store behind a :class:`~rushmem.service.memory.Memory`: :class:`Admin`, on
the collaborators the memory's verbs use (:class:`~.base.Collaborators`), not on the memory itself."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from rushmem.config import Settings
from rushmem.embeddings import Embedder
from rushmem.ingest import importing
from rushmem.ingest.consolidation import ConsolidationReport, near_pairs, plan_merges, plan_supersessions
from rushmem.ingest.rows import check_lengths
from rushmem.recall.plan import RecallPlan
from rushmem.rerank import Reranker
from rushmem.service.accounting import tenant_totals, usage_period
from rushmem.service.base import Collaborators, utcnow
from rushmem.service.drain import DrainResult, OutboxStatus, drain_outbox, outbox_status
from rushmem.service.ledger import reapply_with
from rushmem.store.accounts.usage import all_usage
from rushmem.store.engine.connection import Database
from rushmem.store.engine.readers import ReadRouter
from rushmem.store.indexes import partitions
from rushmem.store.memories import catalog, consolidation, proposals
from rushmem.store.schema import reembed
from rushmem.store.schema.setup import MigrateResult, migrate
from rushmem_contract.errors import ConfigurationError
from rushmem_contract.models import StoredIds, normalize_content
from rushmem_contract.schemas import TenantUsage

if TYPE_CHECKING:
    from rushmem.extraction import Extractor  # built by the write path, not imported by a recall
    from rushmem.providers.lifecycle import ModelCheck

logger = logging.getLogger(__name__)

# Per memory, the nearest memories consolidation reads for a same-attribute update (as the write path).
UPDATE_NEIGHBOURS = 8


class Admin:
    """``memory.admin``: migrations, re-embedding, dense users' indexes, consolidation, purge, bulk
    import, every tenant's usage, the change-event outbox, and the memory's collaborators themselves
    (for warm-ups, health checks, benchmarks and tests)."""

    def __init__(
        self,
        parts: Collaborators,
        import_lines: Callable[..., StoredIds],  # Memory.import_: each line in its user's cell
        *,
        release_secrets: Callable[[], None] | None = None,
    ) -> None:
        self._parts = parts
        self._import_lines = import_lines
        self._release_secrets = release_secrets or parts.release_secrets

    # ---- the collaborators (built on first use) ---------------------------------------

    @property
    def settings(self) -> Settings:
        return self._parts.settings

    @property
    def embedder(self) -> Embedder:
        return self._parts.embedder

    @property
    def extractor(self) -> Extractor:
        return self._parts.extractor

    @property
    def reranker(self) -> Reranker | None:
        return self._parts.reranker

    @property
    def db(self) -> Database:
        """The writer's connection."""
        return self._parts.db

    @property
    def reads(self) -> ReadRouter:
        """Where reads go (the reader endpoint when configured, else the writer)."""
        return self._parts.reads

    @property
    def recall_plan(self) -> RecallPlan:
        return self._parts.recall_plan

    def reader_fallbacks(self) -> int:
        """Reads the writer served because the reader failed, since the last call (a metric)."""
        reads: ReadRouter | None = self._parts.built("reads")
        return reads.take_fallbacks() if reads is not None else 0

    @property
    def rerank_fallbacks(self) -> int:
        """Recalls of this process whose reranker failed (they kept the fused order)."""
        reranker: Reranker | None = self._parts.built("reranker")
        return reranker.fallbacks if reranker is not None else 0

    def flush_usage(self) -> int:
        """Write the usage counts this container keeps (reads on a reader endpoint) now; how many."""
        return self._parts.usage_buffer.flush()

    def release_secrets(self) -> None:
        """Close connections, forget cached secrets and API-keyed providers: before a SnapStart
        snapshot (see :mod:`rushmem.lifecycle`); the memory's admin does it for every cell."""
        self._release_secrets()

    # ---- operations -----------------------------------------------------------------------

    def bedrock_models(self, client: Any = None) -> list[ModelCheck]:
        """Each Bedrock model these settings call, with its lifecycle (GetFoundationModel; a
        cross-Region profile through GetInferenceProfile); ``client``: a ``bedrock`` client."""
        from rushmem.providers import lifecycle

        if not lifecycle.configured_models(self.settings):
            return []
        client = client or lifecycle.bedrock_control_client(self.settings)
        return lifecycle.check_models(client, lifecycle.configured_models(self.settings, client.meta.region_name))

    def migrate(self) -> MigrateResult:
        """Apply pending migrations (idempotent), then set up the application's database roles,
        then re-apply every erasure of the ledger this database lacks (after a restore; see
        :mod:`rushmem.service.ledger`): the deploy runs this before the functions switch to a database."""
        result = migrate(self.settings, dimension=self.embedder.dimension, fingerprint=self.embedder.fingerprint)
        reapplied = self.reapply_erasures()
        return dataclasses.replace(result, erasures_reapplied=[str(r) for r in reapplied])

    def reapply_erasures(self) -> list[uuid.UUID]:
        """Every erasure of the ledger this database lacks, done again (see :meth:`migrate`);
        a process that migrates on start has done it when it first connected (then none)."""
        ledger = self._parts.ledger
        if ledger is None:
            return []
        db = self._parts.db  # a process that migrates on start re-applies as it first connects
        done, self._parts.reapplied_on_connect = self._parts.reapplied_on_connect, []
        return [*done, *reapply_with(db, ledger)]

    def reembed(
        self,
        *,
        batch_size: int = 256,
        restart: bool = False,
        max_batches: int | None = None,
        progress: Callable[[int], None] | None = None,
        reconnect_s: float = reembed.RECONNECT_S,
    ) -> reembed.ReembedResult:
        """Move the store to the configured embedder without taking reads down
        (see :mod:`rushmem.store.schema.reembed`)."""
        result = reembed.reembed(
            self.settings,
            self.embedder,
            batch_size=batch_size,
            restart=restart,
            max_batches=max_batches,
            progress=progress,
            reconnect_s=reconnect_s,
        )
        if result.switched:
            self._parts.close()  # reconnect: this process now uses the new column
        return result

    def drop_previous_vectors(self) -> bool:
        """After every process runs the new model: drop the previous model's vectors."""
        return reembed.drop_previous_model(self.settings)

    def refresh_dense_users(
        self, *, min_memories: int | None = None, max_seconds: float | None = None, concurrently: bool = True
    ) -> partitions.DenseUsersReport:
        """Give users with many memories their own indexes, and take them from those who no longer
        have many (see :mod:`rushmem.store.indexes.partitions`). Needs the owner's credentials."""
        return partitions.refresh(
            self.settings, min_memories=min_memories, max_seconds=max_seconds, concurrently=concurrently
        )

    def consolidate(
        self,
        *,
        max_seconds: float | None = None,
        cursor: str | None = None,
        restart: bool = False,
        threshold: float | None = None,
        users_per_batch: int = 100,
    ) -> ConsolidationReport:
        """Find duplicates that slipped in (per user and scope) and merge the true ones
        (:mod:`rushmem.ingest.consolidation`): the duplicate is marked merged into the older
        memory, in the history under the run's write id. Users in id order from ``cursor``, else
        from where the last run stopped (the store's checkpoint; ``restart``: from the first);
        no new user is started after ``max_seconds``, and the checkpoint moves after each user,
        so an interrupted run loses nothing. ``threshold``: the cosine similarity a close pair
        needs before the same-fact check (default RUSHMEM_NEAR_DUPLICATE_THRESHOLD). With
        RUSHMEM_REVIEW_WRITES, the merges and supersessions are proposed for review instead."""
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        limit = self.settings.near_duplicate_threshold if threshold is None else threshold
        write_id = uuid.uuid4()
        report = ConsolidationReport(write_id=write_id)
        after = cursor if cursor is not None else "" if restart else self.db.run(consolidation.read_checkpoint)
        while True:
            users: list[str] = self.db.run(partial(consolidation.users_after, after=after, limit=users_per_batch))
            for user_id in users:
                if deadline is not None and time.monotonic() >= deadline:
                    report.done, report.cursor = False, after
                    logger.info("consolidated", extra={"report": report.model_dump(mode="json")})
                    return report
                found, merged, superseded, proposed = self._consolidate_user(user_id, limit, write_id)
                report.users += 1
                report.duplicates_found += found
                report.merged += merged
                report.superseded += superseded
                report.proposed += proposed
                after = user_id
                self.db.run(partial(consolidation.write_checkpoint, after=after))
            if len(users) < users_per_batch:
                break
        self.db.run(partial(consolidation.write_checkpoint, after=""))
        logger.info("consolidated", extra={"report": report.model_dump(mode="json")})
        self._parts.publish_changes(None)
        return report

    def _consolidate_user(self, user_id: str, threshold: float, write_id: uuid.UUID) -> tuple[int, int, int, int]:
        """(duplicates found, merged, superseded, proposed) for one user. With review on, merges and
        retirements are proposed for review instead (:mod:`rushmem.store.memories.proposals`),
        leaving out the pairs a reviewer rejected; consolidation adds no memory, so nothing of a run
        passes without review then."""
        review = self.settings.review_writes
        declined = self.db.run(lambda conn: proposals.rejected(conn, user_id)) if review else None
        live = self.db.run(lambda conn: consolidation.live_memories(conn, user_id))
        found, merges = plan_merges(
            live,
            near_pairs(live, threshold=threshold),
            threshold=threshold,
            declined=declined["merge"] if declined else (),
        )
        stale: list[tuple[uuid.UUID, uuid.UUID]] = []
        update = self.settings.same_attribute_threshold
        if update <= 1.0:
            close = near_pairs(live, threshold=update, neighbours=UPDATE_NEIGHBOURS)
            merged = [dup for dup, _ in merges]
            stale = plan_supersessions(live, close, merged=merged, declined=declined["retire"] if declined else ())
        if review:
            proposed = self.db.run(lambda conn: proposals.propose(conn, user_id, "merge", merges, write_id=write_id))
            proposed += self.db.run(lambda conn: proposals.propose(conn, user_id, "retire", stale, write_id=write_id))
            return found, 0, 0, proposed
        done = self.db.run(lambda conn: consolidation.merge(conn, user_id, merges, write_id=write_id)) if merges else []
        superseded = (
            self.db.run(lambda conn: consolidation.supersede(conn, user_id, stale, write_id=write_id)) if stale else []
        )
        return found, len(done), len(superseded), 0

    def purge(self, *, now: dt.datetime | None = None, superseded_days: float | None = None) -> dict[str, int]:
        """Remove expired memories and those superseded longer ago than the retention."""
        now = now or utcnow()
        days = self.settings.superseded_retention_days if superseded_days is None else superseded_days
        expired, superseded = self.db.run(
            lambda conn: catalog.purge(conn, now=now, superseded_before=now - dt.timedelta(days=days))
        )
        logger.info("purged", extra={"expired": expired, "superseded": superseded})
        self._parts.publish_changes(None)
        return {"expired": expired, "superseded": superseded}

    def import_jsonl(
        self,
        lines: Iterable[tuple[int, str]],
        report: importing.ImportReport,
        *,
        source: str | None = "import",
        progress: Callable[[int], None] | None = None,
    ) -> importing.ImportReport:
        """Import numbered JSON lines in chunks; lines that are invalid (alone) are skipped and
        recorded in ``report``, which stays true if a later chunk fails. The whole import is one
        write id (``report.write_id``), whatever its chunks."""
        if report.write_id is None:
            report.write_id = uuid.uuid4()
        write_id = report.write_id
        return importing.import_lines(
            lines,
            lambda chunk: self._import_lines(chunk, source=source, write_id=write_id),
            report,
            progress=progress,
            check=lambda line: check_lengths(self.settings, [line], "lines"),
        )

    def similarities(self, text: str, others: Sequence[str]) -> list[float]:
        """Cosine similarity of ``text`` to each of ``others`` with the configured embedder (no
        database): how update on write's guard (supersede_min_similarity) sees a pair."""
        vectors = self.embedder.embed([normalize_content(t) for t in (text, *others)])
        return [float(np.dot(vectors[0], v)) for v in vectors[1:]]

    # ---- accounting and change events -----------------------------------------------------

    def usage_by_user(self, *, start: dt.date | None = None, end: dt.date | None = None) -> list[TenantUsage]:
        """Every user's totals over the period, most expensive first (maintenance role: the owner's
        credentials, like purge)."""
        start, end = usage_period(start, end)
        self._parts.flush_waiting_usage()
        return tenant_totals(self.db.run(lambda conn: all_usage(conn, start, end)))

    def drain_events(self, *, user_id: str | None = None, max_batches: int = 100) -> DrainResult:
        """Publish the change events waiting in the outbox (everyone's by default): the scheduled drain."""
        if not self.settings.event_bus:
            raise ConfigurationError("no change events: RUSHMEM_EVENT_BUS is not set")
        return drain_outbox(self.db, self._parts.publisher, user_id=user_id, max_batches=max_batches)

    def events_status(self, *, user_id: str | None = None) -> OutboxStatus:
        """How many change events wait in the outbox, since when, and the latest publish error."""
        return outbox_status(self.db, user_id=user_id)
