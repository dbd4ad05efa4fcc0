"""The RDS Data API path against real PostgreSQL (the stand-in in tests/support/data_api.py): the same
values back as on a connection, the Data API's limits, a paused cluster, what each use costs in
requests."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import numpy as np
import psycopg
import pytest
from botocore.exceptions import ClientError
from pgvector import Vector
from pgvector.psycopg import register_vector
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from rushmem.config import Settings
from rushmem.providers.rdsdata import DataApi, DataApiTarget
from rushmem.service import Memory
from rushmem.store.engine.dataapi import DataApiSession
from rushmem_contract.errors import DatabaseResuming, DatabaseUnavailable
from rushmem_contract.models import ConversationEnded, NewMemory
from tests.support.data_api import CLUSTER_ARN, MAX_RESPONSE_BYTES, DataApiStandIn, DenseEmbedder
from tests.support.ingest import conversation, failures, sqs_event, sqs_record
from tests.support.recall import body_of, invoke

FACTS = ["The user prefers pnpm over npm", "All SVG changes must sync to defaultSVG"]


@pytest.fixture
def api(data_api_settings: Settings) -> Iterator[DataApiSession]:
    """A Data API session as the service's login role, outside any service."""
    s = data_api_settings
    target = DataApiTarget(str(s.db_cluster_arn), str(s.db_secret_arn), s.db_name, s.data_api_endpoint_url)
    conn = DataApiSession(DataApi(target))
    yield conn
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


def test_values_come_back_as_psycopg_gives_them(api: DataApiSession, database_url: str) -> None:
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
    got = api.execute_dicts(_VALUES, params).fetchone()
    assert got is not None and expected is not None
    assert got == expected
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in expected.items()}
    assert isinstance(got["v"], Vector) and got["at"].tzinfo is not None


def test_a_sql_error_is_the_same_psycopg_error_and_the_transaction_rolls_back(api: DataApiSession) -> None:
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


def test_the_data_api_limits_are_kept(api: DataApiSession, data_api: DataApiStandIn) -> None:
    with pytest.raises(psycopg.ProgrammingError, match="64 KB"):
        api.execute("SELECT repeat('x', 70000)")
    # 20 rows of 60,000 bytes: over 1 MiB at once, so the answer is refused and the rows are read
    # again through a cursor, a few per request, each answer under the limit.
    data_api.refused.clear()
    data_api.response_bytes.clear()
    data_api.reset_counts()
    rows = api.execute("SELECT i, repeat('😀', 15000) FROM generate_series(1, 20) AS i").fetchall()
    assert [r[0] for r in rows] == list(range(1, 21)) and all(len(r[1]) == 15000 for r in rows)
    assert data_api.refused == ["answer"]
    assert max(b for b in data_api.response_bytes if b <= MAX_RESPONSE_BYTES) < MAX_RESPONSE_BYTES
    assert data_api.reset_counts() == {"Execute": 1 + 1 + 3 + 1, "BeginTransaction": 1, "CommitTransaction": 1}
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
        api.api.commit("no-such-transaction")


def test_batch_execute_writes_every_parameter_set_in_one_request(api: DataApiSession, data_api: DataApiStandIn) -> None:
    user = uuid.uuid4().hex
    data_api.reset_counts()
    with api.transaction():
        api.execute("SELECT set_config('agent_memory.user_id', %s, true)", [user])
        api.executemany(
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
    """Billed per request, each ~100 ms on AWS: a warm recall is one (the scope set inside the
    statement by agent_memory_read_as, migration 0017; it was four: begin, the scope, the query,
    commit)."""
    data_api_service.add([NewMemory(content=f) for f in FACTS], user_id="u-1")  # connects and sets up
    data_api.reset_counts()
    data_api_service.recall("which package manager?", user_id="u-1")
    assert data_api.reset_counts() == {"Execute": 1}
    data_api_service.add([NewMemory(content="The user deploys with SAM")], user_id="u-1")
    remembered = sum(data_api.reset_counts().values())
    assert remembered <= 10, remembered


def test_requests_per_conversation(data_api_service: Memory, data_api: DataApiStandIn) -> None:
    """One conversation ingested (the rules extractor: one fact), warm: 4 requests (was 9, and 12
    before that). The receipt check before extraction is one statement (agent_memory_read_as), and so
    is the read of the project's extraction instructions; then the receipt and the nearest memories
    are read in one, and the write is one statement that takes the user's lock and reads them again
    first (agent_memory_write_as): it was begin, the scope/lock/schema check, the receipt again, the
    nearest memories, the upsert, the receipt with the usage, commit."""
    data_api_service.add([NewMemory(content=f) for f in FACTS], user_id="u-1")  # connects and sets up
    data_api.reset_counts()
    data_api.log.clear()
    outcome = data_api_service.ingest_conversation(ConversationEnded.model_validate(conversation(user_id="u-1")))
    assert outcome.ids
    counts = data_api.reset_counts()
    assert counts == {"Execute": 4}, (counts, data_api.log)
    assert "agent_memory_read_as(" in data_api.log[0]  # the receipt, scoped, one request
    assert "agent_memory_write_as(" in data_api.log[-1]
    assert data_api_service.usage("u-1").totals.get("conversation") == 1  # counted, with the receipt


# Conversations that store, restate (an exact duplicate refreshed) and change a value (the write then
# needs the new row's id before it ends: a transaction), and a redelivery.
_CONVERSATIONS = [
    conversation(conversation_id="c-1", messages=[{"role": "user", "content": "My stack is TypeScript."}]),
    conversation(conversation_id="c-1", messages=[{"role": "user", "content": "My stack is TypeScript."}]),
    conversation(
        conversation_id="c-2",
        ended_at="2026-11-30T10:15:00Z",
        messages=[{"role": "user", "content": "My stack is TypeScript. I live in Berlin."}],
    ),
    conversation(
        conversation_id="c-3",
        ended_at="2026-12-01T10:15:00Z",
        messages=[{"role": "user", "content": "I live in Munich now."}],
    ),
    conversation(
        conversation_id="c-4",
        ended_at="2026-12-02T10:15:00Z",
        memories=[{"content": "The user is 31 years old"}, {"content": "The user's team uses pnpm"}],
    ),
]


def _written(service: Memory, user_id: str) -> list[tuple[Any, ...]]:
    """What a user's memories are, with their history, apart from ids and times of writing."""
    lines = service.export(user_id=user_id, history=True, limit=100).lines
    out = []
    for line in sorted(lines, key=lambda m: m.content):
        events = [(e.event, e.source) for e in line.history or []]
        out.append((line.content, line.category, line.source, line.metadata, line.superseded_at is None, events))
    return out


def test_a_conversation_over_the_data_api_is_at_most_four_requests_and_writes_what_psycopg_writes(
    database_url: str, data_api_service: Memory, data_api: DataApiStandIn
) -> None:
    direct = Memory(Settings(database_url=database_url, embedding_provider="hash", db_role="agent_memory_app"))
    try:
        for service in (direct, data_api_service):
            service.add([NewMemory(content=f) for f in FACTS], user_id="warm")
        for body in _CONVERSATIONS:
            data_api.reset_counts()
            via_api = data_api_service.ingest_conversation(ConversationEnded.model_validate({**body, "user_id": "u"}))
            requests = sum(data_api.reset_counts().values())
            via_pg = direct.ingest_conversation(ConversationEnded.model_validate({**body, "user_id": "u-pg"}))
            shown = {"ids", "write_id", "user_id", "facts"}
            assert via_api.model_dump(exclude=shown) == via_pg.model_dump(exclude=shown), body
            assert [(f.action, f.content) for f in via_api.facts or []] == [
                (f.action, f.content) for f in via_pg.facts or []
            ]
            if not via_api.superseded:
                assert requests <= 4, (requests, body)
        assert _written(data_api_service, "u") == _written(direct, "u-pg")
        assert any(not alive for *_, alive, _ in _written(direct, "u-pg"))  # a value was changed
    finally:
        direct.close()


# ---- the schema through the Data API (MigrateFunction with DatabaseAccess=data-api) ----------------


def test_migrate_through_the_data_api_as_the_owner(
    blank_database_url: str, data_api: DataApiStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every migration file (many statements, dollar-quoted bodies) and the login role, one call per statement."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from rushmem.service import Memory

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
            # A read is one statement that cannot set its own timeout: the login has one.
            config = conn.execute("SELECT rolconfig FROM pg_roles WHERE rolname = %s", (login,)).fetchone()
            assert config is not None and "statement_timeout=10000ms" in (config[0] or []), config
        assert Memory(owner).admin.migrate().applied == []  # idempotent
    finally:
        data_api.logins.pop(owner_secret, None)
        with psycopg.connect(blank_database_url, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {login}")
            conn.execute(f"DROP ROLE IF EXISTS {login}")


# ---- real sizes: 1024-dimensional dense vectors, recall limit 50 -------------------------------------

DIMENSION = 1024  # the template's EmbeddingDimensions default (Titan Text Embeddings V2's)


@pytest.fixture
def dense_store(blank_database_url: str, data_api: DataApiStandIn, monkeypatch: pytest.MonkeyPatch) -> Iterator[Memory]:
    """A store of 1024-d dense vectors holding 400 memories of one user, served through the stand-in
    as the stack's request functions (a login role that is only a member of agent_memory_app)."""
    for key, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        monkeypatch.setenv(key, value)
    owner = Memory(Settings(database_url=blank_database_url, auto_migrate=False), embedder=DenseEmbedder(DIMENSION))
    owner.admin.migrate()
    topics = ["deploys", "editor", "package manager", "database", "shell", "timezone", "language", "framework"]
    facts = [
        f"The user's {topics[i % len(topics)]} note {i}: prefers option {i % 17} for project {i % 5} "
        f"with setting {i} because the team agreed on it in review {i // 3}"
        for i in range(400)
    ]
    for start in range(0, len(facts), 100):
        owner.add([NewMemory(content=f) for f in facts[start : start + 100]], user_id="u-dense")
    owner.close()
    role = f"am_dataapi_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(blank_database_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN IN ROLE agent_memory_app")
    info = conninfo_to_dict(blank_database_url)
    secret_arn = f"arn:aws:secretsmanager:us-east-1:123456789012:secret:{role}"
    data_api.logins[secret_arn] = make_conninfo(blank_database_url, user=role, host=info["host"], dbname="postgres")
    settings = Settings(
        db_cluster_arn=CLUSTER_ARN,
        db_secret_arn=secret_arn,
        db_name=str(info["dbname"]),
        data_api_endpoint_url=data_api.url,
        auto_migrate=False,
    )
    service = Memory(settings, embedder=DenseEmbedder(DIMENSION))
    yield service
    service.close()
    data_api.logins.pop(secret_arn, None)


def test_recall_limit_50_over_dense_1024d_vectors_fits_the_response_limit(
    dense_store: Memory, data_api: DataApiStandIn
) -> None:
    """No vector crosses the wire whole: the candidates come back as sign bits, and a recall of 50
    over 1024-d dense vectors answers well under the Data API's 1 MiB (with the vectors as text it
    needs several MB and the Data API refuses it)."""
    dense_store.recall("warm up", user_id="u-dense", limit=5)
    data_api.response_bytes.clear()
    result = dense_store.recall("which editor and package manager does the user prefer", user_id="u-dense", limit=50)
    assert len(result.memories) == 50
    largest = max(data_api.response_bytes)
    assert largest < MAX_RESPONSE_BYTES / 2, largest
    data_api.response_bytes.clear()
    dense_store.recall("which editor and package manager does the user prefer", user_id="u-dense", limit=10)
    print(
        f"\nrecall over 1024-d dense vectors, the Data API's answer: limit 50 {largest / 1024:.0f} KiB, "
        f"limit 10 {max(data_api.response_bytes) / 1024:.0f} KiB"
    )


def test_full_vectors_at_that_size_fill_the_response_limit(
    dense_store: Memory, data_api: DataApiStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What recall did before: every candidate's vector as text. The candidates then fill the Data
    API's 1 MiB and are cut there (best first, never an answer it refuses), so the compact form is
    what keeps the whole candidate pool of limit 50 in one request."""
    dense_store.recall("warm up", user_id="u-dense", limit=5)
    data_api.response_bytes.clear()
    data_api.refused.clear()
    data_api.reset_counts()
    monkeypatch.setattr(DataApiSession, "sign_code_vectors", False)
    result = dense_store.recall("which editor and package manager does the user prefer", user_id="u-dense", limit=50)
    assert len(result.memories) == 50
    assert data_api.refused == [] and data_api.reset_counts() == {"Execute": 1}
    assert 0.8 * MAX_RESPONSE_BYTES < max(data_api.response_bytes) <= MAX_RESPONSE_BYTES


def test_sign_bits_keep_mmr_close_to_the_full_vectors(dense_store: Memory, blank_database_url: str) -> None:
    """The same recall on a direct connection (full vectors) and through the Data API (sign bits):
    MMR's picks mostly agree."""
    direct = Memory(Settings(database_url=blank_database_url, auto_migrate=False), embedder=DenseEmbedder(DIMENSION))
    try:
        query = "which editor and package manager does the user prefer"
        full = [m.id for m in direct.recall(query, user_id="u-dense", limit=20).memories]
    finally:
        direct.close()
    compact = [m.id for m in dense_store.recall(query, user_id="u-dense", limit=20).memories]
    overlap = len(set(full) & set(compact))
    print(f"\nMMR top 20, full vectors vs sign bits: {overlap} of 20 in common")
    assert overlap >= 15, overlap


def test_the_one_statement_recall_is_bound_by_row_level_security(
    data_api_service: Memory, data_api: DataApiStandIn, api: DataApiSession
) -> None:
    """The scope travels inside the statement, and the policies still decide: a user recalls only
    their own memories, and the function run without a user sees nothing."""
    data_api_service.add([NewMemory(content=f) for f in FACTS], user_id="u-1")
    data_api_service.add([NewMemory(content="The user prefers yarn over npm")], user_id="u-2")
    mine = data_api_service.recall("which package manager?", user_id="u-1", limit=10).memories
    theirs = data_api_service.recall("which package manager?", user_id="u-2", limit=10).memories
    assert {m.content for m in mine} == set(FACTS)
    assert [m.content for m in theirs] == ["The user prefers yarn over npm"]
    nobody = api.execute(
        "SELECT count(*) FROM agent_memory_read_as('{}'::jsonb, 'SELECT to_jsonb(m.id) FROM user_memories m', "
        "'{}'::jsonb)"
    ).fetchone()
    assert nobody == (0,)
    other = api.execute(
        'SELECT count(*) FROM agent_memory_read_as(\'{"agent_memory.user_id": "u-2"}\'::jsonb, '
        "'SELECT to_jsonb(m.id) FROM user_memories m', '{}'::jsonb)"
    ).fetchone()
    assert other == (1,)


def test_an_export_with_history_bounds_each_line_through_the_data_api(data_api_service: Memory) -> None:
    """The bounded histories statement (a window over each memory's events) runs on the Data API
    as on a connection: every event of a short history, and no cursor."""
    memory_id = data_api_service.add([NewMemory(content=FACTS[0])], user_id="u-h").ids[0]
    for i in range(3):
        data_api_service.update(memory_id, metadata={"edit": i}, user_id="u-h")
    (line,) = data_api_service.export(user_id="u-h", history=True).lines
    assert [e.event for e in line.history or []] == ["created", "updated", "updated", "updated"]
    assert line.history_cursor is None


def test_a_write_sends_the_events_earlier_writes_left_behind(data_api_settings: Settings, database_url: str) -> None:
    """Through the Data API the scheduled drain is off (template.yaml: it would wake a paused cluster
    every 5 minutes), so a write, any user's, publishes what an earlier failed publish left."""
    sent: list[str] = []
    down = [True]

    def bus(entries: Any) -> list[str | None]:
        if down[0]:
            return ["bus unreachable"] * len(entries)
        sent.extend(json.loads(detail)["user_id"] for _, detail in entries)
        return [None] * len(entries)

    service = Memory(data_api_settings.model_copy(update={"event_bus": "rushmem-test"}), publisher=bus)
    try:
        service.add([NewMemory(content="Alice likes tea")], user_id="alice")
        assert sent == []
        with psycopg.connect(database_url, autocommit=True) as owner:  # past the retry backoff
            owner.execute("UPDATE change_outbox SET next_attempt_at = now() - interval '1 second'")
        down[0] = False
        service.add([NewMemory(content="Bob likes coffee")], user_id="bob")
        assert sorted(sent) == ["alice", "bob"]
    finally:
        service.close()


def test_a_delivery_that_wins_the_race_between_the_read_and_the_write_makes_the_other_a_duplicate(
    database_url: str, data_api_service: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-statement write checks under the user's lock what its plan read: another delivery of
    the same message, written in between, makes it write nothing (the transaction's path then
    answers "duplicate"), not the memories twice."""
    direct = Memory(Settings(database_url=database_url, embedding_provider="hash", db_role="agent_memory_app"))
    body = ConversationEnded.model_validate(conversation(user_id="u-race"))
    write_once = DataApiSession.write_once_as_user
    raced: list[Any] = []

    def concurrently(self: DataApiSession, *args: Any, **kwargs: Any) -> bool:
        if not raced:
            raced.append(direct.ingest_conversation(body))  # the other delivery, through psycopg
        return write_once(self, *args, **kwargs)

    monkeypatch.setattr(DataApiSession, "write_once_as_user", concurrently)
    try:
        outcome = data_api_service.ingest_conversation(body)
        assert raced[0].status == "stored"
        assert outcome.status == "duplicate"
        assert [line.content for line in direct.export(user_id="u-race").lines] == [f.content for f in raced[0].facts]
    finally:
        direct.close()
