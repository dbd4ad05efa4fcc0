"""The change outbox's SQL: claim due events, settle them after a publish, report what waits.

Claiming leases the rows (their next attempt moves ``lease_s`` ahead) and commits before the
publish, so no transaction stays open across a network call; a process that dies mid-publish
leaves rows that come due again when the lease ends (at-least-once: consumers dedupe on
``event_id``). A drain for one user runs in that user's transaction; a drain of everyone's
events says so with ``agent_memory.outbox_drain`` (the outbox's row-level security admits it).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import BaseModel

from rushmem.store.engine.session import Session
from rushmem.store.engine.transactions import user_transaction

# The longest wait between two attempts at a failing event.
MAX_BACKOFF_S = 3600


class ChangeEvent(BaseModel):
    """One outbox row; :meth:`payload` is what the bus receives (DetailType: ``event``)."""

    id: int
    event_id: uuid.UUID
    user_id: str
    event: str
    memory_id: uuid.UUID | None = None
    project_id: str | None = None
    category: str | None = None
    related_id: uuid.UUID | None = None
    source: str | None = None
    content: str | None = None
    detail: dict[str, Any]
    at: dt.datetime
    attempts: int = 0

    def payload(self) -> str:
        """The event's JSON for the bus: ids, category and kind of change; the text only when the
        deployment puts it in (RUSHMEM_EVENT_CONTENT)."""
        body: dict[str, Any] = {
            "event_id": str(self.event_id),
            "event": self.event,
            "sequence": self.id,
            "user_id": self.user_id,
            "memory_id": str(self.memory_id) if self.memory_id else None,
            "project_id": self.project_id,
            "category": self.category,
            "related_id": str(self.related_id) if self.related_id else None,
            "source": self.source,
            "at": self.at.isoformat(),
            **self.detail,
        }
        if self.content is not None:
            body["content"] = self.content
        return json.dumps({k: v for k, v in body.items() if v is not None}, ensure_ascii=False)


_COLUMNS = (
    "id, event_id, user_id, event, memory_id, project_id, category, related_id, source, content, detail, at, attempts"
)

_CLAIM = f"""
UPDATE change_outbox o SET attempts = o.attempts + 1,
                           next_attempt_at = clock_timestamp() + make_interval(secs => %(lease_s)s)
WHERE o.id IN (
    SELECT id FROM change_outbox
    WHERE (%(user_id)s::text IS NULL OR user_id = %(user_id)s) AND next_attempt_at <= clock_timestamp()
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
RETURNING {", ".join("o." + c.strip() for c in _COLUMNS.split(","))}
"""

# A failed event waits 10 s, 20 s, 40 s, ... up to an hour before its next attempt.
_FAILED = """
UPDATE change_outbox o SET last_error = t.error,
    next_attempt_at = clock_timestamp() + make_interval(secs => least(%(max_s)s, 5 * power(2, least(o.attempts, 12))))
FROM unnest(%(ids)s::bigint[], %(errors)s::text[]) AS t(id, error)
WHERE o.id = t.id
"""


@contextlib.contextmanager
def outbox_transaction(conn: Session, user_id: str | None) -> Iterator[Session]:
    """One user's outbox (``user_id``), or everyone's (None: the scheduled drain)."""
    if user_id is not None:
        with user_transaction(conn, user_id):
            yield conn
        return
    with conn.pipelined_transaction():
        conn.execute("SELECT set_config('agent_memory.outbox_drain', 'on', true)")
        yield conn


def claim(conn: Session, *, user_id: str | None, limit: int, lease_s: float) -> list[ChangeEvent]:
    """Lease up to ``limit`` due events (oldest first) and commit, so the publish holds no transaction."""
    with outbox_transaction(conn, user_id):
        rows = conn.execute_dicts(_CLAIM, {"user_id": user_id, "limit": limit, "lease_s": lease_s}).fetchall()
    return sorted((ChangeEvent(**row) for row in rows), key=lambda e: e.id)


def settle(conn: Session, *, user_id: str | None, published: Sequence[int], failed: Sequence[tuple[int, str]]) -> None:
    """Delete what the bus accepted; push back what it refused, with the reason."""
    with outbox_transaction(conn, user_id):
        if published:
            conn.execute("DELETE FROM change_outbox WHERE id = ANY(%s)", [list(published)])
        if failed:
            conn.execute(
                _FAILED,
                {"ids": [i for i, _ in failed], "errors": [e[:500] for _, e in failed], "max_s": MAX_BACKOFF_S},
            )


def pending(conn: Session, *, user_id: str | None) -> tuple[int, dt.datetime | None, int, str | None]:
    """(events waiting, the oldest's time, how many failed at least once, the latest error)."""
    with outbox_transaction(conn, user_id):
        row = conn.execute(
            "SELECT count(*), min(at), count(*) FILTER (WHERE last_error IS NOT NULL), "
            "(SELECT last_error FROM change_outbox WHERE last_error IS NOT NULL "
            " AND (%(user_id)s::text IS NULL OR user_id = %(user_id)s) ORDER BY id DESC LIMIT 1) "
            "FROM change_outbox WHERE (%(user_id)s::text IS NULL OR user_id = %(user_id)s)",
            {"user_id": user_id},
        ).fetchone()
    assert row is not None
    return int(row[0]), row[1], int(row[2]), row[3]
