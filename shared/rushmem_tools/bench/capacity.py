"""`rushmem bench capacity`: what one database vCPU does, measured in CPU time, not wall time.

The machine this runs on is shared, so wall-clock throughput says more about the neighbours than
about the database. This bench loads synthetic memories into a scratch database, then counts the
CPU seconds the database backend serving the service spends (``/proc/<pid>/stat`` of that backend:
the embedded server, or any server on this host) per recall and per memory written, and the bytes
a memory takes on disk (table, indexes, history). From those: recalls/s and memories written/s one
fully busy vCPU would sustain, and memories per GiB. Background processes (WAL writer, checkpointer,
autovacuum) are not in the count; they are a few percent on a write-heavy load.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from rushmem.service import Memory
from rushmem_contract.errors import ConfigurationError
from rushmem_contract.models import NewMemory
from rushmem_tools.bench.common import (
    ScratchServer,
    add_database_arguments,
    load_average,
    open_service,
    owner_database,
    print_table,
    say,
)
from rushmem_tools.bench.latency import load_corpus
from rushmem_tools.bench.synthetic import SyntheticCorpus

WARM_UP = 20
PER_WRITE = 10  # facts per write, as a conversation brings them


def backend_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a local process so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read the database backend's CPU time (/proc/{pid}/stat): the server must run on this host"
        ) from exc
    # utime and stime are fields 14 and 15 of stat; after the ")" the first field is the 3rd.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _backend_pid(service: Memory) -> int:
    row = service.admin.db.connection().execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


def run(service: Memory, args: argparse.Namespace) -> int:
    corpus = SyntheticCorpus(args.memories, args.users, seed=11)
    with ScratchServer.from_args(args) as server:
        database = server.describe()
        url = server.new_database("capacity")
        bench = open_service(service.settings, url, provider="hash", dimension=384)
        owner = owner_database(bench)
        try:
            say(f"capacity: {args.memories} memories over {corpus.users} users")
            load_corpus(owner, bench.admin.embedder, corpus, vectors="hash", order="conversations")
            owner.run(lambda conn: conn.execute("VACUUM ANALYZE user_memories"), retry=False)
            size = owner.run(
                lambda conn: conn.execute(
                    "SELECT pg_total_relation_size('user_memories') + pg_total_relation_size('memory_events')"
                ).fetchone(),
                retry=False,
            )
            bytes_per_memory = int(size[0]) / args.memories if size else float("nan")
            asked = corpus.queries(args.recalls + WARM_UP)
            vectors = bench.admin.embedder.embed([text for _user, text in asked])
            pid = _backend_pid(bench)
            before_load = load_average()
            for (user, text), vector in list(zip(asked, vectors, strict=True))[:WARM_UP]:
                bench.recall(text, user_id=user, limit=args.limit, query_vector=vector)
            cpu0, wall0, client0 = backend_cpu_s(pid), time.perf_counter(), time.process_time()
            for (user, text), vector in list(zip(asked, vectors, strict=True))[WARM_UP:]:
                bench.recall(text, user_id=user, limit=args.limit, query_vector=vector)
            recall_db = (backend_cpu_s(pid) - cpu0) * 1000 / args.recalls
            recall_client = (time.process_time() - client0) * 1000 / args.recalls
            recall_wall = (time.perf_counter() - wall0) * 1000 / args.recalls
            say(f"  recall: {recall_db:.2f} ms database CPU, {recall_client:.2f} ms client CPU each")
            users = [corpus.user_id(i) for i in range(corpus.users)]
            writes = [
                (
                    users[i % len(users)],
                    [
                        NewMemory(content=f"capacity write {i} fact {j} about the kettle {i * 31 + j}")
                        for j in range(PER_WRITE)
                    ],
                )
                for i in range(args.writes + WARM_UP)
            ]
            for user, memories in writes[:WARM_UP]:
                bench.add(memories, user_id=user)
            cpu0, wall0, client0 = backend_cpu_s(pid), time.perf_counter(), time.process_time()
            for user, memories in writes[WARM_UP:]:
                bench.add(memories, user_id=user)
            written = args.writes * PER_WRITE
            write_db = (backend_cpu_s(pid) - cpu0) * 1000 / written
            write_client = (time.process_time() - client0) * 1000 / written
            write_wall = (time.perf_counter() - wall0) * 1000 / written
            say(f"  writes: {write_db:.3f} ms database CPU, {write_client:.3f} ms client CPU per memory")
            after_load = load_average()
        finally:
            bench.close()
            owner.close()
            server.drop_database(url)
    recalls_per_vcpu = 1000 / recall_db if recall_db > 0 else float("inf")
    writes_per_vcpu = 1000 / write_db if write_db > 0 else float("inf")
    per_gib = (1 << 30) / bytes_per_memory
    print(f"database: {database}")
    print(f"machine: {before_load} before timing, {after_load} after")
    print(
        f"data: {args.memories} memories over {corpus.users} users, 384-d hash vectors; "
        f"{args.recalls} recalls (limit {args.limit}), {args.writes} writes of {PER_WRITE} memories"
    )
    rows: list[list[Any]] = [
        [
            "recall",
            f"{recall_db:.2f}",
            f"{recall_client:.2f}",
            f"{recall_wall:.2f}",
            f"{recalls_per_vcpu:.0f} recalls/s",
        ],
        [
            "memory written (Memory.add, 10 a call)",
            f"{write_db:.3f}",
            f"{write_client:.3f}",
            f"{write_wall:.3f}",
            f"{writes_per_vcpu:.0f} memories/s",
        ],
        [
            "disk per memory (table, indexes, history)",
            "",
            "",
            "",
            f"{bytes_per_memory:.0f} bytes, {per_gib:,.0f} per GiB",
        ],
    ]
    print_table(["per operation", "database CPU ms", "client CPU ms", "wall ms", "one database vCPU"], rows)
    print(
        f"capacity memories={args.memories} db_cpu_ms_per_recall={recall_db:.3f} "
        f"recalls_per_s_per_vcpu={recalls_per_vcpu:.0f} db_cpu_ms_per_memory_written={write_db:.4f} "
        f"memories_written_per_s_per_vcpu={writes_per_vcpu:.0f} bytes_per_memory={bytes_per_memory:.0f}",
        flush=True,
    )
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "capacity",
        help="database CPU per recall and per memory written, and disk per memory: what one vCPU holds",
        description="Load synthetic memories into a scratch database on this host, then count the database "
        "backend's CPU time per recall and per memory written (not wall time: the machine may be shared), and "
        "the disk a memory takes; prints what one database vCPU sustains.",
    )
    p.add_argument("--memories", type=int, default=100_000, help="memories to load (default 100000)")
    p.add_argument("--users", type=int, default=1_000, help="users they are spread over (default 1000)")
    p.add_argument("--recalls", type=int, default=500, help="timed recalls (default 500)")
    p.add_argument("--writes", type=int, default=300, help=f"timed writes of {PER_WRITE} memories (default 300)")
    p.add_argument("--limit", type=int, default=10, help="memories per recall (default 10)")
    add_database_arguments(p)
    p.set_defaults(func=run)
