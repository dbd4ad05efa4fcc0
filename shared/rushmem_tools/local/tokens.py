"""Bearer tokens verified as API Gateway's JWT authorizer verifies them, for ``rushmem serve --jwt-issuer``.

The authorizer (template.yaml, ``JwtAuthorizer``) finds the issuer's keys through
``{issuer}/.well-known/openid-configuration``'s ``jwks_uri`` and accepts a token when its signature
verifies with the key its ``kid`` names (RSA), ``iss`` is the issuer, ``aud`` (or, for access
tokens without one, such as Cognito's, ``client_id``) is one of the audiences, and ``exp``/``nbf``
hold. This module does the same with PyJWT: it decodes and verifies the token, and its
``PyJWKClient`` fetches and parses the key set. The keys are cached here (:class:`KeySet`), not by
``PyJWKClient``, whose cache holds one lock across the fetch (a slow key set made every request
wait behind one unknown ``kid``), starts its cooldown only after a fetch that worked (a key set
that is down was fetched again for every unknown ``kid``) and lets a key set that is not JSON
escape as an error no request answers.

The claims then reach the function as the authorizer hands them over: ``sub`` becomes the user
(:mod:`rushmem.http.identity`). Every refusal is a :class:`TokenRefused` (401), and a token
that cannot be checked because the issuer's keys cannot be read is :class:`IssuerUnavailable` (503).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import httpx
import jwt

from rushmem_contract.errors import ConfigurationError

logger = logging.getLogger("rushmem.serve")

# What API Gateway's JWT authorizer supports: RSA signatures only.
ALGORITHMS = ("RS256", "RS384", "RS512")
# Clocks of the issuer and this machine may differ a little.
LEEWAY_S = 30
# A key set older than this is fetched again, in the background: requests keep the keys they have.
JWKS_LIFESPAN_S = 300.0
# At most one fetch of the key set per interval, whatever asks for it (an unknown kid, the lifespan),
# and whether the last one worked or not: tokens with made-up kids never become requests to the issuer.
REFRESH_COOLDOWN_S = 30.0
# One fetch of the key set: to connect, and between two reads.
JWKS_TIMEOUT_S = 3.0
# The most a request with a kid the keys do not hold waits for the fetch that may bring it; nothing
# else ever waits for a fetch.
KEY_WAIT_S = 3.0
# Far beyond any real token (Cognito's are ~1 KB, Entra ID's with groups ~5 KB).
MAX_TOKEN_CHARS = 16_384
# The issuer's OpenID configuration is read once, at start: a wrong issuer stops serve there.
DISCOVERY_TIMEOUT_S = 10.0


class TokenRefused(Exception):
    """Why a request gets 401: ``error`` is RFC 6750's code (None when no token was sent at all)."""

    def __init__(self, description: str, *, error: str | None = "invalid_token") -> None:
        super().__init__(description)
        self.description = description
        self.error = error


class IssuerUnavailable(Exception):
    """The issuer's keys cannot be read now (unreachable, too slow, or not a key set): the token can
    be neither accepted nor refused, so the request gets 503 and is worth sending again later."""


@dataclasses.dataclass
class _Fetch:
    """One fetch of the key set in flight; ``done`` is set when it ended, whatever its outcome."""

    done: threading.Event = dataclasses.field(default_factory=threading.Event)


class KeySet:
    """The issuer's signing keys by ``kid``.

    A lookup never waits for the network when the keys hold its ``kid``: it reads the current
    dictionary, which a fetch replaces whole. A fetch runs on its own thread, one at a time
    (single flight), and a new one starts only ``interval_s`` after the last one ended (however many
    unknown kids arrive, and also when the issuer is down); a request whose ``kid`` is unknown waits
    for the fetch in flight at most ``wait_s``. Keys stay in use when a later fetch fails: a token
    the issuer signed before its key set became unreachable still verifies until it expires.
    """

    def __init__(
        self,
        uri: str,
        *,
        timeout_s: float = JWKS_TIMEOUT_S,
        interval_s: float = REFRESH_COOLDOWN_S,
        lifespan_s: float = JWKS_LIFESPAN_S,
        wait_s: float = KEY_WAIT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        try:
            # The library fetches (http and https only, no redirects) and parses; nothing is cached there.
            self._client = jwt.PyJWKClient(uri, cache_jwk_set=False, timeout=timeout_s)
        except jwt.PyJWKClientError as exc:
            raise ConfigurationError(f"the issuer's jwks_uri {uri!r} cannot be used: {exc}") from exc
        self.uri = uri
        self.interval_s = interval_s
        self.lifespan_s = lifespan_s
        self.wait_s = wait_s
        self._clock = clock
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self._failure: str | None = None
        self._inflight: _Fetch | None = None
        self._lock = threading.Lock()  # guards the fields above; never held across the network
        self.fetches = 0

    def load(self) -> None:
        """The first fetch, waited for (serve's start): ConfigurationError when it fails."""
        fetch = self._start(force=True)
        assert fetch is not None
        fetch.done.wait()
        if self._failure is not None:
            raise ConfigurationError(f"cannot read the issuer's keys at {self.uri}: {self._failure}")

    def key(self, kid: str) -> jwt.PyJWK:
        """The key ``kid`` names; TokenRefused when the issuer's key set does not hold it,
        IssuerUnavailable when the key set cannot be read to find out."""
        found = self._keys.get(kid)
        if found is not None:
            fetched = self._fetched_at
            if fetched is None or self._clock() - fetched >= self.lifespan_s:
                self._start()  # in the background: this request goes on with the key it has
            return found
        fetch = self._start()
        if fetch is None:  # a fetch was tried within the interval: its outcome stands
            if self._failure is not None:
                raise IssuerUnavailable(f"the issuer's keys could not be read: {self._failure}")
            raise TokenRefused("the token's key (kid) is not in the issuer's key set")
        fetch.done.wait(self.wait_s)
        found = self._keys.get(kid)
        if found is not None:
            return found
        if not fetch.done.is_set():
            raise IssuerUnavailable(f"the issuer's keys did not arrive within {self.wait_s:g} s")
        if self._failure is not None:
            raise IssuerUnavailable(f"the issuer's keys could not be read: {self._failure}")
        raise TokenRefused("the token's key (kid) is not in the issuer's key set")

    def _start(self, *, force: bool = False) -> _Fetch | None:
        """The fetch in flight, or a new one when the interval allows it; None otherwise."""
        with self._lock:
            if self._inflight is not None:
                return self._inflight
            now = self._clock()
            if not force and self._attempted_at is not None and now - self._attempted_at < self.interval_s:
                return None
            self._attempted_at = now
            fetch = self._inflight = _Fetch()
            self.fetches += 1
        threading.Thread(target=self._fetch, args=(fetch,), name="jwks-fetch", daemon=True).start()
        return fetch

    def _fetch(self, fetch: _Fetch) -> None:
        try:
            keys = self._download()
        except Exception as exc:  # whatever went wrong, the outcome is recorded and waiters released
            with self._lock:
                self._failure = _describe(exc)
            logger.warning("cannot read the issuer's keys at %s: %s", self.uri, self._failure)
        else:
            with self._lock:
                self._keys = keys
                self._fetched_at = self._clock()
                self._failure = None
        finally:
            with self._lock:
                self._inflight = None
                # The interval runs from the end of a fetch: a slow key set is not asked again at once.
                self._attempted_at = self._clock()
            fetch.done.set()

    def _download(self) -> dict[str, jwt.PyJWK]:
        jwk_set = self._client.get_jwk_set()
        keys = {
            key.key_id: key
            for key in jwk_set.keys
            if isinstance(key.key_id, str) and key.key_id and key.public_key_use in ("sig", None)
        }
        if not keys:
            raise jwt.PyJWKClientError("the key set holds no signing key with a kid")
        return keys


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ValueError | RecursionError) and not isinstance(exc, jwt.PyJWTError):
        return "the answer is not a JSON key set"  # json.load's error: an HTML page, a truncated body
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def _header(token: str) -> dict[str, Any]:
    try:
        header = jwt.get_unverified_header(token)
    except (jwt.PyJWTError, ValueError, TypeError, RecursionError):
        raise TokenRefused("the token is not a JWT (header.payload.signature, base64url JSON)") from None
    if not isinstance(header, dict):
        raise TokenRefused("the token's header is not a JSON object")
    return header


class JwtVerifier:
    """Verifies bearer tokens from ``issuer`` for any of ``audiences``.

    The issuer is the identifier its OpenID configuration states, compared as a string (OpenID
    Connect Discovery 1.0, section 4.3): ``https://tenant.auth0.com/`` keeps its slash in every
    comparison with a token's ``iss`` and in the metadata. It may be given without that slash; the
    configuration is looked up the same way either way (its path without the final slash).
    """

    def __init__(
        self,
        issuer: str,
        audiences: Iterable[str],
        *,
        timeout_s: float = DISCOVERY_TIMEOUT_S,
        refresh_cooldown_s: float = REFRESH_COOLDOWN_S,
        jwks_timeout_s: float = JWKS_TIMEOUT_S,
        key_wait_s: float = KEY_WAIT_S,
    ) -> None:
        self.refresh_cooldown_s = refresh_cooldown_s
        self.issuer = issuer.strip()
        self.audiences = frozenset(a for a in audiences if a)
        if not self.audiences:
            raise ConfigurationError("a JWT issuer needs at least one audience (--jwt-audience)")
        self.timeout_s = timeout_s
        self.jwks_timeout_s = jwks_timeout_s
        self.key_wait_s = key_wait_s
        self.keys: KeySet | None = None
        self._discovering = threading.Lock()
        self.configuration: dict[str, Any] = {}  # the issuer's OpenID configuration, once discovered

    def discover(self) -> KeySet:
        """The issuer's key set, found through its OpenID configuration; fetched once at start so a
        wrong issuer fails ``serve`` at once (ConfigurationError), not every request."""
        if self.keys is not None:
            return self.keys
        with self._discovering:
            if self.keys is None:
                self.keys = self._discover()
        return self.keys

    def _discover(self) -> KeySet:
        url = f"{self.issuer.rstrip('/')}/.well-known/openid-configuration"
        try:
            answer = httpx.get(url, timeout=self.timeout_s, follow_redirects=False)
            answer.raise_for_status()
            document = answer.json()
        except (httpx.HTTPError, ValueError, RecursionError) as exc:
            raise ConfigurationError(f"cannot read the issuer's OpenID configuration at {url}: {exc}") from exc
        if not isinstance(document, dict) or not isinstance(document.get("jwks_uri"), str):
            raise ConfigurationError(f"the OpenID configuration at {url} names no jwks_uri")
        stated = document.get("issuer")
        # OpenID Connect Discovery 1.0, section 4.3: the document must be the issuer's own. A final
        # slash left off on the command line is the only difference forgiven; the stated one is used.
        if not isinstance(stated, str) or stated.rstrip("/") != self.issuer.rstrip("/"):
            raise ConfigurationError(f"the OpenID configuration at {url} is for issuer {stated!r}, not {self.issuer!r}")
        keys = KeySet(
            document["jwks_uri"],
            timeout_s=self.jwks_timeout_s,
            interval_s=self.refresh_cooldown_s,
            wait_s=self.key_wait_s,
        )
        keys.load()
        self.issuer = stated
        self.configuration = document
        return keys

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
        401's ``WWW-Authenticate`` carries (never the token, nor text taken from it), or
        :class:`IssuerUnavailable` when the issuer's keys cannot be read.
        """
        if not authorization or not authorization[:7].lower() == "bearer ":
            raise TokenRefused("a bearer token is required", error=None)
        token = authorization[7:].strip()
        if len(token) > MAX_TOKEN_CHARS:
            raise TokenRefused(f"the token is longer than {MAX_TOKEN_CHARS} characters")
        try:
            keys = self.discover()
        except ConfigurationError as exc:
            raise IssuerUnavailable(str(exc)) from None
        header = _header(token)
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in ALGORITHMS:
            raise TokenRefused(f"the token's algorithm is not one of {', '.join(ALGORITHMS)}")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise TokenRefused("the token names no key (kid)")
        key = keys.key(kid)
        try:
            payload: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[alg],
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
            raise TokenRefused(f"the token is not valid: {' '.join(str(exc).split())[:200]}") from None
        except (jwt.PyJWTError, ValueError, TypeError, RecursionError):
            # A key that cannot verify this algorithm, a payload no JSON decoder reads.
            raise TokenRefused("the token cannot be verified with the issuer's key") from None
        if not isinstance(payload, dict):
            raise TokenRefused("the token's payload is not a JSON object")
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
