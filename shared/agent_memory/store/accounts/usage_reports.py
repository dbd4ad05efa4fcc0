"""Reading usage back: one user's days (``GET /usage``), or every user's totals (operators)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from psycopg.rows import dict_row

from agent_memory.store.engine.connection import Connection
from agent_memory.store.engine.transactions import maintenance_transaction, user_transaction

_COUNTS = "calls, input_tokens, output_tokens, characters, items"


def user_usage(conn: Connection, user_id: str, start: dt.date, end: dt.date) -> list[dict[str, Any]]:
    """The user's usage rows from ``start`` to ``end`` (both included), by day, kind and model."""
    with user_transaction(conn, user_id), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            f"SELECT day, kind, model, {_COUNTS} FROM usage_daily "
            "WHERE user_id = %s AND day BETWEEN %s AND %s ORDER BY day, kind, model",
            [user_id, start, end],
        ).fetchall()


def all_usage(conn: Connection, start: dt.date, end: dt.date) -> list[dict[str, Any]]:
    """Every user's usage over the period, summed by user, kind and model (maintenance role)."""
    with maintenance_transaction(conn, source="usage"), conn.cursor(row_factory=dict_row) as cur:
        return cur.execute(
            "SELECT user_id, kind, model, sum(calls)::bigint AS calls, sum(input_tokens)::bigint AS input_tokens, "
            "sum(output_tokens)::bigint AS output_tokens, sum(characters)::bigint AS characters, "
            "sum(items)::bigint AS items FROM usage_daily WHERE day BETWEEN %s AND %s "
            "GROUP BY user_id, kind, model ORDER BY user_id, kind, model",
            [start, end],
        ).fetchall()
