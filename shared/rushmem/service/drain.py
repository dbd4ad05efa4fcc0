"""Publishing the outbox: claim due events, put them on the bus, settle them.

Runs right after a write commits (that user's events), on schedule (everyone's: the EventsFunction
of template.yaml, or ``rushmem events drain``), and never raises into a write: the service
logs a failed drain and the events wait for the next one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import logging
from collections.abc import Callable, Sequence

from rushmem.store.engine.connection import Database
from rushmem.store.events import outbox

logger = logging.getLogger(__name__)

# What a publisher does: per (detail type, detail JSON) entry, None when taken, else the reason.
Publish = Callable[[Sequence[tuple[str, str]]], list[str | None]]


@dataclasses.dataclass(frozen=True)
class DrainResult:
    published: int = 0
    failed: int = 0
    last_error: str | None = None


@dataclasses.dataclass(frozen=True)
class OutboxStatus:
    pending: int
    oldest: dt.datetime | None
    failing: int
    last_error: str | None


def drain_outbox(
    db: Database,
    publish: Publish,
    *,
    user_id: str | None = None,
    batch: int = 100,
    max_batches: int = 10,
    lease_s: float = 60.0,
) -> DrainResult:
    """Publish due events (one user's, or everyone's) until none is due, a publish fails, or
    ``max_batches`` batches went."""
    published = failed = 0
    last_error: str | None = None
    for _ in range(max_batches):
        claimed = db.run(lambda conn: outbox.claim(conn, user_id=user_id, limit=batch, lease_s=lease_s))
        if not claimed:
            break
        try:
            errors = publish([(event.event, event.payload()) for event in claimed])
        except Exception as exc:  # a publisher bug must not leave the lease to expire silently
            errors = [f"{type(exc).__name__}: {exc}"] * len(claimed)
        done = [event.id for event, error in zip(claimed, errors, strict=True) if error is None]
        refused = [(event.id, error) for event, error in zip(claimed, errors, strict=True) if error is not None]
        db.run(functools.partial(outbox.settle, user_id=user_id, published=done, failed=refused))
        published += len(done)
        failed += len(refused)
        if refused:
            last_error = refused[-1][1]
            logger.warning(
                "change events not published; kept in the outbox for the next drain",
                extra={"failed": len(refused), "error": last_error},
            )
            break
        if len(claimed) < batch:
            break
    return DrainResult(published, failed, last_error)


def outbox_status(db: Database, *, user_id: str | None = None) -> OutboxStatus:
    count, oldest, failing, error = db.run(lambda conn: outbox.pending(conn, user_id=user_id))
    return OutboxStatus(count, oldest, failing, error)
