"""The erasure ledger: a database restored from before an erasure forgets the user again before it
answers anyone, and the receipt says when the backups holding the erased data expire.

The restores are real: a copy of the database taken before the erasure (CREATE DATABASE ...
TEMPLATE, or the embedded server's stopped data folder copied aside) put back in its place."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from rushmem.config import Settings
from rushmem.providers.ledger import FileLedger, LedgerEntry
from rushmem.service import Memory, set_service
from rushmem.store.accounts import erasures
from rushmem_client import MemoryClient
from rushmem_contract.errors import ServiceUnavailable
from rushmem_contract.models import NewMemory
from rushmem_tools.cli.main import main
from rushmem_tools.local import runtime as lambda_local
from tests.support.data_api import DataApiStandIn
from tests.support.recall import TEMPLATE, body_of, event, invoke, with_body, with_request
from tests.support.restore import put_back, take_copy

ROOT = Path(__file__).resolve().parents[2]
ERASED, KEPT = "ana.lima@example.com", "bruno"
RETENTION_DAYS = 7


def _release() -> None:
    """Close the connections of the service the handlers built (a database with sessions cannot be
    copied or dropped), as a function's container going away would."""
    built = set_service(None)
    if built is not None:
        built.close()


def _stored(database_url: str, user_id: str) -> int:
    with psycopg.connect(database_url) as owner:  # the superuser: past row-level security
        row = owner.execute("SELECT count(*) FROM user_memories WHERE user_id = %s", [user_id]).fetchone()
    assert row is not None
    return int(row[0])


def _list(user_id: str) -> list[dict[str, object]]:
    answer = invoke(with_request(event("http-memories-list.json"), "GET", "/memories", {"user_id": user_id}))
    assert answer["statusCode"] == 200, answer
    items: list[dict[str, object]] = body_of(answer)["memories"]
    return items


def _add(user_id: str, *texts: str) -> None:
    body = {"user_id": user_id, "memories": [{"content": t} for t in texts]}
    assert invoke(with_body("http-memories-add.json", body))["statusCode"] == 201


def _horizon(receipt: dict[str, str]) -> dt.datetime:
    return dt.datetime.fromisoformat(receipt["erased_at"]) + dt.timedelta(days=RETENTION_DAYS)


def test_a_restored_database_forgets_again_when_the_deploy_migrates_before_the_functions_answer(
    lambda_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in AWS: the request functions never migrate (RUSHMEM_AUTO_MIGRATE=false in the template);
    MigrateFunction, which the stack runs before it points them at a database, re-applies the ledger."""
    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("RUSHMEM_ERASURE_LEDGER", str(ledger))
    monkeypatch.setenv("RUSHMEM_BACKUP_RETENTION_DAYS", str(RETENTION_DAYS))
    monkeypatch.setenv("RUSHMEM_AUTO_MIGRATE", "false")  # as template.yaml sets it for every function
    _add(ERASED, "Prefers tea", "Lives in Porto")
    _add(KEPT, "Prefers coffee")
    _release()
    backup = take_copy(lambda_env)  # the snapshot, taken before the erasure

    erased = invoke(with_request(event("http-memories-delete-all.json"), "DELETE", "/memories", {"user_id": ERASED}))
    assert erased["statusCode"] == 200
    receipt = body_of(erased)
    assert receipt["deleted"]["memories"] == 2
    assert dt.datetime.fromisoformat(receipt["backup_horizon"]) == _horizon(receipt)
    # The ledger holds the receipt's identity, never the user's id.
    (line,) = ledger.read_text().splitlines()
    assert json.loads(line)["receipt_id"] == receipt["id"] and ERASED not in line and "ana" not in line
    _release()

    put_back(lambda_env, backup)
    assert _stored(lambda_env, ERASED) == 2  # the restore brought the erased user back

    migrated = lambda_local.invoke(TEMPLATE, "MigrateFunction", {})
    assert migrated["erasures_reapplied"] == [receipt["id"]]
    # The first request answered after the restore: the user is gone again, the receipt is back.
    assert _list(ERASED) == []
    assert _stored(lambda_env, ERASED) == 0
    read = invoke(with_request(event("http-erasure.json"), "GET", f"/erasures/{receipt['id']}"))
    assert read["statusCode"] == 200
    again = body_of(read)
    assert {k: again[k] for k in ("id", "subject", "erased_at", "backup_horizon", "requested_by", "deleted")} == {
        k: receipt[k] for k in ("id", "subject", "erased_at", "backup_horizon", "requested_by", "deleted")
    }
    assert [m["content"] for m in _list(KEPT)] == ["Prefers coffee"]  # nobody else lost anything
    _release()
    # Idempotent: the next deploy finds every erasure in place.
    assert lambda_local.invoke(TEMPLATE, "MigrateFunction", {})["erasures_reapplied"] == []


def test_a_process_that_migrates_on_start_forgets_again_before_its_first_answer(
    database_url: str, tmp_path: Path
) -> None:
    """In-process and `rushmem serve` (RUSHMEM_AUTO_MIGRATE on, the local default): the first
    connection re-applies the ledger before any verb reads."""
    settings = Settings(
        database_url=database_url,
        embedding_provider="hash",
        db_role="agent_memory_app",
        erasure_ledger=str(tmp_path / "ledger.jsonl"),
        backup_retention_days=RETENTION_DAYS,
    )
    with Memory(settings) as memory:
        memory.add([NewMemory(content="Prefers tea")], user_id=ERASED)
        memory.add([NewMemory(content="Prefers coffee")], user_id=KEPT)
    backup = take_copy(database_url)
    with Memory(settings) as memory:
        receipt = memory.forget_user(ERASED, requested_by="dpo-ticket-7")
    put_back(database_url, backup)
    assert _stored(database_url, ERASED) == 1
    with Memory(settings) as memory:
        assert memory.list(user_id=ERASED).memories == []  # the first call of the new process
        assert memory.erasure(receipt.id) == receipt  # the same id, time, requester and horizon
        assert receipt.backup_horizon == receipt.erased_at + dt.timedelta(days=RETENTION_DAYS)
        assert [m.content for m in memory.list(user_id=KEPT).memories] == ["Prefers coffee"]


def test_an_erasure_cut_short_after_its_ledger_entry_is_completed_on_the_next_start(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ledger is written first: a crash between it and the deletion leaves an entry, which the
    next migrate completes under the entry's receipt id (`rushmem migrate` says which)."""
    path = tmp_path / "ledger.jsonl"
    settings = Settings(
        database_url=database_url, embedding_provider="hash", erasure_ledger=str(path), auto_migrate=False
    )
    with Memory(settings) as memory:
        memory.add([NewMemory(content="Prefers tea")], user_id=ERASED)
        store, subject = memory.admin.db.run(lambda conn: erasures.ledger_identity(conn, ERASED))
    cut_short = LedgerEntry(uuid.uuid4(), subject, store, dt.datetime.now(dt.UTC), "cli")
    FileLedger(path).record(cut_short)  # ... and the process died before the deletion
    assert main(["migrate"], settings=settings) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["erasures_reapplied"] == [str(cut_short.receipt_id)]
    with Memory(settings) as memory:
        assert memory.list(user_id=ERASED).memories == []
        found = memory.erasure(cut_short.receipt_id)
        assert (found.deleted.memories, found.requested_by) == (1, "cli")
        assert found.backup_horizon is None  # this deployment declares no automated backups
    assert main(["migrate"], settings=settings) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["erasures_reapplied"] == []


def test_an_erasure_whose_ledger_cannot_be_written_does_not_happen(database_url: str, tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    settings = Settings(
        database_url=database_url,
        embedding_provider="hash",
        erasure_ledger=str(blocked / "ledger.jsonl"),
        auto_migrate=False,  # reading it would fail first (a test of its own below)
    )
    with Memory(settings) as memory:
        memory.add([NewMemory(content="Prefers tea")], user_id=ERASED)
        with pytest.raises(ServiceUnavailable, match="erasure ledger"):
            memory.forget_user(ERASED)
        assert [m.content for m in memory.list(user_id=ERASED).memories] == ["Prefers tea"]


def test_a_process_that_cannot_read_the_ledger_does_not_serve(database_url: str, tmp_path: Path) -> None:
    settings = Settings(database_url=database_url, embedding_provider="hash", erasure_ledger=str(tmp_path))
    with Memory(settings) as memory, pytest.raises(ServiceUnavailable, match="cannot be read"):
        memory.list(user_id=KEPT)


def test_the_cli_and_the_client_show_the_backup_horizon(
    lambda_env: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RUSHMEM_BACKUP_RETENTION_DAYS", str(RETENTION_DAYS))
    monkeypatch.setenv("RUSHMEM_ERASURE_LEDGER", str(tmp_path / "ledger.jsonl"))
    from tests.support.recall import serving

    with serving() as url, MemoryClient(url, auth="none", timeout=30) as client:
        client.add(["Prefers pnpm"], user_id="u1")
        receipt = client.forget_user("u1")
        assert receipt.backup_horizon == receipt.erased_at + dt.timedelta(days=RETENTION_DAYS)
        assert client.erasure(receipt.id).backup_horizon == receipt.backup_horizon
    _release()
    assert main(["erasure", str(receipt.id)]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert dt.datetime.fromisoformat(printed["backup_horizon"]) == receipt.backup_horizon


# ---- `rushmem serve` on the embedded server: the local default, a data folder put back ------------


@contextmanager
def _serve(data_dir: Path) -> Iterator[str]:
    """`rushmem serve` as a user runs it (the embedded server in ``data_dir``, the ledger beside it)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("RUSHMEM_", "AGENT_MEMORY_"))},
        "RUSHMEM_DATA_DIR": str(data_dir),
        "RUSHMEM_EMBEDDING_PROVIDER": "hash",
        "RUSHMEM_BACKUP_RETENTION_DAYS": str(RETENTION_DAYS),
        "PYTHONUNBUFFERED": "1",
    }
    log = (data_dir.parent / "serve.log").open("a")
    serve = subprocess.Popen(
        [sys.executable, "-m", "rushmem_tools", "serve", "--port", "0", "--no-warm", "--no-page", "--no-docs"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        assert line, (data_dir.parent / "serve.log").read_text()
        yield str(json.loads(line)["url"])
    finally:
        serve.terminate()
        serve.wait(timeout=60)
        log.close()


def test_rushmem_serve_on_a_data_folder_put_back_forgets_before_its_first_answer(embedded_dir: Path) -> None:
    embedded_dir.mkdir()
    with httpx.Client(timeout=120) as http:  # generous: a loaded machine starts the embedded server slowly
        _serve_restore_serve(http, embedded_dir)


def _serve_restore_serve(http: httpx.Client, embedded_dir: Path) -> None:
    data_dir = embedded_dir / "data"
    backup = embedded_dir / "backup"
    with _serve(data_dir) as url:
        assert http.post(f"{url}/memories", json={"user_id": ERASED, "memories": [{"content": "Tea"}]}).is_success
        assert http.post(f"{url}/memories", json={"user_id": KEPT, "memories": [{"content": "Coffee"}]}).is_success
    # A copy of the stopped server's folder (cp -a keeps its owner: the server may run as its own user).
    subprocess.run(["cp", "-a", str(data_dir), str(backup)], check=True)
    with _serve(data_dir) as url:
        receipt = http.request("DELETE", f"{url}/memories", params={"user_id": ERASED}).json()
    assert dt.datetime.fromisoformat(receipt["backup_horizon"]) == _horizon(receipt)
    ledger = embedded_dir / "data.erasures.jsonl"  # beside the data folder, not in it
    assert receipt["id"] in ledger.read_text()
    shutil.rmtree(data_dir)
    subprocess.run(["cp", "-a", str(backup), str(data_dir)], check=True)
    with _serve(data_dir) as url:
        first = http.get(f"{url}/memories", params={"user_id": ERASED})
        assert first.status_code == 200 and first.json()["memories"] == []
        assert http.get(f"{url}/erasures/{receipt['id']}").json()["erased_at"] == receipt["erased_at"]
        kept = http.get(f"{url}/memories", params={"user_id": KEPT}).json()["memories"]
        assert [m["content"] for m in kept] == ["Coffee"]


# ---- DatabaseAccess=data-api (the quickstart): the same through the RDS Data API stand-in ----------


def test_through_the_data_api_the_owner_s_migrate_re_applies_the_ledger(
    data_api_settings: Settings, data_api: DataApiStandIn, database_url: str, tmp_path: Path
) -> None:
    """The request functions erase through the Data API as the login role; MigrateFunction, as the
    owner (the cluster's master secret), re-applies the ledger to the restored database."""
    ledger = {"erasure_ledger": str(tmp_path / "ledger.jsonl"), "backup_retention_days": RETENTION_DAYS}
    functions = data_api_settings.model_copy(update=ledger)
    owner_secret = f"arn:aws:secretsmanager:us-east-1:123456789012:secret:owner-{uuid.uuid4().hex[:6]}"
    data_api.logins[owner_secret] = make_conninfo(database_url, dbname="postgres")
    owner = functions.model_copy(update={"db_secret_arn": owner_secret})
    with Memory(functions) as memory:
        memory.add([NewMemory(content="Prefers tea")], user_id=ERASED)
    data_api.close_idle()
    backup = take_copy(database_url)
    with Memory(functions) as memory:
        receipt = memory.forget_user(ERASED, requested_by="dpo")
    data_api.close_idle()
    put_back(database_url, backup)
    assert [str(receipt.id)] == Memory(owner).admin.migrate().erasures_reapplied
    with Memory(functions) as memory:
        assert memory.list(user_id=ERASED).memories == []
        assert memory.erasure(receipt.id) == receipt
