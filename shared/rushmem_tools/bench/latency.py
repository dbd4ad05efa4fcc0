"""`rushmem bench latency`: recall latency on synthetic data, ours against the article's query.

One run loads N synthetic memories over U users (hash embeddings or random unit vectors:
the model is not what is measured), builds the GIN index once after the load and gives users
with many memories their own indexes as the maintenance run does, then times the same queries
three ways:

- ours: ``Memory.recall`` with a precomputed query vector: the scoped SQL legs,
  fusion, decay, MMR and the prompt block (embedding excluded);
- the article's query as written: ``ORDER BY total_score`` over the whole table, with
  no user filter (see :func:`rushmem_tools.bench.sql.article_seed_query`);
- end to end: the local model embeds the query, then ours as above.

Several sizes (``--memories 100000,1000000 --users 1000,10000``, paired) are measured one after
the other, each on its own database, and compared in a last line (``p95_ratio``: largest size
over smallest). ``--heavy-user N`` adds one user with N memories to each database and times
recall for them too; ``--load-order conversations`` loads ten facts of a user at a time, as the
write path stores a conversation (the default, one fact of each user in turn, spreads a user's
rows over as many pages as possible).

``--heavy 0,1000,10000`` first measures how recall and writes depend on how many users are heavy:
for each count N, a database of N + 2,500 users with 20 memories each, the first N given one more
and made dense (their own partitions, as `rushmem dense-users` builds them at a threshold of
21); then ordinary users' and heavy users' recall p50/p95 and an ordinary user's write p50.
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

from rushmem.config import Settings
from rushmem.embeddings.base import Embedder
from rushmem.service import Memory
from rushmem.store.engine.connection import Connection, Database
from rushmem.store.indexes.partitions import refresh_dense_users
from rushmem_contract.errors import InvalidInput
from rushmem_contract.models import NewMemory
from rushmem_tools.bench import sql as bench_sql
from rushmem_tools.bench.common import (
    ScratchServer,
    Stopwatch,
    add_database_arguments,
    load_average,
    open_service,
    owner_database,
    print_table,
    say,
)
from rushmem_tools.bench.synthetic import Fact, RandomEmbedder, SyntheticCorpus, memory_rows

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
    """What `rushmem dense-users` does (not concurrently: nobody writes); seconds."""
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
    """Recall for the heavy user (their partition's HNSW and GIN indexes), after a few untimed runs; each
    must return ``limit`` memories."""
    watch = _timed_recalls(bench, list(zip(queries, vectors, strict=True)), limit=limit, who="the heavy user")
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

    from rushmem_tools.embedders.local import LocalEmbedder

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


@dataclasses.dataclass(frozen=True)
class LatencyCase:
    """One database to time recall on: its size, the queries, the vectors and how the load runs."""

    memories: int
    users: int
    queries: int
    dimension: int = 384
    vectors: Literal["hash", "random"] = "hash"
    limit: int = 10
    end_to_end: bool = False
    seed_queries: int | None = None
    blas_threads: int | None = None
    seed: int = 7
    order: LoadOrder = "interleaved"
    heavy_user: int = 0


def measure(server: ScratchServer, base: Settings, case: LatencyCase) -> LatencyRun:
    """Load a fresh database and time recall on it; the database is dropped afterwards."""
    corpus = SyntheticCorpus(case.memories, case.users, seed=case.seed)
    url = server.new_database(f"latency_{case.memories}")
    bench = open_service(base, url, provider="hash", dimension=case.dimension)
    owner = owner_database(bench)
    try:
        say(f"latency: {case.memories} memories over {corpus.users} users, {case.dimension}-d {case.vectors} vectors")
        load_s, index_s = load_corpus(
            owner, bench.admin.embedder, corpus, vectors=case.vectors, order=case.order, heavy_user=case.heavy_user
        )
        dense_s = index_dense_users(owner, bench.settings)
        asked = corpus.queries(case.queries)
        embedder: Embedder = bench.admin.embedder if case.vectors == "hash" else RandomEmbedder(case.dimension)
        query_vectors = embedder.embed([text for _user, text in asked])
        load_before = load_average()
        ours, seed_watch = time_recall(
            bench, owner, asked, query_vectors, limit=case.limit, seed_queries=case.seed_queries
        )
        run = LatencyRun(case.memories, corpus.users, case.dimension, case.vectors, load_s, index_s, ours, seed_watch)
        run.dense_s, run.order = dense_s, case.order
        if case.heavy_user:
            heavy_asked = [
                (HEAVY_USER, text)
                for _u, text in heavy_user_corpus(case.heavy_user, seed=case.seed).queries(case.queries)
            ]
            heavy_vectors = embedder.embed([text for _user, text in heavy_asked])
            run.heavy = time_heavy(bench, heavy_asked, heavy_vectors, limit=case.limit)
            run.heavy_memories = case.heavy_user
        if case.end_to_end:
            if case.dimension != 384:
                say("  end to end skipped: the local model's vectors have 384 dimensions")
            else:
                run.e2e, run.embed, run.blas_threads = time_end_to_end(
                    bench, asked, limit=case.limit, blas_threads=case.blas_threads
                )
        run.load_before, run.load_after = load_before, load_average()
        return run
    finally:
        bench.close()
        owner.close()
        server.drop_database(url)


ORDINARY_USERS = 2_500  # users left ordinary in every --heavy database (--heavy-ordinary)
PER_USER = 20  # memories of each user in a --heavy database (heavy users: one more)
WRITES = 100  # timed writes per --heavy count


@dataclasses.dataclass
class HeavyRun:
    """One --heavy count: recall of ordinary and of heavy users, and writes, on the same database."""

    heavy: int
    users: int
    ordinary: Stopwatch
    write: Stopwatch
    dense_s: float
    heavy_recall: Stopwatch | None = None
    heavy_write: Stopwatch | None = None
    load_before: str = ""
    load_after: str = ""


def measure_heavy(
    server: ScratchServer,
    base: Settings,
    *,
    heavy: int,
    queries: int,
    limit: int = 10,
    ordinary: int = ORDINARY_USERS,
    seed: int = 7,
) -> HeavyRun:
    """A database of ``heavy`` + ``ordinary`` users with PER_USER memories each, the first ``heavy``
    of them given one more and made dense at a threshold of PER_USER + 1; time recall for ordinary
    and heavy users and single-memory writes. Every recall must return ``limit`` memories."""
    users = heavy + ordinary
    corpus = SyntheticCorpus(users * PER_USER + heavy, users, seed=seed)
    url = server.new_database(f"heavy_{heavy}")
    bench = open_service(base, url, provider="hash", dimension=384)
    owner = owner_database(bench)
    try:
        say(f"heavy users: {heavy} of {users} users, {corpus.memories} memories")
        load_corpus(owner, bench.admin.embedder, corpus, vectors="hash")
        started = time.perf_counter()
        if heavy:
            say("  making the heavy users dense")
            report = refresh_dense_users(
                owner.connection(),
                min_memories=PER_USER + 1,
                max_text_matches=bench.settings.dense_max_text_matches,
                maintenance_work_mem="256MB",
                concurrently=False,
            )
            say(f"  {report.summary()}")
        dense_s = time.perf_counter() - started
        embedder = bench.admin.embedder
        asked = corpus.queries(queries * 4)
        ordinary_asked = [q for q in asked if int(q[0].rsplit("-", 1)[1]) >= heavy][:queries]
        heavy_asked = [q for q in asked if int(q[0].rsplit("-", 1)[1]) < heavy][:queries]
        load_before = load_average()
        run = HeavyRun(heavy, users, _time_users(bench, ordinary_asked, embedder, limit), Stopwatch(), dense_s)
        say(f"  ordinary users' recall: p50 {run.ordinary.p50:.2f} ms, p95 {run.ordinary.p95:.2f} ms")
        if heavy_asked:
            run.heavy_recall = _time_users(bench, heavy_asked, embedder, limit)
            say(f"  heavy users' recall: p50 {run.heavy_recall.p50:.2f} ms, p95 {run.heavy_recall.p95:.2f} ms")
        run.write = _time_writes(bench, [u for u, _ in ordinary_asked], "ordinary")
        say(f"  ordinary users' writes: p50 {run.write.p50:.2f} ms")
        if heavy_asked:
            run.heavy_write = _time_writes(bench, [u for u, _ in heavy_asked], "heavy")
            say(f"  heavy users' writes: p50 {run.heavy_write.p50:.2f} ms")
        run.load_before, run.load_after = load_before, load_average()
        return run
    finally:
        bench.close()
        owner.close()
        server.drop_database(url)


def _time_users(bench: Memory, asked: Sequence[tuple[str, str]], embedder: Embedder, limit: int) -> Stopwatch:
    """Recall for each (user, question), after a few untimed runs; each user has more than
    ``limit`` memories, so each recall must return ``limit``."""
    vectors = embedder.embed([text for _user, text in asked])
    return _timed_recalls(bench, list(zip(asked, vectors, strict=True)), limit=limit)


def _timed_recalls(
    bench: Memory, pairs: Sequence[tuple[tuple[str, str], np.ndarray]], *, limit: int, who: str | None = None
) -> Stopwatch:
    """Each ((user, question), query vector) recalled and timed after WARM_UP untimed ones; a recall
    with fewer than ``limit`` memories fails the bench."""
    watch = Stopwatch()
    # The count checks the search (an index must not lose rows), so the relevance cut is off.
    plan = bench.admin.recall_plan.but(min_relative_score=0.0)
    for (user, text), vector in pairs[:WARM_UP]:
        bench.recall(text, user_id=user, limit=limit, query_vector=vector, plan=plan)
    for (user, text), vector in pairs:
        with watch.time():
            found = bench.recall(text, user_id=user, limit=limit, query_vector=vector, plan=plan)
        if len(found.memories) < limit:
            raise AssertionError(f"{who or user} got {len(found.memories)} memories, not {limit}")
    return watch


def _time_writes(bench: Memory, users: Sequence[str], kind: str) -> Stopwatch:
    """One new memory per write (embedding included: the hash embedder, microseconds)."""
    watch = Stopwatch()
    for i, user in enumerate(itertools.islice(itertools.cycle(users), WRITES + WARM_UP)):
        memory = [NewMemory(content=f"The {kind} user noted bench write number {i} about kettle {i * 7919}")]
        if i < WARM_UP:
            bench.add(memory, user_id=user)
            continue
        with watch.time():
            bench.add(memory, user_id=user)
    return watch


def _report_heavy(database: str, runs: Sequence[HeavyRun]) -> list[str]:
    """The --heavy table; returns the summary keys it adds to the last line."""
    print(f"database: {database}")
    rows: list[list[Any]] = []
    keys: list[str] = []
    for r in runs:
        rows.append(
            [
                r.heavy,
                r.users,
                f"{_ms(r.ordinary.p50)} / {_ms(r.ordinary.p95)}",
                "-" if r.heavy_recall is None else f"{_ms(r.heavy_recall.p50)} / {_ms(r.heavy_recall.p95)}",
                _ms(r.write.p50),
                "-" if r.heavy_write is None else _ms(r.heavy_write.p50),
                f"{r.dense_s:.0f}",
                f"{r.load_before} / {r.load_after}",
            ]
        )
        keys += [
            f"heavy{r.heavy}_ordinary_p50_ms={r.ordinary.p50:.2f}",
            f"heavy{r.heavy}_ordinary_p95_ms={r.ordinary.p95:.2f}",
            f"heavy{r.heavy}_write_p50_ms={r.write.p50:.2f}",
        ]
        if r.heavy_recall is not None and r.heavy_write is not None:
            keys += [
                f"heavy{r.heavy}_heavy_p50_ms={r.heavy_recall.p50:.2f}",
                f"heavy{r.heavy}_heavy_p95_ms={r.heavy_recall.p95:.2f}",
                f"heavy{r.heavy}_heavy_write_p50_ms={r.heavy_write.p50:.2f}",
            ]
    print_table(
        [
            "heavy users",
            "users",
            "ordinary recall p50 / p95 ms",
            "heavy recall p50 / p95 ms",
            "ordinary write p50 ms",
            "heavy write p50 ms",
            "dense-users s",
            "load avg before / after",
        ],
        rows,
    )
    base = min(runs, key=lambda r: r.heavy)
    top = max(runs, key=lambda r: r.heavy)
    if top.heavy > base.heavy and base.ordinary.p50 > 0 and base.write.p50 > 0:
        keys += [
            f"heavy_ordinary_p50_ratio={top.ordinary.p50 / base.ordinary.p50:.2f}",
            f"heavy_write_p50_ratio={top.write.p50 / base.write.p50:.2f}",
        ]
    return keys


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
    if args.heavy_ordinary < 1:
        raise InvalidInput("--heavy-ordinary must be positive", field="heavy_ordinary")
    heavy_counts = _counts(args.heavy) if args.heavy else []
    results: list[LatencyRun] = []
    heavy_keys: list[str] = []
    with ScratchServer.from_args(args) as server:
        database = server.describe()
        if heavy_counts:
            runs = [
                measure_heavy(
                    server,
                    service.settings,
                    heavy=n,
                    queries=args.queries,
                    limit=args.limit,
                    ordinary=args.heavy_ordinary,
                )
                for n in heavy_counts
            ]
            heavy_keys = _report_heavy(database, runs)
        for i, (memories, user_count) in enumerate(zip(sizes, users, strict=True)):
            last_line = i == len(sizes) - 1 and not (len(sizes) > 1 or args.heavy_user)
            case = LatencyCase(
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
            result = measure(server, service.settings, case)
            _report(database, result, args, extra=heavy_keys if last_line else [])
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
        print("latency-sizes " + " ".join(keys + heavy_keys))
    return 0


def _counts(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise InvalidInput(f"--heavy takes integers separated by commas, got {text!r}", field="heavy") from exc
    if not values or any(v < 0 for v in values):
        raise InvalidInput("--heavy counts must not be negative", field="heavy")
    return values


def _report(database: str, result: LatencyRun, args: argparse.Namespace, *, extra: Sequence[str] = ()) -> None:
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
                "the user's own partition, HNSW and GIN (rushmem dense-users)",
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
        f"ours_p95_ms={result.ours.p95:.2f} seed_p95_ms={result.seed.p95:.2f} speedup_p95={speedup:.1f}{heavy_key}"
        + "".join(f" {key}" for key in extra),
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
        help="add one user with N memories (their own indexes, as `rushmem dense-users` builds from "
        "RUSHMEM_DENSE_MIN_MEMORIES on) and time recall for them too",
    )
    p.add_argument(
        "--heavy",
        metavar="COUNTS",
        help="first, for each count N (e.g. 0,1000,10000): a database of N + 2,500 users with 20 memories each, "
        "N of them made dense (their own partitions); ordinary and heavy users' recall p50/p95 and write p50",
    )
    p.add_argument(
        "--heavy-ordinary",
        type=int,
        default=ORDINARY_USERS,
        metavar="N",
        help=f"users left ordinary in each --heavy database (default {ORDINARY_USERS})",
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
