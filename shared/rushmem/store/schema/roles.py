"""Database roles: the login role of the request-serving functions, and the owner's right to SET
ROLE agent_memory_app. Run by the owner, after migrating; every change explains what a DBA must
run when the owner lacks the privilege.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import logging
import os
import unicodedata

import psycopg
from psycopg import sql

from rushmem.store.engine.connection import Connection
from rushmem.store.engine.pg import PgSession
from rushmem.store.schema.migrate import MIGRATION_LOCK_KEY
from rushmem_contract.errors import ConfigurationError

logger = logging.getLogger(__name__)

APP_ROLE = "agent_memory_app"
RDS_IAM_ROLE = "rds_iam"  # exists on RDS and Aurora only; membership makes a role log in with IAM tokens

# PostgreSQL 16 split membership into ADMIN, INHERIT and SET: a CREATEROLE user gets only ADMIN on
# the roles it creates, so "member" is not enough to SET ROLE (or to use the privileges) there.
_HAS_ROLE = """
SELECT CASE WHEN current_setting('server_version_num')::int >= 160000
            THEN pg_has_role(COALESCE(%(member)s::name, current_user), %(role)s, %(privilege)s)
            ELSE pg_has_role(COALESCE(%(member)s::name, current_user), %(role)s, 'MEMBER') END
"""


@dataclasses.dataclass(frozen=True)
class AppLogin:
    """What :func:`ensure_app_login` found or changed."""

    role: str
    created: bool = False
    granted: tuple[str, ...] = ()  # group roles granted to it now
    password_set: bool = False

    def summary(self) -> str:
        done = (["created"] if self.created else []) + [f"granted {r}" for r in self.granted]
        done += ["password set from the secret"] if self.password_set else []
        return f"{self.role}: {', '.join(done) or 'unchanged'}"


def _has_role(conn: Connection, member: str | None, role: str, privilege: str) -> bool:
    """Whether ``member`` (None: the current user) holds ``privilege`` (SET, USAGE, MEMBER) on ``role``."""
    row = conn.execute(_HAS_ROLE, {"member": member, "role": role, "privilege": privilege}).fetchone()
    return bool(row and row[0])


def _current_user(conn: Connection) -> str:
    row = conn.execute("SELECT current_user").fetchone()
    return str(row[0]) if row else ""


def _run_or_explain(conn: Connection, statement: sql.Composed, *, why: str, dba_sql: str) -> None:
    try:
        with conn.transaction():  # a savepoint: the caller's transaction survives to report
            conn.execute(statement)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise ConfigurationError(
            f"database user {_current_user(conn)} may not {why} ({str(exc).strip().splitlines()[0]}). "
            f"Have a DBA run, once: {dba_sql}; then deploy (or run rushmem migrate) again"
        ) from exc


def ensure_can_set_role(conn: Connection, role: str) -> bool:
    """Let the connected user (the owner) SET ROLE ``role``; True when this granted it.

    For deployments that log in as the owner and SET ROLE agent_memory_app on each connection.
    """
    user = _current_user(conn)
    try:
        if _has_role(conn, None, role, "SET"):
            return False
    except psycopg.errors.UndefinedObject as exc:
        raise ConfigurationError(f"role {role} does not exist: run the migrations first") from exc
    grant = sql.SQL("GRANT {} TO {}").format(sql.Identifier(role), sql.Identifier(user))
    _run_or_explain(conn, grant, why=f"grant itself {role}", dba_sql=f"GRANT {role} TO {user};")
    return True


def ensure_app_login(conn: Connection, name: str, *, password: str | None = None, iam: bool = False) -> AppLogin:
    """Make ``name`` a login role that is a member of agent_memory_app, and nothing more.

    Creates it (LOGIN, plus rds_iam with ``iam`` where that role exists) when missing; an
    existing role keeps every attribute and membership it has, except that ``password`` (from
    the app secret, the source of truth RDS Proxy logs in with) is always applied. Refuses a
    role that would defeat row-level security (superuser, BYPASSRLS, the tables' owner).
    Idempotent and safe to run concurrently; one transaction.
    """
    user = _current_user(conn)
    if name == user:
        raise ConfigurationError(
            f"the application's login role ({name}) is the user running the migration, i.e. the tables' owner: "
            "an owner can switch row-level security off. Choose another name"
        )
    created, granted = False, []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK_KEY])
        row = conn.execute(
            "SELECT rolsuper OR rolbypassrls, rolcanlogin FROM pg_roles WHERE rolname = %s", [name]
        ).fetchone()
        if row is None:
            create = sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name))
            try:
                _run_or_explain(
                    conn,
                    create,
                    why=f"create the login role {name} (it lacks CREATEROLE)",
                    dba_sql=f"CREATE ROLE {name} LOGIN; GRANT {APP_ROLE} TO {name};"
                    + (f" GRANT {RDS_IAM_ROLE} TO {name};" if iam else "")
                    + (f" ALTER ROLE {name} PASSWORD '<the password in the app secret>';" if password else ""),
                )
                created = True
            except (psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
                pass  # roles are cluster-wide: a migration of another database made it just now
        elif row[0]:
            raise ConfigurationError(
                f"role {name} is a superuser or has BYPASSRLS: row-level security would not apply to it. "
                f"Use another role as RUSHMEM_APP_DB_USER"
            )
        elif not row[1]:
            raise ConfigurationError(
                f"role {name} exists but cannot log in (NOLOGIN); this migration leaves existing roles as "
                f"they are: have a DBA run ALTER ROLE {name} LOGIN, or choose another name"
            )
        owner = conn.execute(
            "SELECT tableowner FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'user_memories'"
        ).fetchone()
        if owner is not None and _has_role(conn, name, owner[0], "MEMBER"):
            raise ConfigurationError(
                f"role {name} is (a member of) {owner[0]}, the owner of user_memories, and could switch "
                f"row-level security off: revoke {owner[0]} from it, or choose another name"
            )
        if not _has_role(conn, name, APP_ROLE, "USAGE"):
            grant = sql.SQL("GRANT {} TO {}").format(sql.Identifier(APP_ROLE), sql.Identifier(name))
            _run_or_explain(conn, grant, why=f"grant {APP_ROLE} to {name}", dba_sql=f"GRANT {APP_ROLE} TO {name};")
            granted.append(APP_ROLE)
            if not _has_role(conn, name, APP_ROLE, "USAGE"):
                raise ConfigurationError(
                    f"role {name} is NOINHERIT, so it cannot use {APP_ROLE}'s privileges: have a DBA run "
                    f"ALTER ROLE {name} INHERIT (or choose another name)"
                )
        has_iam_role = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [RDS_IAM_ROLE]).fetchone()
        if iam and has_iam_role:
            if created:
                grant = sql.SQL("GRANT {} TO {}").format(sql.Identifier(RDS_IAM_ROLE), sql.Identifier(name))
                _run_or_explain(
                    conn, grant, why=f"grant {RDS_IAM_ROLE} to {name}", dba_sql=f"GRANT {RDS_IAM_ROLE} TO {name};"
                )
                granted.append(RDS_IAM_ROLE)
            elif not _has_role(conn, name, RDS_IAM_ROLE, "MEMBER"):
                logger.warning(
                    "role %s exists without %s: it can log in with IAM tokens through RDS Proxy only (with its "
                    "secret registered there); to connect directly, a DBA runs GRANT %s TO %s",
                    name,
                    RDS_IAM_ROLE,
                    RDS_IAM_ROLE,
                    name,
                )
        if password is not None:
            if has_iam_role and _has_role(conn, name, RDS_IAM_ROLE, "MEMBER"):
                raise ConfigurationError(
                    f"role {name} is a member of {RDS_IAM_ROLE}, so RDS accepts only IAM tokens for it and the "
                    f"password RDS Proxy logs in with would be refused: REVOKE {RDS_IAM_ROLE} FROM {name}"
                )
            # Hashed here (SCRAM, as the server is configured): the password never reaches server logs.
            verifier = _password_verifier(conn, password, name)
            alter = sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(name), sql.Literal(verifier))
            _run_or_explain(
                conn,
                alter,
                why=f"set the password of {name}",
                dba_sql=f"ALTER ROLE {name} PASSWORD '<the password in the app secret>';",
            )
    return AppLogin(name, created=created, granted=tuple(granted), password_set=password is not None)


def _password_verifier(conn: Connection, password: str, name: str) -> str:
    """What ALTER ROLE ... PASSWORD stores: libpq's hash on a connection; on the RDS Data API (no
    libpq session) the SCRAM-SHA-256 verifier computed here, the only kind the Data API logs in with."""
    if not isinstance(conn, PgSession):
        return scram_sha256_verifier(password)
    return bytes(conn.pgconn.encrypt_password(password.encode(), name.encode())).decode()


def scram_sha256_verifier(password: str, *, salt: bytes | None = None, iterations: int = 4096) -> str:
    """PostgreSQL's SCRAM-SHA-256 verifier (RFC 5802/7677, as libpq's PQencryptPasswordConn makes it),
    for a password of printable ASCII as the template generates (SASLprep leaves those unchanged)."""
    salt = salt if salt is not None else os.urandom(16)
    salted = hashlib.pbkdf2_hmac("sha256", unicodedata.normalize("NFKC", password).encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    stored_key = hashlib.sha256(client_key).digest()

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored_key)}:{b64(server_key)}"
