"""The ``usage_daily`` table: a meter's counts added inside the transaction of the work, and read back
(one user's days for ``GET /usage``, or every user's totals for operators).

The upsert is one statement for any number of (kind, model) rows, sent in the transaction's pipeline with
nothing fetched, so it adds no round trip; counts a container kept (reads served by a reader endpoint)
are written in batches by :func:`write_pending_usage`. Rows come sorted (see :meth:`Meter.rows`), so two
transactions of one user lock the same rows in the same order.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from rushmem.store.engine.session import Session
from rushmem.store.engine.transactions import maintenance_transaction, user_transaction
from rushmem.usage import PendingUsage, UsageRow

UPSERT_USAGE = """
INSERT INTO usage_daily AS u (user_id, day, kind, model, calls, input_tokens, output_tokens, characters, items)
SELECT %(usage_user)s, COALESCE(%(usage_day)s::date, (now() AT TIME ZONE 'UTC')::date), t.kind, t.model, t.calls,
       t.input_tokens, t.output_tokens, t.characters, t.items
FROM unnest(%(usage_kinds)s::text[], %(usage_models)s::text[], %(usage_calls)s::bigint[], %(usage_in)s::bigint[],
            %(usage_out)s::bigint[], %(usage_chars)s::bigint[], %(usage_items)s::bigint[])
     AS t(kind, model, calls, input_tokens, output_tokens, characters, items)
ON CONFLICT (user_id, day, kind, model) DO UPDATE SET
    calls         = u.calls + EXCLUDED.calls,
    input_tokens  = u.input_tokens + EXCLUDED.input_tokens,
    output_tokens = u.output_tokens + EXCLUDED.output_tokens,
    characters    = u.characters + EXCLUDED.characters,
    items         = u.items + EXCLUDED.items
"""


def usage_params(user_id: str, rows: Sequence[UsageRow], *, day: dt.date | None = None) -> dict[str, Any]:
    """The upsert's values; ``day``: the UTC day the work was done (default: today's, the database's clock)."""
    return {
        "usage_user": user_id,
        "usage_day": day,
        "usage_kinds": [r.kind for r in rows],
        "usage_models": [r.model for r in rows],
        "usage_calls": [r.count.calls for r in rows],
        "usage_in": [r.count.input_tokens for r in rows],
        "usage_out": [r.count.output_tokens for r in rows],
        "usage_chars": [r.count.characters for r in rows],
        "usage_items": [r.count.items for r in rows],
    }


def add_usage(conn: Session, user_id: str, rows: Sequence[UsageRow]) -> None:
    """Add ``rows`` to the user's counts of today (UTC), in the caller's user transaction.
    Nothing is fetched: in a pipelined transaction it travels with the next statement."""
    if rows:
        conn.execute(UPSERT_USAGE, usage_params(user_id, rows))


_FLUSH_SCOPE = "SELECT set_config('agent_memory.user_id', %s, true), set_config('synchronous_commit', 'off', true)"


def write_pending_usage(conn: Session, pending: Sequence[PendingUsage]) -> None:
    """Write counts kept in the container (:class:`~rushmem.usage.UsageBuffer`): a transaction per
    user and day (row-level security admits one user at a time), all sent in one pipeline, so the
    batch costs one round trip. Commits do not wait for the disk: a crash may lose the last moment's
    counts, never a memory."""
    if not pending:
        return
    with conn.pipeline_of_transactions() as pipelined:
        for item in pending:
            values = usage_params(item.user_id, item.rows, day=item.day)
            if not pipelined:  # the RDS Data API, or pipelining off: a transaction each
                with user_transaction(conn, item.user_id, settings={"synchronous_commit": "off"}):
                    conn.execute(UPSERT_USAGE, values)
                continue
            conn.execute("BEGIN")
            conn.execute(_FLUSH_SCOPE, [item.user_id])
            conn.execute(UPSERT_USAGE, values)
            conn.execute("COMMIT")


_COUNTS = "calls, input_tokens, output_tokens, characters, items"


def user_usage(conn: Session, user_id: str, start: dt.date, end: dt.date) -> list[dict[str, Any]]:
    """The user's usage rows from ``start`` to ``end`` (both included), by day, kind and model."""
    with user_transaction(conn, user_id):
        return conn.execute_dicts(
            f"SELECT day, kind, model, {_COUNTS} FROM usage_daily "
            "WHERE user_id = %s AND day BETWEEN %s AND %s ORDER BY day, kind, model",
            [user_id, start, end],
        ).fetchall()


def all_usage(conn: Session, start: dt.date, end: dt.date) -> list[dict[str, Any]]:
    """Every user's usage over the period, summed by user, kind and model (maintenance role)."""
    with maintenance_transaction(conn, source="usage"):
        return conn.execute_dicts(
            "SELECT user_id, kind, model, sum(calls)::bigint AS calls, sum(input_tokens)::bigint AS input_tokens, "
            "sum(output_tokens)::bigint AS output_tokens, sum(characters)::bigint AS characters, "
            "sum(items)::bigint AS items FROM usage_daily WHERE day BETWEEN %s AND %s "
            "GROUP BY user_id, kind, model ORDER BY user_id, kind, model",
            [start, end],
        ).fetchall()
