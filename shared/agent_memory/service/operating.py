"""Administration: migrations, re-embedding, purge, similarity checks."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Sequence

import numpy as np

from agent_memory.service.base import ServiceBase, utcnow
from agent_memory.store import indexes as dense_users
from agent_memory.store import memories as queries
from agent_memory.store import reembed as reembedding
from agent_memory.store.setup import MigrateResult, migrate
from agent_memory_contract.models import (
    normalize_content,
)

logger = logging.getLogger(__name__)


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
