"""Shared fixtures: a real embedded PostgreSQL (never a mocked database), fresh databases per
test, and services wired to them.

- ``pg_server``: the embedded server for the whole session (stopped at exit).
- ``blank_database_url``: a new, empty database.
- ``database_url``: a new database already migrated for the ``hash`` embedder (384 dims),
  cloned from a template, so most tests start in milliseconds.
- ``settings`` / ``service``: hash embeddings on ``database_url``.
- ``local_embedder``: the real all-MiniLM-L6-v2 model, loaded once per session.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import psycopg
import pytest
from botocore.config import Config
from botocore.stub import Stubber
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from rushmem.config import Settings, get_settings
from rushmem.service import Memory, set_service
from rushmem.store.engine.embedded import start_embedded_server
from tests.support.environment import use_lambda_environment

# replica_pair, replica_database: a streaming standby; data_api, data_api_settings: the RDS Data API stand-in;
# served: `rushmem serve` on a free port; own_pg: a private server to stop and restart.
pytest_plugins = (
    "tests.support.replica",
    "tests.support.data_api",
    "tests.support.recall",
    "tests.support.faults",
    "tests.support.oauth_issuer",
)

TEMPLATE_DB = "agent_memory_template"
RELEVANCE_CUT_OFF = ("RUSHMEM_MIN_RELATIVE_SCORE", "0")


@pytest.fixture(autouse=True)
def _isolated_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A developer's RUSHMEM_* (and AGENT_MEMORY_*) variables must not leak into tests, nor cached factories."""
    for key in list(os.environ):
        # OPENAI_*: the settings read OPENAI_API_KEY and OPENAI_BASE_URL too.
        if key.startswith(("RUSHMEM_", "AGENT_MEMORY_", "OPENAI_")):
            monkeypatch.delenv(key)
    # The suite's tests of ranking, scopes, doors and writes count on every matching memory coming
    # back (the hash embedder scores unrelated text near 0): they run with the relevance cut off.
    # The cut, on by default, is tested with it on (tests/*/test_recall_budget.py, the demo's test).
    monkeypatch.setenv(RELEVANCE_CUT_OFF[0], RELEVANCE_CUT_OFF[1])
    get_settings.cache_clear()
    set_service(None)
    yield
    built = set_service(None)
    if built is not None:  # a handler or a command built one: release its connection
        built.close()
    get_settings.cache_clear()


@pytest.fixture
def lambda_env(monkeypatch: pytest.MonkeyPatch, database_url: str) -> str:
    """A fresh database, and the handlers' environment pointing at it."""
    use_lambda_environment(monkeypatch, database_url)
    return database_url


@pytest.fixture(scope="session")
def pg_root() -> Path:
    """Where the tests' PostgreSQL data directories live.

    Not under pytest's tmp_path: the server runs as its own system user when the tests run
    as root, and every new pytest session resets /tmp/pytest-of-<user> to mode 0700.
    Removed at exit, after the servers stop (atexit runs in reverse order of registration).
    """
    root = Path(tempfile.mkdtemp(prefix="agent-memory-tests-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root


@pytest.fixture
def embedded_dir(pg_root: Path) -> Path:
    """A fresh data directory for a test's own embedded server."""
    return pg_root / uuid.uuid4().hex[:12]


@pytest.fixture(scope="session")
def pg_server(pg_root: Path) -> str:
    """Admin URL of a session-wide embedded PostgreSQL 18 + pgvector."""
    return start_embedded_server(pg_root / "session")


def _admin(pg_server: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(pg_server, autocommit=True)


def _new_database(pg_server: str, template: str | None = None) -> str:
    name = f"t_{uuid.uuid4().hex[:12]}"
    with _admin(pg_server) as conn:
        if template:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        else:
            conn.execute(f'CREATE DATABASE "{name}"')
    return name


def _drop_database(pg_server: str, name: str) -> None:
    with _admin(pg_server) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def url_for(pg_server: str, dbname: str) -> str:
    return make_conninfo(pg_server, dbname=dbname)


@pytest.fixture(scope="session")
def _template_database(pg_server: str) -> str:
    with _admin(pg_server) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE_DB}"')
        conn.execute(f'CREATE DATABASE "{TEMPLATE_DB}"')
    service = Memory(Settings(database_url=url_for(pg_server, TEMPLATE_DB), embedding_provider="hash"))
    service.admin.migrate()
    service.close()
    return TEMPLATE_DB


@pytest.fixture
def blank_database_url(pg_server: str) -> Iterator[str]:
    name = _new_database(pg_server)
    yield url_for(pg_server, name)
    _drop_database(pg_server, name)


@pytest.fixture
def database_url(pg_server: str, _template_database: str) -> Iterator[str]:
    name = _new_database(pg_server, template=_template_database)
    yield url_for(pg_server, name)
    _drop_database(pg_server, name)


@pytest.fixture
def fresh_database(pg_server: str, _template_database: str) -> Iterator[Callable[[], str]]:
    """Another migrated database each call (for a test that needs several), dropped afterwards."""
    made: list[str] = []

    def make() -> str:
        made.append(_new_database(pg_server, template=_template_database))
        return url_for(pg_server, made[-1])

    yield make
    for name in made:
        _drop_database(pg_server, name)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Tests marked both_backends run once on a connection and once through the RDS Data API stand-in.
    if metafunc.definition.get_closest_marker("both_backends") and "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", ["direct", "data-api"], indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """How ``settings`` reaches the database: "direct" (psycopg) unless the test is both_backends."""
    return str(getattr(request, "param", "direct"))


@pytest.fixture
def settings(database_url: str, backend: str, request: pytest.FixtureRequest) -> Settings:
    if backend == "data-api":
        data_api_settings: Settings = request.getfixturevalue("data_api_settings")
        return data_api_settings
    # As the application role: every test runs under row-level security, as in production.
    return Settings(database_url=database_url, embedding_provider="hash", db_role="agent_memory_app")


@pytest.fixture
def service(settings: Settings) -> Iterator[Memory]:
    svc = Memory(settings)
    yield svc
    svc.close()


@pytest.fixture
def app_login_url(database_url: str) -> Iterator[str]:
    """A login role that is only a member of agent_memory_app, as a DBA would create on RDS."""
    name = f"am_login_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {name} LOGIN IN ROLE agent_memory_app")
    info = conninfo_to_dict(database_url)
    yield make_conninfo(database_url, user=name, host=info["host"])
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f"DROP OWNED BY {name}")
        admin.execute(f"DROP ROLE {name}")


@pytest.fixture
def secretsmanager(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A moto Secrets Manager (boto3 client) that the package's secret reads see.

    Powertools keeps one SecretsProvider (and its boto3 client) per process: dropped before and
    after, so no test reads another test's mocked account or region.
    """
    import boto3
    from aws_lambda_powertools.utilities import parameters
    from moto import mock_aws

    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    parameters.clear_caches()  # type: ignore[no-untyped-call]
    with mock_aws():
        yield boto3.client("secretsmanager")
    parameters.clear_caches()  # type: ignore[no-untyped-call]


@pytest.fixture(scope="session")
def local_embedder():  # type: ignore[no-untyped-def]
    from rushmem_tools.embedders.local import LocalEmbedder

    embedder = LocalEmbedder()
    embedder.warm_up()
    return embedder


@pytest.fixture
def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


@pytest.fixture
def comprehend_stub() -> Iterator[tuple[Any, Stubber]]:
    """A Comprehend client with botocore's Stubber on it (no retries): answers are queued per test."""
    client = boto3.client(
        "comprehend",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": 1}),
    )
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()
