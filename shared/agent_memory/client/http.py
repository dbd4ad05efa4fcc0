"""The memory API over HTTP: recall, add, list, history, forget (with its erasure receipt), usage;
SigV4, JWT or no auth; retries on what is safe to retry."""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import quote, urlencode, urlsplit

import httpx
from pydantic import BaseModel, ValidationError
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from agent_memory.client.common import region_from_host, without_none
from agent_memory.client.errors import error_from_answer
from agent_memory.errors import (
    AgentMemoryError,
    ConfigurationError,
    NotFound,
    ServiceUnavailable,
)
from agent_memory.http.schemas import ErasureReceipt, MemoryHistory, UsageReport
from agent_memory.models import (
    MAX_PAGE,
    ChatMessage,
    Memory,
    MemoryEvent,
    MemoryPage,
    NewMemory,
    RecallResult,
    StoredIds,
)

if TYPE_CHECKING:
    pass

Auth = Literal["iam", "jwt", "none"]
ModelT = TypeVar("ModelT", bound=BaseModel)

_EXECUTE_API_HOST = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")
_RETRY_STATUSES = {
    HTTPStatus.TOO_MANY_REQUESTS,
    HTTPStatus.BAD_GATEWAY,
    HTTPStatus.SERVICE_UNAVAILABLE,
    HTTPStatus.GATEWAY_TIMEOUT,
}


class _Retryable(Exception):
    """An answer or failure worth one more try (429, 502-504, connection errors, timeouts)."""

    def __init__(self, error: AgentMemoryError) -> None:
        super().__init__(str(error))
        self.error = error


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


class MemoryClient:
    """The agent-memory HTTP API (RecallFunction behind API Gateway, or ``agent-memory serve``).

    ``auth``: ``"iam"`` signs every request with SigV4 (service ``execute-api``) using the
    default AWS credential chain, for routes with the AWS_IAM authorizer; ``"jwt"`` sends
    ``Authorization: Bearer <token>`` (``token`` may be a callable returning a fresh one);
    ``"none"`` sends neither (``agent-memory serve``). Every operation is idempotent, so
    connection failures, timeouts, 429 and 502-504 are retried ``retries`` times with backoff.
    """

    def __init__(
        self,
        api_url: str,
        *,
        auth: Auth = "iam",
        token: str | Callable[[], str] | None = None,
        region: str | None = None,
        timeout: float = 10.0,
        retries: int = 2,
        http: httpx.Client | None = None,
    ) -> None:
        if auth not in ("iam", "jwt", "none"):
            raise ConfigurationError(f"auth must be 'iam', 'jwt' or 'none', not {auth!r}")
        if auth == "jwt" and token is None:
            raise ConfigurationError("auth='jwt' needs token= (a string or a function returning one)")
        split = urlsplit(api_url)
        if split.scheme not in ("http", "https") or not split.netloc:
            raise ConfigurationError(f"api_url must be an http(s) URL, not {api_url!r}")
        self.api_url = api_url.rstrip("/")
        self.auth = auth
        self._token = token
        self._region = region
        self._retries = max(0, retries)
        self._http = http or httpx.Client(timeout=timeout)
        self._owns_http = http is None
        self._credentials: Any = None
        if auth == "iam":
            self._region = region or region_from_host(split.hostname or "", _EXECUTE_API_HOST)
            self._credentials = _aws_credentials()
            if not self._region:
                self._region = _aws_region()
            if not self._region:
                raise ConfigurationError("auth='iam' needs region= (not in the API URL nor the AWS configuration)")

    # ---- the API ---------------------------------------------------------------------

    def recall(
        self,
        query: str | None = None,
        *,
        user_id: str | None = None,
        messages: Sequence[Mapping[str, Any] | ChatMessage] | None = None,
        project_id: str | None = None,
        limit: int | None = None,
        now: dt.datetime | None = None,
    ) -> RecallResult:
        """The memories relevant to ``query`` (or to the latest user message of ``messages``)
        and the ``[RUSH_MEMORY]`` block to prepend to the system prompt."""
        body = without_none(
            user_id=user_id, project_id=project_id, query=query, messages=messages, limit=limit, now=now
        )
        return _parse(self._call("POST", "/recall", body=body), RecallResult)

    def add(
        self,
        memories: Sequence[str | Mapping[str, Any] | NewMemory],
        *,
        user_id: str | None = None,
        project_id: str | None = None,
    ) -> StoredIds:
        """Store facts now (no LLM); ids come back in input order. A plain string is a ``fact``."""
        items = [{"content": m} if isinstance(m, str) else m for m in memories]
        body = without_none(user_id=user_id, project_id=project_id, memories=items)
        return _parse(self._call("POST", "/memories", body=body), StoredIds)

    def list_memories(
        self,
        *,
        user_id: str | None = None,
        project_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> MemoryPage:
        """One page of the user's memories, newest first (``next_cursor`` fetches the next)."""
        params = without_none(user_id=user_id, project_id=project_id, limit=limit, cursor=cursor)
        return _parse(self._call("GET", "/memories", params=params), MemoryPage)

    def iter_memories(self, *, user_id: str | None = None, project_id: str | None = None) -> Iterator[Memory]:
        """Every memory of the user, page after page."""
        cursor = None
        while True:
            page = self.list_memories(user_id=user_id, project_id=project_id, limit=MAX_PAGE, cursor=cursor)
            yield from page.memories
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def forget_memory(self, memory_id: uuid.UUID | str, *, user_id: str | None = None) -> bool:
        """Delete one memory; False when the user has no memory with that id."""
        try:
            self._call("DELETE", f"/memories/{quote(str(memory_id), safe='')}", params=without_none(user_id=user_id))
        except NotFound:
            return False
        return True

    def forget_user(self, user_id: str) -> ErasureReceipt:
        """Delete everything stored about the user (``user_id`` is required, also with a JWT); the
        erasure receipt (counts, time, requester; the user only as a keyed hash), kept by the service."""
        return _parse(self._call("DELETE", "/memories", params={"user_id": user_id}), ErasureReceipt)

    def erasure(self, erasure_id: uuid.UUID | str) -> ErasureReceipt:
        """A stored erasure receipt (NotFound if none; with a JWT, only the caller's own)."""
        return _parse(self._call("GET", f"/erasures/{quote(str(erasure_id), safe='')}"), ErasureReceipt)

    def usage(
        self, *, user_id: str | None = None, start: dt.date | None = None, end: dt.date | None = None
    ) -> UsageReport:
        """The user's usage per UTC day (recalls, conversations, writes, provider calls and tokens)
        from ``start`` to ``end`` (both included; default the last 30 days) and its estimated cost."""
        params = without_none(user_id=user_id, **{"from": start, "to": end})
        return _parse(self._call("GET", "/usage", params=params), UsageReport)

    def history(self, memory_id: uuid.UUID | str, *, user_id: str | None = None) -> list[MemoryEvent]:
        """Every recorded change of one of the user's memories, oldest first (NotFound if none)."""
        path = f"/memories/{quote(str(memory_id), safe='')}/history"
        return _parse(self._call("GET", path, params=without_none(user_id=user_id)), MemoryHistory).events

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- transport -------------------------------------------------------------------

    def _call(
        self, method: str, path: str, *, body: Any = None, params: Mapping[str, Any] | None = None
    ) -> httpx.Response:
        url = self.api_url + path
        if params:
            # Encoded once, here: the URL that is signed is byte for byte the URL that is sent.
            url += "?" + urlencode(sorted((k, str(v)) for k, v in params.items()), quote_via=quote)
        content = b"" if body is None else json.dumps(body, default=_json_default, separators=(",", ":")).encode()
        retrying = Retrying(
            stop=stop_after_attempt(self._retries + 1),
            wait=wait_exponential(multiplier=0.2, max=2.0),
            retry=retry_if_exception_type(_Retryable),
            reraise=True,
        )
        try:
            return retrying(self._send, method, url, content)
        except _Retryable as failed:
            raise failed.error from failed.__cause__

    def _send(self, method: str, url: str, content: bytes) -> httpx.Response:
        headers = {"Accept": "application/json"}
        if content:
            headers["Content-Type"] = "application/json"
        headers.update(self._auth_headers(method, url, content, headers))
        try:
            response = self._http.request(method, url, content=content or None, headers=headers)
        except httpx.TransportError as exc:
            raise _Retryable(ServiceUnavailable(f"cannot reach the memory API at {self.api_url}: {exc!r}")) from exc
        if response.is_success:
            return response
        error = _error_of(response)
        if response.status_code in _RETRY_STATUSES:
            raise _Retryable(error)
        raise error

    def _auth_headers(self, method: str, url: str, content: bytes, headers: Mapping[str, str]) -> dict[str, str]:
        if self.auth == "jwt":
            token = self._token() if callable(self._token) else self._token
            return {"Authorization": f"Bearer {token}"}
        if self.auth == "iam":
            from botocore.auth import SigV4Auth
            from botocore.awsrequest import AWSRequest

            request = AWSRequest(method=method, url=url, data=content, headers=dict(headers))
            # Refreshable credentials (roles, SSO) renew themselves here.
            SigV4Auth(self._credentials.get_frozen_credentials(), "execute-api", str(self._region)).add_auth(request)
            return {k: v for k, v in request.headers.items() if k.lower() not in {h.lower() for h in headers}}
        return {}


def _parse(response: httpx.Response, model: type[ModelT]) -> ModelT:
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        request = response.request
        where = f"{request.method} {request.url.path}"
        raise AgentMemoryError(f"{where}: not the answer this client expects: {exc}") from exc


def _error_of(response: httpx.Response) -> AgentMemoryError:
    try:
        body = response.json()
    except ValueError:
        body = {"message": response.text[:200]} if response.text else None
    error = error_from_answer(response.status_code, body)
    request_id = (body or {}).get("request_id") if isinstance(body, dict) else None
    request_id = request_id or response.headers.get("apigw-requestid")
    error.add_note(
        f"HTTP {response.status_code} from {response.request.method} {response.request.url.path}"
        + (f"; request id {request_id}" if request_id else "")
    )
    return error


def _aws_credentials() -> Any:
    import botocore.session

    credentials = botocore.session.get_session().get_credentials()
    if credentials is None:
        raise ConfigurationError("auth='iam' needs AWS credentials (none found in the default credential chain)")
    return credentials


def _aws_region() -> str | None:
    import botocore.session

    region = botocore.session.get_session().get_config_variable("region")
    return str(region) if region else None
