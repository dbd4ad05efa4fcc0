"""Bearer tokens verified as API Gateway's JWT authorizer verifies them, for ``agent-memory serve --jwt-issuer``.

The authorizer (template.yaml, ``JwtAuthorizer``) finds the issuer's keys through
``{issuer}/.well-known/openid-configuration``'s ``jwks_uri`` and accepts a token when its signature
verifies with the key its ``kid`` names (RSA), ``iss`` is the issuer, ``aud`` (or, for access
tokens without one, such as Cognito's, ``client_id``) is one of the audiences, and ``exp``/``nbf``
hold. This module does the same with PyJWT (``jwt.PyJWKClient`` fetches and caches the key set and
fetches it again for a ``kid`` it does not know, as keys rotate, at most every 30 s). The claims then reach the function
as the authorizer hands them over: ``sub`` becomes the user (:mod:`agent_memory.http.identity`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import httpx
import jwt

from agent_memory_contract.errors import ConfigurationError

logger = logging.getLogger("agent_memory.serve")

# What API Gateway's JWT authorizer supports: RSA signatures only.
ALGORITHMS = ("RS256", "RS384", "RS512")
# Clocks of the issuer and this machine may differ a little.
LEEWAY_S = 30
JWKS_LIFESPAN_S = 300
# An unknown kid fetches the key set again (a rotated key), at most this often: tokens with made-up
# kids must not turn every request into a request to the issuer.
REFRESH_COOLDOWN_S = 30.0


class TokenRefused(Exception):
    """Why a request gets 401: ``error`` is RFC 6750's code (None when no token was sent at all)."""

    def __init__(self, description: str, *, error: str | None = "invalid_token") -> None:
        super().__init__(description)
        self.description = description
        self.error = error


class JwtVerifier:
    """Verifies bearer tokens from ``issuer`` for any of ``audiences``."""

    def __init__(
        self,
        issuer: str,
        audiences: Iterable[str],
        *,
        timeout_s: float = 10.0,
        refresh_cooldown_s: float = REFRESH_COOLDOWN_S,
    ) -> None:
        self.refresh_cooldown_s = refresh_cooldown_s
        self.issuer = issuer.rstrip("/")
        self.audiences = frozenset(a for a in audiences if a)
        if not self.audiences:
            raise ConfigurationError("a JWT issuer needs at least one audience (--jwt-audience)")
        self.timeout_s = timeout_s
        self._jwks: jwt.PyJWKClient | None = None
        self.configuration: dict[str, Any] = {}  # the issuer's OpenID configuration, once discovered

    def discover(self) -> jwt.PyJWKClient:
        """The issuer's key set, found through its OpenID configuration; fetched once at start so a
        wrong issuer fails ``serve`` at once (ConfigurationError), not every request."""
        if self._jwks is not None:
            return self._jwks
        url = f"{self.issuer}/.well-known/openid-configuration"
        try:
            answer = httpx.get(url, timeout=self.timeout_s, follow_redirects=False)
            answer.raise_for_status()
            document = answer.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise ConfigurationError(f"cannot read the issuer's OpenID configuration at {url}: {exc}") from exc
        if not isinstance(document, dict) or not isinstance(document.get("jwks_uri"), str):
            raise ConfigurationError(f"the OpenID configuration at {url} names no jwks_uri")
        if str(document.get("issuer", "")).rstrip("/") != self.issuer:
            # OpenID Connect Discovery 1.0, section 4.3: the document must be the issuer's own.
            raise ConfigurationError(
                f"the OpenID configuration at {url} is for issuer {document.get('issuer')!r}, not {self.issuer!r}"
            )
        client = jwt.PyJWKClient(
            document["jwks_uri"],
            lifespan=JWKS_LIFESPAN_S,
            timeout=self.timeout_s,
            cooldown_duration=self.refresh_cooldown_s,
        )
        try:
            client.get_jwk_set()
        except jwt.PyJWKClientError as exc:
            raise ConfigurationError(f"cannot read the issuer's keys at {document['jwks_uri']}: {exc}") from exc
        self.configuration = document
        self._jwks = client
        return client

    def facade_endpoints(self) -> tuple[str, str] | None:
        """The issuer's sign-in and token endpoints when its metadata does not advertise S256 PKCE
        (Cognito's does not): then this server serves metadata that does, as the stack does."""
        config = self.configuration
        if "S256" in (config.get("code_challenge_methods_supported") or []):
            return None
        authorize, token = config.get("authorization_endpoint"), config.get("token_endpoint")
        return (authorize, token) if isinstance(authorize, str) and isinstance(token, str) else None

    def claims(self, authorization: str | None) -> dict[str, Any]:
        """The verified claims of an ``Authorization: Bearer`` header.

        Raises :class:`TokenRefused` (error None without a bearer token) with the reason, which the
        401's ``WWW-Authenticate`` carries; the token itself is never logged.
        """
        if not authorization or not authorization[:7].lower() == "bearer ":
            raise TokenRefused("a bearer token is required", error=None)
        token = authorization[7:].strip()
        jwks = self.discover()
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as exc:
            raise TokenRefused(f"the token is not a JWT: {exc}") from None
        if header.get("alg") not in ALGORITHMS:
            raise TokenRefused(f"the token's algorithm {header.get('alg')!r} is not one of {', '.join(ALGORITHMS)}")
        try:
            key = jwks.get_signing_key_from_jwt(token)
        except jwt.PyJWKClientConnectionError as exc:
            logger.warning("cannot fetch the issuer's keys: %s", exc)
            raise TokenRefused("the issuer's keys could not be fetched") from None
        except (jwt.PyJWKClientError, jwt.InvalidTokenError):
            raise TokenRefused("the token's key (kid) is not in the issuer's key set") from None
        try:
            payload: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=list(ALGORITHMS),
                issuer=self.issuer,
                leeway=LEEWAY_S,
                options={"require": ["exp", "iss"], "verify_aud": False},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRefused("the token has expired") from None
        except jwt.InvalidIssuerError:
            raise TokenRefused("the token is from another issuer") from None
        except jwt.InvalidSignatureError:
            raise TokenRefused("the token's signature does not verify") from None
        except jwt.InvalidTokenError as exc:
            raise TokenRefused(f"the token is not valid: {exc}") from None
        if not self._audience_matches(payload):
            raise TokenRefused("the token is for another audience")
        return payload

    def _audience_matches(self, payload: Mapping[str, Any]) -> bool:
        # API Gateway: "aud" when the token has one, else "client_id" (Cognito's access tokens).
        aud = payload.get("aud")
        if aud is None:
            aud = payload.get("client_id")
        values = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        return any(isinstance(v, str) and v in self.audiences for v in values)
