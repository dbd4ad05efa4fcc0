"""`agent-memory bench ingest`: memories per second through the write path.

N synthetic memories go through ``MemoryService.remember`` as the ingest function sends
them: one call per conversation message, ``--per-message`` facts of one user each
(validation, normalisation, hashing, embedding in one batch, the per-user transaction
with its advisory lock, the exact and near-duplicate checks, the upsert and the history
trigger). Embeddings are ``hash`` ones, so the database path is what is measured; the
time the hash embedder itself takes is reported beside it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import itertools
import time
from typing import Any

from agent_memory import store
from agent_memory.bench.common import (
    ScratchServer,
    Stopwatch,
    add_database_arguments,
    load_average,
    open_service,
    owner_database,
    print_table,
    say,
)
from agent_memory.bench.synthetic import SyntheticCorpus
from agent_memory.errors import InvalidInput
from agent_memory.models import NewMemory
from agent_memory.service import MemoryService


def messages(corpus: SyntheticCorpus, per_message: int) -> list[tuple[str, list[NewMemory]]]:
    """The corpus as conversation messages: ``per_message`` facts of one user each, users interleaved."""
    by_user: dict[str, list[NewMemory]] = {}
    for fact in corpus.facts():
        by_user.setdefault(fact.user_id, []).append(NewMemory(content=fact.content, created_at=fact.created_at))
    per_user = [
        [(user, facts[i : i + per_message]) for i in range(0, len(facts), per_message)]
        for user, facts in by_user.items()
    ]
    return [m for round_ in itertools.zip_longest(*per_user) for m in round_ if m is not None]


def _store_all(
    bench: MemoryService, batches: list[tuple[str, list[NewMemory]]], workers: int
) -> tuple[Stopwatch, int, float]:
    """remember() every message; with several workers, each on its own connection (as parallel
    ingest function instances are) and each user's messages on one worker, in order."""
    shares: list[list[tuple[str, list[NewMemory]]]] = [[] for _ in range(workers)]
    owner_of: dict[str, int] = {}
    for user, batch in batches:
        shares[owner_of.setdefault(user, len(owner_of) % workers)].append((user, batch))
    services = [bench] + [MemoryService(bench.settings) for _ in range(workers - 1)]
    for extra in services[1:]:
        extra.remember("bench-warm-up", [NewMemory(content="warm up")], source="bench")
    watches = [Stopwatch() for _ in range(workers)]
    created = [0] * workers

    def work(index: int) -> None:
        for user, batch in shares[index]:
            with watches[index].time():
                created[index] += services[index].remember(user, batch, source="bench").created

    try:
        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(work, i) for i in range(workers)]:
                future.result()
        elapsed = time.perf_counter() - started
    finally:
        for extra in services[1:]:
            extra.close()
    merged = Stopwatch()
    merged.samples = [s for w in watches for s in w.samples]
    return merged, sum(created), elapsed


def run(service: MemoryService, args: argparse.Namespace) -> int:
    if args.memories < 1:
        raise InvalidInput("--memories must be positive", field="memories")
    if not 1 <= args.workers <= 64:
        raise InvalidInput("--workers must be between 1 and 64", field="workers")
    if not 1 <= args.per_message <= service.settings.max_memories_per_request:
        raise InvalidInput(
            f"--per-message must be between 1 and {service.settings.max_memories_per_request}", field="per_message"
        )
    users = args.users or max(1, args.memories // 100)
    corpus = SyntheticCorpus(args.memories, users, seed=args.seed)
    batches = messages(corpus, args.per_message)
    with ScratchServer.from_args(args) as server:
        database = server.describe()
        url = server.new_database("ingest")
        bench = open_service(service.settings, url, provider="hash", dimension=args.dimension)
        try:
            if args.without_vector_index:
                owner = owner_database(bench)
                try:
                    owner.run(functools.partial(store.drop_search_indexes, names=[store.EMBEDDING_INDEX]))
                finally:
                    owner.close()
            # Warm the connection and the embedder outside the clock.
            bench.remember("bench-warm-up", [NewMemory(content="warm up")], source="bench")
            embed = Stopwatch()
            with embed.time():
                bench.embedder.embed([m.content for _user, batch in batches for m in batch])
            say(f"ingest: {corpus.memories} memories in {len(batches)} messages of {args.per_message}")
            load_before = load_average()
            calls, created, elapsed = _store_all(bench, batches, args.workers)
            load_after = load_average()
        finally:
            bench.close()
    total = sum(len(b) for _u, b in batches)
    per_second = total / elapsed if elapsed > 0 else float("inf")
    print(f"database: {database}")
    print(f"machine: {load_before} before, {load_after} after")
    print(
        f"data: {total} synthetic memories of {corpus.users} users, {args.per_message} per message "
        f"({len(batches)} remember() calls, {args.workers} writer(s)), {args.dimension}-d hash embeddings; "
        f"{created} stored, {total - created} folded into existing rows (exact or near duplicates)"
    )
    if args.without_vector_index:
        print("diagnostic run WITHOUT the HNSW index (not the product's schema)")
    print_table(
        ["what", "count", "total s", "p50 ms", "p95 ms", "per second"],
        [
            [
                "remember() per message",
                len(calls.samples),
                f"{elapsed:.2f}",
                f"{calls.p50:.2f}",
                f"{calls.p95:.2f}",
                f"{per_second:.0f}",
            ],
            [
                "hash embedding alone (one pass, for scale)",
                total,
                f"{embed.samples[0] / 1000:.2f}",
                "",
                "",
                f"{total / (embed.samples[0] / 1000):.0f}",
            ],
        ],
    )
    print(f"ingest memories={total} per_second={per_second:.0f}")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ingest",
        help="memories per second through the write path (remember, hash embeddings)",
        description="Store N synthetic memories through MemoryService.remember, one call per conversation "
        "message of --per-message facts, on a fresh database with hash embeddings.",
    )
    p.add_argument("--memories", type=int, default=20_000, help="memories to store (default 20000)")
    p.add_argument("--per-message", type=int, default=10, help="memories per remember() call (default 10)")
    p.add_argument("--users", type=int, help="users they belong to (default memories / 100)")
    p.add_argument("--dimension", type=int, default=384, help="embedding dimension (default 384)")
    p.add_argument("--workers", type=int, default=1, help="concurrent writers, each its own connection (default 1)")
    p.add_argument(
        "--without-vector-index",
        action="store_true",
        help="diagnostic: drop the HNSW index first, to see what maintaining it costs the write path",
    )
    p.add_argument("--seed", type=int, default=7, help="random seed of the synthetic data")
    add_database_arguments(p)
    p.set_defaults(func=run)
