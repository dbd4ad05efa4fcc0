"""What a state-changing request must say about its body: JSON, in so many words.

A page on any other site can make a browser send POST with a body and no JSON content type
(``fetch`` in no-cors mode with a Blob, ``navigator.sendBeacon``, a form): those are "simple"
requests, sent without asking the server first. A browser sends ``Content-Type:
application/json`` cross-site only after a CORS preflight, which this API never grants. So
POST, PUT and PATCH, and any request that carries a body, are taken only with a JSON content
type (415 otherwise): every client of the API (the Python client, MCP clients, the memory page,
API Gateway's own test events) sends one. The rule holds in AWS and in ``rushmem serve``
alike (both run this handler: :func:`rushmem.http.errors.json_bodies_only`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Methods that always carry a body in this API (a GET or DELETE carries none).
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def is_json_content_type(value: str | None) -> bool:
    """``application/json`` or a ``+json`` type, with any parameters."""
    if not value:
        return False
    media = value.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def needs_json(method: str, body: str | None) -> bool:
    """Whether a request must declare a JSON body: POST, PUT and PATCH, and anything with a body."""
    return method.upper() in BODY_METHODS or bool(body)


def content_type(headers: Mapping[str, Any] | None) -> str | None:
    value = next((v for k, v in (headers or {}).items() if str(k).lower() == "content-type"), None)
    return value if isinstance(value, str) else None
