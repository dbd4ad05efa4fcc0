"""HTTP to OpenAI-compatible APIs (OpenAI, Zhipu GLM, vLLM, ...): timeouts, bounded retries, clear errors.

Only provider modules use this; nothing else in the package speaks HTTP.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_after_delay

from agent_memory.config import Settings
from agent_memory.errors import ProviderError

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 30.0


class _Retryable(Exception):
    """A failed attempt worth another try (429, 5xx, timeout, connection error)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return min(float(value), MAX_RETRY_AFTER_S)
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return min(max(parsed.timestamp() - time.time(), 0.0), MAX_RETRY_AFTER_S)


def _error_text(response: httpx.Response) -> str:
    """The provider's own error message, if it sent one (never echoes our request)."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("message") or err.get("code") or err)[:300]
        return str(err)[:300]
    return str(body)[:200]


class OpenAICompatClient:
    """POSTs JSON to ``{base_url}{path}`` with a bearer key; retries what is worth retrying."""

    def __init__(
        self,
        provider: str,
        base_url: str,
        api_key: str | None,
        *,
        timeout_s: float,
        max_retries: int,
        base_delay_s: float,
        budget_s: float,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.provider = provider
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._http = httpx.Client(
            base_url=base_url.rstrip("/") + "/", headers=headers, timeout=timeout_s, transport=transport
        )
        self._max_retries = max_retries
        self._base_delay = base_delay_s
        self._budget = budget_s

    @classmethod
    def for_settings(
        cls,
        provider: str,
        base_url: str,
        api_key: str | None,
        settings: Settings,
        transport: httpx.BaseTransport | None = None,
    ) -> OpenAICompatClient:
        """A client with the configured timeout, retries and retry budget."""
        return cls(
            provider,
            base_url,
            api_key,
            timeout_s=settings.http_timeout_s,
            max_retries=settings.max_retries,
            base_delay_s=settings.retry_base_delay_s,
            budget_s=settings.retry_budget_s,
            transport=transport,
        )

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, _Retryable) and exc.retry_after is not None:
            return exc.retry_after
        return float(self._base_delay * 2 ** (state.attempt_number - 1))

    def post_json(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        retrying = Retrying(
            stop=stop_after_attempt(self._max_retries + 1) | stop_after_delay(self._budget),
            wait=self._wait,
            retry=retry_if_exception(lambda e: isinstance(e, _Retryable)),
            reraise=True,
        )
        try:
            result: dict[str, Any] = retrying(self._post_once, path.lstrip("/"), payload)
        except _Retryable as exc:
            raise ProviderError(self.provider, f"gave up after retries: {exc}", retryable=True) from exc
        return result

    def _post_once(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self._http.post(path, json=payload)
        except httpx.TimeoutException as exc:
            raise _Retryable(f"timed out calling {self._http.base_url}{path}") from exc
        except httpx.TransportError as exc:
            raise _Retryable(f"cannot reach {self._http.base_url}{path}: {exc}") from exc
        if response.status_code in RETRYABLE_STATUS:
            raise _Retryable(
                f"HTTP {response.status_code} from {path}: {_error_text(response)}", _retry_after(response)
            )
        if response.status_code >= 400:
            raise ProviderError(self.provider, f"HTTP {response.status_code} from {path}: {_error_text(response)}")
        try:
            body = response.json()
        except ValueError as exc:
            raise ProviderError(self.provider, f"{path} returned a body that is not JSON") from exc
        if not isinstance(body, dict):
            raise ProviderError(self.provider, f"{path} returned JSON that is not an object")
        return body

    def close(self) -> None:
        self._http.close()
