"""Usage per tenant: what each user's work cost in provider calls, tokens and characters.

Providers record what they did (:func:`record_usage`) into the meter of the operation that runs
(:func:`metering`, a context variable, so concurrent requests in one process never mix); the
service hands the meter's rows to the write or recall transaction, which adds them to the
``usage_daily`` table (one row per user, UTC day, kind and model) in the same transaction as
the work (:mod:`rushmem.store.accounts.usage`). Nothing here does I/O; the counts are read back
with their cost by :mod:`rushmem.service.accounting`, and the wire models of ``GET /usage`` are
in :mod:`rushmem_contract.schemas`.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Literal, TypedDict, Unpack

logger = logging.getLogger(__name__)

# recall: one recall answered (characters: the query); conversation: one "conversation ended"
# message written; write: memories stored by POST /memories, add or import (items: memories);
# embedding, llm, pii: provider calls (pii: Amazon Comprehend DetectPiiEntities).
UsageKind = Literal["recall", "conversation", "write", "embedding", "llm", "pii"]


@dataclasses.dataclass
class UsageCount:
    """Counts of one kind of work with one model. Tokens are 0 where the provider reports none."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    characters: int = 0
    items: int = 0

    def add(self, other: UsageCount) -> None:
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.characters += other.characters
        self.items += other.items


class Counts(TypedDict, total=False):
    """What a provider call or a piece of work adds to a :class:`UsageCount` (keywords)."""

    calls: int
    input_tokens: int
    output_tokens: int
    characters: int
    items: int


@dataclasses.dataclass(frozen=True)
class UsageRow:
    """One (kind, model) count, as the usage upsert takes it."""

    kind: str
    model: str
    count: UsageCount


class Meter:
    """What one operation used, by (kind, model)."""

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], UsageCount] = {}

    def add(self, kind: UsageKind, model: str = "", **counts: Unpack[Counts]) -> None:
        self._counts.setdefault((kind, model), UsageCount()).add(UsageCount(**counts))

    def share(self, weight: float, *, calls_at_least: int = 1) -> Meter:
        """This meter's counts times ``weight`` (0..1), for one user of work several users shared
        (a batch embedding during import or batch recall); a call that served the user counts once."""
        part = Meter()
        for (kind, model), c in self._counts.items():
            part._counts[(kind, model)] = UsageCount(
                calls=max(calls_at_least, round(c.calls * weight)) if c.calls else 0,
                input_tokens=round(c.input_tokens * weight),
                output_tokens=round(c.output_tokens * weight),
                characters=round(c.characters * weight),
                items=round(c.items * weight),
            )
        return part

    def rows(self) -> list[UsageRow]:
        """The counts in a fixed order (kind, model): concurrent upserts lock rows in one order."""
        return [UsageRow(kind, model, count) for (kind, model), count in sorted(self._counts.items())]

    def __bool__(self) -> bool:
        return bool(self._counts)


_current: contextvars.ContextVar[Meter | None] = contextvars.ContextVar("rushmem_meter", default=None)


@contextlib.contextmanager
def metering(meter: Meter | None = None) -> Iterator[Meter]:
    """Record the provider calls made inside the block into ``meter`` (a new one by default)."""
    meter = Meter() if meter is None else meter
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)


def record_usage(kind: UsageKind, model: str = "", **counts: Unpack[Counts]) -> None:
    """Count work in the current operation's meter; nothing when no operation is metered."""
    meter = _current.get()
    if meter is not None:
        meter.add(kind, model, **counts)


@dataclasses.dataclass(frozen=True)
class PendingUsage:
    """One user's counts of one UTC day, not yet in ``usage_daily``."""

    user_id: str
    day: dt.date
    rows: list[UsageRow]


class UsageBuffer:
    """Counts kept in the container until a flush writes them in one batch (recalls served by a
    reader endpoint, which cannot write: counting each on the writer would put a commit on the
    writer for every read). Each count keeps the UTC day it happened on.

    A flush is due at ``max_pending`` counts waiting, or when the oldest has waited ``max_age_s``;
    :meth:`count` then starts one on a thread of its own, so the read that counted neither waits
    for the writer nor fails with it. ``write`` stores a batch (on the writer, in one round trip);
    what it could not store because the writer was unreachable (``kept(exc)``) is put back for the
    next flush, and no flush is tried again before the interval. What a container holds when it is
    shut down without warning is lost (docs/serverless.md, Usage).
    """

    def __init__(
        self,
        *,
        max_pending: int,
        max_age_s: float,
        write: Callable[[list[PendingUsage]], object],
        kept: Callable[[Exception], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_pending = max_pending
        self.max_age_s = max_age_s
        self._write = write
        self._kept = kept
        self._clock = clock
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._meters: dict[tuple[str, dt.date], Meter] = {}
        self._count = 0
        self._oldest: float | None = None
        self._retry_at = 0.0

    def add(self, user_id: str, day: dt.date, rows: Sequence[UsageRow]) -> None:
        if not rows:
            return
        with self._lock:
            meter = self._meters.setdefault((user_id, day), Meter())
            for row in rows:
                meter._counts.setdefault((row.kind, row.model), UsageCount()).add(row.count)
            self._count += 1
            if self._oldest is None:
                self._oldest = self._clock()

    def count(self, user_id: str, day: dt.date, rows: Sequence[UsageRow]) -> None:
        """Keep a read's counts; when a batch is due, write it from a thread of its own."""
        self.add(user_id, day, rows)
        if self.due() and self._clock() >= self._retry_at:
            threading.Thread(target=self.flush_quietly, name="usage-flush", daemon=True).start()

    def __len__(self) -> int:
        """Counts added since the last flush took them."""
        return self._count

    def due(self) -> bool:
        with self._lock:
            if self._oldest is None:
                return False
            return self._count >= self.max_pending or self._clock() - self._oldest >= self.max_age_s

    def take(self) -> list[PendingUsage]:
        """Everything waiting, in (user, day) order (concurrent flushes lock rows in one order)."""
        with self._lock:
            taken = [PendingUsage(user, day, meter.rows()) for (user, day), meter in sorted(self._meters.items())]
            self._meters, self._count, self._oldest = {}, 0, None
        return taken

    def put_back(self, pending: Sequence[PendingUsage]) -> None:
        """Counts a flush took but did not write (the writer was unreachable): kept for the next one."""
        for item in pending:
            self.add(item.user_id, item.day, item.rows)

    def flush(self) -> int:
        """Write what waits now; the number of counts written. What the writer could not be reached
        for is kept (and the error raised); what may have been written when the connection broke
        is dropped (logged as usage_lost) rather than counted twice."""
        if not self._count:
            return 0
        count = len(self)
        pending = self.take()
        try:
            self._write(pending)
        except Exception as exc:
            if self._kept(exc):
                self.put_back(pending)
            else:
                logger.error("usage_lost: the connection broke while usage was written", extra={"counts": count})
            raise
        self._retry_at = 0.0
        return count

    def flush_quietly(self) -> None:
        """:meth:`flush`, never raising: a failure is logged and waits for the interval (a writer
        that is down would otherwise cost a connect timeout on every read)."""
        if not self._flushing.acquire(blocking=False):
            return  # a flush is under way: it takes what is waiting
        try:
            self.flush()
        except Exception:
            self._retry_at = self._clock() + self.max_age_s
            logger.warning("usage counts not written; kept for the next flush", exc_info=True)
        finally:
            self._flushing.release()
