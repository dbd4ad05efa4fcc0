"""One ingest message's write: its memories, the updates its facts make and its receipt, in one
transaction, so that a redelivered message is a no-op; and the flush that makes a batch of such
writes durable at once (:class:`UnflushedWrites`)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading
import uuid
from collections.abc import Sequence

from rushmem.records import DependsOn, IngestWrite, MemoryRow, NeighbourRule, Updates, WriteOutcome
from rushmem.store.accounts.usage import UPSERT_USAGE, add_usage, usage_params
from rushmem.store.engine.session import Rows, Session, json_rows
from rushmem.store.engine.transactions import user_transaction
from rushmem.store.memories.writes import (
    Nearest,
    PendingUpsert,
    apply_nearest,
    check_writable,
    link_dependencies,
    record_updated,
    refresh,
    send_nearest,
    send_supersede,
    superseded_pairs,
    updated_pairs,
)
from rushmem.usage import UsageRow


def message_ingested(conn: Session, user_id: str, message_hash: bytes) -> Receipt:
    """Whether this exact ingest message was already written (a redelivery); one round trip (over
    the RDS Data API one request, the scope inside the statement as recall's: migration 0017)."""
    params = {"user_id": user_id, "hash": message_hash}
    if conn.single_statement_reads:
        document = conn.read_once_as_user(user_id, json_rows(_RECEIPT_AND_SERVER), params)[0]
        return Receipt(bool(document["found"]), dt.datetime.fromisoformat(document["server_started"]))
    row = conn.read_once_as_user(user_id, _RECEIPT_AND_SERVER, params)[0]
    return Receipt(bool(row["found"]), row["server_started"])


_RECEIPT = "SELECT 1 FROM ingested_messages WHERE user_id = %(user_id)s AND message_hash = %(hash)s"
# The receipt, and which run of the server answers (see UnflushedWrites): the same round trip.
_RECEIPT_AND_SERVER = f"SELECT EXISTS ({_RECEIPT}) AS found, pg_postmaster_start_time() AS server_started"


_INSERT_RECEIPT = (
    "INSERT INTO ingested_messages (user_id, message_hash, conversation_id, memories) "
    "VALUES (%(user_id)s, %(hash)s, %(conversation_id)s, %(n)s)"
)
_RECEIPT_AND_USAGE = f"WITH usage_upsert AS ({UPSERT_USAGE.strip()}) {_INSERT_RECEIPT}"


@dataclasses.dataclass(frozen=True)
class Receipt:
    found: bool
    server_started: dt.datetime


class UnflushedWrites:
    """Ingest writes committed without waiting for the WAL to reach the disk, by the run of the
    server (its start time) that took them; :func:`flush_writes` makes them durable. A queue
    consumer keeps one per batch (why: docs/serverless.md, Ingest durability). A message found
    already written counts too: its receipt may come from an earlier delivery that committed the
    same way and died before its flush.
    """

    def __init__(self) -> None:
        self._server_starts: set[dt.datetime] = set()
        self._lock = threading.Lock()

    def add(self, server_started: dt.datetime) -> None:
        with self._lock:
            self._server_starts.add(server_started)

    def take(self) -> set[dt.datetime]:
        """The start times recorded so far, forgetting them (a flush covers them all)."""
        with self._lock:
            taken, self._server_starts = self._server_starts, set()
        return taken

    def __bool__(self) -> bool:
        return bool(self._server_starts)


def flush_writes(conn: Session) -> dt.datetime:
    """Wait until every transaction committed so far, by any session, is on disk; returns when
    the server started, to compare with the start times the writes saw. One round trip: a
    synchronous commit of a transaction that wrote WAL (one that wrote none would not wait), the
    smallest any role may write being a transactional logical decoding message (it touches no table).
    """
    with conn.pipelined_transaction():
        conn.execute("SELECT set_config('synchronous_commit', 'on', true)")
        cur = conn.execute("SELECT pg_logical_emit_message(true, 'agent-memory', 'flush'), pg_postmaster_start_time()")
    row = cur.fetchone()
    assert row is not None
    started: dt.datetime = row[1]
    return started


# The targets of an ingest message's updates that are still live and visible from its scope
# (its project and the user-wide memories; every project without one), locked until commit.
_LIVE_TARGETS = """
SELECT id FROM user_memories
WHERE user_id = %(user_id)s AND id = ANY(%(ids)s) AND superseded_at IS NULL
  AND (expires_at IS NULL OR expires_at > now())
  AND (%(project_id)s::text IS NULL OR project_id IS NULL OR project_id = %(project_id)s)
ORDER BY id
FOR UPDATE
"""


def ingest_message(  # noqa: PLR0913 -- one message's write (rows, updates, receipt, usage, fold thresholds)
    conn: Session,
    user_id: str,
    message_hash: bytes,
    rows: Sequence[MemoryRow],
    *,
    conversation_id: str | None = None,
    neighbours: NeighbourRule | None = None,
    updates: Updates | None = None,
    usage: Sequence[UsageRow] = (),
    unflushed: UnflushedWrites | None = None,
    write_id: uuid.UUID | None = None,
) -> IngestWrite | None:
    """Write one ingest message's memories, its updates (restatements refreshed, replaced
    memories superseded) and its receipt in one transaction: all of it or nothing.

    None (and no change) when the message was already written: concurrent deliveries of the
    same message serialise on the user's lock, and the second finds the first's receipt.
    ``usage`` (what the message's extraction and embedding used) is counted either way: a
    concurrent delivery that lost the race still made its provider calls.

    With ``unflushed``, the commit does not wait for the WAL flush (``synchronous_commit = off``,
    this transaction only): the write is visible at once, and durable once :func:`flush_writes`
    has returned the server start time recorded in ``unflushed``. ``write_id``: the write, recorded
    with every memory it creates, refreshes or supersedes and every history event it causes.
    """
    if any(r.user_id != user_id for r in rows):
        raise ValueError("an ingest message writes the memories of its own user only")
    updates = updates or Updates()
    check_writable(conn)
    targets = updates.targets

    # One round trip with BEGIN, its lock and schema check: the receipt, the update targets still
    # live, and every row's nearest memories (those of rows the targets settle are then ignored).
    def send(c: Session) -> tuple[Rows, Rows | None, Nearest | None]:
        receipt = c.execute(_RECEIPT_AND_SERVER, {"user_id": user_id, "hash": message_hash})
        found = (
            c.execute(_LIVE_TARGETS, {"user_id": user_id, "ids": sorted(targets), "project_id": updates.project_id})
            if targets
            else None
        )
        nearest = send_nearest(c, user_id, rows, list(range(len(rows))), neighbours)
        return receipt, found, nearest

    # The rest is pipelined too: the refreshes, the upsert, the receipt and COMMIT go out together,
    # and the upsert's ids are read after COMMIT unless a supersession needs them first.
    deferred = None if unflushed is None else {"synchronous_commit": "off"}
    with user_transaction(
        conn, user_id, source=conversation_id, lock=True, vectors=True, settings=deferred, write_id=write_id, send=send
    ) as sent:
        assert sent is not None
        receipt_cursor, found, nearest = sent
        receipt = receipt_cursor.fetchone()
        assert receipt is not None
        written_before, server_started = receipt
        if unflushed is not None:
            unflushed.add(server_started)
        if written_before:
            add_usage(conn, user_id, [u for u in usage if u.kind != "conversation"])
            return None
        live: set[uuid.UUID] = {r[0] for r in found.fetchall()} if found is not None else set()
        outcomes: dict[int, WriteOutcome] = {}
        restated = {i: t for i, t in updates.restates.items() if t in live}
        refresh(conn, user_id, [(t, rows[i]) for i, t in restated.items()])
        outcomes.update((i, WriteOutcome(t, "restated")) for i, t in restated.items())
        replaces = {i: [t for t in ids if t in live] for i, ids in updates.replaces.items()}
        rest = [i for i in range(len(rows)) if i not in restated]
        # A fact that replaces a memory must not fold into it as a near-duplicate.
        exact_only = {i for i in rest if replaces.get(i)}
        near = {i for i in rest if i not in exact_only}
        newer = apply_nearest(conn, user_id, rows, nearest, near, outcomes, judged=updates.judged)
        corrected = dict(updates.corrected_by)
        # A stored value the message corrects twice ("is 5" stored; "is 6", then "is 7") is closed by
        # the first correction, which the second then closes: a chain, as it was said.
        for earlier, later in corrected.items():
            if later in newer and earlier in newer:
                stale = {n.id for n in newer[earlier]}
                newer[later] = [n for n in newer[later] if n.id not in stale]
        upsert = PendingUpsert(conn, rows, [i for i in rest if i not in outcomes])
        sent_updated = sent_replaced = sent_corrected = None
        follows = updates.depends_on
        if follows:
            upsert.take(outcomes)  # the memories' ids, to link (one more round trip)
            named = {i: [(t, f) for t, f in ids if t in live] for i, ids in follows.named.items()}
            link_dependencies(conn, user_id, DependsOn(named=named, within=follows.within), outcomes)
        if newer or any(replaces.values()) or corrected:
            upsert.take(outcomes)  # the new memories' ids, to supersede with (one more round trip)
            sent_updated = send_supersede(conn, user_id, updated_pairs(rows, newer, outcomes))
            sent_replaced = send_supersede(
                conn, user_id, [(old, outcomes[i].id) for i, ids in replaces.items() for old in ids]
            )
            sent_corrected = send_supersede(
                conn, user_id, [(outcomes[old].id, outcomes[new].id) for old, new in corrected.items()]
            )
        receipt_values = {"user_id": user_id, "hash": message_hash, "conversation_id": conversation_id, "n": len(rows)}
        if usage:  # the receipt and the usage in one statement (one request fewer over the Data API)
            conn.execute(_RECEIPT_AND_USAGE, {**receipt_values, **usage_params(user_id, usage)})
        else:
            conn.execute(_INSERT_RECEIPT, receipt_values)
    # What the last statements returned, read after COMMIT (they travelled with it).
    upsert.take(outcomes)
    updated, replaced = superseded_pairs(sent_updated), superseded_pairs(sent_replaced)
    within = superseded_pairs(sent_corrected)
    record_updated(updated, newer, outcomes)
    for i in {*replaces, *corrected.values()}:
        ids = tuple(old for old, new in replaced + within if new == outcomes[i].id)
        outcomes[i] = dataclasses.replace(outcomes[i], superseded=(*outcomes[i].superseded, *ids))
    for i in corrected:
        closed_by = dict(within).get(outcomes[i].id)
        if closed_by is not None:
            outcomes[i] = dataclasses.replace(outcomes[i], superseded_by=closed_by)
    superseded = updated + replaced + within
    return IngestWrite([outcomes[i] for i in range(len(rows))], superseded, sorted(targets - live), server_started)
