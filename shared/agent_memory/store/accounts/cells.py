"""The ``cell_directory`` table (migration 0015): which cell holds each user, in the home cell's
database. Each statement is one user's, under row-level security."""

from __future__ import annotations

from agent_memory.store.engine.connection import Connection
from agent_memory.store.engine.transactions import read_as_user, user_transaction


def cell_entry(conn: Connection, user_id: str) -> tuple[str, bool] | None:
    """The user's (cell, moving), None when the user has no entry yet."""
    rows = read_as_user(
        conn, user_id, "SELECT cell, moving FROM cell_directory WHERE user_id = %(user)s", {"user": user_id}
    )
    return (str(rows[0]["cell"]), bool(rows[0]["moving"])) if rows else None


def claim_cell(conn: Connection, user_id: str, cell: str) -> tuple[str, bool]:
    """The user's entry, written with ``cell`` if there was none (the first write places the user)."""
    with user_transaction(conn, user_id):
        conn.execute(
            "INSERT INTO cell_directory (user_id, cell) VALUES (%s, %s) ON CONFLICT (user_id) DO NOTHING",
            [user_id, cell],
        )
        row = conn.execute("SELECT cell, moving FROM cell_directory WHERE user_id = %s", [user_id]).fetchone()
    assert row is not None
    return str(row[0]), bool(row[1])


def set_cell(conn: Connection, user_id: str, cell: str, *, moving: bool) -> None:
    """Point the user at ``cell`` (a move's steps: hold the writes, then switch)."""
    with user_transaction(conn, user_id):
        conn.execute(
            "INSERT INTO cell_directory (user_id, cell, moving) VALUES (%s, %s, %s) "
            "ON CONFLICT (user_id) DO UPDATE SET cell = EXCLUDED.cell, moving = EXCLUDED.moving, updated_at = now()",
            [user_id, cell, moving],
        )


def forget_cell(conn: Connection, user_id: str) -> None:
    """Delete the user's entry (their erasure: the directory holds their id)."""
    with user_transaction(conn, user_id):
        conn.execute("DELETE FROM cell_directory WHERE user_id = %s", [user_id])
