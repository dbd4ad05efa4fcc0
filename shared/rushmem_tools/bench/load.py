"""`rushmem bench load`: the API and the write path under concurrent load, on a scratch database.

For ``--duration`` seconds at once:

- ``--clients`` concurrent HTTP clients (one asyncio loop, httpx) POST /recall, each waiting for
  its answer before the next request, against ``--servers`` `rushmem serve` processes (each
  one warm RecallFunction container: one request at a time, one database connection), users and
  queries drawn at random over ``--users`` x ``--memories`` seeded memories;
- ``--ingest-workers`` processes (each a warm IngestFunction container) invoke the ingest handler
  with SQS batches of ``--batch-size`` "conversation ended" messages, back to back;
- the database's client connections are sampled every half second.

Every recall answer other than 200 is an error (503s are also counted apart), a request without an
answer after ``--request-timeout`` (30 s, API Gateway's limit; queueing for a busy server included)
a timeout, every record the handler reports failed an ingest
error. The command exits 1 when there were any. Hash embeddings: the database path and the
handlers are measured, not a model. ``--max-connections`` caps the embedded server's connections
(to see what exhaustion looks like: 503 with Retry-After, never a hang).

The last line is the summary: ``load clients=... recall_p50_ms=... recall_p99_ms=... errors=...``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import multiprocessing
import os
import queue
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rushmem.store.engine.connection import Database
from rushmem.store.schema.migrate import register_types
from rushmem_contract.errors import ConfigurationError, InvalidInput
from rushmem_contract.models import NewMemory
from rushmem_tools.bench import sql as bench_sql
from rushmem_tools.bench.common import (
    ScratchServer,
    Stopwatch,
    add_database_arguments,
    load_average,
    open_service,
    print_table,
    say,
)
from rushmem_tools.bench.ingest import default_template
from rushmem_tools.bench.sql import url_dbname

TOPICS = ["TypeScript", "pnpm", "the SVG editor", "PostgreSQL", "tea", "Lisbon", "dark mode", "Vim", "SAM", "tests"]


def _env(url: str) -> dict[str, str]:
    return {
        "RUSHMEM_DATABASE_URL": url,
        "RUSHMEM_EMBEDDING_PROVIDER": "hash",
        "RUSHMEM_DB_ROLE": "agent_memory_app",
        "RUSHMEM_AUTO_MIGRATE": "false",
        "RUSHMEM_LOG_LEVEL": "ERROR",
    }


# ---- the write path: IngestFunction containers -----------------------------------------------


def _record(worker: int, index: int) -> dict[str, Any]:
    body = json.dumps(
        {
            "user_id": f"load-ingest-{worker}-{index % 40}",
            "conversation_id": f"load-{worker}-{index}",
            "memories": [
                {"content": f"Load fact {worker}-{index}-{j} about {TOPICS[(index + j) % len(TOPICS)]}."}
                for j in range(3)
            ],
        }
    )
    sent = str(int(time.time() * 1000))
    return {
        "messageId": f"load-{worker}-{index}",
        "receiptHandle": f"load-{worker}-{index}",
        "body": body,
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": sent, "SenderId": "bench",
                       "ApproximateFirstReceiveTimestamp": sent},
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:local:000000000000:agent-memory-load",
        "awsRegion": "local",
    }  # fmt: skip


def _ingest_worker(
    template: str, env: dict[str, str], worker: int, batch_size: int, seconds: float, go: Any, results: Any
) -> None:
    """One warm IngestFunction container invoking the handler back to back for ``seconds``."""
    from rushmem_tools.local.runtime import LambdaContext, function_spec, load_handler

    os.environ.update(env)
    spec = function_spec(Path(template), "IngestFunction")
    for key, value in spec.environment.items():
        os.environ.setdefault(key, value)
    durations: list[float] = []
    records = failed = 0
    with (
        open(os.devnull, "w", encoding="utf-8") as sink,
        contextlib.redirect_stdout(sink),
        contextlib.redirect_stderr(sink),
    ):
        handler = load_handler(spec)
        handler({"Records": [_record(worker, -1)]}, LambdaContext(spec))  # warm: connection and imports
        go.wait()
        deadline = time.monotonic() + seconds
        index = 0
        while time.monotonic() < deadline:
            event = {"Records": [_record(worker, index + i) for i in range(batch_size)]}
            index += batch_size
            started = time.perf_counter()
            result = handler(event, LambdaContext(spec))
            durations.append((time.perf_counter() - started) * 1000.0)
            records += batch_size
            failed += len(result.get("batchItemFailures") or [])
    results.put((durations, records, failed))


# ---- the read path: rushmem serve and HTTP clients --------------------------------------


def _start_servers(count: int, template: Path, env: dict[str, str]) -> tuple[list[subprocess.Popen[str]], list[str]]:
    """``count`` `rushmem serve` processes on free ports; their processes and base URLs."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("RUSHMEM_", "AGENT_MEMORY_"))} | env
    command = [
        sys.executable,
        "-m",
        "rushmem_tools",
        "serve",
        "--port",
        "0",
        "--template",
        str(template),
        "--no-docs",
    ]
    processes = [
        subprocess.Popen(command, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # noqa: S603 - our own CLI
        for _ in range(count)
    ]
    urls = []
    for process in processes:
        assert process.stdout is not None
        line = process.stdout.readline()  # {"url": ...} once it listens (warm: connected, embedder loaded)
        if not line:
            raise ConfigurationError("`rushmem serve` did not start (run it alone to see why)")
        urls.append(str(json.loads(line)["url"]))
    return processes, urls


class RecallLoad:
    """What the clients saw."""

    def __init__(self) -> None:
        self.watch = Stopwatch()
        self.statuses: dict[int, int] = {}
        self.timeouts = 0
        self.transport_errors: dict[str, int] = {}

    @property
    def requests(self) -> int:
        return sum(self.statuses.values()) + self.timeouts + sum(self.transport_errors.values())

    @property
    def errors(self) -> int:
        return self.requests - self.statuses.get(200, 0)


async def _drive_recall(
    urls: list[str], users: list[str], *, clients: int, seconds: float, timeout: float, seed: int
) -> RecallLoad:
    import httpx

    load = RecallLoad()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as http:
        deadline = time.monotonic() + seconds

        async def client(number: int) -> None:
            rng = random.Random(seed + number)  # noqa: S311 - reproducible load, not secrets
            url = urls[number % len(urls)] + "/recall"
            while time.monotonic() < deadline:
                body = {"user_id": rng.choice(users), "query": f"what about {rng.choice(TOPICS)}?"}
                started = time.perf_counter()
                try:
                    async with asyncio.timeout(timeout):  # the whole request, queueing included
                        answer = await http.post(url, json=body)
                except TimeoutError:
                    load.timeouts += 1
                    continue
                except httpx.HTTPError as exc:
                    kind = type(exc).__name__
                    load.transport_errors[kind] = load.transport_errors.get(kind, 0) + 1
                    await asyncio.sleep(0.05)
                    continue
                load.watch.samples.append((time.perf_counter() - started) * 1000.0)
                load.statuses[answer.status_code] = load.statuses.get(answer.status_code, 0) + 1
                if answer.status_code == 503:
                    await asyncio.sleep(float(answer.headers.get("Retry-After", "1")))

        await asyncio.gather(*(client(i) for i in range(clients)))
    return load


def _sample_connections(admin: Database, dbname: str, stop: threading.Event, samples: list[int]) -> None:
    while not stop.wait(0.5):
        with contextlib.suppress(Exception):  # a sample lost under load is no result
            samples.append(admin.run(lambda conn: bench_sql.backend_count(conn, dbname)))


# ---- the command -----------------------------------------------------------------------------


def _check(args: argparse.Namespace) -> None:
    if not 1 <= args.clients <= 1000:
        raise InvalidInput("--clients must be between 1 and 1000", field="clients")
    if not 1 <= args.servers <= 64:
        raise InvalidInput("--servers must be between 1 and 64", field="servers")
    if not 0 <= args.ingest_workers <= 64:
        raise InvalidInput("--ingest-workers must be between 0 and 64", field="ingest_workers")
    if args.duration <= 0:
        raise InvalidInput("--duration must be positive", field="duration")
    if not 1 <= args.batch_size <= 10:
        raise InvalidInput("--batch-size must be between 1 and 10 (SQS's largest batch)", field="batch_size")
    if args.users < 1 or not 1 <= args.memories <= 100:
        raise InvalidInput("--users must be positive and --memories between 1 and 100", field="memories")


def _ms(watch: Stopwatch, q: float) -> str:
    return f"{watch.percentile(q):.1f}" if watch.samples else "nan"


def run(service: Any, args: argparse.Namespace) -> int:
    _check(args)
    template = Path(args.template) if args.template else default_template()
    if not template.is_file():
        raise ConfigurationError(f"no SAM template at {template} (pass --template)")
    server_settings = None
    if args.max_connections:
        # All of them for everyone: the bench logs in as the embedded server's superuser.
        server_settings = {"max_connections": str(args.max_connections), "superuser_reserved_connections": "0"}
    scratch = ScratchServer(
        data_dir=args.data_dir,
        server_url=args.server_url,
        keep=args.keep,
        shared_buffers=args.shared_buffers,
        server_settings=server_settings,
    )
    with scratch as server:
        database = server.describe()
        url = server.new_database("load")
        bench = open_service(service.settings, url, provider="hash")
        users = [f"load-user-{u}" for u in range(args.users)]
        say(f"load: seeding {args.users} users x {args.memories} memories")
        for u, user in enumerate(users):
            facts = [f"{user} fact {m} about {TOPICS[(u + m) % len(TOPICS)]}" for m in range(args.memories)]
            bench.add([NewMemory(content=f) for f in facts], user_id=user, source="bench")
        bench.close()
        dbname = url_dbname(url)
        admin = Database(bench.settings.model_copy(update={"db_role": None}), setup=register_types)
        env = _env(url)
        say(f"load: starting {args.servers} x rushmem serve and {args.ingest_workers} ingest workers")
        servers, urls = _start_servers(args.servers, template, env)
        context = multiprocessing.get_context("spawn")
        go, results = context.Event(), context.Queue()
        workers = [
            context.Process(
                target=_ingest_worker,
                args=(str(template), env, n, args.batch_size, args.duration, go, results),
            )
            for n in range(args.ingest_workers)
        ]
        samples: list[int] = []
        stop = threading.Event()
        sampler = threading.Thread(target=_sample_connections, args=(admin, dbname, stop, samples), daemon=True)
        try:
            for worker in workers:
                worker.start()
            time.sleep(2.0 if workers else 0)  # the workers' imports and warm-up, outside the clock
            load_before = load_average()
            sampler.start()
            say(f"load: {args.clients} clients for {args.duration:g} s")
            go.set()
            started = time.perf_counter()
            recall = asyncio.run(
                _drive_recall(
                    urls, users, clients=args.clients, seconds=args.duration, timeout=args.request_timeout,
                    seed=args.seed,
                )
            )  # fmt: skip
            elapsed = time.perf_counter() - started
            collected = [results.get(timeout=args.duration + 120) for _ in workers]
            load_after = load_average()
        except queue.Empty as exc:
            raise ConfigurationError("an ingest worker did not finish (see its traceback above)") from exc
        finally:
            stop.set()
            for worker in workers:
                worker.join(timeout=30)
                if worker.is_alive():
                    worker.terminate()
            for process in servers:
                process.terminate()
            for process in servers:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
            if sampler.is_alive():
                sampler.join(timeout=5)
            admin.close()
    ingest = Stopwatch()
    ingest.samples = [d for durations, _records, _failed in collected for d in durations]
    ingest_records = sum(records for _d, records, _f in collected)
    ingest_failed = sum(failed for _d, _r, failed in collected)
    errors = recall.errors + ingest_failed
    print(f"database: {database}")
    print(f"machine: {load_before} before, {load_after} after")
    print_table(
        ["path", "calls", "per s", "p50 ms", "p95 ms", "p99 ms", "max ms", "errors"],
        [
            ["recall (HTTP)", recall.requests, f"{recall.requests / elapsed:.1f}", _ms(recall.watch, 50),
             _ms(recall.watch, 95), _ms(recall.watch, 99), _ms(recall.watch, 100), recall.errors],
            [f"ingest (batches of {args.batch_size})", len(ingest.samples), f"{len(ingest.samples) / elapsed:.1f}",
             _ms(ingest, 50), _ms(ingest, 95), _ms(ingest, 99), _ms(ingest, 100), ingest_failed],
        ],
    )  # fmt: skip
    statuses = ", ".join(f"{code}: {n}" for code, n in sorted(recall.statuses.items())) or "none"
    transport = ", ".join(f"{kind}: {n}" for kind, n in sorted(recall.transport_errors.items())) or "none"
    print(f"recall answers: {statuses}; timeouts: {recall.timeouts}; transport errors: {transport}")
    most = max(samples, default=0)
    print(
        f"database connections: at most {most} (sampled {len(samples)} times; "
        f"{args.servers} servers + {args.ingest_workers} ingest workers + 1 sampler)"
    )
    print(
        f"load clients={args.clients} duration_s={elapsed:.1f} servers={args.servers} "
        f"recall_requests={recall.requests} recall_rps={recall.requests / elapsed:.1f} "
        f"recall_p50_ms={_ms(recall.watch, 50)} recall_p95_ms={_ms(recall.watch, 95)} "
        f"recall_p99_ms={_ms(recall.watch, 99)} recall_max_ms={_ms(recall.watch, 100)} "
        f"status_503={recall.statuses.get(503, 0)} timeouts={recall.timeouts} "
        f"ingest_workers={args.ingest_workers} ingest_records={ingest_records} "
        f"ingest_records_per_s={ingest_records / elapsed:.1f} ingest_p50_ms={_ms(ingest, 50)} "
        f"ingest_p99_ms={_ms(ingest, 99)} ingest_failed={ingest_failed} connections_max={most} errors={errors}"
    )
    return 1 if errors else 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "load",
        help="recall over HTTP and ingest at once, concurrently: latency, errors, connections",
        description="Concurrent recall clients against `rushmem serve` processes and concurrent "
        "IngestFunction invocations, on a scratch embedded database; exits 1 on any error.",
    )
    p.add_argument("--clients", type=int, default=50, help="concurrent recall clients (default 50)")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of load (default 60)")
    p.add_argument("--servers", type=int, default=2, help="rushmem serve processes (default 2)")
    p.add_argument("--ingest-workers", type=int, default=4, help="concurrent IngestFunction processes (default 4)")
    p.add_argument("--batch-size", type=int, default=10, help="SQS records per ingest invocation (default 10)")
    p.add_argument("--users", type=int, default=200, help="users with seeded memories (default 200)")
    p.add_argument("--memories", type=int, default=50, help="seeded memories per user (default 50)")
    p.add_argument(
        "--request-timeout",
        type=float,
        default=30.0,
        help="seconds (queueing included) before a recall counts as a timeout (default 30, API Gateway's limit)",
    )
    p.add_argument(
        "--max-connections",
        type=int,
        help="connections the embedded server the bench creates allows (none reserved); fewer than servers + "
        "ingest workers + 1 shows exhaustion: 503 with Retry-After",
    )
    p.add_argument("--template", help="the SAM template (default ./template.yaml)")
    p.add_argument("--seed", type=int, default=7, help="random seed of the clients")
    add_database_arguments(p)
    p.set_defaults(func=run)
