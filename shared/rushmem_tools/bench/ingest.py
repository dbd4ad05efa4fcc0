"""`rushmem bench ingest`: memories per second through the write path.

N synthetic memories are written in realistic batches, on a fresh database with ``hash``
embeddings (so the database path is what is measured; the hash embedder's own time is
reported beside it):

- ``--via handler`` (default): IngestFunction's handler from template.yaml, invoked in
  process as ``rushmem invoke`` does, with SQS events of ``--batch-size`` records,
  each a "conversation ended" message carrying ``--per-message`` facts of one user
  (receipt check, embedding, the per-user transaction with its lock, exact and
  near-duplicate checks, the upsert, the history trigger, the receipt, Powertools logs
  and metrics). Each of ``--workers`` is its own process, like a Lambda container.
- ``--via service``: ``Memory.add`` once per message (the `add` path),
  ``--workers`` threads each with its own connection.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import functools
import hashlib
import itertools
import json
import multiprocessing
import os
import queue
import time
from pathlib import Path
from typing import Any

from rushmem.service import Memory
from rushmem_contract.errors import ConfigurationError, InvalidInput
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
from rushmem_tools.bench.synthetic import SyntheticCorpus

Message = tuple[str, list[NewMemory]]
WARM_UP_USER = "bench-warm-up"


def messages(corpus: SyntheticCorpus, per_message: int) -> list[Message]:
    """The corpus as conversation messages: ``per_message`` facts of one user each, users interleaved."""
    by_user: dict[str, list[NewMemory]] = {}
    for fact in corpus.facts():
        by_user.setdefault(fact.user_id, []).append(NewMemory(content=fact.content, created_at=fact.created_at))
    per_user = [
        [(user, facts[i : i + per_message]) for i in range(0, len(facts), per_message)]
        for user, facts in by_user.items()
    ]
    return [m for round_ in itertools.zip_longest(*per_user) for m in round_ if m is not None]


def split_by_user(batches: list[Message], workers: int) -> list[list[Message]]:
    """Each user's messages on one worker, in order; users spread round-robin."""
    shares: list[list[Message]] = [[] for _ in range(workers)]
    owner_of: dict[str, int] = {}
    for user, batch in batches:
        shares[owner_of.setdefault(user, len(owner_of) % workers)].append((user, batch))
    return shares


# --------------------------------------------------------------------------------------
# through the IngestFunction handler
# --------------------------------------------------------------------------------------


def sqs_record(index: int, user: str, memories: list[NewMemory]) -> dict[str, Any]:
    """One SQS record carrying a "conversation ended" message with client-provided memories."""
    ended = max((m.created_at for m in memories if m.created_at), default=None)
    body = json.dumps(
        {
            "user_id": user,
            "conversation_id": f"bench-{index}",
            "ended_at": ended.isoformat() if ended else None,
            "memories": [m.model_dump(mode="json", exclude_defaults=True) for m in memories],
        }
    )
    sent = int(time.time() * 1000)
    return {
        "messageId": f"bench-{index:08d}",
        "receiptHandle": f"bench-{index}",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": str(sent),
            "SenderId": "bench",
            "ApproximateFirstReceiveTimestamp": str(sent),
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:local:000000000000:agent-memory-bench",
        "awsRegion": "local",
    }


def sqs_events(share: list[Message], batch_size: int, first_index: int) -> list[dict[str, Any]]:
    records = [sqs_record(first_index + i, user, batch) for i, (user, batch) in enumerate(share)]
    return [{"Records": records[i : i + batch_size]} for i in range(0, len(records), batch_size)]


def default_template() -> Path:
    candidates = [Path(__file__).resolve().parents[3] / "template.yaml", Path.cwd() / "template.yaml"]
    return next((p for p in candidates if p.exists()), candidates[-1])


def _handler_worker(
    template: str, env: dict[str, str], events: list[dict[str, Any]], ready: Any, go: Any, results: Any
) -> None:
    """One warm "container": configured by its environment as in Lambda; the handler is
    loaded from the template once (as `rushmem invoke` loads it), then called per event."""
    from rushmem_tools.local.runtime import LambdaContext, function_spec, load_handler

    os.environ.update(env)
    spec = function_spec(Path(template), "IngestFunction")
    for key, value in spec.environment.items():
        os.environ.setdefault(key, value)
    failures = 0
    durations: list[float] = []
    # Handler logs and EMF metrics are written (as in Lambda) but not shown.
    with (
        open(os.devnull, "w", encoding="utf-8") as sink,
        contextlib.redirect_stdout(sink),
        contextlib.redirect_stderr(sink),
    ):
        handler = load_handler(spec)
        warm = {"Records": [sqs_record(-os.getpid(), f"{WARM_UP_USER}-{os.getpid()}", [NewMemory(content="warm")])]}
        handler(warm, LambdaContext(spec))
        ready.put(os.getpid())
        go.wait()
        cpu_started = time.process_time()
        for event in events:
            started = time.perf_counter()
            result = handler(event, LambdaContext(spec))
            durations.append((time.perf_counter() - started) * 1000.0)
            failures += len(result.get("batchItemFailures") or [])
        cpu = time.process_time() - cpu_started
    results.put((durations, failures, cpu))


def run_handler(
    url: str, template: Path, batches: list[Message], *, workers: int, batch_size: int, dimension: int
) -> tuple[Stopwatch, float, int, float]:
    """(per-invocation ms, wall seconds, failed records, the workers' CPU seconds) for all messages
    through the handler."""
    if not template.is_file():
        raise ConfigurationError(f"no SAM template at {template} (pass --template, or use --via service)")
    env = {
        "RUSHMEM_DATABASE_URL": url,
        "RUSHMEM_EMBEDDING_PROVIDER": "hash",
        "RUSHMEM_EMBEDDING_DIMENSIONS": str(dimension),
        "RUSHMEM_DB_ROLE": "agent_memory_app",
    }
    context = multiprocessing.get_context("spawn")  # fresh interpreters: no inherited connections or caches
    ready, results = context.Queue(), context.Queue()
    go = context.Event()
    shares = split_by_user(batches, workers)
    offsets = list(itertools.accumulate(len(s) for s in shares))
    processes = [
        context.Process(
            target=_handler_worker,
            args=(str(template), env, sqs_events(share, batch_size, offset - len(share)), ready, go, results),
        )
        for share, offset in zip(shares, offsets, strict=True)
    ]
    for process in processes:
        process.start()
    try:
        for _ in processes:
            ready.get(timeout=120)
        started = time.perf_counter()
        go.set()
        collected = [results.get(timeout=3600) for _ in processes]
        elapsed = time.perf_counter() - started
    except queue.Empty as exc:
        raise ConfigurationError("an ingest worker did not finish (see its traceback above)") from exc
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.terminate()
    watch = Stopwatch()
    watch.samples = [d for durations, _failures, _cpu in collected for d in durations]
    return watch, elapsed, sum(c[1] for c in collected), sum(c[2] for c in collected)


# --------------------------------------------------------------------------------------
# through Memory.add
# --------------------------------------------------------------------------------------


def run_service(bench: Memory, batches: list[Message], workers: int) -> tuple[Stopwatch, float, float]:
    """(per-call ms, wall seconds, this process's CPU seconds): remember() per message, each worker
    thread on its own connection."""
    shares = split_by_user(batches, workers)
    services = [bench] + [Memory(bench.settings) for _ in range(workers - 1)]
    watches = [Stopwatch() for _ in range(workers)]

    def work(index: int) -> None:
        for user, batch in shares[index]:
            with watches[index].time():
                services[index].add(batch, user_id=user, source="bench")

    try:
        for service in services:  # connections and embedders warm, outside the clock
            service.add([NewMemory(content="warm up")], user_id=WARM_UP_USER, source="bench")
        started, cpu_started = time.perf_counter(), time.process_time()
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            for future in [pool.submit(work, i) for i in range(workers)]:
                future.result()
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    finally:
        for extra in services[1:]:
            extra.close()
    merged = Stopwatch()
    merged.samples = [s for w in watches for s in w.samples]
    return merged, elapsed, cpu


# --------------------------------------------------------------------------------------
# the command
# --------------------------------------------------------------------------------------


def _check(service: Memory, args: argparse.Namespace) -> None:
    if args.memories < 1:
        raise InvalidInput("--memories must be positive", field="memories")
    if not 1 <= args.workers <= 64:
        raise InvalidInput("--workers must be between 1 and 64", field="workers")
    if not 1 <= args.batch_size <= 10_000:
        raise InvalidInput("--batch-size must be between 1 and 10000", field="batch_size")
    if not 1 <= args.per_message <= service.settings.max_memories_per_request:
        raise InvalidInput(
            f"--per-message must be between 1 and {service.settings.max_memories_per_request}", field="per_message"
        )


def run(service: Memory, args: argparse.Namespace) -> int:
    _check(service, args)
    users = args.users or max(1, args.memories // 100)
    corpus = SyntheticCorpus(args.memories, users, seed=args.seed)
    batches = messages(corpus, args.per_message)
    total = sum(len(b) for _u, b in batches)
    with ScratchServer.from_args(args) as server:
        database = server.describe()
        url = server.new_database("ingest")
        bench = open_service(service.settings, url, provider="hash", dimension=args.dimension)
        try:
            embed = Stopwatch()
            with embed.time():
                vectors = bench.admin.embedder.embed([m.content for _user, batch in batches for m in batch])
            ceiling = None
            if args.index_ceiling:
                say("ingest: pgvector HNSW inserts alone, on a bare table (the index's ceiling for one writer)")
                owner = owner_database(bench)
                try:
                    ceiling = owner.run(
                        functools.partial(
                            bench_sql.hnsw_insert_rate,
                            vectors=list(vectors),
                            batch=args.per_message,
                            dimension=args.dimension,
                        ),
                        retry=False,
                    )
                finally:
                    owner.close()
            say(f"ingest: {total} memories in {len(batches)} messages of {args.per_message}, via {args.via}")
            load_before = load_average()
            failed = 0
            if args.via == "handler":
                calls, elapsed, failed, cpu = run_handler(
                    url,
                    Path(args.template) if args.template else default_template(),
                    batches,
                    workers=args.workers,
                    batch_size=args.batch_size,
                    dimension=args.dimension,
                )
            else:
                calls, elapsed, cpu = run_service(bench, batches, args.workers)
            load_after = load_average()
            owner = owner_database(bench)
            try:
                stored = owner.run(functools.partial(bench_sql.count_all_memories, except_user_prefix=WARM_UP_USER))
            finally:
                owner.close()
        finally:
            bench.close()
    if failed:
        raise InvalidInput(f"{failed} SQS records failed in the handler (run with -v to see why)")
    measured = IngestRun(database, stored, load_before, load_after, calls, elapsed, embed, ceiling, cpu)
    _report(args, corpus, batches, total, measured)
    # cpu_s: the writers' own CPU time (the database's aside); per_cpu_second: memories per second of
    # it, what one container could write were it never waiting on the database (steadier under load).
    print(
        f"ingest memories={total} per_second={total / elapsed if elapsed > 0 else float('inf'):.0f} "
        f"cpu_s={cpu:.2f} per_cpu_second={total / cpu if cpu > 0 else float('inf'):.0f}"
    )
    return 0


@dataclasses.dataclass(frozen=True)
class IngestRun:
    """What one run measured: where, how many rows it left, the machine's load before and after,
    the timed calls and their wall time, one embedding pass alone, HNSW inserts alone, and the
    writers' CPU time."""

    database: str
    stored: int
    load_before: str
    load_after: str
    calls: Stopwatch
    elapsed: float
    embed: Stopwatch
    ceiling: float | None = None
    cpu: float = 0.0  # the writers' CPU seconds


def _report(
    args: argparse.Namespace, corpus: SyntheticCorpus, batches: list[Message], total: int, run: IngestRun
) -> None:
    per_second = total / run.elapsed if run.elapsed > 0 else float("inf")
    if args.via == "handler":
        unit = f"IngestFunction invocation ({args.batch_size} SQS records x {args.per_message} memories)"
        workers = f"{args.workers} worker process(es), each a warm container"
    else:
        unit = f"remember() call ({args.per_message} memories)"
        workers = f"{args.workers} writer thread(s), each its own connection"
    print(f"database: {run.database}")
    print(f"machine: {run.load_before} before, {run.load_after} after")
    print(
        f"data: {total} synthetic memories of {corpus.users} users in {len(batches)} messages; {workers}; "
        f"{args.dimension}-d hash embeddings; {run.stored} rows stored"
    )
    if run.cpu > 0:
        print(f"writers' CPU: {run.cpu:.2f} s, {total / run.cpu:.0f} memories per CPU second (the database's aside)")
    embed_s = run.embed.samples[0] / 1000.0
    rows: list[list[Any]] = [
        [
            unit,
            len(run.calls.samples),
            f"{run.elapsed:.2f}",
            f"{run.calls.p50:.2f}",
            f"{run.calls.p95:.2f}",
            f"{per_second:.0f}",
        ],
        ["hash embedding alone (one pass, for scale)", total, f"{embed_s:.2f}", "", "", f"{total / embed_s:.0f}"],
    ]
    if run.ceiling is not None:
        rows.append(
            [
                f"HNSW inserts alone, bare table, 1 writer ({args.per_message} per transaction)",
                total,
                f"{total / run.ceiling:.2f}",
                "",
                "",
                f"{run.ceiling:.0f}",
            ]
        )
    print_table(["what", "count", "total s", "p50 ms", "p95 ms", "memories/s"], rows)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "ingest",
        help="memories per second through the write path (IngestFunction handler or remember)",
        description="Write N synthetic memories through the IngestFunction handler (SQS batches of "
        "conversation-ended messages) or Memory.add, on a fresh database with hash embeddings.",
    )
    p.add_argument("--memories", type=int, default=20_000, help="memories to store (default 20000)")
    p.add_argument("--per-message", type=int, default=10, help="memories per conversation message (default 10)")
    p.add_argument("--via", choices=["handler", "service"], default="handler", help="the write path (default handler)")
    p.add_argument("--batch-size", type=int, default=10, help="SQS records per handler invocation (default 10)")
    p.add_argument("--workers", type=int, default=1, help="concurrent writers (default 1)")
    p.add_argument("--users", type=int, help="users the memories belong to (default memories / 100)")
    p.add_argument("--dimension", type=int, default=384, help="embedding dimension (default 384)")
    p.add_argument("--template", help="the SAM template for --via handler (default ./template.yaml)")
    p.add_argument(
        "--without-vector-index",
        action="store_true",
        help="no effect: the table has no table-wide vector index any more (migration 0005); accepted so "
        "earlier command lines still run",
    )
    p.add_argument(
        "--index-ceiling",
        action="store_true",
        help="also time the same vectors inserted into a bare table with only an HNSW index "
        "(what a table-wide vector index would allow one writer)",
    )
    p.add_argument("--seed", type=int, default=7, help="random seed of the synthetic data")
    add_database_arguments(p)
    p.set_defaults(func=run)
