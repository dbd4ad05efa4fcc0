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
import datetime as dt
import decimal
import json
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import psycopg
from pgvector import HalfVector, SparseVector, Vector
from psycopg import sql
from psycopg.pq import ExecStatus
from psycopg.rows import RowFactory
from psycopg.types.json import Json, Jsonb

from agent_memory.providers.rdsdata import DataApi, StatementFailed
from agent_memory.store.engine.vector_schema import VectorSchema
from agent_memory_contract.errors import ConfigurationError

# psycopg's placeholders (the same grammar as psycopg's own parser): %s, %b, %t, %(name)s, %%.
_PLACEHOLDER = re.compile(r"%(?:\(([^)]+)\))?(.)")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# ---- values: Python -> a Data API parameter ------------------------------------------------


def _is_vector(value: object) -> bool:
    return isinstance(value, Vector | HalfVector | SparseVector) or (
        isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind == "f"
    )


def _vector_text(value: Any) -> str:
    if isinstance(value, Vector | HalfVector | SparseVector):
        return str(value.to_text())
    return str(Vector(value).to_text())


def _type_of(value: object) -> str | None:
    """The PostgreSQL type psycopg would send ``value`` as, where the Data API's own (varchar,
    bigint, double precision, boolean, bytea) would differ; None: a native value."""
    if value is None or isinstance(value, bool | int | float | str | bytes | bytearray | memoryview):
        return None
    if isinstance(value, np.generic):
        return None
    if isinstance(value, Jsonb):
        return "jsonb"
    if isinstance(value, Json):
        return "json"
    if isinstance(value, uuid.UUID):
        return "uuid"
    if isinstance(value, dt.datetime):
        return "timestamptz" if value.tzinfo is not None else "timestamp"
    if isinstance(value, dt.date):
        return "date"
    if isinstance(value, dt.time):
        return "time"
    if isinstance(value, dt.timedelta):
        return "interval"
    if isinstance(value, decimal.Decimal):
        return "numeric"
    if isinstance(value, HalfVector):
        return "halfvec"
    if isinstance(value, SparseVector):
        return "sparsevec"
    if _is_vector(value):
        return "vector"
    if isinstance(value, list | tuple) or (isinstance(value, np.ndarray) and value.ndim >= 1):
        return _element_type(value) + "[]"
    raise ConfigurationError(f"the Data API path cannot send a {type(value).__name__} parameter")


_NATIVE_ELEMENT = {bool: "boolean", int: "bigint", float: "double precision", str: "text", bytes: "bytea"}


def _element_type(values: Any) -> str:
    for item in values:
        if item is None:
            continue
        if isinstance(item, list | tuple) and not _is_vector(item):
            return _element_type(item)
        for kind, name in _NATIVE_ELEMENT.items():
            if type(item) is kind:
                return name
        if isinstance(item, np.integer):
            return "bigint"
        if isinstance(item, np.floating):
            return "double precision"
        found = _type_of(item)
        return found.removesuffix("[]") if found else "text"
    return "text"  # empty, or all NULL: as psycopg sends an untyped empty list


def _text(value: Any) -> str:
    """PostgreSQL's text input form of a non-native value."""
    if isinstance(value, Jsonb | Json):
        return json.dumps(value.obj)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return f"{value.total_seconds()} seconds"
    if _is_vector(value) or isinstance(value, HalfVector | SparseVector):
        return _vector_text(value)
    if isinstance(value, list | tuple | np.ndarray):
        return "{" + ",".join(_array_item(v) for v in value) + "}"
    return str(value)


def _array_item(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool | np.bool_):
        return "t" if value else "f"
    if isinstance(value, int | float | np.integer | np.floating):
        return repr(float(value)) if isinstance(value, float | np.floating) else str(int(value))
    if isinstance(value, bytes | bytearray | memoryview):
        text = "\\x" + bytes(value).hex()
    elif isinstance(value, list | tuple) and not _is_vector(value):
        return "{" + ",".join(_array_item(v) for v in value) + "}"
    elif isinstance(value, str):
        text = value
    else:
        text = _text(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _field(value: Any) -> dict[str, Any]:
    if value is None:
        return {"isNull": True}
    if isinstance(value, bool | np.bool_):
        return {"booleanValue": bool(value)}
    if isinstance(value, int | np.integer):
        return {"longValue": int(value)}
    if isinstance(value, float | np.floating):
        return {"doubleValue": float(value)}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bytes | bytearray | memoryview):
        return {"blobValue": bytes(value)}
    return {"stringValue": _text(value)}


def _parameter(name: str, value: Any) -> tuple[dict[str, Any], str | None]:
    """The SqlParameter, and the cast its placeholder needs (None: none)."""
    cast = _type_of(value)
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        cast = "numeric"
        return {"name": name, "value": {"stringValue": str(value)}}, cast
    return {"name": name, "value": _field(value)}, cast


def compose(query: Any, params: Sequence[Any] | Mapping[str, Any] | None) -> tuple[str, list[dict[str, Any]]]:
    """psycopg's query and parameters as the Data API's SQL (``:name`` placeholders, casts where
    the value's type needs one) and its parameter list."""
    if isinstance(query, sql.Composable):
        query = query.as_string(None)
    if isinstance(query, bytes | bytearray | memoryview):
        query = bytes(query).decode()
    text = str(query)
    if params is None:
        return text, []  # as psycopg: without parameters, % is no placeholder
    by_name = isinstance(params, Mapping)
    values: list[tuple[str, Any]] = []
    seen: dict[str, tuple[dict[str, Any], str | None]] = {}
    position = 0

    def placeholder(match: re.Match[str]) -> str:
        nonlocal position
        name, fmt = match.group(1), match.group(2)
        if fmt == "%" and name is None:
            return "%"
        if fmt not in "sbt":
            raise psycopg.ProgrammingError(f"only '%s', '%b', '%t' are allowed as placeholders, got '%{fmt}'")
        if by_name:
            if name is None:
                raise psycopg.ProgrammingError("positional placeholder in a query with named parameters")
            if not _NAME.match(name):
                raise psycopg.ProgrammingError(f"parameter name {name!r} is not an identifier")
            assert isinstance(params, Mapping)
            key, value = name, params[name]
        else:
            if name is not None:
                raise psycopg.ProgrammingError("named placeholder in a query with positional parameters")
            assert not isinstance(params, Mapping)
            if position >= len(params):
                raise psycopg.ProgrammingError(f"the query has more placeholders than the {len(params)} parameters")
            key, value = f"p{position + 1}", params[position]
            position += 1
        if key not in seen:
            seen[key] = _parameter(key, value)
            values.append((key, value))
        cast = seen[key][1]
        return f"CAST(:{key} AS {cast})" if cast else f":{key}"

    converted = _PLACEHOLDER.sub(placeholder, text)
    if not by_name and position != len(params):
        raise psycopg.ProgrammingError(
            f"the query has {position} placeholders but {len(params)} parameters were passed"
        )
    return converted, [seen[key][0] for key, _ in values]


def split_script(script: str) -> list[str]:
    """A script's statements (the Data API runs one per call; a migration file has many): split at
    semicolons outside literals, quoted names, dollar-quoted bodies and comments."""
    statements, start, i, n = [], 0, 0, len(script)
    while i < n:
        c = script[i]
        if c in "'\"":
            i = script.find(c, i + 1)
            while i != -1 and i + 1 < n and script[i + 1] == c:
                i = script.find(c, i + 2)
            i = n if i == -1 else i + 1
        elif c == "$" and (tag := re.match(r"\$(?:[A-Za-z_]\w*)?\$", script[i:])):
            end = script.find(tag.group(0), i + len(tag.group(0)))
            i = n if end == -1 else end + len(tag.group(0))
        elif script.startswith("--", i):
            i = n if (end := script.find("\n", i)) == -1 else end
        elif script.startswith("/*", i):
            i = n if (end := script.find("*/", i + 2)) == -1 else end + 2
        elif c == ";":
            statements.append(script[start:i])
            start = i = i + 1
        else:
            i += 1
    statements.append(script[start:])
    return [s.strip() for s in statements if _has_code(s)]


def _has_code(statement: str) -> bool:
    without = re.sub(r"--[^\n]*|/\*.*?\*/", "", statement, flags=re.S)
    return bool(without.strip())


# ---- results: Data API fields -> what psycopg gives -------------------------------------------


def _timestamp(text: str, aware: bool) -> dt.datetime:
    value = dt.datetime.fromisoformat(text.replace(" ", "T", 1))
    if aware and value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)  # the Data API answers in the session's time zone, UTC
    return value


def _scalar(type_name: str, field: Mapping[str, Any]) -> Any:
    if field.get("isNull"):
        return None
    if "stringValue" in field:
        return _from_text(type_name, field["stringValue"])
    if "longValue" in field:
        return int(field["longValue"])
    if "doubleValue" in field:
        return float(field["doubleValue"])
    if "booleanValue" in field:
        return bool(field["booleanValue"])
    if "blobValue" in field:
        return bytes(field["blobValue"])
    if "arrayValue" in field:
        return _array(type_name.removeprefix("_"), field["arrayValue"])
    return None


def _from_text(type_name: str, text: str) -> Any:
    name = type_name.lower()
    if name == "timestamptz":
        return _timestamp(text, aware=True)
    if name == "timestamp":
        return _timestamp(text, aware=False)
    if name == "date":
        return dt.date.fromisoformat(text)
    if name == "uuid":
        return uuid.UUID(text)
    if name in ("json", "jsonb"):
        return json.loads(text)
    if name == "numeric":
        return decimal.Decimal(text)
    if name == "vector":
        return Vector.from_text(text)
    if name == "halfvec":
        return HalfVector.from_text(text)
    if name in ("int2", "int4", "int8", "oid"):
        return int(text)
    if name in ("float4", "float8"):
        return float(text)
    if name == "bool":
        return text in ("t", "true")
    return text


def _array(element: str, value: Mapping[str, Any]) -> list[Any]:
    if "arrayValues" in value:
        return [_array(element, v) for v in value["arrayValues"]]
    for key in ("stringValues", "longValues", "doubleValues", "booleanValues"):
        if key in value:
            items = value[key]
            if key == "stringValues":
                return [None if v is None else _from_text(element, v) for v in items]
            return list(items)
    return []


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
            tuple(_scalar(types[i], field) for i, field in enumerate(record)) for record in response.get("records", [])
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
