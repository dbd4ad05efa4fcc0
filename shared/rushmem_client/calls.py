"""What the sync and async clients share: each operation as a request to build and an answer to
parse (one definition per operation), auth, the one retry policy, and error decoding.

A :class:`Call` is transport-free; :class:`rushmem_client.MemoryClient` sends it with
httpx.Client and :class:`rushmem_client.AsyncMemoryClient` with httpx.AsyncClient.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote, urlencode, urlsplit

import httpx
from pydantic import BaseModel, ValidationError

from rushmem_client.common import conversation_fields, region_from_host, without_none
from rushmem_client.errors import error_from_answer
from rushmem_contract import retry
from rushmem_contract.errors import (
    AgentMemoryError,
    ConfigurationError,
    InvalidInput,
    NotFound,
    ServiceUnavailable,
)
from rushmem_contract.instructions import ExtractionInstructions, InstructionsHistory, StoredInstructions
from rushmem_contract.models import (
    ChatMessage,
    Consistency,
    ConversationEnded,
    ExportPage,
    ImportLine,
    IngestOutcome,
    MemoryChanges,
    MemoryFilters,
    MemoryPage,
    MemoryRecord,
    NewMemory,
    PendingMemory,
    PendingPage,
    RecallResult,
    ReviewDecision,
    ReviewOutcome,
    StoredIds,
    UserCount,
    UserList,
    describe_errors,
)
from rushmem_contract.retry import Retryable
from rushmem_contract.schemas import ErasureReceipt, MemoryHistory, UsageReport, filter_query

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
    missing: T | None = None  # the result when the answer is 404 not_found (None: raise NotFound)

    def url(self, api_url: str) -> str:
        url = api_url + self.path
        if self.params:
            for key, value in self.params.items():
                _encodable(str(value), key)
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


def _true(response: httpx.Response) -> bool:
    return True


def _encodable(value: str, field: str) -> str:
    """``value`` if a URL can carry it; InvalidInput naming ``field`` for a lone surrogate (no
    UTF-8, so no request, can hold one), before anything is sent."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{field} contains a lone surrogate, which is not text", field=field) from None
    return value


def _id(memory_id: uuid.UUID | str, field: str = "memory_id") -> str:
    return quote(_encodable(str(memory_id), field), safe="")


M = TypeVar("M", bound=BaseModel)


def checked(model: type[M], data: Any, where: str | None = None) -> M:
    """``data`` as ``model``, or InvalidInput naming the first bad field (nothing is sent)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        loc = ".".join(str(p) for p in exc.errors()[0]["loc"])
        field = f"{where}.{loc}" if where and loc else where or loc or None
        raise InvalidInput(describe_errors(exc, where or "value"), field=field) from exc


def _filters(filters: MemoryFilters | Mapping[str, Any] | None) -> MemoryFilters | None:
    if filters is None or isinstance(filters, MemoryFilters):
        return filters
    return checked(MemoryFilters, filters, "filters")


def _filter_params(filters: MemoryFilters | Mapping[str, Any] | None) -> dict[str, str]:
    """GET /memories' filter parameters (the contract's encoding: lists comma-separated, objects JSON)."""
    f = _filters(filters)
    return {} if f is None else filter_query(f)


# ---- the operations: one builder each, used by both clients ------------------------------


def recall(  # noqa: PLR0913 -- RecallRequest's documented fields, for both clients
    query: str | None,
    *,
    user_id: str | None,
    messages: Sequence[Mapping[str, Any] | ChatMessage] | None,
    project_id: str | None,
    limit: int | None,
    now: dt.datetime | None,
    filters: MemoryFilters | Mapping[str, Any] | None,
    consistency: Consistency | None = None,
    include_inactive: bool = False,
    as_of: dt.datetime | None = None,
    explain: bool = False,
    explain_ids: Sequence[uuid.UUID | str] | None = None,
) -> Call[RecallResult]:
    body = without_none(
        user_id=user_id,
        project_id=project_id,
        query=query,
        messages=messages,
        limit=limit,
        now=now,
        filters=_filters(filters),
        consistency=consistency,
        include_inactive=True if include_inactive else None,
        as_of=as_of,
        explain=True if explain else None,
        explain_ids=[str(i) for i in explain_ids] if explain_ids else None,
    )
    return Call("POST", "/recall", parser(RecallResult), body=body)


def add(
    memories: Sequence[str | Mapping[str, Any] | NewMemory],
    *,
    user_id: str | None,
    project_id: str | None,
    supersedes: Sequence[uuid.UUID | str] = (),
    valid_from: dt.datetime | None = None,
) -> Call[StoredIds]:
    # Given for the whole call, they apply to every memory that does not set its own.
    given = without_none(supersedes=[str(i) for i in supersedes] or None, valid_from=valid_from)
    items: list[Any] = []
    for m in memories:
        if isinstance(m, str):
            item: Any = {"content": m}
        elif isinstance(m, NewMemory):
            item = m.model_dump(mode="json", exclude_unset=True) if given else m
        else:
            item = dict(m)
        if given:
            item = {**given, **item}
        items.append(item)
    body = without_none(user_id=user_id, project_id=project_id, memories=items)
    return Call("POST", "/memories", parser(StoredIds), body=body)


def list_memories(
    *,
    user_id: str | None,
    project_id: str | None,
    limit: int | None,
    cursor: str | None,
    include_inactive: bool,
    filters: MemoryFilters | Mapping[str, Any] | None,
    consistency: Consistency | None = None,
    as_of: dt.datetime | None = None,
) -> Call[MemoryPage]:
    params = without_none(
        user_id=user_id,
        project_id=project_id,
        limit=limit,
        cursor=cursor,
        include_inactive="true" if include_inactive else None,
        consistency=consistency,
        as_of=as_of.isoformat() if as_of is not None else None,
    )
    return Call("GET", "/memories", parser(MemoryPage), params={**params, **_filter_params(filters)})


def get_memory(
    memory_id: uuid.UUID | str, *, user_id: str | None, consistency: Consistency | None = None
) -> Call[MemoryRecord]:
    params = without_none(user_id=user_id, consistency=consistency)
    return Call("GET", f"/memories/{_id(memory_id)}", parser(MemoryRecord), params=params)


def update_memory(
    memory_id: uuid.UUID | str,
    changes: MemoryChanges | Mapping[str, Any] | None,
    fields: Mapping[str, Any],
    *,
    user_id: str | None,
) -> Call[MemoryRecord]:
    given = changes.model_dump(exclude_unset=True) if isinstance(changes, MemoryChanges) else dict(changes or {})
    changed = checked(MemoryChanges, {**given, **fields})
    body = changed.model_dump(mode="json", exclude_unset=True)
    path = f"/memories/{_id(memory_id)}"
    return Call("PATCH", path, parser(MemoryRecord), body=body, params=without_none(user_id=user_id))


def forget_memory(memory_id: uuid.UUID | str, *, user_id: str | None) -> Call[bool]:
    path = f"/memories/{_id(memory_id)}"
    return Call("DELETE", path, _true, params=without_none(user_id=user_id), missing=False)


def forget_user(user_id: str) -> Call[ErasureReceipt]:
    return Call("DELETE", "/memories", parser(ErasureReceipt), params={"user_id": user_id})


def erasure(erasure_id: uuid.UUID | str) -> Call[ErasureReceipt]:
    return Call("GET", f"/erasures/{_id(erasure_id, 'erasure_id')}", parser(ErasureReceipt))


def usage(*, user_id: str | None, start: dt.date | None, end: dt.date | None) -> Call[UsageReport]:
    return Call(
        "GET", "/usage", parser(UsageReport), params=without_none(user_id=user_id, **{"from": start, "to": end})
    )


def history_page(
    memory_id: uuid.UUID | str, *, user_id: str | None, cursor: str | None = None, limit: int | None = None
) -> Call[MemoryHistory]:
    path = f"/memories/{_id(memory_id)}/history"
    return Call("GET", path, parser(MemoryHistory), params=without_none(user_id=user_id, cursor=cursor, limit=limit))


def get_instructions(*, user_id: str | None, project_id: str | None) -> Call[StoredInstructions]:
    params = without_none(user_id=user_id, project_id=project_id)
    return Call("GET", "/instructions", parser(StoredInstructions), params=params)


def set_instructions(
    instructions: ExtractionInstructions | Mapping[str, Any], *, user_id: str | None, project_id: str | None
) -> Call[StoredInstructions]:
    given = (
        instructions.model_dump(exclude_unset=True)
        if isinstance(instructions, ExtractionInstructions)
        else instructions
    )
    wanted = checked(ExtractionInstructions, dict(given))
    body = {
        **without_none(user_id=user_id, project_id=project_id),
        **wanted.model_dump(mode="json", exclude_unset=True),
    }
    return Call("PUT", "/instructions", parser(StoredInstructions), body=body)


def instructions_history(*, user_id: str | None, project_id: str | None) -> Call[list[StoredInstructions]]:
    parse_versions = parser(InstructionsHistory)
    params = without_none(user_id=user_id, project_id=project_id)
    return Call("GET", "/instructions/history", lambda r: list(parse_versions(r).versions), params=params)


def pending(*, user_id: str | None, project_id: str | None, limit: int | None) -> Call[list[PendingMemory]]:
    parse = parser(PendingPage)
    params = without_none(user_id=user_id, project_id=project_id, limit=limit)
    return Call("GET", "/memories/pending", lambda r: list(parse(r).memories), params=params)


def review(pending_id: uuid.UUID | str, decision: ReviewDecision, *, user_id: str | None) -> Call[ReviewOutcome]:
    body = without_none(user_id=user_id, decision=decision)
    return Call("POST", f"/memories/{_id(pending_id)}/review", parser(ReviewOutcome), body=body)


def users(*, limit: int | None) -> Call[list[UserCount]]:
    parse = parser(UserList)
    return Call("GET", "/users", lambda r: list(parse(r).users), params=without_none(limit=limit))


def export_page(
    *,
    user_id: str | None,
    history: bool,
    cursor: str | None,
    limit: int | None,
    consistency: Consistency | None = None,
    as_of: dt.datetime | None = None,
) -> Call[ExportPage]:
    params = without_none(
        user_id=user_id,
        history="true" if history else None,
        cursor=cursor,
        limit=limit,
        consistency=consistency,
        as_of=as_of.isoformat() if as_of is not None else None,
    )
    return Call("GET", "/memories/export", parser(ExportPage), params=params)


def add_messages(
    messages: Sequence[Mapping[str, Any] | ChatMessage],
    *,
    user_id: str | None,
    project_id: str | None,
    conversation_id: str | None,
    memories: Sequence[str | Mapping[str, Any] | NewMemory],
    ended_at: dt.datetime | None,
) -> Call[IngestOutcome]:
    body = conversation_fields(
        user_id=user_id,
        project_id=project_id,
        conversation_id=conversation_id,
        ended_at=ended_at,
        messages=messages,
        memories=memories,
    )
    # The same checks as the SQS message (a user_id is needed only to validate here).
    checked(ConversationEnded, {**body, "user_id": user_id or "caller"})
    return Call("POST", "/conversations", parser(IngestOutcome), body=body)


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


def finish(call: Call[T], response: httpx.Response | NotFound) -> T:
    """The call's result from its answer, or its ``missing`` value for a 404 where it has one."""
    if isinstance(response, NotFound):
        if call.missing is None:
            raise response
        return call.missing
    return call.parse(response)


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
