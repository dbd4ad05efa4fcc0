"""``rushmem bench embed``: the local model's load time, one query's latency and batch throughput.

No database: what a CLI command pays for the model (load + one embedding) and what an import or a
benchmark pays per memory. ``--backend sentence-transformers`` measures the reference backend (torch)
on the same texts, for comparison.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from rushmem.service import Memory
from rushmem_contract.errors import InvalidInput
from rushmem_tools.bench.common import Stopwatch, load_average, print_table, say
from rushmem_tools.bench.quality import default_bench_file


def read_texts(path: Path, count: int) -> list[str]:
    """``count`` memory contents from an import file (JSON Lines with "content"), repeated if it has fewer."""
    if not path.is_file():
        raise InvalidInput(f"{path} does not exist", field="memories")
    try:
        texts = [str(json.loads(line)["content"]) for line in path.read_text(encoding="utf-8").splitlines() if line]
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(f"{path} is not JSON Lines of {{content, ...}}: {exc}", field="memories") from exc
    if not texts:
        raise InvalidInput(f"{path} has no memories", field="memories")
    return [texts[i % len(texts)] for i in range(count)]


def run(service: Memory, args: argparse.Namespace) -> int:
    from rushmem_tools.embedders.local import LocalEmbedder

    path = Path(args.memories).expanduser() if args.memories else default_bench_file("locomo-dev", "memories.jsonl")
    texts = read_texts(path, args.texts)
    load_before = load_average()
    started = time.perf_counter()
    batch_size = args.batch_size or service.settings.embedding_batch_size
    embedder = LocalEmbedder(service.settings.embedding_model, batch_size=batch_size, backend=args.backend)
    embedder.warm_up()
    load_s = time.perf_counter() - started
    say(f"embed: {embedder.fingerprint} ({embedder.backend}) loaded in {load_s:.2f} s; {len(texts)} texts from {path}")
    query = Stopwatch()
    for text in texts[: args.queries]:
        with query.time():
            embedder.embed_query(text)
    rates: list[float] = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        embedder.embed(texts)
        rates.append(len(texts) / (time.perf_counter() - started))
    best = max(rates)
    rows: list[list[Any]] = [
        ["load (imports + weights + first embedding)", f"{load_s * 1000:.0f} ms", "what a CLI command pays once"],
        [
            f"one query ({len(query.samples)} texts)",
            f"p50 {query.p50:.1f} ms, p95 {query.p95:.1f} ms",
            "embed_query, one at a time",
        ],
        [
            f"batch of {len(texts)} ({args.repeat} runs)",
            ", ".join(f"{rate:.0f}/s" for rate in rates),
            f"embed(), batches of {batch_size}",
        ],
    ]
    print(f"model: {embedder.fingerprint}, {embedder.backend} backend; texts: {path}")
    print(f"machine: {load_before} before, {load_average()} after")
    print_table(["measure", "value", "what"], rows)
    print(
        f"embed backend={embedder.backend} texts={len(texts)} load_ms={load_s * 1000:.0f} "
        f"query_p50_ms={query.p50:.2f} per_s={best:.1f}"
    )
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "embed",
        help="the local model's load time, one query's latency and embeddings per second (no database)",
        description=__doc__,
    )
    p.add_argument(
        "--memories", help="JSON Lines with a 'content' per line (default ../shared/bench/locomo-dev/memories.jsonl)"
    )
    p.add_argument("--texts", type=int, default=1000, help="texts in the timed batch (default 1000)")
    p.add_argument("--queries", type=int, default=50, help="texts embedded one at a time (default 50)")
    p.add_argument("--repeat", type=int, default=3, help="timed batch runs; the best is the summary's (default 3)")
    p.add_argument("--batch-size", type=int, help="texts per model call (default RUSHMEM_EMBEDDING_BATCH_SIZE)")
    p.add_argument(
        "--backend",
        choices=["numpy", "sentence-transformers"],
        help="default: numpy where the model allows (sentence-transformers needs torch installed)",
    )
    p.set_defaults(func=run)
