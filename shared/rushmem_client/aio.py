"""The memory API over HTTP, asynchronously (httpx.AsyncClient): :class:`AsyncMemoryClient`, with
the methods of :class:`rushmem_client.MemoryClient` (one definition: :mod:`rushmem_contract.methods`),
awaited."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import httpx
from tenacity import AsyncRetrying

from rushmem_client import calls
from rushmem_client.calls import Auth, Call
from rushmem_client.http import check_url
from rushmem_contract.methods import Operations
from rushmem_contract.operations import Operation, page_items
from rushmem_contract.retry import Retryable

T = TypeVar("T")
R = TypeVar("R")


class AsyncMemoryClient(Operations):
    """:class:`rushmem_client.MemoryClient` for asyncio: the same arguments, methods and
    errors, awaited (``pages`` is an async iterator)."""

    def __init__(
        self,
        api_url: str,
        *,
        auth: Auth | None = None,
        token: str | Callable[[], str] | None = None,
        region: str | None = None,
        timeout: float = 10.0,
        retries: int = 2,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.api_url = check_url(api_url)
        self.auth = calls.infer_auth(api_url, auth, token)
        self._signer = calls.Signer(api_url, self.auth, token, region)
        self._retries = max(0, retries)
        self._http = http or httpx.AsyncClient(timeout=timeout)
        self._owns_http = http is None

    def invoke(self, op: Operation[Any, R], request: Any, **options: Any) -> Awaitable[R]:
        """Send one operation's request; awaited, its answer as the row's response model."""
        return self._run(calls.call_for(op, request))

    async def pages(self, method: Callable[..., Awaitable[Any]], *args: Any, **fields: Any) -> AsyncIterator[Any]:
        """Every item of a paged answer (``client.pages(client.list, user_id="u1")``), page after page."""
        cursor: str | None = None
        while True:
            items, cursor = page_items(await method(*args, **fields, cursor=cursor))
            for item in items:
                yield item
            if cursor is None:
                return

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self, call: Call[T]) -> T:
        url, content = call.url(self.api_url), call.content()
        try:
            response: httpx.Response = await AsyncRetrying(**calls.retry_policy(self._retries))(
                self._send, call.method, url, content
            )
        except Retryable as failed:
            raise calls.given_up(failed) from failed.__cause__
        return call.parse(response)

    async def _send(self, method: str, url: str, content: bytes) -> httpx.Response:
        headers = self._signer.headers(method, url, content)
        try:
            response = await self._http.request(method, url, content=content or None, headers=headers)
        except httpx.TransportError as exc:
            raise calls.unreachable(self.api_url, exc) from exc
        calls.check_answer(response, self.api_url)
        return response
