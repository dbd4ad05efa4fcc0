"""SnapStart's runtime hooks (rushmem.lifecycle), simulated as the Lambda runtime runs them:
the handler module registers them with snapshot_restore_py when it loads; before the snapshot
the container warms up and lets go of its database connection, its cached secrets and the
providers built with an API key; after the restore the random generator is reseeded and the
next request reconnects."""

from __future__ import annotations

import random
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rushmem import lifecycle
from rushmem.config import Settings
from rushmem.providers.aws import get_secret_value
from rushmem.service import Memory, set_service
from rushmem_contract.models import NewMemory
from rushmem_tools.local import runtime as lambda_local
from tests.support.recall import TEMPLATE


@pytest.fixture
def runtime_hooks(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Callable[[], Any]]]:
    """A stand-in for the runtime's snapshot_restore_py that records what is registered."""
    registered: dict[str, list[Callable[[], Any]]] = {"before": [], "after": []}
    fake = types.ModuleType("snapshot_restore_py")
    fake.register_before_snapshot = registered["before"].append  # type: ignore[attr-defined]
    fake.register_after_restore = registered["after"].append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", fake)
    return registered


@pytest.fixture
def installed(settings: Settings) -> Iterator[Memory]:
    service = Memory(settings)
    set_service(service)
    yield service
    set_service(None)
    service.close()


@pytest.mark.parametrize("function", ["RecallFunction", "IngestFunction"])
def test_each_handler_registers_the_hooks_when_it_loads(
    runtime_hooks: dict[str, list[Callable[[], Any]]], function: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lambda_local, "_MODULES", {})  # load the module afresh, as a new container
    lambda_local.load_module(lambda_local.function_spec(TEMPLATE, function))
    assert runtime_hooks == {"before": [lifecycle.before_snapshot], "after": [lifecycle.after_restore]}


def test_outside_lambda_there_is_nothing_to_register(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # import fails, as on a laptop
    assert lifecycle.register_snapstart_hooks() is False


def test_before_the_snapshot_the_connection_goes_and_after_the_restore_a_new_one_serves(
    installed: Memory, runtime_hooks: dict[str, list[Callable[[], Any]]]
) -> None:
    installed.add([NewMemory(content="Prefers pnpm")], user_id="u1")
    before = installed.admin.db.connection()
    lifecycle.register_snapstart_hooks()
    for hook in runtime_hooks["before"][::-1]:  # the runtime's order: reverse of registration
        hook()
    assert before.closed
    assert "embedder" in vars(installed.cells.parts[""])  # warmed up: restored containers skip building it
    for hook in runtime_hooks["after"]:
        hook()
    assert [m.content for m in installed.recall("package manager", user_id="u1").memories] == ["Prefers pnpm"]
    assert installed.admin.db.connection() is not before


def test_before_the_snapshot_cached_secrets_and_key_holding_providers_go(
    secretsmanager: Any, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    arn = secretsmanager.create_secret(Name="openai", SecretString="sk-first")["ARN"]
    service = Memory(
        Settings(
            database_url=database_url,
            embedding_provider="openai",
            embedding_dimensions=384,
            openai_api_key_secret_arn=arn,
            db_role="agent_memory_app",
        )
    )
    set_service(service)
    try:
        embedder = service.admin.embedder  # built with the secret's key (no call made)
        assert get_secret_value(arn) == "sk-first"
        secretsmanager.put_secret_value(SecretId=arn, SecretString="sk-rotated")
        assert get_secret_value(arn) == "sk-first"  # cached for five minutes
        lifecycle.before_snapshot()
        assert get_secret_value(arn) == "sk-rotated"  # fetched again
        assert service.admin.embedder is not embedder  # rebuilt with the key as it is now
    finally:
        set_service(None)
        service.close()


def test_after_the_restore_the_random_generator_is_this_containers_own(installed: Memory) -> None:
    random.seed(1234)
    snapshot_state = random.getstate()
    first = random.random()
    random.setstate(snapshot_state)  # a second container restored from the same memory
    lifecycle.after_restore()
    assert random.random() != first


def test_a_warm_up_that_fails_does_not_stop_the_snapshot(installed: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise RuntimeError("no model today")

    monkeypatch.setattr(lifecycle, "warm_up", broken)
    installed.add([NewMemory(content="kept")], user_id="u1")
    conn = installed.admin.db.connection()
    lifecycle.before_snapshot()
    assert conn.closed


def test_the_warm_up_builds_the_recall_routes_validation_without_a_database(
    runtime_hooks: dict[str, list[Callable[[], Any]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As at publish time: settings point at a database nobody may connect to yet."""
    monkeypatch.setattr(lambda_local, "_MODULES", {})
    monkeypatch.setattr(lifecycle, "_handler_warm_ups", [])
    module = lambda_local.load_module(lambda_local.function_spec(TEMPLATE, "RecallFunction"))
    service = Memory(Settings(database_url="postgresql://nobody@127.0.0.1:1/none", embedding_provider="hash"))
    set_service(service)
    try:
        lifecycle.warm_up()  # raises if any part of it fails
        routes = module.app._static_routes + module.app._dynamic_routes
        assert routes and all(route._dependant is not None for route in routes)
        assert "db" not in vars(service.cells.parts[""]) or service.admin.db._conn is None  # no connection was opened
    finally:
        set_service(None)
