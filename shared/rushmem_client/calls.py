"""What the sync and async clients share: an operation's request as a call to send and an answer to
parse (the contract's row says how: :func:`call_for`), auth, the one retry policy, and error decoding.

A :class:`Call` is transport-free; :class:`rushmem_client.MemoryClient` sends it with
httpx.Client and :class:`rushmem_client.AsyncMemoryClient` with httpx.AsyncClient.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote, urlencode, urlsplit

import httpx
from pydantic import BaseModel, ValidationError

from rushmem_client.common import region_from_host
from rushmem_client.errors import error_from_answer
from rushmem_contract import retry
from rushmem_contract.errors import (
    AgentMemoryError,
    ConfigurationError,
    ServiceUnavailable,
)
from rushmem_contract.models import ImportLine
from rushmem_contract.operations import Operation
from rushmem_contract.retry import Retryable

Auth = Literal["iam", "jwt", "none"]
T = TypeVar("T")

EXECUTE_API_HOST = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")


def retry_policy(retries: int) -> dict[str, Any]:
    """The one retry policy (:mod:`rushmem_contract.retry`) as tenacity keyword arguments, for
    both clients: every operation is idempotent, so what may have failed before the server acted
    (unreachable, 429, 502-504) is retried, after the answer's Retry-After or a jittered backoff."""
    from tenacity import RetryCallState, retry_if_exception_type, stop_after_attempt

    def wait(state: RetryCallState) -> float:
        failure = state.outcome.exception() if state.outcome else None
        return retry.wait_for(
            failure, state.attempt_number, retry.CLIENT_BASE_DELAY_S, max_delay_s=retry.CLIENT_MAX_DELAY_S
        )

    return {
        "stop": stop_after_attempt(retries + 1),
        "wait": wait,
        "retry": retry_if_exception_type(Retryable),
        "reraise": True,
    }


def infer_auth(api_url: str, auth: Auth | None, token: object) -> Auth:
    """No ``auth`` given: a token means JWT, an execute-api host IAM (SigV4), anything else
    (``rushmem serve`` on localhost, a proxy) no auth."""
    if auth is not None:
        return auth
    if token is not None:
        return "jwt"
    return "iam" if EXECUTE_API_HOST.match((urlsplit(api_url).hostname or "").lower()) else "none"


def json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


@dataclasses.dataclass(frozen=True)
class Call(Generic[T]):
    """One request of the API and how to read its answer."""

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    body: Any = None
    params: Mapping[str, Any] | None = None

    def url(self, api_url: str) -> str:
        url = api_url + self.path
        if self.params:
            # Encoded once, here: the URL that is signed is byte for byte the URL that is sent.
            url += "?" + urlencode(sorted((k, str(v)) for k, v in self.params.items()), quote_via=quote)
        return url

    def content(self) -> bytes:
        if self.body is None:
            return b""
        return json.dumps(self.body, default=json_default, separators=(",", ":")).encode()


def parser(model: type[Any]) -> Callable[[httpx.Response], Any]:
    def parse(response: httpx.Response) -> Any:
        try:
            return model.model_validate_json(response.content)
        except ValidationError as exc:
            request = response.request
            raise AgentMemoryError(
                f"{request.method} {request.url.path}: not the answer this client expects: {exc}"
            ) from exc

    return parse


def _nothing(response: httpx.Response) -> None:
    return None


def call_for(op: Operation[Any, T], request: Any) -> Call[T]:
    """The call that sends ``request`` as ``op``'s row says (path, query string, JSON body)."""
    sent = op.http(request)
    parse = _nothing if op.response is None else parser(op.response)
    return Call(sent.method, sent.path, parse, body=sent.body, params=sent.query)  # type: ignore[arg-type]


# ---- answers ---------------------------------------------------------------------------------


def check_answer(response: httpx.Response, api_url: str) -> None:
    """Raise the typed error of a non-2xx answer (Retryable around what may be retried)."""
    if response.is_success:
        return
    error = error_of(response)
    if retry.is_retryable_status(response.status_code):
        after = retry.parse_retry_after(response.headers.get("retry-after"), max_delay_s=retry.CLIENT_MAX_DELAY_S)
        raise Retryable(str(error), after, error)
    raise error


def unreachable(api_url: str, exc: Exception) -> Retryable:
    error = ServiceUnavailable(f"cannot reach the memory API at {api_url}: {exc!r}")
    return Retryable(str(error), None, error)


def given_up(failed: Retryable) -> BaseException:
    """What a call raises when its retries ran out: the typed error of the last attempt."""
    return failed.error or ServiceUnavailable(str(failed))


def error_of(response: httpx.Response) -> AgentMemoryError:
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


# ---- auth ------------------------------------------------------------------------------------


class Signer:
    """Authorization headers for one client: SigV4 (IAM), a bearer token (JWT) or none."""

    def __init__(self, api_url: str, auth: Auth, token: str | Callable[[], str] | None, region: str | None) -> None:
        if auth not in ("iam", "jwt", "none"):
            raise ConfigurationError(f"auth must be 'iam', 'jwt' or 'none', not {auth!r}")
        if auth == "jwt" and token is None:
            raise ConfigurationError("auth='jwt' needs token= (a string or a function returning one)")
        self.auth = auth
        self.token = token
        self.region = region
        self.credentials: Any = None
        if auth == "iam":
            self.region = region or region_from_host(urlsplit(api_url).hostname or "", EXECUTE_API_HOST)
            self.credentials = _aws_credentials()
            if not self.region:
                self.region = _aws_region()
            if not self.region:
                raise ConfigurationError("auth='iam' needs region= (not in the API URL nor the AWS configuration)")

    def headers(self, method: str, url: str, content: bytes) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if content:
            headers["Content-Type"] = "application/json"
        if self.auth == "jwt":
            token = self.token() if callable(self.token) else self.token
            headers["Authorization"] = f"Bearer {token}"
        elif self.auth == "iam":
            from botocore.auth import SigV4Auth
            from botocore.awsrequest import AWSRequest

            request = AWSRequest(method=method, url=url, data=content, headers=dict(headers))
            # Refreshable credentials (roles, SSO) renew themselves here.
            SigV4Auth(self.credentials.get_frozen_credentials(), "execute-api", str(self.region)).add_auth(request)
            headers.update({k: v for k, v in request.headers.items() if k.lower() not in {h.lower() for h in headers}})
        return headers


def _aws_credentials() -> Any:
    try:
        import botocore.session
    except ImportError as exc:
        raise ConfigurationError("auth='iam' needs boto3: pip install 'rushmem-client[aws]'") from exc
    credentials = botocore.session.get_session().get_credentials()
    if credentials is None:
        raise ConfigurationError("auth='iam' needs AWS credentials (none found in the default credential chain)")
    return credentials


def _aws_region() -> str | None:
    import botocore.session

    region = botocore.session.get_session().get_config_variable("region")
    return str(region) if region else None


def pages(fetch: Callable[[str | None], tuple[list[T], str | None]]) -> Iterator[T]:
    """Every item of a paged listing, fetching page after page (``fetch(cursor)``)."""
    cursor: str | None = None
    while True:
        items, cursor = fetch(cursor)
        yield from items
        if cursor is None:
            return


__all__ = ["Auth", "Call", "ImportLine", "Signer"]
