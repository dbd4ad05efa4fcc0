"""Row-level security: the database itself keeps users apart, even from a query that forgets to."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem.store.engine.transactions import user_transaction
from rushmem_contract.errors import ConfigurationError
from rushmem_contract.instructions import ExtractionInstructions
from rushmem_contract.models import NewMemory

# The same behaviour on a connection and through the RDS Data API (tests/support/data_api.py).
pytestmark = pytest.mark.both_backends


def seed(service: Memory) -> None:
    service.add([NewMemory(content="Alice prefers TypeScript"), NewMemory(content="Alice uses vim")], user_id="alice")
    service.add([NewMemory(content="Bob prefers Go")], user_id="bob")


def test_a_query_without_the_user_scope_sees_nothing(service: Memory) -> None:
    seed(service)
    conn = service.admin.db.connection()
    with conn.transaction():  # no user set for this transaction
        assert conn.execute("SELECT count(*) FROM user_memories").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM memory_events").fetchone() == (0,)
    with user_transaction(conn, "alice"):
        # Even without WHERE user_id = ..., only Alice's rows come back.
        contents = sorted(r[0] for r in conn.execute("SELECT content FROM user_memories").fetchall())
        assert contents == ["Alice prefers TypeScript", "Alice uses vim"]


def test_writing_for_another_user_is_refused(service: Memory) -> None:
    seed(service)
    conn = service.admin.db.connection()
    with pytest.raises(psycopg.errors.InsufficientPrivilege), user_transaction(conn, "alice"):
        conn.execute(
            "INSERT INTO user_memories (user_id, content, content_hash, embedding) "
            "VALUES ('bob', 'planted', 'x', array_fill(0.1, ARRAY[384])::vector)"
        )
    with user_transaction(conn, "alice"):
        # Bob's row is invisible, so this UPDATE changes nothing.
        hacked = conn.execute("UPDATE user_memories SET content = 'hacked' WHERE user_id = 'bob' RETURNING id")
        assert hacked.fetchall() == []


def test_the_settings_do_not_outlive_the_transaction(service: Memory) -> None:
    seed(service)
    conn = service.admin.db.connection()
    with user_transaction(conn, "alice"):
        pass
    # Transaction-local (set_config(..., true)): a pooled connection reused by someone else sees nothing.
    assert conn.execute("SELECT current_setting('agent_memory.user_id', true)").fetchone() in ((None,), ("",))
    assert conn.execute("SELECT count(*) FROM user_memories").fetchone() == (0,)


def test_a_login_role_of_agent_memory_app_works_and_stays_in_its_lane(database_url: str, app_login_url: str) -> None:
    owner = Memory(Settings(database_url=database_url, embedding_provider="hash"))
    seed(owner)
    app = Memory(Settings(database_url=app_login_url, embedding_provider="hash"))
    assert [m.content for m in app.recall("prefers", user_id="bob").memories] == ["Bob prefers Go"]
    app.add([NewMemory(content="Carol prefers Rust")], user_id="carol")
    assert app.forget_user("alice").deleted.memories == 2
    assert [m.content for m in app.list(user_id="bob").memories] == ["Bob prefers Go"]
    with pytest.raises(ConfigurationError) as err:
        app.admin.purge()  # across all users: only the maintenance role may
    assert "agent_memory_maintenance" in str(err.value)
    conn = app.admin.db.connection()
    assert conn.execute("SELECT count(*) FROM user_memories").fetchone() == (0,)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("DROP TABLE user_memories")
    app.close()
    owner.close()


def test_the_embedded_default_runs_as_the_application_role(embedded_dir: Path) -> None:
    service = Memory(Settings(data_dir=embedded_dir, embedding_provider="hash"))
    service.add([NewMemory(content="fact")], user_id="u1")
    conn = service.admin.db.connection()
    assert conn.execute("SELECT current_user").fetchone() == ("agent_memory_app",)
    assert conn.execute("SELECT count(*) FROM user_memories").fetchone() == (0,)
    assert service.admin.purge() == {"expired": 0, "superseded": 0}  # maintenance still possible
    service.close()


def test_extraction_instructions_are_behind_the_same_wall(service: Memory) -> None:
    service.set_instructions(ExtractionInstructions(ignore=["football"]), user_id="alice", project_id="web")
    service.set_instructions(ExtractionInstructions(ignore=["golf"]), user_id="bob", project_id="web")
    assert service.get_instructions(user_id="alice", project_id="web").instructions.ignore == ["football"]
    conn = service.admin.db.connection()
    with conn.transaction():  # no user set for this transaction
        assert conn.execute("SELECT count(*) FROM extraction_instructions").fetchone() == (0,)
    with user_transaction(conn, "alice"):
        assert conn.execute("SELECT count(*) FROM extraction_instructions").fetchone() == (1,)
    with pytest.raises(psycopg.errors.InsufficientPrivilege), user_transaction(conn, "alice"):
        conn.execute(
            "INSERT INTO extraction_instructions (user_id, project_key, version, instructions) "
            "VALUES ('bob', 'web', 2, '{}')"
        )
