"""What several integration tests read or measure on the real database: rows as the owner, the
benchmarks' scratch databases, round trips from libpq's trace."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg

from rushmem.service import Memory
from rushmem.store.engine.pg import PgSession


def round_trips(service: Memory, work: Any, tmp_path: Path) -> int:
    """How many times the client waited for the server, from libpq's trace: each Sync, Flush
    request or simple Query it sent asks the server to answer before the client goes on.
    (Not the sent/answered alternations: psycopg reads early results between sends when they
    are already there, which a loaded machine makes more likely.)"""
    conn = service.admin.db.connection()
    assert isinstance(conn, PgSession)  # libpq's trace: a connection's
    trace = tmp_path / "libpq.trace"
    with trace.open("w") as out:
        conn.pgconn.trace(out.fileno())
        conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            work()
        finally:
            conn.pgconn.untrace()
    # A message line is "F<tab>length<tab>type...": a continuation line of a multi-line SQL text or
    # of a data row (a raw newline in a value) may start with F too, and is not a message.
    message = re.compile(r"^F\t\d+\t(\w+)")
    sent = [m.group(1) for line in trace.read_text().splitlines() if (m := message.match(line))]
    # psycopg follows a Sync with a Flush in the same write: one wait, not two.
    return sum(
        1
        for i, kind in enumerate(sent)
        if kind in ("Sync", "Query") or (kind == "Flush" and (i == 0 or sent[i - 1] != "Sync"))
    )


def rows(database_url: str, query: str, *params: object) -> list[tuple[Any, ...]]:
    """``query``'s rows, read on a connection of its own (as the owner: no row-level security)."""
    with psycopg.connect(database_url) as conn:
        return conn.execute(query, params).fetchall()


def bench_databases(pg_server: str) -> list[str]:
    """The scratch databases a benchmark left behind (it must leave none)."""
    with psycopg.connect(pg_server) as conn:
        return [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'bench\\_%'")]
