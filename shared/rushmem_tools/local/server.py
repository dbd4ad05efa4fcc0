"""The HTTP API on localhost without Docker or AWS (``rushmem serve``), and its OpenAPI document.

Each HTTP request becomes an API Gateway HTTP API (payload format 2.0) event and goes to the
template's RecallFunction handler through :mod:`rushmem_tools.local.runtime`, exactly as
``rushmem invoke`` runs it; the handler's statusCode/headers/body become the HTTP answer.
Requests are handled one at a time, like one warm Lambda container.

Of what API Gateway does before the function, the IAM signature check is not done here: by default
every caller is treated as a trusted backend (user_id required). What stands in for it against the
one caller a developer's machine always has, the web browser, is :class:`BrowserGuard`: no Host but
a loopback name (DNS rebinding), no Origin but the server's own, nothing a browser marks as sent by
another site (CSRF); and the handler takes no state-changing request without a JSON content type.

With ``--jwt-issuer`` (a :class:`JwtVerifier`)
every request but the OAuth metadata needs a bearer token that verifies against the issuer's keys, as
the stack's JWT authorizer demands, and a refusal is a 401 whose ``WWW-Authenticate`` names the
metadata (the MCP authorization specification). ``--unverified-jwt`` passes a JWT's claims on
unverified (local testing of the JWT path only).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import datetime as dt
import ipaddress
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import parse_qsl, urlsplit

from rushmem.http import openapi as http_openapi
from rushmem.http.oauth import MCP_PATH, PUBLIC_PATHS, bearer_challenge
from rushmem_contract.errors import ConfigurationError
from rushmem_contract.models import LAMBDA_RESPONSE_BYTES
from rushmem_contract.retry import RETRY_AFTER_S
from rushmem_tools.local import runtime

if TYPE_CHECKING:
    from rushmem_tools.local.tokens import JwtVerifier

logger = logging.getLogger("rushmem.serve")

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


def authority(value: str) -> tuple[str, int | None] | None:
    """(host name, port) of a Host header or an Origin's authority: lower case, IPv6 without
    brackets, no final dot; None when it is not one."""
    if not value or any(c in value for c in "/?#@\\ \t"):
        return None
    try:
        split = urlsplit("//" + value)
        port = split.port
    except ValueError:
        return None
    name = (split.hostname or "").rstrip(".")
    return (name, port) if name else None


def is_loopback_name(name: str) -> bool:
    """Whether ``name`` (a host name or an address) is this machine only: localhost, 127.0.0.0/8, ::1."""
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclasses.dataclass(frozen=True)
class BrowserGuard:
    """What serve refuses before the function runs, because a browser could send it for a page of
    another site (the MCP transport specification's security warning: validate Origin, bind to
    localhost).

    - A ``Host`` that is not a loopback name (``localhost``, 127.0.0.0/8, ::1), the address the
      server is bound to, or one of ``hosts`` (``--allow-host``; ``*``: any): 421. A page whose own
      name was re-pointed at 127.0.0.1 (DNS rebinding) sends its name here.
    - An ``Origin`` that is neither this server's own (``http://`` and the Host) nor one of
      ``origins`` (``--allow-origin``, e.g. ``https://memory.example.com`` behind a TLS proxy): 403.
      ``Origin: null`` (a sandboxed frame, a file) is no origin of ours either.
    - ``Sec-Fetch-Site`` other than ``same-origin`` or ``none`` (the browser says another site, or
      another port of this one, made the request): 403, unless its Origin is allowed or it is the
      user following a link (a GET navigation), which shows the page and gives the other site nothing.
    """

    hosts: frozenset[str] = frozenset()
    origins: frozenset[str] = frozenset()

    @classmethod
    def for_bind(cls, bind: str, hosts: Iterable[str] = (), origins: Iterable[str] = ()) -> BrowserGuard:
        names = {h.strip().lower().rstrip(".").strip("[]") for h in hosts if h.strip()}
        # The bound address (or name) is what the printed URL names: 0.0.0.0 too, which reaches this machine.
        bound = bind.strip().lower().strip("[]").rstrip(".")
        with contextlib.suppress(ValueError):  # a host name is kept as given
            bound = str(ipaddress.ip_address(bound))
        if bound:
            names.add(bound)
        return cls(frozenset(names), frozenset(o.strip().lower().rstrip("/") for o in origins if o.strip()))

    def host_allowed(self, host: str | None) -> bool:
        found = authority(host or "")
        if found is None:
            return False
        name = found[0]
        if "*" in self.hosts or is_loopback_name(name) or name in self.hosts:
            return True
        try:  # an IPv6 address in its shortest form, as for_bind keeps it
            return str(ipaddress.ip_address(name)) in self.hosts
        except ValueError:
            return False

    def refusal(self, method: str, headers: Mapping[str, str]) -> tuple[int, str] | None:
        """(status, why) for a request to refuse, None to serve it (``headers`` keys in lower case)."""
        host = headers.get("host")
        if not self.host_allowed(host):
            return HTTPStatus.MISDIRECTED_REQUEST, (
                "this server answers only to a loopback host name (localhost, 127.0.0.1, [::1]); "
                "serve --allow-host NAME adds one"
            )
        origin = headers.get("origin")
        allowed_origin = origin is not None and origin.strip().lower().rstrip("/") in self.origins
        if origin is not None and not allowed_origin and not self._same_origin(origin, host or ""):
            return HTTPStatus.FORBIDDEN, "requests from another origin are refused (serve --allow-origin adds one)"
        site = (headers.get("sec-fetch-site") or "").strip().lower()
        if site and site not in ("same-origin", "none") and not allowed_origin:
            navigation = method.upper() in ("GET", "HEAD") and headers.get("sec-fetch-mode", "").lower() == "navigate"
            if not navigation:
                return HTTPStatus.FORBIDDEN, f"the browser marks this request {site}: refused"
        return None

    @staticmethod
    def _same_origin(origin: str, host: str) -> bool:
        scheme, _, rest = origin.strip().lower().partition("://")
        mine, theirs = authority(host.lower()), authority(rest)
        if scheme != "http" or mine is None or theirs is None:
            return False
        return mine[0] == theirs[0] and (mine[1] or 80) == (theirs[1] or 80)


class _Handler(BaseHTTPRequestHandler):
    """One request of `rushmem serve`, answered as API Gateway would (see :class:`LocalApi`)."""

    api: ClassVar[LocalApi]
    guard: ClassVar[BrowserGuard]
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

    def _refuse(self, status: int, why: str) -> None:
        if urlsplit(self.path).path == MCP_PATH:
            # The MCP transport: a JSON-RPC error response without an id.
            error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": why}}
            self._send(status, [("Content-Type", "application/json")], json.dumps(error).encode())
        else:
            self._message(status, why)

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
            from rushmem_tools.local.tokens import IssuerUnavailable, TokenRefused

            try:
                return True, event_claims(self.api.verifier.claims(self.headers.get("Authorization")))
            except IssuerUnavailable as exc:
                # Neither accepted nor refused: the keys to check the token with cannot be read now.
                headers = [("Content-Type", "application/json"), ("Retry-After", str(RETRY_AFTER_S))]
                self._send(HTTPStatus.SERVICE_UNAVAILABLE, headers, b'{"message":"Service Unavailable"}')
                self.log_message('"%s %s" 503 (%s)', self.command, self.path, exc)
                return False, None
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
        refusal = self.guard.refusal(self.command, {k.lower(): v for k, v in self.headers.items()})
        if refusal is not None:
            status, why = refusal
            self._refuse(status, why)
            self.log_message('"%s %s" %d (%s)', self.command, self.path, status, why)
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
            result = self.api(event)
            if len(json.dumps(result)) > LAMBDA_RESPONSE_BYTES:
                # Lambda refuses the invocation (Function.ResponseSizeTooLarge) and API Gateway
                # answers 502: serve keeps the same limit, so tests meet it.
                logger.error("the function's answer is over Lambda's 6 MB response limit")
                self._message(HTTPStatus.BAD_GATEWAY, "Internal Server Error")
                return
            status, headers, data = http_answer(result)
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


def _handler_class(api: LocalApi, guard: BrowserGuard) -> type[BaseHTTPRequestHandler]:
    return type("Handler", (_Handler,), {"api": api, "guard": guard})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog: socketserver's default (5) refused connections when 50 clients
    # connected at once (`rushmem bench load`); requests still run one at a time.
    request_queue_size = 128


def make_server(
    api: LocalApi,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    allowed_hosts: Iterable[str] = (),
    allowed_origins: Iterable[str] = (),
) -> ThreadingHTTPServer:
    """A server bound to host:port (0 = any free port); call serve_forever() on it. It answers to
    loopback host names, the bound address and ``allowed_hosts``, and to its own origin and
    ``allowed_origins`` (:class:`BrowserGuard`)."""
    guard = BrowserGuard.for_bind(host, allowed_hosts, allowed_origins)
    return _Server((host, port), _handler_class(api, guard))


def openapi_document(template: Path, logical_id: str = RECALL_FUNCTION) -> str:
    """The OpenAPI document the function's resolver (``app`` in the handler module) generates, as
    the API itself serves it at GET /openapi.json (:func:`rushmem.http.openapi.openapi_document`)."""
    module = runtime.load_module(runtime.function_spec(template, logical_id))
    app = getattr(module, "app", None)
    if app is None or not hasattr(app, "get_openapi_json_schema"):
        raise ConfigurationError(f"{logical_id}'s handler module has no resolver named 'app'")
    return http_openapi.openapi_document(app)
