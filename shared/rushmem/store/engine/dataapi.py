"""The store's statements through the RDS Data API: a connection-like object with the part of
psycopg's Connection the service's transactions use (``execute``, ``cursor``, ``transaction``).

The same SQL runs on both paths. What differs is how values travel:

- placeholders: psycopg's ``%s`` / ``%(name)s`` (and ``%b``) become the Data API's ``:name``;
- values: the Data API types a string parameter as varchar and takes no arrays, so every value
  psycopg would send with its own type (UUID, timestamps, JSON, vectors, arrays) travels as
  its PostgreSQL text form and is cast in the statement: ``CAST(:p AS vector)``,
  ``CAST(:p AS uuid[])``. Vectors are pgvector's text form;
- results come back as typed fields with each column's type name, and are decoded to what
  psycopg gives for that type (aware datetimes, UUIDs, dicts for JSON, pgvector Vectors, lists).

Transactions are BeginTransaction / CommitTransaction / RollbackTransaction around statements
carrying the transaction id: the user's scope (set_config(..., true)) is set in the same
transaction as on a connection. There is no pipeline: each statement is one HTTPS request.

Maintenance that needs a real session (COPY, pipelines, libpq's password encryption) is not
here: a connection-only attribute raises ConfigurationError naming it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import psycopg
from psycopg.pq import ExecStatus
from psycopg.rows import RowFactory

from rushmem.providers.rdsdata import DataApi, StatementFailed
from rushmem.store.engine.dataapi_values import compose, decode_scalar, split_script
from rushmem.store.engine.vector_schema import VectorSchema
from rushmem_contract.errors import ConfigurationError


class _Shape:
    """What psycopg's row factories read of a result: its status and column names."""

    status = ExecStatus.TUPLES_OK

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.nfields = len(names)

    def fname(self, index: int) -> bytes:
        return self.names[index].encode()


class DataApiCursor:
    """A cursor over one Data API answer; rows are made by psycopg's row factories."""

    _encoding = "utf-8"  # read by psycopg's row factories

    def __init__(self, conn: DataApiConnection, row_factory: RowFactory[Any] | None = None) -> None:
        self._conn = conn
        self._row_factory = row_factory
        self.pgresult: _Shape | None = None
        self.rowcount = -1
        self._rows: list[Any] = []
        self._next = 0

    def __enter__(self) -> DataApiCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._rows = []

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool | None = None
    ) -> DataApiCursor:
        text, parameters = compose(query, params)
        response = self._conn.run_statement(text, parameters)
        self._load(response)
        return self

    def executemany(self, query: Any, params_seq: Sequence[Any], *, returning: bool = False) -> None:
        """One BatchExecuteStatement for every parameter set (a DML statement, no rows back)."""
        sets = [compose(query, params) for params in params_seq]
        if not sets:
            return
        if len({text for text, _ in sets}) != 1:
            raise psycopg.ProgrammingError("executemany's parameter sets would need different casts")
        response = self._conn.run_batch(sets[0][0], [p for _, p in sets])
        self.pgresult = None
        self.rowcount = len(response.get("updateResults", []))
        self._rows = []

    def _load(self, response: Mapping[str, Any]) -> None:
        self._next = 0
        metadata = response.get("columnMetadata")
        if not metadata:
            self.pgresult = None
            self._rows = []
            self.rowcount = int(response.get("numberOfRecordsUpdated", 0))
            return
        names = [str(c.get("label") or c.get("name") or "?column?") for c in metadata]
        types = [str(c.get("typeName", "")) for c in metadata]
        self.pgresult = _Shape(names)
        decoded = [
            tuple(decode_scalar(types[i], field) for i, field in enumerate(record))
            for record in response.get("records", [])
        ]
        make = (self._row_factory or _tuple_row)(self)  # type: ignore[arg-type]
        self._rows = [make(values) for values in decoded]
        self.rowcount = len(self._rows)

    def fetchone(self) -> Any:
        if self._next >= len(self._rows):
            return None
        row = self._rows[self._next]
        self._next += 1
        return row

    def fetchall(self) -> list[Any]:
        rows = self._rows[self._next :]
        self._next = len(self._rows)
        return rows

    def __iter__(self) -> Iterator[Any]:
        while (row := self.fetchone()) is not None:
            yield row


def _tuple_row(cursor: object) -> Any:
    return tuple


class NeedsConnection(ConfigurationError, AttributeError):
    """A psycopg-only attribute (pgconn, info, adapters, COPY ...) asked of the Data API path; an
    AttributeError too, so ``getattr(conn, name, default)`` keeps working."""


class DataApiConnection:
    """The Data API as the store's connection: statements outside a transaction commit on their
    own (autocommit, as the service's connections); ``transaction()`` is BeginTransaction ...
    CommitTransaction, and a savepoint when nested."""

    autocommit = True
    pipeline_transactions = False  # nothing to pipeline: every statement is its own request
    broken = False

    # Recall asks for its candidates' vectors as sign bits (store.memories.recall): every answer
    # is JSON text under the Data API's 1 MiB limit.
    sign_code_vectors = True
    # Reads run as one statement (read_as_user below), not a four-request transaction.
    single_statement_reads = True

    def __init__(self, api: DataApi) -> None:
        self.api = api
        self.closed = False
        self.vector_schema: VectorSchema | None = None
        self.change_events: str | None = None
        self.prepare_threshold: int | None = None
        self._transaction_id: str | None = None
        self._savepoints = 0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise NeedsConnection(
            f"{name} needs a direct PostgreSQL connection; the RDS Data API path does not have one "
            "(run this task with AGENT_MEMORY_DB_HOST or AGENT_MEMORY_DATABASE_URL)"
        )

    def run_statement(self, text: str, parameters: list[dict[str, Any]]) -> dict[str, Any]:
        try:
            return self.api.execute(text, parameters, self._transaction_id)
        except StatementFailed as exc:
            raise _psycopg_error(exc) from exc

    def run_batch(self, text: str, parameter_sets: list[list[dict[str, Any]]]) -> dict[str, Any]:
        try:
            return self.api.batch_execute(text, parameter_sets, self._transaction_id)
        except StatementFailed as exc:
            raise _psycopg_error(exc) from exc

    def cursor(self, *, row_factory: RowFactory[Any] | None = None, binary: bool = False) -> DataApiCursor:
        return DataApiCursor(self, row_factory)

    def execute(
        self, query: Any, params: Any = None, *, prepare: bool | None = None, binary: bool = False
    ) -> DataApiCursor:
        if params is None:
            text, _ = compose(query, None)
            statements = split_script(text)
            if len(statements) > 1:
                # A script (a migration): one call per statement, in the caller's transaction.
                cursor = self.cursor()
                for statement in statements:
                    cursor.execute(statement)
                return cursor
        return self.cursor().execute(query, params)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        if self._transaction_id is not None:
            with self._savepoint():
                yield
            return
        self._transaction_id = self.api.begin()
        try:
            yield
        except BaseException:
            transaction_id, self._transaction_id = self._transaction_id, None
            with contextlib.suppress(Exception):  # an error may already have ended it server-side
                self.api.rollback(transaction_id)
            raise
        transaction_id, self._transaction_id = self._transaction_id, None
        try:
            self.api.commit(transaction_id)
        except StatementFailed as exc:
            raise _psycopg_error(exc) from exc

    @contextlib.contextmanager
    def _savepoint(self) -> Iterator[None]:
        self._savepoints += 1
        name = f"am_sp_{self._savepoints}"
        self.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            self.execute(f"ROLLBACK TO SAVEPOINT {name}")
            raise
        self.execute(f"RELEASE SAVEPOINT {name}")

    @contextlib.contextmanager
    def pipeline(self) -> Iterator[None]:
        yield

    def rollback(self) -> None:
        if self._transaction_id is not None:
            transaction_id, self._transaction_id = self._transaction_id, None
            self.api.rollback(transaction_id)

    def close(self) -> None:
        if self._transaction_id is not None:
            with contextlib.suppress(Exception):
                self.rollback()
        self.closed = True


def _psycopg_error(exc: StatementFailed) -> psycopg.Error:
    """The psycopg error class of the statement's SQLSTATE, so the store handles a failed statement
    the same way on both paths (QueryCanceled is a statement timeout, UniqueViolation a race ...)."""
    cls: type[psycopg.Error] = psycopg.ProgrammingError
    if exc.sqlstate:
        try:
            cls = psycopg.errors.lookup(exc.sqlstate)
        except KeyError:
            cls = psycopg.DatabaseError
    return cls(str(exc))


_HINT_CASTS = {
    "DATE": "date",
    "TIME": "time",
    "TIMESTAMP": "timestamp",
    "UUID": "uuid",
    "DECIMAL": "numeric",
    "JSON": "jsonb",
}


def _constant(text: str) -> Callable[[re.Match[str]], str]:
    return lambda _match: text


def _from_params(text: str, parameters: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """A composed statement's ``:name`` placeholders as reads of ``$1``, a jsonb object of the
    values' text forms, typed as the Data API would type the parameters."""
    values: dict[str, Any] = {}
    for parameter in parameters:
        name, field = parameter["name"], parameter["value"]
        read = f"($1->>'{name}')"
        if field.get("isNull"):
            expression = "NULL"
            values[name] = None
        elif "stringValue" in field:
            expression = f"({read}::{_HINT_CASTS.get(parameter.get('typeHint', ''), 'varchar')})"
            values[name] = field["stringValue"]
        elif "longValue" in field:
            expression, values[name] = f"({read}::bigint)", str(field["longValue"])
        elif "doubleValue" in field:
            expression, values[name] = f"({read}::float8)", repr(float(field["doubleValue"]))
        elif "booleanValue" in field:
            expression, values[name] = f"({read}::boolean)", "true" if field["booleanValue"] else "false"
        elif "blobValue" in field:
            # The request's blobValue is raw bytes (botocore base64-encodes it); inside jsonb, its base64 text.
            blob = field["blobValue"]
            text_form = base64.b64encode(blob).decode() if isinstance(blob, bytes | bytearray) else str(blob)
            expression, values[name] = f"decode({read}, 'base64')", text_form
        else:
            raise psycopg.ProgrammingError(f"parameter {name} has no value")
        # A function, not a replacement string: the expression's backslashes are not escapes.
        text = re.sub(rf"(?<!:):{name}\b", _constant(expression), text)
    return text, values


def read_as_user(
    conn: DataApiConnection,
    query: str,
    params: Mapping[str, Any],
    settings: Mapping[str, str],
    meta_key: str | None,
) -> tuple[list[Any], Any]:
    """One read under row-level security in a single Data API request (migration 0017): the
    settings (the user first) set for the statement's own transaction, then ``query``, whose rows
    come back as jsonb values (the query selects ``to_jsonb(...)``); and the vector schema's
    fingerprint from agent_memory_meta, read in the same snapshot (no lock needed: one statement
    cannot see a switch half-way)."""
    text, parameters = compose(query, params)
    inner, values = _from_params(text, parameters)
    fingerprint = "(SELECT value FROM agent_memory_meta WHERE key = :meta_key)" if meta_key else "NULL"
    statement = (
        "SELECT agent_memory_read_as(CAST(:settings AS jsonb), :query, CAST(:params AS jsonb)) AS row, "
        f"{fingerprint} AS fingerprint"
    )
    arguments = [
        {"name": "settings", "value": {"stringValue": json.dumps(dict(settings))}},
        {"name": "query", "value": {"stringValue": inner}},
        {"name": "params", "value": {"stringValue": json.dumps(values)}},
    ]
    if meta_key:
        arguments.append({"name": "meta_key", "value": {"stringValue": meta_key}})
    cursor = conn.cursor()
    cursor._load(conn.run_statement(statement, arguments))
    rows = cursor.fetchall()
    return [row[0] for row in rows], rows[0][1] if rows else None


def read_rows_as_user(conn: DataApiConnection, user_id: str, query: str, params: Mapping[str, Any]) -> list[Any]:
    """``query``'s rows as jsonb documents, read as ``user_id`` in one request (:func:`read_as_user`,
    without a vector schema check): a read on every ingested conversation costs one request."""
    documents, _ = read_as_user(
        conn, f"SELECT to_jsonb(r) FROM ({query}) AS r", params, {"agent_memory.user_id": user_id}, None
    )
    return documents
