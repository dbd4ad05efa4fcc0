"""MigrateFunction as CloudFormation sees it: every request answered once, on time, and a
failed answer says why; with cells, every cell migrated. Against the embedded PostgreSQL, through
template.yaml's CodeUri."""

from __future__ import annotations

import json
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from rushmem.providers.aws import clear_secret_cache
from rushmem.store.schema.migrate import FUNCTIONS_NAME, available_migrations
from rushmem_tools.local import runtime as lambda_local
from tests.deploy.conftest import REPO, TEMPLATE, CloudFormationReceiver

EVENTS = REPO / "events"


@pytest.fixture
def migrate_module() -> ModuleType:
    handler = lambda_local.load_handler(lambda_local.function_spec(TEMPLATE, "MigrateFunction"))
    return sys.modules[handler.__module__]


class Context:
    """A Lambda context with a chosen amount of time left."""

    def __init__(self, seconds_left: float) -> None:
        self._deadline = time.monotonic() + seconds_left

    def get_remaining_time_in_millis(self) -> int:
        return int((self._deadline - time.monotonic()) * 1000)


def cfn_event(request: str, receiver: CloudFormationReceiver, **properties: str) -> dict[str, Any]:
    name = {"Create": "create", "Update": "update", "Delete": "delete"}[request]
    event: dict[str, Any] = json.loads((EVENTS / f"cfn-migrate-{name}.json").read_text(encoding="utf-8"))
    event["ResponseURL"] = receiver.url
    event["ResourceProperties"].update(properties)
    return event


def invoke(event: dict[str, Any]) -> Any:
    return lambda_local.invoke(TEMPLATE, "MigrateFunction", event)


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"postgresql://agent:pw@127.0.0.1:{port}/agent_memory?connect_timeout=1"


def test_create_migrates_a_blank_database_and_answers_once(
    monkeypatch: pytest.MonkeyPatch, blank_database_url: str, cfn_receiver: CloudFormationReceiver
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", blank_database_url)
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    event = cfn_event("Create", cfn_receiver)

    answer = invoke(event)

    expected = [*(f"{m.version:04d}_{m.name}" for m in available_migrations()), FUNCTIONS_NAME]
    assert answer["Status"] == "SUCCESS", answer["Reason"]
    assert answer["Data"]["Applied"] == ",".join(expected)
    assert answer["Data"]["Embedder"].startswith("hash:")
    assert "EntityLinks" not in answer["Data"]  # no backfill runs after migrating
    assert {k: answer[k] for k in ("StackId", "RequestId", "LogicalResourceId")} == {
        k: event[k] for k in ("StackId", "RequestId", "LogicalResourceId")
    }
    assert cfn_receiver.bodies == [answer]
    # The pre-signed URL is signed without a content type: sending one would break the signature.
    assert cfn_receiver.headers[0].get("Content-Type", "") == ""
    with psycopg.connect(blank_database_url) as conn:
        assert conn.execute("SELECT to_regclass('user_memories') IS NOT NULL").fetchone() == (True,)


def test_update_on_a_migrated_database_is_a_successful_no_op(
    lambda_env: str, cfn_receiver: CloudFormationReceiver
) -> None:
    answer = invoke(cfn_event("Update", cfn_receiver))
    assert answer["Status"] == "SUCCESS"
    assert answer["Reason"] == "migrations applied: none pending"
    assert answer["PhysicalResourceId"] == "agent-memory-schema"  # unchanged: no replacement, no Delete


def test_delete_keeps_the_database_and_never_connects(
    monkeypatch: pytest.MonkeyPatch, cfn_receiver: CloudFormationReceiver
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", closed_port_url())
    answer = invoke(cfn_event("Delete", cfn_receiver))
    assert answer["Status"] == "SUCCESS"
    assert "keeps the database" in answer["Reason"]
    assert cfn_receiver.bodies == [answer]


def test_unreachable_database_fails_the_deploy_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, cfn_receiver: CloudFormationReceiver, migrate_module: ModuleType
) -> None:
    url = closed_port_url()
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", url)
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    started = time.monotonic()
    # Little time left: no retry fits before the deadline, so the failure is answered at once.
    answer = migrate_module.lambda_handler(cfn_event("Create", cfn_receiver), Context(20))
    assert answer["Status"] == "FAILED"
    assert "DatabaseUnavailable" in answer["Reason"] and "127.0.0.1" in answer["Reason"]
    assert "pw" not in answer["Reason"]
    assert time.monotonic() - started < 10
    assert cfn_receiver.bodies == [answer]


def test_an_embedder_change_is_refused_and_the_rollback_succeeds(
    lambda_env: str, cfn_receiver: CloudFormationReceiver
) -> None:
    # The test database holds 384-dimensional hash embeddings; a deploy asking for 256 must fail
    # before any function writes vectors of the wrong size.
    refused = invoke(cfn_event("Update", cfn_receiver, EmbeddingProvider="hash", EmbeddingDimensions="256"))
    assert refused["Status"] == "FAILED"
    assert "SchemaMismatch" in refused["Reason"] and "384" in refused["Reason"]
    # CloudFormation then rolls back with the old properties: that request must succeed.
    rollback = invoke(cfn_event("Update", cfn_receiver, EmbeddingProvider="hash", EmbeddingDimensions=""))
    assert rollback["Status"] == "SUCCESS"


def test_a_layer_built_for_another_cpu_fails_the_deploy_clearly(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    lambda_env: str,
    cfn_receiver: CloudFormationReceiver,
    migrate_module: ModuleType,
) -> None:
    (tmp_path / "rushmem_layer.json").write_text(
        json.dumps({"architecture": "arm64", "machine": "aarch64", "python": "3.13"})
    )
    monkeypatch.setattr(migrate_module, "package_root", lambda: tmp_path)
    monkeypatch.setattr(migrate_module.platform, "machine", lambda: "x86_64")
    answer = migrate_module.lambda_handler(cfn_event("Create", cfn_receiver), Context(60))
    assert answer["Status"] == "FAILED"
    assert "built for arm64" in answer["Reason"] and "ARCHITECTURE=" in answer["Reason"]


def test_a_hanging_migration_is_answered_before_lambda_times_out(
    monkeypatch: pytest.MonkeyPatch, cfn_receiver: CloudFormationReceiver, migrate_module: ModuleType
) -> None:
    def hang(*_args: Any, **_kwargs: Any) -> dict[str, Any]:
        time.sleep(3)
        return {"applied": [], "embedder": "hash:hash:384"}

    monkeypatch.setattr(migrate_module, "migrate", hang)
    seconds_left = migrate_module.TIMEOUT_MARGIN_S / 3 + 1  # the watchdog fires after about 1 s
    answer = migrate_module.lambda_handler(cfn_event("Create", cfn_receiver), Context(seconds_left))
    assert answer["Status"] == "FAILED" and "ran out of time" in answer["Reason"]
    assert len(cfn_receiver.bodies) == 1  # the late success was not sent as a second answer


def test_invoked_directly_it_returns_what_it_applied(monkeypatch: pytest.MonkeyPatch, blank_database_url: str) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", blank_database_url)
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    first = invoke({})
    assert first["applied"] == [*(f"{m.version:04d}_{m.name}" for m in available_migrations()), FUNCTIONS_NAME]
    assert invoke({})["applied"] == []


@pytest.fixture
def login_name(pg_server: str) -> Iterator[str]:
    """A fresh name for the application's login role; the role (cluster-wide) is dropped afterwards."""
    name = f"am_login_{uuid.uuid4().hex[:8]}"
    yield name
    with psycopg.connect(pg_server, autocommit=True) as admin:
        if admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [name]).fetchone():
            admin.execute(f'DROP ROLE "{name}"')


def test_the_deploy_creates_the_request_functions_login_role(
    lambda_env: str, cfn_receiver: CloudFormationReceiver, login_name: str
) -> None:
    created = invoke(cfn_event("Create", cfn_receiver, AppDatabaseUser=login_name))
    assert created["Status"] == "SUCCESS", created["Reason"]
    assert created["Data"]["AppLogin"] == f"{login_name}: created, granted agent_memory_app"
    assert created["Reason"].endswith(f"application login role {login_name}: created, granted agent_memory_app")
    with psycopg.connect(make_conninfo(lambda_env, user=login_name)) as app:
        assert app.execute("SELECT current_user, pg_has_role('agent_memory_app', 'USAGE')").fetchone() == (
            login_name,
            True,
        )
        assert app.execute("SELECT count(*) FROM user_memories").fetchone() == (0,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("ALTER TABLE user_memories DISABLE ROW LEVEL SECURITY")

    again = invoke(cfn_event("Update", cfn_receiver, AppDatabaseUser=login_name))
    assert again["Status"] == "SUCCESS" and again["Data"]["AppLogin"] == f"{login_name}: unchanged"


def test_the_deploy_sets_the_login_roles_password_from_the_generated_secret(
    secretsmanager: Any, lambda_env: str, cfn_receiver: CloudFormationReceiver, login_name: str
) -> None:
    """The created database: RDS Proxy logs in as the role with the secret's password."""
    arn = secretsmanager.create_secret(
        Name="agent-memory/app-login", SecretString=json.dumps({"username": login_name, "password": "pw-42"})
    )["ARN"]
    answer = invoke(cfn_event("Create", cfn_receiver, AppDatabaseUser=login_name, AppDatabaseSecretArn=arn))
    assert answer["Status"] == "SUCCESS", answer["Reason"]
    assert answer["Data"]["AppLogin"] == (
        f"{login_name}: created, granted agent_memory_app, password set from the secret"
    )
    assert "pw-42" not in json.dumps(answer)
    with psycopg.connect(lambda_env) as admin:
        verifier = admin.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", [login_name]).fetchone()
    assert verifier is not None and verifier[0].startswith("SCRAM-SHA-256$")


def test_a_login_role_that_would_defeat_row_level_security_fails_the_deploy(
    lambda_env: str, cfn_receiver: CloudFormationReceiver
) -> None:
    with psycopg.connect(lambda_env) as conn:
        owner = str(conn.execute("SELECT current_user").fetchone()[0])  # type: ignore[index]
    answer = invoke(cfn_event("Update", cfn_receiver, AppDatabaseUser=owner))
    assert answer["Status"] == "FAILED"
    assert answer["Reason"].startswith("ConfigurationError:") and "row-level security off" in answer["Reason"]


def _stubbed_bedrock(monkeypatch: pytest.MonkeyPatch, *answers: tuple[str, dict[str, Any], dict[str, Any]]) -> Any:
    """Bedrock's control plane for MigrateFunction: a botocore Stubber with the given answers."""
    from botocore.stub import Stubber

    from rushmem.providers import lifecycle
    from tests.support.bedrock import bedrock_client

    client = bedrock_client()
    stub = Stubber(client)
    for operation, answer, params in answers:
        stub.add_response(operation, answer, params)
    stub.activate()
    monkeypatch.setattr(lifecycle, "bedrock_control_client", lambda settings: client)
    return stub


def test_a_model_past_its_end_of_life_fails_the_deploy_naming_it(
    monkeypatch: pytest.MonkeyPatch, cfn_receiver: CloudFormationReceiver
) -> None:
    from datetime import UTC, datetime

    from tests.support.bedrock import model_answer

    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", closed_port_url())  # never reached
    old = "anthropic.claude-3-haiku-20240307-v1:0"
    eol = datetime(2026, 9, 10, tzinfo=UTC)
    _stubbed_bedrock(
        monkeypatch, ("get_foundation_model", model_answer(old, "LEGACY", end_of_life=eol), {"modelIdentifier": old})
    )
    answer = invoke(cfn_event("Update", cfn_receiver, LlmProvider="bedrock", LlmModel=old, EmbeddingProvider="hash"))
    assert answer["Status"] == "FAILED"
    assert "RetiredModel" in answer["Reason"] and old in answer["Reason"] and "2026-09-10" in answer["Reason"]
    assert "us.amazon.nova-2-lite-v1:0" in answer["Reason"]  # what to set instead


def test_a_legacy_profile_deploys_with_a_warning_and_an_active_one_without(
    lambda_env: str, monkeypatch: pytest.MonkeyPatch, cfn_receiver: CloudFormationReceiver
) -> None:
    from datetime import UTC, datetime, timedelta

    from tests.support.bedrock import model_answer, profile_answer

    profile, model = "us.anthropic.claude-haiku-4-5-20251001-v1:0", "anthropic.claude-haiku-4-5-20251001-v1:0"
    eol = datetime.now(UTC) + timedelta(days=120)  # relative to the run: the test never ages
    _stubbed_bedrock(
        monkeypatch,
        ("get_inference_profile", profile_answer(profile, model), {"inferenceProfileIdentifier": profile}),
        ("get_foundation_model", model_answer(model, "LEGACY", end_of_life=eol), {"modelIdentifier": model}),
    )
    answer = invoke(cfn_event("Update", cfn_receiver, LlmProvider="bedrock", LlmModel=profile))
    assert answer["Status"] == "SUCCESS", answer["Reason"]
    assert f"WARNING extraction model {profile}" in answer["Reason"] and eol.date().isoformat() in answer["Reason"]

    default, foundation = "us.amazon.nova-2-lite-v1:0", "amazon.nova-2-lite-v1:0"
    _stubbed_bedrock(
        monkeypatch,
        ("get_inference_profile", profile_answer(default, foundation), {"inferenceProfileIdentifier": default}),
        ("get_foundation_model", model_answer(foundation, "ACTIVE"), {"modelIdentifier": foundation}),
    )
    receiver = CloudFormationReceiver()
    try:
        answer = invoke(cfn_event("Update", receiver, LlmProvider="bedrock"))
    finally:
        receiver.close()
    assert answer["Status"] == "SUCCESS" and "WARNING" not in answer["Reason"]


def test_an_unreachable_control_plane_warns_and_deploys(
    lambda_env: str, monkeypatch: pytest.MonkeyPatch, cfn_receiver: CloudFormationReceiver
) -> None:
    from botocore.exceptions import EndpointConnectionError

    from rushmem.providers import lifecycle

    class Unreachable:
        def get_inference_profile(self, **_: Any) -> Any:
            raise EndpointConnectionError(endpoint_url="https://bedrock.us-east-1.amazonaws.com")

    monkeypatch.setattr(lifecycle, "bedrock_control_client", lambda settings: Unreachable())
    answer = invoke(cfn_event("Update", cfn_receiver, LlmProvider="bedrock"))
    assert answer["Status"] == "SUCCESS", answer["Reason"]
    assert "could not check the Bedrock models' lifecycle" in answer["Reason"]


# ---- cells: every cell migrated on deploy, the hourly tasks on each --------------------------------


@pytest.fixture
def cell_b_url(pg_server: str) -> Iterator[str]:
    """A blank database for a second cell (on the same server: a cell is a URL)."""
    name = f"cell_b_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield make_conninfo(pg_server, dbname=name)
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def applied_in(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM agent_memory_migrations").fetchone()
    assert row is not None
    return int(row[0])


def owners_secret(client: Any, cells: dict[str, str]) -> str:
    """The stack's CellsOwnerSecretArn: the cells with their owners' URLs, the home's empty."""
    return str(client.create_secret(Name="agent-memory/cells-owners", SecretString=json.dumps(cells))["ARN"])


def test_a_deploy_with_cells_migrates_every_cell(
    monkeypatch: pytest.MonkeyPatch,
    secretsmanager: Any,
    blank_database_url: str,
    cell_b_url: str,
    cfn_receiver: CloudFormationReceiver,
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", blank_database_url)
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    arn = owners_secret(secretsmanager, {"home": "", "b": cell_b_url})
    # The ARN comes with the custom resource's properties (SchemaMigration's CellsOwnerSecretArn).
    answer = invoke(cfn_event("Create", cfn_receiver, CellsOwnerSecretArn=arn))
    assert answer["Status"] == "SUCCESS", answer["Reason"]
    expected = [*(f"{m.version:04d}_{m.name}" for m in available_migrations()), FUNCTIONS_NAME]
    assert answer["Data"]["Applied"] == ",".join(expected)  # the home cell's, as without cells
    assert answer["Data"]["Cells"] == "home,b"
    # Whole, not cut at CloudFormation's Reason limit (a warning after the lists was cut off).
    assert f"; cell 'b': {expected[0]} ... {FUNCTIONS_NAME} ({len(expected)})" in answer["Reason"]
    assert len(answer["Reason"]) < 200, answer["Reason"]
    assert applied_in(blank_database_url) == applied_in(cell_b_url) == len(expected)
    # Invoked by hand (after adding a cell to the secret), with the function's environment.
    monkeypatch.setenv("RUSHMEM_CELLS_SECRET_ARN", arn)
    assert invoke({})["cells"] == {"home": [], "b": []}


def test_a_cell_that_cannot_be_migrated_fails_the_deploy_naming_it(
    monkeypatch: pytest.MonkeyPatch,
    secretsmanager: Any,
    lambda_env: str,
    cfn_receiver: CloudFormationReceiver,
    migrate_module: ModuleType,
) -> None:
    arn = owners_secret(secretsmanager, {"home": "", "b": closed_port_url()})
    monkeypatch.setenv("RUSHMEM_CELLS_SECRET_ARN", arn)
    answer = migrate_module.lambda_handler(cfn_event("Create", cfn_receiver), Context(20))
    assert answer["Status"] == "FAILED"
    assert answer["Reason"].startswith("CellFailed: cell 'b': DatabaseUnavailable") and "pw" not in answer["Reason"]
    # A secret the function cannot read fails the deploy naming the setting.
    monkeypatch.setenv("RUSHMEM_CELLS_SECRET_ARN", "agent-memory/no-such-secret")
    unreadable = invoke(cfn_event("Update", cfn_receiver))
    assert unreadable["Status"] == "FAILED"
    assert unreadable["Reason"].startswith("ConfigurationError: RUSHMEM_CELLS_SECRET_ARN: cannot read secret")


@pytest.mark.parametrize("task", ["dense-users", "consolidate"])
def test_the_hourly_tasks_run_on_every_cell(
    monkeypatch: pytest.MonkeyPatch,
    secretsmanager: Any,
    lambda_env: str,
    fresh_database: Any,
    migrate_module: ModuleType,
    task: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    arn = owners_secret(secretsmanager, {"home": "", "b": fresh_database()})
    monkeypatch.setenv("AGENT_MEMORY_CELLS_SECRET_ARN", arn)
    done = migrate_module.lambda_handler({"task": task}, Context(60))
    assert list(done["cells"]) == ["home", "b"]
    # One cell down: the others still run, and the run fails naming it.
    secretsmanager.put_secret_value(SecretId=arn, SecretString=json.dumps({"home": "", "b": closed_port_url()}))
    clear_secret_cache()  # a later invocation's container may hold the secret cached: not this one
    caplog.clear()
    with pytest.raises(migrate_module.CellFailed, match="cell 'b': DatabaseUnavailable"):
        migrate_module.lambda_handler({"task": task}, Context(60))
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("cell 'home': ")]
