"""The store's session over the RDS Data API (:class:`~rushmem.store.engine.session.Session`).

The same SQL runs on both engines. What differs is how values travel (:mod:`.dataapi_values`):

- placeholders: ``%s`` / ``%(name)s`` (and ``%b``) become the Data API's ``:name``;
- values: the Data API types a string parameter as varchar and takes no arrays, so every value
  psycopg would send with its own type (UUID, timestamps, JSON, vectors, arrays) travels as
  its PostgreSQL text form and is cast in the statement: ``CAST(:p AS vector)``,
  ``CAST(:p AS uuid[])``. Vectors are pgvector's text form;
- results come back as typed fields with each column's type name, and are decoded to what
  psycopg gives for that type (aware datetimes, UUIDs, dicts for JSON, pgvector Vectors, lists).

Transactions are BeginTransaction / CommitTransaction / RollbackTransaction around statements
carrying the transaction id: the user's scope (set_config(..., true)) is set in the same
transaction as on a connection. There is no pipeline: each statement is one HTTPS request, so a
read as the user is one statement (:meth:`DataApiSession.read_once_as_user`, migration 0017).
There is no session either (requests share the cluster's): what needs one (COPY, SET ROLE, session
locks, libpq's password encryption) is for a direct connection.

An answer is at most 1 MiB and a row at most 64 KB (AWS's Data API limits). The service's limits keep
every row it writes below 64 KB (rushmem_contract.models); a read whose rows may add up to more than
1 MiB (a page of large memories, a write's neighbours, recall's candidates) asks for those that fit,
cut by their bytes in SQL (:func:`~rushmem.store.engine.session.bounded`, and
:meth:`DataApiSession.read_once_as_user`): a page carries on after its last row in a statement of its
own, recall keeps its best candidates. One request in the common case, and no answer the Data API
refuses; any other read that still passes 1 MiB is read again through a cursor, a few rows per
request (:meth:`DataApiSession._read_in_parts`).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import psycopg

from rushmem.providers.rdsdata import DataApi, ResponseTooLarge, StatementFailed
from rushmem.store.engine.dataapi_values import compose, decode_scalar, split_script
from rushmem.store.engine.session import ANSWER_BUDGET, ROW_OVERHEAD, Params, Query, VectorSchema
from rushmem.store.engine.transactions import VECTOR_SCHEMA_LOCK_KEY

# Rows per FETCH when an answer is read in parts: a row is at most 64 KB as the database returns it,
# and JSON escaping at most doubles it in the answer, so 7 rows stay under 1 MiB whatever they hold.
PART_ROWS = 7
# What the parameters of one request may take (AWS: a request is at most 4 MiB with its headers and
# JSON; ASCII JSON texts, which the request's JSON escapes once more: quotes and backslashes).
REQUEST_CHARS = 5 * 512 * 1024
_READS = re.compile(r"^\s*(SELECT|WITH|VALUES|\()", re.IGNORECASE)


class DataApiRows:
    """One Data API answer, whole: its rows (tuples, or dicts by column name), fetched in order."""

    def __init__(self, rows: list[Any] | None, rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount
        self._next = 0

    @property
    def rownumber(self) -> int | None:
        return None if self._rows is None else self._next

    def fetchone(self) -> Any:
        if self._rows is None or self._next >= len(self._rows):
            return None
        self._next += 1
        return self._rows[self._next - 1]

    def fetchall(self) -> list[Any]:
        rows = (self._rows or [])[self._next :]
        self._next += len(rows)
        return rows


class QueuedRows:
    """A statement's answer in a :class:`QueuedWrite`: there once the write was sent, as psycopg
    would give the row (the types its statement was queued with, by the columns' order)."""

    def __init__(self, types: tuple[str, ...] | None) -> None:
        self.types = types
        self._rows: list[tuple[Any, ...]] | None = None
        self._next = 0
        self.rowcount = 0

    @property
    def rownumber(self) -> int | None:
        return None if self._rows is None else self._next

    def fill(self, docs: list[dict[str, Any]]) -> None:
        types = self.types or ()
        self._rows = [tuple(_from_json(t, v) for t, v in zip(types, d.values(), strict=True)) for d in docs]
        self.rowcount = len(self._rows)

    def fetchone(self) -> Any:
        rows = self._sent()
        if self._next >= len(rows):
            return None
        self._next += 1
        return rows[self._next - 1]

    def fetchall(self) -> list[Any]:
        rows = self._sent()[self._next :]
        self._next += len(rows)
        return rows

    def _sent(self) -> list[tuple[Any, ...]]:
        if self._rows is None:
            raise psycopg.ProgrammingError("a queued statement's rows are read after its write was sent")
        return self._rows


class QueuedWrite:
    """The statements of one user's write, queued (``execute`` as a session's) to be sent in one
    request by :meth:`DataApiSession.write_once_as_user`. ``results``: the statements whose rows
    the caller reads, each with its columns' types (a row travels as jsonb, which keeps no types)."""

    def __init__(self, results: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self._results = dict(results or {})
        self.statements: list[dict[str, Any]] = []
        self.answers: list[QueuedRows] = []

    def execute(
        self, query: Query, params: Params | None = None, *, prepare: bool | None = None, binary: bool = False
    ) -> QueuedRows:
        text, values = _from_params(*compose(query, params))
        types = self._results.get(query) if isinstance(query, str) else None
        self.statements.append({"query": text, "params": values, "returns": types is not None})
        self.answers.append(QueuedRows(types))
        return self.answers[-1]


def _from_json(type_name: str, value: Any) -> Any:
    """A column of a row returned as json, as psycopg gives that type (row_to_json's text forms)."""
    if value is None:
        return None
    if type_name == "uuid":
        return uuid.UUID(value)
    if type_name == "bytea":
        return bytes.fromhex(value.removeprefix("\\x"))
    if type_name == "timestamptz":
        return dt.datetime.fromisoformat(value)
    return value


class DataApiSession:
    """The Data API as the store's session: statements outside a transaction commit on their own;
    ``transaction()`` is BeginTransaction ... CommitTransaction, and a savepoint when nested."""

    # Recall asks for its candidates' vectors as sign bits (store.memories.recall): every answer
    # is JSON text under the Data API's 1 MiB limit.
    sign_code_vectors = True
    single_statement_reads = True  # each request costs ~100 ms: see read_once_as_user
    owns_session = False
    autocommit = True

    def __init__(self, api: DataApi) -> None:
        self.api = api
        self.closed = False
        self.vector_schema: VectorSchema | None = None
        self.change_events: str | None = None
        self._transaction_id: str | None = None
        self._savepoints = 0

    def execute(
        self, query: Query, params: Params | None = None, *, prepare: bool | None = None, binary: bool = False
    ) -> DataApiRows:
        if params is None and len(statements := split_script(compose(query, None)[0])) > 1:
            # A script (a migration): one call per statement, in the caller's transaction.
            for statement in statements[:-1]:
                self._run(statement, None, dicts=False)
            query = statements[-1]
        return self._run(query, params, dicts=False)

    def execute_dicts(
        self, query: Query, params: Params | None = None, *, prepare: bool | None = None, binary: bool = False
    ) -> DataApiRows:
        return self._run(query, params, dicts=True)

    def executemany(self, query: Query, params_seq: Iterable[Params]) -> None:
        """One BatchExecuteStatement for every parameter set."""
        sets = [compose(query, params) for params in params_seq]
        if not sets:
            return
        if len({text for text, _ in sets}) != 1:
            raise psycopg.ProgrammingError("executemany's parameter sets would need different casts")
        with _errors():
            self.api.batch_execute(sets[0][0], [p for _, p in sets], self._transaction_id)

    def _run(self, query: Query, params: Params | None, *, dicts: bool) -> DataApiRows:
        text, parameters = compose(query, params)
        response = self._execute(text, parameters)
        metadata = response.get("columnMetadata")
        if not metadata:
            return DataApiRows(None, int(response.get("numberOfRecordsUpdated", 0)))
        names = [str(c.get("label") or c.get("name") or "?column?") for c in metadata]
        types = [str(c.get("typeName", "")) for c in metadata]
        rows = [tuple(decode_scalar(types[i], field) for i, field in enumerate(r)) for r in response.get("records", [])]
        return DataApiRows([dict(zip(names, r, strict=True)) for r in rows] if dicts else rows, len(rows))

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
            self._abandon()
            raise
        transaction_id, self._transaction_id = self._transaction_id, None
        with _errors():
            self.api.commit(transaction_id)

    pipelined_transaction = transaction  # nothing to pipeline: every statement is its own request

    @contextlib.contextmanager
    def pipeline_of_transactions(self) -> Iterator[bool]:
        yield False

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

    def read_once_as_user(
        self,
        user_id: str,
        query: Query,
        params: Mapping[str, Any],
        *,
        settings: Mapping[str, str] | None = None,
        vectors: bool = False,
    ) -> list[Any]:
        """One read under row-level security in a single request (migration 0017): the settings
        (the user first) set for the statement's own transaction, then ``query``, whose rows come back
        as jsonb values (the query selects ``to_jsonb(...)``); with ``vectors``, the vector schema's
        fingerprint from agent_memory_meta, read in the same snapshot (no lock needed: one statement
        cannot see a switch half-way)."""
        schema = self.vector_schema if vectors else None
        scope = {"agent_memory.user_id": user_id, **(settings or {})}
        scope.pop("statement_timeout", None)  # not settable inside a running statement: the login has its own
        inner, values = _from_params(*compose(query, params))
        fingerprint = "(SELECT value FROM agent_memory_meta WHERE key = :meta_key)" if schema else "NULL"
        # The rows in the query's order as far as they fit one answer (the first always; see
        # session.bounded): a query whose rows may pass 1 MiB orders them best first (recall does).
        statement = (
            "WITH a AS (SELECT * FROM agent_memory_read_as(CAST(:settings AS jsonb), :query, CAST(:params AS jsonb)) "
            "WITH ORDINALITY AS a(doc, ord)), "
            "r AS (SELECT doc, ord, sum(octet_length(to_json(doc::text)::text) + :overhead) "
            "OVER (ORDER BY ord ROWS UNBOUNDED PRECEDING) AS am_bytes FROM a) "
            f"SELECT doc AS row, {fingerprint} AS fingerprint FROM r "
            "WHERE ord = 1 OR am_bytes <= :budget ORDER BY ord"
        )
        arguments = [
            {"name": "settings", "value": {"stringValue": json.dumps(scope)}},
            {"name": "query", "value": {"stringValue": inner}},
            {"name": "params", "value": {"stringValue": json.dumps(values)}},
            {"name": "overhead", "value": {"longValue": ROW_OVERHEAD}},
            {"name": "budget", "value": {"longValue": ANSWER_BUDGET}},
        ]
        if schema:
            arguments.append({"name": "meta_key", "value": {"stringValue": schema.meta_key}})
        response = self._execute(statement, arguments)
        records = response.get("records", [])
        if records and schema is not None:
            schema.check(decode_scalar("text", records[0][1]))
        return [decode_scalar("jsonb", record[0]) for record in records]

    def write_once_as_user(
        self,
        user_id: str,
        write: QueuedWrite,
        *,
        settings: Mapping[str, str],
        guard: Query,
        guard_params: Mapping[str, Any],
        expected: Any,
        vectors: bool = False,
    ) -> bool:
        """``write``'s statements in one request, in the statement's own transaction (function
        agent_memory_write_as): the settings (the user first) set, the user's writer lock taken
        (and with ``vectors`` the vector schema's shared lock), then ``guard`` run again under them;
        unless it gives ``expected`` (what the write was planned on, read before), nothing is written
        and psycopg's SerializationFailure is raised. Each queued statement's rows are then in its
        answer. False, and nothing sent, when the request would pass the Data API's 4 MiB."""
        scope = {"agent_memory.user_id": user_id, **settings}
        guard_text, guard_values = _from_params(*compose(guard, guard_params))
        schema_lock: dict[str, Any] = (
            {"longValue": VECTOR_SCHEMA_LOCK_KEY} if vectors and self.vector_schema is not None else {"isNull": True}
        )
        statement = (
            "SELECT am_statement, am_doc FROM agent_memory_write_as(CAST(:settings AS jsonb), :lock_key, "
            "CAST(:schema_lock AS bigint), :guard, CAST(:expected AS jsonb), CAST(:statements AS jsonb))"
        )
        texts = {
            "settings": json.dumps(scope),
            "lock_key": user_id,
            "guard": guard_text,
            "expected": json.dumps({"params": guard_values, "value": expected}),
            "statements": json.dumps(write.statements),
        }
        if sum(len(t) for t in texts.values()) > REQUEST_CHARS:
            return False
        arguments = [{"name": name, "value": {"stringValue": text}} for name, text in texts.items()]
        arguments.append({"name": "schema_lock", "value": schema_lock})
        records = self._execute(statement, arguments).get("records", [])
        docs: dict[int, list[dict[str, Any]]] = {}
        for record in records:
            docs.setdefault(int(decode_scalar("int4", record[0])), []).append(decode_scalar("json", record[1]))
        for n, answer in enumerate(write.answers, start=1):
            if answer.types is not None:
                answer.fill(docs.get(n, []))
        return True

    def _execute(self, text: str, parameters: list[dict[str, Any]]) -> dict[str, Any]:
        """One statement's answer; over 1 MiB, the same statement's rows read in parts."""
        try:
            with _errors():
                return self.api.execute(text, parameters, self._transaction_id)
        except psycopg.Error as exc:
            if not isinstance(exc.__cause__, ResponseTooLarge) or not _READS.match(text):
                raise
        return self._read_in_parts(text, parameters)

    def _read_in_parts(self, text: str, parameters: list[dict[str, Any]]) -> dict[str, Any]:
        """A read whose answer was over 1 MiB, run again as a cursor and fetched PART_ROWS rows at a
        time, in the caller's transaction or one of its own (a cursor lives in a transaction). The
        statement runs twice: a recall whose answer was that large counts its usage twice."""
        self._savepoints += 1
        cursor = f"am_parts_{self._savepoints}"
        with self.transaction():
            self._part(f"DECLARE {cursor} NO SCROLL CURSOR FOR {text}", parameters)
            records: list[Any] = []
            metadata: Any = None
            while True:
                part = self._part(f"FETCH FORWARD {PART_ROWS} FROM {cursor}", [])
                metadata = metadata or part.get("columnMetadata")
                got = part.get("records", [])
                records.extend(got)
                if len(got) < PART_ROWS:
                    break
            self._part(f"CLOSE {cursor}", [])
        return {"records": records, "columnMetadata": metadata, "numberOfRecordsUpdated": 0}

    def _part(self, text: str, parameters: list[dict[str, Any]]) -> dict[str, Any]:
        with _errors():
            return self.api.execute(text, parameters, self._transaction_id)

    def _abandon(self) -> None:
        """Roll the open transaction back, if any (an error may already have ended it server-side)."""
        transaction_id, self._transaction_id = self._transaction_id, None
        if transaction_id is not None:
            with contextlib.suppress(Exception):
                self.api.rollback(transaction_id)

    def close(self) -> None:
        self._abandon()
        self.closed = True


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """A failed statement as the psycopg error class of its SQLSTATE, so the store handles it the same
    way on both engines (QueryCanceled is a statement timeout, UniqueViolation a race ...)."""
    try:
        yield
    except StatementFailed as exc:
        cls: type[psycopg.Error] = psycopg.ProgrammingError
        if exc.sqlstate:
            try:
                cls = psycopg.errors.lookup(exc.sqlstate)
            except KeyError:
                cls = psycopg.DatabaseError
        raise cls(str(exc)) from exc


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
        elif "stringValue" in field:  # a typed value is cast in the statement already (compose)
            expression, values[name] = f"({read}::varchar)", field["stringValue"]
        elif "longValue" in field:
            expression, values[name] = f"({read}::bigint)", str(field["longValue"])
        elif "doubleValue" in field:
            expression, values[name] = f"({read}::float8)", repr(float(field["doubleValue"]))
        elif "booleanValue" in field:
            expression, values[name] = f"({read}::boolean)", "true" if field["booleanValue"] else "false"
        elif "blobValue" in field:
            # The request's blobValue is raw bytes (botocore base64-encodes it); inside jsonb, its base64 text.
            expression, values[name] = f"decode({read}, 'base64')", base64.b64encode(field["blobValue"]).decode()
        else:
            raise psycopg.ProgrammingError(f"parameter {name} has no value")
        # A function, not a replacement string: the expression's backslashes are not escapes.
        text = re.sub(rf"(?<!:):{name}\b", _constant(expression), text)
    return text, values
