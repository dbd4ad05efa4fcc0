"""A local stand-in for the RDS Data API: botocore's real rds-data requests (REST-JSON, POST
/Execute, /BatchExecute, /BeginTransaction, /CommitTransaction, /RollbackTransaction) answered
on 127.0.0.1 by running each statement on a real PostgreSQL (the embedded test server).

It keeps the Data API's rules that the store's SQL must live with:
- ``:name`` placeholders; a string parameter is typed varchar, a long bigint, a double float8
  (typeHint DATE, TIME, TIMESTAMP, UUID, DECIMAL, JSON types it otherwise); no array parameters;
- results as typed fields with column metadata (typeName); arrays as arrayValue; timestamps as
  'YYYY-MM-DD HH:MM:SS[.ffffff]' in UTC; other types in their text form;
- one statement per call; transaction ids from BeginTransaction, forgotten after 3 minutes idle;
- an answer over 1 MiB, or a row over 64 KB, is refused (BadRequestException, with the names AWS's
  troubleshooting page gives these errors), both counted in bytes of UTF-8 (a 4-byte character is 4
  bytes), the row as its fields sit in the answer; a SQL error is a DatabaseErrorException whose
  message ends with "SQLState: XXXXX";
- ``pause(n)``: the next n requests answer DatabaseResumingException, as a paused cluster does.

Fixtures: ``data_api`` (the running stand-in) and ``data_api_settings`` (Settings for a test's
database through it, logged in as a member of agent_memory_app, as the stack's request functions).
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from rushmem.config import Settings
from rushmem.embeddings.hashing import HashEmbedder

MAX_RESPONSE_BYTES = 1024 * 1024
MAX_ROW_BYTES = 64 * 1024
TRANSACTION_IDLE_S = 180.0
CLUSTER_ARN = "arn:aws:rds:us-east-1:123456789012:cluster:agent-memory-standin"

_HINTS = {
    "DATE": "date",
    "TIME": "time",
    "TIMESTAMP": "timestamp",
    "UUID": "uuid",
    "DECIMAL": "numeric",
    "JSON": "json",
}
_INTEGERS = {"int2", "int4", "int8", "oid", "xid"}
_FLOATS = {"float4", "float8"}


def answer_bytes(value: Any) -> int:
    """Bytes of ``value`` as JSON in UTF-8, as the answer carries it."""
    return len(json.dumps(value, ensure_ascii=False).encode())


class DataApiError(Exception):
    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


# ---- the SQL: :name -> psycopg's %(name)s, typed as the Data API types it --------------------


def _placeholder(name: str, parameter: dict[str, Any]) -> tuple[str, Any]:
    value = parameter.get("value") or {}
    hint = parameter.get("typeHint")
    if "arrayValue" in value:
        raise DataApiError("BadRequestException", "Array parameters are not supported.")
    if value.get("isNull"):
        return f"%({name})s", None
    if "stringValue" in value:
        cast = _HINTS.get(hint, "varchar") if hint else "varchar"
        return f"(%({name})s::{cast})", value["stringValue"]
    if "longValue" in value:
        return f"(%({name})s::bigint)", int(value["longValue"])
    if "doubleValue" in value:
        return f"(%({name})s::float8)", float(value["doubleValue"])
    if "booleanValue" in value:
        return f"(%({name})s::boolean)", bool(value["booleanValue"])
    if "blobValue" in value:
        return f"(%({name})s::bytea)", base64.b64decode(value["blobValue"])
    raise DataApiError("BadRequestException", f"parameter {name} has no value")


def translate(sql: str, parameters: list[dict[str, Any]]) -> tuple[str, dict[str, Any] | None]:
    """The Data API's statement as psycopg's: placeholders outside literals, identifiers and comments."""
    given = {p["name"]: p for p in parameters}
    values: dict[str, Any] = {}
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"":
            end = sql.index(c, i + 1) if c in sql[i + 1 :] else n
            while end + 1 < n and sql[end + 1] == c:  # '' inside a literal
                end = sql.index(c, end + 2)
            out.append(sql[i : end + 1].replace("%", "%%") if parameters else sql[i : end + 1])
            i = end + 1
        elif c == "$" and (m := re.match(r"\$([A-Za-z_]\w*)?\$", sql[i:])):
            tag = m.group(0)
            end = sql.find(tag, i + len(tag))
            end = n if end < 0 else end + len(tag)
            out.append(sql[i:end].replace("%", "%%") if parameters else sql[i:end])
            i = end
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            out.append(sql[i:end].replace("%", "%%") if parameters else sql[i:end])
            i = end
        elif sql.startswith("::", i):
            out.append("::")
            i += 2
        elif c == ":" and (m := re.match(r":([A-Za-z_]\w*)", sql[i:])):
            name = m.group(1)
            if name not in given:
                raise DataApiError("BadRequestException", f"No value specified for parameter: {name}")
            text, value = _placeholder(name, given[name])
            values[name] = value
            out.append(text)
            i += len(m.group(0))
        else:
            out.append("%%" if c == "%" and parameters else c)
            i += 1
    return "".join(out), (values if parameters else None)


# ---- results: PostgreSQL's text output -> Data API fields ----------------------------------------


def _parse_array(text: str) -> Any:
    """PostgreSQL's array output ({a,"b c",NULL,{1,2}}) as nested lists of str/None."""
    pos = 0

    def parse() -> list[Any]:
        nonlocal pos
        assert text[pos] == "{"
        pos += 1
        items: list[Any] = []
        while pos < len(text):
            c = text[pos]
            if c == "}":
                pos += 1
                return items
            if c == ",":
                pos += 1
            elif c == "{":
                items.append(parse())
            elif c == '"':
                pos += 1
                buf = []
                while text[pos] != '"':
                    if text[pos] == "\\":
                        pos += 1
                    buf.append(text[pos])
                    pos += 1
                pos += 1
                items.append("".join(buf))
            else:
                end = pos
                while text[end] not in ",}":
                    end += 1
                raw = text[pos:end]
                items.append(None if raw == "NULL" else raw)
                pos = end
        return items

    if text.startswith("["):  # explicit bounds, [0:1]={...}
        text = text[text.index("=") + 1 :]
    return parse()


def _timestamp(text: str, type_name: str) -> str:
    return text[:-3] if type_name == "timestamptz" and text.endswith("+00") else text


def _scalar_field(type_name: str, text: str | None) -> dict[str, Any]:
    if text is None:
        return {"isNull": True}
    if type_name in _INTEGERS:
        return {"longValue": int(text)}
    if type_name in _FLOATS:
        return {"doubleValue": float(text)}
    if type_name == "bool":
        return {"booleanValue": text == "t"}
    if type_name == "bytea":
        return {"blobValue": base64.b64encode(bytes.fromhex(text[2:])).decode()}
    if type_name in ("timestamptz", "timestamp"):
        return {"stringValue": _timestamp(text, type_name)}
    return {"stringValue": text}


def _array_value(element: str, items: list[Any]) -> dict[str, Any]:
    if items and all(isinstance(i, list) for i in items):
        return {"arrayValues": [_array_value(element, i) for i in items]}
    if element in _INTEGERS:
        return {"longValues": [None if i is None else int(i) for i in items]}
    if element in _FLOATS:
        return {"doubleValues": [None if i is None else float(i) for i in items]}
    if element == "bool":
        return {"booleanValues": [None if i is None else i == "t" for i in items]}
    return {"stringValues": [None if i is None else _timestamp(i, element) for i in items]}


def _field(type_name: str, text: str | None) -> dict[str, Any]:
    if text is not None and type_name.startswith("_"):
        return {"arrayValue": _array_value(type_name[1:], _parse_array(text))}
    return _scalar_field(type_name, text)


# ---- the server ---------------------------------------------------------------------------------


class _Transaction:
    def __init__(self, conn: psycopg.Connection[Any], key: tuple[str, str]) -> None:
        self.conn = conn
        self.key = key  # the login and database whose idle sessions it returns to
        self.used = time.monotonic()


class DataApiStandIn:
    """The stand-in: ``logins`` maps a secret ARN to a conninfo (the database comes per request)."""

    def __init__(self) -> None:
        self.logins: dict[str, str] = {}
        self.requests: dict[str, int] = {}
        self.log: list[str] = []  # each request: its operation and the start of its SQL
        self.response_bytes: list[int] = []  # each answer's size, refused ones too
        self.refused: list[str] = []  # "row" or "answer": each request refused for its size
        self._resuming = 0
        self._transactions: dict[str, _Transaction] = {}
        self._idle: dict[tuple[str, str], list[psycopg.Connection[Any]]] = {}
        self._type_names: dict[int, str] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> DataApiStandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            conns = [t.conn for t in self._transactions.values()]
            conns += [c for idle in self._idle.values() for c in idle]
            self._transactions.clear()
            self._idle.clear()
        for conn in conns:
            conn.close()

    def close_idle(self) -> None:
        """Close the connections kept between requests (a database with sessions cannot be copied or
        dropped; the real service's are its own, and a restored cluster is another cluster anyway)."""
        with self._lock:
            conns = [c for idle in self._idle.values() for c in idle]
            self._idle.clear()
        for conn in conns:
            conn.close()

    def pause(self, requests: int) -> None:
        """The next ``requests`` requests find the cluster resuming from auto-pause."""
        with self._lock:
            self._resuming = requests

    def reset_counts(self) -> dict[str, int]:
        with self._lock:
            counts, self.requests = self.requests, {}
        return counts

    # -- connections ----------------------------------------------------------------------------

    def _connect(self, secret_arn: str, database: str) -> psycopg.Connection[Any]:
        if secret_arn not in self.logins:
            raise DataApiError("BadRequestException", f"Secrets Manager can't find the specified secret: {secret_arn}")
        conn = psycopg.connect(make_conninfo(self.logins[secret_arn], dbname=database), autocommit=True)
        conn.execute("SET TIME ZONE 'UTC'")
        conn.execute("SET DateStyle = ISO")
        return conn

    @contextlib.contextmanager
    def _autocommit(self, secret_arn: str, database: str) -> Iterator[psycopg.Connection[Any]]:
        key = (secret_arn, database)
        with self._lock:
            idle = self._idle.setdefault(key, [])
            conn = idle.pop() if idle else None
        if conn is None or conn.closed:
            conn = self._connect(secret_arn, database)
        try:
            yield conn
        finally:
            if not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                with self._lock:
                    self._idle.setdefault(key, []).append(conn)
            else:
                conn.close()

    def _transaction(self, transaction_id: str) -> _Transaction:
        with self._lock:
            found = self._transactions.get(transaction_id)
            if found is not None and time.monotonic() - found.used > TRANSACTION_IDLE_S:
                del self._transactions[transaction_id]
                found.conn.close()
                found = None
        if found is None:
            raise DataApiError("TransactionNotFoundException", f"Transaction {transaction_id} is not found", 404)
        found.used = time.monotonic()
        return found

    def _type_name(self, conn: psycopg.Connection[Any], oid: int) -> str:
        if oid not in self._type_names:
            row = conn.execute("SELECT typname FROM pg_type WHERE oid = %s", [oid]).fetchone()
            self._type_names[oid] = row[0] if row else "unknown"
        return self._type_names[oid]

    # -- operations -----------------------------------------------------------------------------

    def _run(self, conn: psycopg.Connection[Any], sql: str, parameters: list[dict[str, Any]]) -> dict[str, Any]:
        text, values = translate(sql, parameters)
        cur = conn.cursor()
        try:
            cur.execute(text, values)
        except psycopg.Error as exc:
            diag = exc.diag
            raise DataApiError(
                "DatabaseErrorException", f"ERROR: {diag.message_primary or exc}; SQLState: {exc.sqlstate}"
            ) from exc
        if cur.description is None:
            return {"numberOfRecordsUpdated": max(cur.rowcount, 0), "generatedFields": []}
        types = [self._type_name(conn, c.type_code) for c in cur.description]
        # Every column as PostgreSQL's text output, as the Data API reads it.
        records = []
        pgresult = cur.pgresult
        assert pgresult is not None
        for r in range(pgresult.ntuples):
            row = []
            for c, type_name in enumerate(types):
                raw = pgresult.get_value(r, c)
                row.append(_field(type_name, None if raw is None else bytes(raw).decode()))
            if answer_bytes(row) > MAX_ROW_BYTES:
                self.refused.append("row")
                raise DataApiError("BadRequestException", "Packet for query is too large: a row is over 64 KB")
            records.append(row)
        metadata = [
            {"name": c.name, "label": c.name, "typeName": t, "type": 1111, "arrayBaseColumnType": 0}
            for c, t in zip(cur.description, types, strict=True)
        ]
        return {"records": records, "columnMetadata": metadata, "numberOfRecordsUpdated": 0}

    def execute(self, body: dict[str, Any]) -> dict[str, Any]:
        sql, parameters = body["sql"], body.get("parameters", [])
        if body.get("transactionId"):
            return self._run(self._transaction(body["transactionId"]).conn, sql, parameters)
        with self._autocommit(body["secretArn"], body.get("database", "postgres")) as conn:
            return self._run(conn, sql, parameters)

    def batch_execute(self, body: dict[str, Any]) -> dict[str, Any]:
        results: list[dict[str, Any]] = []
        sets = body.get("parameterSets") or [[]]

        def run_all(conn: psycopg.Connection[Any]) -> None:
            for parameters in sets:
                self._run(conn, body["sql"], parameters)
                results.append({"generatedFields": []})

        if body.get("transactionId"):
            run_all(self._transaction(body["transactionId"]).conn)
        else:
            with self._autocommit(body["secretArn"], body.get("database", "postgres")) as conn, conn.transaction():
                run_all(conn)
        return {"updateResults": results}

    def begin(self, body: dict[str, Any]) -> dict[str, Any]:
        key = (body["secretArn"], body.get("database", "postgres"))
        with self._lock:
            idle = self._idle.setdefault(key, [])
            conn = idle.pop() if idle else None
        if conn is None or conn.closed:
            conn = self._connect(*key)
        conn.execute("BEGIN")
        transaction_id = base64.b64encode(uuid.uuid4().bytes * 3).decode()
        with self._lock:
            self._transactions[transaction_id] = _Transaction(conn, key)
        return {"transactionId": transaction_id}

    def _end(self, body: dict[str, Any], statement: str, status: str) -> dict[str, Any]:
        transaction = self._transaction(body["transactionId"])
        with self._lock:
            self._transactions.pop(body["transactionId"], None)
        conn = transaction.conn
        try:
            conn.execute(statement)
        except psycopg.Error as exc:
            conn.close()
            raise DataApiError(
                "DatabaseErrorException", f"ERROR: {exc.diag.message_primary}; SQLState: {exc.sqlstate}"
            ) from exc
        if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            with self._lock:
                self._idle.setdefault(transaction.key, []).append(conn)
        else:
            conn.close()
        return {"transactionStatus": status}

    def dispatch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        operation = path.strip("/")
        with self._lock:
            self.requests[operation] = self.requests.get(operation, 0) + 1
            self.log.append(f"{operation} {' '.join(str(body.get('sql', '')).split())[:150]}")
            resuming = self._resuming > 0
            if resuming:
                self._resuming -= 1
        if resuming and operation in ("Execute", "BatchExecute", "BeginTransaction"):
            raise DataApiError(
                "DatabaseResumingException",
                "The Aurora DB instance is resuming after being auto-paused. Please wait a few seconds and try again.",
            )
        if operation == "Execute":
            return self.execute(body)
        if operation == "BatchExecute":
            return self.batch_execute(body)
        if operation == "BeginTransaction":
            return self.begin(body)
        if operation == "CommitTransaction":
            return self._end(body, "COMMIT", "Transaction Committed")
        if operation == "RollbackTransaction":
            return self._end(body, "ROLLBACK", "Rollback Complete")
        raise DataApiError("BadRequestException", f"unknown operation {operation}")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body leave as written, no 40 ms delayed-ACK stall

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                    answer = json.dumps(standin.dispatch(self.path, body), ensure_ascii=False).encode()
                    standin.response_bytes.append(len(answer))
                    if len(answer) > MAX_RESPONSE_BYTES:
                        standin.refused.append("answer")
                        raise DataApiError("BadRequestException", "Database response exceeded size limit (1 MiB)")
                    status, headers = 200, {}
                except DataApiError as exc:
                    answer = json.dumps({"message": str(exc)}).encode()
                    status, headers = exc.status, {"x-amzn-ErrorType": exc.code}
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(answer)

        return Handler


@pytest.fixture(scope="session")
def data_api() -> Iterator[DataApiStandIn]:
    standin = DataApiStandIn().start()
    yield standin
    standin.stop()


@pytest.fixture
def data_api_settings(
    data_api: DataApiStandIn, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Settings]:
    """Settings for this test's database through the stand-in, as the stack's request functions:
    logged in (the secret's user) as a login role that is only a member of agent_memory_app."""
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        monkeypatch.setenv(key, value)
    role = f"am_dataapi_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN IN ROLE agent_memory_app")
    info = conninfo_to_dict(database_url)
    secret_arn = f"arn:aws:secretsmanager:us-east-1:123456789012:secret:{role}"
    data_api.logins[secret_arn] = make_conninfo(database_url, user=role, host=info["host"], dbname="postgres")
    yield Settings(
        db_cluster_arn=CLUSTER_ARN,
        db_secret_arn=secret_arn,
        db_name=str(info["dbname"]),
        data_api_endpoint_url=data_api.url,
        embedding_provider="hash",
        auto_migrate=False,
    )
    data_api.logins.pop(secret_arn, None)
    with data_api._lock:
        idle = [c for (arn, _), conns in data_api._idle.items() if arn == secret_arn for c in conns]
        data_api._idle = {k: v for k, v in data_api._idle.items() if k[0] != secret_arn}
    for conn in idle:
        conn.close()
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f"DROP OWNED BY {role}")
        admin.execute(f"DROP ROLE {role}")


class DenseEmbedder(HashEmbedder):
    """Dense vectors of the template's dimension (1024, Titan V2's default) for the Data API tests:
    the hash embedder's features spread over every dimension by a fixed random rotation, so texts
    sharing words stay close while no component is zero, as a real model's vectors are (the hash
    embedder alone gives mostly-zero vectors, whose text form is a fraction of a real one's)."""

    provider = "dense-test"

    def __init__(self, dimension: int = 1024) -> None:
        super().__init__(dimension)
        self._rotation = np.random.default_rng(1024).standard_normal((dimension, dimension)).astype(np.float32)

    def _embed_batch(self, texts: list[str]) -> npt.ArrayLike:
        sparse = np.asarray(super()._embed_batch(texts), dtype=np.float32)
        return sparse @ self._rotation
