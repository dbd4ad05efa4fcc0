"""The memory API over HTTP, synchronously (httpx.Client): :class:`MemoryClient`.

Its methods are the contract's operations, defined once for every Python door
(:mod:`rushmem_contract.methods`); this module only sends each call, with the one retry policy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from tenacity import Retrying

from rushmem_client import calls
from rushmem_client.calls import Auth, Call
from rushmem_contract.errors import ConfigurationError
from rushmem_contract.methods import Operations
from rushmem_contract.operations import Operation, page_items
from rushmem_contract.retry import Retryable

T = TypeVar("T")
R = TypeVar("R")


def check_url(api_url: str) -> str:
    split = urlsplit(api_url)
    if split.scheme not in ("http", "https") or not split.netloc:
        raise ConfigurationError(f"api_url must be an http(s) URL, not {api_url!r}")
    return api_url.rstrip("/")


class MemoryClient(Operations):
    """The rushmem HTTP API (RecallFunction behind API Gateway, or ``rushmem serve``).

    ``auth``: ``"iam"`` signs every request with SigV4 (service ``execute-api``) using the
    default AWS credential chain (needs boto3: ``rushmem-client[aws]``); ``"jwt"`` sends
    ``Authorization: Bearer <token>`` (``token`` may be a callable returning a fresh one);
    ``"none"`` sends neither. Left out, it follows the URL: a token means JWT, an execute-api
    host IAM, anything else (``rushmem serve`` on localhost) none. Every operation is
    idempotent, so connection failures, timeouts, 429 and 502-504 are retried ``retries`` times
    with backoff.
    """

    def __init__(
        self,
        api_url: str,
        *,
        auth: Auth | None = None,
        token: str | Callable[[], str] | None = None,
        region: str | None = None,
        timeout: float = 10.0,
        retries: int = 2,
        http: httpx.Client | None = None,
    ) -> None:
        self.api_url = check_url(api_url)
        self.auth = calls.infer_auth(api_url, auth, token)
        self._signer = calls.Signer(api_url, self.auth, token, region)
        self._region = self._signer.region
        self._retries = max(0, retries)
        self._http = http or httpx.Client(timeout=timeout)
        self._owns_http = http is None

    def invoke(self, op: Operation[Any, R], request: Any, **options: Any) -> R:
        """Send one operation's request; its answer as the row's response model."""
        return self._run(calls.call_for(op, request))

    def pages(self, method: Callable[..., Any], *args: Any, **fields: Any) -> Iterator[Any]:
        """Every item of a paged answer (``client.pages(client.list, user_id="u1")``: every memory),
        page after page."""
        return calls.pages(lambda cursor: page_items(method(*args, **fields, cursor=cursor)))

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- transport -------------------------------------------------------------------

    def _run(self, call: Call[T]) -> T:
        url, content = call.url(self.api_url), call.content()
        try:
            response: httpx.Response = Retrying(**calls.retry_policy(self._retries))(
                self._send, call.method, url, content
            )
        except Retryable as failed:
            raise calls.given_up(failed) from failed.__cause__
        return call.parse(response)

    def _send(self, method: str, url: str, content: bytes) -> httpx.Response:
        headers = self._signer.headers(method, url, content)
        try:
            response = self._http.request(method, url, content=content or None, headers=headers)
        except httpx.TransportError as exc:
            raise calls.unreachable(self.api_url, exc) from exc
        calls.check_answer(response, self.api_url)
        return response
