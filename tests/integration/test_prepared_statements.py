"""AGENT_MEMORY_DB_PREPARED_STATEMENTS=false: no server-side PREPARE, so RDS Proxy never pins
a Lambda's session to one database connection for that reason."""

from __future__ import annotations

import pytest

from rushmem.config import Settings
from rushmem.service import Memory


@pytest.mark.parametrize(("enabled", "prepared_after_repeats"), [(True, True), (False, False)])
def test_repeated_statements_are_prepared_only_when_allowed(
    database_url: str, enabled: bool, prepared_after_repeats: bool
) -> None:
    service = Memory(Settings(database_url=database_url, embedding_provider="hash", db_prepared_statements=enabled))
    try:
        conn = service.admin.db.connection()
        for _ in range(10):  # psycopg prepares a statement after 5 executions by default
            conn.execute("SELECT count(*) FROM user_memories WHERE user_id = %s", ["u1"]).fetchone()
        prepared = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
        assert prepared is not None and (prepared[0] > 0) is prepared_after_repeats
    finally:
        service.close()
