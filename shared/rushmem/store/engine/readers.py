"""Reads on a reader endpoint (Aurora replicas, an RDS Proxy read-only endpoint, a streaming
standby), with the writer as the fallback when the reader fails, and bounded staleness: which
operations read where, what counts as a failure and how stale a read may be are docs/serverless.md
(Readers).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

import psycopg

from rushmem.config import Settings
from rushmem.store.engine.connection import Database
from rushmem.store.engine.pg import DeadlineExceeded
from rushmem.store.engine.session import Session
from rushmem_contract.errors import ConfigurationError, DatabaseUnavailable, StatementTimeout
from rushmem_contract.models import Consistency

logger = logging.getLogger(__name__)

FallbackReason = Literal["unavailable", "deadline", "conflict", "read_only"]


def reader_settings(settings: Settings) -> Settings | None:
    """The writer's settings pointed at the reader endpoint; None when no reader is configured."""
    if settings.database_reader_url is not None:
        if settings.database_url is None:
            raise ConfigurationError("RUSHMEM_DATABASE_READER_URL needs RUSHMEM_DATABASE_URL (the writer)")
        return settings.model_copy(update={"database_url": settings.database_reader_url})
    if settings.db_reader_host:
        if settings.database_url is not None or not settings.db_host:
            raise ConfigurationError(
                "RUSHMEM_DB_READER_HOST needs RUSHMEM_DB_HOST (the writer; same port, database and login)"
            )
        return settings.model_copy(update={"db_host": settings.db_reader_host})
    return None


# On the reader: how far behind it is, in one cheap statement. Replay is in commit order, so when
# WAL it received is still to be replayed, the lag is the age of the last transaction it replayed;
# when it replayed everything it received, nothing known is missing (0).
_REPLAY_LAG = """
SELECT pg_last_wal_replay_lsn()::text,
       CASE WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0
            ELSE COALESCE(extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()), 0)::float8
       END
"""
# Aurora PostgreSQL has no WAL replay functions on its readers; it reports the lag itself.
_AURORA_LAG = """
SELECT NULL::text, replica_lag_in_msec / 1000.0 FROM aurora_replica_status()
WHERE server_id = aurora_db_instance_identifier()
"""


def _lsn(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) + int(low, 16)


def writer_lsn(conn: Session) -> int | None:
    """The writer's WAL position now (after a commit returned: past everything it wrote); None where
    the server does not say (Aurora)."""
    try:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    except (psycopg.errors.UndefinedFunction, psycopg.errors.FeatureNotSupported, psycopg.errors.InsufficientPrivilege):
        return None
    return _lsn(row[0]) if row is not None and row[0] else None


@dataclasses.dataclass
class ReplayState:
    """The reader's replay as last measured: when (the router's clock), its lag in seconds, and its
    replay position (None where the server does not say)."""

    measured_at: float
    lag_s: float
    replay_lsn: int | None


@dataclasses.dataclass
class Pin:
    """A user whose reads go to the writer: until ``until`` (after their own write), and, after an
    erasure, until the reader has replayed past ``fence_lsn`` (or, where the reader reports no
    position, until a measure taken ``since`` the erasure shows a lag shorter than the time since)."""

    until: float
    since: float
    fence_lsn: int | None = None
    erased: bool = False


class ReadRouter:
    """Where reads go: the reader while it works, else the writer (see the module's docstring)."""

    def __init__(
        self,
        writer: Database,
        reader: Database | None,
        *,
        retry_after_s: float,
        deadline_s: float | None = None,
        max_lag_s: float | None = None,
        lag_check_s: float = 0.5,
        read_your_writes_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.writer = writer
        self.reader = reader
        self.retry_after_s = retry_after_s
        self.deadline_s = deadline_s
        self.max_lag_s = max_lag_s  # None: the lag is not checked
        self.lag_check_s = lag_check_s
        self.read_your_writes_s = read_your_writes_s
        self._clock = clock
        self._reader_down_until = 0.0
        self._lock = threading.Lock()
        self._replay: ReplayState | None = None
        self._lag_query: str | None = _REPLAY_LAG
        self._pins: dict[str, Pin] = {}
        self.fallbacks: dict[str, int] = {}  # reason -> reads served by the writer instead
        self.kept_fresh: dict[str, int] = {}  # reason -> reads sent to the writer for freshness

    @property
    def reader_usable(self) -> bool:
        return self.reader is not None and self._clock() >= self._reader_down_until

    def run(
        self, work: Callable[[Session], Any], *, consistency: Consistency = "eventual", user_id: str | None = None
    ) -> Any:
        """Run read-only ``work`` (whole transactions, idempotent) where it belongs: ``user_id``, whose
        data it reads, is sent to the writer while the reader may not have their last write or erasure."""
        if consistency == "strong" or self.reader is None or not self.reader_usable:
            return self.writer.run(work, deadline_s=self.deadline_s)
        if (reason := self._stale_for(user_id)) is not None:
            with self._lock:
                self.kept_fresh[reason] = self.kept_fresh.get(reason, 0) + 1
            if reason in ("erasure", "unmeasured"):
                return self.writer.run(work, deadline_s=self.deadline_s)
            try:
                return self.writer.run(work, deadline_s=self.deadline_s)
            except DatabaseUnavailable:
                # Freshness is worth a writer round trip, not an outage: with the writer down the
                # reader answers as an eventual read does (an erased user never gets here).
                logger.warning("stale_read: the writer is unavailable; the reader answered", extra={"reason": reason})
        try:
            return self.reader.run(work, deadline_s=self.deadline_s)
        except StatementTimeout:
            raise
        except DatabaseUnavailable as exc:
            self._fell_back("deadline" if isinstance(exc, DeadlineExceeded) else "unavailable", exc)
        except psycopg.errors.SerializationFailure as exc:
            # "canceling statement due to conflict with recovery": the standby replayed a change
            # (vacuum, a lock) the query's snapshot still needed.
            self._fell_back("conflict", exc)
        except psycopg.errors.ReadOnlySqlTransaction as exc:
            logger.error("a write was sent to the reader endpoint (a bug): it ran on the writer", exc_info=exc)
            self._fell_back("read_only", exc)
        return self.writer.run(work, deadline_s=self.deadline_s)

    # ---- bounded staleness --------------------------------------------------------------------

    def wrote(self, user_id: str) -> None:
        """After a write for ``user_id`` committed: their reads go to the writer for a while."""
        if self.reader is None or self.read_your_writes_s <= 0:
            return
        now = self._clock()
        with self._lock:
            self._prune(now)
            pin = self._pins.get(user_id)
            if pin is None:
                self._pins[user_id] = Pin(until=now + self.read_your_writes_s, since=now)
            else:
                pin.until = max(pin.until, now + self.read_your_writes_s)

    def erased(self, user_id: str) -> None:
        """After ``user_id``'s erasure committed: their reads go to the writer until the reader has
        replayed it, however long that takes (an erasure must never be undone by a lagging reader)."""
        if self.reader is None:
            return
        try:
            fence = self.writer.run(writer_lsn, deadline_s=self.deadline_s)
        except DatabaseUnavailable:
            fence = None  # the erasure committed: fenced by time instead (see Pin)
        now = self._clock()
        with self._lock:
            self._pins[user_id] = Pin(until=now + self.read_your_writes_s, since=now, fence_lsn=fence, erased=True)

    def _prune(self, now: float) -> None:
        """Forget time-only pins that ran out (the dict stays the size of the recent writers)."""
        if len(self._pins) > 1000:
            self._pins = {u: p for u, p in self._pins.items() if p.erased or p.until > now}

    def _stale_for(self, user_id: str | None) -> str | None:
        """Why this read must go to the writer ("own_write", "erasure", "lag"), or None."""
        now = self._clock()
        if user_id is not None and (pin := self._pins.get(user_id)) is not None:
            if now < pin.until:
                return "own_write"
            if pin.erased and not self._replayed(pin):
                return "erasure"
            with self._lock:
                if self._pins.get(user_id) is pin:
                    del self._pins[user_id]
        if self.max_lag_s is None:
            return None
        state = self._replay_state()
        if state is None:  # the reader could not be asked (counted as its failure)
            return "unmeasured"
        return "lag" if state.lag_s > self.max_lag_s else None

    def _replayed(self, pin: Pin) -> bool:
        """Whether the reader has the pinned erasure, measured now if the last measure does not show it."""
        for fresh in (False, True):
            state = self._replay_state(force=fresh)
            if state is None:
                return False
            if pin.fence_lsn is not None and state.replay_lsn is not None:
                if state.replay_lsn >= pin.fence_lsn:
                    return True
            elif state.measured_at - state.lag_s > pin.since:  # no positions: by time (Aurora)
                return True
        return False

    def _replay_state(self, *, force: bool = False) -> ReplayState | None:
        """The reader's replay, measured at most every ``lag_check_s`` (one short statement on the
        reader, under the deadline); None when the reader could not be asked."""
        now = self._clock()
        state = self._replay
        if state is not None and not force and now - state.measured_at < self.lag_check_s:
            return state
        if self.reader is None or not self.reader_usable:
            return None
        try:
            lsn, lag = self.reader.run(self._measure, deadline_s=self.deadline_s)
        except DatabaseUnavailable as exc:
            self._fell_back("deadline" if isinstance(exc, DeadlineExceeded) else "unavailable", exc)
            return None
        state = self._replay = ReplayState(measured_at=self._clock(), lag_s=float(lag), replay_lsn=lsn)
        return state

    def _measure(self, conn: Session) -> tuple[int | None, float]:
        """(replay position, lag in seconds); the first query the reader knows is kept."""
        while (query := self._lag_query) is not None:
            try:
                row = conn.execute(query).fetchone()
            except (psycopg.errors.UndefinedFunction, psycopg.errors.FeatureNotSupported):
                self._lag_query = _AURORA_LAG if query is _REPLAY_LAG else None
                if self._lag_query is None:
                    logger.warning("the reader reports no replay lag: staleness is not checked")
                continue
            if row is None:  # Aurora: this instance is not in the replica status (the writer itself)
                return None, 0.0
            return (_lsn(row[0]) if row[0] else None), float(row[1] or 0.0)
        return None, 0.0

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
