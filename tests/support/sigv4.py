"""An independent SigV4 verifier, written from AWS's Signature Version 4 specification (not botocore,
which signs), for tests that stand where API Gateway's AWS_IAM authorizer would."""

from __future__ import annotations

import hashlib
import hmac
import re
from urllib.parse import parse_qsl, quote, urlsplit

ACCESS_KEY, SECRET_KEY, SESSION_TOKEN = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "session-token"
REGION = "eu-west-1"
_AUTHORIZATION = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request, "
    r"SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<signature>[0-9a-f]{64})"
)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def verify(
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes,
    secret: str = SECRET_KEY,
    *,
    identity_signed: bool = True,
) -> str | None:
    """None if the request carries a valid SigV4 signature that covers host (and X-Memory-User, with
    ``identity_signed``: MCP requests name the user in it); else why not. ``headers`` keys in lower case."""
    match = _AUTHORIZATION.fullmatch(headers.get("authorization", ""))
    if not match:
        return "no SigV4 authorization header"
    signed = match["signed"].split(";")
    if "host" not in signed or (identity_signed and "x-memory-user" not in signed):
        return f"host and x-memory-user must be signed, not only {signed}"
    amz_date = headers.get("x-amz-date", "")
    if not amz_date.startswith(match["date"]):
        return "x-amz-date is not the credential's date"
    split = urlsplit(url)
    query = sorted(parse_qsl(split.query, keep_blank_values=True))
    canonical = "\n".join(
        [
            method,
            quote(split.path or "/", safe="/~"),
            "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in query),
            "".join(f"{name}:{' '.join(headers.get(name, '').split())}\n" for name in signed),
            ";".join(signed),
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{match['date']}/{match['region']}/{match['service']}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = f"AWS4{secret}".encode()
    for part in (match["date"], match["region"], match["service"], "aws4_request"):
        key = _hmac(key, part)
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return None if hmac.compare_digest(expected, match["signature"]) else "signature mismatch"


class SigV4Gateway:
    """An HTTP server on 127.0.0.1 that does what API Gateway's AWS_IAM authorizer does before the
    function: a request whose signature does not hold gets 403, the others go on to ``upstream``
    (`rushmem serve`). MCP requests (``/mcp``) must also sign X-Memory-User."""

    def __init__(self, upstream: str) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import httpx

        self.refused: list[str] = []
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _relay(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                url = f"http://{headers.get('host', '')}{self.path}"
                problem = verify(self.command, url, headers, body, identity_signed=self.path.startswith("/mcp"))
                if problem:
                    gateway.refused.append(problem)
                    status, out, data = 403, {"content-type": "application/json"}, b'{"message":"Forbidden"}'
                else:
                    passed = {k: v for k, v in headers.items() if k not in ("host", "content-length", "connection")}
                    answer = httpx.request(self.command, upstream + self.path, headers=passed, content=body, timeout=60)
                    status, data = answer.status_code, answer.content
                    out = {k: v for k, v in answer.headers.items() if k in ("content-type", "www-authenticate")}
                self.send_response(status)
                for name, value in out.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = _relay

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
