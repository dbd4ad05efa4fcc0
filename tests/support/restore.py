"""A database copy taken aside and put back in its place: the restores of the erasure ledger's tests
(CREATE DATABASE ... TEMPLATE on the embedded server: a copy as of that moment, as a snapshot is)."""

from __future__ import annotations

import psycopg
from psycopg.conninfo import conninfo_to_dict


def database_name(database_url: str) -> str:
    return str(conninfo_to_dict(database_url)["dbname"])


def take_copy(database_url: str) -> str:
    """A copy of the database beside it (no session may be open on it); the copy's name."""
    name = database_name(database_url)
    copy = f"{name}_backup"
    with psycopg.connect(database_url, dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{copy}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{name}"')
    return copy


def put_back(database_url: str, copy: str) -> None:
    """The copy back under the database's own name, as pointing the stack at a restored cluster does."""
    name = database_name(database_url)
    with psycopg.connect(database_url, dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{copy}"')
        admin.execute(f'DROP DATABASE "{copy}"')
