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
