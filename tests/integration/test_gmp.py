"""GRAFOMEM's GMP conformance suite (a third party's, MIT) over the HTTP API of `rushmem serve`,
through the adapter `rushmem bench gmp` uses: every capability it declares must hold, among them
AUDIT (texts one digit apart are two memories), SUPERSESSION_CHAIN through ``supersedes``, BI_TEMPORAL
through ``as_of``, HARD_DELETE (history included) and PROVENANCE (a write id on every memory)."""

from __future__ import annotations

import pytest

from rushmem_tools.bench import gmp

pytest.importorskip("aml", reason="GRAFOMEM (the dev extra) is not installed")


def test_every_declared_capability_passes_the_suite(served: str) -> None:
    profile = gmp.run(served, seeds=1)

    failed = {
        r.capability.value: [(d.name, round(d.point, 3)) for d in r.directions if not d.passed]
        for r in profile.results
        if not r.passed
    }
    assert failed == {}
    assert {r.capability.value for r in profile.results} == set(gmp.CAPABILITIES)
    assert gmp.summary(profile, 1).endswith("violations=0")
