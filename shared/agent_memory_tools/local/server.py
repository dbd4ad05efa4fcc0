"""The HTTP API on localhost without Docker or AWS (``agent-memory serve``), and its OpenAPI document.

Each HTTP request becomes an API Gateway HTTP API (payload format 2.0) event and goes to the
template's RecallFunction handler through :mod:`agent_memory_tools.local.runtime`, exactly as
``agent-memory invoke`` runs it; the handler's statusCode/headers/body become the HTTP answer.
Requests are handled one at a time, like one warm Lambda container.

Of what API Gateway does before the function, the IAM signature check is not done here: by default
every caller is treated as a trusted backend (user_id required). With ``--jwt-issuer`` (a :class:`JwtVerifier`)
every request but the OAuth metadata needs a bearer token that verifies against the issuer's keys, as
the stack's JWT authorizer demands, and a refusal is a 401 whose ``WWW-Authenticate`` names the
metadata (the MCP authorization specification). ``--unverified-jwt`` passes a JWT's claims on
unverified (local testing of the JWT path only).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import ipaddress
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qsl, urlsplit

from agent_memory.http import openapi as http_openapi
from agent_memory.http.oauth import PUBLIC_PATHS, bearer_challenge
from agent_memory_contract.errors import ConfigurationError
from agent_memory_tools.local import runtime

if TYPE_CHECKING:
    from agent_memory_tools.local.tokens import JwtVerifier

logger = logging.getLogger("agent_memory.serve")

RECALL_FUNCTION = "RecallFunction"
MAX_BODY_BYTES = 10 * 1024 * 1024  # API Gateway HTTP API's payload limit
LOCAL_ACCOUNT = "123456789012"


def http_api_event(
    method: str,
    target: str,
    headers: Iterable[tuple[str, str]],
    body: bytes = b"",
    *,
    source_ip: str = "127.0.0.1",
    claims: dict[str, Any] | None = None,
    request_id: str | None = None,
    now: dt.datetime | None = None,
) -> dict[str, Any]:
    """The event API Gateway HTTP API (format 2.0, ``$default`` route and stage) sends to Lambda."""
    split = urlsplit(target)
    path = split.path or "/"
    merged: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in headers:
        key = name.lower()
        if key == "cookie":
            cookies.extend(c.strip() for c in value.split(";") if c.strip())
        else:
            # Format 2.0 has no multi-value headers: repeats are joined with commas.
            merged[key] = f"{merged[key]},{value}" if key in merged else value
    query: dict[str, str] = {}
    for key, value in parse_qsl(split.query, keep_blank_values=True):
        query[key] = f"{query[key]},{value}" if key in query else value
    now = now or dt.datetime.now(dt.UTC)
    host = merged.get("host", "localhost")
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": split.query,
        "headers": merged,
        "requestContext": {
            "accountId": LOCAL_ACCOUNT,
            "apiId": "local",
            "domainName": host,
            "domainPrefix": host.split(".", 1)[0],
            "http": {
                "method": method.upper(),
                "path": path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": merged.get("user-agent", ""),
            },
            "requestId": request_id or uuid.uuid4().hex,
            "routeKey": "$default",
            "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "timeEpoch": int(now.timestamp() * 1000),
        },
        "isBase64Encoded": False,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = query
    if claims is not None:
        event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": None}}
    if body:
        try:
            event["body"] = body.decode("utf-8")
        except UnicodeDecodeError:
            event["body"] = base64.b64encode(body).decode("ascii")
            event["isBase64Encoded"] = True
    return event


def unverified_jwt_claims(authorization: str | None) -> dict[str, str] | None:
    """The claims of a bearer JWT, NOT verified (local testing only); None without a bearer token.

    Raises ValueError for a token that is not a JWT. Values become strings, as API Gateway
    passes them to the function.
    """
    if not authorization or not authorization.lower().startswith("bearer "):
        return None
    parts = authorization.split(" ", 1)[1].strip().split(".")
    if len(parts) != 3:
        raise ValueError("the bearer token is not a JWT (header.payload.signature)")
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except RecursionError:
        raise ValueError("the JWT payload is nested too deeply") from None
    except (ValueError, binascii.Error) as exc:
        raise ValueError("the JWT payload is not base64url JSON") from exc
    if not isinstance(payload, dict):
        raise ValueError("the JWT payload is not a JSON object")
    try:
        return event_claims(payload)
    except RecursionError:
        raise ValueError("the JWT payload is nested too deeply") from None


def event_claims(payload: dict[str, Any]) -> dict[str, str]:
    """Claims as API Gateway puts them into the event: every value a string (others as JSON)."""
    return {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in payload.items()}


class LocalApi:
    """The template's function behind a lock: one request at a time, like one Lambda container."""

    def __init__(
        self,
        template: Path,
        logical_id: str = RECALL_FUNCTION,
        *,
        unverified_jwt: bool = False,
        verifier: JwtVerifier | None = None,
    ) -> None:
        if unverified_jwt and verifier is not None:
            raise ConfigurationError("--unverified-jwt and --jwt-issuer exclude each other")
        self.spec = runtime.function_spec(template, logical_id)
        self.unverified_jwt = unverified_jwt
        self.verifier = verifier
        self._lock = threading.Lock()

    def load(self) -> None:
        """Import the handler now, so a broken handler fails at start, not on the first request."""
        runtime.load_handler(self.spec)

    def __call__(self, event: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            return runtime.invoke_spec(self.spec, event)  # type: ignore[no-any-return]


def http_answer(result: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    """An HTTP answer from what the function returned (API Gateway's format 2.0 rules)."""
    if not isinstance(result, dict) or "statusCode" not in result:
        # HTTP API infers a 200 JSON answer when the function returns anything else.
        return 200, [("Content-Type", "application/json")], json.dumps(result).encode()
    headers = [(str(k), str(v)) for k, v in (result.get("headers") or {}).items()]
    headers += [("Set-Cookie", str(c)) for c in result.get("cookies") or []]
    body = result.get("body")
    if body is None:
        data = b""
    elif result.get("isBase64Encoded"):
        data = base64.b64decode(body)
    else:
        data = str(body).encode("utf-8")
    return int(result["statusCode"]), headers, data


class _Handler(BaseHTTPRequestHandler):
    """One request of `agent-memory serve`, answered as API Gateway would (see :class:`LocalApi`)."""

    api: ClassVar[LocalApi]
    protocol_version = "HTTP/1.1"  # keep-alive, so a client reuses its connection
    # Headers and body leave in separate writes: with Nagle, a keep-alive client's delayed
    # ACK would add ~40 ms to every answer.
    disable_nagle_algorithm = True
    server_version = "agent-memory-serve"

    def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _message(self, status: int, message: str) -> None:
        self._send(status, [("Content-Type", "application/json")], json.dumps({"message": message}).encode())

    def _body(self) -> bytes | None:
        """The request's body; None when it is refused (answered here, as API Gateway would)."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            self.close_connection = True
            self._message(HTTPStatus.LENGTH_REQUIRED, "send a Content-Length (chunked bodies are not supported)")
            return None
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:  # what API Gateway answers a length that is not one
            self.close_connection = True
            self._message(HTTPStatus.BAD_REQUEST, "Content-Length is not a number of bytes")
            return None
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            self._message(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "Request Entity Too Large")
            return None
        return self.rfile.read(length) if length else b""

    def _caller(self) -> tuple[bool, dict[str, str] | None]:
        """Whether the caller may go on (else answered here, as a JWT authorizer would), and the
        token's claims for the event (None without a token, or with no token checking)."""
        if self.api.verifier is not None and urlsplit(self.path).path not in PUBLIC_PATHS:
            from agent_memory_tools.local.tokens import TokenRefused

            try:
                return True, event_claims(self.api.verifier.claims(self.headers.get("Authorization")))
            except TokenRefused as refused:
                base = f"http://{self.headers.get('Host') or 'localhost'}"
                challenge = bearer_challenge(base, error=refused.error, description=refused.description)
                headers = [("Content-Type", "application/json"), ("WWW-Authenticate", challenge)]
                self._send(HTTPStatus.UNAUTHORIZED, headers, b'{"message":"Unauthorized"}')
                self.log_message('"%s %s" 401 (%s)', self.command, self.path, refused.description)
                return False, None
        if self.api.unverified_jwt:
            try:
                return True, unverified_jwt_claims(self.headers.get("Authorization"))
            except ValueError:
                self._message(HTTPStatus.UNAUTHORIZED, "Unauthorized")  # what a JWT authorizer answers
                return False, None
        return True, None

    def _handle(self) -> None:
        started = time.perf_counter()
        body = self._body()
        if body is None:
            return
        allowed, claims = self._caller()
        if not allowed:
            return
        # As API Gateway does: the scheme the caller used (here plain HTTP), whatever a client sent.
        headers_in = [(k, v) for k, v in self.headers.items() if k.lower() != "x-forwarded-proto"]
        headers_in.append(("X-Forwarded-Proto", "http"))
        event = http_api_event(
            self.command, self.path, headers_in, body, source_ip=self.client_address[0], claims=claims
        )
        try:
            status, headers, data = http_answer(self.api(event))
        except Exception:
            # A crashed function: API Gateway answers 500 with this body.
            logger.exception("the function failed")
            status, headers = 500, [("Content-Type", "application/json")]
            data = b'{"message":"Internal Server Error"}'
        self._send(status, headers, data)
        self.log_message('"%s %s" %d %.1f ms', self.command, self.path, status, (time.perf_counter() - started) * 1000)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        pass  # logged once per request by _handle, with the time taken

    def log_message(self, format: str, *args: Any) -> None:
        logger.info("%s " + format, self.client_address[0], *args)


def _handler_class(api: LocalApi) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"api": api})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog: socketserver's default (5) refused connections when 50 clients
    # connected at once (`agent-memory bench load`); requests still run one at a time.
    request_queue_size = 128


def make_server(api: LocalApi, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A server bound to host:port (0 = any free port); call serve_forever() on it."""
    return _Server((host, port), _handler_class(api))


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def openapi_document(template: Path, logical_id: str = RECALL_FUNCTION) -> str:
    """The OpenAPI document the function's resolver (``app`` in the handler module) generates, as
    the API itself serves it at GET /openapi.json (:func:`agent_memory.http.openapi.openapi_document`)."""
    module = runtime.load_module(runtime.function_spec(template, logical_id))
    app = getattr(module, "app", None)
    if app is None or not hasattr(app, "get_openapi_json_schema"):
        raise ConfigurationError(f"{logical_id}'s handler module has no resolver named 'app'")
    return http_openapi.openapi_document(app)
