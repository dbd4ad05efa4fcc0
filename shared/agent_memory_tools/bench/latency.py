"""`agent-memory bench latency`: recall latency on synthetic data, ours against the article's query.

One run loads N synthetic memories over U users (hash embeddings or random unit vectors:
the model is not what is measured), builds the GIN index once after the load and gives users
with many memories their own indexes as the maintenance run does, then times the same queries
three ways:

- ours: ``Memory.recall`` with a precomputed query vector: the scoped SQL legs,
  fusion, decay, MMR and the prompt block (embedding excluded);
- the article's query as written: ``ORDER BY total_score`` over the whole table, with
  no user filter (see :func:`agent_memory_tools.bench.sql.article_seed_query`);
- end to end: the local model embeds the query, then ours as above.

Several sizes (``--memories 100000,1000000 --users 1000,10000``, paired) are measured one after
the other, each on its own database, and compared in a last line (``p95_ratio``: largest size
over smallest). ``--heavy-user N`` adds one user with N memories to each database and times
recall for them too; ``--load-order conversations`` loads ten facts of a user at a time, as the
write path stores a conversation (the default, one fact of each user in turn, spreads a user's
rows over as many pages as possible).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import numpy as np

from agent_memory.config import Settings
from agent_memory.embeddings.base import Embedder
from agent_memory.service import Memory
from agent_memory.store.connection import Connection, Database
from agent_memory.store.indexes import refresh_dense_users
from agent_memory_contract.errors import InvalidInput
from agent_memory_tools.bench import sql as bench_sql
from agent_memory_tools.bench.common import (
    ScratchServer,
    Stopwatch,
    add_database_arguments,
    load_average,
    open_service,
    owner_database,
    print_table,
    say,
)
from agent_memory_tools.bench.synthetic import Fact, RandomEmbedder, SyntheticCorpus, memory_rows

COPY_CHUNK = 50_000
WARM_UP = 10
HEAVY_USER = "heavy-user"
CONVERSATION = 10  # facts a conversation brings at once (--load-order conversations)
LoadOrder = Literal["interleaved", "conversations"]


@dataclasses.dataclass
class LatencyRun:
    memories: int
    users: int
    dimension: int
    vectors: str
    load_s: float
    index_s: float
    ours: Stopwatch
    seed: Stopwatch
    e2e: Stopwatch | None = None
    embed: Stopwatch | None = None
    blas_threads: int | None = None
    load_before: str = ""
    load_after: str = ""
    heavy: Stopwatch | None = None
    heavy_memories: int = 0
    dense_s: float = 0.0
    order: LoadOrder = "interleaved"


def ordered_facts(corpus: SyntheticCorpus, order: LoadOrder) -> Iterator[Fact]:
    """The corpus's facts in load order: one fact of each user in turn ("interleaved"), or ten
    facts of each user in turn ("conversations")."""
    if order == "interleaved":
        yield from corpus.facts()
        return
    by_user: dict[str, list[Fact]] = {}
    for fact in corpus.facts():
        by_user.setdefault(fact.user_id, []).append(fact)
    longest = max(len(f) for f in by_user.values())
    for start in range(0, longest, CONVERSATION):
        for facts in by_user.values():
            yield from facts[start : start + CONVERSATION]


def heavy_user_corpus(memories: int, *, seed: int) -> SyntheticCorpus:
    """The heavy user's memories and queries (one user, renamed ``HEAVY_USER``)."""
    return SyntheticCorpus(memories, 1, seed=seed + 4)


def heavy_user_facts(memories: int, *, seed: int) -> Iterator[Fact]:
    for fact in heavy_user_corpus(memories, seed=seed).facts():
        yield dataclasses.replace(fact, user_id=HEAVY_USER)


def load_corpus(
    owner: Database,
    embedder: Embedder,
    corpus: SyntheticCorpus,
    *,
    vectors: Literal["hash", "random"],
    order: LoadOrder = "interleaved",
    heavy_user: int = 0,
) -> tuple[float, float]:
    """Bulk-load the corpus (and the heavy user's facts) with the GIN index dropped, then build it;
    (load s, index s)."""
    if vectors == "random":
        embedder = RandomEmbedder(embedder.dimension)
    owner.run(bench_sql.drop_search_indexes)
    started = time.perf_counter()
    facts = itertools.chain(
        ordered_facts(corpus, order), heavy_user_facts(heavy_user, seed=corpus.seed) if heavy_user else ()
    )
    rows = memory_rows(facts, embedder)
    total = corpus.memories + heavy_user
    loaded = 0
    while chunk := list(itertools.islice(rows, COPY_CHUNK)):
        loaded += owner.run(functools.partial(bench_sql.copy_memories, rows=chunk), retry=False)
        say(f"  loaded {loaded}/{total} memories")
    load_s = time.perf_counter() - started
    say("  building the GIN index")
    started = time.perf_counter()
    owner.run(bench_sql.build_search_indexes, retry=False)
    return load_s, time.perf_counter() - started


def index_dense_users(owner: Database, settings: Settings) -> float:
    """What `agent-memory dense-users` does (not concurrently: nobody writes); seconds."""
    say("  indexing dense users")
    started = time.perf_counter()
    report = refresh_dense_users(
        owner.connection(),
        min_memories=settings.dense_min_memories,
        max_text_matches=settings.dense_max_text_matches,
        maintenance_work_mem="1GB",
        concurrently=False,
    )
    say(f"  {report.summary()}")
    return time.perf_counter() - started


def time_recall(
    bench: Memory,
    owner: Database,
    queries: Sequence[tuple[str, str]],
    vectors: np.ndarray,
    *,
    limit: int,
    seed_queries: int | None = None,
) -> tuple[Stopwatch, Stopwatch]:
    """(ours, the article's query) on the same queries, each after a few untimed warm-up runs.

    One after the other, not interleaved: each of the article's queries reads the whole
    table, which would evict what ours just had in the CPU caches.
    """
    ours, seed = Stopwatch(), Stopwatch()
    pairs = list(zip(queries, vectors, strict=True))
    for (user, text), vector in pairs[:WARM_UP]:
        bench.recall(text, user_id=user, limit=limit, query_vector=vector)
    for (user, text), vector in pairs:
        with ours.time():
            bench.recall(text, user_id=user, limit=limit, query_vector=vector)
    say(f"  ours: p50 {ours.p50:.2f} ms, p95 {ours.p95:.2f} ms")
    n_seed = len(pairs) if seed_queries is None else min(seed_queries, len(pairs))
    for (_user, text), vector in pairs[: min(3, n_seed)]:
        owner.run(_article_query(text, vector, limit))
    for (_user, text), vector in pairs[:n_seed]:
        work = _article_query(text, vector, limit)
        with seed.time():
            owner.run(work)
    say(f"  article's query: p50 {seed.p50:.1f} ms, p95 {seed.p95:.1f} ms")
    return ours, seed


def time_heavy(bench: Memory, queries: Sequence[tuple[str, str]], vectors: np.ndarray, *, limit: int) -> Stopwatch:
    """Recall for the heavy user (their own HNSW and GIN indexes), after a few untimed runs; each
    must return ``limit`` memories."""
    watch = Stopwatch()
    pairs = list(zip(queries, vectors, strict=True))
    for (user, text), vector in pairs[:WARM_UP]:
        bench.recall(text, user_id=user, limit=limit, query_vector=vector)
    for (user, text), vector in pairs:
        with watch.time():
            found = bench.recall(text, user_id=user, limit=limit, query_vector=vector)
        if len(found.memories) < limit:
            raise AssertionError(f"the heavy user got {len(found.memories)} memories, not {limit}")
    say(f"  heavy user: p50 {watch.p50:.2f} ms, p95 {watch.p95:.2f} ms")
    return watch


def _article_query(text: str, vector: np.ndarray, limit: int) -> Callable[[Connection], list[dict[str, Any]]]:
    """The article's query as written: unscoped, over the whole table."""
    return lambda conn: bench_sql.article_seed_query(conn, vector, text, limit=limit)


def time_end_to_end(
    bench: Memory, queries: Sequence[tuple[str, str]], *, limit: int, blas_threads: int | None = None
) -> tuple[Stopwatch, Stopwatch, int]:
    """Recall with the local model embedding each query inside the timed span;
    (total, embedding only, BLAS threads per matrix product)."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from agent_memory_tools.embedders.local import LocalEmbedder

    model = LocalEmbedder()
    model.warm_up()  # sets one BLAS thread (see NumpyModel); --blas-threads overrides it after
    if blas_threads:
        threadpool_limits(limits=blas_threads, user_api="blas")
    total, embed = Stopwatch(), Stopwatch()
    for user, text in queries[:WARM_UP]:
        bench.recall(text, user_id=user, limit=limit, query_vector=model.embed_query(text))
    for user, text in queries:
        with total.time():
            with embed.time():
                vector = model.embed_query(text)
            bench.recall(text, user_id=user, limit=limit, query_vector=vector)
    say(f"  end to end: p50 {total.p50:.1f} ms, p95 {total.p95:.1f} ms")
    threads = max((int(pool["num_threads"]) for pool in threadpool_info() if pool["user_api"] == "blas"), default=1)
    return total, embed, threads


def measure(
    server: ScratchServer,
    base: Settings,
    *,
    memories: int,
    users: int,
    queries: int,
    dimension: int = 384,
    vectors: Literal["hash", "random"] = "hash",
    limit: int = 10,
    end_to_end: bool = False,
    seed_queries: int | None = None,
    blas_threads: int | None = None,
    seed: int = 7,
    order: LoadOrder = "interleaved",
    heavy_user: int = 0,
) -> LatencyRun:
    """Load a fresh database and time recall on it; the database is dropped afterwards."""
    corpus = SyntheticCorpus(memories, users, seed=seed)
    url = server.new_database(f"latency_{memories}")
    bench = open_service(base, url, provider="hash", dimension=dimension)
    owner = owner_database(bench)
    try:
        say(f"latency: {memories} memories over {corpus.users} users, {dimension}-d {vectors} vectors")
        load_s, index_s = load_corpus(
            owner, bench.admin.embedder, corpus, vectors=vectors, order=order, heavy_user=heavy_user
        )
        dense_s = index_dense_users(owner, bench.settings)
        asked = corpus.queries(queries)
        embedder: Embedder = bench.admin.embedder if vectors == "hash" else RandomEmbedder(dimension)
        query_vectors = embedder.embed([text for _user, text in asked])
        load_before = load_average()
        ours, seed_watch = time_recall(bench, owner, asked, query_vectors, limit=limit, seed_queries=seed_queries)
        run = LatencyRun(memories, corpus.users, dimension, vectors, load_s, index_s, ours, seed_watch)
        run.dense_s, run.order = dense_s, order
        if heavy_user:
            heavy_asked = [(HEAVY_USER, text) for _u, text in heavy_user_corpus(heavy_user, seed=seed).queries(queries)]
            heavy_vectors = embedder.embed([text for _user, text in heavy_asked])
            run.heavy = time_heavy(bench, heavy_asked, heavy_vectors, limit=limit)
            run.heavy_memories = heavy_user
        if end_to_end:
            if dimension != 384:
                say("  end to end skipped: the local model's vectors have 384 dimensions")
            else:
                run.e2e, run.embed, run.blas_threads = time_end_to_end(
                    bench, asked, limit=limit, blas_threads=blas_threads
                )
        run.load_before, run.load_after = load_before, load_average()
        return run
    finally:
        bench.close()
        owner.close()
        server.drop_database(url)


def _ms(value: float) -> str:
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def _sizes(text: str, field: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise InvalidInput(f"--{field} takes integers separated by commas, got {text!r}", field=field) from exc
    if not values or any(v < 1 for v in values):
        raise InvalidInput(f"--{field} must be positive", field=field)
    return values


def run(service: Memory, args: argparse.Namespace) -> int:
    sizes, users = _sizes(str(args.memories), "memories"), _sizes(str(args.users), "users")
    if len(users) == 1:
        users = users * len(sizes)
    if len(users) != len(sizes):
        raise InvalidInput("--users needs one count per --memories size (or a single one)", field="users")
    if args.heavy_user < 0:
        raise InvalidInput("--heavy-user must not be negative", field="heavy_user")
    results: list[LatencyRun] = []
    with ScratchServer.from_args(args) as server:
        database = server.describe()
        for memories, user_count in zip(sizes, users, strict=True):
            result = measure(
                server,
                service.settings,
                memories=memories,
                users=user_count,
                queries=args.queries,
                dimension=args.dimension,
                vectors=args.vectors,
                limit=args.limit,
                end_to_end=not args.no_end_to_end,
                seed_queries=args.seed_queries,
                blas_threads=args.blas_threads,
                order=args.load_order,
                heavy_user=args.heavy_user,
            )
            _report(database, result, args)
            results.append(result)
    if len(results) > 1 or args.heavy_user:
        # One line comparing the sizes (each size's own line above keeps the single-size keys).
        keys = [f"ours_p95_ms_{r.memories}={r.ours.p95:.2f}" for r in results]
        if len(results) > 1:
            smallest = min(results, key=lambda r: r.memories)
            largest = max(results, key=lambda r: r.memories)
            ratio = largest.ours.p95 / smallest.ours.p95 if smallest.ours.p95 > 0 else float("inf")
            keys.append(f"p95_ratio={ratio:.2f}")
        heavy = [r.heavy for r in results if r.heavy is not None]
        if heavy:
            keys.append(f"heavy_user_p95_ms={max(h.p95 for h in heavy):.2f}")
        print("latency-sizes " + " ".join(keys))
    return 0


def _report(database: str, result: LatencyRun, args: argparse.Namespace) -> None:
    print(f"database: {database}")
    print(f"machine: {result.load_before} before timing, {result.load_after} after")
    heavy = f" plus {HEAVY_USER} with {result.heavy_memories}" if result.heavy_memories else ""
    print(
        f"data: {result.memories} memories over {result.users} users ({result.memories // result.users} each)"
        f"{heavy}, {result.dimension}-d {result.vectors} vectors, loaded {result.order}; load {result.load_s:.1f} s, "
        f"index build {result.index_s:.1f} s, dense-user indexes {result.dense_s:.1f} s; limit {args.limit}"
    )
    rows: list[list[Any]] = [
        [
            "ours: recall (DB + fusion + rerank)",
            len(result.ours.samples),
            _ms(result.ours.p50),
            _ms(result.ours.p95),
            "scoped legs (exact over the user's rows, GIN), embedding excluded",
        ],
    ]
    if result.heavy is not None:
        rows.append(
            [
                f"ours: recall for {HEAVY_USER} ({result.heavy_memories} memories)",
                len(result.heavy.samples),
                _ms(result.heavy.p50),
                _ms(result.heavy.p95),
                "the user's own HNSW and GIN indexes (agent-memory dense-users)",
            ]
        )
    rows.append(
        [
            "article's query as written",
            len(result.seed.samples),
            _ms(result.seed.p50),
            _ms(result.seed.p95),
            "ORDER BY total_score over the whole table, unscoped",
        ]
    )
    if result.e2e is not None and result.embed is not None:
        rows.append(
            [
                "ours end to end (local model)",
                len(result.e2e.samples),
                _ms(result.e2e.p50),
                _ms(result.e2e.p95),
                f"all-MiniLM-L6-v2 query embedding p50 {result.embed.p50:.1f} ms, "
                f"p95 {result.embed.p95:.1f} ms (BLAS threads: {result.blas_threads})",
            ]
        )
    print_table(["path", "queries", "p50 ms", "p95 ms", "what"], rows)
    speedup = result.seed.p95 / result.ours.p95 if result.ours.p95 > 0 else float("inf")
    heavy_key = f" heavy_user_p95_ms={result.heavy.p95:.2f}" if result.heavy is not None else ""
    print(
        f"latency memories={result.memories} users={result.users} ours_p50_ms={result.ours.p50:.2f} "
        f"ours_p95_ms={result.ours.p95:.2f} seed_p95_ms={result.seed.p95:.2f} speedup_p95={speedup:.1f}{heavy_key}",
        flush=True,
    )


def register(sub: Any) -> None:
    p = sub.add_parser(
        "latency",
        help="recall p50/p95 on synthetic data: ours, the article's query, end to end",
        description="Load synthetic memories into a fresh database (indexes built after the load), then time "
        "recall for the same queries: ours (embedding excluded), the article's query as written (unscoped, "
        "whole table), and ours end to end with the local model.",
    )
    p.add_argument(
        "--memories",
        default="100000",
        help="memories to load (default 100000); several sizes separated by commas are measured one after "
        "the other, each on its own database",
    )
    p.add_argument(
        "--users",
        default="1000",
        help="users they are spread over (default 1000); one count per size, separated by commas",
    )
    p.add_argument(
        "--heavy-user",
        type=int,
        default=0,
        metavar="N",
        help="add one user with N memories (their own indexes, as `agent-memory dense-users` builds from "
        "AGENT_MEMORY_DENSE_MIN_MEMORIES on) and time recall for them too",
    )
    p.add_argument(
        "--load-order",
        choices=["interleaved", "conversations"],
        default="interleaved",
        help="interleaved (default): one fact of each user in turn, so a user's rows lie on as many pages as "
        "possible (the worst case); conversations: ten facts of each user in turn, as the write path stores them",
    )
    p.add_argument("--queries", type=int, default=200, help="timed queries per path (default 200)")
    p.add_argument("--dimension", type=int, default=384, help="embedding dimension (default 384)")
    p.add_argument("--vectors", choices=["hash", "random"], default="hash", help="hash embeddings (default) or random")
    p.add_argument("--limit", type=int, default=10, help="memories per recall (default 10)")
    p.add_argument("--seed-queries", type=int, help="time the article's query on only the first N queries")
    p.add_argument("--no-end-to-end", action="store_true", help="skip the local model")
    p.add_argument(
        "--blas-threads", type=int, help="BLAS threads per matrix product for the end-to-end run (default 1)"
    )
    add_database_arguments(p)
    p.set_defaults(func=run)
