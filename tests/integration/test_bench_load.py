"""`rushmem bench load` smoke runs: tiny numbers, the summary line's keys, no errors. Timings are
printed by the command, never asserted here."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from rushmem.config import Settings
from rushmem_tools.cli import main

KEYS = [
    "clients",
    "duration_s",
    "servers",
    "recall_requests",
    "recall_rps",
    "recall_p50_ms",
    "recall_p95_ms",
    "recall_p99_ms",
    "recall_max_ms",
    "status_503",
    "timeouts",
    "ingest_workers",
    "ingest_records",
    "ingest_records_per_s",
    "ingest_p50_ms",
    "ingest_p99_ms",
    "ingest_failed",
    "connections_max",
    "errors",
]


def run_load(capsys: pytest.CaptureFixture[str], settings: Settings, *argv: str) -> tuple[int, dict[str, float]]:
    code = main(["bench", "load", *argv], settings=settings)
    last = capsys.readouterr().out.rstrip("\n").splitlines()[-1]
    assert last.startswith("load ")
    values = dict(pair.split("=", 1) for pair in last.split()[1:])
    assert list(values) == KEYS, last
    return code, {k: float(v) for k, v in values.items()}


def test_bench_load_summary_line(
    capsys: pytest.CaptureFixture[str], settings: Settings, pg_server: str, repo_root: Path
) -> None:
    code, values = run_load(
        capsys, settings, "--clients", "4", "--duration", "2", "--servers", "1", "--ingest-workers", "2",
        "--users", "5", "--memories", "3", "--template", str(repo_root / "template.yaml"), "--server-url", pg_server,
    )  # fmt: skip
    assert code == 0 and values["errors"] == 0 and values["timeouts"] == 0
    assert values["recall_requests"] > 0 and values["ingest_records"] > 0
    # One connection per server and per ingest worker, and the sampler's.
    assert 0 < values["connections_max"] <= 1 + 2 + 1
    with psycopg.connect(pg_server) as conn:
        assert conn.execute("SELECT count(*) FROM pg_database WHERE datname LIKE 'bench\\_load%'").fetchone() == (0,)


def test_bench_load_counts_503s_when_connections_run_out(
    capsys: pytest.CaptureFixture[str], settings: Settings, repo_root: Path
) -> None:
    """More containers than connections: the extra ones answer 503 (with Retry-After), nothing hangs."""
    code, values = run_load(
        capsys, settings, "--clients", "4", "--duration", "2", "--servers", "4", "--ingest-workers", "0",
        "--users", "3", "--memories", "2", "--max-connections", "3", "--shared-buffers", "default",
        "--template", str(repo_root / "template.yaml"),
    )  # fmt: skip
    assert code == 1 and values["status_503"] > 0 and values["timeouts"] == 0
    assert re.fullmatch(r"\d+", str(int(values["recall_requests"])))
