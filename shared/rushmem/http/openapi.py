"""The API's OpenAPI document as this API answers (validation errors are 400, not the resolver's
422), and the interactive page for it (Powertools' Swagger UI, its files inlined: no CDN).

The document also carries what the routes do not say: a tag per resource (Swagger UI groups by tag,
recall first), the two ways to authenticate as security schemes, an example request body for each
operation that takes one (:data:`REQUEST_EXAMPLES`; a test validates each against its request model),
and, for generated clients (the TypeScript one), each operation's whole request: its request model
among the schemas and, as ``x-rushmem``, where each of its fields travels (:func:`wire_of`)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from pydantic.json_schema import models_json_schema

from rushmem_contract.operations import OPERATIONS

# (tag, what it groups), in the order the page shows them; a path's tag is its first segment's.
TAGS: tuple[tuple[str, str], ...] = (
    ("recall", "Memories relevant to a query, and the [RUSH_MEMORY] block for the system prompt"),
    ("memories", "Store, list, read, change, export and forget a user's memories; review the writes held for it"),
    ("conversations", "Hand a finished conversation to the write path"),
    ("instructions", "What a project's extractor keeps and ignores, and its own categories (versioned)"),
    ("erasures", "Receipts of forgetting a user"),
    ("usage", "A user's usage per day and its cost"),
    ("users", "Every user with their counts of memories (operators: IAM callers, the local server)"),
)

SECURITY_SCHEMES: dict[str, dict[str, Any]] = {
    "jwt": {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "JWT",
        "description": "A user's token, verified by API Gateway's JWT authorizer: the user is the token's 'sub' "
        "(user_id may be left out). `rushmem serve` verifies them with --jwt-issuer, else none "
        "(see docs/api.md). MCP hosts find the issuer at /.well-known/oauth-protected-resource/mcp.",
    },
    "sigv4": {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": "An IAM-signed request (AWS Signature Version 4, service execute-api) from a trusted "
        "backend, which names the user with user_id.",
    },
}

# One example body per operation that takes one, keyed by (method, path) as the document spells them.
REQUEST_EXAMPLES: dict[tuple[str, str], dict[str, Any]] = {
    ("post", "/recall"): {
        "user_id": "u-42",
        "project_id": "svg-editor",
        "query": "Add an export-to-PNG button to the editor",
        "limit": 5,
    },
    ("post", "/memories"): {
        "user_id": "u-42",
        "memories": [
            {"content": "The user prefers TypeScript", "category": "preference"},
            {"content": "Every SVG change must be synced to defaultSVG", "category": "decision", "is_evergreen": True},
        ],
    },
    ("patch", "/memories/{memory_id}"): {"content": "The user prefers TypeScript with strict mode", "metadata": None},
    ("post", "/conversations"): {
        "user_id": "u-42",
        "project_id": "svg-editor",
        "conversation_id": "c-1",
        "messages": [
            {"role": "user", "content": "My stack is TypeScript with React."},
            {"role": "assistant", "content": "Noted: TypeScript and React."},
        ],
    },
    ("put", "/instructions"): {
        "user_id": "u-42",
        "project_id": "svg-editor",
        "instructions": "Keep the user's coding conventions and the editor's requirements.",
        "ignore": ["football"],
        "categories": [
            {"name": "conventions", "description": "How the user wants code written", "keywords": ["lint", "style"]}
        ],
    },
}


REF_TEMPLATE = "#/components/schemas/{model}"


def _add_requests(document: dict[str, Any]) -> None:
    """Each row's request model among the schemas (those the routes already put there are kept:
    they are the same models) and each operation's ``x-rushmem``: its request model and where each
    field travels (:meth:`~rushmem_contract.operations.Operation.wire`), from which the TypeScript
    client's methods are generated."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    models = list(dict.fromkeys(op.request for op in OPERATIONS))
    _, top = models_json_schema([(model, "validation") for model in models], ref_template=REF_TEMPLATE)
    for name, schema in top.get("$defs", {}).items():
        schemas.setdefault(name, schema)
    for op in OPERATIONS:
        operation = document.get("paths", {}).get(op.path, {}).get(op.method.lower())
        if operation is not None:  # an app that routes only some of the rows documents only those
            operation["x-rushmem"] = op.wire()


@functools.cache
def openapi_document(app: Any) -> str:
    """The resolver's document, without the 422 answers it lists for every validated route (this
    API answers validation errors with 400, documented per route) and their schemas; with tags,
    security schemes, request examples and the operations' requests (:func:`_add_requests`)."""
    document = json.loads(app.get_openapi_json_schema())
    for path, operations in document.get("paths", {}).items():
        for method, operation in operations.items():
            operation.get("responses", {}).pop("422", None)
            tag = path.strip("/").split("/", 1)[0]
            if tag in dict(TAGS):
                operation["tags"] = [tag]
            example = REQUEST_EXAMPLES.get((method, path))
            content = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if example is not None and content is not None:
                content["example"] = example
    _add_requests(document)
    schemas = document.get("components", {}).get("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(unused, None)
    document["tags"] = [{"name": name, "description": text} for name, text in TAGS]
    document.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
    document["security"] = [{"jwt": []}, {"sigv4": []}]
    return json.dumps(document, indent=2, ensure_ascii=False)


def swagger_html(app: Any) -> str:
    """Swagger UI over :func:`openapi_document`, as Powertools' ``enable_swagger`` builds it
    (its bundled script and style inlined, so the page needs nothing from the internet)."""
    from aws_lambda_powertools.event_handler.openapi import swagger_ui
    from aws_lambda_powertools.event_handler.openapi.swagger_ui.html import generate_swagger_html

    folder = Path(swagger_ui.__file__).parent
    script = (folder / "swagger-ui-bundle.min.js").read_text(encoding="utf-8")
    style = (folder / "swagger-ui.min.css").read_text(encoding="utf-8")
    # As enable_swagger does: "</" escaped, so the document cannot close the page's script tag.
    spec = openapi_document(app).replace("</", "<\\/")
    return generate_swagger_html(spec, script, style, "", None, False)
