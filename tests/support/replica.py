"""The streaming replica of :mod:`rushmem_tools.bench.replica` as pytest fixtures (register this
module as a plugin: ``pytest_plugins = ("tests.support.replica",)`` in tests/conftest.py).

- ``replica_pair``: a primary + hot standby for a whole pytest session.
- ``replica_database``: a migrated database made on the primary, visible on the standby.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem_tools.bench.replica import (
    TEMPLATE_DB,
    ReplicaError,
    ReplicaPair,
    current_lsn,
    drop_database,
    lag_summary,
    measure_memory_replay_lag,
    measure_replay_lag,
    new_database,
    replay_lsn,
    streaming_replica,
    wait_for_replay,
)

__all__ = [
    "ReplicaError",
    "ReplicaPair",
    "current_lsn",
    "drop_database",
    "lag_summary",
    "measure_memory_replay_lag",
    "measure_replay_lag",
    "new_database",
    "replay_lsn",
    "streaming_replica",
    "wait_for_replay",
]


# ---- pytest fixtures ------------------------------------------------------------------------


@pytest.fixture(scope="session")
def replica_pair(pg_root: Path) -> Iterator[ReplicaPair]:
    """A primary + streaming hot standby for the whole session (started on first use)."""
    with streaming_replica(pg_root) as pair:
        yield pair


@pytest.fixture(scope="session")
def _replica_template(replica_pair: ReplicaPair) -> str:
    """A database migrated for the ``hash`` embedder on the primary, to clone per test."""
    with psycopg.connect(replica_pair.primary_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{TEMPLATE_DB}"')
    service = Memory(Settings(database_url=replica_pair.primary_for(TEMPLATE_DB), embedding_provider="hash"))
    service.admin.migrate()
    service.close()
    return TEMPLATE_DB


@pytest.fixture
def replica_database(replica_pair: ReplicaPair, _replica_template: str) -> Iterator[str]:
    """A fresh migrated database on the primary, already replayed on the standby; its name."""
    name = new_database(replica_pair, template=_replica_template)
    yield name
    drop_database(replica_pair, name)
