"""The OpenAPI document groups operations by resource (recall first), says how to authenticate and
shows an example body for each operation that takes one; each example is a valid request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from rushmem.http.openapi import REQUEST_EXAMPLES, TAGS, openapi_document
from rushmem_contract import schemas
from rushmem_contract.instructions import InstructionsRequest
from rushmem_contract.models import MemoryChanges
from rushmem_tools.local import runtime

ROOT = Path(__file__).resolve().parents[2]
BODIES: dict[tuple[str, str], type[BaseModel]] = {
    ("post", "/recall"): schemas.RecallRequest,
    ("post", "/memories"): schemas.AddRequest,
    ("patch", "/memories/{memory_id}"): MemoryChanges,
    ("post", "/conversations"): schemas.ConversationRequest,
    ("put", "/instructions"): InstructionsRequest,
}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    app = runtime.load_module(runtime.function_spec(ROOT / "template.yaml", "RecallFunction")).app
    return json.loads(openapi_document(app))  # type: ignore[no-any-return]


def test_every_operation_has_its_resources_tag_and_recall_comes_first(document: dict[str, Any]) -> None:
    assert [tag["name"] for tag in document["tags"]] == [name for name, _ in TAGS]
    assert document["tags"][0]["name"] == "recall"
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert operation["tags"] == [path.strip("/").split("/")[0]], (method, path)


def test_the_two_ways_to_authenticate_are_security_schemes(document: dict[str, Any]) -> None:
    schemes = document["components"]["securitySchemes"]
    assert schemes["jwt"]["scheme"] == "bearer" and schemes["sigv4"]["in"] == "header"
    assert document["security"] == [{"jwt": []}, {"sigv4": []}]


def test_each_body_has_an_example_that_is_a_valid_request(document: dict[str, Any]) -> None:
    assert set(REQUEST_EXAMPLES) == set(BODIES)
    for (method, path), model in BODIES.items():
        example = document["paths"][path][method]["requestBody"]["content"]["application/json"]["example"]
        model.model_validate(example)
