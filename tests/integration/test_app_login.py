"""The request-serving functions' own login role (AGENT_MEMORY_APP_DB_USER), set up by the migration.

Two kinds of owner: the session server's superuser (a local developer), and, on a private server
of this module, non-superusers as on RDS: a master user with CREATEROLE, and an owner without it
whose DBA ran the documented SQL.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem.store.engine.embedded import start_embedded_server
from rushmem.store.engine.transactions import user_transaction
from rushmem.store.schema.roles import AppLogin
from rushmem_contract.errors import ConfigurationError
from rushmem_contract.models import NewMemory

MASTER = "rds_like_master"  # plays the RDS master user: CREATEROLE, not a superuser


def new_name(prefix: str = "am_login") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def as_user(url: str, user: str, **kwargs: Any) -> str:
    return make_conninfo(url, user=user, **kwargs)


def drop_role(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [name]).fetchone()
        if exists:
            # DROP OWNED only reaches the current database; no test role owns anything elsewhere.
            admin.execute(f'DROP OWNED BY "{name}"')
            admin.execute(f'DROP ROLE "{name}"')


def role_state(url: str, name: str) -> tuple[Any, ...]:
    """Everything a second run must leave alone: the pg_authid row and the role's memberships."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT * FROM pg_authid WHERE rolname = %s", [name]).fetchone()
        grants = conn.execute(
            "SELECT roleid::regrole::text, admin_option, inherit_option, set_option, grantor::regrole::text "
            "FROM pg_auth_members WHERE member = %s::regrole ORDER BY 1",
            [name],
        ).fetchall()
    return row, tuple(grants)


def scram_matches(verifier: str, password: str) -> bool:
    """Whether a SCRAM-SHA-256 verifier (pg_authid.rolpassword) was made from ``password``."""
    method, rest = verifier.split("$", 1)
    iterations_salt, keys = rest.split("$")
    iterations, salt = iterations_salt.split(":")
    stored_key = keys.split(":")[0]
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(salt), int(iterations))
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    return method == "SCRAM-SHA-256" and hashlib.sha256(client_key).digest() == base64.b64decode(stored_key)


def seed(url: str, **settings: Any) -> None:
    owner = Memory(Settings(database_url=url, embedding_provider="hash", **settings))
    owner.add([NewMemory(content="Alice prefers TypeScript")], user_id="alice")
    owner.add([NewMemory(content="Bob prefers Go")], user_id="bob")
    owner.close()


# --------------------------------------------------------------------------------------
# a superuser owner (the session server)
# --------------------------------------------------------------------------------------


@pytest.fixture
def login_name(pg_server: str) -> Iterator[str]:
    name = new_name()
    yield name
    drop_role(pg_server, name)


def test_migrate_creates_a_login_role_that_stays_in_its_lane(
    database_url: str, pg_server: str, login_name: str
) -> None:
    migrating = Memory(Settings(database_url=database_url, embedding_provider="hash", app_db_user=login_name))
    migrated = migrating.admin.migrate()
    assert migrated.applied == []
    assert migrated.app_login == AppLogin(login_name, created=True, granted=("agent_memory_app",))
    seed(database_url)

    # Trust authentication here: the role logs in with no password.
    app = Memory(Settings(database_url=as_user(database_url, login_name), embedding_provider="hash"))
    assert [m.content for m in app.recall("prefers", user_id="bob").memories] == ["Bob prefers Go"]
    conn = app.admin.db.connection()
    assert conn.execute("SELECT current_user").fetchone() == (login_name,)
    assert conn.execute("SELECT count(*) FROM user_memories").fetchone() == (0,)  # no user scope: nothing
    with user_transaction(conn, "alice"):
        assert [r[0] for r in conn.execute("SELECT content FROM user_memories").fetchall()] == [
            "Alice prefers TypeScript"
        ]
    # Not the owner: it can neither switch the wall off nor change the table.
    for statement in (
        "ALTER TABLE user_memories DISABLE ROW LEVEL SECURITY",
        "ALTER TABLE user_memories NO FORCE ROW LEVEL SECURITY",
        "DROP POLICY user_memories_tenant ON user_memories",
        "ALTER TABLE user_memories ADD COLUMN planted text",
        "TRUNCATE user_memories",  # whole-table commands are not subject to row-level security
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(statement)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("SET ROLE agent_memory_maintenance")
    app.close()

    before = role_state(pg_server, login_name)
    again = Memory(Settings(database_url=database_url, embedding_provider="hash", app_db_user=login_name))
    migrated = again.admin.migrate()
    assert migrated.applied == []
    assert migrated.app_login == AppLogin(login_name)
    assert migrated.app_login.summary() == f"{login_name}: unchanged"
    assert role_state(pg_server, login_name) == before


def test_an_existing_role_keeps_its_attributes_and_only_gains_the_membership(
    database_url: str, pg_server: str, login_name: str
) -> None:
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {login_name} LOGIN CONNECTION LIMIT 7 VALID UNTIL '2999-01-01'")
    authid_before, _ = role_state(pg_server, login_name)
    service = Memory(Settings(database_url=database_url, embedding_provider="hash", app_db_user=login_name))
    assert service.admin.migrate().app_login == AppLogin(login_name, granted=("agent_memory_app",))
    authid_after, grants = role_state(pg_server, login_name)
    assert authid_after == authid_before
    assert [g[0] for g in grants] == ["agent_memory_app"]


@pytest.mark.parametrize(
    ("attributes", "problem"),
    [
        ("LOGIN SUPERUSER", "superuser or has BYPASSRLS"),
        ("LOGIN BYPASSRLS", "superuser or has BYPASSRLS"),
        ("NOLOGIN", "cannot log in"),
        ("LOGIN NOINHERIT", "NOINHERIT"),
    ],
)
def test_roles_that_would_defeat_the_wall_or_cannot_work_are_refused(
    database_url: str, pg_server: str, login_name: str, attributes: str, problem: str
) -> None:
    with psycopg.connect(pg_server, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {login_name} {attributes}")
    before = role_state(pg_server, login_name)
    service = Memory(Settings(database_url=database_url, embedding_provider="hash", app_db_user=login_name))
    with pytest.raises(ConfigurationError, match=problem):
        service.admin.migrate()
    assert role_state(pg_server, login_name) == before  # one transaction: nothing half-done


def test_the_owner_itself_is_refused_as_the_login_role(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        owner = str(conn.execute("SELECT current_user").fetchone()[0])  # type: ignore[index]
    service = Memory(Settings(database_url=database_url, embedding_provider="hash", app_db_user=owner))
    with pytest.raises(ConfigurationError, match="owner"):
        service.admin.migrate()


def test_the_password_comes_from_the_app_secret(
    secretsmanager: Any, database_url: str, pg_server: str, login_name: str
) -> None:
    arn = secretsmanager.create_secret(
        Name=f"agent-memory/{login_name}",
        SecretString=json.dumps({"username": login_name, "password": "s3cret-from-the-stack"}),
    )["ARN"]
    settings = Settings(database_url=database_url, embedding_provider="hash", app_db_secret_arn=arn)
    first = Memory(settings)
    assert first.admin.migrate().app_login == AppLogin(
        login_name, created=True, granted=("agent_memory_app",), password_set=True
    )
    grants = role_state(pg_server, login_name)[1]
    with psycopg.connect(pg_server) as admin:
        verifier = admin.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", [login_name]).fetchone()
    assert verifier is not None and scram_matches(verifier[0], "s3cret-from-the-stack")
    assert not scram_matches(verifier[0], "another password")

    # The secret is the source of truth: a second run applies the same password again, nothing else.
    second = Memory(settings)
    assert second.admin.migrate().app_login == AppLogin(login_name, password_set=True)
    assert role_state(pg_server, login_name)[1] == grants

    mismatch = Settings(
        database_url=database_url, embedding_provider="hash", app_db_secret_arn=arn, app_db_user="someone_else"
    )
    with pytest.raises(ConfigurationError, match="someone_else"):
        Memory(mismatch).admin.migrate()


@pytest.mark.parametrize("name", ["agent_memory_app", "agent_memory_maintenance", "pg_monitor", "rds_iam", "x" * 64])
def test_group_and_reserved_roles_are_not_accepted_as_the_login_role(name: str) -> None:
    with pytest.raises(ValueError, match="cannot be the application's login role"):
        Settings(app_db_user=name)
    assert Settings(app_db_user="  ").app_db_user is None


# --------------------------------------------------------------------------------------
# non-superuser owners, as on RDS/Aurora (a private server: roles are cluster-wide)
# --------------------------------------------------------------------------------------


class RdsLike:
    """A private server with a master user (CREATEROLE, no superuser) and an rds_iam role it may grant."""

    def __init__(self, data_dir: Path) -> None:
        self.admin_url = start_embedded_server(data_dir)
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            admin.execute(f"CREATE ROLE {MASTER} LOGIN CREATEROLE")
            admin.execute("CREATE ROLE rds_iam NOLOGIN")
            admin.execute(f"GRANT rds_iam TO {MASTER} WITH ADMIN OPTION, INHERIT FALSE, SET FALSE")
        # The master migrates first, so it creates (and administers) the group roles, as on a new cluster.
        bootstrap = self.database(owner=MASTER)
        Memory(Settings(database_url=bootstrap, embedding_provider="hash")).admin.migrate()

    def database(self, owner: str) -> str:
        name = new_name("db")
        with psycopg.connect(self.admin_url, autocommit=True) as admin:
            # PostgreSQL 15+: the public schema belongs to pg_database_owner, i.e. to this owner.
            admin.execute(f"CREATE DATABASE {name} OWNER {owner}")
        # RDS lets its master user create pgvector; a plain PostgreSQL only lets superusers.
        with psycopg.connect(make_conninfo(self.admin_url, dbname=name), autocommit=True) as db:
            db.execute("CREATE EXTENSION vector")
        return as_user(make_conninfo(self.admin_url, dbname=name), owner)


@pytest.fixture(scope="module")
def rds_like(pg_root: Path) -> RdsLike:
    return RdsLike(pg_root / f"rds-like-{uuid.uuid4().hex[:8]}")


def test_a_master_user_creates_the_login_with_rds_iam_and_a_second_run_changes_nothing(rds_like: RdsLike) -> None:
    url, name = rds_like.database(owner=MASTER), new_name()
    settings = Settings(database_url=url, embedding_provider="hash", app_db_user=name, app_db_iam_auth=True)
    first = Memory(settings)
    migrated = first.admin.migrate()
    assert "0003_row_level_security" in migrated.applied
    assert migrated.app_login == AppLogin(name, created=True, granted=("agent_memory_app", "rds_iam"))
    seed(url)
    app = Memory(Settings(database_url=as_user(url, name), embedding_provider="hash", auto_migrate=False))
    assert [m.content for m in app.list(user_id="alice").memories] == ["Alice prefers TypeScript"]
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        app.admin.db.connection().execute("ALTER TABLE user_memories DISABLE ROW LEVEL SECURITY")
    app.close()

    before = role_state(rds_like.admin_url, name)
    second = Memory(settings)
    migrated = second.admin.migrate()
    assert migrated.applied == []
    assert migrated.app_login == AppLogin(name)
    assert role_state(rds_like.admin_url, name) == before


def test_an_existing_role_without_rds_iam_is_left_as_it_is_with_a_warning(
    rds_like: RdsLike, caplog: pytest.LogCaptureFixture
) -> None:
    # E.g. behind an existing RDS Proxy: the proxy logs in with the role's password, which rds_iam would disable.
    url, name = rds_like.database(owner=MASTER), new_name()
    with psycopg.connect(rds_like.admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {name} LOGIN IN ROLE agent_memory_app")
    service = Memory(Settings(database_url=url, embedding_provider="hash", app_db_user=name, app_db_iam_auth=True))
    with caplog.at_level(logging.WARNING, logger="rushmem.store.schema.roles"):
        assert service.admin.migrate().app_login == AppLogin(name)
    assert [g[0] for g in role_state(rds_like.admin_url, name)[1]] == ["agent_memory_app"]
    assert f"GRANT rds_iam TO {name}" in caplog.text


def test_without_createrole_the_error_says_what_the_dba_runs(rds_like: RdsLike) -> None:
    owner, name = new_name("owner"), new_name()
    with psycopg.connect(rds_like.admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {owner} LOGIN")  # no CREATEROLE
        # The documented DBA step for such an owner: the group roles exist; the owner may purge.
        admin.execute(f"GRANT agent_memory_maintenance TO {owner}")
    url = rds_like.database(owner=owner)
    settings = Settings(database_url=url, embedding_provider="hash", app_db_user=name)

    # The schema migrates (roles made beforehand are used as they are), the login role cannot be made.
    with pytest.raises(ConfigurationError) as err:
        Memory(settings).admin.migrate()
    message = str(err.value)
    assert "CREATEROLE" in message
    assert f"CREATE ROLE {name} LOGIN; GRANT agent_memory_app TO {name};" in message
    with psycopg.connect(rds_like.admin_url) as admin:
        assert admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [name]).fetchone() is None
    assert Memory(Settings(database_url=url, embedding_provider="hash")).admin.migrate().applied == []  # schema done

    # The DBA runs what the message says; the next deploy needs no privilege and changes nothing.
    with psycopg.connect(rds_like.admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {name} LOGIN")
        admin.execute(f"GRANT agent_memory_app TO {name}")
    before = role_state(rds_like.admin_url, name)
    service = Memory(settings)
    assert service.admin.migrate().app_login == AppLogin(name)
    assert role_state(rds_like.admin_url, name) == before
    seed(url)
    app = Memory(Settings(database_url=as_user(url, name), embedding_provider="hash", auto_migrate=False))
    assert [m.content for m in app.list(user_id="bob").memories] == ["Bob prefers Go"]
    app.close()


def test_an_owner_without_admin_on_agent_memory_app_gets_the_grant_to_ask_for(rds_like: RdsLike) -> None:
    # CREATEROLE, but the group roles were made by someone else (here the master): it may create
    # the login role but not grant it agent_memory_app. Nothing stays half-done.
    owner, name = new_name("owner"), new_name()
    with psycopg.connect(rds_like.admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {owner} LOGIN CREATEROLE")
        admin.execute(f"GRANT agent_memory_maintenance TO {owner}")
    url = rds_like.database(owner=owner)
    with pytest.raises(ConfigurationError, match=f"GRANT agent_memory_app TO {name};"):
        Memory(Settings(database_url=url, embedding_provider="hash", app_db_user=name)).admin.migrate()
    with psycopg.connect(rds_like.admin_url) as admin:
        assert admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [name]).fetchone() is None


def test_the_owner_login_with_set_role_works_once_migrated(rds_like: RdsLike) -> None:
    """The fallback without an app login: log in as the owner, SET ROLE agent_memory_app. On
    PostgreSQL 16+ the creator of agent_memory_app may administer it but not SET it: the migration
    grants that, and the request path says clearly when it is missing."""
    url = rds_like.database(owner=MASTER)
    with psycopg.connect(rds_like.admin_url, autocommit=True) as admin:
        # Only the grant a migration may have made; the master keeps ADMIN from creating the role.
        admin.execute(f"REVOKE agent_memory_app FROM {MASTER} GRANTED BY {MASTER}")
    Memory(Settings(database_url=url, embedding_provider="hash")).admin.migrate()
    request_settings = Settings(
        database_url=url, embedding_provider="hash", db_role="agent_memory_app", auto_migrate=False
    )
    before = Memory(request_settings)
    with pytest.raises(ConfigurationError, match=f"GRANT agent_memory_app TO {MASTER}"):
        before.add([NewMemory(content="fact")], user_id="u1")

    Memory(Settings(database_url=url, embedding_provider="hash", db_role="agent_memory_app")).admin.migrate()
    after = Memory(request_settings)
    after.add([NewMemory(content="fact")], user_id="u1")
    conn = after.admin.db.connection()
    assert conn.execute("SELECT current_user").fetchone() == ("agent_memory_app",)
    assert conn.execute("SELECT count(*) FROM user_memories").fetchone() == (0,)
    assert after.admin.purge() == {"expired": 0, "superseded": 0}  # the owner's maintenance role still works
    after.close()


def test_force_scopes_a_non_superuser_owner_until_it_takes_the_maintenance_role(rds_like: RdsLike) -> None:
    """The owner may SET ROLE agent_memory_maintenance (purge, re-embedding) but does not inherit it:
    its own queries without a user scope see nothing, as everyone's."""
    url = rds_like.database(owner=MASTER)
    seed(url)
    with psycopg.connect(url, autocommit=True) as owner:
        assert owner.execute("SELECT count(*) FROM user_memories").fetchone() == (0,)
        with owner.transaction():
            owner.execute("SET LOCAL ROLE agent_memory_maintenance")
            assert owner.execute("SELECT count(*) FROM user_memories").fetchone() == (2,)
    service = Memory(Settings(database_url=url, embedding_provider="hash"))
    assert service.admin.purge() == {"expired": 0, "superseded": 0}
    service.close()
