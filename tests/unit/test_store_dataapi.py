"""How the store's statements and values travel on the RDS Data API path (no I/O)."""

from __future__ import annotations

import datetime as dt
import uuid

import numpy as np
import psycopg
import pytest
from psycopg.types.json import Jsonb

from rushmem.providers.rdsdata import StatementFailed, _translate
from rushmem.store.engine.dataapi_values import compose, decode_scalar
from rushmem_contract.errors import ConfigurationError, DatabaseUnavailable, StatementTimeout


def test_placeholders_become_names_and_typed_values_are_cast() -> None:
    user = uuid.uuid4()
    text, params = compose(
        "SELECT * FROM m WHERE user_id = %(u)s AND id = ANY(%(ids)s) AND e <=> %(v)b < 1 AND u2 = %(u)s "
        "AND meta @> %(m)s AND content LIKE '50%%'",
        {"u": "ana", "ids": [user], "v": np.array([1.0, 2.5], dtype=np.float32), "m": Jsonb({"a": 1})},
    )
    assert text == (
        "SELECT * FROM m WHERE user_id = :u AND id = ANY(CAST(:ids AS uuid[])) AND e <=> CAST(:v AS vector) < 1 "
        "AND u2 = :u AND meta @> CAST(:m AS jsonb) AND content LIKE '50%'"
    )
    assert params == [
        {"name": "u", "value": {"stringValue": "ana"}},
        {"name": "ids", "value": {"stringValue": "{" + f'"{user}"' + "}"}},
        {"name": "v", "value": {"stringValue": "[1.0,2.5]"}},
        {"name": "m", "value": {"stringValue": '{"a": 1}'}},
    ]


def test_positional_values_and_arrays_keep_their_types() -> None:
    at = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    text, params = compose(
        "SELECT %s, %s, %s, %s, %s, %s",
        [None, True, 7, 0.5, b"\x01", [at, None]],
    )
    assert text == "SELECT :p1, :p2, :p3, :p4, :p5, CAST(:p6 AS timestamptz[])"
    assert [p["value"] for p in params] == [
        {"isNull": True},
        {"booleanValue": True},
        {"longValue": 7},
        {"doubleValue": 0.5},
        {"blobValue": b"\x01"},
        {"stringValue": '{"2026-01-02T03:04:05+00:00",NULL}'},
    ]
    with pytest.raises(psycopg.ProgrammingError):
        compose("SELECT %s, %s", [1])


def test_without_parameters_percent_is_no_placeholder() -> None:
    assert compose("SELECT '100%' WHERE x LIKE 'a%s'", None) == ("SELECT '100%' WHERE x LIKE 'a%s'", [])
    with pytest.raises(ConfigurationError, match="set"):
        compose("SELECT %s", [{1, 2}])


def test_array_items_are_quoted_as_postgresql_reads_them() -> None:
    _, params = compose("SELECT %s", [['a "b"', "c\\d", "e,f", None]])
    assert params[0]["value"] == {"stringValue": '{"a \\"b\\"","c\\\\d","e,f",NULL}'}


def test_results_decode_to_psycopgs_types() -> None:
    assert decode_scalar("timestamptz", {"stringValue": "2026-03-01 12:30:05.5"}) == dt.datetime(
        2026, 3, 1, 12, 30, 5, 500000, tzinfo=dt.UTC
    )
    assert decode_scalar("uuid", {"stringValue": "00000000-0000-0000-0000-000000000001"}) == uuid.UUID(int=1)
    assert decode_scalar("jsonb", {"stringValue": '{"a": [1]}'}) == {"a": [1]}
    assert decode_scalar("_text", {"arrayValue": {"stringValues": ["a", None]}}) == ["a", None]
    assert decode_scalar("int8", {"isNull": True}) is None
    assert decode_scalar("vector", {"stringValue": "[1,2]"}).to_list() == [1.0, 2.0]


def test_errors_become_the_packages_types() -> None:
    failed = _translate("DatabaseErrorException", "ERROR: duplicate key; SQLState: 23505")
    assert isinstance(failed, StatementFailed) and failed.sqlstate == "23505"
    refused = _translate("BadRequestException", "Database returned more than the allowed response size limit")
    assert isinstance(refused, StatementFailed) and refused.sqlstate is None
    assert isinstance(_translate("StatementTimeoutException", "45 s"), StatementTimeout)
    assert isinstance(_translate("TransactionNotFoundException", "gone"), DatabaseUnavailable)
    assert isinstance(_translate("AccessDeniedException", "no"), ConfigurationError)


def test_scripts_split_into_statements_outside_literals_and_bodies() -> None:
    from rushmem.store.engine.dataapi_values import split_script

    script = """
    -- a comment; with a semicolon
    CREATE TABLE t (a text DEFAULT 'x;y');
    CREATE FUNCTION f() RETURNS trigger AS $$ BEGIN RETURN NEW; END $$ LANGUAGE plpgsql;
    /* block; comment */ SELECT "odd;name" FROM t;
    """
    assert split_script(script) == [
        "-- a comment; with a semicolon\n    CREATE TABLE t (a text DEFAULT 'x;y')",
        "CREATE FUNCTION f() RETURNS trigger AS $$ BEGIN RETURN NEW; END $$ LANGUAGE plpgsql",
        '/* block; comment */ SELECT "odd;name" FROM t',
    ]


def test_the_scram_verifier_is_libpqs() -> None:
    """Computed without libpq for the Data API path: the same keys libpq derives for the same salt."""
    import base64

    from rushmem.store.schema.roles import scram_sha256_verifier

    # libpq's PQencryptPasswordConn("pencil", scram-sha-256) with this salt (RFC 7677's example password).
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    verifier = scram_sha256_verifier("pencil", salt=salt)
    assert verifier == (
        "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:"
        "wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU="
    )


def test_what_needs_a_session_of_its_own_says_so_on_the_data_api() -> None:
    from rushmem.providers.rdsdata import DataApi, DataApiTarget
    from rushmem.store.engine.dataapi import DataApiSession
    from rushmem.store.engine.session import Session
    from rushmem.store.indexes.partitions import refresh_dense_users

    conn: Session = DataApiSession(DataApi(DataApiTarget("arn:aws:rds:eu-west-1:1:cluster:c", "arn:s", "db")))
    assert not conn.owns_session and conn.single_statement_reads and conn.sign_code_vectors
    with pytest.raises(ConfigurationError, match="needs a direct connection"):
        refresh_dense_users(conn, min_memories=10, max_text_matches=10)
