"""The OpenAPI document groups operations by resource (recall first), says how to authenticate and
shows an example body for each operation that takes one; each example is a valid request. It also
says each operation's whole request (its model among the schemas, where each field travels), from
which the TypeScript client is generated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from rushmem.http.openapi import REQUEST_EXAMPLES, TAGS, openapi_document
from rushmem_contract import schemas
from rushmem_contract.instructions import InstructionsRequest
from rushmem_contract.models import MemoryChanges
from rushmem_contract.operations import BY_NAME, OPERATIONS
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


def _operations(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {op["operationId"]: op for ops in document["paths"].values() for op in ops.values()}


def test_each_operation_names_its_request_model_and_where_each_field_travels(document: dict[str, Any]) -> None:
    found = _operations(document)
    assert set(found) == {op.name for op in OPERATIONS}
    models = document["components"]["schemas"]
    for name, operation in found.items():
        op, wire = BY_NAME[name], operation["x-rushmem"]
        assert wire["request"] == op.request.__name__
        assert wire["request"] in models, name
        assert wire["path"] == list(op.path_fields)
        # Every field travels in exactly one place, by the name the request's schema gives it.
        travels = wire["path"] + wire["query"] + wire["body"]
        assert sorted(travels) == sorted(models[wire["request"]]["properties"]), name
        assert list(wire["encoding"]) == wire["query"]
    assert found["update"]["x-rushmem"]["query"] == ["user_id"]
    assert found["usage"]["x-rushmem"]["query"] == ["user_id", "start", "end"]


def test_a_query_encoding_says_what_the_contract_sends(document: dict[str, Any]) -> None:
    """GET /memories' filters travel flattened: the encoding names the parameters the contract writes."""
    wire = _operations(document)["list"]["x-rushmem"]
    filters = wire["encoding"]["filters"]
    assert filters == {
        "model": "MemoryFilters",
        "fields": {"categories": "list", "metadata": "object", "created_after": "text", "created_before": "text"},
    }
    op = BY_NAME["list"]
    sent = op.http(op.build(user_id="u", filters={"categories": ["fact"], "metadata": {"a": 1}}, include_inactive=True))
    flat = {k for k, v in wire["encoding"].items() if isinstance(v, str)} | set(filters["fields"])
    assert set(sent.query) <= flat
    assert sent.query["categories"] == "fact" and sent.query["metadata"] == '{"a":1}'


def test_every_reference_resolves_and_requests_validate_as_the_contract_reads_them(document: dict[str, Any]) -> None:
    text = json.dumps(document)
    models = document["components"]["schemas"]
    for ref in {part.split('"', 1)[0] for part in text.split('"$ref": "#/components/schemas/')[1:]}:
        assert ref in models, ref

    def valid(model: str, value: dict[str, Any]) -> bool:
        schema = {"$ref": f"#/components/schemas/{model}", "components": document["components"]}
        return bool(jsonschema.Draft202012Validator(schema).is_valid(value))

    # AddRequest's memories: one string, one object, or a list of either (rushmem_contract.shapes).
    for memories in ("The user prefers TypeScript", {"content": "x"}, ["a", {"content": "b", "category": "fact"}]):
        assert valid("AddRequest", {"memories": memories}), memories
        schemas.AddRequest.model_validate({"memories": memories})
    assert not valid("AddRequest", {"memories": 3})
    assert not valid("AddRequest", {"memories": [""]})
    assert valid("GetRequest", {"memory_id": "00000000-0000-4000-8000-000000000000"})
    assert not valid("GetRequest", {"memory_id": "00000000-0000-4000-8000-000000000000", "bogus": 1})
    assert valid("UsageRequest", {"user_id": "u", "start": "2024-01-01"})


def test_the_typescript_package_is_built_from_the_document_the_api_serves(document: dict[str, Any]) -> None:
    # The npm package generates its types and methods from this file at build time; a contract change
    # that is not written here would ship a client of the previous API.
    committed = json.loads((ROOT / "shared" / "typescript" / "openapi.json").read_text(encoding="utf-8"))
    assert committed == document, "run: rushmem openapi --out shared/typescript/openapi.json"
