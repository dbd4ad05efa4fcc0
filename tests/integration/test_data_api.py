"""The RDS Data API path against real PostgreSQL (the stand-in in tests/support/data_api.py): the same
values back as on a connection, the Data API's limits, a paused cluster, what each use costs in
requests."""

from __future__ import annotations

import datetime as dt
import decimal
import time
import uuid
from collections.abc import Iterator
from typing import Any, cast

import boto3
import numpy as np
import psycopg
import pytest
from botocore.exceptions import ClientError
from pgvector import Vector
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from agent_memory.config import Settings
from agent_memory.providers.rdsdata import DataApi, DataApiTarget
from agent_memory.service import Memory
from agent_memory.store.engine.connection import Connection
from agent_memory.store.engine.dataapi import DataApiConnection
from agent_memory_contract.errors import DatabaseResuming, DatabaseUnavailable
from agent_memory_contract.models import NewMemory
from tests.support.data_api import CLUSTER_ARN, DataApiStandIn
from tests.support.ingest import conversation, failures, sqs_event, sqs_record
from tests.support.recall import body_of, invoke

FACTS = ["The user prefers pnpm over npm", "All SVG changes must sync to defaultSVG"]


@pytest.fixture
def api(data_api_settings: Settings) -> Iterator[Connection]:
    """A Data API connection as the service's login role, outside any service."""
    s = data_api_settings
    target = DataApiTarget(str(s.db_cluster_arn), str(s.db_secret_arn), s.db_name, s.data_api_endpoint_url)
    conn = DataApiConnection(DataApi(target))
    yield cast(Connection, conn)
    conn.close()


@pytest.fixture
def data_api_service(data_api_settings: Settings) -> Iterator[Memory]:
    service = Memory(data_api_settings)
    yield service
    service.close()


@pytest.fixture
def data_api_env(monkeypatch: pytest.MonkeyPatch, data_api_settings: Settings) -> Settings:
    """The functions' environment through the stand-in, as the template sets it for DatabaseAccess=data-api."""
    s = data_api_settings
    for key, value in {
        "AGENT_MEMORY_DB_CLUSTER_ARN": str(s.db_cluster_arn),
        "AGENT_MEMORY_DB_SECRET_ARN": str(s.db_secret_arn),
        "AGENT_MEMORY_DB_NAME": s.db_name,
        "AGENT_MEMORY_DATA_API_ENDPOINT_URL": str(s.data_api_endpoint_url),
        "AGENT_MEMORY_EMBEDDING_PROVIDER": "hash",
        "AGENT_MEMORY_AUTO_MIGRATE": "false",
    }.items():
        monkeypatch.setenv(key, value)
    return s


# ---- the same values on both paths ---------------------------------------------------------------

_VALUES = """
SELECT %(id)s::uuid AS id, %(at)s::timestamptz AS at, %(meta)s::jsonb AS meta, %(v)s::vector AS v,
       %(tags)s::text[] AS tags, %(n)s::bigint AS n, %(x)s::float8 AS x, %(ok)s::boolean AS ok,
       %(raw)s::bytea AS raw, %(price)s::numeric AS price, %(nothing)s::text AS nothing, %(word)s AS word,
       cardinality(%(ids)s::uuid[]) AS ids, 100 * 0.5 AS pct, '50%%' AS literal
"""


def test_values_come_back_as_psycopg_gives_them(api: Connection, database_url: str) -> None:
    params: dict[str, Any] = {
        "id": uuid.uuid4(),
        "at": dt.datetime(2026, 3, 1, 12, 30, 5, 123456, tzinfo=dt.UTC),
        "meta": Jsonb({"team": "web", "n": [1, 2], "quote": 'say "hi" \\ bye'}),
        "v": np.array([0.5, -1.25, 3.0], dtype=np.float32),
        "tags": ["a", 'b "c"', "d,e", None, "back\\slash"],
        "n": 2**40,
        "x": 0.1,
        "ok": True,
        "raw": b"\x00\xffbytes",
        "price": decimal.Decimal("12.50"),
        "nothing": None,
        "word": "plain",
        "ids": [uuid.uuid4(), uuid.uuid4()],
    }
    with psycopg.connect(database_url) as direct:
        register_vector(direct)
        expected = direct.cursor(row_factory=dict_row).execute(_VALUES, params).fetchone()
    got = api.cursor(row_factory=dict_row).execute(_VALUES, params).fetchone()
    assert got is not None and expected is not None
    assert got == expected
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in expected.items()}
    assert isinstance(got["v"], Vector) and got["at"].tzinfo is not None


def test_a_sql_error_is_the_same_psycopg_error_and_the_transaction_rolls_back(api: Connection) -> None:
    with pytest.raises(psycopg.errors.UndefinedTable):
        api.execute("SELECT * FROM no_such_table WHERE id = %s", [1])
    user = uuid.uuid4().hex

    def twice() -> None:
        with api.transaction():
            api.execute("SELECT set_config('agent_memory.user_id', %s, true)", [user])
            api.execute(
                "INSERT INTO ingested_messages (user_id, message_hash, memories) VALUES (%s, %s, 1), (%s, %s, 1)",
                [user, b"h", user, b"h"],
            )

    with pytest.raises(psycopg.errors.UniqueViolation):
        twice()
    with api.transaction():
        api.execute("SELECT set_config('agent_memory.user_id', %s, true)", [user])
        assert api.execute("SELECT count(*) FROM ingested_messages WHERE user_id = %s", [user]).fetchone() == (0,)


def test_the_data_api_limits_are_kept(api: Connection, data_api: DataApiStandIn) -> None:
    with pytest.raises(psycopg.ProgrammingError, match="64 KB"):
        api.execute("SELECT repeat('x', 70000)")
    with pytest.raises(psycopg.ProgrammingError, match="response size limit"):
        api.execute("SELECT repeat('x', 60000) FROM generate_series(1, 20)")
    client = boto3.client("rds-data", region_name="us-east-1", endpoint_url=data_api.url)
    secret = next(iter(data_api.logins))
    with pytest.raises(ClientError) as refused:
        client.execute_statement(
            resourceArn=CLUSTER_ARN,
            secretArn=secret,
            sql="SELECT :ids",
            parameters=[{"name": "ids", "value": {"arrayValue": {"stringValues": ["a"]}}}],
        )
    assert refused.value.response["Error"]["Code"] == "BadRequestException"
    with pytest.raises(DatabaseUnavailable, match="TransactionNotFoundException"):
        cast(DataApiConnection, api).api.commit("no-such-transaction")


def test_batch_execute_writes_every_parameter_set_in_one_request(api: Connection, data_api: DataApiStandIn) -> None:
    user = uuid.uuid4().hex
    data_api.reset_counts()
    with api.transaction():
        api.execute("SELECT set_config('agent_memory.user_id', %s, true)", [user])
        api.cursor().executemany(
            "INSERT INTO ingested_messages (user_id, message_hash, memories) VALUES (%s, %s, 0)",
            [[user, bytes([i])] for i in range(5)],
        )
        found = api.execute("SELECT count(*) FROM ingested_messages WHERE user_id = %s", [user]).fetchone()
    assert found == (5,)
    assert data_api.reset_counts()["BatchExecute"] == 1


# ---- a paused cluster ----------------------------------------------------------------------------


def test_recall_while_the_cluster_resumes_answers_at_once_without_memories(
    data_api_service: Memory, data_api: DataApiStandIn
) -> None:
    data_api_service.add([NewMemory(content=f) for f in FACTS], user_id="u-1")
    data_api.pause(1000)
    try:
        started = time.monotonic()
        result = data_api_service.recall("which package manager?", user_id="u-1")
        elapsed = time.monotonic() - started
    finally:
        data_api.pause(0)
    assert result.unavailable == "database_resuming"
    assert result.memories == [] and result.prompt_block == ""
    assert elapsed < 1.0
    resumed = data_api_service.recall("which package manager?", user_id="u-1")
    assert resumed.unavailable is None and resumed.memories


def test_a_statement_waits_for_the_resume_when_allowed(data_api_settings: Settings, data_api: DataApiStandIn) -> None:
    service = Memory(data_api_settings.model_copy(update={"db_resume_wait_s": 10.0}))
    try:
        service.add([NewMemory(content=FACTS[0])], user_id="u-1")
        data_api.pause(2)  # the first two requests find it resuming; the third gets through
        result = service.recall("which package manager?", user_id="u-1")
    finally:
        data_api.pause(0)
        service.close()
    assert result.unavailable is None and [m.content for m in result.memories] == [FACTS[0]]


def test_the_recall_function_answers_200_memory_unavailable(data_api_env: Settings, data_api: DataApiStandIn) -> None:
    assert invoke("http-memories-add.json")["statusCode"] == 201
    data_api.pause(1000)
    try:
        result = invoke("http-recall-iam.json")
    finally:
        data_api.pause(0)
    assert result["statusCode"] == 200
    body = body_of(result)
    assert body["unavailable"] == "database_resuming" and body["memories"] == []


def test_ingest_while_paused_fails_the_record_and_the_redelivery_stores_it(
    data_api_env: Settings, data_api: DataApiStandIn, database_url: str
) -> None:
    from tests.support.ingest import invoke_ingest

    record = sqs_record(conversation(user_id="u-paused"), message_id="m-1")
    data_api.pause(1000)
    try:
        first = invoke_ingest(sqs_event(record))
    finally:
        data_api.pause(0)
    assert failures(first) == ["m-1"]  # SQS redelivers it after the visibility timeout
    again = invoke_ingest(sqs_event({**record, "attributes": {**record["attributes"], "ApproximateReceiveCount": "2"}}))
    assert failures(again) == []
    with psycopg.connect(database_url) as conn:
        stored = conn.execute("SELECT content FROM user_memories WHERE user_id = 'u-paused'").fetchall()
    assert stored and any("TypeScript" in row[0] for row in stored)


def test_a_fresh_process_sees_the_resuming_error_as_its_type(
    data_api_settings: Settings, data_api: DataApiStandIn
) -> None:
    service = Memory(data_api_settings)
    data_api.pause(1000)
    try:
        with pytest.raises(DatabaseResuming):
            service.add([NewMemory(content=FACTS[0])], user_id="u-1")
    finally:
        data_api.pause(0)
        service.close()


# ---- what each use costs in requests -------------------------------------------------------------


def test_requests_per_use(data_api_service: Memory, data_api: DataApiStandIn) -> None:
    """Billed per request: a recall is four (begin, the scope, the query, commit)."""
    data_api_service.add([NewMemory(content=f) for f in FACTS], user_id="u-1")  # connects and sets up
    data_api.reset_counts()
    data_api_service.recall("which package manager?", user_id="u-1")
    assert data_api.reset_counts() == {"BeginTransaction": 1, "Execute": 2, "CommitTransaction": 1}
    data_api_service.add([NewMemory(content="The user deploys with SAM")], user_id="u-1")
    remembered = sum(data_api.reset_counts().values())
    assert remembered <= 10, remembered


# ---- the schema through the Data API (MigrateFunction with DatabaseAccess=data-api) ----------------


def test_migrate_through_the_data_api_as_the_owner(
    blank_database_url: str, data_api: DataApiStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every migration file (many statements, dollar-quoted bodies) and the login role, one call per statement."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from agent_memory.service import Memory

    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    info = conninfo_to_dict(blank_database_url)
    owner_secret = f"arn:aws:secretsmanager:us-east-1:123456789012:secret:owner-{uuid.uuid4().hex[:6]}"
    data_api.logins[owner_secret] = make_conninfo(blank_database_url, dbname="postgres")
    login = f"am_app_{uuid.uuid4().hex[:8]}"
    owner = Settings(
        db_cluster_arn=CLUSTER_ARN,
        db_secret_arn=owner_secret,
        db_name=str(info["dbname"]),
        data_api_endpoint_url=data_api.url,
        embedding_provider="hash",
        app_db_user=login,
    )
    try:
        result = Memory(owner).admin.migrate()
        assert len(result.applied) >= 9 and result.app_login is not None and result.app_login.created
        with psycopg.connect(blank_database_url) as conn:
            assert conn.execute("SELECT count(*) FROM agent_memory_migrations").fetchone() == (len(result.applied),)
            policies = conn.execute("SELECT count(*) FROM pg_policies WHERE tablename = 'user_memories'").fetchone()
            assert policies is not None and policies[0] > 0
        assert Memory(owner).admin.migrate().applied == []  # idempotent
    finally:
        data_api.logins.pop(owner_secret, None)
        with psycopg.connect(blank_database_url, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {login}")
            conn.execute(f"DROP ROLE IF EXISTS {login}")
