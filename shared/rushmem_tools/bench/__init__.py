"""`rushmem bench ...`: the benchmarks behind BENCHMARKS.md, as commands.

Each subcommand prints a table and ends with exactly one summary line
(``quality ...``, ``latency ...``, ``ingest ...``, ``tokens ...``, ``plot ...``, ``embed ...``,
``load ...``, ``coldstart ...``, ``peers ...``, ``truth ...``, ``gmp ...``, ``capacity ...``, ``readers ...``,
``defences ...``). They run
on scratch databases (a temporary embedded PostgreSQL by default), never on the user's
own data. Heavy imports (matplotlib) happen only inside the commands, and the CLI imports the
benchmark modules only to run one (:func:`register`).
"""

from __future__ import annotations

from typing import Any

HELP = (
    "benchmarks: quality, latency, ingest, tokens, plot, embed, load, coldstart, peers, truth, gmp, capacity, readers, "
    "defences"
)


def register(sub: Any) -> None:
    """Add the `bench` command group to the CLI's subparsers."""
    from rushmem_tools.bench import (
        capacity,
        coldstart,
        defences,
        embed,
        gmp,
        ingest,
        latency,
        load,
        peers,
        plot,
        quality,
        readers,
        tokens,
        truth,
    )

    parser = sub.add_parser(
        "bench",
        help=HELP,
        description="Benchmarks on scratch databases; each prints a table and one summary line.",
    )
    benches = parser.add_subparsers(dest="bench", required=True, metavar="BENCHMARK")
    quality.register(benches)
    latency.register(benches)
    ingest.register(benches)
    tokens.register(benches)
    plot.register(benches)
    embed.register(benches)
    load.register(benches)
    coldstart.register(benches)
    peers.register(benches)
    truth.register(benches)
    gmp.register(benches)
    capacity.register(benches)
    readers.register(benches)
    defences.register(benches)
