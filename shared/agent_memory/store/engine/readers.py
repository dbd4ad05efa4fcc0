"""Reads on a reader endpoint (Aurora replicas, an RDS Proxy read-only endpoint, a streaming
standby), with the writer as the fallback; which operations read where: docs/serverless.md
(Readers).

When the reader fails (it cannot be reached, its connection breaks, it does not answer within
``db_read_deadline_s``, a replay conflict cancels the query, or it refuses a write that should
never have been sent), the read runs again on the writer (under the same deadline), once, and
this process reads from the writer for ``db_reader_retry_after_s`` before it tries the reader
again: a failed reader costs its first request one extra attempt, not every request. A statement
timeout is not a reader failure (the writer would be as slow): it is raised.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

import psycopg

from agent_memory.config import Settings
from agent_memory.store.engine.connection import Connection, Database, DeadlineExceeded
from agent_memory_contract.errors import ConfigurationError, DatabaseUnavailable, StatementTimeout
from agent_memory_contract.models import Consistency

logger = logging.getLogger(__name__)

FallbackReason = Literal["unavailable", "deadline", "conflict", "read_only"]


def reader_settings(settings: Settings) -> Settings | None:
    """The writer's settings pointed at the reader endpoint; None when no reader is configured."""
    if settings.database_reader_url is not None:
        if settings.database_url is None:
            raise ConfigurationError("AGENT_MEMORY_DATABASE_READER_URL needs AGENT_MEMORY_DATABASE_URL (the writer)")
        return settings.model_copy(update={"database_url": settings.database_reader_url})
    if settings.db_reader_host:
        if settings.database_url is not None or not settings.db_host:
            raise ConfigurationError(
                "AGENT_MEMORY_DB_READER_HOST needs AGENT_MEMORY_DB_HOST (the writer; same port, database and login)"
            )
        return settings.model_copy(update={"db_host": settings.db_reader_host})
    return None


class ReadRouter:
    """Where reads go: the reader while it works, else the writer (see the module's docstring)."""

    def __init__(
        self,
        writer: Database,
        reader: Database | None,
        *,
        retry_after_s: float,
        deadline_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.writer = writer
        self.reader = reader
        self.retry_after_s = retry_after_s
        self.deadline_s = deadline_s
        self._clock = clock
        self._reader_down_until = 0.0
        self._lock = threading.Lock()
        self.fallbacks: dict[str, int] = {}  # reason -> reads served by the writer instead

    @property
    def reader_usable(self) -> bool:
        return self.reader is not None and self._clock() >= self._reader_down_until

    def run(self, work: Callable[[Connection], Any], *, consistency: Consistency = "eventual") -> Any:
        """Run read-only ``work`` (whole transactions, idempotent) where it belongs."""
        if consistency == "strong" or self.reader is None or not self.reader_usable:
            return self.writer.run(work, deadline_s=self.deadline_s)
        try:
            return self.reader.run(work, deadline_s=self.deadline_s)
        except StatementTimeout:
            raise
        except DeadlineExceeded as exc:
            self._fell_back("deadline", exc)
        except DatabaseUnavailable as exc:
            self._fell_back("unavailable", exc)
        except psycopg.errors.SerializationFailure as exc:
            # "canceling statement due to conflict with recovery": the standby replayed a change
            # (vacuum, a lock) the query's snapshot still needed.
            self._fell_back("conflict", exc)
        except psycopg.errors.ReadOnlySqlTransaction as exc:
            logger.error("a write was sent to the reader endpoint (a bug): it ran on the writer", exc_info=exc)
            self._fell_back("read_only", exc)
        return self.writer.run(work, deadline_s=self.deadline_s)

    def _fell_back(self, reason: FallbackReason, exc: BaseException) -> None:
        with self._lock:
            self._reader_down_until = self._clock() + self.retry_after_s
            self.fallbacks[reason] = self.fallbacks.get(reason, 0) + 1
        if self.reader is not None:
            self.reader.close()  # a fresh connection next time
        logger.warning(
            "reader_fallback: the read ran on the writer",
            extra={"reason": reason, "error": str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)},
        )

    def take_fallbacks(self) -> int:
        """Reads the writer served instead of the reader since the last call (for a metric)."""
        with self._lock:
            count = sum(self.fallbacks.values())
            self.fallbacks = {}
        return count

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
