"""What the RDS Data API path adds per call, measured on the local stand-in (not collected by the
suite; docs/deployment.md quotes its output):

    .venv/bin/python -m pytest tests/data_api_overhead.py -q -p no:cacheprovider -s

The stand-in runs on 127.0.0.1, so this is the protocol's own cost (botocore's signing and JSON,
one HTTPS-shaped request per statement, the text form of vectors), not AWS's network.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem_contract.models import NewMemory
from tests.support.data_api import DataApiStandIn

FACTS = [f"The user noted fact {i} about topic {i % 7}" for i in range(50)]


def _ms(work: Callable[[], object], runs: int) -> tuple[float, float]:
    work()
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        took.append((time.perf_counter() - started) * 1000)
    took.sort()
    return statistics.median(took), took[int(runs * 0.9)]


def test_overhead(settings: Settings, data_api_settings: Settings, data_api: DataApiStandIn) -> None:
    direct, api = Memory(settings), Memory(data_api_settings)
    try:
        for service in (direct, api):
            service.add([NewMemory(content=f) for f in FACTS], user_id="u")
        data_api.reset_counts()
        api.recall("topic 3", user_id="u")
        recall_requests = sum(data_api.reset_counts().values())
        api.add([NewMemory(content="The user deploys with SAM")], user_id="u")
        remember_requests = sum(data_api.reset_counts().values())
        print(f"\nrequests: recall {recall_requests}, remember (one fact) {remember_requests}")
        for name, service in (("direct", direct), ("data-api", api)):

            def recall_once(s: Memory = service) -> object:
                return s.recall("topic 3", user_id="u")

            def remember_once(s: Memory = service) -> object:
                return s.add([NewMemory(content=f"fact {time.perf_counter_ns()}")], user_id="u")

            recall, write = _ms(recall_once, 50), _ms(remember_once, 20)
            print(
                f"{name:9} recall median {recall[0]:.1f} ms p90 {recall[1]:.1f} ms; "
                f"remember median {write[0]:.1f} ms p90 {write[1]:.1f} ms"
            )
    finally:
        direct.close()
        api.close()
