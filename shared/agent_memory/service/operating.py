"""Administration: migrations, re-embedding, purge, similarity checks."""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from agent_memory.ingest.consolidation import ConsolidationReport, near_pairs, plan_merges, plan_supersessions
from agent_memory.service.base import ServiceBase, utcnow
from agent_memory.store import consolidation
from agent_memory.store import indexes as dense_users
from agent_memory.store import memories as queries
from agent_memory.store import reembed as reembedding
from agent_memory.store.setup import MigrateResult, migrate
from agent_memory_contract.models import (
    normalize_content,
)

logger = logging.getLogger(__name__)

# Per memory, the nearest memories consolidation reads for a same-attribute update (as the write path).
UPDATE_NEIGHBOURS = 8


class Operating(ServiceBase):
    """Operating the store: migrate, re-embed, purge."""

    def migrate(self) -> MigrateResult:
        """Apply pending migrations (idempotent), then set up the application's database roles."""
        return migrate(self.settings, dimension=self.embedder.dimension, fingerprint=self.embedder.fingerprint)

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
        (see :mod:`agent_memory.store.reembed`)."""
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

    def refresh_dense_users(
        self, *, min_memories: int | None = None, max_seconds: float | None = None, concurrently: bool = True
    ) -> dense_users.DenseUsersReport:
        """Give users with many memories their own indexes, and take them from those who no longer
        have many (see :mod:`agent_memory.store.indexes`). Needs the owner's credentials."""
        return dense_users.refresh(
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
        (:mod:`agent_memory.ingest.consolidation`): the duplicate is marked merged into the older
        memory, in the history under the run's write id. Users in id order from ``cursor``, else
        from where the last run stopped (the store's checkpoint; ``restart``: from the first);
        no new user is started after ``max_seconds``, and the checkpoint moves after each user,
        so an interrupted run loses nothing. ``threshold``: the cosine similarity a close pair
        needs before the same-fact check (default AGENT_MEMORY_NEAR_DUPLICATE_THRESHOLD)."""
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
                found, merged, superseded = self._consolidate_user(user_id, limit, write_id)
                report.users += 1
                report.duplicates_found += found
                report.merged += merged
                report.superseded += superseded
                after = user_id
                self.db.run(partial(consolidation.write_checkpoint, after=after))
            if len(users) < users_per_batch:
                break
        self.db.run(partial(consolidation.write_checkpoint, after=""))
        logger.info("consolidated", extra={"report": report.model_dump(mode="json")})
        self._publish_changes(None)
        return report

    def _consolidate_user(self, user_id: str, threshold: float, write_id: uuid.UUID) -> tuple[int, int, int]:
        live = self.db.run(lambda conn: consolidation.live_memories(conn, user_id))
        found, merges = plan_merges(live, near_pairs(live, threshold=threshold), threshold=threshold)
        done = self.db.run(lambda conn: consolidation.merge(conn, user_id, merges, write_id=write_id)) if merges else []
        stale: list[tuple[uuid.UUID, uuid.UUID]] = []
        update = self.settings.same_attribute_threshold
        if update <= 1.0:
            close = near_pairs(live, threshold=update, neighbours=UPDATE_NEIGHBOURS)
            stale = plan_supersessions(live, close, merged=[dup for dup, _ in merges])
        superseded = (
            self.db.run(lambda conn: consolidation.supersede(conn, user_id, stale, write_id=write_id)) if stale else []
        )
        return found, len(done), len(superseded)

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
