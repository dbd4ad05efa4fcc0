"""Schemathesis against the recall API's own OpenAPI document, over real HTTP (`rushmem serve`).

Generated requests, valid and invalid, must never get a 5xx, and every answer must match the
document (status code, content type, body schema). Bounded budget, so it runs in `make test`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from rushmem_tools.local.server import LocalApi, make_server, openapi_document
from tests.support.environment import use_lambda_environment
from tests.support.recall import TEMPLATE

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.fixture
def fuzz_base_url(monkeypatch: pytest.MonkeyPatch, database_url: str) -> Iterator[str]:
    use_lambda_environment(monkeypatch, database_url)
    server = make_server(LocalApi(TEMPLATE), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


OPENAPI = json.loads(openapi_document(TEMPLATE))
OPERATIONS = [(method.upper(), path) for path, ops in OPENAPI["paths"].items() for method in ops]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"])
@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_generated_requests_get_documented_answers_and_never_a_5xx(
    method: str, path: str, mode: GenerationMode, fuzz_base_url: str
) -> None:
    operation = schemathesis.openapi.from_dict(OPENAPI).find_operation_by_label(f"{method} {path}")
    assert operation is not None

    @given(case=operation.as_strategy(generation_mode=mode))
    @FUZZ
    def exercise(case: Any) -> None:
        response = case.call(base_url=fuzz_base_url, timeout=30)
        case.validate_response(response, checks=CHECKS)

    exercise()
