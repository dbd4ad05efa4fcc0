"""One ingest message's write: its memories, the updates its facts make and its receipt, in one
transaction, so that a redelivered message is a no-op; and the flush that makes a batch of such
writes durable at once (:class:`UnflushedWrites`)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import threading
import uuid
from collections.abc import Sequence
from typing import Any, cast

import psycopg

from rushmem.records import DependsOn, IngestWrite, MemoryRow, NeighbourRule, Updates, WriteOutcome
from rushmem.store.accounts.usage import UPSERT_USAGE, add_usage, usage_params
from rushmem.store.engine.dataapi import DataApiSession, QueuedWrite
from rushmem.store.engine.session import Rows, Session, json_rows
from rushmem.store.engine.transactions import user_transaction
from rushmem.store.memories.writes import (
    NEAREST_EXISTING,
    NEIGHBOURS,
    UPSERT,
    UPSERT_RESULT,
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
    if isinstance(conn, DataApiSession) and not targets:
        message = _Message(user_id, message_hash, conversation_id, rows, neighbours, updates, usage)
        at_once = _ingest_in_two_requests(conn, message, write_id=write_id, unflushed=unflushed)
        if at_once is not None:
            return at_once

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


# ---- over the RDS Data API: a message in two requests ---------------------------------------------
# Each request is an HTTPS call of ~100 ms there, and a transaction of begin, scope, lock, receipt,
# neighbours, upsert, receipt and commit was eight. Here the receipt and the neighbours are read in one
# request (a scoped read), the rule judged, and the write sent as one statement that takes the lock
# and reads them again first (agent_memory_write_as): when anything changed in between (a concurrent
# write of the user, a redelivery's receipt, a model switch), nothing is written and the message goes
# through the transaction above instead. So do messages whose write needs the new rows' ids before
# it ends (a supersession), and those too large for one request.

# What the plan is made on: the receipt and which run of the server answers (row 0), then each row's
# nearest memories (rows 1..); every row says how many the read had (an answer cut at 1 MiB is not a plan).
_PLAN_HEAD = (
    "SELECT 0::bigint AS ord, NULL::uuid AS id, NULL::text AS content, NULL::timestamptz AS valid_from, "
    "NULL::float8 AS similarity, NULL::text AS project_id, "
    "EXISTS (SELECT 1 FROM ingested_messages WHERE user_id = %(user_id)s AND message_hash = %(hash)s) AS written, "
    "pg_postmaster_start_time() AS server_started"
)
_PLAN_NEAREST = (
    "SELECT n.ord, n.id, n.content, n.valid_from, n.similarity, n.project_id, NULL::boolean, NULL::timestamptz "
    f"FROM ({NEAREST_EXISTING}) AS n"
)
# The same, under the lock: compared as one value (the neighbours by id and text).
_GUARD = """
SELECT jsonb_build_object(
    'written', EXISTS (SELECT 1 FROM ingested_messages WHERE user_id = %(user_id)s AND message_hash = %(hash)s),
    'server_started', pg_postmaster_start_time(),
    'fingerprint', (SELECT value FROM agent_memory_meta WHERE key = %(meta_key)s),
    'nearest', {nearest})
"""
_GUARD_NEAREST = (
    "COALESCE((SELECT jsonb_agg(jsonb_build_array(n.ord, n.id, md5(n.content)) ORDER BY n.ord, n.id) "
    f"FROM ({NEAREST_EXISTING}) AS n), '[]'::jsonb)"
)


@dataclasses.dataclass(frozen=True)
class _Message:
    user_id: str
    digest: bytes
    conversation_id: str | None
    rows: Sequence[MemoryRow]
    rule: NeighbourRule | None
    updates: Updates
    usage: Sequence[UsageRow]

    def settings(self, conn: DataApiSession, write_id: uuid.UUID | None, *, unflushed: bool) -> dict[str, str]:
        """What :func:`user_transaction` sets for the message's write, the user aside."""
        settings = {"agent_memory.change_source": self.conversation_id or "", "agent_memory.change_reason": ""}
        if write_id is not None:
            settings["agent_memory.write_id"] = str(write_id)
        if conn.change_events:
            settings["agent_memory.outbox"] = conn.change_events
        if unflushed:
            settings["synchronous_commit"] = "off"
        return settings


def _ingest_in_two_requests(
    conn: DataApiSession, m: _Message, *, write_id: uuid.UUID | None, unflushed: UnflushedWrites | None
) -> IngestWrite | None:
    """The message written in two requests (see above); None when it must go through a transaction."""
    rows, user_id = m.rows, m.user_id
    schema = conn.vector_schema
    params: dict[str, Any] = {
        "user_id": user_id,
        "hash": m.digest,
        "meta_key": schema.meta_key if schema is not None else None,
    }
    asks = m.rule is not None and m.rule.floor is not None and bool(rows)
    if asks:
        assert m.rule is not None
        params.update(
            embeddings=[r.embedding for r in rows],
            project_ids=[r.project_id for r in rows],
            hashes=[r.content_hash for r in rows],
            threshold=m.rule.floor,
            neighbours=NEIGHBOURS,
        )
    plan = f"{_PLAN_HEAD} UNION ALL {_PLAN_NEAREST}" if asks else _PLAN_HEAD
    docs = conn.read_once_as_user(
        user_id, json_rows(f"SELECT u.*, count(*) OVER () AS am_rows FROM ({plan}) AS u"), params, vectors=True
    )
    head = next((d for d in docs if d["ord"] == 0), None)
    if head is None or head["written"] or len(docs) < int(head["am_rows"]):
        return None  # a redelivery (the transaction counts its usage), or neighbours past one answer
    found = sorted((d for d in docs if d["ord"] != 0), key=lambda d: (d["ord"], -d["similarity"]))
    nearest = (
        Nearest(
            [
                (d["ord"], uuid.UUID(d["id"]), d["content"], _timestamp(d["valid_from"]), d["similarity"],
                 d["project_id"])
                for d in found
            ],
            list(range(len(rows))),
            m.rule,
        )
        if asks and m.rule is not None
        else None
    )  # fmt: skip
    write = QueuedWrite({UPSERT: UPSERT_RESULT})
    queued = cast(Session, write)  # the statements below only execute (nothing is read before it is sent)
    outcomes: dict[int, WriteOutcome] = {}
    newer = apply_nearest(queued, user_id, rows, nearest, set(range(len(rows))), outcomes, judged=m.updates.judged)
    if newer or m.updates.corrected_by or any(m.updates.replaces.values()) or m.updates.depends_on:
        return None  # a supersession or a depends-on link needs the new rows' ids mid-write
    upsert = PendingUpsert(queued, rows, [i for i in range(len(rows)) if i not in outcomes])
    receipt = {"user_id": user_id, "hash": m.digest, "conversation_id": m.conversation_id, "n": len(rows)}
    if m.usage:
        write.execute(_RECEIPT_AND_USAGE, {**receipt, **usage_params(user_id, m.usage)})
    else:
        write.execute(_INSERT_RECEIPT, receipt)
    expected = {
        "written": False,
        "server_started": head["server_started"],
        "fingerprint": schema.fingerprint if schema is not None else None,
        "nearest": sorted(
            ([d["ord"], d["id"], hashlib.md5(d["content"].encode(), usedforsecurity=False).hexdigest()] for d in found),
            key=lambda n: (n[0], n[1]),
        ),
    }
    guard = _GUARD.format(nearest=_GUARD_NEAREST if asks else "'[]'::jsonb")
    try:
        sent = conn.write_once_as_user(
            user_id,
            write,
            settings=m.settings(conn, write_id, unflushed=unflushed is not None),
            guard=guard,
            guard_params=params,
            expected=expected,
            vectors=True,
        )
    except psycopg.errors.SerializationFailure:
        return None  # what it was planned on changed: planned again, under the transaction's lock
    if not sent:
        return None  # past one request's size
    upsert.take(outcomes)
    server_started = dt.datetime.fromisoformat(head["server_started"])
    if unflushed is not None:
        unflushed.add(server_started)
    return IngestWrite([outcomes[i] for i in range(len(rows))], [], [], server_started)


def _timestamp(text: str | None) -> dt.datetime | None:
    return None if text is None else dt.datetime.fromisoformat(text)
