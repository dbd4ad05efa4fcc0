"""Helpers for the read-path tests: the events/ files, changed where a test needs to, run
through lambda_local exactly as `rushmem invoke RecallFunction EVENT` runs them; the same
handler behind `rushmem serve`'s HTTP server (``start``, the ``served`` fixture)."""

from __future__ import annotations

import base64
import contextlib
import copy
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import pytest

from rushmem_tools.local import runtime as lambda_local
from rushmem_tools.local.server import LocalApi, make_server

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
TEMPLATE = ROOT / "template.yaml"


def manifest_entries(function: str = "RecallFunction") -> list[dict[str, Any]]:
    manifest = json.loads((EVENTS / "manifest.json").read_text(encoding="utf-8"))
    return [e for e in manifest["events"] if e["function"] == function]


def event(name: str) -> dict[str, Any]:
    return lambda_local.read_event(EVENTS / name)


def invoke(evt: dict[str, Any] | str) -> dict[str, Any]:
    result = lambda_local.invoke(TEMPLATE, "RecallFunction", event(evt) if isinstance(evt, str) else evt)
    assert isinstance(result, dict)
    return result


def body_of(result: dict[str, Any]) -> Any:
    return json.loads(result["body"]) if result.get("body") else None


def with_body(evt: dict[str, Any] | str, body: Any) -> dict[str, Any]:
    out = copy.deepcopy(event(evt) if isinstance(evt, str) else evt)
    out["body"] = body if isinstance(body, str) else json.dumps(body)
    out["isBase64Encoded"] = False
    headers = out.setdefault("headers", {})
    if not isinstance(body, str) and not any(k.lower() == "content-type" for k in headers):
        # A JSON body as every client sends it (a GET event made into a PATCH has no content type).
        headers["content-type"] = "application/json"
    return out


def with_request(
    evt: dict[str, Any] | str, method: str, path: str, query: dict[str, str] | None = None
) -> dict[str, Any]:
    out = copy.deepcopy(event(evt) if isinstance(evt, str) else evt)
    out["rawPath"] = path
    out["requestContext"]["http"]["method"] = method
    out["requestContext"]["http"]["path"] = path
    out["rawQueryString"] = urlencode(query or {})
    if query:
        out["queryStringParameters"] = dict(query)
    else:
        out.pop("queryStringParameters", None)
    if method in ("GET", "DELETE"):
        out.pop("body", None)
    return out


def query_of(evt: dict[str, Any]) -> dict[str, str]:
    return dict(parse_qsl(evt.get("rawQueryString", "")))


def as_jwt(evt: dict[str, Any] | str, sub: str | None) -> dict[str, Any]:
    """The event as a JWT-authorised request of ``sub`` (None: claims without a sub)."""
    out = copy.deepcopy(event(evt) if isinstance(evt, str) else evt)
    claims = {"iss": "https://issuer.example", "token_use": "access"}
    if sub is not None:
        claims["sub"] = sub
    out["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    return out


def as_iam(evt: dict[str, Any] | str) -> dict[str, Any]:
    out = copy.deepcopy(event(evt) if isinstance(evt, str) else evt)
    out["requestContext"]["authorizer"] = copy.deepcopy(event("http-recall-iam.json")["requestContext"]["authorizer"])
    return out


def start(unverified_jwt: bool = True) -> tuple[str, Any]:
    """`rushmem serve` in this process on a free port: its URL and the server to shut down."""
    server = make_server(LocalApi(TEMPLATE, unverified_jwt=unverified_jwt), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}", server


@contextlib.contextmanager
def serving(unverified_jwt: bool = True) -> Iterator[str]:
    """`rushmem serve` in this process on a free port for the block: its URL."""
    url, server = start(unverified_jwt)
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def served(lambda_env: str) -> Iterator[str]:
    with serving() as url:
        yield url


def token(sub: str) -> str:
    """An unsigned JWT naming ``sub`` (serve reads it unverified, as API Gateway's authorizer would)."""
    payload = base64.urlsafe_b64encode(json.dumps({"sub": sub}).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJub25lIn0.{payload}.sig"
