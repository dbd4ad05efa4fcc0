"""What the store's SQL runs on: one small protocol, implemented once per engine (a psycopg
connection, :mod:`.pg`; the RDS Data API, :mod:`.dataapi`). Neither imitates the other: each
declares what it can do (the capabilities below), and the SQL that depends on it asks. Each holds
the vector column it was set up to use (:class:`VectorSchema`).

Statements are written once, with DB-API's ``%s`` / ``%(name)s`` placeholders, composed with
:mod:`psycopg.sql` where they vary, values in their Python types (``Jsonb`` for JSON); a failed
statement raises psycopg's error class of its SQLSTATE on both engines.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeAlias

from psycopg import sql

from rushmem_contract.errors import SchemaChanged


@dataclasses.dataclass(frozen=True)
class VectorSchema:
    """Which vector column a connection may use, resolved from agent_memory_meta when it opens
    (:func:`rushmem.store.schema.migrate.prepare_connection`).

    Normally the column ``embedding``, read and write. During the grace period after
    ``rushmem reembed`` switched the store to a new model, a process still configured
    with the previous model reads ``embedding_prev`` and may not write (its vectors would
    land in the new model's column); it should be redeployed with the new model.
    """

    fingerprint: str
    column: str
    current_model: str

    @property
    def writable(self) -> bool:
        return self.column == "embedding"

    @property
    def meta_key(self) -> str:
        """The agent_memory_meta entry naming the model of ``column``."""
        return "embedding_model" if self.writable else "previous_model"

    def check(self, fingerprint: object) -> None:
        """SchemaChanged when the store's model for ``column`` (read in the same transaction or
        statement) is no longer this one: ``rushmem reembed`` switched models."""
        if fingerprint != self.fingerprint:
            raise SchemaChanged(f"the vectors this process reads ({self.column}) are no longer {self.fingerprint}")


Query: TypeAlias = str | bytes | sql.SQL | sql.Composed
Params: TypeAlias = Sequence[Any] | Mapping[str, Any]


class Rows(Protocol):
    """A statement's answer (the part of a DB-API cursor the store reads). Where statements are
    pipelined it arrives when a row is first asked for, or when the transaction ends: ``rownumber``
    is None until then (and for a statement without rows)."""

    @property
    def rowcount(self) -> int: ...

    @property
    def rownumber(self) -> int | None: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Session(Protocol):
    """A session of the store; outside a transaction every statement commits on its own."""

    vector_schema: VectorSchema | None  # the column it was set up to use (None: not checked)
    change_events: str | None  # what the change outbox records of its writes: "ids", "content", None
    # What the engine can do:
    sign_code_vectors: bool  # recall reads its candidates' vectors as sign bits (answers are size-limited)
    single_statement_reads: bool  # read_once_as_user's query runs inside one statement (see there)
    owns_session: bool  # session state (SET ROLE, session advisory locks) lasts from statement to statement
    autocommit: bool

    @property
    def closed(self) -> bool: ...

    def execute(
        self, query: Query, params: Params | None = None, *, prepare: bool | None = None, binary: bool = False
    ) -> Rows:
        """Run a statement; without parameters, a script of several. ``prepare`` and ``binary``
        (results in binary: faster to parse for vectors) are hints an engine without the choice ignores."""
        ...

    def execute_dicts(
        self, query: Query, params: Params | None = None, *, prepare: bool | None = None, binary: bool = False
    ) -> Rows:
        """As :meth:`execute`, each row a dict by column name."""
        ...

    def executemany(self, query: Query, params_seq: Iterable[Params]) -> None:
        """One statement for every parameter set, no rows back."""
        ...

    def transaction(self) -> AbstractContextManager[Any]:
        """A transaction (a savepoint inside one)."""
        ...

    def pipelined_transaction(self) -> AbstractContextManager[None]:
        """A transaction whose statements go out without waiting where the engine can (BEGIN with the
        first, COMMIT with the last: a read is one round trip); elsewhere :meth:`transaction`."""
        ...

    def pipeline_of_transactions(self) -> AbstractContextManager[bool]:
        """A pipeline for several whole transactions the block sends itself (``BEGIN`` ... ``COMMIT``),
        all sent at once; False, and no pipeline, where there can be none: the caller then runs its
        transactions one by one."""
        ...

    def read_once_as_user(
        self,
        user_id: str,
        query: Query,
        params: Mapping[str, Any],
        *,
        settings: Mapping[str, str] | None = None,
        vectors: bool = False,
    ) -> list[Any]:
        """``query``'s rows read as ``user_id`` under row-level security (with the transaction-local
        ``settings``) in one request or round trip, each a dict by column name; with ``vectors``,
        SchemaChanged when the store no longer uses the model this session was set up for. With
        :attr:`single_statement_reads` (agent_memory_read_as, migration 0017), ``query`` must yield
        each row as one jsonb value (:func:`json_rows`), and the rows come back as those documents."""
        ...


def json_rows(query: str) -> str:
    """``query`` with each row as one jsonb value, as :attr:`Session.single_statement_reads` asks."""
    return f"SELECT to_jsonb(r) FROM ({query}) AS r"


def vector_column(conn: Session) -> str:
    """The embedding column ``conn`` reads (a re-embedding's grace period: the previous model's)."""
    return conn.vector_schema.column if conn.vector_schema is not None else "embedding"


# The RDS Data API answers at most 1 MiB. A read of rows that may be large (a page of the largest
# memories is megabytes) asks for those that fit, in its order, and carries on after the last one in
# a statement of its own (:func:`bounded`): never an answer the Data API refuses. A row weighs its
# composite text JSON-escaped (at least what its fields take in the answer: the same characters,
# quoted and escaped once more) plus ROW_OVERHEAD for each field's wrapper; what is left of the MiB
# is for the column metadata. The common case (rows of a few KB) is one statement, as before.
ANSWER_BUDGET = 1024 * 1024 - 64 * 1024
ROW_OVERHEAD = 1024


def bounded(query: sql.Composable, columns: str, order: str) -> sql.Composed:
    """``query``'s rows (``columns``, in ``order``) as far as they fit :data:`ANSWER_BUDGET` (the
    first always: a row is under 64 KB), each with ``am_rows``: how many ``query`` had, so the
    caller knows whether it was cut (:func:`cut`)."""
    return sql.SQL(
        "SELECT {columns}, am_rows FROM ("
        "SELECT am_q.*, count(*) OVER () AS am_rows, row_number() OVER (ORDER BY {order}) AS am_n, "
        "sum(octet_length(to_json(am_q::text)::text) + {overhead}) "
        "OVER (ORDER BY {order} ROWS UNBOUNDED PRECEDING) AS am_bytes "
        "FROM ({query}) AS am_q) AS am_page WHERE am_n = 1 OR am_bytes <= {budget} ORDER BY {order}"
    ).format(
        columns=sql.SQL(columns),
        order=sql.SQL(order),
        overhead=sql.Literal(ROW_OVERHEAD),
        budget=sql.Literal(ANSWER_BUDGET),
        query=query,
    )


def oldest_first(
    conn: Session, query: str, columns: str, params: dict[str, Any], *, limit: int
) -> list[dict[str, Any]]:
    """Up to ``limit`` rows of ``query`` (ordered by ``created_at, id``, taking ``limit``,
    ``after_at`` and ``after_id`` besides ``params``), read in :func:`bounded` statements, each at
    most one Data API answer: one unless the rows are large."""
    found: list[dict[str, Any]] = []
    after: tuple[Any, Any] = (None, None)
    while len(found) < limit:
        page = {**params, "limit": limit - len(found), "after_at": after[0], "after_id": after[1]}
        rows = conn.execute_dicts(bounded(sql.SQL(query), columns, "created_at, id"), page).fetchall()
        found += rows
        if not cut(rows):
            break
        after = (rows[-1]["created_at"], rows[-1]["id"])
    return found


def cut(rows: list[dict[str, Any]]) -> bool:
    """Whether a :func:`bounded` read left rows out (and drops each row's ``am_rows``)."""
    total = 0
    for row in rows:
        total = int(row.pop("am_rows"))
    return len(rows) < total
