"""Every operation of the table through every door that offers it, on the same data, compared with
the in-process service's answers: the same results, and the same bad inputs refused with the same
code, field and message (tests/support/conformance.py has the scenario and the doors). A row a door
forgets, or a door that reads an input otherwise, fails here."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem_contract import operations as ops
from tests.support import conformance
from tests.support.conformance import REFUSED, SCENARIO, Answer

DOORS = ("http", "mcp", "cli", "client", "async-client", "typescript")
# A backup retention: every door's erasure receipt states its backup_horizon (times are masked).
REVIEW = {
    "RUSHMEM_REVIEW_WRITES": "true",
    "RUSHMEM_EXTRACTION_PROVIDER": "rules",
    "RUSHMEM_BACKUP_RETENTION_DAYS": "7",
}


@pytest.fixture
def reference(fresh_database: Callable[[], str]) -> Iterator[Memory]:
    """The in-process service on a database of its own, configured as the doors' environment."""
    with Memory(
        Settings(
            database_url=fresh_database(),
            embedding_provider="hash",
            db_role="agent_memory_app",
            review_writes=True,
            backup_retention_days=7,
        )
    ) as memory:
        yield memory


def compare(
    name: str, reference: list[Answer | None], answers: list[Answer | None], steps: list[tuple[str, Any]]
) -> None:
    ids_ref: dict[str, str] = {}
    ids_door: dict[str, str] = {}
    for (op_name, _), expected, got in zip(steps, reference, answers, strict=True):
        if got is None:
            continue
        assert expected is not None
        op = ops.operation(op_name)
        where = f"{name}: {op_name}"
        assert got.refused == expected.refused, f"{where}: {got} vs {expected}"
        if expected.refused:
            # An MCP tool's error is one line of text: the field is where its message begins.
            assert (got.field if name != "mcp" else expected.field, got.message) == (
                expected.field,
                expected.message,
            ), where
            assert expected.code is not None and got.code is not None and expected.code in got.code.split("|"), where
            continue
        want = conformance.normalized(op, expected.value, ids_ref)
        if name == "mcp":  # a tool hands a model memory text as the block shows it
            want = conformance.defused(want)
        have = conformance.normalized(op, got.value, ids_door)
        assert have == want, f"{where}:\n{json.dumps(have, indent=1)[:3000]}\n!=\n{json.dumps(want, indent=1)[:3000]}"


@pytest.mark.parametrize("name", DOORS)
def test_every_operation_answers_the_same_at_every_door(
    name: str, lambda_env: str, reference: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in REVIEW.items():
        monkeypatch.setenv(key, value)
    expected = conformance.run(conformance.python_door(reference), SCENARIO, lambda _: True)
    receipts = [a.value for (op, _), a in zip(SCENARIO, expected, strict=True) if op == "forget_user" and a]
    assert receipts and all(r["backup_horizon"] for r in receipts)  # so every door must show it
    with ExitStack() as stack:
        got = conformance.run(conformance.open_door(name, stack), SCENARIO, conformance.offered_by(name))
    compare(name, expected, got, SCENARIO)


@pytest.mark.parametrize("name", DOORS)
def test_the_same_bad_inputs_are_refused_the_same_way_at_every_door(
    name: str, lambda_env: str, reference: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in REVIEW.items():
        monkeypatch.setenv(key, value)
    steps: list[tuple[str, Any]] = list(REFUSED)
    expected = conformance.run(conformance.python_door(reference), steps, lambda _: True)
    assert all(a is not None and a.refused for a in expected), [a for a in expected if a is None or not a.refused]
    with ExitStack() as stack:
        got = conformance.run(conformance.open_door(name, stack), steps, conformance.offered_by(name))
    compare(name, expected, got, steps)
