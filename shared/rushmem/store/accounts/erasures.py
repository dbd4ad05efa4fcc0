"""Forgetting a user, with its receipt, and reading receipts back.

A receipt is proof that a user's data was deleted, holding no personal data: its subject is
HMAC-SHA256(key, user id) under a random per-deployment key (``erasure_key`` in
``agent_memory_meta``, from migration 0009), so only someone who can read the database can match a
receipt to an id. Why keyed, and what a receipt holds: docs/tenant-data.md (Erasure receipts).

One transaction deletes the user's memories, history, ingest receipts and usage counts, stores
the receipt and, when change events are on,
queues 'user.erased'. The receipt is written in the same transaction as the deletion: there is
a receipt exactly when the data went.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import uuid

from psycopg.types.json import Jsonb

from rushmem.store.engine.session import Session
from rushmem.store.engine.transactions import maintenance_transaction, read_as_user, user_transaction
from rushmem_contract.errors import ConfigurationError
from rushmem_contract.schemas import ErasureReceipt

# Counted by deleting: each CTE's RETURNING feeds the receipt, in one statement.
_ERASE = """
WITH memories AS (DELETE FROM user_memories WHERE user_id = %(user_id)s RETURNING 1),
     history AS (DELETE FROM memory_events WHERE user_id = %(user_id)s RETURNING 1),
     receipts AS (DELETE FROM ingested_messages WHERE user_id = %(user_id)s RETURNING 1),
     usage AS (DELETE FROM usage_daily WHERE user_id = %(user_id)s RETURNING 1),
     -- writes waiting for review (0016) are memories too, not yet stored
     held AS (DELETE FROM pending_memories WHERE user_id = %(user_id)s RETURNING 1)
INSERT INTO erasure_receipts (id, subject_hash, requested_by, erased_at, deleted)
SELECT %(id)s, %(subject)s, %(requested_by)s, coalesce(%(erased_at)s::timestamptz, clock_timestamp()),
       jsonb_build_object('memories', (SELECT count(*) FROM memories) + (SELECT count(*) FROM held),
                          'history', (SELECT count(*) FROM history),
                          'ingest_receipts', (SELECT count(*) FROM receipts),
                          'usage_rows', (SELECT count(*) FROM usage))
RETURNING id, subject_hash, requested_by, erased_at, deleted
"""

_ERASED_EVENT = """
INSERT INTO change_outbox (user_id, event, detail)
SELECT %(user_id)s, 'user.erased', %(detail)s
WHERE current_setting('agent_memory.outbox', true) IN ('ids', 'content')
"""

_RECEIPT = "SELECT id, subject_hash, requested_by, erased_at, deleted FROM erasure_receipts WHERE "


# agent_memory_meta's entry holding the key (hex), written once by migration 0009.
ERASURE_KEY = "erasure_key"


def subject_hash(key: str, user_id: str) -> bytes:
    """The receipt's subject: HMAC-SHA256 of the user id under the deployment's key (hex)."""
    return hmac.new(bytes.fromhex(key), user_id.encode("utf-8"), hashlib.sha256).digest()


_HOLDS = """
SELECT EXISTS (SELECT 1 FROM user_memories WHERE user_id = %(user)s)
    OR EXISTS (SELECT 1 FROM memory_events WHERE user_id = %(user)s)
    OR EXISTS (SELECT 1 FROM pending_memories WHERE user_id = %(user)s)
    OR EXISTS (SELECT 1 FROM extraction_instructions WHERE user_id = %(user)s)
    OR EXISTS (SELECT 1 FROM ingested_messages WHERE user_id = %(user)s)
    OR EXISTS (SELECT 1 FROM usage_daily WHERE user_id = %(user)s) AS holds
"""


def holds_user(conn: Session, user_id: str) -> bool:
    """Whether this database holds anything of the user (another cell, after an interrupted move)."""
    rows = read_as_user(conn, user_id, _HOLDS, {"user": user_id})
    return bool(rows and rows[0]["holds"])


def erase_user(
    conn: Session,
    user_id: str,
    *,
    requested_by: str,
    receipt_id: uuid.UUID | None = None,
    erased_at: dt.datetime | None = None,
) -> ErasureReceipt:
    """Delete everything the store holds about the user and return the stored receipt (with the
    id and time given: those the erasure ledger recorded first, or those of a re-applied entry)."""
    receipt_id = receipt_id or uuid.uuid4()
    # The receipt is readable in this transaction by its id only (its row-level security).
    settings = {"agent_memory.erasure_id": str(receipt_id)}
    with user_transaction(conn, user_id, reason="forget_user", settings=settings):
        key = erasure_key(conn)
        # The dense-user registry holds the user's common words (migration 0005), their partition
        # the copy of their vectors and words (0013): emptied now, dropped by the next
        # `rushmem dense-users` run.
        conn.execute("DELETE FROM dense_memories WHERE user_id = %s", [user_id])
        conn.execute("DELETE FROM agent_memory_dense_users WHERE user_id = %s", [user_id])
        # The user's projects' extraction instructions (migration 0015) are theirs too.
        conn.execute("DELETE FROM extraction_instructions WHERE user_id = %s", [user_id])
        row = conn.execute_dicts(
            _ERASE,
            {
                "user_id": user_id,
                "id": receipt_id,
                "subject": subject_hash(key, user_id),
                "requested_by": requested_by,
                "erased_at": erased_at,
            },
        ).fetchone()
        assert row is not None
        receipt = _receipt(row)
        conn.execute(
            _ERASED_EVENT,
            {
                "user_id": user_id,
                "detail": Jsonb({"erasure_id": str(receipt.id), "deleted": receipt.deleted.model_dump()}),
            },
        )
    return receipt


def get_receipt(conn: Session, receipt_id: uuid.UUID, *, user_id: str | None = None) -> ErasureReceipt | None:
    """The receipt with this id (None if there is none); with ``user_id``, only if it is that user's."""
    with user_transaction(conn, "", settings={"agent_memory.erasure_id": str(receipt_id)}):
        subject = subject_hash(erasure_key(conn), user_id) if user_id is not None else None
        row = conn.execute_dicts(
            _RECEIPT + "id = %s AND (%s::bytea IS NULL OR subject_hash = %s)", [receipt_id, subject, subject]
        ).fetchone()
    return _receipt(row) if row else None


def erasure_key(conn: Session) -> str:
    """The deployment's key for the receipts' subject hash."""
    row = conn.execute("SELECT value FROM agent_memory_meta WHERE key = %s", [ERASURE_KEY]).fetchone()
    if row is None or row[0] is None:
        raise ConfigurationError("the store has no erasure key: run `rushmem migrate` (migration 0009)")
    return str(row[0])


def receipts_for(conn: Session, user_id: str) -> list[ErasureReceipt]:
    """Every erasure of this user id, oldest first (found by its keyed hash)."""
    subject = subject_hash(erasure_key(conn), user_id)
    with user_transaction(conn, "", settings={"agent_memory.erasure_subject": subject.hex()}):
        rows = conn.execute_dicts(_RECEIPT + "subject_hash = %s ORDER BY erased_at, id", [subject]).fetchall()
    return [_receipt(r) for r in rows]


def _receipt(row: dict[str, object]) -> ErasureReceipt:
    subject = row["subject_hash"]
    assert isinstance(subject, bytes | memoryview)
    return ErasureReceipt.model_validate({**row, "subject": bytes(subject).hex()})


def store_fingerprint(key: str) -> str:
    """Which database erased, as the erasure ledger names it: a digest of its erasure key (each cell
    has its own), which says nothing about the key."""
    return hashlib.sha256(b"rushmem-erasure-ledger:" + bytes.fromhex(key)).hexdigest()[:32]


def ledger_identity(conn: Session, user_id: str) -> tuple[str, str]:
    """(this database's fingerprint, the user's subject hash in hex): what a ledger entry holds."""
    with conn.transaction():
        key = erasure_key(conn)
    return store_fingerprint(key), subject_hash(key, user_id).hex()


def this_store(conn: Session) -> str:
    with conn.transaction():
        return store_fingerprint(erasure_key(conn))


def receipts_present(conn: Session, ids: list[uuid.UUID]) -> set[uuid.UUID]:
    """Which of these receipts this database holds (across users: as agent_memory_maintenance)."""
    if not ids:
        return set()
    with maintenance_transaction(conn, source="erasure-ledger"):
        rows = conn.execute("SELECT id FROM erasure_receipts WHERE id = ANY(%s)", [ids]).fetchall()
    return {r[0] for r in rows}


# Every user id anything is stored under (what erase_user deletes, and the cells' directory, which
# forgetting a user empties too).
_USERS = """
SELECT user_id FROM user_memories UNION SELECT user_id FROM memory_events
UNION SELECT user_id FROM pending_memories UNION SELECT user_id FROM extraction_instructions
UNION SELECT user_id FROM ingested_messages UNION SELECT user_id FROM usage_daily
UNION SELECT user_id FROM agent_memory_dense_users UNION SELECT user_id FROM cell_directory
"""


def users_with_subjects(conn: Session, subjects: set[str]) -> dict[str, list[str]]:
    """The user ids this database holds whose keyed hash is one of ``subjects`` (hex), by subject.
    The hash is keyed, so every stored id is hashed once: this runs after a restore, not per request."""
    with maintenance_transaction(conn, source="erasure-ledger"):
        key = erasure_key(conn)
        users = [r[0] for r in conn.execute(_USERS).fetchall()]
    found: dict[str, list[str]] = {}
    for user_id in users:
        subject = subject_hash(key, user_id).hex()
        if subject in subjects:
            found.setdefault(subject, []).append(user_id)
    return found


_RESTORE_RECEIPT = """
INSERT INTO erasure_receipts (id, subject_hash, requested_by, erased_at, deleted)
VALUES (%(id)s, %(subject)s, %(requested_by)s, %(erased_at)s,
        jsonb_build_object('memories', 0, 'history', 0, 'ingest_receipts', 0, 'usage_rows', 0))
ON CONFLICT (id) DO NOTHING
"""


def restore_receipt(
    conn: Session, *, receipt_id: uuid.UUID, subject: str, requested_by: str, erased_at: dt.datetime
) -> None:
    """A ledger entry's receipt put back where the restored database holds nothing of its user
    (they had nothing stored at the restored point): the erasure is then on record again."""
    with user_transaction(conn, "", settings={"agent_memory.erasure_id": str(receipt_id)}):
        conn.execute(
            _RESTORE_RECEIPT,
            {"id": receipt_id, "subject": bytes.fromhex(subject), "requested_by": requested_by, "erased_at": erased_at},
        )
