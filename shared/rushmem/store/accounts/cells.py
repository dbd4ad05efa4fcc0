"""The ``cell_directory`` table (migration 0018): which cell holds each user, in the home cell's
database. Each statement is one user's, under row-level security."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb

from rushmem.store.engine.session import Session
from rushmem.store.engine.transactions import read_as_user, user_transaction


def cell_entry(conn: Session, user_id: str) -> tuple[str, bool] | None:
    """The user's (cell, moving), None when the user has no entry yet."""
    rows = read_as_user(
        conn, user_id, "SELECT cell, moving FROM cell_directory WHERE user_id = %(user)s", {"user": user_id}
    )
    return (str(rows[0]["cell"]), bool(rows[0]["moving"])) if rows else None


def claim_cell(conn: Session, user_id: str, cell: str) -> tuple[str, bool]:
    """The user's entry, written with ``cell`` if there was none (the first write places the user)."""
    with user_transaction(conn, user_id):
        conn.execute(
            "INSERT INTO cell_directory (user_id, cell) VALUES (%s, %s) ON CONFLICT (user_id) DO NOTHING",
            [user_id, cell],
        )
        row = conn.execute("SELECT cell, moving FROM cell_directory WHERE user_id = %s", [user_id]).fetchone()
    assert row is not None
    return str(row[0]), bool(row[1])


def set_cell(conn: Session, user_id: str, cell: str, *, moving: bool) -> None:
    """Point the user at ``cell`` (a move's steps: hold the writes, then switch)."""
    with user_transaction(conn, user_id):
        conn.execute(
            "INSERT INTO cell_directory (user_id, cell, moving) VALUES (%s, %s, %s) "
            "ON CONFLICT (user_id) DO UPDATE SET cell = EXCLUDED.cell, moving = EXCLUDED.moving, updated_at = now()",
            [user_id, cell, moving],
        )


def forget_cell(conn: Session, user_id: str) -> None:
    """Delete the user's entry (their erasure: the directory holds their id)."""
    with user_transaction(conn, user_id):
        conn.execute("DELETE FROM cell_directory WHERE user_id = %s", [user_id])


_EVENT_COLUMNS = "memory_id, user_id, project_id, event, at, source, content, related_id, detail, write_id"


def user_events(conn: Session, user_id: str) -> list[dict[str, Any]]:
    """Every history event of the user, oldest first (a move copies them)."""
    return read_as_user(
        conn,
        user_id,
        f"SELECT {_EVENT_COLUMNS} FROM memory_events WHERE user_id = %(user)s ORDER BY at, id",
        {"user": user_id},
    )


def replace_events(conn: Session, user_id: str, events: Sequence[dict[str, Any]]) -> None:
    """Make the user's history in this cell ``events`` (a move: the copy's own 'created' events give
    way to the history the user had), in one transaction; event ids are this cell's own."""
    with user_transaction(conn, user_id, source="cell-move"):
        conn.execute("DELETE FROM memory_events WHERE user_id = %s", [user_id])
        if events:
            conn.executemany(
                f"INSERT INTO memory_events ({_EVENT_COLUMNS}) VALUES "
                "(%(memory_id)s, %(user_id)s, %(project_id)s, %(event)s, %(at)s, %(source)s, %(content)s, "
                "%(related_id)s, %(detail)s, %(write_id)s)",
                [{**e, "detail": Jsonb(e["detail"])} for e in events],
            )


# What else a user owns, copied as it is by a move (memories, history and usage have their own
# steps): held writes, consolidation's proposals, extraction instructions and the queue's message receipts (a message
# delivered again after the move is then still a duplicate). Columns in table order; the jsonb ones wrapped.
OWNED: dict[str, tuple[str, frozenset[str]]] = {
    "pending_memories": (
        "id, user_id, project_id, content, content_hash, category, source, reasons, memory, write_id, created_at",
        frozenset({"memory"}),
    ),
    # Consolidation's proposals (0021), waiting and decided (a rejected pair stays rejected): after
    # the memories they name, which the copy keeps with their ids.
    "consolidation_proposals": (
        "id, user_id, project_id, action, memory_id, other_id, memory_hash, other_hash, write_id, created_at, "
        "decision, decided_at, decided_by",
        frozenset(),
    ),
    "extraction_instructions": (
        "user_id, project_key, version, instructions, source, write_id, created_at",
        frozenset({"instructions"}),
    ),
    "ingested_messages": ("user_id, message_hash, conversation_id, memories, ingested_at", frozenset()),
}


def owned_rows(conn: Session, user_id: str) -> dict[str, list[dict[str, Any]]]:
    """The user's rows of each table of :data:`OWNED`."""
    return {
        table: read_as_user(conn, user_id, f"SELECT {columns} FROM {table} WHERE user_id = %(user)s", {"user": user_id})
        for table, (columns, _) in OWNED.items()
    }


def put_owned_rows(conn: Session, user_id: str, rows: dict[str, list[dict[str, Any]]]) -> None:
    """Write the user's rows read by :func:`owned_rows` (another cell's), in one transaction; a row
    already here (a move retried) is left as it is."""
    with user_transaction(conn, user_id, source="cell-move"):
        for table, found in rows.items():
            if not found:
                continue
            columns, documents = OWNED[table]
            placeholders = ", ".join(f"%({c})s" for c in columns.split(", "))
            conn.executemany(
                f"INSERT INTO {table} ({columns}) VALUES ({placeholders}) ON CONFLICT DO NOTHING",
                [{k: Jsonb(v) if k in documents else v for k, v in row.items()} for row in found],
            )
