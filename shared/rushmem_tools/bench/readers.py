"""`rushmem bench readers`: what readers add to recall, measured in database CPU time.

Starts a primary (the embedded server) and two hot standbys streaming from it
(:mod:`rushmem_tools.bench.replica`), loads synthetic memories on the primary, then runs the
same recalls three ways: on the writer alone (no reader), with one reader, and with two (two
services, as two containers, each with its own reader). For each it counts the CPU seconds of every
database backend involved (``/proc/<pid>/stat``: the writer's sessions and each reader's), because
on this shared 2-core machine wall-clock throughput says more about the neighbours than about the
servers. From those: the recalls per second each configuration sustains with one vCPU per server
(each server's capacity is 1 / its CPU per recall; readers share the recalls, and the writer's share
of a reader recall is what it still does for one: the batched usage counts), the ratio to the
writer alone, and the writer's CPU per reader recall. The WAL the standbys replay (the startup
process) and the WAL sender are not counted: with recall-only load there is almost none.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from pydantic import SecretStr

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem_contract.errors import ConfigurationError
from rushmem_tools.bench.capacity import WARM_UP, backend_cpu_s
from rushmem_tools.bench.common import bench_settings, load_average, owner_database, print_table, say
from rushmem_tools.bench.latency import load_corpus
from rushmem_tools.bench.replica import drop_database, new_database, streaming_replica
from rushmem_tools.bench.synthetic import SyntheticCorpus


def _sessions_cpu(url: str, database: str) -> float:
    """CPU seconds so far of every backend of ``database`` on the server at ``url`` (this bench's own
    connection excluded)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [database]
        ).fetchall()
    total = 0.0
    for (pid,) in rows:
        with contextlib.suppress(ConfigurationError):  # a session that ended meanwhile
            total += backend_cpu_s(int(pid))
    return total


def _service(base: Settings, writer: str, reader: str | None) -> Memory:
    """A service as the functions run it (agent_memory_app, hash vectors), reading on ``reader``."""
    settings = bench_settings(base, writer, provider="hash", dimension=384)
    return Memory(
        settings.model_copy(
            update={"database_reader_url": SecretStr(reader) if reader else None, "db_reader_host": None}
        )
    )


def run(service: Memory, args: argparse.Namespace) -> int:
    corpus = SyntheticCorpus(args.memories, args.users, seed=11)
    root = Path(tempfile.mkdtemp(prefix="bench-readers-", dir="/tmp"))
    with streaming_replica(root, standbys=2) as pair:
        say(f"readers: primary + 2 standbys started in {pair.started_in_s:.1f} s")
        database = new_database(pair)
        writer_url = pair.primary_for(database)
        readers = [pair.standby_for(database)] + [
            psycopg.conninfo.make_conninfo(url, dbname=database) for url in pair.more_standbys
        ]
        loader = _service(service.settings, writer_url, None)
        loader.admin.migrate()
        owner = owner_database(loader)
        try:
            say(f"readers: loading {args.memories} memories over {corpus.users} users")
            load_corpus(owner, loader.admin.embedder, corpus, vectors="hash", order="conversations")
            owner.run(lambda conn: conn.execute("VACUUM ANALYZE user_memories"), retry=False)
        finally:
            owner.close()
            loader.close()
        pair.sync(timeout_s=120)
        asked = corpus.queries(args.recalls + WARM_UP)
        before_load = load_average()
        results: dict[int, dict[str, float]] = {}
        for count in (0, 1, 2):
            services = (
                [_service(service.settings, writer_url, None)]
                if count == 0
                else [_service(service.settings, writer_url, readers[k]) for k in range(count)]
            )
            vectors = services[0].admin.embedder.embed([text for _user, text in asked])
            try:
                for i, ((user, text), vector) in enumerate(list(zip(asked, vectors, strict=True))[:WARM_UP]):
                    services[i % len(services)].recall(text, user_id=user, limit=args.limit, query_vector=vector)
                for s in services:
                    s.admin.db.connection()  # the writer's session, where usage batches are written
                writer0 = _sessions_cpu(pair.primary_url, database)
                readers0 = [_sessions_cpu(url, database) for url in pair.standby_urls[:count]]
                wall0 = time.perf_counter()
                for i, ((user, text), vector) in enumerate(list(zip(asked, vectors, strict=True))[WARM_UP:]):
                    services[i % len(services)].recall(text, user_id=user, limit=args.limit, query_vector=vector)
                wall = time.perf_counter() - wall0
                for s in services:  # the usage counts still waiting: written now, and counted
                    s.admin.flush_usage()
                writer_ms = (_sessions_cpu(pair.primary_url, database) - writer0) * 1000 / args.recalls
                reader_ms = [
                    (_sessions_cpu(url, database) - cpu0) * 1000 / (args.recalls / count)
                    for url, cpu0 in zip(pair.standby_urls[:count], readers0, strict=True)
                ]
            finally:
                for s in services:
                    s.close()
            # One vCPU per server: the writer serves (or counts) every recall; each reader its share.
            limits = [1000 / writer_ms if writer_ms > 0 else float("inf")]
            limits += [1000 * count / ms if ms > 0 else float("inf") for ms in reader_ms]
            results[count] = {
                "writer_ms": writer_ms,
                "reader_ms": sum(reader_ms) / count if count else 0.0,
                "per_s": min(limits),
                "wall_per_s": args.recalls / wall,
            }
            say(
                f"  {count} readers: writer {writer_ms:.3f} ms, readers {results[count]['reader_ms']:.3f} ms per recall"
            )
        after_load = load_average()
        drop_database(pair, database)
    base = results[0]["per_s"]
    shutil.rmtree(root, ignore_errors=True)
    print("database: a primary and two streaming standbys (embedded PostgreSQL 18, pg_basebackup), one host")
    print(f"machine: {before_load} before timing, {after_load} after")
    print(
        f"data: {args.memories} memories over {corpus.users} users, 384-d hash vectors; "
        f"{args.recalls} recalls (limit {args.limit}) per configuration"
    )
    rows: list[list[Any]] = [
        [
            str(count),
            f"{r['writer_ms']:.3f}",
            f"{r['reader_ms']:.3f}" if count else "",
            f"{r['per_s']:.0f}",
            f"{r['per_s'] / base:.2f}",
            f"{r['wall_per_s']:.0f}",
        ]
        for count, r in results.items()
    ]
    print_table(
        [
            "readers",
            "writer CPU ms per recall",
            "reader CPU ms per recall",
            "recalls/s (1 vCPU per server)",
            "ratio",
            "wall recalls/s here",
        ],
        rows,
    )
    print(
        f"readers memories={args.memories} users={corpus.users} "
        f"recalls_per_s_0={results[0]['per_s']:.0f} recalls_per_s_1={results[1]['per_s']:.0f} "
        f"recalls_per_s_2={results[2]['per_s']:.0f} ratio_1={results[1]['per_s'] / base:.2f} "
        f"ratio_2={results[2]['per_s'] / base:.2f} writer_cpu_ms_per_recall={results[0]['writer_ms']:.3f} "
        f"writer_cpu_ms_per_reader_recall={results[1]['writer_ms']:.4f} "
        f"reader_cpu_ms_per_recall={results[1]['reader_ms']:.3f}",
        flush=True,
    )
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "readers",
        help="recall capacity with 0, 1 and 2 readers (streaming standbys), and the writer's CPU per reader recall",
        description="Start a primary and two streaming standbys from the embedded server's binaries, load synthetic "
        "memories, and count each server's database CPU per recall with no reader, one and two; prints the recalls "
        "per second one vCPU per server sustains, the ratio to the writer alone, and the writer's CPU per reader "
        "recall.",
    )
    p.add_argument("--memories", type=int, default=20_000, help="memories to load (default 20000)")
    p.add_argument("--users", type=int, default=200, help="users they are spread over (default 200)")
    # The kernel counts CPU in ticks (10 ms): 1000 recalls resolve 0.01 ms per recall.
    p.add_argument("--recalls", type=int, default=1000, help="timed recalls per configuration (default 1000)")
    p.add_argument("--limit", type=int, default=10, help="memories per recall (default 10)")
    p.set_defaults(func=run)
