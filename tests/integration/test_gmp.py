"""GRAFOMEM's GMP conformance suite (a third party's, MIT) over the HTTP API of `agent-memory serve`,
through the adapter `agent-memory bench gmp` uses: every capability it declares must hold, among them
AUDIT (texts one digit apart are two memories), SUPERSESSION_CHAIN through ``supersedes``, BI_TEMPORAL
through ``as_of``, HARD_DELETE (history included) and PROVENANCE (a write id on every memory)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from agent_memory_tools.bench import gmp
from agent_memory_tools.local.server import LocalApi, make_server
from tests.integration.recall_support import TEMPLATE

pytest.importorskip("aml", reason="GRAFOMEM (the dev extra) is not installed")


@pytest.fixture
def api_url(lambda_env: str) -> Iterator[str]:
    server = make_server(LocalApi(TEMPLATE), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_every_declared_capability_passes_the_suite(api_url: str) -> None:
    profile = gmp.run(api_url, seeds=1)

    failed = {
        r.capability.value: [(d.name, round(d.point, 3)) for d in r.directions if not d.passed]
        for r in profile.results
        if not r.passed
    }
    assert failed == {}
    assert {r.capability.value for r in profile.results} == set(gmp.CAPABILITIES)
    assert gmp.summary(profile, 1).endswith("violations=0")
