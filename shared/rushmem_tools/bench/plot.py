"""`rushmem bench plot`: recall p95 against the number of memories, ours and the article's query.

Runs the latency measurement (embedding excluded) at each size with the same number of
memories per user, so the number of users grows with the store (as it does in a real
deployment), then draws the PNG shown in BENCHMARKS.md and writes the numbers beside it
as JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rushmem.service import Memory
from rushmem_contract.errors import ConfigurationError, InvalidInput
from rushmem_tools.bench.common import ScratchServer, add_database_arguments, load_average, print_table
from rushmem_tools.bench.latency import LatencyCase, LatencyRun, measure


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(part.replace("_", "")) for part in text.split(",") if part.strip()})
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"sizes must be integers separated by commas: {text!r}") from exc
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError("sizes must be positive")
    return sizes


def draw(runs: list[LatencyRun], out: Path, title: str) -> None:
    """Log-log chart of p95 (and p50, dashed) against memories."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter, NullFormatter
    except ImportError as exc:
        raise ConfigurationError("the plot needs matplotlib: pip install 'rushmem[bench]'") from exc
    sizes = [r.memories for r in runs]
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=120)
    series = (
        ("ours (scoped legs + rerank)", [r.ours for r in runs], "tab:blue"),
        ("article's query (ORDER BY total_score, whole table)", [r.seed for r in runs], "tab:red"),
    )
    for label, watches, colour in series:
        p95 = [w.p95 for w in watches]
        ax.plot(sizes, p95, marker="o", color=colour, label=f"{label}, p95")
        ax.plot(sizes, [w.p50 for w in watches], linestyle="--", color=colour, alpha=0.5)
        for x, y in zip(sizes, p95, strict=True):
            ax.annotate(f"{y:.1f} ms", (x, y), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sizes, [f"{s:,}" for s in sizes])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _pos: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("memories in the table (100 per user)" if _per_user(runs) == 100 else "memories in the table")
    ax.set_ylabel("recall latency, ms (log)")
    ax.set_title(f"{title}\nsolid: p95, dashed: p50", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)


def _per_user(runs: list[LatencyRun]) -> int | None:
    per = {r.memories // r.users for r in runs}
    return per.pop() if len(per) == 1 else None


def run(service: Memory, args: argparse.Namespace) -> int:
    if args.per_user < 1:
        raise InvalidInput("--per-user must be positive", field="per_user")
    out = Path(args.out)
    runs: list[LatencyRun] = []
    with ScratchServer.from_args(args) as server:
        database = server.describe()
        for size in args.sizes:
            runs.append(
                measure(
                    server,
                    service.settings,
                    LatencyCase(
                        memories=size,
                        users=max(1, size // args.per_user),
                        queries=args.queries,
                        vectors=args.vectors,
                        seed_queries=args.seed_queries,
                    ),
                )
            )
    title = f"Recall latency on this machine, {runs[0].dimension}-d {runs[0].vectors} vectors, limit 10"
    draw(runs, out, title)
    data = out.with_suffix(".json")
    data.write_text(json.dumps(_as_json(runs, database), indent=2) + "\n", encoding="utf-8")
    print(f"database: {database}; {load_average()} at the end")
    rows: list[list[Any]] = []
    for r in runs:
        speedup = r.seed.p95 / r.ours.p95 if r.ours.p95 > 0 else float("inf")
        rows.append(
            [
                r.memories,
                r.users,
                f"{r.load_s + r.index_s:.0f}",
                f"{r.ours.p50:.2f}",
                f"{r.ours.p95:.2f}",
                f"{r.seed.p50:.1f}",
                f"{r.seed.p95:.1f}",
                f"{speedup:.0f}x",
            ]
        )
    print_table(
        ["memories", "users", "load+index s", "ours p50", "ours p95", "article p50", "article p95", "speedup p95"], rows
    )
    print(f"plot written to {out}, numbers to {data}")
    print(
        f"plot sizes={','.join(str(r.memories) for r in runs)} "
        f"ours_p95_ms={','.join(f'{r.ours.p95:.2f}' for r in runs)} "
        f"seed_p95_ms={','.join(f'{r.seed.p95:.1f}' for r in runs)} out={out}"
    )
    return 0


def _as_json(runs: list[LatencyRun], database: str) -> dict[str, Any]:
    return {
        "database": database,
        "runs": [
            {
                "memories": r.memories,
                "users": r.users,
                "dimension": r.dimension,
                "vectors": r.vectors,
                "load_s": round(r.load_s, 1),
                "index_s": round(r.index_s, 1),
                "ours_ms": {"p50": round(r.ours.p50, 3), "p95": round(r.ours.p95, 3), "n": len(r.ours.samples)},
                "seed_ms": {"p50": round(r.seed.p50, 3), "p95": round(r.seed.p95, 3), "n": len(r.seed.samples)},
                "load_average": [r.load_before, r.load_after],
            }
            for r in runs
        ],
    }


def register(sub: Any) -> None:
    p = sub.add_parser(
        "plot",
        help="recall p95 against the number of memories (PNG), ours and the article's query",
        description="Run the latency benchmark (embedding excluded) at each size, with --per-user memories "
        "per user, and draw p95 against size as a PNG (numbers beside it as JSON). Needs the 'bench' extra.",
    )
    p.add_argument(
        "--sizes",
        type=parse_sizes,
        default=parse_sizes("10000,100000"),
        help="comma-separated numbers of memories (default 10000,100000)",
    )
    p.add_argument("--per-user", type=int, default=100, help="memories per user (default 100)")
    p.add_argument("--queries", type=int, default=200, help="timed queries per size and path (default 200)")
    p.add_argument("--seed-queries", type=int, help="time the article's query on only the first N queries")
    p.add_argument("--vectors", choices=["hash", "random"], default="hash", help="hash embeddings (default) or random")
    p.add_argument(
        "--out", default="docs/recall-latency.png", help="the PNG to write (default docs/recall-latency.png)"
    )
    add_database_arguments(p)
    p.set_defaults(func=run)
