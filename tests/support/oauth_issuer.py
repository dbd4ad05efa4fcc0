"""A local OpenID Connect issuer for tests: real RSA keys generated here, real signed JWTs, and its
``/.well-known/openid-configuration`` and JWKS served over HTTP on 127.0.0.1, as Cognito or any
OIDC provider serves them to API Gateway's JWT authorizer and to ``rushmem serve --jwt-issuer``."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

AUDIENCE = "mcp-host-client"


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class LocalIssuer:
    """Serves its discovery document and key set; :meth:`token` signs tokens with its key (or, to
    test refusals, with another key, under a kid it publishes or one it does not)."""

    def __init__(self, *, advertise_pkce: bool = True, trailing_slash: bool = False) -> None:
        # Cognito's OpenID configuration does not list code_challenge_methods_supported: False plays it.
        self.advertise_pkce = advertise_pkce
        # Auth0 names itself https://tenant.auth0.com/ (with the slash), in its configuration and its tokens.
        self.trailing_slash = trailing_slash
        # How the key set answers: "json" (the keys), "slow" (the keys after jwks_delay_s), "down" (503),
        # "html" (a 200 HTML page, as a misrouted URL answers), "junk" (JSON that is no key set).
        self.jwks_mode = "json"
        self.jwks_delay_s = 0.0
        self.key = _new_key()
        self.kid = uuid.uuid4().hex
        self.other_key = _new_key()  # never published
        self.jwks_requests = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    body = issuer.discovery()
                elif self.path == "/jwks.json":
                    issuer.jwks_requests += 1
                    if issuer.jwks_mode == "slow":
                        time.sleep(issuer.jwks_delay_s)
                    if issuer.jwks_mode in ("down", "html"):
                        down = issuer.jwks_mode == "down"
                        page = b"<html><body>Service Unavailable</body></html>"
                        self.send_response(503 if down else 200)
                        self.send_header("Content-Type", "text/html")
                        self.send_header("Content-Length", str(len(page)))
                        self.end_headers()
                        self.wfile.write(page)
                        return
                    body = issuer.jwks() if issuer.jwks_mode != "junk" else {"keys": "none"}
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # The issuer identifier, exactly as the configuration and the tokens state it.
        self.issuer = self.url + ("/" if trailing_slash else "")
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def discovery(self) -> dict[str, Any]:
        document = {
            "issuer": self.issuer,
            "jwks_uri": f"{self.url}/jwks.json",
            "authorization_endpoint": f"{self.url}/oauth2/authorize",
            "token_endpoint": f"{self.url}/oauth2/token",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
        }
        if not self.advertise_pkce:
            del document["code_challenge_methods_supported"]
        return document

    def jwks(self) -> dict[str, Any]:
        public = RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**public, "kid": self.kid, "use": "sig", "alg": "RS256"}]}

    def token(
        self,
        sub: str = "user-1",
        *,
        audience: str | None = AUDIENCE,
        issuer: str | None = None,
        expires_in: float = 3600,
        key: rsa.RSAPrivateKey | None = None,
        kid: str | None = None,
        **claims: Any,
    ) -> str:
        """A signed token; the defaults make a valid one for :data:`AUDIENCE`."""
        now = int(time.time())
        payload: dict[str, Any] = {
            "sub": sub,
            "iss": issuer or self.issuer,
            "iat": now,
            "exp": now + int(expires_in),
            **claims,
        }
        if audience is not None:
            payload["aud"] = audience
        return jwt.encode(payload, key or self.key, algorithm="RS256", headers={"kid": kid or self.kid})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def issuer() -> Iterator[LocalIssuer]:
    """A local OIDC issuer on 127.0.0.1 signing real tokens, stopped after the test."""
    local = LocalIssuer()
    yield local
    local.close()
