"""functions.sql: every function and its triggers in one file, run after the numbered migrations
whenever one was applied or the file changed (rushmem.store.schema.migrate). A store migrated
before it (at 0019) ends exactly as a fresh one."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from rushmem.store.engine.pg import PgSession
from rushmem.store.schema import migrate
from rushmem.store.schema.migrate import (
    FUNCTIONS_NAME,
    FUNCTIONS_VERSION,
    Functions,
    _apply,
    apply_migrations,
    available_migrations,
    schema_functions,
)

FINGERPRINT = "hash:feature-hash-v1:384"
# What a function and a trigger are, as the catalog says: definition (an aggregate's: its
# transition function and state type), owner and grants.
FUNCTIONS = """
SELECT p.proname, pg_get_function_identity_arguments(p.oid),
       CASE WHEN p.prokind = 'a'
            THEN (SELECT a.aggtransfn::regproc::text || ' ' || a.aggtranstype::regtype::text
                  FROM pg_aggregate a WHERE a.aggfnoid = p.oid)
            ELSE pg_get_functiondef(p.oid) END,
       pg_get_userbyid(p.proowner), p.proacl::text
FROM pg_proc p
WHERE p.pronamespace = current_schema()::regnamespace
  AND NOT EXISTS (SELECT FROM pg_depend d
                  WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
ORDER BY 1, 2
"""
TRIGGERS = "SELECT tgname, pg_get_triggerdef(oid), tgenabled FROM pg_trigger WHERE NOT tgisinternal ORDER BY 1"


def catalog(url: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(url) as conn:
        return {"functions": conn.execute(FUNCTIONS).fetchall(), "triggers": conn.execute(TRIGGERS).fetchall()}


def migrate_all(conn: PgSession) -> list[str]:
    return apply_migrations(conn, dimension=384, fingerprint=FINGERPRINT)


def test_a_store_at_0019_moves_to_functions_sql_and_ends_as_a_fresh_one(
    database_url: str, blank_database_url: str
) -> None:
    """``database_url`` is a fresh store (the template, migrated by this code)."""
    with PgSession.connect(blank_database_url, autocommit=True) as conn:
        _apply(conn, [m for m in available_migrations() if m.version <= 19], dimension=384, fingerprint=FINGERPRINT)
        # Before 0020 the numbered migrations created the functions and triggers; at 0019 they were
        # what functions.sql holds. Here one function stands for an older definition and one trigger
        # is missing: both come back.
        conn.execute(schema_functions().sql.encode())
        conn.execute(
            "CREATE OR REPLACE FUNCTION agent_memory_stamp_write() RETURNS trigger LANGUAGE plpgsql"
            " AS $$ BEGIN RETURN NEW; END $$"
        )
        conn.execute("DROP TRIGGER user_memories_outbox ON user_memories")
        # 0020 and every later migration (0021, 0022, 0023_depends_on, ...), then the file.
        later = [f"{m.version:04d}_{m.name}" for m in available_migrations() if m.version > 19]
        assert later[0] == "0020_functions_file" and migrate_all(conn) == [*later, FUNCTIONS_NAME]
        assert migrate_all(conn) == []
    assert catalog(blank_database_url) == catalog(database_url)
    names = {row[0] for row in catalog(database_url)["functions"]}
    assert {"agent_memory_record_event", "agent_memory_dense_text_leg", "agent_memory_read_as"} <= names


def test_functions_sql_runs_again_when_it_changed_and_only_then(
    blank_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with PgSession.connect(blank_database_url, autocommit=True) as conn:
        assert migrate_all(conn)[-1] == FUNCTIONS_NAME
        assert migrate_all(conn) == []
        # An edit of a function is an edit of the file: the next migrate runs it, once.
        edited = Functions(schema_functions().sql + "COMMENT ON FUNCTION agent_memory_stamp_write() IS 'edited';\n")
        monkeypatch.setattr(migrate, "schema_functions", lambda: edited)
        assert migrate_all(conn) == [FUNCTIONS_NAME]
        assert migrate_all(conn) == []
        comment = conn.execute("SELECT obj_description('agent_memory_stamp_write'::regproc)").fetchone()
        assert comment == ("edited",)
        recorded = conn.execute(
            "SELECT name, checksum FROM agent_memory_migrations WHERE version = %s", [FUNCTIONS_VERSION]
        ).fetchone()
        assert recorded == (FUNCTIONS_NAME, edited.checksum)


def test_a_migration_applied_runs_the_functions_again(blank_database_url: str) -> None:
    """A migration may drop a table with its triggers: the unchanged file runs after it all the same."""
    with PgSession.connect(blank_database_url, autocommit=True) as conn:
        migrate_all(conn)
        conn.execute("DROP TRIGGER user_memories_history ON user_memories")
        conn.execute("DELETE FROM agent_memory_migrations WHERE version = 20")
        assert migrate_all(conn) == ["0020_functions_file", FUNCTIONS_NAME]
        assert conn.execute("SELECT 1 FROM pg_trigger WHERE tgname = 'user_memories_history'").fetchone() == (1,)


def test_no_numbered_migration_defines_a_function() -> None:
    """Functions live in functions.sql; a migration holds tables, columns, indexes, data moves."""
    defines = re.compile(r"\bCREATE\s+(OR\s+REPLACE\s+)?(FUNCTION|PROCEDURE|TRIGGER)\b", re.IGNORECASE)
    for m in available_migrations():
        assert not defines.search(re.sub(r"--[^\n]*", "", m.sql)), m.name
