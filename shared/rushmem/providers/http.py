"""HTTP to OpenAI-compatible APIs (OpenAI, Zhipu GLM, vLLM, ...): timeouts, bounded retries, clear errors.

Only provider modules use this; nothing else in the package speaks HTTP.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from rushmem.config import Settings
from rushmem.providers.retry import Retryable, RetryPolicy, parse_retry_after
from rushmem_contract.errors import ConfigurationError, ProviderError
from rushmem_contract.retry import PROVIDER_RETRY_STATUSES


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


def on_this_machine(base_url: str) -> bool:
    """Whether ``base_url`` names this machine (localhost or a loopback address)."""
    host = urlsplit(base_url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class EndpointSettings:
    """The settings that configure one endpoint, named by the configuration errors: what a person
    sets when the URL is no URL, the key is missing or refused, or the model is unknown."""

    url: str = "RUSHMEM_OPENAI_BASE_URL (or OPENAI_BASE_URL)"
    key: str = "RUSHMEM_OPENAI_API_KEY (or OPENAI_API_KEY)"
    model: str = "RUSHMEM_EMBEDDING_MODEL"


# What an endpoint answers to a request it cannot serve as configured: a key it refuses (401, 403),
# or a model or path it does not have (404; OpenAI's unknown model is a 404 model_not_found).
_REFUSED_KEY = frozenset({401, 403})
_UNKNOWN_MODEL = 404


def _check_url(provider: str, base_url: str, names: EndpointSettings) -> None:
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"{provider}: {base_url!r} is not an http(s) URL: set {names.url}")


class OpenAICompatClient:
    """POSTs JSON to ``{base_url}{path}`` with a bearer key; retries what is worth retrying
    (see :mod:`.retry`). Errors name the provider and the payload's model; a refused key or an
    unknown model is a :class:`ConfigurationError` naming the setting to fix."""

    def __init__(
        self,
        provider: str,
        base_url: str,
        api_key: str | None,
        *,
        timeout_s: float,
        retry: RetryPolicy,
        transport: httpx.BaseTransport | None = None,
        names: EndpointSettings = EndpointSettings(),
    ) -> None:
        self.provider = provider
        self.names = names
        _check_url(provider, base_url, names)
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._http = httpx.Client(
            base_url=base_url.rstrip("/") + "/", headers=headers, timeout=timeout_s, transport=transport
        )
        self._retry = retry

    @classmethod
    def for_settings(
        cls,
        provider: str,
        base_url: str,
        api_key: str | None,
        settings: Settings,
        transport: httpx.BaseTransport | None = None,
        *,
        names: EndpointSettings = EndpointSettings(),
    ) -> OpenAICompatClient:
        """A client with the configured timeout, retries and retry budget.

        No key for an endpoint on another machine is a configuration error now, before any request:
        the endpoint would answer 401 (or not at all), after the retries. A server on this machine
        (Ollama, vLLM, llama.cpp) often takes none."""
        _check_url(provider, base_url, names)  # before the key: a key is asked for a URL that is one
        if not api_key and not on_this_machine(base_url):
            raise ConfigurationError(
                f"{provider}: no API key for {base_url}: set {names.key} "
                "(in AWS, the matching *_SECRET_ARN); a server on this machine may go without"
            )
        return cls(
            provider,
            base_url,
            api_key,
            timeout_s=settings.http_timeout_s,
            retry=RetryPolicy.from_settings(settings),
            transport=transport,
            names=names,
        )

    def post_json(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The JSON object answered to ``payload``, after the retries the policy allows."""
        model = payload.get("model")
        what = f"{model}: " if isinstance(model, str) else ""
        path = path.lstrip("/")
        return self._retry.call(self.provider, lambda: self._post_once(path, payload, what))

    def _post_once(self, path: str, payload: dict[str, Any], what: str) -> dict[str, Any]:
        try:
            response = self._http.post(path, json=payload)
        except (httpx.UnsupportedProtocol, httpx.LocalProtocolError) as exc:  # our request: retrying won't help
            raise ProviderError(self.provider, f"{what}cannot call {self._http.base_url}{path}: {exc}") from exc
        except httpx.TimeoutException as exc:
            raise Retryable(f"{what}timed out calling {self._http.base_url}{path}") from exc
        except httpx.TransportError as exc:
            raise Retryable(f"{what}cannot reach {self._http.base_url}{path}: {exc}") from exc
        failure = f"{what}HTTP {response.status_code} from {path}"
        if response.status_code in PROVIDER_RETRY_STATUSES:
            retry_after = parse_retry_after(response.headers.get("retry-after"))
            raise Retryable(f"{failure}: {_error_text(response)}", retry_after)
        if response.status_code in _REFUSED_KEY:
            raise ConfigurationError(f"{self.provider}: {failure}: {_error_text(response)}: check {self.names.key}")
        if response.status_code == _UNKNOWN_MODEL:
            raise ConfigurationError(
                f"{self.provider}: {failure}: {_error_text(response)}: check {self.names.model} and {self.names.url}"
            )
        if response.status_code >= 400:
            raise ProviderError(self.provider, f"{failure}: {_error_text(response)}")
        try:
            body = response.json()
        except ValueError as exc:
            raise ProviderError(self.provider, f"{what}{path} returned a body that is not JSON") from exc
        if not isinstance(body, dict):
            raise ProviderError(self.provider, f"{what}{path} returned JSON that is not an object")
        return body

    def close(self) -> None:
        self._http.close()
